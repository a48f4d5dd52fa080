"""Header rules of a forwarding proxy (RFC 9110 §7.6), as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.http.headers import (
    HOP_BY_HOP,
    add_via,
    censor,
    end_to_end,
    get_header,
    set_header,
    without_controls,
)


def test_end_to_end_drops_fixed_hop_by_hop_headers():
    headers = [
        ("Host", "example.com"),
        ("Connection", "keep-alive"),
        ("Keep-Alive", "timeout=5"),
        ("Proxy-Connection", "keep-alive"),
        ("TE", "trailers"),
        ("Transfer-Encoding", "chunked"),
        ("Upgrade", "websocket"),
        ("Proxy-Authorization", "Basic Zm9vOmJhcg=="),
        ("Proxy-Authenticate", "Basic"),
        ("Trailer", "X-Checksum"),
        ("Accept", "*/*"),
    ]
    assert end_to_end(headers) == [("Host", "example.com"), ("Accept", "*/*")]


def test_connection_names_more_hop_by_hop_headers():
    headers = [
        ("Connection", "close, X-Foo"),
        ("connection", " x-bar ,,"),
        ("X-Foo", "1"),
        ("X-BAR", "2"),
        ("X-Baz", "3"),
        ("Close", "not really a header, but named by Connection"),
    ]
    assert end_to_end(headers) == [("X-Baz", "3")]


def test_proxy_connection_tokens_count_too():
    headers = [("Proxy-Connection", "X-Old"), ("X-Old", "1"), ("X-New", "2")]
    assert end_to_end(headers) == [("X-New", "2")]


def test_end_to_end_keeps_order_case_and_duplicates():
    headers = [("Set-Cookie", "a=1"), ("x-Custom", "v"), ("Set-Cookie", "b=2")]
    assert end_to_end(headers) == headers


def test_end_to_end_accepts_any_iterable():
    assert end_to_end(iter([("A", "1"), ("TE", "x")])) == [("A", "1")]


def test_get_header_is_case_insensitive_and_first():
    headers = [("ETag", '"a"'), ("etag", '"b"')]
    assert get_header(headers, "etag") == '"a"'
    assert get_header(headers, "Last-Modified") is None
    assert get_header([], "X") is None


def test_set_header_replaces_all_at_first_place():
    headers = [("A", "1"), ("If-None-Match", "x"), ("B", "2"), ("if-none-match", "y")]
    assert set_header(headers, "If-None-Match", '"v"') == [
        ("A", "1"),
        ("If-None-Match", '"v"'),
        ("B", "2"),
    ]
    assert set_header([("A", "1")], "B", "2") == [("A", "1"), ("B", "2")]
    assert headers[1] == ("If-None-Match", "x")  # the input is not changed


def test_add_via_appends_hop_and_keeps_earlier():
    assert add_via([], (1, 1), "wwwproxy") == [("Via", "1.1 wwwproxy")]
    headers = [("Via", "1.0 fred"), ("X", "y"), ("via", "1.1 p.example.net")]
    assert add_via(headers, (1, 0), "wwwproxy") == [
        ("Via", "1.0 fred, 1.1 p.example.net, 1.0 wwwproxy"),
        ("X", "y"),
    ]


def test_hop_by_hop_set_is_lower_case():
    assert all(name == name.lower() for name in HOP_BY_HOP)
    assert "proxy-authorization" in HOP_BY_HOP


NAMES = st.sampled_from(
    ["Connection", "Keep-Alive", "TE", "X-A", "X-B", "Accept", "Via", "Proxy-Authorization"]
)
TOKENS = st.lists(st.sampled_from(["close", "X-A", "x-b", "keep-alive", ""]), max_size=3)


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(NAMES, st.text("abc ,", max_size=5))
        | st.tuples(st.just("Connection"), TOKENS.map(", ".join)),
        max_size=8,
    )
)
def test_end_to_end_properties(headers):
    out = end_to_end(headers)
    named = {
        t.strip().lower()
        for n, v in headers
        if n.lower() == "connection"
        for t in v.split(",")
        if t.strip()
    }
    assert all(n.lower() not in HOP_BY_HOP and n.lower() not in named for n, _ in out)
    assert [h for h in headers if h in out] == out  # a subsequence, order kept
    assert end_to_end(out) == out  # idempotent


@pytest.mark.parametrize("version", [(1, 0), (1, 1), (2, 0)])
def test_add_via_version(version):
    assert get_header(add_via([], version, "p"), "Via") == f"{version[0]}.{version[1]} p"


def test_without_controls_replaces_controls_but_tab():
    headers = [("X-A", "a\x01b\x1bc\x7fd"), ("X-Tab", "a\tb"), ("X-Text", "café \udce9")]
    assert without_controls(headers) == [
        ("X-A", "a b c d"),
        ("X-Tab", "a\tb"),  # HTAB is field whitespace
        ("X-Text", "café \udce9"),  # text and escaped non-UTF-8 bytes are kept
    ]


# --- censor_request_headers ------------------------------------------------------------------

BROWSER = [
    ("Host", "example.com"),
    ("User-Agent", "Firefox/140"),
    ("Referer", "http://a.example/"),
    ("referer", "http://b.example/"),
    ("Accept", "*/*"),
]
CENSOR = [
    ([], BROWSER),  # no rules: as sent
    (  # replaced at its place
        [("User-Agent", "Mozilla/5.0 (generic)")],
        [
            ("Host", "example.com"),
            ("User-Agent", "Mozilla/5.0 (generic)"),
            ("Referer", "http://a.example/"),
            ("referer", "http://b.example/"),
            ("Accept", "*/*"),
        ],
    ),
    (  # "" removes every one of that name, whatever its case
        [("REFERER", "")],
        [("Host", "example.com"), ("User-Agent", "Firefox/140"), ("Accept", "*/*")],
    ),
    (  # several of one name become one
        [("Referer", "http://example.com/")],
        [
            ("Host", "example.com"),
            ("User-Agent", "Firefox/140"),
            ("Referer", "http://example.com/"),
            ("Accept", "*/*"),
        ],
    ),
    ([("X-Forwarded-For", "1.2.3.4"), ("From", "")], BROWSER),  # absent: never added
    (  # rules apply in order
        [("User-Agent", ""), ("Referer", ""), ("Accept", "text/html")],
        [("Host", "example.com"), ("Accept", "text/html")],
    ),
]


@pytest.mark.parametrize(("rules", "expected"), CENSOR)
def test_censor(rules, expected):
    assert censor(list(BROWSER), rules) == expected
