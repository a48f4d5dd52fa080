"""The fast path of :func:`~wwwproxy.url.canonicalize`, for a URL canonical as written
(:func:`~wwwproxy.url.canonical.is_canonical_web_url`), gives exactly what the general parser
gives: over generated URLs and over every string in the tests of ``wwwproxy.url``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wwwproxy.url import InvalidURL, canonicalize
from wwwproxy.url.canonical import (
    DEFAULT_LOCAL_HOST,
    URL,
    _as_written,
    _parse,
    is_canonical_web_url,
)

from .test_canonical_properties import SETTINGS, url_like, web_url_like


def general(url: str) -> URL | None:
    try:
        return _parse(url, DEFAULT_LOCAL_HOST)
    except InvalidURL:
        return None


def check_same(url: str) -> bool:
    """The fast path's answer is the general one (and canonicalize's); True if it took it."""
    parsed = general(url)
    written = _as_written(url)
    fast = is_canonical_web_url(url)
    if fast:
        assert parsed is not None, url
        assert written == parsed, url
        assert parsed.file == parsed.canonical == url and not parsed.local, url
    else:
        assert written is None, url
    try:
        got = canonicalize(url)
    except InvalidURL:
        got = None
    assert got == parsed, url
    return fast


labels = st.one_of(
    st.sampled_from(["example", "com", "www", "a-b", "_x", "xn--bcher-kva", "de", "0x1f", "09"]),
    st.sampled_from(["1", "255", "0", "0x", "ExAmple", "a" * 63, "b" * 64, "é", "a%41", ""]),
)
hosts = st.lists(labels, min_size=1, max_size=5).map(".".join) | st.sampled_from(
    ["example.com.", "[::1]", "127.0.0.1", "u@example.com", "example.com:", ("a" * 60 + ".") * 5]
)
path_pieces = st.sampled_from(
    ["/", "a", "B.html", ";p=1", "~u", "(x)", "!$*+,=:", "/.", "/..", "/./", ".x", "%41", "%2F"]
    + ["@", "'", " ", "é", "|", "//", "-_"]
)
query_pieces = st.sampled_from(
    ["a=1", "&", "b", "=", ";", "+", "?", "/", ":", "|", "~", "&amp;", "&amp", "%20", " ", "#f"]
    + ["é", "'", "(", ")", ""]
)
written_like = st.builds(
    lambda s, h, p, path, q: s + h + p + path + q,
    st.sampled_from(["http://", "https://", "HTTP://", "ftp://", "http:/", ""]),
    hosts,
    st.sampled_from(["", ":1", ":80", ":443", ":8080", ":65535", ":65536", ":99999", ":080", ":0"]),
    st.lists(path_pieces, max_size=8).map(lambda parts: "/" + "".join(parts)),
    st.one_of(st.just(""), st.lists(query_pieces, max_size=8).map(lambda p: "?" + "".join(p))),
)


@SETTINGS
@given(written_like)
def test_the_fast_path_is_the_general_one_on_urls_nearly_canonical(url: str) -> None:
    check_same(url)


@SETTINGS
@given(st.one_of(url_like, web_url_like))
def test_the_fast_path_is_the_general_one_on_any_url(url: str) -> None:
    check_same(url)


def string_constants(path: Path) -> set[str]:
    """Every string written in a Python file (the tables of its tests)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


TABLE_STRINGS = sorted(set().union(*map(string_constants, Path(__file__).parent.glob("test_*.py"))))


def test_the_fast_path_is_the_general_one_on_every_string_of_the_url_tests() -> None:
    taken = [s for s in TABLE_STRINGS if check_same(s)]
    # the tables' canonical results are there too: the fast path is tried on many of them
    assert len(taken) > 50


@pytest.mark.parametrize(
    ("url", "fast"),
    [
        ("http://example.com/", True),
        ("https://www.example.com/a/b.html?x=1&y=2;z=3+4", True),
        ("http://a-b_c.example.:8080/p;q=1/~u/(x)!$*+,=:?a/b:c|d~", True),
        ("http://" + "a" * 63 + ".com/", True),
        ("http://" + "a" * 64 + ".com/", False),  # a label over 63 bytes: invalid
        ("http://" + ("a" * 62 + ".") * 4 + "com/", False),  # a name over 253 bytes
        ("http://127.0.0.1/", False),  # IPv4: the general rules
        ("http://example.0x1f/", False),  # ends in a number: IPv4
        ("http://example.de/", True),  # hex letters but no number
        ("http://example.com:80/", False),  # the default port is dropped
        ("https://example.com:443/", False),
        ("http://example.com:443/", False),  # kept, but left to the general parser
        ("http://example.com:65536/", False),
        ("http://Example.com/", False),  # lower-cased
        ("HTTP://example.com/", False),
        ("http://example.com", False),  # no path: "/" added
        ("http://example.com/a/./b", False),  # dot segments
        ("http://example.com/.well-known/x", False),  # maybe one
        ("http://example.com/a%41", False),  # escapes
        ("http://example.com/?", False),  # an empty query is dropped
        ("http://example.com/?a&amp;b", False),  # the entity is replaced
        ("http://example.com/#f", False),  # the fragment is dropped
        ("http://u@example.com/", False),  # userinfo
        ("ftp://example.com/", False),
        ("http://example.com/a b", False),
    ],
)
def test_which_urls_take_the_fast_path(url: str, fast: bool) -> None:
    assert check_same(url) is fast
