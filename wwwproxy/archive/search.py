"""Full-text search of the cache: SQLite FTS5 (standard library) in ``<cache>/search.sqlite3``.

The index is derived data, like the CDXJ index: :meth:`SearchIndex.attach` makes it a
:class:`Store` listener, so it follows every page recorded, deleted or purged, and
:meth:`SearchIndex.rebuild` makes it again from the cache.  There is one per process, opened by
the wiring (:mod:`wwwproxy.app`) and handed to whoever needs it.
Every cached URL gets a row (so URLs can be searched by substring); text/html and text/plain
responses also get their title and visible text indexed (decoded from their Content-Encoding and
charset, size-capped).  Text is stored as text, never escaped: escaping is the renderer's job.

A user's query never reaches FTS5's query syntax: each word is quoted as a phrase, so no input
can raise a syntax error.
"""

from __future__ import annotations

import codecs
import html
import logging
import os
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..http.content import charset_param, decode_content
from ..http.policy import is_good
from .cdxj import CDXJError, CDXJRecord
from .store import StoreError
from .warc import WARCFormatError, open_payload

if TYPE_CHECKING:
    from ..url import URL
    from .store import Store

__all__ = [
    "SEARCH_DB",
    "SearchHit",
    "SearchIndex",
    "SearchResults",
    "decode_text",
    "extract_text",
    "fts_query",
]

log = logging.getLogger(__name__)

