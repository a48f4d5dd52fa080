"""Crawl scope as URL comparisons: host, registrable domain, URL prefix."""

from __future__ import annotations

import pytest

from wwwproxy.fetch.scope import registrable_domain, same_domain, same_host, under_prefix


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("http://example.com/a", "https://EXAMPLE.com:8443/b", True),
        ("http://example.com/", "http://example.com./", True),
        ("http://www.example.com/", "http://example.com/", False),
        ("http://example.com/", "not a url at all", False),
        ("http://[::1]/", "http://[0::1]:8080/", True),
    ],
)
def test_same_host(a: str, b: str, expected: bool) -> None:
    assert same_host(a, b) is expected


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.example.com", "example.com"),
        ("a.b.c.example.com", "example.com"),
        ("example.com", "example.com"),
        ("localhost", "localhost"),
        ("www.bbc.co.uk", "bbc.co.uk"),
        ("news.example.com.au", "example.com.au"),
        ("www.abc.de", "abc.de"),
        ("www.bbc.com", "bbc.com"),
        ("Example.COM.", "example.com"),
        ("192.168.1.20", "192.168.1.20"),
        ("[::1]", "[::1]"),
    ],
)
def test_registrable_domain_approximation(host: str, domain: str) -> None:
    assert registrable_domain(host) == domain


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("http://www.example.com/", "https://static.example.com/x", True),
        ("http://www.example.co.uk/", "http://img.example.co.uk/", True),
        ("http://www.example.co.uk/", "http://www.other.co.uk/", False),
        ("http://example.com/", "http://example.org/", False),
        ("http://10.0.0.1/", "http://10.0.0.2/", False),
        ("http://example.com/", "::", False),
    ],
)
def test_same_domain(a: str, b: str, expected: bool) -> None:
    assert same_domain(a, b) is expected


@pytest.mark.parametrize(
    ("url", "prefix", "expected"),
    [
        ("http://example.com/docs/a.html", "http://example.com/docs/", True),
        ("http://example.com/docs/", "http://example.com/docs/", True),
        ("http://example.com/docs", "http://example.com/docs/", False),
        ("http://example.com/docs", "http://example.com/docs", True),
        ("http://example.com/docs/x", "http://example.com/docs", True),
        ("http://example.com/docs?x=1", "http://example.com/docs", True),
        ("http://example.com/docs2/x", "http://example.com/docs", False),
        ("http://example.com/docs.html", "http://example.com/docs", False),
        ("http://EXAMPLE.com:80/docs/%7Ea", "http://example.com/docs/", True),
        ("http://example.com/docs/../etc/x", "http://example.com/docs/", False),
        ("https://example.com/docs/a", "http://example.com/docs/", False),
        ("http://example.com:8080/docs/a", "http://example.com/docs/", False),
        ("http://example.com.evil/docs/a", "http://example.com/docs/", False),
        ("http://example.com/x?a=1&b=2", "http://example.com/x?a=1", True),
        ("http://example.com/anything", "http://example.com", True),
        ("http://example.com/", "not a url at all", False),
    ],
)
def test_under_prefix(url: str, prefix: str, expected: bool) -> None:
    assert under_prefix(url, prefix) is expected


RAW_URLS = [
    "http://example.com/a",
    "https://EXAMPLE.com:8443/b?q=1",
    "http://example.com./",
    "http://Www.Example.COM",
    "http://[::1]/",
    "http://[0::1]:8080/x",
    "http://[2001:DB8::1]/",
    "http://127.0.0.1:8080/",
    "http://0x7f.1/",
    "http://2130706433/",
    "http://exämple.com/ü",
    "http://xn--exmple-cua.com/",
    "http://user:pa%2Fss@example.com/",
    "http://a@b@example.com/",
    "http://ex%41mple.com/",
    "http://example.com:80/",
    "https://example.com:443/p/../q",
    "http://sub.example.co.uk:1/path/with@sign",
    "http://example.com/path?url=http://other.org/",
]


@pytest.mark.parametrize("raw", RAW_URLS)
def test_the_host_read_off_a_canonical_url_is_the_one_same_host_finds(raw: str) -> None:
    """A crawl's links and tasks are canonical: their host is read off the string, and that
    must be the host canonicalizing them again gives (or None: then they are parsed)."""
    from wwwproxy.fetch.scope import _host, canonical_host
    from wwwproxy.url import canonicalize

    file = canonicalize(raw).file
    host = canonical_host(file)
    assert host is None or host == _host(file)
    if "@" not in file:
        assert host is not None  # every plain canonical URL is read off
