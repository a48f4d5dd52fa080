"""The search database of one cache directory (``<cache>/search.sqlite3``): which pages there
are, and two contentless FTS5 tables over their text; the text itself stays in the WARC files.

* ``page_words`` (``detail=none``): every term of a page's title and text, no positions: what
  finds a page (all words must match).
* ``page_rank`` (``detail=full``): the title and the page's most frequent terms
  (:func:`~.text.rank_text`): what ranks it (BM25, titles count ten times).

A page is indexed from the payload the store hands over as it records it
(:meth:`.worker.Follower.on_put_payload`; reading each page back from its WARC file cost as
much as indexing it), or, when it is too large to wait in memory, read back from its capture.
A contentless table forgets a page's terms only when told the very text they came from
(the FTS5 'delete' command; SQLite 3.40 has no ``contentless_delete``): when a page gets new text,
the old text is read again from its capture in the archive and checked against the digest kept
for it.  What cannot be read again (the cache file was deleted) stays in the index as garbage
that no search shows (every hit is joined to a live ``pages`` row); when garbage outgrows a
quarter of the live pages, :meth:`SearchIndex.compact` builds fresh tables from the archive and
swaps them in, off the request path in the indexing thread.

This module holds what is written (pages, their text, removal, rebuild, compaction, merges);
its neighbours hold the rest, in parts the index owns and hands only what they use: the queue
and the indexing thread (batches, when to catch up and merge) in :mod:`.worker`, searching and
snippets in :mod:`.searching`; reading a capture's page back from the archive is in
:mod:`.capture`, and the tables themselves, and how a database of another version is
replaced, in :mod:`.schema`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ...http.policy import is_good
from ..cdxj import CDXJRecord
from ..store import StoreError
from .capture import READ_ERRORS, Given, read_text, wants_text
from .schema import FTS, Text, create_fts, open_schema, write_fts
from .searching import Searcher, SearchHit, SearchResults
from .text import MAX_TEXT, MAX_TITLE, clean, clean_capped
from .textproc import PageError, TextHelper, page_text
from .unindexed import mark_time
from .worker import BATCH, Capture, Follower, IndexWorker

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["SEARCH_DB", "SearchHit", "SearchIndex", "SearchResults"]

log = logging.getLogger(__name__)

SEARCH_DB = "search.sqlite3"
COMPACT_MIN = 64  # garbage documents always tolerated
MERGE_MIN = 16  # pages indexed since the last full merge before another is worth it ...
MERGE_SHARE = 8  # ... or an eighth of the pages with text, whichever is more ...
MERGE_SMALL = 1000  # ... or any, up to this many pages with text (a merge takes milliseconds)
MERGE_STEP = 200  # FTS5 pages written per step of a full merge (a short transaction)


class SearchIndex:
    """The search database of one cache directory.  Thread-safe: one connection under a lock
    for reads and writes, and one writer of the full-text tables at a time (indexing, rebuild,
    compaction); the database is in WAL mode, so a second process does not block readers.
    Its :attr:`indexing` worker indexes the pages its stores record, in a thread of its own."""

    def __init__(self, root: str | os.PathLike[str], *, path: str | os.PathLike[str] | None = None):
        self.root = Path(root)
        self.path = Path(path) if path is not None else self.root / SEARCH_DB
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()  # the connection
        self._write_lock = threading.RLock()  # the full-text tables' one writer
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._attached: list[Store] = []
        self._compact_lock = threading.Lock()
        self._compact_queued = False  # under _compact_lock: one compaction waits at a time
        self._batching = 0  # under the write lock: pages are committed by the batch
        #: makes the recorded pages' text in a process of its own (see .textproc)
        self._texts = TextHelper()
        #: the queue of pages to index and the thread that indexes them
        self.indexing = IndexWorker(self, self._texts)
        self._searcher = Searcher(self._conn, self._lock, ready=self._wait, attached=self._store)
        #: the time of the mark of pages recorded unindexed last looked into (.unindexed)
        self._unindexed_seen: int | None = None
        #: what else a wait for the pages recorded so far waits for (bounded, False on
        #: time-out): the recording helper's own index (:mod:`..recordproc`)
        self.waits_for: list[Callable[[float], bool]] = []
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
        store.listeners.append(Follower(self, self.indexing, store))
        if self._meta("stale"):
            self.indexing.enqueue(partial(self._rebuild, store))
        self._catch_up_unindexed(store)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until pages recorded so far are indexed, and the index merged if that was due
        (bounded); False on time-out."""
        others = all([wait(timeout) for wait in self.waits_for])
        return self.indexing.flush(timeout) and others

    def _wait(self, timeout: float) -> bool:
        """Wait (bounded) until the pages recorded before this call are indexed, those another
        process recorded without indexing them included (:mod:`.unindexed`)."""
        store = self._store()
        if store is not None:
            self._catch_up_unindexed(store)
        others = all([wait(timeout) for wait in self.waits_for])
        return self.indexing.wait(timeout) and others

    def _catch_up_unindexed(self, store: Store) -> None:
        """Have the indexing thread catch up with ``store`` if a process that keeps no search
        index recorded pages into it since the last catch-up (:mod:`.unindexed`): a ``stat``."""
        when = mark_time(store.root)
        if when is None or when == self._unindexed_seen:
            return
        self._unindexed_seen = when
        if when != self._meta("unindexed"):
            self.indexing.enqueue(partial(self._caught_up_unindexed, store, when))

    def _caught_up_unindexed(self, store: Store, when: int) -> None:
        """In the indexing thread: catch up, and remember the mark's time caught up with."""
        if self.catch_up(store):
            self.indexing.merge_later()
        with self._write_lock, self._lock, self._conn:
            self._set_meta("unindexed", when)

    def count(self) -> tuple[int, int]:
        """(pages known, pages with text)."""
        return self._searcher.count()

    def search(
        self, query: str, limit: int = 20, offset: int = 0, *, store: Store | None = None
    ) -> SearchResults:
        """The pages that match ``query``, ``limit`` of them from ``offset``, with snippets
        from ``store`` (by default the attached one): :meth:`.Searcher.search`."""
        return self._searcher.search(query, limit, offset, store=store)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Pages written inside are committed together at the end: a commit per page makes
        FTS5 write, and later merge, a segment per page (twice the work).  All or none: an
        exception that leaves it rolls the whole batch back (a page has no savepoint of its
        own: FTS5 writes its pending terms out at each, a fifth of the indexing time), and
        the indexing thread indexes its pages again one by one."""
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
        """One page's writes: in a batch, part of it (all or none, see :meth:`batch`), else
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

    def close(self) -> None:
        self.flush()
        with self._lock:
            self.indexing.close()
            self._conn.close()
        self._texts.stop()

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
        title, text = clean(title)[:MAX_TITLE], clean_capped(text, MAX_TEXT)
        with self._write_lock:
            new = Text.of(title, text) if title or text else None
            self._put(None, key, url, new, mime, status, fetched, file, None)

    def _put(
        self,
        store: Store | None,
        key: str,
        url: str,
        new: Text | None,
        mime: str | None,
        status: int | None,
        fetched: str | None,
        file: str | None,
        pos: int | None,
    ) -> None:
        """Upsert a page's row; index its text (``new``: None if it has none) unless it is
        the text already indexed; take the old text's terms out when it can be read again
        (else they are garbage).  Under the write lock: no other writer changes the
        full-text tables in between."""
        title = new.title if new is not None else ""
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
            title, text = read_text(store, key, file, pos)
        except READ_ERRORS:
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

    def index_capture(
        self,
        store: Store,
        line: CDXJRecord,
        given: Given | None = None,
        made: Text | PageError | None = None,
    ) -> bool:
        """Index the capture an index line points at (its payload ``given`` as recorded, its
        text ``made`` from it already by :func:`.textproc.page_text` if given, else read from
        the file); False if it was not readable, or its cache file is gone (deleted while it
        waited to be indexed: it must not come back)."""
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
            new: Text | None = None
            if wants_text(line):
                try:
                    if made is None:
                        made = (
                            page_text(given.payload, given.headers)
                            if given is not None
                            else Text.of(*read_text(store, key, file, pos))
                        )
                    if isinstance(made, PageError):
                        raise made
                    new = made if made.title or made.text else None
                except READ_ERRORS as exc:
                    log.warning("search: %s not indexed: %s", key, exc)
            self._put(store, key, key, new, mime, status, line.timestamp, file, pos)
        return True

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

    def catch_up(self, store: Store) -> int:
        """Index the captures newer than what the index has of their key: the pages a full
        queue left out (:meth:`.IndexWorker.enqueue`), or another process recorded without
        indexing them (:mod:`.unindexed`).  The number indexed."""
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
                chunk = lines[start : start + BATCH]
                # their text made in the text helper, as the pages recorded here
                made = self.indexing.texts_of([Capture(store, line) for line in chunk])
                with self.batch():
                    for line, text in zip(chunk, made, strict=True):
                        count += self.index_capture(store, line, None, text)
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
                with self.batch():
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
        with self._compact_lock:
            if self._compact_queued:
                return
            self._compact_queued = True
        self.indexing.enqueue(partial(self.compact, store))

    def compact(self, store: Store) -> int:
        """Build the full-text tables afresh from the pages' captures in the archive and swap
        them in: the terms of removed pages go.  Searches go on meanwhile against the old
        tables.  The number of pages whose text was indexed."""
        with self._write_lock:
            with self._compact_lock:
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
                with self.batch():
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
                title, text = read_text(store, key, file, pos)
            except READ_ERRORS as exc:
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

    def merge_if_due(self, interrupted: Callable[[], bool]) -> bool:
        """Merge each full-text table into one b-tree when enough pages came since the last
        time (geometrically: each page is merged a few times in all; a small index whenever
        pages came), in short steps, and only while nothing waits to be indexed.  FTS5 keeps
        a b-tree (segment) per batch until its own merging catches up, each with its own copy
        of every term, and a merge under way holds its input and output: a small cache
        indexed page by page took up to twice the space of the same index merged.  False if
        ``interrupted`` said pages came before it was done."""
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
                if interrupted():
                    return False  # pages first; the merge goes on after them
            with self._lock:
                with self._conn:
                    self._set_meta("unmerged", 0)
                # the merged-away pages (executescript: execute() frees one page per call)
                self._conn.executescript("PRAGMA incremental_vacuum")
        return True

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
