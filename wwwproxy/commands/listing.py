"""What ``/``, ``/index/`` and ``/index/<proto>/<host>/`` show, kept between requests.

Scanning 100,000 cache files or parsing a 20,000-page host's index lines on every request
takes seconds, so both are kept and brought up to date from what changed since:

- **Hosts** (``/`` and ``/index/``): per host folder its file count, bytes and newest file
  time, from the folder's files (``<proto>/<host>/*.warc.gz``).  Kept while the folder's
  mtime is unchanged (it changes when a page is created or deleted) and no capture was
  appended to one of its files since: every capture appends a line to the index journal, which
  is followed here (new lines only, from a held descriptor so a compaction that renames the
  journal loses none), and the store's listener reports this process's own captures at once.
- **One host's pages**: one entry per archive key (capture count, newest time, the capture that
  would be served, size on disk as the end of its last record), built from the host's prefix
  range of the index (index lines only: no WARC file is opened), then updated from the journal
  lines that follow.  A compaction that only merged those journals leaves them as they are
  (the new ``index.cdxj`` is the old one plus exactly those bytes); any other new index (a
  delete, a rebuild, two compactions unseen) drops them, to be built again when next asked
  for.  Sorted orders are made on first use, and a request turns only the entries it shows
  into :class:`PageInfo`.  The rows are flat columns (:mod:`.host_rows`, about 120 bytes a
  page).  At most :data:`MAX_LISTED` rows are kept in all (the hosts used least recently are
  dropped), and a listing no page asked for in :data:`LISTING_IDLE` seconds is let go.

Everything here is called from worker threads; one lock per cache serializes it.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from ..archive.cdxj import INDEX_NAME, JOURNAL_NAME, CDXJError, CDXJRecord
from ..archive.store import WARC_SUFFIX, Store
from .host_rows import HostRows, PageInfo, host_of, split_hostport
from .tail import JournalTail

if TYPE_CHECKING:
    from ..url import URL

__all__ = [
    "HOSTPORT_PATTERN",
    "LISTING_IDLE",
    "MAX_LISTED",
    "PROTO_PATTERN",
    "SORTS",
    "HostInfo",
    "HostWindow",
    "Follower",
    "PageInfo",
    "following",
    "host_pages",
    "host_window",
    "list_hosts",
    "release_idle",
    "split_hostport",
]

SORTS = ("name", "time", "size")
#: host-page rows kept in memory over all hosts (about 120 bytes each)
MAX_LISTED = 250_000
#: seconds after which a host listing no page asked for is let go
LISTING_IDLE = 600.0
PROTO_PATTERN = re.compile(r"[a-z][a-z0-9+.\-]*")
HOSTPORT_PATTERN = re.compile(r"[A-Za-z0-9+.\-_:\[\]]+")
_NOT_HOSTS = ("index", "outgoing", "tmp")
_SETTLED_NS = 1_000_000_000  # a folder mtime this old is trusted (coarse file timestamps)
#: a host folder of this many pages or more that keeps changing (pages being recorded) is
#: counted again at most once per _RECOUNT_EVERY times what its last count took: its numbers
#: may lag by a second or two, and `/` costs no full scan per request (by pages, not by time:
#: a loaded machine must not make a small folder's numbers lag)
_RECOUNT_PAGES = 5_000
_RECOUNT_EVERY = 20
_MAX_VIEWS = 8  # caches followed at once (a process has one; tests open many)

_Ident = tuple[int, int, int, int]


# ---------------------------------------------------------------------------------------------
# What the pages show


@dataclass(frozen=True)
class HostInfo:
    proto: str
    hostport: str
    pages: int
    size: int
    last: datetime | None

    @property
    def url(self) -> str:
        return f"{self.proto}://{self.hostport}/"

    @property
    def path(self) -> str:
        """Its ``/index/<proto>/<host>/`` page."""
        return f"/index/{self.proto}/{self.hostport}/"

    def as_json(self) -> dict[str, object]:
        return {
            "proto": self.proto,
            "host": self.hostport,
            "pages": self.pages,
            "size": self.size,
            "last": self.last.isoformat() if self.last else None,
            "index": self.path,
        }


@dataclass(frozen=True)
class HostWindow:
    """One page of a host's listing: ``pages`` are entries ``start`` to ``start + len - 1``
    (from 0) of ``total`` in the order asked for."""

    total: int  # archive keys in the index
    files: int  # cache files in the host's folder
    number: int  # the page shown (the last one when the one asked for is past the end)
    last: int  # the number of the last page
    start: int
    pages: list[PageInfo]


# ---------------------------------------------------------------------------------------------
# One cache


class _HostSummary(NamedTuple):
    folder: tuple[int, int, int]  # the folder's (dev, inode, mtime_ns) when it was counted
    settled: bool  # its mtime was old enough to be trusted
    pages: int
    size: int
    last: float
    counted: float = 0.0  # time.monotonic() when it was counted
    cost: float = 0.0  # seconds the count took


class _Changed:
    """The store listener: this process's captures mark their host at once."""

    def __init__(self, view: _CacheView) -> None:
        self._view = weakref.ref(view)

    def on_put(self, url: URL, key: str, lines: list[CDXJRecord]) -> None:
        view = self._view()
        if view is not None:
            with view.dirty_lock:
                view.dirty.add((url.proto, url.hostport))

    def on_delete(self, keys: list[str], files: list[str]) -> None:
        pass  # the folder's mtime changes


