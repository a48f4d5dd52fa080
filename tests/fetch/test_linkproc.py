"""The crawler reads pages for links in a helper process (a real child process over real
pipes): the same links as in this process, a failure where this process has one, and the
links read here when the helper fails."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest

from wwwproxy.fetch.linkproc import LinkHelper, links_of

from .test_html_links import PAGE_URL, REALISTIC_LINKS, REALISTIC_PAGE

HTML = [("Content-Type", "text/html; charset=utf-8")]
PAGES = [
    (REALISTIC_PAGE.encode(), HTML, PAGE_URL, True),
    (REALISTIC_PAGE.encode(), HTML, PAGE_URL, False),  # requisites only
    (gzip.compress(REALISTIC_PAGE.encode()), [*HTML, ("Content-Encoding", "gzip")], PAGE_URL, True),
    (
        "<a href='caf\u00e9?q=\u00e9'>x</a>".encode("latin-1"),
        [("Content-Type", "text/html; charset=latin-1")],
        PAGE_URL,
        True,
    ),
    (
        b"@import 'a.css'; b { background: url(b.png) }",
        [("Content-Type", "text/css")],
        PAGE_URL,
        True,
    ),
    (b"\x89PNG", [("Content-Type", "image/png")], PAGE_URL, True),  # no links to read
    (b"not gzip", [*HTML, ("Content-Encoding", "gzip")], PAGE_URL, True),  # cannot be decoded
]


def comparable(results):
    return [
        f"error: {r}" if isinstance(r, ValueError) else [(k.url, k.kind, k.requisite) for k in r]
        for r in results
    ]


def test_the_helper_reads_the_same_links_as_this_process():
    expected = comparable(links_of(PAGES))
    assert expected[0] == REALISTIC_LINKS
    assert expected[1] == [t for t in REALISTIC_LINKS if t[2]]
    assert expected[2] == REALISTIC_LINKS  # decoded first
    assert expected[3] == [("http://www.example.com/news/2024/caf%C3%A9?q=%E9", "a", False)]
    assert [u for u, _, _ in expected[4]] == [
        "http://www.example.com/news/2024/a.css",
        "http://www.example.com/news/2024/b.png",
    ]
    assert expected[5] == [] and expected[6].startswith("error:")
    helper = LinkHelper()
    try:
        assert comparable(helper.call(PAGES)) == expected
        assert helper.pid not in (None, os.getpid()) and helper.started == 1
        assert [(k.url, k.kind, k.requisite) for k in helper.links(PAGES[0])] == REALISTIC_LINKS
        with pytest.raises(ValueError):
            helper.links(PAGES[6])
        assert helper.started == 1 and helper.failures == 0
    finally:
        helper.stop()
    assert helper.pid is None


def test_a_helper_that_answers_nonsense_loses_no_link(caplog):
    script = (
        "import sys, marshal, struct; sys.stdin.buffer.read(1);"
        "d = marshal.dumps([[('u', 'a', 'yes')]]);"
        "sys.stdout.buffer.write(struct.pack('<Q', len(d)) + d);"
        "sys.stdout.buffer.flush(); sys.stdin.buffer.read()"
    )
    helper = LinkHelper([sys.executable, "-c", script])
    assert [(k.url, k.kind, k.requisite) for k in helper.links(PAGES[0])] == REALISTIC_LINKS
    assert helper.failures == 1 and "the link helper failed" in caplog.text
    helper.stop()


def test_the_helper_starts_without_the_search_index():
    """A helper process imports what reads links, not the search index, SQLite or the cache
    behind it (what ``import wwwproxy.archive.search`` used to pull in: a tenth of a second of
    each helper's start); the package's names still come when asked for."""
    script = (
        "import sys, wwwproxy.fetch.linkproc;"
        "print(sorted(m for m in ('sqlite3', 'wwwproxy.archive.search.index',"
        " 'wwwproxy.archive.store', 'aiohttp') if m in sys.modules));"
        "import wwwproxy.archive.search as s; print(s.SearchIndex.__name__, s.SEARCH_DB)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines() == ["[]", "SearchIndex search.sqlite3"]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import wwwproxy.archive.search as search

        search.nothing  # noqa: B018


def test_the_helper_takes_at_most_max_links_and_says_how_many_it_left():
    page = PAGES[0]
    whole = links_of([page])[0]
    assert not isinstance(whole, ValueError) and len(whole) > 3
    (here,) = links_of([page], max_links=3)
    assert not isinstance(here, ValueError)
    assert here == whole[:3] and here.left_out > 0
    helper = LinkHelper(max_links=3)
    try:
        there = helper.links(page)
        assert helper.pid not in (None, os.getpid())
    finally:
        helper.stop()
    assert there == here and there.left_out == here.left_out
