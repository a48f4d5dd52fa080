"""The search database of one cache directory (``<cache>/search.sqlite3``): which pages there
are, and two contentless FTS5 tables over their text; the text itself stays in the WARC files.

* ``page_words`` (``detail=none``): every term of a page's title and text, no positions: what
  finds a page (all words must match).
* ``page_rank`` (``detail=full``): the title and the page's most frequent terms
  (:func:`~.text.rank_text`): what ranks it (BM25, titles count ten times).

A page is indexed from the payload the store hands over as it records it
(:meth:`_Follower.on_put_payload`; reading each page back from its WARC file cost as much as
indexing it), or, when it is too large to wait in memory, read back from its capture.
Snippets are made when a result list is shown, by reading its twenty or so pages again from the
archive.  A contentless table forgets a page's terms only when told the very text they came from
(the FTS5 'delete' command; SQLite 3.40 has no ``contentless_delete``): when a page gets new text,
the old text is read again from its capture in the archive and checked against the digest kept
for it.  What cannot be read again (the cache file was deleted) stays in the index as garbage
that no search shows (every hit is joined to a live ``pages`` row); when garbage outgrows a
quarter of the live pages, :meth:`SearchIndex.compact` builds fresh tables from the archive and
swaps them in, off the request path in the indexing thread.  The tables themselves, and how
a database of another version is replaced, are in :mod:`.schema`.
"""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ...http.content import decode_content
from ...http.policy import is_good
from ..cdxj import CDXJError, CDXJRecord
from ..store import StoreError
from ..warc import WARCFormatError, WARCWriteError, open_payload, read_record_at
from .schema import FTS, Text, create_fts, open_schema, write_fts
from .text import (
    CONTROL,
    MAX_PAYLOAD,
    MAX_TEXT,
    MAX_TITLE,
    Query,
    clean,
    decode_text,
    extract_text,
    find_snippet,
    segments,
)

if TYPE_CHECKING:
    from ...url import URL
    from ..store import RecordedPayload, Store

__all__ = ["SEARCH_DB", "SearchHit", "SearchIndex", "SearchResults"]

log = logging.getLogger(__name__)

SEARCH_DB = "search.sqlite3"
MAX_RESULTS = 1000  # matches gathered per query before paging
TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
SNIPPET_START = 16 * 1024  # characters of a page's source its opening text is taken from
COMPACT_MIN = 64  # garbage documents always tolerated
BATCH = 64  # pages indexed in one transaction (one FTS5 segment) when they come together
COLLECT = 0.25  # seconds a batch waits for more pages while they keep coming (not if asked)
MAX_PENDING = 10_000  # pages waiting to be indexed; past it, caught up from the CDXJ index
MERGE_IDLE = 1.0  # seconds without a page before a due merge (flush: at once)
IDLE_EXIT = 5.0  # seconds without work before the indexing thread ends
MERGE_MIN = 16  # pages indexed since the last full merge before another is worth it ...
MERGE_SHARE = 8  # ... or an eighth of the pages with text, whichever is more ...
MERGE_SMALL = 1000  # ... or any, up to this many pages with text (a merge takes milliseconds)
MERGE_STEP = 200  # FTS5 pages written per step of a full merge (a short transaction)
GIVEN_MAX = 1024 * 1024  # a recorded payload up to this size is handed over, not read back ...
GIVEN_BUDGET = 16 * 1024 * 1024  # ... while those waiting to be indexed hold less than this
_READ_ERRORS = (WARCFormatError, CDXJError, StoreError, OSError, ValueError, EOFError)


class _Capture(NamedTuple):
    """A job for the indexing thread: index one recorded capture (with its payload as the
    store recorded it, when it was handed over: :meth:`_Follower.on_put_payload`)."""

    store: Store
    line: CDXJRecord
    given: Given | None = None


class Given(NamedTuple):
    """A capture's payload (still Content-Encoded) and HTTP headers, as recorded."""

    payload: bytes
    headers: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SearchHit:
    key: str
    url: str
    title: str
    snippet: tuple[tuple[str, bool], ...]  # (text, matched) pieces; escape when rendering
    fetched: str | None
    mime: str | None

    @property
    def snippet_text(self) -> str:
        return "".join(text for text, _ in self.snippet)


@dataclass(frozen=True)
class SearchResults:
    query: str
    total: int  # matches found (at most MAX_RESULTS)
    hits: list[SearchHit]