class _CacheView:
    """The kept summaries and listings of one cache directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index_path = root / "index" / INDEX_NAME
        self.lock = threading.RLock()
        self.tail = JournalTail(root / "index" / JOURNAL_NAME)
        self.summaries: dict[tuple[str, str], _HostSummary] = {}
        self.listings: OrderedDict[tuple[str, str], HostRows] = OrderedDict()
        self.dirty_lock = threading.Lock()
        self.dirty: set[tuple[str, str]] = set()
        self.listener = _Changed(self)
        self.stores: weakref.WeakSet[Store] = weakref.WeakSet()
        self.index: _Ident | None = None  # index.cdxj as the kept listings know it
        self.generation = 0  # counts the times the kept listings were dropped
        #: other kept state made from the index (:func:`following`), told what the listings are
        self.followers: dict[str, Follower] = {}

    def close(self) -> None:
        """Let go of the journal and the stores; a late user starts afresh."""
        self.tail.close()
        self.tail.started = False
        self.summaries.clear()
        self._drop_listings(None)
        self.followers.clear()
        for store in list(self.stores):
            with contextlib.suppress(ValueError):
                store.listeners.remove(self.listener)

    def attach(self, store: Store) -> None:
        if store not in self.stores:
            self.stores.add(store)
            store.listeners.append(self.listener)

    def index_ident(self) -> _Ident | None:
        try:
            st = os.stat(self.index_path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    # -- following changes ----------------------------------------------------------------

    def poll(self) -> list[CDXJRecord]:
        """Take in what changed since the last poll: the hosts of the journal lines written
        since are marked to be counted again and the lines added to the kept listings; a new
        ``index.cdxj`` that is not just the old one plus the journals left behind (a delete,
        a rebuild, or a change missed) drops the kept listings.  Returns the new records."""
        lines = self.tail.read()
        index = self.index_ident()
        if lines is None:  # lost track: everything is made again
            self.summaries.clear()
            self._drop_listings(index)
            return []
        if index != self.index:
            old = self.index
            if old is None or index is None or index[2] != old[2] + self.tail.sealed:
                self._drop_listings(index)
            self.index = index
            self.tail.sealed = 0
        records = []
        for raw in lines:
            with contextlib.suppress(CDXJError):
                records.append(CDXJRecord.parse_line(raw))
        if records:
            marks = {host for host in map(host_of, (r.uri for r in records)) if host}
            with self.dirty_lock:
                self.dirty |= marks
            for listing in self.listings.values():
                for record in records:
                    if listing.wants(record):
                        listing.add(record)
            for follower in self.followers.values():
                follower.add(records)
        self.trim()
        return records

    def _drop_listings(self, index: _Ident | None) -> None:
        self.listings.clear()
        self.index = index
        self.tail.sealed = 0
        self.generation += 1
        for follower in self.followers.values():
            follower.drop()

    # -- hosts ----------------------------------------------------------------------------

    def _summary(self, proto: str, hostport: str, folder: os.stat_result) -> _HostSummary:
        ident = (folder.st_dev, folder.st_ino, folder.st_mtime_ns)
        known = self.summaries.get((proto, hostport))
        with self.dirty_lock:
            dirty = (proto, hostport) in self.dirty
            self.dirty.discard((proto, hostport))  # before counting: a later mark stays
        if known is not None and known.folder == ident and known.settled and not dirty:
            return known
        started = time.monotonic()
        if (
            known is not None
            and known.pages >= _RECOUNT_PAGES
            and started - known.counted < _RECOUNT_EVERY * known.cost
        ):
            if dirty:
                with self.dirty_lock:
                    self.dirty.add((proto, hostport))  # still to be counted, a little later
            return known
        settled = time.time_ns() - folder.st_mtime_ns > _SETTLED_NS
        pages = size = 0
        last = 0.0
        try:
            entries = os.scandir(self.root / proto / hostport)
        except OSError:  # gone meanwhile, or a name no file system holds
            entries = None
        if entries is not None:
            with entries:
                for entry in entries:
                    if not entry.name.endswith(WARC_SUFFIX):
                        continue
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    pages += 1
                    size += st.st_size
                    last = max(last, st.st_mtime)
        done = time.monotonic()
        summary = _HostSummary(ident, settled, pages, size, last, done, done - started)
        self.summaries[(proto, hostport)] = summary
        return summary

    def hosts(self) -> list[HostInfo]:
        """Every host folder with cache files, sorted by protocol and host."""
        self.poll()
        seen: set[tuple[str, str]] = set()
        out = []
        try:
            protos = sorted(os.scandir(self.root), key=lambda e: e.name)
        except OSError:
            protos = []
        for proto in protos:
            if proto.name in _NOT_HOSTS or not PROTO_PATTERN.fullmatch(proto.name):
                continue
            try:
                if not proto.is_dir():
                    continue
                with os.scandir(proto.path) as it:
                    folders = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            for folder in folders:
                if not HOSTPORT_PATTERN.fullmatch(folder.name):
                    continue
                try:
                    st = folder.stat()
                except OSError:
                    continue
                if not folder.is_dir():
                    continue
                summary = self._summary(proto.name, folder.name, st)
                seen.add((proto.name, folder.name))
                if summary.pages:
                    when = datetime.fromtimestamp(summary.last, UTC) if summary.last else None
                    out.append(HostInfo(proto.name, folder.name, summary.pages, summary.size, when))
        for gone in set(self.summaries) - seen:
            del self.summaries[gone]
        return out

    def files(self, proto: str, hostport: str) -> int:
        """The cache files in one host's folder."""
        try:
            st = os.stat(self.root / proto / hostport)
        except OSError:
            return 0
        return self._summary(proto, hostport, st).pages

    # -- one host's pages -----------------------------------------------------------------

    def listing(self, store: Store, proto: str, hostport: str) -> HostRows:
        """The host's listing as the index is now (kept, or made and kept)."""
        self.poll()
        host = (proto, hostport)
        kept = self.listings.get(host)
        if kept is not None:
            self.listings.move_to_end(host)
            kept.used = time.monotonic()
            return kept
        for _ in range(3):
            index, generation = self.index, self.generation
            listing = HostRows(self.root, proto, hostport)
            for record in store.list_prefix(listing.prefix):
                listing.add(record)
            # lines of this host written meanwhile may be in it or not, and a compaction may
            # have replaced the index meanwhile: then read it again
            came = self.poll()
            if (index, generation) == (self.index, self.generation) and not any(
                listing.wants(r) for r in came
            ):
                self._keep(host, listing)
                return listing
        return listing  # too busy to be sure of it: shown, not kept

    def _keep(self, host: tuple[str, str], listing: HostRows) -> None:
        self.listings[host] = listing
        self.trim()

    def trim(self) -> None:
        """At most :data:`MAX_LISTED` rows kept in all, the hosts asked for least recently
        let go first (a host larger than that on its own is made for each request and not
        kept), and none that no page asked for in :data:`LISTING_IDLE` seconds."""
        idle = time.monotonic() - LISTING_IDLE
        total = sum(map(len, self.listings.values()))
        for host, kept in list(self.listings.items()):  # least recently asked for first
            if total <= MAX_LISTED and kept.used > idle:
                break
            del self.listings[host]
            total -= len(kept)


