"""Answering a search: the matches of a query in the full-text tables and the URLs, a page of
them, and each hit's snippet made from its capture read again from the archive.  Separate
from :mod:`.index` (which keeps the tables up to date) because it only reads; a
:class:`~.index.SearchIndex` owns one :class:`Searcher` and gives it what it reads with.

What a search costs follows the page of results, not how many pages match: BM25 scores every
row it is asked to order, so ordering all the matches of a common word (nearly every page) by
it costs time in proportion to the cache.  A query is first counted up to
:data:`RANK_CANDIDATES` matches (rowids only, no scoring); :func:`plan_ranking` then picks

* ``EXACT`` when that many or fewer match: all of them ordered by BM25, exactly as before (a
  query of rare words, whatever the cache's size);
* ``NEWEST`` when more match: the :data:`RANK_CANDIDATES` most recently indexed of them (the
  highest rowids, which FTS5 walks first in descending order and stops after) ordered by the
  same BM25 (the newer first among equals), so the first results are the best-ranked among
  the newest pages, and a page about the word indexed long ago may come after newer ones or
  not at all.  More pages match than a result list shows anyway (:data:`MAX_RESULTS`), and
  the count says so.  The newest, because rowid order is the only one FTS5 can stop early in
  (a static score would need the table ordered by it, which pages added one by one cannot
  keep), and a recent capture is the likelier one wanted; title matches first would not
  bound the cost (a title-only match walks every page with the word to find the few titles).

FTS5 cannot stop early on ``ORDER BY bm25(...) LIMIT``: a score depends on the row, so every
match is scored and sorted; only rowid order (ascending or descending) is what it walks.  BM25
itself still counts each word's pages once per query (its IDF: a walk of the word's rowids,
far cheaper than scoring them), the one part that still grows with the matches; the scoring,
the sort and the rest are bounded.  Once a query has
:data:`MAX_RESULTS` results, the later kinds of match (pages with the words elsewhere, URLs)
are not looked for: they would be cut off.  URLs are found through the trigrams of every
page's key and URL (``page_urls``, see :mod:`.schema`), not by reading every row.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from .capture import READ_ERRORS, read_document
from .text import CONTROL, Query, extract_text, find_snippet, segments

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger(__name__)

MAX_RESULTS = 1000  # matches gathered per query before paging
#: matches of a query ranked by BM25 at most: past that, the newest this many (see above)
RANK_CANDIDATES = 5000
SNIPPET_START = 16 * 1024  # characters of a page's source its opening text is taken from


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
    #: more pages matched than are ranked: the newest this many were (see above); None: all
    ranked: int | None = None

    @property
    def bounded(self) -> bool:
        """Whether only the newest matches were ranked."""
        return self.ranked is not None


class Ranking(Enum):
    """How a query's full-text matches are ordered (see the module's docstring)."""

    EXACT = "all matches by BM25"
    NEWEST = "the newest RANK_CANDIDATES matches by BM25"


def plan_ranking(matches: int, candidates: int = RANK_CANDIDATES) -> Ranking:
    """How to rank a query that ``matches`` pages (counted up to ``candidates + 1``): all of
    them when they are few enough to score, else the newest ``candidates``."""
    return Ranking.EXACT if matches <= candidates else Ranking.NEWEST


#: the ranked full-text matches, each joined to its live page (CROSS JOIN: the match drives)
_RANKED = {
    Ranking.EXACT: (
        "SELECT p.id FROM page_rank CROSS JOIN pages p ON p.doc = page_rank.rowid "
        "WHERE page_rank MATCH ? ORDER BY bm25(page_rank, 10.0, 1.0) LIMIT ?"
    ),
    Ranking.NEWEST: (
        "SELECT p.id FROM (SELECT rowid AS doc, bm25(page_rank, 10.0, 1.0) AS score "
        f"FROM page_rank WHERE page_rank MATCH ? ORDER BY rowid DESC LIMIT {RANK_CANDIDATES}) "
        "AS c CROSS JOIN pages p ON p.doc = c.doc ORDER BY c.score, c.doc DESC LIMIT ?"
    ),
}
_COUNT_MATCHES = (
    "SELECT count(*) FROM (SELECT 1 FROM page_rank WHERE page_rank MATCH ? "
    f"LIMIT {RANK_CANDIDATES + 1})"
)


class Searcher:
    """Searching one index's tables: its connection ``conn``, used under its ``lock``;
    ``ready`` waits (at most the seconds it is given) for the pages recorded a moment ago,
    and ``attached`` is the store snippets are read from unless a search names one."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        lock: threading.RLock,
        *,
        ready: Callable[[float], object],
        attached: Callable[[], Store | None],
    ) -> None:
        self._conn = conn
        self._lock = lock
        self._wait = ready
        self._store = attached

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
                if len(ids) >= MAX_RESULTS:
                    return  # what it would add is cut off below
                for (page_id,) in self._conn.execute(sql, (*args, MAX_RESULTS + len(ids))):
                    if page_id not in seen:
                        ids.append(page_id)
                        seen.add(page_id)

            ranking = Ranking.EXACT
            if match is not None:
                (matches,) = self._conn.execute(_COUNT_MATCHES, (match,)).fetchone()
                ranking = plan_ranking(matches)
                gather(_RANKED[ranking], match)
                gather(
                    "SELECT p.id FROM page_words CROSS JOIN pages p ON p.doc = page_words.rowid "
                    "WHERE page_words MATCH ? ORDER BY page_words.rowid LIMIT ?",
                    match,
                )
            if likes:
                where = " AND ".join(["coalesce(p.url, p.key) LIKE ? ESCAPE '\\'"] * len(likes))
                trigrams = url_trigrams(query)
                if trigrams is None:  # no word of three letters: every page's URL is read
                    gather(
                        f"SELECT id FROM pages p WHERE {where} "  # noqa: S608
                        "ORDER BY coalesce(url, key) LIMIT ?",
                        *likes,
                    )
                else:
                    gather(
                        "SELECT p.id FROM page_urls CROSS JOIN pages p "  # noqa: S608
                        f"ON p.id = page_urls.rowid WHERE page_urls MATCH ? AND {where} "
                        "ORDER BY coalesce(p.url, p.key) LIMIT ?",
                        trigrams,
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
        ranked = RANK_CANDIDATES if ranking is Ranking.NEWEST else None
        return SearchResults(query, len(ids), hits, ranked)

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
            document, mime = read_document(store, key, file, pos)
        except READ_ERRORS as exc:
            log.info("search: no snippet for %s: %s", key, exc)
            return ()
        snippet = find_snippet(document, mime, query)
        if snippet is not None:
            return segments(snippet)
        _, text = extract_text(document[:SNIPPET_START], mime)
        return ((text[:200], False),) if text else ()


def url_trigrams(query: str) -> str | None:
    """The trigrams every URL that contains each word of ``query`` has (an FTS5 query of
    ``page_urls``: all of them), from the words of three characters or more that are ASCII
    (folded to lower case as the trigram tokenizer and LIKE both do); None if there is no such
    word.  A superset: LIKE then checks each page it finds."""
    grams = dict.fromkeys(
        word[at : at + 3].lower()
        for word in query.split()
        if len(word) >= 3 and word.isascii()
        for at in range(len(word) - 2)
    )
    return " ".join('"' + gram.replace('"', '""') + '"' for gram in grams) or None


def _like_terms(query: str) -> list[str]:
    return [
        "%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        for t in query.split()
    ]
