"""Finding pages by their URL through the URLs' trigrams (``page_urls``): which trigrams a
query needs (a table), the table kept in step with the pages as they come, change and go, and
a database of the version before upgraded in place, without a rebuild."""

from __future__ import annotations

import sqlite3

import pytest

from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.search.schema import SCHEMA_VERSION
from wwwproxy.archive.search.searching import url_trigrams


@pytest.mark.parametrize(
    ("query", "trigrams"),
    [
        ("", None),
        ("ab", None),  # too short for a trigram: every URL is read, as before
        ("ab cd", None),
        ("café", None),  # not ASCII: folded otherwise by the tokenizer, so read as before
        ("abc", '"abc"'),
        ("ABCd", '"abc" "bcd"'),
        ("ab wiki", '"wik" "iki"'),  # the short word is left to LIKE
        ("wiki wiki", '"wik" "iki"'),
        ('a"bc', '"a""b" """bc"'),
        ("x%_y", '"x%_" "%_y"'),
    ],
)
def test_url_trigrams(query, trigrams):
    assert url_trigrams(query) == trigrams


def check(index: SearchIndex) -> None:
    conn = index._conn  # noqa: SLF001 - the table's own consistency check
    conn.execute("INSERT INTO page_urls(page_urls) VALUES ('integrity-check')")


def urls(index: SearchIndex, query: str) -> list[str]:
    return [h.url for h in index.search(query, 100, 0).hits]


def test_the_urls_follow_the_pages(tmp_path):
    index = SearchIndex(tmp_path)
    try:
        index.add("http://a.example/wiki/Plum", "http://a.example/wiki/Plum", text="fruit")
        index.add("http://b.example/x", "http://b.example/moved/Damson", text="fruit")
        index.add("http://c.example/ab", "http://c.example/ab", text="fruit")
        check(index)
        assert urls(index, "wiki") == ["http://a.example/wiki/Plum"]
        assert urls(index, "WIKI plum") == ["http://a.example/wiki/Plum"]  # as LIKE: any case
        assert urls(index, "moved") == ["http://b.example/moved/Damson"]  # its URL, not key
        assert urls(index, "b.example/x") == []  # the key is not what is shown or searched
        assert urls(index, "ab") == ["http://c.example/ab"]  # short: read from every row
        index.add("http://b.example/x", "http://b.example/x", text="fruit")  # its URL changes
        check(index)
        assert urls(index, "moved") == [] and urls(index, "b.example/x") == ["http://b.example/x"]
        assert index.remove("http://a.example/wiki/Plum")
        check(index)
        assert urls(index, "wiki") == []
    finally:
        index.close()


def test_a_database_of_the_version_before_is_upgraded_in_place(tmp_path):
    index = SearchIndex(tmp_path)
    index.add("http://a.example/wiki/Plum", "http://a.example/wiki/Plum", title="T", text="fruit")
    index.close()
    conn = sqlite3.connect(index.path)  # as the version before left it: no trigrams
    conn.executescript(
        "DROP TRIGGER pages_urls_insert; DROP TRIGGER pages_urls_delete; "
        "DROP TRIGGER pages_urls_update; DROP TABLE page_urls; PRAGMA user_version = 2;"
    )
    conn.close()
    again = SearchIndex(tmp_path)
    try:
        assert again._meta("stale") == 0  # noqa: SLF001 - not rebuilt from the archive
        assert urls(again, "wiki") == ["http://a.example/wiki/Plum"]
        assert urls(again, "fruit") == ["http://a.example/wiki/Plum"]  # the text kept
        check(again)
    finally:
        again.close()
    conn = sqlite3.connect(index.path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        triggers = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'")
        assert triggers.fetchone() == (3,)
    finally:
        conn.close()