_views: OrderedDict[str, _CacheView] = OrderedDict()
_views_lock = threading.Lock()


def _view(root: Path | Store) -> _CacheView:
    """The kept state of a cache (made on first use; the least recently used are let go)."""
    path = root.root if isinstance(root, Store) else Path(root)
    key = os.path.abspath(path)
    with _views_lock:
        view = _views.get(key)
        if view is None:
            view = _views[key] = _CacheView(path)
            while len(_views) > _MAX_VIEWS:
                _, old = _views.popitem(last=False)
                with old.lock:
                    old.close()
        else:
            _views.move_to_end(key)
    if isinstance(root, Store):
        view.attach(root)
    return view


# ---------------------------------------------------------------------------------------------
# The API of the pages


class Follower(Protocol):
    """Kept state made from the index, brought up to date as the kept listings are."""

    def add(self, records: list[CDXJRecord]) -> None:
        """Index lines written since the last look (some may be known already)."""

    def drop(self) -> None:
        """The index was replaced by more than a merge (a delete, a rebuild): start again."""


_F = TypeVar("_F", bound=Follower)


@contextlib.contextmanager
def following(root: Path | Store, name: str, make: Callable[[], _F]) -> Iterator[_F]:
    """The cache's follower called ``name`` (made by ``make`` on first use), up to date with
    the index, used under the cache's lock (no other thread changes it meanwhile)."""
    view = _view(root)
    with view.lock:
        follower = view.followers.get(name)
        if follower is None:
            follower = view.followers[name] = make()
        view.poll()
        yield follower  # type: ignore[misc]


