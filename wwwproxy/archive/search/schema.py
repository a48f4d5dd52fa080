"""The layout of the search database: its tables, what goes into the full-text ones, and
how a database made by another version is recognised and replaced (see :mod:`.index`)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import NamedTuple

from .text import TEXT_VERSION, TOKENIZE, digest, rank_text

__all__ = [
    "FORMAT",
    "FTS",
    "SCHEMA_VERSION",
    "Text",
    "create_fts",
    "open_schema",
    "write_fts",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3  # 1 (unversioned): an FTS5 table that stored the text itself; 2: no page_urls
#: what the terms in the index depend on besides the text: our text code, SQLite's tokenizer
FORMAT = TEXT_VERSION * 10**8 + int("".join(f"{n:03d}" for n in sqlite3.sqlite_version_info))

PAGES = """
CREATE TABLE pages (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    url TEXT,           -- NULL: the key itself (nearly always)
    file TEXT,          -- the cache file (warcfile: name) of the capture indexed ...
    pos INTEGER,        -- ... and its record's offset there: its text can be read again
    mime TEXT,
    status INTEGER,
    fetched TEXT,
    title TEXT,
    doc INTEGER UNIQUE, -- its rowid in page_words and page_rank; NULL: no text
    digest BLOB         -- of what was indexed as doc (title, text, ranking terms)
)"""
META = "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID"
FTS = {
    "page_words": f"fts5(body, content='', detail=none, columnsize=0, {TOKENIZE})",
    "page_rank": f"fts5(title, body, content='', {TOKENIZE})",
}


#: the trigrams of every page's key and URL (detail=none: which trigrams, not where), kept in step
#: with ``pages`` by triggers: the pages whose URL may contain a word, found without reading every
#: row (then checked with LIKE, as before).  External content: nothing stored twice.
_URL_OUT = (
    "INSERT INTO page_urls(page_urls, rowid, key, url) VALUES ('delete', old.id, old.key, old.url)"
)
_URL_IN = "INSERT INTO page_urls(rowid, key, url) VALUES (new.id, new.key, new.url)"
URLS = (
    "CREATE VIRTUAL TABLE page_urls USING fts5(key, url, content='pages', content_rowid='id', "
    "tokenize='trigram', detail=none)",
    f"CREATE TRIGGER pages_urls_insert AFTER INSERT ON pages BEGIN {_URL_IN}; END",
    f"CREATE TRIGGER pages_urls_delete AFTER DELETE ON pages BEGIN {_URL_OUT}; END",
    "CREATE TRIGGER pages_urls_update AFTER UPDATE OF key, url ON pages "
    f"WHEN old.key IS NOT new.key OR old.url IS NOT new.url BEGIN {_URL_OUT}; {_URL_IN}; END",
)


def create_fts(conn: sqlite3.Connection, suffix: str = "") -> None:
    """The full-text tables (with a ``suffix``: a compaction's fresh ones, swapped in)."""
    for name, spec in FTS.items():
        conn.execute(f"CREATE VIRTUAL TABLE {name}{suffix} USING {spec}")


class Text(NamedTuple):
    """A page's text as it goes into (and must come out of) the index."""

    title: str
    text: str
    rank: str

    @classmethod
    def of(cls, title: str, text: str) -> Text:
        """A page's title and text with the terms that rank it (see :func:`.rank_text`)."""
        return cls(title, text, rank_text(text))

    @property
    def digest(self) -> bytes:
        """Kept with the page: a text read again is only deleted with if it is this one."""
        return digest(self.title, self.text, self.rank)


def write_fts(
    conn: sqlite3.Connection, command: str, doc: int, text: Text, suffix: str = ""
) -> None:
    """Insert a document into the full-text tables, or with ``command="delete"`` take the
    same document out again."""
    words = f"{text.title}\n{text.text}" if text.title else text.text
    for table, values in (
        ("page_words" + suffix, (doc, words)),
        ("page_rank" + suffix, (doc, text.title, text.rank)),
    ):
        marks = ", ".join("?" * len(values))
        columns = "rowid, body" if len(values) == 2 else "rowid, title, body"
        if command:
            conn.execute(
                f"INSERT INTO {table}({table}, {columns}) VALUES (?, {marks})",  # noqa: S608
                (command, *values),
            )
        else:
            conn.execute(
                f"INSERT INTO {table}({columns}) VALUES ({marks})",  # noqa: S608
                values,
            )


def open_schema(conn: sqlite3.Connection, path: Path) -> bool:
    """Create the schema, or replace an older one: the index is derived data, so an old
    database is dropped and marked stale, and rebuilt from the archive once a store is
    attached (in the indexing thread).  True if the database was made anew."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION - 1:
        _add_urls(conn, path)
        version = SCHEMA_VERSION
    if version == SCHEMA_VERSION:
        _check_format(conn)
        return False
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect at the VACUUM below
    conn.execute("BEGIN IMMEDIATE")  # one process migrates; another waits, then sees it
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            conn.rollback()
            return False
        old = False
        for kind, where in (
            ("TABLE", "type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"),  # and theirs
            ("VIEW", "type = 'view'"),
            ("TABLE", "type = 'table' AND name NOT LIKE 'sqlite%'"),
        ):
            for (name,) in conn.execute(
                f"SELECT name FROM sqlite_master WHERE {where}"  # noqa: S608
            ).fetchall():
                old = True
                quoted = name.replace('"', '""')
                conn.execute(f'DROP {kind} IF EXISTS "{quoted}"')
        conn.execute(PAGES)
        conn.execute("CREATE INDEX pages_file ON pages(file)")
        conn.execute(META)
        conn.execute(
            "INSERT INTO meta VALUES ('next_doc', 1), ('docs', 0), ('unmerged', 0), "
            "('stale', ?), ('format', ?)",
            (1 if old else 0, FORMAT),
        )
        create_fts(conn)
        for statement in URLS:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    if old:
        log.info("search index %s: old format dropped, rebuilt from the cache", path)
        conn.execute("VACUUM")  # give the old text's space back at once
    return True


def _add_urls(conn: sqlite3.Connection, path: Path) -> None:
    """Upgrade a database of the version before in place: its URLs' trigrams are made from
    the ``pages`` rows it has (seconds at a million pages), not from the archive."""
    conn.execute("BEGIN IMMEDIATE")  # one process upgrades; another waits, then sees it
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION - 1:
            log.info("search index %s: adding the URLs' trigrams (once)", path)
            for statement in URLS:
                conn.execute(statement)
            conn.execute("INSERT INTO page_urls(page_urls) VALUES ('rebuild')")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def _check_format(conn: sqlite3.Connection) -> None:
    """Terms come out of a contentless table only when given exactly as they went in: if
    SQLite (its tokenizer) or the text taken from pages changed since the index was made,
    no delete can be trusted, and the index is rebuilt (marked stale)."""
    row = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    if row is not None and row[0] == FORMAT:
        return
    with conn:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT,))
        if conn.execute("SELECT 1 FROM pages LIMIT 1").fetchone():
            conn.execute("UPDATE meta SET value = 1 WHERE name = 'stale'")
