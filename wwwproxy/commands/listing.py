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
  into :class:`PageInfo`.  The rows are flat columns (about 100 bytes a page).  At most
  :data:`MAX_LISTED` rows are kept in all (the hosts used least recently are dropped), and a
  listing no page asked for in :data:`LISTING_IDLE` seconds is let go.

Everything here is called from worker threads; one lock per cache serializes it.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from ..archive.cdxj import INDEX_NAME, JOURNAL_NAME, CDXJError, CDXJRecord
from ..archive.store import WARC_SUFFIX, Store
from ..http.policy import is_good, is_servable
from ..url import url_hash
from ..url.surt import host_surt
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
#: host-page rows kept in memory over all hosts (about 100 bytes each)
MAX_LISTED = 250_000
#: seconds after which a host listing no page asked for is let go
LISTING_IDLE = 600.0
PROTO_PATTERN = re.compile(r"[a-z][a-z0-9+.\-]*")
HOSTPORT_PATTERN = re.compile(r"[A-Za-z0-9+.\-_:\[\]]+")
_NOT_HOSTS = ("index", "outgoing", "tmp")
_INDEXED_TYPES = ("response", "revisit")
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
class PageInfo:
    """One archive key of a host: when it was last fetched, the capture that would be served
    (its status and type), and how many captures there are."""

    key: str
    time: datetime  # the newest capture's
    status: int | None  # the served capture's (None: none can be served)
    mime: str | None
    captures: int
    size: int | None  # bytes on disk of its cache file (all captures)
    payload: int | None = None  # the served capture's payload bytes (None: the index lacks it)
    newest_status: int | None = None  # the newest capture's, when the served one's differs

    @property
    def shown_size(self) -> int | None:
        """What the Size column shows and sorts by: the payload, else the size on disk."""
        return self.payload if self.payload is not None else self.size

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.key,
            "time": self.time.isoformat(),
            "status": self.status,
            "newest_status": self.newest_status,
            "mime": self.mime,
            "captures": self.captures,
            "size": self.size,
            "payload": self.payload,
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