class _Follower:
    """The store listener that keeps one search index up to date with one store."""

    def __init__(self, index: SearchIndex, store: Store) -> None:
        self.index = index
        self.store = store

    def on_put(self, url: URL, key: str, lines: list[CDXJRecord]) -> None:
        self.on_put_payload(url, key, lines, None)

    def on_put_payload(
        self, url: URL, key: str, lines: list[CDXJRecord], payload: RecordedPayload | None
    ) -> None:
        """Queue the capture, with its payload when the page's text is wanted and it is small
        enough to wait in memory: read back from the file it cost as much as the indexing."""
        for line in lines:
            if line.record_type not in ("response", "revisit"):
                continue
            given = None
            if (
                payload is not None
                and line.record_type == "response"
                and _wants_text(line)
                and payload.length <= GIVEN_MAX
                and self.index._reserve(payload.length)  # noqa: SLF001
            ):
                try:
                    given = Given(payload.read(), tuple(payload.http_headers))
                except (WARCWriteError, OSError) as exc:  # read back from the file instead
                    log.warning("search: %s: the recorded payload is not at hand: %s", key, exc)
                    self.index._release(payload.length)  # noqa: SLF001
            self.index._enqueue(_Capture(self.store, line, given))  # noqa: SLF001

    def on_delete(self, keys: list[str], files: list[str]) -> None:
        self.index.remove_pages(keys, files, store=self.store)

    def __repr__(self) -> str:
        return f"<search index {self.index.path} following {self.store.root}>"


