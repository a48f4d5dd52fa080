"""The CDXJ searchable key (SURT) rules of canonical-url-rules.md."""

from __future__ import annotations

import pytest

from wwwproxy.url import canonicalize, surt


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://www.example.com/a/B?x=1", "(com,example,www,)/a/b?x=1"),
        ("http://example.com/", "(com,example,)/"),
        ("https://example.com/", "(com,example,)/"),
        ("http://example.com:8080/", "(com,example,:8080)/"),
        ("http://127.0.0.1:8080/", "(127.0.0.1:8080)/"),
        ("http://127.0.0.1/A", "(127.0.0.1)/a"),
        ("http://[::1]/", "([::1])/"),
        ("http://[::1]:8080/x", "([::1]:8080)/x"),
        ("http://bücher.example/", "(example,bücher,)/"),
        ("http://xn--bcher-kva.example/", "(example,bücher,)/"),
        ("http://example.com./", "(,com,example,)/"),
        ("http://user:pw@example.com/p", "(com,example,)/p"),
        ("http://localhost/", "(localhost,)/"),
        ("http://h/?Q=%2B", "(h,)/?q=%2b"),
    ],
)
def test_surt_rules(url: str, expected: str) -> None:
    assert surt(canonicalize(url).file) == expected


def test_invalid_punycode_label_stays_ascii() -> None:
    assert surt(canonicalize("http://xn--zz.example/").file) == "(example,xn--zz,)/"


def test_non_get_key_is_lower_cased() -> None:
    key = "http://example.org/chat?__wb_method=POST&__wb_post_data=aGVsbG8="
    assert surt(key) == "(org,example,)/chat?__wb_method=post&__wb_post_data=agvsbg8="


def test_not_a_key() -> None:
    with pytest.raises(ValueError):
        surt("example.com/")


def test_host_range_is_contiguous_prefix() -> None:
    keys = sorted(
        surt(canonicalize(u).file).encode()
        for u in (
            "http://example.com/",
            "http://example.com/z",
            "http://a.example.com/",
            "http://example.co/",
            "http://example.community/",
            "http://xexample.com/",
        )
    )
    domain = [k for k in keys if k.startswith(b"(com,example,")]
    assert [k.decode() for k in domain] == [
        "(com,example,)/",
        "(com,example,)/z",
        "(com,example,a,)/",
    ]