def split_hostport(hostport: str) -> tuple[str, str | None]:
    """``example.com:8080`` -> (``example.com``, ``8080``); ``[::1]:8080`` -> (``[::1]``, ...)."""
    if hostport.startswith("["):
        end = hostport.find("]")
        host, rest = hostport[: end + 1], hostport[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, colon, port = hostport.rpartition(":")
    if colon and port.isdigit():
        return host, port
    return hostport, None


def _host_of(uri: str) -> tuple[str, str] | None:
    """(proto, host folder) of an archive key, as the store names its folders."""
    proto, sep, rest = uri.partition("://")
    if not sep:
        return None
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    return proto, authority[authority.rfind("@") + 1 :]


# ---------------------------------------------------------------------------------------------
# One host's pages


#: one capture as shown: (timestamp, status or None when the line has no integer one, type,
#: payload bytes or None when the line has no ``ple``; a revisit's are its original's)
_Capture = tuple[str, "int | None", "str | None", "int | None"]
_NO_SIZE = -1  # a line without its record length: the size comes from the file
_TS_WIDTH = 27  # the index's one timestamp form: 2026-11-22T05:04:30.123456Z
_INT64 = 1 << 63
_SAME = object()  # in _good / _servable: no entry means "the newest capture"


def _stored(value: object) -> int:
    """An optional non-negative integer as a column holds it (-1: none)."""
    return value if type(value) is int and 0 <= value < _INT64 else -1  # type: ignore[return-value]


class _Listing:
    """The pages of one host (one protocol): a row per archive key, summed up as its index
    lines arrive.

    The rows live in flat columns, not an object per key: about 100 bytes a page instead of
    400, so a 100,000-page host costs about 10 MB.  The keys (without the ``proto://`` all
    share) are one byte string, found through an open-addressing table of row numbers.  Only
    the newest capture of a key is held in the columns; the capture that would be served is
    kept apart only when it is another one (a newer 404 or 304 than the good copy: rare).
    """

    def __init__(self, root: Path, proto: str, hostport: str) -> None:
        host, port = split_hostport(hostport)
        self.root = root
        self.prefix = host_surt(host, port) + "/"
        self.scheme = f"{proto}://"
        self.used = time.monotonic()  # when a page last asked for it
        self._names = bytearray()  # the keys' UTF-8 after the scheme, one after another
        self._starts = array("Q", [0])  # row r's key is _names[_starts[r]:_starts[r + 1]]
        self._table = array("i", [-1]) * 8  # slot -> row (-1: free); a power of two long
        self._ts = bytearray()  # the newest capture's timestamp, _TS_WIDTH bytes a row
        self._status = array("h")  # its status, three digits (-1: none)
        self._mime = array("I")  # its type, as an index into _mimes
        self._cap_payload = array("q")  # its payload bytes (-1: not known)
        self._payload = array("q")  # the newest response record's payload bytes (-1)
        self._captures = array("I")
        self._size = array("q")  # the end of the key's last record: its file's size
        self._mimes: list[str | None] = [None]
        self._mime_ids: dict[str, int] = {}
        #: rows whose newest 2xx/3xx capture (good) or newest capture that is not a 304/206
        #: (servable) is not their newest capture; None: there is none
        self._good: dict[int, _Capture | None] = {}
        self._servable: dict[int, _Capture | None] = {}
        self._orders: dict[str, array[int]] = {}

    def __len__(self) -> int:
        return len(self._status)

    def wants(self, record: CDXJRecord) -> bool:
        """Whether a record belongs here (the prefix holds other protocols and types)."""
        return record.key.startswith(self.prefix) and record.record_type in _INDEXED_TYPES

    # -- rows --

    def _name(self, row: int) -> bytearray:
        return self._names[self._starts[row] : self._starts[row + 1]]

    def key(self, row: int) -> str:
        return self.scheme + self._name(row).decode("utf-8", "surrogatepass")

    def _find(self, name: bytes) -> tuple[int, int]:
        """(the row of ``name`` or -1, the table slot it is in or would go in)."""
        table = self._table
        mask = len(table) - 1
        slot = hash(name) & mask
        names, starts = self._names, self._starts
        while True:
            row = table[slot]
            if row < 0 or names[starts[row] : starts[row + 1]] == name:
                return row, slot
            slot = (slot + 1) & mask

    def _grow(self) -> None:
        """Twice the table (kept at most half full, so that probes stay short)."""
        table = self._table = array("i", [-1]) * (2 * len(self._table))
        mask = len(table) - 1
        for row in range(len(self)):
            slot = hash(bytes(self._name(row))) & mask
            while table[slot] >= 0:
                slot = (slot + 1) & mask
            table[slot] = row

    def _capture(self, row: int) -> _Capture:
        at = row * _TS_WIDTH
        status, payload = self._status[row], self._cap_payload[row]
        return (
            self._ts[at : at + _TS_WIDTH].decode("ascii"),
            None if status < 0 else status,
            self._mimes[self._mime[row]],
            None if payload < 0 else payload,
        )

    def _mime_id(self, mime: str | None) -> int:
        if mime is None:
            return 0
        found = self._mime_ids.get(mime)
        if found is None:
            found = self._mime_ids[mime] = len(self._mimes)
            self._mimes.append(mime)
        return found

    def _set_newest(self, row: int, capture: _Capture) -> None:
        ts, status, mime, payload = capture
        at = row * _TS_WIDTH
        self._ts[at : at + _TS_WIDTH] = ts.encode("ascii")
        self._status[row] = status if type(status) is int and 0 <= status < 1000 else -1
        self._mime[row] = self._mime_id(mime)
        self._cap_payload[row] = _stored(payload)

    def _new_row(self, name: bytes, slot: int) -> int:
        row = len(self)
        self._names += name
        self._starts.append(len(self._names))
        self._table[slot] = row
        self._ts += bytes(_TS_WIDTH)
        for column in (self._status, self._mime, self._cap_payload, self._payload):
            column.append(0)
        self._captures.append(0)
        self._size.append(0)
        if 2 * len(self) > len(self._table):
            self._grow()
        return row

    def _first(
        self, name: bytes, slot: int, record: CDXJRecord, capture: _Capture, end: int
    ) -> bool:
        """A key's first line (most lines are): its row straight from the capture, as
        :meth:`add` would make it; False (nothing done) for numbers the columns cannot hold."""
        ts, status, mime, payload = capture
        if (status is not None and not 0 <= status < 1000) or (
            payload is not None and not 0 <= payload < _INT64
        ):
            return False
        row = len(self)
        self._names += name
        self._starts.append(len(self._names))
        self._table[slot] = row
        self._ts += ts.encode("ascii")
        self._status.append(-1 if status is None else status)
        self._mime.append(self._mime_id(mime))
        self._cap_payload.append(-1 if payload is None else payload)
        self._payload.append(-1 if payload is None or record.record_type == "revisit" else payload)
        self._captures.append(1)
        if end == _NO_SIZE:
            end = self._file_size(self.key(row))
        self._size.append(_stored(end))
        code = 200 if status is None else status
        if not is_servable(code):
            self._servable[row] = self._good[row] = None
        elif not is_good(code):
            self._good[row] = None
        if 2 * len(self) > len(self._table):
            self._grow()
        if self._orders:
            self._orders.clear()
        return True

    def _chosen(
        self, row: int, kept: dict[int, _Capture | None], newest: _Capture
    ) -> _Capture | None:
        found = kept.get(row, _SAME)
        return newest if found is _SAME else found  # type: ignore[return-value]

    def _keep_chosen(
        self, row: int, kept: dict[int, _Capture | None], capture: _Capture | None, newest: _Capture
    ) -> None:
        if capture == newest:
            kept.pop(row, None)
        else:
            kept[row] = capture

    def add(self, record: CDXJRecord) -> None:
        """Count one index line in (as :func:`~wwwproxy.archive.store.served_record` would
        choose: the newest capture wins, and of equal times the later line)."""
        fields = record.fields
        uri = fields["uri"]
        ref = fields["ref"]
        ts = record.timestamp
        # the same host under another protocol shares the SURT key
        if (
            not uri.startswith(self.scheme)
            or not ref.startswith("warcfile:")
            or len(ts) != _TS_WIDTH
            or not ts.isascii()
        ):
            return
        try:
            end = int(ref[ref.rindex("#") + 1 :])
        except ValueError:
            return
        length = fields.get("rle")
        end = end + length if type(length) is int else _NO_SIZE
        status = fields.get("hsc", 200)
        mime = fields.get("mct")
        name = uri[len(self.scheme) :].encode("utf-8", "surrogatepass")
        row, slot = self._find(name)
        ple = fields.get("ple")
        if record.record_type == "revisit":  # the payload is the response's it repeats
            known = self._payload[row] if row >= 0 else -1
            payload = None if known < 0 else known
        else:
            payload = ple if type(ple) is int else None
        capture = (ts, status if type(status) is int else None, mime, payload)
        if row < 0 and self._first(name, slot, record, capture, end):
            return
        if row < 0:
            row = self._new_row(name, slot)
            newest: _Capture = capture
            good: _Capture | None = None
            servable: _Capture | None = None
        else:
            newest = self._capture(row)
            good = self._chosen(row, self._good, newest)
            servable = self._chosen(row, self._servable, newest)
            if ts > newest[0]:
                newest = capture
        if record.record_type != "revisit":
            self._payload[row] = _stored(payload)
        self._captures[row] += 1
        status = status if type(status) is int else 200
        if is_servable(status):
            if servable is None or ts >= servable[0]:
                servable = capture
            if is_good(status) and (good is None or ts >= good[0]):
                good = capture
        self._set_newest(row, newest)
        newest = self._capture(row)  # as the columns hold it (an absurd number is "none")
        self._keep_chosen(row, self._good, good, newest)
        self._keep_chosen(row, self._servable, servable, newest)
        size = self._size[row]
        if end == _NO_SIZE or size == _NO_SIZE:
            self._size[row] = _stored(self._file_size(uri))
        elif end > size:
            self._size[row] = _stored(end)
        if self._orders:
            self._orders.clear()

    def _file_size(self, uri: str) -> int:
        host = _host_of(uri)
        try:
            assert host is not None
            return os.stat(self.root / host[0] / host[1] / (url_hash(uri) + WARC_SUFFIX)).st_size
        except (AssertionError, OSError, ValueError):
            return _NO_SIZE

    # -- what the pages show --

    def _served(self, row: int, keep_good: bool) -> _Capture | None:
        newest = self._capture(row)
        servable = self._chosen(row, self._servable, newest)
        return (self._chosen(row, self._good, newest) or servable) if keep_good else servable

    def _shown_size(self, row: int, keep_good: bool) -> int:
        """The Size column's value (payload, else bytes on disk) as a sort key."""
        served = self._served(row, keep_good)
        payload = served[3] if served is not None else None
        return payload if payload is not None else max(0, self._size[row])

    def info(self, row: int, keep_good: bool) -> PageInfo:
        newest = self._capture(row)
        served = self._served(row, keep_good)
        newest_status = newest[1]
        size = self._size[row]
        return PageInfo(
            key=self.key(row),
            time=datetime.fromisoformat(newest[0]),
            status=served[1] if served is not None else None,
            mime=(served or newest)[2],
            captures=self._captures[row],
            size=size if size != _NO_SIZE else None,
            payload=served[3] if served is not None else None,
            newest_status=newest_status if served is None or served[1] != newest_status else None,
        )

    def order(self, sort: str, keep_good: bool = True) -> array[int]:
        """The rows in ``sort`` order, ascending (made once per change)."""
        name = f"{sort}/{keep_good}" if sort == "size" else sort
        rows = self._orders.get(name)
        if rows is None:
            # a stable sort of the name order: equal times or sizes stay in name order
            if sort == "time":
                ts = self._ts
                by = sorted(
                    self.order("name"), key=lambda r: ts[r * _TS_WIDTH : (r + 1) * _TS_WIDTH]
                )
            elif sort == "size":
                by = sorted(self.order("name"), key=lambda r: self._shown_size(r, keep_good))
            else:
                by = sorted(range(len(self)), key=self._name)
            rows = self._orders[name] = array("I", by)
        return rows


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
        self.listings: OrderedDict[tuple[str, str], _Listing] = OrderedDict()
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
                store.listeners.remove(self.listener)  # type: ignore[arg-type]

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
            marks = {host for host in map(_host_of, (r.uri for r in records)) if host}
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

    def listing(self, store: Store, proto: str, hostport: str) -> _Listing:
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
            listing = _Listing(self.root, proto, hostport)
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

    def _keep(self, host: tuple[str, str], listing: _Listing) -> None:
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
    store = root if isinstance(root, Store) else None
    path = Path(store.root if store is not None else root)
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
    if store is not None:
        view.attach(store)
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
    store = root if isinstance(root, Store) else None
    key = os.path.abspath(Path(store.root if store is not None else root))
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