class SearchIndex:
    """The search database of one cache directory.  Thread-safe: one connection under a lock
    for reads and writes, and one writer of the full-text tables at a time (indexing, rebuild,
    compaction); the database is in WAL mode, so a second process does not block readers."""

    def __init__(self, root: str | os.PathLike[str], *, path: str | os.PathLike[str] | None = None):
        self.root = Path(root)
        self.path = Path(path) if path is not None else self.root / SEARCH_DB
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()  # the connection
        self._write_lock = threading.RLock()  # the full-text tables' one writer
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._attached: list[Store] = []
        self._pending: queue.Queue[_Capture | Callable[[], object]] = queue.Queue()
        self._pending_lock = threading.Lock()
        self._given_bytes = 0  # payloads handed over and waiting in _pending (GIVEN_BUDGET)
        self._worker: threading.Thread | None = None
        self._compact_queued = False
        self._batching = 0  # under the write lock: pages are committed by the batch
        self._merging = 0  # the indexing thread may be merging (see _merge_if_due)
        self._merge_wanted = False  # pages came since the last merge (see _work)
        self._closed = False
        self._waiters = 0  # callers of _wait: the indexing thread does not dawdle
        self._merge_waiters = 0  # ... and those waiting for the merge too (flush)
        #: the store whose pages did not fit the queue: caught up from its index (_catch_up)
        self._behind: Store | None = None
        try:
            with self._lock:
                # before anything is written: a new file gives merged-away pages back
                self._conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                open_schema(self._conn, self.path)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise ValueError(f"{self.path}: not a usable search database: {exc}") from None

    def attach(self, store: Store) -> None:
        """Follow ``store`` from now on: index every exchange it records, drop every page it
        deletes or purges (a :class:`~wwwproxy.archive.store.StoreListener`).  A stale index
        (an old format dropped) is rebuilt from it in the indexing thread."""
        if any(s is store for s in self._attached):
            return
        self._attached.append(store)
        store.listeners.append(_Follower(self, store))
        if self._meta("stale"):
            self._enqueue(partial(self._rebuild, store))

    def _reserve(self, size: int) -> bool:
        """Room for a handed-over payload of ``size`` bytes in the queue?  (Taken if so;
        :meth:`_run` gives it back.)"""
        with self._pending_lock:
            if self._given_bytes + size > GIVEN_BUDGET:
                return False
            self._given_bytes += size
            return True

    def _release(self, size: int) -> None:
        with self._pending_lock:
            self._given_bytes -= size

    def _enqueue(self, job: _Capture | Callable[[], object]) -> None:
        """Index in a worker thread: parsing a large page must never hold up the response
        being recorded (the browser waits for the record before its last bytes).  Never
        blocks: past :data:`MAX_PENDING` waiting pages, a page is left to :meth:`_catch_up`,
        which finds it in the store's index once the thread is idle again."""
        with self._pending_lock:
            if isinstance(job, _Capture) and self._pending.qsize() >= MAX_PENDING:
                if self._behind is None:
                    log.warning("search index: behind by %d pages; catching up later", MAX_PENDING)
                self._behind = job.store
                if job.given is not None:
                    self._given_bytes -= len(job.given.payload)
            else:
                self._pending.put(job)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._work, name="wwwproxy-search-index", daemon=True
                )
                self._worker.start()

    def _work(self) -> None:
        """The indexing thread: pages in batches, then, once none came for a while (or
        someone flushes), the pages left behind by a full queue, then a merge if due.  A
        merge waits for a pause: during a crawl, merging after every batch merged the whole
        index again and again (a third of the indexing time on a 550-page site)."""
        while True:
            if self._merge_wanted or self._behind is not None:
                timeout = 0.0 if self._merge_waiters else MERGE_IDLE
            else:
                timeout = IDLE_EXIT
            try:
                job = self._pending.get(timeout=timeout)
            except queue.Empty:
                if self._behind is not None or self._merge_wanted:
                    self._idle_work()
                    continue
                with self._pending_lock:
                    if self._pending.empty() and self._behind is None:
                        self._worker = None
                        return
                continue
            jobs = self._collect(job)
            if any(isinstance(job, _Capture) for job in jobs):
                self._merge_wanted = True  # before the jobs are done: flush() sees no gap
            try:
                self._run(jobs)
            finally:
                for _ in jobs:
                    self._pending.task_done()

    def _collect(
        self, job: _Capture | Callable[[], object]
    ) -> list[_Capture | Callable[[], object]]:
        """A batch: the pages waiting, and those coming within :data:`COLLECT` seconds (up to
        :data:`BATCH`), unless someone waits for them; a job that is no page ends it.  One
        transaction (one FTS5 segment) for several pages costs less than one each."""
        jobs = [job]
        deadline = time.monotonic() + COLLECT
        while isinstance(jobs[-1], _Capture) and len(jobs) < BATCH:
            remaining = deadline - time.monotonic()
            try:
                if self._waiters or remaining <= 0:
                    jobs.append(self._pending.get_nowait())
                else:
                    jobs.append(self._pending.get(timeout=remaining))
            except queue.Empty:
                break
        return jobs

    def _idle_work(self) -> None:
        """No page came for a while: index what a full queue left behind, then merge."""
        if self._closed:  # pages recorded after close() were never indexed: nothing to merge
            self._behind, self._merge_wanted = None, False
            return
        self._merging += 1  # flush() sees no gap between the flags and the work
        try:
            behind, self._behind = self._behind, None
            if behind is not None:
                self._merge_wanted = True
                try:
                    self._catch_up(behind)
                except Exception:  # noqa: BLE001
                    log.exception("search index: not caught up")
            self._merge_wanted = False
            try:
                if not self._merge_if_due():
                    self._merge_wanted = True  # pages came first: merge after them
            except sqlite3.Error:
                log.exception("search index: not merged")
        finally:
            self._merging -= 1

    def _run(self, jobs: list[_Capture | Callable[[], object]]) -> None:
        """The pages recorded meanwhile in one transaction, then the job that ended the batch
        (a rebuild or compaction) if any; a failure is logged, never fatal."""
        captures = [job for job in jobs if isinstance(job, _Capture)]
        given = sum(len(c.given.payload) for c in captures if c.given is not None)
        try:
            if captures:
                self._index_batch(captures)
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                # a full disk: recording says so (one line a burst); this index is derived
                log.warning(
                    "search index: %d page(s) not indexed: %s (they are found again by a "
                    "rebuild on /search/)",
                    len(captures),
                    exc,
                )
            else:
                log.exception("search index: %d page(s) not indexed", len(captures))
        finally:
            if given:
                self._release(given)
        for job in jobs:
            if not isinstance(job, _Capture):
                try:
                    job()
                except Exception:  # noqa: BLE001
                    log.exception("search index: %s failed", job)

    def _index_batch(self, captures: list[_Capture]) -> None:
        """The pages in one transaction; if one fails, the batch is rolled back and each page
        indexed in a transaction of its own (the failing one logged, the others kept).  A full
        disk ends it (the caller says so once)."""
        try:
            with self._batch():
                for capture in captures:
                    self.index_capture(capture.store, capture.line, capture.given)
            return
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise
        except Exception:  # noqa: BLE001 (found again below, page by page)
            pass
        for capture in captures:
            try:
                self.index_capture(capture.store, capture.line, capture.given)
            except sqlite3.Error as exc:
                if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    raise
                log.exception("search index: %s not indexed", capture.line.uri)
            except Exception:  # noqa: BLE001
                log.exception("search index: %s not indexed", capture.line.uri)

    def _merge_if_due(self) -> bool:
        """Merge each full-text table into one b-tree when enough pages came since the last
        time (geometrically: each page is merged a few times in all; a small index whenever
        pages came), in short steps, and only while nothing waits to be indexed.  FTS5 keeps
        a b-tree (segment) per batch until its own merging catches up, each with its own copy
        of every term, and a merge under way holds its input and output: a small cache
        indexed page by page took up to twice the space of the same index merged.  False if
        pages came before it was done."""
        with self._write_lock:
            with self._lock:
                (live,) = self._conn.execute("SELECT count(doc) FROM pages").fetchone()
            unmerged = self._meta("unmerged")
            if not unmerged or (
                live > MERGE_SMALL and unmerged < max(MERGE_MIN, live // MERGE_SHARE)
            ):
                return True
            while True:
                with self._lock:
                    before = self._conn.total_changes
                    with self._conn:
                        for table in FTS:
                            self._conn.execute(
                                f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)",
                                (-MERGE_STEP,),
                            )
                    if self._conn.total_changes - before < 2 * len(FTS):
                        break  # no work left (FTS5 counts the command itself as a change)
                if not self._pending.empty():
                    return False  # pages first; the merge goes on after them
            with self._lock:
                with self._conn:
                    self._set_meta("unmerged", 0)
                # the merged-away pages (executescript: execute() frees one page per call)
                self._conn.executescript("PRAGMA incremental_vacuum")
        return True

    @contextmanager
    def _batch(self) -> Iterator[None]:
        """Pages written inside are committed together at the end: a commit per page makes
        FTS5 write, and later merge, a segment per page (twice the work).  All or none: an
        exception that leaves it rolls the whole batch back (a page has no savepoint of its
        own: FTS5 writes its pending terms out at each, a fifth of the indexing time), and
        :meth:`_index_batch` indexes its pages again one by one."""
        with self._write_lock:
            self._batching += 1
            try:
                yield
            except BaseException:
                self._batching -= 1
                if not self._batching:
                    with self._lock:
                        self._conn.rollback()
                raise
            self._batching -= 1
            if not self._batching:
                with self._lock:
                    try:
                        self._conn.commit()
                    except sqlite3.Error:
                        self._conn.rollback()
                        raise

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One page's writes: in a batch, part of it (all or none, see :meth:`_batch`), else
        a transaction of their own."""
        with self._lock:
            if not self._conn.in_transaction:
                self._conn.execute("BEGIN")
            if self._batching:
                yield
                return
            try:
                yield
            except BaseException:
                self._conn.rollback()
                raise
            self._conn.commit()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until pages recorded so far are indexed, and the index merged if that was due
        (bounded); False on time-out."""
        return self._wait(timeout, merged=True)

    def _wait(self, timeout: float, *, merged: bool = False) -> bool:
        deadline = time.monotonic() + timeout
        with self._pending_lock:
            self._waiters += 1
            self._merge_waiters += merged
        try:
            if (
                self._pending.unfinished_tasks
                or self._behind is not None
                or (merged and self._merge_wanted)
            ):
                self._enqueue(_wake)  # the thread may be collecting a batch, or idling
            while (
                self._pending.unfinished_tasks
                or self._behind is not None
                or (merged and (self._merging or self._merge_wanted))
            ):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
            return True
        finally:
            with self._pending_lock:
                self._waiters -= 1
                self._merge_waiters -= merged

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._closed = True
            self._conn.close()

    def _meta(self, name: str) -> int:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return row[0] if row else 0

    def _set_meta(self, name: str, value: int) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    def _metas(self, *names: str) -> dict[str, int]:
        """Several counters in one statement (a page's indexing reads three)."""
        marks = ", ".join("?" * len(names))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT name, value FROM meta WHERE name IN ({marks})", names
            ).fetchall()
        return {name: 0 for name in names} | dict(rows)

    def _set_metas(self, values: dict[str, int]) -> None:
        """Several counters in one statement."""
        for name, value in values.items():
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    # --- writing ---------------------------------------------------------------------------

    def add(
        self,
        key: str,
        url: str,
        *,
        title: str = "",
        text: str = "",
        mime: str | None = None,
        status: int | None = None,
        fetched: str | None = None,
        file: str | None = None,
    ) -> None:
        """Put (or replace) one page's row and text.  Text not read from the archive is not
        there to be read again: a rebuild or compaction drops it."""
        title, text = clean(title)[:MAX_TITLE], clean(text)[:MAX_TEXT]
        with self._write_lock:
            self._put(None, key, url, title, text, mime, status, fetched, file, None)

    def _put(
        self,
        store: Store | None,
        key: str,
        url: str,
        title: str,
        text: str,
        mime: str | None,
        status: int | None,
        fetched: str | None,
        file: str | None,
        pos: int | None,
    ) -> None:
        """Upsert a page's row; index its text unless it is the text already indexed; take the
        old text's terms out when it can be read again (else they are garbage).  Under the
        write lock: no other writer changes the full-text tables in between."""
        new = Text.of(title, text) if title or text else None
        new_digest = new.digest if new is not None else None
        with self._lock:
            row = self._conn.execute(
                "SELECT doc, digest, file, pos FROM pages WHERE key = ?", (key,)
            ).fetchone()
        old_doc, old_digest, old_file, old_pos = row if row else (None, None, None, None)
        unchanged = old_doc is not None and old_digest == new_digest
        old: Text | None = None
        if old_doc is not None and not unchanged and not self._meta("stale"):
            old = self._read_again(store, key, old_file, old_pos, old_digest)
        with self._writing():
            doc = old_doc
            if not unchanged:
                meta = self._metas("docs", "next_doc", "unmerged")
                docs = meta["docs"]
                if old_doc is not None and old is not None:
                    write_fts(self._conn, "delete", old_doc, old)
                    docs -= 1
                doc = None
                changed = {}
                if new is not None:
                    doc = meta["next_doc"]
                    write_fts(self._conn, "", doc, new)
                    docs += 1
                    changed = {"next_doc": doc + 1, "unmerged": meta["unmerged"] + 1}
                self._set_metas({**changed, "docs": docs})
            self._conn.execute(
                "INSERT INTO pages(key, url, file, pos, mime, status, fetched, title, doc, digest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                "url=excluded.url, file=excluded.file, pos=excluded.pos, mime=excluded.mime, "
                "status=excluded.status, fetched=excluded.fetched, title=excluded.title, "
                "doc=excluded.doc, digest=excluded.digest",
                (
                    key,
                    None if url == key else url,
                    file,
                    pos,
                    mime,
                    status,
                    fetched,
                    title,
                    doc,
                    new_digest,
                ),
            )

    def _read_again(
        self,
        store: Store | None,
        key: str,
        file: str | None,
        pos: int | None,
        expected: bytes | None,
    ) -> Text | None:
        """The text a page was indexed with, read again from its capture; None if it cannot be
        read or is not that text any more."""
        if store is None or file is None or pos is None or expected is None:
            return None
        try:
            title, text = self._read_text(store, key, file, pos)
        except _READ_ERRORS:
            return None
        old = Text.of(title, text)
        return old if old.digest == expected else None

    def _touch(self, key: str, fetched: str, status: int | None) -> bool:
        """A revisit: the payload (so the text) is unchanged; only the time moves on."""
        with self._writing():
            cur = self._conn.execute(
                "UPDATE pages SET fetched = ?, status = ? WHERE key = ?", (fetched, status, key)
            )
            return cur.rowcount > 0

    def _has_good(self, key: str) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT status FROM pages WHERE key = ?", (key,)).fetchone()
        return row is not None and isinstance(row[0], int) and is_good(row[0])

    def index_capture(self, store: Store, line: CDXJRecord, given: Given | None = None) -> bool:
        """Index the capture an index line points at (its payload ``given`` as recorded, else
        read from the file); False if it was not readable, or its cache file is gone (deleted
        while it waited to be indexed: it must not come back)."""
        key = line.uri
        status = line.fields.get("hsc")
        if status == 304:
            return False  # recorded, never served: the page's text is the previous capture's
        ref = line.warcfile
        try:
            if ref is None or not store.path_of(line).exists():
                return False
        except StoreError:
            return False
        with self._write_lock:
            if line.record_type == "revisit" and self._touch(key, line.timestamp, status):
                return True
            if isinstance(status, int) and not is_good(status) and self._has_good(key):
                return True  # an error answer never replaces the good page (keep-the-good-copy)
            file, pos = ref
            mime = line.fields.get("mct")
            title = text = ""
            if _wants_text(line):
                try:
                    if given is not None:
                        title, text = extract_text(*_document(given.payload, given.headers))
                    else:
                        title, text = self._read_text(store, key, file, pos)
                except _READ_ERRORS as exc:
                    log.warning("search: %s not indexed: %s", key, exc)
            self._put(store, key, key, title, text, mime, status, line.timestamp, file, pos)
        return True

    @staticmethod
    def _read_document(store: Store, key: str, file: str, pos: int) -> tuple[str, str]:
        """``(page source, mime type)`` of the capture at ``file``/``pos``: its payload
        decoded from its Content-Encoding and charset (the first :data:`MAX_PAYLOAD` bytes)."""
        record = read_record_at(store.resolve_warcfile(file, key), pos)
        if record.rec_type == "revisit":
            from ...url import canonicalize

            entry = store.get(canonicalize(key), key)
            if entry is None:
                return "", "text/plain"
            stream = entry.open_body()
            headers = entry.headers
        else:
            stream = open_payload(record)
            headers = record.http_headers
        with stream:
            raw = stream.read(MAX_PAYLOAD)
        return _document(raw, headers)

    @classmethod
    def _read_text(cls, store: Store, key: str, file: str, pos: int) -> tuple[str, str]:
        """``(title, visible text)`` of the capture at ``file``/``pos``."""
        document, mime = cls._read_document(store, key, file, pos)
        return extract_text(document, mime)

    def remove(self, key: str) -> bool:
        """Drop one archive key's page; False if it was not indexed."""
        return self.remove_pages([key], []) > 0

    def remove_files(self, names: Iterable[str]) -> int:
        """Drop the pages stored in these cache files (``warcfile:`` names)."""
        return self.remove_pages([], names)

    def remove_pages(
        self, keys: Iterable[str], files: Iterable[str], *, store: Store | None = None
    ) -> int:
        """Drop the pages of these archive keys and those stored in these cache files (what
        a store delete or purge removed); the number of pages dropped.  Their terms stay in
        the full-text tables (their text is gone with the files) until a compaction, which
        ``store`` (else the attached one) is used for."""
        self._wait(2.0)  # a page recorded a moment ago must not come back after this
        removed = 0
        with self._lock, self._conn:
            for query, values in (
                ("DELETE FROM pages WHERE key = ?", keys),
                ("DELETE FROM pages WHERE file = ?", files),
            ):
                for value in values:
                    removed += self._conn.execute(query, (value,)).rowcount
        if removed:
            self._compact_if_needed(store)
        return removed

    def prune(self, store: Store) -> int:
        """Drop rows whose cache file is gone (deleted by another process or by hand)."""
        self._wait(2.0)  # include pages recorded a moment ago
        with self._lock:
            rows = list(self._conn.execute("SELECT file, key FROM pages"))
        gone = []
        for name, key in rows:
            if name is None:
                continue
            try:
                if not store.resolve_warcfile(name, key).exists():
                    gone.append(name)
            except StoreError:  # a name that cannot be a cache file of ours
                gone.append(name)
        return self.remove_pages([], gone, store=store)

    def rebuild(self, store: Store) -> int:
        """Index the newest capture of every key in the cache's CDXJ index afresh."""
        self._wait(2.0)  # include pages recorded a moment ago
        return self._rebuild(store)

    @staticmethod
    def _newest(store: Store) -> dict[str, CDXJRecord]:
        """The newest index line of every key in the store (not 304s: never served)."""
        newest: dict[str, CDXJRecord] = {}
        for line in store.list_prefix(""):
            if line.fields.get("hsc") == 304:
                continue
            old = newest.get(line.uri)
            if old is None or line.timestamp >= old.timestamp:
                newest[line.uri] = line
        return newest

    def _catch_up(self, store: Store) -> int:
        """Index the captures newer than what the index has of their key: the pages a full
        queue left out (:meth:`_enqueue`).  The number indexed."""
        with self._write_lock:
            with self._lock:
                known = dict(self._conn.execute("SELECT key, fetched FROM pages"))
            count = 0
            lines = [
                line
                for key, line in self._newest(store).items()
                if known.get(key) is None or known[key] < line.timestamp
            ]
            for start in range(0, len(lines), BATCH):
                with self._batch():
                    for line in lines[start : start + BATCH]:
                        count += self.index_capture(store, line)
        if count:
            log.info("search index: caught up with %d page(s)", count)
        return count

    def _rebuild(self, store: Store) -> int:
        with self._write_lock:
            newest = self._newest(store)
            with self._lock, self._conn:
                self._conn.execute("DELETE FROM pages")
                for table in FTS:
                    self._conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
                self._set_meta("docs", 0)
            count = 0
            lines = list(newest.values())
            for start in range(0, len(lines), BATCH):
                with self._batch():
                    for line in lines[start : start + BATCH]:
                        if self.index_capture(store, line):
                            count += 1
            with self._lock, self._conn:
                self._set_meta("stale", 0)
                self._set_meta("unmerged", 0)
            self._tidy()
        return count

    def garbage(self) -> tuple[int, int]:
        """(documents in the full-text tables that no page has any more, pages with text)."""
        with self._lock:
            (live,) = self._conn.execute("SELECT count(doc) FROM pages").fetchone()
        return self._meta("docs") - live, live

    def _compact_if_needed(self, store: Store | None) -> None:
        store = store if store is not None else self._store()
        garbage, live = self.garbage()
        if store is None or garbage <= max(COMPACT_MIN, live // 4):
            return
        with self._pending_lock:
            if self._compact_queued:
                return
            self._compact_queued = True
        self._enqueue(partial(self.compact, store))

    def compact(self, store: Store) -> int:
        """Build the full-text tables afresh from the pages' captures in the archive and swap
        them in: the terms of removed pages go.  Searches go on meanwhile against the old
        tables.  The number of pages whose text was indexed."""
        with self._write_lock:
            with self._pending_lock:
                self._compact_queued = False
            with self._lock, self._conn:
                for table in FTS:
                    self._conn.execute(f"DROP TABLE IF EXISTS {table}_next")
                create_fts(self._conn, "_next")
                rows = self._conn.execute(
                    "SELECT id, key, file, pos, doc FROM pages WHERE doc IS NOT NULL"
                ).fetchall()
            copied = 0
            for start in range(0, len(rows), BATCH):
                with self._batch():
                    for row in rows[start : start + BATCH]:
                        copied += self._copy(store, *row)
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")  # searches see the old or the new
                try:
                    for table in FTS:
                        self._conn.execute(f"DROP TABLE {table}")
                        self._conn.execute(f"ALTER TABLE {table}_next RENAME TO {table}")
                    self._set_meta("docs", copied)
                    self._set_meta("unmerged", 0)
                    self._conn.commit()
                except BaseException:
                    self._conn.rollback()
                    raise
            self._tidy()
        return copied

    def _copy(self, store: Store, page_id: int, key: str, file: str, pos: int, doc: int) -> int:
        """Index one page's text, read again, into the tables a compaction builds: 1 if it
        was, 0 if the page is gone or has no text to read any more."""
        title = text = ""
        if file is not None and pos is not None:  # else never in the archive (add)
            try:
                title, text = self._read_text(store, key, file, pos)
            except _READ_ERRORS as exc:
                log.info("search: %s dropped from the index: %s", key, exc)
        new = Text.of(title, text) if title or text else None
        with self._writing():
            if (
                self._conn.execute(
                    "SELECT 1 FROM pages WHERE id = ? AND doc = ?", (page_id, doc)
                ).fetchone()
                is None
            ):
                return 0  # removed meanwhile
            if new is None:
                self._conn.execute(
                    "UPDATE pages SET doc = NULL, digest = NULL WHERE id = ?", (page_id,)
                )
                return 0
            write_fts(self._conn, "", doc, new, "_next")
            self._conn.execute(
                "UPDATE pages SET title = ?, digest = ? WHERE id = ?",
                (title, new.digest, page_id),
            )
        return 1

    def _tidy(self) -> None:
        """After a rebuild or compaction: merge each table's segments into one and give the
        free pages back to the file system."""
        with self._lock:
            with self._conn:  # commits what was written before, too: VACUUM needs no transaction
                for table in FTS:
                    self._conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            try:
                self._conn.execute("VACUUM")
            except sqlite3.OperationalError as exc:  # another process is reading: next time
                log.info("search index %s not vacuumed: %s", self.path, exc)

    def _store(self) -> Store | None:
        return self._attached[0] if self._attached else None

    # --- reading ---------------------------------------------------------------------------

    def count(self) -> tuple[int, int]:
        """(pages known, pages with text)."""
        self._wait(2.0)  # include pages recorded a moment ago
        with self._lock:
            pages, texts = self._conn.execute("SELECT count(*), count(doc) FROM pages").fetchone()
        return pages, texts

    def search(
        self, query: str, limit: int = 20, offset: int = 0, *, store: Store | None = None
    ) -> SearchResults:
        """Pages whose title or text has every word (those about the words first: in the
        title, or frequent in the text), then pages whose URL contains every word; ``limit`` of
        them from ``offset``.  Snippets are made from the hits' captures in ``store`` (by
        default the attached store); without one, hits have none."""
        self._wait(2.0)  # include pages recorded a moment ago
        query = query.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates
        query = CONTROL.sub(" ", query)  # a NUL ends an SQLite string early
        words = Query.parse(query)
        match = words.match
        likes = _like_terms(query)
        with self._lock:
            ids: list[int] = []
            seen: set[int] = set()

            def gather(sql: str, *args: object) -> None:
                for (page_id,) in self._conn.execute(sql, (*args, MAX_RESULTS + len(ids))):
                    if page_id not in seen:
                        ids.append(page_id)
                        seen.add(page_id)

            if match is not None:
                # CROSS JOIN: the full-text match drives, each hit joined to its live page
                gather(
                    "SELECT p.id FROM page_rank CROSS JOIN pages p ON p.doc = page_rank.rowid "
                    "WHERE page_rank MATCH ? ORDER BY bm25(page_rank, 10.0, 1.0) LIMIT ?",
                    match,
                )
                gather(
                    "SELECT p.id FROM page_words CROSS JOIN pages p ON p.doc = page_words.rowid "
                    "WHERE page_words MATCH ? ORDER BY page_words.rowid LIMIT ?",
                    match,
                )
            if likes:
                where = " AND ".join(["coalesce(url, key) LIKE ? ESCAPE '\\'"] * len(likes))
                gather(
                    f"SELECT id FROM pages WHERE {where} ORDER BY coalesce(url, key) LIMIT ?",  # noqa: S608
                    *likes,
                )
            ids = ids[:MAX_RESULTS]
            page = ids[offset : offset + limit] if offset >= 0 and limit > 0 else []
            marks = ",".join("?" * len(page))
            rows = {
                r[0]: r
                for r in self._conn.execute(
                    f"SELECT id, key, coalesce(url, key), title, fetched, mime, file, pos, doc "  # noqa: S608
                    f"FROM pages WHERE id IN ({marks})",
                    page,
                )
            }
        source = store if store is not None else self._store()
        hits = [self._hit(rows[i], words, source) for i in page if i in rows]
        return SearchResults(query, len(ids), hits)

    def _hit(self, row: tuple, query: Query, store: Store | None) -> SearchHit:
        _, key, url, title, fetched, mime, file, pos, doc = row
        snippet: tuple[tuple[str, bool], ...] = ()
        if doc is not None and store is not None and file is not None and pos is not None:
            snippet = self._snippet(store, key, file, pos, query)
        return SearchHit(key, url, title or "", snippet, fetched, mime)

    def _snippet(
        self, store: Store, key: str, file: str, pos: int, query: Query
    ) -> tuple[tuple[str, bool], ...]:
        """The snippet of one hit, from its capture read again; the start of its text when
        the words are not in it (only in its title, or its URL)."""
        try:
            document, mime = self._read_document(store, key, file, pos)
        except _READ_ERRORS as exc:
            log.info("search: no snippet for %s: %s", key, exc)
            return ()
        snippet = find_snippet(document, mime, query)
        if snippet is not None:
            return segments(snippet)
        _, text = extract_text(document[:SNIPPET_START], mime)
        return ((text[:200], False),) if text else ()


def _wants_text(line: CDXJRecord) -> bool:
    """Is the text of this capture indexed (a 2xx page of a text type)?"""
    status = line.fields.get("hsc")
    return isinstance(status, int) and 200 <= status < 300 and line.fields.get("mct") in TEXT_TYPES


def _document(raw: bytes, headers: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """``(page source, mime type)`` of a payload with these HTTP headers: decoded from its
    Content-Encoding and charset (the first :data:`MAX_PAYLOAD` bytes)."""
    names = {n.lower(): v for n, v in headers}
    data = decode_content(raw[:MAX_PAYLOAD], names.get("content-encoding"), MAX_PAYLOAD)
    content_type = names.get("content-type")
    mime = (content_type or "text/html").split(";", 1)[0].strip().lower()
    return decode_text(data, content_type), mime


def _wake() -> None:
    """A job that does nothing: it ends a batch being collected, or an idle wait, at once."""


def _like_terms(query: str) -> list[str]:
    return [
        "%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        for t in query.split()
    ]
