"""The indexing thread of a :class:`~.index.SearchIndex`: the store listener that queues each
recorded capture (:class:`Follower`), and the one worker thread that indexes them in batches,
catches up when the queue overflowed, and merges the full-text tables once pages stop coming.
Separate from :mod:`.index` because it is the concurrency (queue, thread, waiting, budgets):
:mod:`.index` holds what a page's indexing writes, this module when and in which thread.
A :class:`~.index.SearchIndex` owns one :class:`IndexWorker`, which knows the index only as
a :class:`PageIndex`: the few public methods that write pages, catch up and merge.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ..cdxj import CDXJRecord
from ..warc import WARCWriteError
from .capture import READ_ERRORS, Given, read_payload, wants_text
from .helper import lower_priority
from .textproc import PageError

if TYPE_CHECKING:
    from ...url import URL
    from ..store import RecordedPayload, Store
    from .schema import Text
    from .textproc import TextHelper

log = logging.getLogger(__name__)

BATCH = 64  # pages indexed in one transaction (one FTS5 segment) when they come together
COLLECT = 0.25  # seconds a batch waits for more pages while they keep coming (not if asked)
MAX_PENDING = 10_000  # pages waiting to be indexed; past it, caught up from the CDXJ index
MERGE_IDLE = 1.0  # seconds without a page before a due merge (flush: at once)
IDLE_EXIT = 5.0  # seconds without work before the indexing thread ends
#: how much lower the indexing thread runs than the rest of its process (the text helper
#: it starts runs lower still: textproc.TEXT_NICENESS).  Less than the helper: the thread
#: shares its process's GIL, and one that waits long for a core holds up the others
INDEX_NICENESS = 10
GIVEN_MAX = 1024 * 1024  # a recorded payload up to this size is handed over, not read back ...
GIVEN_BUDGET = 16 * 1024 * 1024  # ... while those waiting to be indexed hold less than this


class Capture(NamedTuple):
    """A job for the indexing thread: index one recorded capture (with its payload as the
    store recorded it, when it was handed over: :meth:`Follower.on_put_payload`)."""

    store: Store
    line: CDXJRecord
    given: Given | None = None


Job = Capture | Callable[[], object]


class PageIndex(Protocol):
    """What the indexing thread and the store listener ask of the index they work for
    (:class:`~.index.SearchIndex`)."""

    @property
    def path(self) -> Path: ...

    def batch(self) -> AbstractContextManager[None]:
        """Pages indexed inside are committed together (all or none)."""
        ...

    def index_capture(
        self, store: Store, line: CDXJRecord, given: Given | None, made: Text | PageError | None
    ) -> bool:
        """Index one capture (from ``given``, its payload as recorded, and ``made``, its text
        made already, where there are)."""
        ...

    def catch_up(self, store: Store) -> int:
        """Index the captures of ``store`` newer than what the index has of their key."""
        ...

    def merge_if_due(self, interrupted: Callable[[], bool]) -> bool:
        """Merge the full-text tables if that is due; False if ``interrupted`` said so first."""
        ...

    def remove_pages(
        self, keys: Iterable[str], files: Iterable[str], *, store: Store | None = None
    ) -> int: ...


class Follower:
    """The store listener that keeps one search index up to date with one store: captures
    go to the index's worker, deletes to the index."""

    #: the index it keeps is the cache's, shared: a put the recording helper made is
    #: followed there (:mod:`wwwproxy.archive.recordproc`), not here
    shared_index = True

    def __init__(self, index: PageIndex, worker: IndexWorker, store: Store) -> None:
        self.index = index
        self.worker = worker
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
                and wants_text(line)
                and payload.length <= GIVEN_MAX
                and self.worker.reserve(payload.length)
            ):
                try:
                    given = Given(payload.read(), tuple(payload.http_headers))
                except (WARCWriteError, OSError) as exc:  # read back from the file instead
                    log.warning("search: %s: the recorded payload is not at hand: %s", key, exc)
                    self.worker.release(payload.length)
            self.worker.enqueue(Capture(self.store, line, given))

    def on_delete(self, keys: list[str], files: list[str]) -> None:
        self.index.remove_pages(keys, files, store=self.store)

    def __repr__(self) -> str:
        return f"<search index {self.index.path} following {self.store.root}>"


