"""The cache facade: put, get, list, delete and purge exchanges by canonical URL and archive
key; listeners (:class:`StoreListener`: the full-text search index) hear of every put and delete.

Layout: ``<root>/<proto>/<host[:port]>/<hash>.warc.gz`` holds one archive
key's records, newest last; ``<root>/index/`` holds the CDXJ index.  Serving needs no global
index (URL -> file -> newest record), but uses it: the newest lines of a key say where the
served capture is, so a lookup and a capture read two or three records, not a file that grows
with every fetch; the file is read whole when the lines cannot stand for it.  The index adds
time order, prefix ranges and listings, and can always be rebuilt from the WARC files.

A CDXJ ``ref`` is ``warcfile:NAME#OFFSET`` where NAME is the file's own name without its folders,
as the CDXJ spec's Appendix C asks (``8XdxEfXQ8cgf+gTedREo+g.warc.gz``).  NAME is unique: it is
the hash of the whole archive key, host included.  It resolves back to its file with the line's
``uri`` (the key), whose scheme and host name the folders; the hash is checked against the key,
so a line can never point the store at a file that is not that key's.

The store's parts live beside it, and are imported from here as before: :mod:`.served` (the
entry a lookup returns, :class:`CachedEntry`, and :func:`served_record`), :mod:`.recorder`
(:class:`Recorder`, a body streamed in, and the gzip level an exchange gets), :mod:`.changes`
(the listeners, :class:`RecordedPayload`, :class:`Deleted` and :class:`Moved`),
:mod:`.index_lines` (the line a record gets; the index rebuilt and checked from the files) and
:mod:`.errors` (:class:`StoreError`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..fsutil import DEFAULT_SYNC, Durability, PendingFlush, durability
from ..http.policy import is_good, is_servable, vary_matches
from ..url import URL, InvalidURL, cache_name, canonicalize, surt, url_hash
from .catalog import Catalog
from .cdxj import CDXJError, CDXJRecord, Index, parse_ref
from .changes import Deleted, Moved, PayloadListener, RecordedPayload, StoreListener
from .errors import StoreError
from .index_lines import (
    INDEXED_TYPES,
    ScanTally,
    check_index,
    index_line,
    rebuild_index,
    scan,
)
from .invalidations import Invalidations
from .memory import OVERHEAD, MemoryCache, stamp
from .recorder import Recorder, compress_level_for

if TYPE_CHECKING:
    from .recordproc import RecordHelper
from .served import CachedEntry, NotPlaced, place_served, served_record
from .warc import (
    CachedResponse,
    FileEnd,
    HTTPRequest,
    HTTPResponse,
    StoredRecord,
    WARCFormatError,
    append_exchange,
    build_exchange,
    newest_response,
    read_record_at,
    response_at,
)

__all__ = [
    "WARC_SUFFIX",
    "CachedEntry",
    "Deleted",
    "Moved",
    "PayloadListener",
    "RecordedPayload",
    "Recorder",
    "Store",
    "StoreError",
    "StoreListener",
    "served_record",
]

log = logging.getLogger(__name__)

#: what a non-GET archive key holds (pywb's method marker): those stay out of memory
_NON_GET = "__wb_method="

WARC_SUFFIX = ".warc.gz"
_SEGMENT = re.compile(r"[A-Za-z0-9+.\-_:\[\]]+")


def _servable(record: StoredRecord) -> bool:
    """A 304 has no body of its own and a 206 only a part of one: both are recorded, but
    never replayed as the resource."""
    return is_servable(record.status or 200)


def _good(record: StoredRecord) -> bool:
    """A 2xx/3xx capture: what stands for the resource while one exists."""
    return is_good(record.status or 200)


LOCATED_BYTES = 4096 * OVERHEAD  # 4,096 entries kept without bodies


def _make_private(root: Path) -> None:
    """The cache holds a person's browsing: its folder is theirs alone (a folder that came
    with a checkout, or was made by hand, is often readable by all), when it is theirs."""
    try:
        st = root.stat()
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            root.chmod(st.st_mode & 0o700 | 0o700)
    except OSError as exc:  # not ours to change: the files in it are 0600 anyway
        log.debug("cache folder %s left as it is: %s", root, exc)


class Store:
    """The cache directory."""

    def __init__(
        self, root: str | os.PathLike[str], *, memory_bytes: int = 0, sync: str = DEFAULT_SYNC
    ) -> None:
        self.root = Path(root)
        #: the hot objects (``memory_cache_mb``): GET copies and their bodies, checked
        #: against their file on every hit
        self.memory = MemoryCache(memory_bytes)
        #: where the newest copies too large for memory (or all, with the memory cache off)
        #: are in their files, so a hit reads one record instead of scanning the file
        self.located = MemoryCache(LOCATED_BYTES, bodies=False)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        _make_private(self.root)
        self.index = Index(self.root / "index")
        #: the running summaries of hosts and pages the index pages show (:mod:`.catalog`)
        self.catalog = Catalog(self.root)
        #: how a recorded exchange becomes durable (the ``sync`` setting: :meth:`set_sync`)
        self.sync_mode = sync
        self.sync: Durability = durability(sync, self.root, always=self._flushed_always())
        self.tmp_dir = self.root / "tmp"
        self.tmp_dir.mkdir(exist_ok=True)  # once here, not per request on the event loop
        #: told about every put and delete (:class:`StoreListener`), in the changing thread
        self.listeners: list[StoreListener] = []
        #: archive key -> when it was last served (time.time()): noted in memory on every
        #: lookup that found a copy, written out now and then (:func:`.purge.flush_used`) so
        #: a purge knows which pages are used without a write per hit
        self.served: dict[str, float] = {}
        #: GET copies an unsafe request's answer made stale (RFC 9111 §4.4)
        self.invalidations = Invalidations()
        #: the process that records small exchanges for this one (:mod:`.recordproc`)
        self.record_helper: RecordHelper | None = None

    def _flushed_always(self) -> tuple[Path]:
        """What a background flush round flushes besides what the puts wrote: the catalog's
        log, whose pages must not fall behind the index lines on a power cut."""
        return (self.catalog.log_path,)

    def set_sync(self, mode: str) -> None:
        """Follow the ``sync`` setting (``write``, ``group`` or ``flush``; a reload may change
        it): what a recorded exchange waits for before its answer's last byte."""
        if mode != self.sync_mode:
            old = self.sync
            self.sync = durability(mode, self.root, always=self._flushed_always())
            self.sync_mode = mode
            flush = getattr(old, "flush", None)
            if flush is not None:  # what the background flusher had not flushed yet
                flush()

    # --- names -------------------------------------------------------------------------------

    def path_for(self, url: URL, key: str | None = None) -> Path:
        return self.root / (cache_name(url, key) + WARC_SUFFIX)

    @staticmethod
    def warcfile_name(path: Path) -> str:
        """The ``warcfile:`` NAME of a cache file: its file name (CDXJ Appendix C)."""
        return path.name

    def resolve_warcfile(self, name: str, key: str) -> Path:
        """The cache file that ``warcfile:`` NAME of the index line for ``key`` refers to;
        StoreError if it cannot be that key's file."""
        if name != url_hash(key) + WARC_SUFFIX:
            raise StoreError(f"warcfile name {name!r} is not the cache file of {key}")
        proto, sep, rest = key.partition("://")
        authority = rest.split("/", 1)[0].split("?", 1)[0]
        hostport = authority[authority.rfind("@") + 1 :]
        if not sep or not all(
            _SEGMENT.fullmatch(p) and p not in (".", "..") for p in (proto, hostport)
        ):
            raise StoreError(f"{key!r} is not an archive key of this cache")
        return self.root / proto / hostport / name

    def path_of(self, record: CDXJRecord) -> Path:
        """The cache file an index line refers to (StoreError if it is not ours)."""
        ref = record.warcfile
        if ref is None:
            raise StoreError(f"ref {record.ref!r} is not a warcfile: reference")
        return self.resolve_warcfile(ref[0], record.uri)

    # --- writing -----------------------------------------------------------------------------

    def recorder(
        self,
        url: URL,
        key: str,
        *,
        method: str,
        request_headers: Sequence[tuple[str, str]],
        request_body: bytes,
        date: datetime | None = None,
        target: str | None = None,
    ) -> Recorder:
        """A recorder of the response to this request, which puts the exchange when its
        body is complete (recorded at ``date``, else now).  ``target``: the request line's
        target as it was sent upstream (the browser's spelling; the canonical URL's path and
        query when None); the records' target URI is the canonical URL either way."""
        request = HTTPRequest(
            method,
            list(request_headers),
            request_body,
            target=url.path_args if target is None else target,
        )
        put = functools.partial(self.put, url, key, request, date=date or datetime.now(UTC))
        return Recorder(put, self.tmp_dir)

    def put(
        self,
        url: URL,
        key: str,
        request: HTTPRequest,
        response: HTTPResponse,
        *,
        date: datetime | None = None,
    ) -> list[CDXJRecord]:
        """Append one exchange (a revisit if the payload is the newest one's) and index it:
        in the recording helper when there is one and the body is small (:mod:`.recordproc`),
        else here (:meth:`put_here`)."""
        date = date or datetime.now(UTC)
        helper = self.record_helper
        if helper is not None:
            lines = helper.put(self, url, key, request, response, date)
            if lines is not None:  # (the helper's store told the shared indexes)
                self._tell_listeners(url, key, lines, None, shared=False)
                return lines
        return self.put_here(url, key, request, response, date=date)

    def _tell_listeners(
        self,
        url: URL,
        key: str,
        lines: list[CDXJRecord],
        payload: RecordedPayload | None,
        *,
        shared: bool = True,
    ) -> None:
        """Tell the listeners of a put (``shared`` False: only those that keep no index
        shared with other processes, for a put the recording helper made and told)."""
        for listener in self.listeners:
            if not shared and getattr(listener, "shared_index", False):
                continue
            try:
                with_payload = getattr(listener, "on_put_payload", None)
                if with_payload is not None:
                    with_payload(url, key, lines, payload)
                else:
                    listener.on_put(url, key, lines)
            except Exception:  # noqa: BLE001 (a derived index must never break recording)
                log.exception("store listener %r failed for %s", listener, key)

    def put_here(
        self,
        url: URL,
        key: str,
        request: HTTPRequest,
        response: HTTPResponse,
        *,
        date: datetime | None = None,
    ) -> list[CDXJRecord]:
        """:meth:`put` in this process."""
        path = self.path_for(url, key)
        newest, known_end = self._newest(path, key, prefer_good=False)
        records = build_exchange(
            target_uri=url.canonical,
            archive_key=key,
            request=request,
            response=response,
            date=date or datetime.now(UTC),
            previous=newest.previous() if newest is not None else None,
        )
        builds_seen = self.catalog.builds_seen()  # (before the lines go in)
        with PendingFlush() as pending:  # the records and their index line: one flush
            locations = append_exchange(
                path,
                records,
                compress_level=compress_level_for(response),
                known_end=known_end,
                pending=pending,
            )
            name = self.warcfile_name(path)
            lines = [
                self._index_line(key, rec.info, name, loc.offset, loc.length)
                for rec, loc in zip(records, locations, strict=True)
                if rec.info.rec_type in INDEXED_TYPES
            ]
            self.index.add(lines, pending)
            self.sync.sync(pending.items)
        self._tell_catalog(self.catalog.on_put, url, key, lines, builds_seen)
        recorded = records[-1]
        payload = RecordedPayload(recorded) if recorded.info.rec_type == "response" else None
        self._tell_listeners(url, key, lines, payload)
        return lines

    _index_line = staticmethod(index_line)

    #: the index line of a record at ``offset`` in the cache file ``name`` (a purge's rewrite)
    index_line = _index_line

    # --- reading -----------------------------------------------------------------------------

    def get(
        self,
        url: URL,
        key: str | None = None,
        *,
        at: datetime | None = None,
        prefer_good: bool = True,
        keep: bool = True,
    ) -> CachedEntry | None:
        """The newest servable response for ``key`` (by default the URL's GET key), or the
        newest recorded no later than ``at``.  With ``prefer_good`` the newest 2xx/3xx
        capture wins over newer error answers (keep-the-good-copy); without, or when there is
        no good one, the newest servable capture of any status.  With ``keep`` False a copy
        not in memory is not put there: reading pages for the search index or its result
        list must not push out the copies browsers are being served."""
        key = url.file if key is None else key
        path = self.path_for(url, key)
        hot = at is None and _NON_GET not in key
        if hot:
            entry = self.memory.get(key, prefer_good) or self.located.get(key, prefer_good)
            if entry is not None:
                return entry
            before = stamp(path)
        cached, _ = self._newest(path, key, prefer_good=prefer_good, at=at)
        if cached is None:
            return None
        entry = CachedEntry.from_cached(key, cached)
        if hot and keep and before is not None:
            if self.memory.keeps(entry.payload_length):
                try:
                    entry = entry.for_memory(entry.read_body())
                except FileNotFoundError:  # removed meanwhile (a purge, a delete)
                    return None
                self.memory.put(key, prefer_good, entry, path, before)
            else:
                entry = entry.for_location()
                self.located.put(key, prefer_good, entry, path, before)
        return entry

    def _newest(
        self, path: Path, key: str, *, prefer_good: bool, at: datetime | None = None
    ) -> tuple[CachedResponse | None, FileEnd | None]:
        """The capture :meth:`get` serves from ``path`` (None: none can be served) and, when
        the index stood for the file, where its complete members end: through the index
        (:meth:`_indexed`) when it can, else by reading the whole file (damage it meets is
        logged)."""
        found = self._indexed(path, key, prefer_good=prefer_good) if at is None else None
        if found is not None:
            return found
        problems: list[WARCFormatError] = []
        cached = None
        for accept in (_good, _servable) if prefer_good else (_servable,):
            cached = newest_response(
                path, archive_key=key, accept=accept, at_or_before=at, problems=problems
            )
            if cached is not None:
                break
        for problem in problems:
            log.warning("%s", problem)
        return cached, None

    def _indexed(
        self, path: Path, key: str, *, prefer_good: bool
    ) -> tuple[CachedResponse | None, FileEnd] | None:
        """The capture :meth:`get` serves from ``path`` (None: none can be served), found
        through the index and read alone, and where the file's complete members end (for the
        next append); None when the index cannot stand for the file (:func:`.served.place_served`)
        or what it points at is not what it says: then the whole file is read.

        A page fetched again and again holds a capture per fetch; reading them all on every
        hit and every capture would make each cost more than the one before."""
        try:
            st = os.stat(path)
            place = place_served(
                self.index.exact(surt(key), record_types=INDEXED_TYPES),
                key=key,
                name=path.name,
                size=st.st_size,
                prefer_good=prefer_good,
            )
        except (OSError, CDXJError, NotPlaced):
            return None
        end = (st.st_dev, st.st_ino, st.st_size)
        if place is None:
            return None, end
        try:
            cached = response_at(
                path,
                place.offset,
                archive_key=key,
                request_offset=place.request_offset,
                original_offset=place.original_offset,
            )
        except (OSError, WARCFormatError):
            return None
        return (cached, end) if cached is not None else None

    def absent(self, url: URL, key: str) -> bool:
        """Is there no copy of ``key`` at all (no cache file)?  One ``stat``, cheap enough for
        the event loop: a cold miss learns it without a lookup in a thread.  False when it
        cannot tell (:meth:`lookup` then says what is there)."""
        try:
            os.stat(self.path_for(url, key))
        except FileNotFoundError:
            return True
        except OSError:  # a name no file system holds, a folder we may not read ...
            return False
        return False

    def lookup_hot(
        self,
        url: URL,
        key: str,
        request_headers: Sequence[tuple[str, str]],
        *,
        prefer_good: bool = True,
    ) -> CachedEntry | None:
        """:meth:`lookup` of a GET from the memory cache alone (cheap enough for the event
        loop: one ``stat``); None when it is not there, and the caller asks :meth:`lookup`."""
        entry = self.memory.get(key, prefer_good)
        if entry is None:
            return None
        if entry.vary and not vary_matches(
            entry.headers, entry.request_headers, request_headers, names=entry.vary
        ):
            return None
        self.served[key] = time.time()
        return entry

    def lookup(
        self,
        url: URL,
        key: str,
        method: str,
        body: bytes,
        request_headers: Sequence[tuple[str, str]] | None = None,
        *,
        prefer_good: bool = True,
    ) -> CachedEntry | None:
        """What to serve for this request: for non-GET, only a capture whose recorded method
        and body equal the request's (two requests can share a key: the body is cut at 4096
        characters, and MD5 can collide); with ``request_headers``, only a capture whose
        ``Vary`` headers fit them."""
        entry = self.get(url, key, prefer_good=prefer_good)
        if entry is None:
            return None
        if request_headers is not None and not vary_matches(
            entry.headers, entry.request_headers, request_headers
        ):
            return None
        self.served[key] = time.time()
        if method in ("GET", "HEAD"):
            return entry
        if (entry.request_method or "").upper() != method.upper():
            return None
        return entry if entry.request_body() == body else None

    def get_at(self, record: CDXJRecord) -> StoredRecord:
        """The WARC record an index line points at."""
        name, offset = parse_ref(record.ref)
        return read_record_at(self.resolve_warcfile(name, record.uri), offset)

    def captures(self, key: str) -> list[CDXJRecord]:
        """Every indexed capture of an archive key, oldest first."""
        return self.index.exact(surt(key), record_types=INDEXED_TYPES)

    def list_prefix(self, surt_prefix: str) -> Iterator[CDXJRecord]:
        return self.index.prefix(surt_prefix, record_types=INDEXED_TYPES)

    def list_host(self, proto: str, hostport: str) -> Iterator[Path]:
        """The cache files of one host: listing a directory, no index needed."""
        directory = self.root / proto / hostport
        if not _SEGMENT.fullmatch(proto) or not _SEGMENT.fullmatch(hostport):
            return iter(())
        try:
            if not directory.is_dir():
                return iter(())
            return iter(sorted(directory.glob("*" + WARC_SUFFIX)))
        except OSError:  # a name no file system holds (too long): no such host here
            return iter(())

    # --- deleting ----------------------------------------------------------------------------

    def delete(self, url: URL, key: str | None = None) -> bool:
        """Remove a key's cache file and its index lines (by default the URL's GET key), and
        tell the listeners; False if nothing was stored."""
        key = url.file if key is None else key
        path = self.path_for(url, key)
        existed = path.exists()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        name = self.warcfile_name(path)
        skey = surt(key)

        def keep(record: CDXJRecord) -> bool:
            if record.key != skey:
                return True
            ref = record.warcfile
            return ref is None or ref[0] != name

        if existed or any(True for _ in self.index.captures(skey)):
            self.index.compact(keep=keep)
        # even when nothing was stored: a derived index may still name the key
        self._deleted([key], [name])
        return existed

    def delete_files(self, paths: Iterable[Path]) -> Deleted:
        """Remove cache files and their index lines (one compaction for them all), and tell
        the listeners."""
        names: list[str] = []
        for path in paths:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            names.append(self.warcfile_name(path))
        if not names:
            return Deleted()
        gone = set(names)
        keys: set[str] = set()

        def keep(record: CDXJRecord) -> bool:
            ref = record.warcfile
            if ref is None or ref[0] not in gone:
                return True
            keys.add(record.uri)
            return False

        self.index.compact(keep=keep)
        deleted = Deleted(tuple(names), tuple(sorted(keys)))
        self._deleted(list(deleted.keys), list(deleted.files))
        return deleted

    def delete_host(self, proto: str, hostport: str) -> Deleted:
        """Remove every page of one host, and its folder."""
        deleted = self.delete_files(list(self.list_host(proto, hostport)))
        self._remove_host_dir(proto, hostport)
        return deleted

    def purge(
        self, days: float | None, host: URL | None = None, *, now: float | None = None
    ) -> Deleted:
        """Remove the pages (cache files) of ``host`` (or of every host) last fetched more
        than ``days`` days ago (any time, if ``days`` is None), and the host folders that
        leaves empty.  The age is the cache file's modification time: the time of its newest
        capture."""
        if host is not None:
            paths = list(self.list_host(host.proto, host.hostport))
        else:
            paths = list(self.warc_files())
        if days is not None:
            cutoff = (time.time() if now is None else now) - days * 86400
            old = []
            for path in paths:
                try:
                    if path.stat().st_mtime < cutoff:
                        old.append(path)
                except FileNotFoundError:
                    continue
            paths = old
        deleted = self.delete_files(paths)
        for folder in {path.parent for path in paths}:  # the hosts it emptied go too
            self._remove_host_dir(folder.parent.name, folder.name)
        return deleted

    def apply_purge(self, gone: Iterable[str], moved: Sequence[Moved]) -> Deleted:
        """Bring the index and the listeners up to date with a purge (:mod:`.purge`): the
        cache files named ``gone`` (``warcfile:`` names) were removed, and the files in
        ``moved`` rewritten (their new lines are in the journal already).  One compaction."""
        names = set(gone)
        stale = {(m.name, offset, rid) for m in moved for offset, rid in m.stale}
        keys: set[str] = set()

        def keep(record: CDXJRecord) -> bool:
            ref = record.warcfile
            if ref is None:
                return True
            if ref[0] in names:
                keys.add(record.uri)
                return False
            return (ref[0], ref[1], record.fields.get("rid")) not in stale

        if names or stale:
            self.index.compact(keep=keep)
        deleted = Deleted(tuple(sorted(names)), tuple(sorted(keys)))
        if names:
            self._deleted(list(deleted.keys), list(deleted.files))
        for m in moved:  # its page is indexed again from the captures it kept
            self._deleted([m.key], [])
            try:
                url = canonicalize(m.lines[-1].uri) if m.lines else None
            except InvalidURL:
                url = None
            if url is None:
                continue
            self._tell_catalog(self.catalog.on_put, url, m.key, list(m.lines))
            for listener in self.listeners:
                try:
                    listener.on_put(url, m.key, list(m.lines))
                except Exception:  # noqa: BLE001 (the rewrite is done whatever a listener does)
                    log.exception("store listener %r failed for %s", listener, m.key)
        return deleted

    def remove_empty_host_dir(self, folder: Path) -> None:
        """Remove a host's folder (``<root>/<proto>/<host>``) if it is empty."""
        self._remove_host_dir(folder.parent.name, folder.name)

    def _remove_host_dir(self, proto: str, hostport: str) -> None:
        """Remove a host's folder if it is empty."""
        if _SEGMENT.fullmatch(proto) and _SEGMENT.fullmatch(hostport):
            with contextlib.suppress(OSError):  # not empty (a file being recorded), or gone
                (self.root / proto / hostport).rmdir()

    def _deleted(self, keys: list[str], files: list[str]) -> None:
        self._tell_catalog(self.catalog.on_delete, keys, files)
        for listener in self.listeners:
            try:
                listener.on_delete(keys, files)
            except Exception:  # noqa: BLE001 (the files are gone whatever a listener does)
                log.exception("store listener %r failed for a delete of %s", listener, files)

    @staticmethod
    def _tell_catalog(change: Callable[..., None], *args: object) -> None:
        """Bring the catalog up to date with a change (a failure is logged: the change is
        done, and ``index rebuild`` makes the catalog again)."""
        try:
            change(*args)
        except Exception:  # noqa: BLE001 (derived data must never break recording)
            log.exception("catalog not brought up to date (%s)", change.__name__)

    # --- the whole cache ---------------------------------------------------------------------

    def warc_files(self) -> Iterator[Path]:
        """Every cache file, in a stable order (only ``*.warc.gz``: quarantined tails and
        temporary files are not cache files)."""
        for proto_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            if proto_dir.name in ("index", "outgoing", "tmp") or proto_dir.name.startswith("."):
                continue
            for host_dir in sorted(p for p in proto_dir.iterdir() if p.is_dir()):
                yield from sorted(p for p in host_dir.glob("*" + WARC_SUFFIX) if p.is_file())

    def scan(self, problems: list[str], repaired: list[str] | None = None) -> Iterator[CDXJRecord]:
        """Index lines for every record in every cache file (:func:`.index_lines.scan`)."""
        return scan(self, problems, repaired)

    def rebuild_index(
        self,
        repaired: list[str] | None = None,
        *,
        workers: int | None = None,
        tally: ScanTally | None = None,
    ) -> tuple[int, list[str]]:
        """Rebuild the whole index from the WARC files, read by ``workers`` processes
        (:func:`.index_lines.rebuild_index`), and the catalog from it."""
        result = rebuild_index(self.index, self, repaired, workers=workers, tally=tally)
        self.catalog.rebuild(self.index.prefix("", record_types=INDEXED_TYPES))
        return result

    def open_catalog(self) -> Catalog:
        """The catalog, made from the index first if this cache has none yet (an older
        version's cache: once, in place) or its making was cut short."""
        self.catalog.ensure(
            lambda: self.index.prefix("", record_types=INDEXED_TYPES),
            announce=bool(self.index.files()),
        )
        return self.catalog

    def check_index(self) -> list[str]:
        """Every index problem (:func:`.index_lines.check_index`)."""
        return check_index(self.index, self)