def release_idle(root: Path | Store) -> None:
    """Let go of the host listings of a cache that no page asked for lately (called now and
    then, so that memory returns to its base after the index pages were browsed)."""
    key = os.path.abspath(root.root if isinstance(root, Store) else Path(root))
    with _views_lock:
        view = _views.get(key)
    if view is not None:
        with view.lock:
            view.trim()


def list_hosts(root: Path | Store) -> list[HostInfo]:
    """Every host folder of the cache with its page count, bytes and last fetch (its newest
    file's mtime), sorted by protocol and host; only what changed is counted again."""
    view = _view(root)
    with view.lock:
        return view.hosts()


def host_window(
    store: Store,
    proto: str,
    hostport: str,
    *,
    sort: str = "name",
    descending: bool = False,
    number: int = 1,
    per: int = 100,
    keep_good: bool = True,
) -> HostWindow:
    """Page ``number`` (from 1; past the end: the last) of ``per`` entries of one host's
    pages in ``sort`` order."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {SORTS}, not {sort!r}")
    view = _view(store)
    with view.lock:
        listing = view.listing(store, proto, hostport)
        files = view.files(proto, hostport)
        rows = listing.order(sort, keep_good)
        total = len(rows)
        last = max(1, -(-total // per))
        number = min(max(1, number), last)
        start = (number - 1) * per
        stop = min(total, start + per)
        if descending:
            chosen: Iterable[int] = (rows[total - 1 - i] for i in range(start, stop))
        else:
            chosen = rows[start:stop]
        shown = [listing.info(row, keep_good) for row in chosen]
    return HostWindow(total, files, number, last, start, shown)


def host_pages(
    store: Store, proto: str, hostport: str, *, keep_good: bool = True
) -> list[PageInfo]:
    """All pages of one host from the index, sorted by URL: for each key, the time of its
    newest capture and the status and type of the capture the proxy would serve (with
    ``keep_good``, the newest 2xx/3xx one; never a 304 or 206 recorded for a browser's own
    conditional or range request)."""
    view = _view(store)
    with view.lock:
        listing = view.listing(store, proto, hostport)
        return [listing.info(row, keep_good) for row in listing.order("name")]