class IndexWorker:
    """The queue of pages waiting to be indexed and the thread that indexes them into
    ``index``, their text made by ``texts`` (the index owns both)."""

    def __init__(self, index: PageIndex, texts: TextHelper) -> None:
        self.index = index
        #: makes the recorded pages' text in a process of its own (see .textproc)
        self.texts = texts
        self._pending: queue.Queue[Job] = queue.Queue()
        self._pending_lock = threading.Lock()
        #: jobs queued and jobs done, in order (one thread): a wait for the pages recorded
        #: before it waits for its own number, not for an empty queue (see wait)
        self._progress = threading.Condition(self._pending_lock)
        self._enqueued = 0
        self._finished = 0
        self._given_bytes = 0  # payloads handed over and waiting in _pending (GIVEN_BUDGET)
        self._thread: threading.Thread | None = None
        self._merging = 0  # the indexing thread may be merging (see _idle_work)
        self._merge_wanted = False  # pages came since the last merge (see _work)
        self._closed = False
        self._waiters = 0  # callers of wait: the indexing thread does not dawdle
        self._merge_waiters = 0  # ... and those waiting for the merge too (flush)
        #: the store whose pages did not fit the queue: caught up from its index (_idle_work)
        self._behind: Store | None = None

    def reserve(self, size: int) -> bool:
        """Room for a handed-over payload of ``size`` bytes in the queue?  (Taken if so;
        :meth:`_run` gives it back.)"""
        with self._pending_lock:
            if self._given_bytes + size > GIVEN_BUDGET:
                return False
            self._given_bytes += size
            return True

    def release(self, size: int) -> None:
        """Give back room :meth:`reserve` took for a payload that is not queued after all."""
        with self._pending_lock:
            self._given_bytes -= size

    def enqueue(self, job: Job) -> None:
        """Index (or run a job) in the worker thread: parsing a large page must never hold up
        the response being recorded (the browser waits for the record before its last bytes).
        Never blocks: past :data:`MAX_PENDING` waiting pages, a page is left to the index's
        ``catch_up``, which finds it in the store's index once the thread is idle again."""
        with self._pending_lock:
            if isinstance(job, Capture) and self._pending.qsize() >= MAX_PENDING:
                if self._behind is None:
                    log.warning("search index: behind by %d pages; catching up later", MAX_PENDING)
                self._behind = job.store
                if job.given is not None:
                    self._given_bytes -= len(job.given.payload)
            else:
                self._pending.put(job)
                self._enqueued += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._work, name="wwwproxy-search-index", daemon=True
                )
                self._thread.start()

    def _work(self) -> None:
        """The indexing thread: pages in batches, then, once none came for a while (or
        someone flushes), the pages left behind by a full queue, then a merge if due.  A
        merge waits for a pause: during a crawl, merging after every batch merged the whole
        index again and again (a third of the indexing time on a 550-page site)."""
        lower_priority(INDEX_NICENESS)
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
                        self._thread = None
                        idle = True
                    else:
                        idle = False
                if idle:  # the text helper goes too (a later page starts another)
                    self.texts.stop()
                    return
                continue
            jobs = self._collect(job)
            pages: list[Job] = [job for job in jobs if isinstance(job, Capture)]
            others: list[Job] = [job for job in jobs if not isinstance(job, Capture)]
            if pages:
                self._merge_wanted = True  # before the jobs are done: flush() sees no gap
            # the pages, then the job that ended their batch (it came after them): those
            # waiting for the pages need not wait for it too (a compaction takes long)
            for part in (pages, others):
                if not part:
                    continue
                try:
                    self._run(part)
                finally:
                    for _ in part:
                        self._pending.task_done()
                    with self._progress:
                        self._finished += len(part)
                        self._progress.notify_all()

    def _collect(self, job: Job) -> list[Job]:
        """A batch: the pages waiting, and those coming within :data:`COLLECT` seconds (up to
        :data:`BATCH`), unless someone waits for them; a job that is no page ends it.  One
        transaction (one FTS5 segment) for several pages costs less than one each."""
        jobs = [job]
        deadline = time.monotonic() + COLLECT
        while isinstance(jobs[-1], Capture) and len(jobs) < BATCH:
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
                    self.index.catch_up(behind)
                except Exception:  # noqa: BLE001
                    log.exception("search index: not caught up")
            self._merge_wanted = False
            try:
                if not self.index.merge_if_due(self._pages_waiting):
                    self._merge_wanted = True  # pages came first: merge after them
            except sqlite3.Error:
                log.exception("search index: not merged")
        finally:
            self._merging -= 1

    def merge_later(self) -> None:
        """Pages were indexed by a job (a catch-up): merge once none come for a while."""
        self._merge_wanted = True

    def _pages_waiting(self) -> bool:
        """Anything queued: a merge under way stops for it."""
        return not self._pending.empty()

    def _run(self, jobs: list[Job]) -> None:
        """The pages recorded meanwhile in one transaction, then the job that ended the batch
        (a rebuild or compaction) if any; a failure is logged, never fatal."""
        captures = [job for job in jobs if isinstance(job, Capture)]
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
                self.release(given)
        for job in jobs:
            if not isinstance(job, Capture):
                try:
                    job()
                except Exception:  # noqa: BLE001
                    log.exception("search index: %s failed", job)

    def _index_batch(self, captures: list[Capture]) -> None:
        """The pages in one transaction; if one fails, the batch is rolled back and each page
        indexed in a transaction of its own (the failing one logged, the others kept).  A full
        disk ends it (the caller says so once)."""
        try:
            made = self.texts_of(captures)
            with self.index.batch():
                for capture, text in zip(captures, made, strict=True):
                    self.index.index_capture(capture.store, capture.line, capture.given, text)
            return
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise
        except Exception:  # noqa: BLE001 (found again below, page by page)
            pass
        for capture in captures:
            try:
                self.index.index_capture(capture.store, capture.line, capture.given, None)
            except sqlite3.Error as exc:
                if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    raise
                log.exception("search index: %s not indexed", capture.line.uri)
            except Exception:  # noqa: BLE001
                log.exception("search index: %s not indexed", capture.line.uri)

    def texts_of(self, captures: list[Capture]) -> list[Text | PageError | None]:
        """The text of each page of a batch, made in the text helper while the batch waits:
        from the payload handed over, else read back here (None: no text is indexed)."""
        made: list[Text | PageError | None] = [None] * len(captures)
        wanted: list[int] = []
        pages: list[tuple[bytes, Sequence[tuple[str, str]]]] = []
        for i, capture in enumerate(captures):
            line = capture.line
            if not wants_text(line):
                continue
            given = capture.given
            if given is None:
                if line.warcfile is None:
                    continue
                try:
                    given = read_payload(capture.store, line.uri, *line.warcfile)
                except READ_ERRORS as exc:
                    made[i] = PageError(str(exc))
                    continue
                if given is None:  # a revisit of a page that is gone
                    continue
            wanted.append(i)
            pages.append((given.payload, given.headers))
        for i, text in zip(wanted, self.texts.texts(pages), strict=True):
            made[i] = text
        return made

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until pages recorded so far are indexed, and the index merged if that was due
        (bounded); False on time-out."""
        return self.wait(timeout, merged=True)

    def close(self) -> None:
        """The index is closing: pages recorded from now on are not indexed, nor merged."""
        self._closed = True

    def wait(self, timeout: float, *, merged: bool = False) -> bool:
        """Wait (at most ``timeout`` seconds) until the pages queued before this call are
        indexed; with ``merged``, until the queue is empty, the pages a full queue left
        behind are caught up and a due merge is done.  False on time-out.

        A search waits for the pages recorded before it, not for an empty queue: while pages
        keep being recorded the queue is seldom empty, and a search that waited for that
        would take its whole time-out, holding one of the command pages' threads, until
        such waits piled up and command pages timed out."""
        deadline = time.monotonic() + timeout
        with self._progress:
            self._waiters += 1
            self._merge_waiters += merged
            target = self._enqueued
        try:
            if self._finished < target or (
                merged and (self._behind is not None or self._merge_wanted)
            ):
                self.enqueue(_wake)  # the thread may be collecting a batch, or idling
            with self._progress:
                while self._finished < target or (
                    merged
                    and (
                        self._pending.unfinished_tasks
                        or self._behind is not None
                        or self._merging
                        or self._merge_wanted
                    )
                ):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    # the merge flags change without a notice: looked at again soon
                    self._progress.wait(min(remaining, 0.01) if merged else remaining)
            return True
        finally:
            with self._progress:
                self._waiters -= 1
                self._merge_waiters -= merged


def _wake() -> None:
    """A job that does nothing: it ends a batch being collected, or an idle wait, at once."""
