"""The catalog: running summaries of the cache kept on disk (``index/catalog.sqlite``), so that
``/``, ``/index/`` and a host's page list cost what they show, not what the cache holds.

It holds, per host (protocol and host folder), its pages, bytes and newest capture time; the
totals over all hosts; and per page (archive key) what :class:`.page_summary.PageSummary`
keeps (captures, newest capture, the capture served with and without keep-the-good-copy, the
size of its cache file), with indexes for each order a page list is shown in.

It is derived data, kept up to date by the store in every process that writes (from the
index lines of each put, and the keys of each delete), changes queued in memory and applied
in one transaction at most :data:`_FLUSH_AFTER` seconds later (a page of this process applies
them first), and made again from the index's lines by :meth:`Catalog.rebuild` (``index
rebuild``, and once for a cache that has none: :meth:`Catalog.ensure`).  While it is being
made, changes are queued in it (the ``pending`` table) and applied when the build ends; a line
counted by the build and again by its put counts once (:func:`.page_summary.fold`).

A crash loses nothing: a process with changes not yet applied is marked in it (``writers``),
and the next :meth:`Catalog.ensure` that finds a mark of a process no longer running makes the
catalog again; so does one that finds a build cut short (it is marked unfinished until done).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from ..url import URL, url_hash
from .cdxj import CDXJError, CDXJRecord
from .checkpoint import BackgroundCheckpoint, without_auto_checkpoint
from .index_lines import INDEXED_TYPES
from .page_summary import Capture, Line, PageSummary, host_of, line_of, summarize

__all__ = [
    "CATALOG_NAME",
    "HOST_SORTS",
    "PAGE_SORTS",
    "SCHEMA_VERSION",
    "Catalog",
    "HostRow",
    "PageRow",
    "Totals",
]

log = logging.getLogger(__name__)

CATALOG_NAME = "catalog.sqlite"
SCHEMA_VERSION = 1
_SUFFIX = ".warc.gz"  # the store's cache file suffix
_BATCH = 20_000  # pages written per statement batch while building
_PROGRESS_EVERY = 500_000  # index lines between progress lines while building

#: the orders of a host list and of a host's page list, each on an index
HOST_SORTS = {
    "name": ("proto", "hostport"),
    "pages": ("pages", "proto", "hostport"),
    "size": ("bytes", "proto", "hostport"),
    "time": ("last", "proto", "hostport"),
}
PAGE_SORTS = ("name", "time", "size")

_SCHEMA = (
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    """CREATE TABLE hosts (
        id INTEGER PRIMARY KEY,
        proto TEXT NOT NULL,
        hostport TEXT NOT NULL,
        pages INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        last TEXT NOT NULL  -- the newest capture's timestamp
    )""",
    "CREATE UNIQUE INDEX hosts_name ON hosts(proto, hostport)",
    "CREATE INDEX hosts_pages ON hosts(pages, proto, hostport)",
    "CREATE INDEX hosts_bytes ON hosts(bytes, proto, hostport)",
    "CREATE INDEX hosts_last ON hosts(last, proto, hostport)",
    """CREATE TABLE totals (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        hosts INTEGER NOT NULL,
        pages INTEGER NOT NULL,
        bytes INTEGER NOT NULL
    )""",
    """CREATE TABLE pages (
        id INTEGER PRIMARY KEY,
        host INTEGER NOT NULL,
        key TEXT NOT NULL,
        captures INTEGER NOT NULL,
        last_offset INTEGER NOT NULL,
        size INTEGER,              -- NULL: not known
        response_payload INTEGER,
        newest TEXT NOT NULL,      -- the newest capture's timestamp
        shown_good INTEGER NOT NULL,  -- the Size column with keep-the-good-copy, and without
        shown_any INTEGER NOT NULL,
        chosen TEXT NOT NULL       -- JSON: the newest, good and servable captures
    )""",
    "CREATE UNIQUE INDEX pages_key ON pages(host, key)",
    "CREATE INDEX pages_time ON pages(host, newest)",
    "CREATE INDEX pages_size_good ON pages(host, shown_good)",
    "CREATE INDEX pages_size_any ON pages(host, shown_any)",
    "CREATE TABLE pending (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, data TEXT NOT NULL)",
    "CREATE TABLE writers (pid INTEGER PRIMARY KEY)",  # processes with changes not applied
)

#: a change waits at most this many seconds, or until this many are queued, to be applied
_FLUSH_AFTER = 0.2
_FLUSH_AT = 500
_RETRY_AFTER = 5.0  # seconds before changes that could not be applied are tried again

_open: weakref.WeakSet[Catalog] = weakref.WeakSet()

#: builds finished in this process, by catalog path: a put tells which count it saw before
#: its lines went into the index, and is counted ``again`` if a build finished since (that
#: build may have read them)
_finished: dict[Path, int] = {}


@atexit.register
def _flush_all() -> None:
    """A process that ends cleanly leaves no change unapplied."""
    for catalog in list(_open):
        with contextlib.suppress(Exception):
            catalog.flush()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_PAGE_COLUMNS = "id, captures, last_offset, size, response_payload, chosen"


class Totals(NamedTuple):
    hosts: int
    pages: int
    bytes: int
    last: str | None  # the newest capture's timestamp


class HostRow(NamedTuple):
    proto: str
    hostport: str
    pages: int
    bytes: int
    last: str


class PageRow(NamedTuple):
    key: str
    summary: PageSummary


def _capture_json(capture: Capture | None) -> list[Any] | None:
    return None if capture is None else list(capture)


def _capture_of(data: list[Any] | None) -> Capture | None:
    return None if data is None else Capture(*data)


def _summary_of(row: tuple[Any, ...]) -> PageSummary:
    """A :class:`PageSummary` from the columns ``captures`` to ``chosen``."""
    captures, last_offset, size, response_payload, chosen = row
    newest, good, servable = json.loads(chosen)
    return PageSummary(
        captures=captures,
        last_offset=last_offset,
        size=size,
        response_payload=response_payload,
        newest=Capture(*newest),
        good=_capture_of(good),
        servable=_capture_of(servable),
    )


def _page_values(summary: PageSummary) -> tuple[Any, ...]:
    """The columns ``captures`` to ``chosen`` of a page."""
    return (
        summary.captures,
        summary.last_offset,
        summary.size,
        summary.response_payload,
        summary.newest.ts,
        summary.shown_size(True) or 0,
        summary.shown_size(False) or 0,
        json.dumps(
            [list(summary.newest), _capture_json(summary.good), _capture_json(summary.servable)],
            separators=(",", ":"),
        ),
    )


def _lines_by_uri(lines: Iterable[Line]) -> dict[str, list[Line]]:
    """Lines grouped by page."""
    grouped: dict[str, list[Line]] = {}
    for line in lines:
        grouped.setdefault(line.uri, []).append(line)
    return grouped


class Catalog:
    """The catalog of one cache: ``<root>/index/catalog.sqlite``.  Thread-safe: writes go
    through one connection, reads through another (WAL: they do not wait for each other)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "index" / CATALOG_NAME
        self._lock_path = root / "index" / "catalog.lock"
        self._write_lock = threading.Lock()
        self._read_lock = threading.RLock()
        self._reading = 0  # under the read lock: reads open in its thread (nested: snapshot)
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        #: changes not yet applied (:meth:`flush`), and whether this process is marked in
        #: ``writers`` as having some
        self._queue: list[tuple[str, list[Any], int | None]] = []
        self._queue_lock = threading.Lock()
        self._mark_lock = threading.Lock()  # taken before the write lock, never after
        self._marked = False
        #: the builds finished (by any process) when this process marked itself: one
        #: finished since may have read lines still queued here, so they count ``again``
        self._builds_at_mark: str | None = None
        self._retrying = False  # a retry of changes not applied is scheduled
        #: whether queued changes are applied by a timer (else by whoever queued them, who
        #: calls :meth:`flush`: the recording helper, after each batch)
        self.timed = True
        self._checkpoint = BackgroundCheckpoint(self.path, hold=self._write_lock)
        _open.add(self)

    def __repr__(self) -> str:
        return f"<catalog {self.path}>"

    # -- connections ----------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.path.exists()

    @property
    def log_path(self) -> Path:
        """The database's write-ahead log (WAL mode): where its newest commits are."""
        return Path(f"{self.path}-wal")

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # the owner's alone: made here, before SQLite makes it (its -wal and -shm files take
        # its mode).  Only when missing: closing a descriptor of a file this process holds
        # open would drop SQLite's POSIX locks on it (SQLite's own warning)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        self._open_schema(conn)
        return conn

    def _open_schema(self, conn: sqlite3.Connection) -> None:
        """Create the tables, or replace those of another version (derived data: the
        catalog is then made again from the index by :meth:`ensure`)."""
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            return
        with self._transaction(conn):
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version == SCHEMA_VERSION:
                return
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
            ).fetchall():
                conn.execute(f'DROP TABLE IF EXISTS "{name}"')
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO meta VALUES ('state', 'unbuilt')")
            conn.execute("INSERT INTO totals VALUES (0, 0, 0, 0)")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @staticmethod
    @contextlib.contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """The writing connection, in a transaction (other writers wait)."""
        with self._write_lock:
            if self._writer is None:
                self._writer = without_auto_checkpoint(self._connect())
            with self._transaction(self._writer):
                yield self._writer
        self._checkpoint.committed()  # (the log copied back in a thread: checkpoint.py)

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """The reading connection, in one snapshot, with this process's changes applied (those
        of other processes are at most :data:`_FLUSH_AFTER` seconds behind).  A read inside
        another of the same thread (:meth:`snapshot`) is part of that one's snapshot."""
        with self._read_lock:  # (re-entered by a read inside a snapshot)
            if self._reading:
                assert self._reader is not None
                self._reading += 1
                try:
                    yield self._reader
                finally:
                    self._reading -= 1
                return
            for catalog in list(_open):  # every store of this process on this cache
                # what is queued, and what another thread is applying (its changes left the
                # queue, and are not in yet): the page waits for them
                if catalog.path == self.path and (catalog._queue or catalog._mark_lock.locked()):
                    catalog._flush_logged()  # (a page still shows, a little behind, on a full disk)
            if self._reader is None:
                self._reader = self._connect()
            self._reader.execute("BEGIN")  # one snapshot for the statements of a page
            self._reading = 1
            try:
                yield self._reader
            finally:
                self._reading = 0
                self._reader.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """The reads inside (in this thread) see the catalog as it was at its start: a page's
        totals and its rows agree, whatever another thread or process applies meanwhile."""
        with self._read():
            yield

    def close(self) -> None:
        for lock, name in ((self._write_lock, "_writer"), (self._read_lock, "_reader")):
            with lock:
                conn = getattr(self, name)
                if conn is not None:
                    conn.close()
                    setattr(self, name, None)

    @staticmethod
    def _builds(conn: sqlite3.Connection) -> str:
        """How many builds have finished on this catalog (a count kept in ``meta``)."""
        row = conn.execute("SELECT value FROM meta WHERE name = 'builds'").fetchone()
        return row[0] if row else "0"

    @staticmethod
    def _state(conn: sqlite3.Connection) -> str:
        row = conn.execute("SELECT value FROM meta WHERE name = 'state'").fetchone()
        return row[0] if row else "unbuilt"

    def ready(self) -> bool:
        """Whether the catalog is made and in step (not being made, nor never made)."""
        if not self.exists():
            return False
        with self._read() as conn:
            return self._state(conn) == "ready"

    # -- following the store (StoreListener) ----------------------------------------------------

    def on_put(
        self, url: URL, key: str, lines: list[CDXJRecord], builds_seen: int | None = None
    ) -> None:
        """A capture was recorded (its index lines are in the index already);
        ``builds_seen``: :meth:`builds_seen` before they went in."""
        self.add(lines, builds_seen)

    def add(self, lines: list[CDXJRecord], builds_seen: int | None = None) -> None:
        """Index lines added to the index (of any pages: a bulk import's, a test's)."""
        self._enqueue("put", lines, builds_seen)

    def builds_seen(self) -> int:
        """The builds this process has finished on this catalog: read before a put's lines
        go into the index, it tells whether a build finished meanwhile may have read them."""
        return _finished.get(self.path, 0)

    def on_delete(self, keys: list[str], files: list[str]) -> None:
        """Pages were removed (their index lines with them)."""
        if keys:
            self._enqueue("delete", keys)

    def _enqueue(self, kind: str, items: list[Any], builds_seen: int | None = None) -> None:
        """Queue a change for the next :meth:`flush` (at most :data:`_FLUSH_AFTER` seconds
        or :data:`_FLUSH_AT` changes away): one transaction for many captures.  The first
        change of a batch marks this process as a writer with changes not yet applied, so
        that a crash before they are makes the catalog again (:meth:`ensure`)."""
        if not self.exists():  # never made: the build reads these lines from the index
            return
        with self._mark_lock:
            self._mark()
            with self._queue_lock:
                self._queue.append((kind, items, builds_seen))
                full = len(self._queue) >= _FLUSH_AT
        if full:
            self._flush_logged()

    def changes_coming(self) -> None:
        """Mark this process as a writer with changes to come before making them (the
        recording helper, before a batch): a build another process finishes meanwhile is
        then seen, whenever it read the index (:meth:`_apply`)."""
        if self.exists():
            with self._mark_lock:
                self._mark()

    def _mark(self) -> None:
        """Under the mark lock: the mark, if this process has none (and the timer that
        applies what gets queued, if :attr:`timed`)."""
        if self._marked:
            return
        try:
            with self._write() as conn:
                conn.execute("INSERT OR REPLACE INTO writers VALUES (?)", (os.getpid(),))
                self._builds_at_mark = self._builds(conn)
        except (sqlite3.Error, OSError) as exc:  # (a full disk: applied when it can be)
            log.warning("%r: cannot mark changes to come: %s", self, exc)
        self._marked = True
        if self.timed:
            timer = threading.Timer(_FLUSH_AFTER, self._flush_logged)
            timer.daemon = True
            timer.start()

    def _flush_logged(self) -> None:
        """:meth:`flush`, from the timer or before a page reads: a failure (a full disk)
        keeps the changes queued and marked, says so, and tries again
        :data:`_RETRY_AFTER` seconds later (a crash meanwhile makes the catalog again)."""
        self._retrying = False
        try:
            self.flush()
        except (sqlite3.Error, OSError) as exc:
            log.warning(
                "%r: changes not applied yet (%s); trying again in %g s", self, exc, _RETRY_AFTER
            )
            with self._mark_lock:
                if self._retrying:
                    return
                self._retrying = True
            timer = threading.Timer(_RETRY_AFTER, self._flush_logged)
            timer.daemon = True
            timer.start()

    def flush(self) -> None:
        """Apply the queued changes, in one transaction (while the catalog is being made,
        they are queued in it instead, for the build to apply)."""
        with self._mark_lock:
            with self._queue_lock:
                items, self._queue = self._queue, []
            if not self._marked:
                return
            try:
                self._apply(items)
            except BaseException:
                with self._queue_lock:  # (kept, in order, for the next try)
                    self._queue[:0] = items
                raise
            self._marked = False

    def _apply(self, items: list[tuple[str, list[Any], int | None]]) -> None:
        """The queued changes in one transaction; this process's mark removed with them.
        Lines a build finished since may have read count ``again`` (once): a build of this
        process since the put, or of any process since the mark."""
        with self._write() as conn:
            ready = self._state(conn) == "ready"
            built_since_mark = self._builds(conn) != self._builds_at_mark
            finished_here = _finished.get(self.path, 0)
            run: list[Line] = []  # puts in a row with the same ``again``, counted in together
            run_again = False
            for kind, data, seen in items:
                if not ready:
                    if kind == "put":
                        data = [record.to_line() for record in data]
                    conn.execute(
                        "INSERT INTO pending (kind, data) VALUES (?, ?)",
                        (kind, json.dumps(data)),
                    )
                    continue
                again = built_since_mark or (seen is not None and seen != finished_here)
                if kind != "put" or again != run_again:
                    self._apply_lines(conn, run, again=run_again)
                    run, run_again = [], again
                if kind == "put":
                    run += [line for r in data if (line := line_of(r)) is not None]
                else:
                    self._apply_deletes(conn, data)
            self._apply_lines(conn, run, again=run_again)
            conn.execute("DELETE FROM writers WHERE pid = ?", (os.getpid(),))
            self._builds_at_mark = None

    def _lagging(self) -> bool:
        """Whether a process that died had changes not yet applied."""
        with self._read() as conn:
            pids = [pid for (pid,) in conn.execute("SELECT pid FROM writers").fetchall()]
        return any(not _alive(pid) for pid in pids)

    # -- changing it ----------------------------------------------------------------------------

    @staticmethod
    def _host(conn: sqlite3.Connection, proto: str, hostport: str) -> tuple[int, int, int, str]:
        """(id, pages, bytes, last) of a host, made if need be."""
        row = conn.execute(
            "SELECT id, pages, bytes, last FROM hosts WHERE proto = ? AND hostport = ?",
            (proto, hostport),
        ).fetchone()
        if row is not None:
            return row
        cur = conn.execute(
            "INSERT INTO hosts (proto, hostport, pages, bytes, last) VALUES (?, ?, 0, 0, '')",
            (proto, hostport),
        )
        conn.execute("UPDATE totals SET hosts = hosts + 1")
        assert cur.lastrowid is not None
        return cur.lastrowid, 0, 0, ""

    def _file_size(self, uri: str) -> int | None:
        """A cache file's size from the disk (for a line without its record's length)."""
        host = host_of(uri)
        if host is None:
            return None
        try:
            return os.stat(self.root / host[0] / host[1] / (url_hash(uri) + _SUFFIX)).st_size
        except (OSError, ValueError):
            return None

    def _apply_lines(
        self, conn: sqlite3.Connection, lines: Iterable[Line], *, again: bool = False
    ) -> None:
        """Count lines in: each page's row, then each host's and the totals once
        (``again``: lines a build may have counted, :func:`.page_summary.fold`)."""
        hosts: dict[tuple[str, str], list[Any]] = {}  # -> [id, pages, bytes, last]
        added = grown = 0
        for uri, group in _lines_by_uri(lines).items():
            host = host_of(uri)
            if host is None:
                continue
            kept = hosts.get(host)
            if kept is None:
                kept = hosts[host] = list(self._host(conn, *host))
            row = conn.execute(
                f"SELECT {_PAGE_COLUMNS} FROM pages WHERE host = ? AND key = ?",  # noqa: S608
                (kept[0], uri),
            ).fetchone()
            before = _summary_of(row[1:]) if row is not None else None
            summary = summarize(before, group, again=again)
            if summary is None or summary == before:
                continue
            if summary.size is None:
                summary = replace(summary, size=self._file_size(uri))
            values = _page_values(summary)
            if row is None:
                conn.execute(
                    "INSERT INTO pages (host, key, captures, last_offset, size, response_payload,"
                    " newest, shown_good, shown_any, chosen) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (kept[0], uri, *values),
                )
            else:
                conn.execute(
                    "UPDATE pages SET captures = ?, last_offset = ?, size = ?,"
                    " response_payload = ?, newest = ?, shown_good = ?, shown_any = ?,"
                    " chosen = ? WHERE id = ?",
                    (*values, row[0]),
                )
            size = (summary.size or 0) - ((before.size or 0) if before is not None else 0)
            new = 1 if before is None else 0
            kept[1] += new
            kept[2] += size
            kept[3] = max(kept[3], summary.newest.ts)
            added += new
            grown += size
        conn.executemany(
            "UPDATE hosts SET pages = ?, bytes = ?, last = ? WHERE id = ?",
            [(*kept[1:], kept[0]) for kept in hosts.values()],
        )
        if added or grown:
            conn.execute("UPDATE totals SET pages = pages + ?, bytes = bytes + ?", (added, grown))

    @staticmethod
    def _apply_deletes(conn: sqlite3.Connection, keys: Iterable[str]) -> None:
        for key in keys:
            host = host_of(key)
            if host is None:
                continue
            found = conn.execute(
                "SELECT id, pages, bytes FROM hosts WHERE proto = ? AND hostport = ?", host
            ).fetchone()
            if found is None:
                continue
            host_id, pages, size_sum = found
            row = conn.execute(
                "SELECT id, size FROM pages WHERE host = ? AND key = ?", (host_id, key)
            ).fetchone()
            if row is None:
                continue
            conn.execute("DELETE FROM pages WHERE id = ?", (row[0],))
            size = row[1] or 0
            conn.execute("UPDATE totals SET pages = pages - 1, bytes = bytes - ?", (size,))
            if pages <= 1:
                conn.execute("DELETE FROM hosts WHERE id = ?", (host_id,))
                conn.execute("UPDATE totals SET hosts = hosts - 1")
                continue
            (last,) = conn.execute(
                "SELECT max(newest) FROM pages WHERE host = ?", (host_id,)
            ).fetchone()
            conn.execute(
                "UPDATE hosts SET pages = ?, bytes = ?, last = ? WHERE id = ?",
                (pages - 1, size_sum - size, last or "", host_id),
            )

    # -- making it from the index ---------------------------------------------------------------

    def ensure(self, records: Callable[[], Iterable[CDXJRecord]], *, announce: bool) -> None:
        """Make the catalog from ``records()`` (the index's lines) unless it is made: once
        for a cache that has none (an older version's), or after a build was cut short
        (``announce``: say so, the index has lines).  Waits for a build another process or
        thread is making."""
        if self.ready() and not self._lagging():
            return
        with self._build_lock():
            if not self.ready() or self._lagging():
                if announce:
                    log.warning("catalog %s: made from the index (once)", self.path)
                self._build(records())

    def rebuild(self, records: Iterable[CDXJRecord]) -> int:
        """Make the catalog again from ``records`` (the index's lines, in index order);
        returns the pages it holds."""
        with self._build_lock():
            return self._build(records)

    @contextlib.contextmanager
    def _build_lock(self) -> Iterator[None]:
        """One build at a time over all processes (released by the system on a crash)."""
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _build(self, records: Iterable[CDXJRecord]) -> int:
        with self._write() as conn:  # from here on, changes queue in ``pending``
            for table in ("pages", "hosts", "pending"):
                conn.execute(f"DELETE FROM {table}")  # noqa: S608
            for (pid,) in conn.execute("SELECT pid FROM writers").fetchall():
                if not _alive(pid):  # what it had not applied is in the index
                    conn.execute("DELETE FROM writers WHERE pid = ?", (pid,))
            conn.execute("UPDATE totals SET hosts = 0, pages = 0, bytes = 0")
            conn.execute("UPDATE meta SET value = 'building' WHERE name = 'state'")
        hosts: dict[tuple[str, str], list[Any]] = {}  # -> [id, pages, bytes, last]
        batch: list[tuple[Any, ...]] = []
        count = 0
        group_key: str | None = None
        group: list[Line] = []

        def flush_group() -> None:
            nonlocal count
            for uri, lines in _lines_by_uri(group).items():
                host = host_of(uri)
                if host is None:
                    continue
                summary = summarize(None, lines)
                if summary is None:
                    continue
                if summary.size is None:
                    summary = replace(summary, size=self._file_size(uri))
                kept = hosts.get(host)
                if kept is None:
                    kept = hosts[host] = [len(hosts) + 1, 0, 0, ""]
                kept[1] += 1
                kept[2] += summary.size or 0
                kept[3] = max(kept[3], summary.newest.ts)
                batch.append((kept[0], uri, *_page_values(summary)))
                count += 1
            group.clear()

        def write_batch() -> None:
            with self._write() as conn:
                conn.executemany(
                    "INSERT INTO pages (host, key, captures, last_offset, size, response_payload,"
                    " newest, shown_good, shown_any, chosen) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    batch,
                )
            batch.clear()

        for lines_read, record in enumerate(records, 1):
            if lines_read % _PROGRESS_EVERY == 0:
                log.warning("catalog: %d index lines read, %d pages", lines_read, count)
            if record.key != group_key:  # a key's lines (http and https share it) are together
                flush_group()
                group_key = record.key
            try:
                line = line_of(record) if record.record_type in INDEXED_TYPES else None
            except CDXJError:
                line = None
            if line is not None:
                group.append(line)
            if len(batch) >= _BATCH:
                write_batch()
        flush_group()
        write_batch()
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO hosts (id, proto, hostport, pages, bytes, last) VALUES (?,?,?,?,?,?)",
                [(v[0], *host, *v[1:]) for host, v in hosts.items()],
            )
            conn.execute(
                "UPDATE totals SET hosts = ?, pages = ?, bytes = ?",
                (len(hosts), count, sum(v[2] for v in hosts.values())),
            )
            for kind, data in conn.execute(
                "SELECT kind, data FROM pending ORDER BY seq"
            ).fetchall():
                if kind == "put":
                    parsed = (CDXJRecord.parse_line(raw) for raw in json.loads(data))
                    lines = [x for r in parsed if (x := line_of(r)) is not None]
                    self._apply_lines(conn, lines, again=True)
                else:
                    self._apply_deletes(conn, json.loads(data))
            conn.execute("DELETE FROM pending")
            conn.execute("UPDATE meta SET value = 'ready' WHERE name = 'state'")
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('builds', ?)",
                (str(int(self._builds(conn)) + 1),),
            )
            # before the commit: a put applied once it is in sees the build
            _finished[self.path] = _finished.get(self.path, 0) + 1
        log.info("catalog %s: %d pages of %d hosts", self.path, count, len(hosts))
        return count

    # -- what the pages show --------------------------------------------------------------------

    def totals(self) -> Totals:
        """The figures of ``/``: one query."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT hosts, pages, bytes, (SELECT max(last) FROM hosts) FROM totals"
            ).fetchone()
        hosts, pages, size, last = row if row is not None else (0, 0, 0, None)
        return Totals(hosts, pages, size, last or None)

    def hosts(
        self, sort: str = "name", *, descending: bool = False, start: int = 0, count: int = 100
    ) -> list[HostRow]:
        """``count`` hosts from ``start`` in ``sort`` order (:data:`HOST_SORTS`)."""
        direction = " DESC" if descending else ""
        order = ", ".join(column + direction for column in HOST_SORTS[sort])
        with self._read() as conn:
            rows = conn.execute(
                "SELECT proto, hostport, pages, bytes, last FROM hosts "  # noqa: S608
                f"ORDER BY {order} LIMIT ? OFFSET ?",
                (count, start),
            ).fetchall()
        return [HostRow(*row) for row in rows]

    def host(self, proto: str, hostport: str) -> HostRow | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT proto, hostport, pages, bytes, last FROM hosts "
                "WHERE proto = ? AND hostport = ?",
                (proto, hostport),
            ).fetchone()
        return HostRow(*row) if row is not None else None

    def pages(
        self,
        proto: str,
        hostport: str,
        sort: str = "name",
        *,
        descending: bool = False,
        keep_good: bool = True,
        start: int = 0,
        count: int = 100,
    ) -> tuple[int, list[PageRow]]:
        """(the host's pages, ``count`` of them from ``start`` in ``sort`` order: by key,
        newest capture time or shown size, ties by key)."""
        if sort not in PAGE_SORTS:
            raise ValueError(f"sort must be one of {PAGE_SORTS}, not {sort!r}")
        column = {"name": None, "time": "newest"}.get(
            sort, "shown_good" if keep_good else "shown_any"
        )
        direction = " DESC" if descending else ""
        order = f"key{direction}" if column is None else f"{column}{direction}, key{direction}"
        with self._read() as conn:
            found = conn.execute(
                "SELECT id, pages FROM hosts WHERE proto = ? AND hostport = ?", (proto, hostport)
            ).fetchone()
            if found is None:
                return 0, []
            rows = conn.execute(
                "SELECT key, captures, last_offset, size, response_payload, chosen "  # noqa: S608
                f"FROM pages WHERE host = ? ORDER BY {order} LIMIT ? OFFSET ?",
                (found[0], count, start),
            ).fetchall()
        return found[1], [PageRow(row[0], _summary_of(row[1:])) for row in rows]