SEARCH_DB = "search.sqlite3"
MAX_PAYLOAD = 8 * 1024 * 1024  # bytes of (decoded) payload looked at for text
MAX_TEXT = 256 * 1024  # characters of visible text kept per page
MAX_TITLE = 1000
MAX_RESULTS = 1000  # matches gathered per query before paging
TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
_HIT_START, _HIT_END = "\x02", "\x03"  # snippet markers; never in stored text (see _clean)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACE = re.compile(r"\s+")
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_WORD = re.compile(r"\w", re.UNICODE)
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.IGNORECASE
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    url TEXT NOT NULL,
    file TEXT,
    mime TEXT,
    status INTEGER,
    fetched TEXT,
    title TEXT
);
CREATE INDEX IF NOT EXISTS pages_file ON pages(file);
CREATE VIRTUAL TABLE IF NOT EXISTS page_text USING fts5(
    title, body, tokenize = 'unicode61 remove_diacritics 2'
);
"""


# --- decoding and text extraction (pure) --------------------------------------------------------


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def decode_text(data: bytes, content_type: str | None) -> str:
    """Bytes to text by BOM, Content-Type charset, ``<meta charset>``, else UTF-8 (bad bytes
    become U+FFFD)."""
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, "replace")
    codec = _codec(charset_param(content_type))
    if codec is None and "html" in (content_type or "").lower():
        m = _META_CHARSET.search(data[:2048])
        codec = _codec(m.group(1).decode("ascii")) if m else None
    return data.decode(codec or "utf-8", "replace")


def _clean(text: str) -> str:
    return _SPACE.sub(" ", _CONTROL.sub(" ", text)).strip()


_BLOCK_TAGS = (
    "p div br li tr td th h1 h2 h3 h4 h5 h6 section article header footer nav main aside "
    "blockquote pre table ul ol dl dt dd hr title option figure figcaption"
)


_HIDDEN = re.compile(r"<(script|style|template|noframes)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.S | re.I)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)|<![^>]*>|<\?[^>]*>", re.S)
_TAG = re.compile(r"</?([a-zA-Z][a-zA-Z0-9-]*)(?:[^>\"']|\"[^\"]*\"|'[^']*')*>?")
_BLOCK = frozenset(_BLOCK_TAGS.split())


def _tag_gap(m: re.Match[str]) -> str:
    """Block elements separate words; inline ones (``w<b>or</b>d``) do not."""
    return " " if m.group(1).lower() in _BLOCK else ""


def extract_text(document: str, mime: str = "text/html") -> tuple[str, str]:
    """``(title, visible text)`` of a page, whitespace collapsed and capped.

    Regular expressions rather than an HTML parser: for search text they agree on real pages
    and are about ten times faster, which matters because every recorded page goes through
    here (a 100 KB page took 10 ms with ``html.parser``)."""
    if mime == "text/plain":
        return "", _clean(document[: MAX_TEXT * 2])[:MAX_TEXT]
    # <title> holds text only (RCDATA): "<b>" in it is text, as a browser's tab shows it
    m = _TITLE.search(document, 0, 1024 * 1024)
    title = _clean(html.unescape(m.group(1)) if m else "")[:MAX_TITLE]
    body = document[m.end() :] if m else document
    body = _COMMENT.sub(" ", body[:MAX_PAYLOAD])
    body = _HIDDEN.sub(" ", body)
    text = html.unescape(_TAG.sub(_tag_gap, body))
    return title, _clean(text)[:MAX_TEXT]


def fts_query(query: str) -> str | None:
    """A user's words as an FTS5 query that cannot be a syntax error: every word a quoted
    phrase (all must match); a word ending in ``*`` matches as a prefix.  None if no word."""
    parts = []
    for word in _CONTROL.sub(" ", query).split():
        prefix = word.endswith("*")
        word = word.rstrip("*")
        if not _WORD.search(word):
            continue
        parts.append('"' + word.replace('"', '""') + '"' + ("*" if prefix else ""))
    return " ".join(parts) if parts else None


def _like_terms(query: str) -> list[str]:
    return [
        "%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        for t in query.split()
    ]


def _segments(snippet: str) -> tuple[tuple[str, bool], ...]:
    """FTS5 snippet text with markers -> ``(text, highlighted)`` pieces."""
    out: list[tuple[str, bool]] = []
    for i, part in enumerate(re.split(f"[{_HIT_START}{_HIT_END}]", snippet)):
        if part:
            out.append((part, i % 2 == 1))
    return tuple(out)


# --- the index ----------------------------------------------------------------------------------


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
        for line in lines:
            if line.record_type in ("response", "revisit"):
                self.index._enqueue(self.store, line)  # noqa: SLF001 (its own listener)

    def on_delete(self, keys: list[str], files: list[str]) -> None:
        self.index.remove_pages(keys, files)

    def __repr__(self) -> str:
        return f"<search index {self.index.path} following {self.store.root}>"


class SearchIndex:
    """The search database of one cache directory.  Thread-safe (one connection, a lock); the
    database is in WAL mode, so a second process (a rebuild) does not block readers."""

    def __init__(self, root: str | os.PathLike[str], *, path: str | os.PathLike[str] | None = None):
        self.root = Path(root)
        self.path = Path(path) if path is not None else self.root / SEARCH_DB
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._attached: list[Store] = []
        self._pending: queue.Queue[tuple[Store, CDXJRecord]] = queue.Queue()
        self._pending_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        try:
            with self._lock:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise ValueError(f"{self.path}: not a usable search database: {exc}") from None

    def attach(self, store: Store) -> None:
        """Follow ``store`` from now on: index every exchange it records, drop every page it
        deletes or purges (a :class:`~wwwproxy.archive.store.StoreListener`)."""
        if any(s is store for s in self._attached):
            return
        self._attached.append(store)
        store.listeners.append(_Follower(self, store))

    def _enqueue(self, store: Store, line: CDXJRecord) -> None:
        """Index in a worker thread: parsing a large page must never hold up the response
        being recorded (the browser waits for the record before its last bytes)."""
        with self._pending_lock:
            self._pending.put((store, line))
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._work, name="wwwproxy-search-index", daemon=True
                )
                self._worker.start()

    def _work(self) -> None:
        while True:
            try:
                store, line = self._pending.get(timeout=5)
            except queue.Empty:
                with self._pending_lock:
                    if self._pending.empty():
                        self._worker = None
                        return
                continue
            try:
                self.index_capture(store, line)
            except Exception:  # noqa: BLE001 (a page that cannot be indexed is logged, not fatal)
                log.exception("search index: %s not indexed", line.uri)
            finally:
                self._pending.task_done()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until pages recorded so far are indexed (bounded); False on time-out."""
        deadline = time.monotonic() + timeout
        while self._pending.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._conn.close()

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
        """Put (or replace) one page's row and text."""
        title, text = _clean(title)[:MAX_TITLE], _clean(text)[:MAX_TEXT]
        with self._lock, self._conn:
            self._upsert(key, url, title, text, mime, status, fetched, file)

    def _upsert(
        self,
        key: str,
        url: str,
        title: str,
        text: str,
        mime: str | None,
        status: int | None,
        fetched: str | None,
        file: str | None,
    ) -> None:
        cur = self._conn.execute(
            "INSERT INTO pages(key, url, file, mime, status, fetched, title) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET url=excluded.url, "
            "file=excluded.file, mime=excluded.mime, status=excluded.status, "
            "fetched=excluded.fetched, title=excluded.title RETURNING id",
            (key, url, file, mime, status, fetched, title),
        )
        (rowid,) = cur.fetchone()
        self._conn.execute("DELETE FROM page_text WHERE rowid = ?", (rowid,))
        if title or text:
            self._conn.execute(
                "INSERT INTO page_text(rowid, title, body) VALUES (?, ?, ?)", (rowid, title, text)
            )

    def _touch(self, key: str, fetched: str, status: int | None) -> bool:
        """A revisit: the payload (so the text) is unchanged; only the time moves on."""
        with self._lock, self._conn:
            cur = self._conn.execute(
                "UPDATE pages SET fetched = ?, status = ? WHERE key = ?", (fetched, status, key)
            )
            return cur.rowcount > 0

    def _has_good(self, key: str) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT status FROM pages WHERE key = ?", (key,)).fetchone()
        return row is not None and isinstance(row[0], int) and is_good(row[0])

    def index_capture(self, store: Store, line: CDXJRecord) -> bool:
        """Index the capture an index line points at; False if it was not readable, or its
        cache file is gone (deleted while it waited to be indexed: it must not come back)."""
        key = line.uri
        status = line.fields.get("hsc")
        if status == 304:
            return False  # recorded, never served: the page's text is the previous capture's
        try:
            if not store.path_of(line).exists():
                return False
        except StoreError:
            return False
        if line.record_type == "revisit" and self._touch(key, line.timestamp, status):
            return True
        if isinstance(status, int) and not is_good(status) and self._has_good(key):
            return True  # an error answer never replaces the good page (keep-the-good-copy)
        ref = line.warcfile
        file = ref[0] if ref else None
        mime = line.fields.get("mct")
        title = text = ""
        if isinstance(status, int) and 200 <= status < 300 and mime in TEXT_TYPES:
            try:
                title, text = self._read_text(store, line)
            except (WARCFormatError, CDXJError, OSError, ValueError) as exc:
                log.warning("search: %s not indexed: %s", key, exc)
        with self._lock, self._conn:
            self._upsert(key, key, title, text, mime, status, line.timestamp, file)
        return True

    @staticmethod
    def _read_text(store: Store, line: CDXJRecord) -> tuple[str, str]:
        record = store.get_at(line)
        if record.rec_type == "revisit":
            from ..url import canonicalize

            entry = store.get(canonicalize(line.uri), line.uri)
            if entry is None:
                return "", ""
            stream = entry.open_body()
            headers = entry.headers
        else:
            stream = open_payload(record)
            headers = record.http_headers
        with stream:
            raw = stream.read(MAX_PAYLOAD)
        names = {n.lower(): v for n, v in headers}
        data = decode_content(raw, names.get("content-encoding"), MAX_PAYLOAD)
        content_type = names.get("content-type")
        mime = (content_type or "text/html").split(";", 1)[0].strip().lower()
        return extract_text(decode_text(data, content_type), mime)

    def remove(self, key: str) -> bool:
        """Drop one archive key's page; False if it was not indexed."""
        return self.remove_pages([key], []) > 0

    def remove_files(self, names: Iterable[str]) -> int:
        """Drop the pages stored in these cache files (``warcfile:`` names)."""
        return self.remove_pages([], names)

    def remove_pages(self, keys: Iterable[str], files: Iterable[str]) -> int:
        """Drop the pages of these archive keys and those stored in these cache files (what
        a store delete or purge removed); the number of pages dropped."""
        self.flush(2.0)  # a page recorded a moment ago must not come back after this
        removed = 0
        with self._lock, self._conn:
            for query, values in (
                ("SELECT id FROM pages WHERE key = ?", keys),
                ("SELECT id FROM pages WHERE file = ?", files),
            ):
                for value in values:
                    rows = self._conn.execute(query, (value,)).fetchall()
                    for row in rows:
                        self._conn.execute("DELETE FROM page_text WHERE rowid = ?", row)
                        self._conn.execute("DELETE FROM pages WHERE id = ?", row)
                    removed += len(rows)
        return removed

    def prune(self, store: Store) -> int:
        """Drop rows whose cache file is gone (deleted by another process or by hand)."""
        self.flush(2.0)  # include pages recorded a moment ago
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
        return self.remove_files(gone)

    def rebuild(self, store: Store) -> int:
        """Index the newest capture of every key in the cache's CDXJ index afresh."""
        self.flush(2.0)  # include pages recorded a moment ago
        newest: dict[str, CDXJRecord] = {}
        for line in store.list_prefix(""):
            if line.fields.get("hsc") == 304:
                continue
            old = newest.get(line.uri)
            if old is None or line.timestamp >= old.timestamp:
                newest[line.uri] = line
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM page_text")
            self._conn.execute("DELETE FROM pages")
        count = 0
        for line in newest.values():
            if self.index_capture(store, line):
                count += 1
        return count

    # --- reading ---------------------------------------------------------------------------

    def count(self) -> tuple[int, int]:
        """(pages known, pages with text)."""
        self.flush(2.0)  # include pages recorded a moment ago
        with self._lock:
            (pages,) = self._conn.execute("SELECT count(*) FROM pages").fetchone()
            (texts,) = self._conn.execute("SELECT count(*) FROM page_text").fetchone()
        return pages, texts

    def search(self, query: str, limit: int = 20, offset: int = 0) -> SearchResults:
        """Pages whose title or text has every word (best first), then pages whose URL
        contains every word; ``limit`` of them from ``offset``."""
        self.flush(2.0)  # include pages recorded a moment ago
        query = query.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates
        query = _CONTROL.sub(" ", query)  # a NUL ends an FTS5 string early
        match = fts_query(query)
        likes = _like_terms(query)
        with self._lock:
            ids: list[int] = []
            seen: set[int] = set()
            if match is not None:
                for (rowid,) in self._conn.execute(
                    "SELECT rowid FROM page_text WHERE page_text MATCH ? "
                    "ORDER BY bm25(page_text, 10.0, 1.0) LIMIT ?",
                    (match, MAX_RESULTS),
                ):
                    ids.append(rowid)
                    seen.add(rowid)
            if likes:
                where = " AND ".join(["url LIKE ? ESCAPE '\\'"] * len(likes))
                for (rowid,) in self._conn.execute(
                    f"SELECT id FROM pages WHERE {where} ORDER BY url LIMIT ?",  # noqa: S608
                    (*likes, MAX_RESULTS),
                ):
                    if rowid not in seen:
                        ids.append(rowid)
                        seen.add(rowid)
            ids = ids[:MAX_RESULTS]
            page = ids[offset : offset + limit] if offset >= 0 and limit > 0 else []
            hits = list(self._hits(page, match))
        return SearchResults(query, len(ids), hits)

    def _hits(self, ids: list[int], match: str | None) -> Iterator[SearchHit]:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        snippets: dict[int, str] = {}
        if match is not None:
            for rowid, snip in self._conn.execute(
                f"SELECT rowid, snippet(page_text, 1, ?, ?, '…', 16) FROM page_text "  # noqa: S608
                f"WHERE page_text MATCH ? AND rowid IN ({marks})",
                (_HIT_START, _HIT_END, match, *ids),
            ):
                snippets[rowid] = snip
        rows = {
            r[0]: r
            for r in self._conn.execute(
                f"SELECT p.id, p.key, p.url, p.title, p.fetched, p.mime, "  # noqa: S608
                f"substr(t.body, 1, 200) FROM pages p LEFT JOIN page_text t ON t.rowid = p.id "
                f"WHERE p.id IN ({marks})",
                ids,
            )
        }
        for rowid in ids:
            row = rows.get(rowid)
            if row is None:
                continue
            _, key, url, title, fetched, mime, start = row
            snip = snippets.get(rowid)
            pieces = _segments(snip) if snip else (((start or ""), False),) if start else ()
            yield SearchHit(key, url, title or "", pieces, fetched, mime)
