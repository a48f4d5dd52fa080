"""The URL filters (wwwproxy.http.filters): the pattern syntax, the lookups, blocklists, the
verdict per URL and the replacement a blocked URL gets, as tables."""

from __future__ import annotations

import pytest

from wwwproxy.http.filters import (
    EMPTY_GIF,
    Blocklist,
    Filters,
    PatternSet,
    Replacement,
    Treatment,
    parse_blocklist,
    parse_pattern,
    replacement_for,
)
from wwwproxy.url import canonicalize

PATTERNS = [
    "*.doubleclick.net",
    "example.com/ads/*",
    "*/track.gif",
    "https://secure.example:8443",
    "http://plain.example",
    "shop.example/cart?*",
    "[::1]:9000",
    "Bücher.Example",
    "*.cdn.example/*.js",
]

#: URL -> the pattern it matches (None: none)
MATCHES = [
    ("http://ad.doubleclick.net/x", "*.doubleclick.net"),
    ("https://a.b.doubleclick.net:8443/", "*.doubleclick.net"),
    ("http://doubleclick.net/", None),  # *.host is its sub-domains, not itself
    ("http://notdoubleclick.net/", None),
    ("http://AD.DoubleClick.NET./x", "*.doubleclick.net"),  # case and trailing dot
    ("http://example.com/ads/banner.png", "example.com/ads/*"),
    ("http://example.com/ads/", "example.com/ads/*"),
    ("http://example.com/ads/x?y=1", "example.com/ads/*"),  # no ? in the pattern: any query
    ("http://example.com/adsx", None),
    ("http://example.com/ads", None),
    ("http://www.example.com/ads/x", None),
    ("http://any.host/track.gif", "*/track.gif"),
    ("http://any.host/track.gif?id=5", "*/track.gif"),
    ("http://any.host/a/track.gif", None),
    ("https://secure.example:8443/a/b", "https://secure.example:8443"),
    ("https://secure.example/", None),  # another port
    ("http://secure.example:8443/", None),  # another scheme
    ("http://plain.example/x", "http://plain.example"),
    ("http://plain.example:80/x", "http://plain.example"),
    ("https://plain.example/x", None),
    ("http://shop.example/cart?item=1", "shop.example/cart?*"),
    ("http://shop.example/cart", None),  # a ? in the pattern: path and query
    ("http://[::1]:9000/x", "[::1]:9000"),
    ("http://[0:0::1]:9000/x", "[::1]:9000"),  # the URL layer's spelling of both
    ("http://[::1]:9001/x", None),
    ("http://xn--bcher-kva.example/", "Bücher.Example"),
    ("http://bücher.example/", "Bücher.Example"),
    ("http://img.cdn.example/lib/app.js", "*.cdn.example/*.js"),
    ("http://img.cdn.example/lib/app.css", None),
    ("http://cdn.example/app.js", None),
    ("http://other.example/", None),
]


@pytest.mark.parametrize(("url", "expected"), MATCHES)
def test_pattern_set_matches(url: str, expected: str | None) -> None:
    patterns = PatternSet(map(parse_pattern, PATTERNS))
    assert patterns.match(canonicalize(url)) == expected


@pytest.mark.parametrize(
    ("text", "scheme", "host", "subdomains", "port", "path"),
    [
        ("example.com", None, "example.com", False, None, False),
        ("  Example.COM.  ", None, "example.com", False, None, False),
        ("*", None, "", False, None, False),
        ("*.example.com", None, "example.com", True, None, False),
        ("*://example.com", None, "example.com", False, None, False),
        ("HTTPS://example.com:443/x", "https", "example.com", False, 443, True),
        ("*/x", None, "", False, None, True),
        ("[::1]", None, "[::1]", False, None, False),
        ("10.0.0.1:8080", None, "10.0.0.1", False, 8080, False),
    ],
)
def test_parse_pattern(
    text: str, scheme: str | None, host: str, subdomains: bool, port: int | None, path: bool
) -> None:
    p = parse_pattern(text)
    assert (p.scheme, p.host, p.subdomains, p.port, p.path is not None) == (
        scheme,
        host,
        subdomains,
        port,
        path,
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no host"),
        ("/ads/*", "no host"),
        ("ftp://example.com", "scheme must be http, https or *"),
        ("ads*.example.com", "a host is *, example.com or *.example.com"),
        ("*example.com", "a host is *, example.com or *.example.com"),
        ("example.com:0", "port must be a number from 1 to 65535"),
        ("example.com:http", "port must be a number from 1 to 65535"),
        ("exa mple.com", "bad pattern"),
        ("[::1]x", "unexpected"),
        ("user@example.com", "not a host name"),
    ],
)
def test_bad_patterns_say_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("*", r"\*")):
        parse_pattern(text)


def test_path_glob_takes_nothing_but_star() -> None:
    p = PatternSet([parse_pattern("example.com/a.b+(c)[d]/*")])
    assert p.match(canonicalize("http://example.com/a.b+(c)[d]/x"))
    assert p.match(canonicalize("http://example.com/aXb+(c)[d]/x")) is None


BLOCKLIST = """\
# a hosts file
127.0.0.1 localhost
::1 ip6-localhost ip6-loopback
0.0.0.0 ads.example tracker.example   # two on one line
127.0.0.1\tAds2.Example.
::   v6sink.example
plain.example
[Adblock Plus 2.0]
! an AdBlock comment
||adnet.example^
||adnet.example/path^
||opts.example^$third-party
192.168.1.1 router.example
example.com##.ad-banner
bad_ho$t.example
0.0.0.0 0.0.0.0
0.0.0.0 127.0.0.1
0.0.0.0 10.1.2.3
"""


def test_blocklist_formats_and_problems() -> None:
    found = parse_blocklist(BLOCKLIST.splitlines(), "list.txt")
    assert found.hosts == {
        "ads.example",
        "tracker.example",
        "ads2.example",
        "v6sink.example",
        "plain.example",
    }
    assert found.domains == {"adnet.example"}
    # an address is no host name: never blocked (it would block the machine itself)
    assert [p.split(":", 2)[1] for p in found.problems] == ["11", "12", "13", "14", "15", "18"]
    assert "an address" in found.problems[-1]
    assert all(p.startswith("list.txt:") for p in found.problems)
    assert "only ||host^" in found.problems[1]
    assert "0.0.0.0 or 127.0.0.1" in found.problems[2]


@pytest.mark.parametrize(
    ("url", "blocked"),
    [
        ("http://ads.example/x", True),
        ("http://sub.ads.example/x", False),  # a hosts-file line is that host only
        ("http://adnet.example/", True),
        ("http://deep.sub.adnet.example/", True),  # ||host^ is its sub-domains too
        ("http://localhost/", False),
        ("http://127.0.0.1:8000/", False),
        ("http://10.1.2.3/", False),
        ("http://router.example/", False),
        ("https://tracker.example:8443/", True),
    ],
)
def test_blocklist_hosts_in_dont_get(url: str, blocked: bool) -> None:
    filters = Filters(blocklist=parse_blocklist(BLOCKLIST.splitlines(), "list.txt"))
    verdict = filters.verdict(canonicalize(url))
    assert (verdict.treatment is Treatment.BLOCK) is blocked


FILTERS = Filters(
    dont_get=["*.ads.example", "site.example/ads/*"],
    dont_cache=["site.example/live/*", "*.ads.example/never"],
    dont_queue=["site.example/big/*", "site.example/live/x"],
    local_net=["*.lan", "router.lan", "site.example/ads/local"],
)


@pytest.mark.parametrize(
    ("url", "treatment", "queue"),
    [
        ("http://site.example/", Treatment.NORMAL, True),
        ("http://x.ads.example/never", Treatment.BLOCK, False),  # dont_get first
        ("http://site.example/ads/local", Treatment.BLOCK, False),
        ("http://nas.lan/share", Treatment.DIRECT, False),
        ("http://router.lan/", Treatment.DIRECT, False),
        ("http://site.example/live/x", Treatment.UNCACHED, False),
        ("http://site.example/big/iso", Treatment.NORMAL, False),
    ],
)
def test_verdicts(url: str, treatment: Treatment, queue: bool) -> None:
    verdict = FILTERS.verdict(canonicalize(url))
    assert (verdict.treatment, verdict.queue) == (treatment, queue)
    assert verdict.cache is (treatment is Treatment.NORMAL)
    assert (verdict.pattern is None) is (treatment is Treatment.NORMAL and queue)


def test_listed_in_names_the_config_key() -> None:
    names = [
        FILTERS.verdict(canonicalize(u)).listed_in
        for u in (
            "http://x.ads.example/",
            "http://nas.lan/",
            "http://site.example/live/y",
            "http://site.example/big/iso",
            "http://site.example/",
        )
    ]
    assert names == ["dont_get", "local_net", "dont_cache", "dont_queue", None]


def test_no_filters_is_normal_at_once() -> None:
    filters = Filters()
    assert filters.empty
    verdict = filters.verdict(canonicalize("http://example.com/"))
    assert (verdict.treatment, verdict.queue, verdict.pattern) == (Treatment.NORMAL, True, None)


@pytest.mark.parametrize(
    ("patterns", "host", "port", "expected"),
    [
        (["*.ads.example"], "x.ads.example", 443, "*.ads.example"),
        (["ads.example"], "ads.example", 8443, "ads.example"),
        (["https://ads.example:8443"], "ads.example", 8443, "https://ads.example:8443"),
        (["https://ads.example:8443"], "ads.example", 443, None),
        (["http://ads.example"], "ads.example", 443, None),  # plain HTTP only
        (["ads.example/x/*"], "ads.example", 443, None),  # a path: only inside the tunnel
        (["*"], "any.example", 443, "*"),
        (["[::1]"], "::1", 443, "[::1]"),
    ],
)
def test_connect_blocked_by_host_patterns(
    patterns: list[str], host: str, port: int, expected: str | None
) -> None:
    assert Filters(dont_get=patterns).blocks_connect(host, port) == expected


@pytest.mark.parametrize(
    ("patterns", "host", "port", "direct"),
    [
        (["*.lan"], "nas.lan", 443, True),
        (["192.168.1.1"], "192.168.1.1", 8443, True),
        (["http://router.lan"], "router.lan", 443, False),  # plain HTTP only
        (["router.lan/admin/*"], "router.lan", 443, False),
        (["*.lan"], "example.com", 443, False),
    ],
)
def test_local_net_connect(patterns: list[str], host: str, port: int, direct: bool) -> None:
    assert Filters(local_net=patterns).direct_connect(host, port) is direct


def test_connect_blocked_by_blocklist() -> None:
    filters = Filters(blocklist=parse_blocklist(["||ads.example^"], "b"))
    assert filters.blocks_connect("cdn.ads.example", 443) == "blocklist: ||ads.example^"
    assert filters.blocks_connect("example.org", 443) is None


@pytest.mark.parametrize(
    ("url", "accept", "expected"),
    [
        ("http://a.example/pixel.gif", None, Replacement.IMAGE),
        ("http://a.example/x/Banner.PNG?x=1", "text/html", Replacement.IMAGE),
        ("http://a.example/i.svg", None, Replacement.IMAGE),
        ("http://a.example/lib.js", "*/*", Replacement.SCRIPT),
        ("http://a.example/lib.mjs", None, Replacement.SCRIPT),
        ("http://a.example/s.css", None, Replacement.STYLE),
        ("http://a.example/track", "image/avif,image/webp,*/*;q=0.8", Replacement.IMAGE),
        ("http://a.example/style", "text/css,*/*;q=0.1", Replacement.STYLE),
        ("http://a.example/s", "application/javascript", Replacement.SCRIPT),
        ("http://a.example/", "text/html,application/xhtml+xml", Replacement.PAGE),
        ("http://a.example/page", None, Replacement.PAGE),
        ("http://a.example/dir.gif/page", None, Replacement.PAGE),  # a directory's dot
    ],
)
def test_replacement(url: str, accept: str | None, expected: Replacement) -> None:
    assert replacement_for(canonicalize(url), accept) is expected


def test_empty_gif_is_a_1x1_gif() -> None:
    assert EMPTY_GIF.startswith(b"GIF89a") and EMPTY_GIF.endswith(b";")
    assert int.from_bytes(EMPTY_GIF[6:8], "little") == 1
    assert int.from_bytes(EMPTY_GIF[8:10], "little") == 1


def test_verdicts_are_remembered_and_bounded() -> None:
    filters = Filters(dont_get=["*/x"])
    for i in range(5000):
        filters.verdict(canonicalize(f"http://h{i}.example/y"))
    assert 0 < len(filters._memo) <= 4096  # noqa: SLF001
    assert filters.verdict(canonicalize("http://h1.example/x")).treatment is Treatment.BLOCK


def test_a_large_blocklist_is_looked_up_by_sets() -> None:
    """100,000 blocklist lines become dict entries probed by the URL host's suffixes, never a
    pattern per entry to try in turn (the load time and a hit's cost are measured by hand:
    see docs/filters.md)."""
    lines = [f"0.0.0.0 ads{i}.tracker{i % 97}.example" for i in range(50_000)]
    lines += [f"||net{i}.example^" for i in range(50_000)]
    blocklist = parse_blocklist(lines, "big.txt")
    filters = Filters(blocklist=blocklist)
    assert len(blocklist) == 100_000 and not blocklist.problems
    patterns = filters.dont_get
    assert len(patterns.exact) == 100_000 and len(patterns.domains) == 50_000
    assert not patterns._detailed_any and not patterns._detailed_exact  # noqa: SLF001
    assert not patterns._detailed_domains  # noqa: SLF001
    assert filters.verdict(canonicalize("http://x.net49999.example/")).treatment is (
        Treatment.BLOCK
    )
    assert filters.verdict(canonicalize("http://ads7.tracker7.example/")).treatment is (
        Treatment.BLOCK
    )
    assert filters.verdict(canonicalize("http://ads7.tracker8.example/")).treatment is (
        Treatment.NORMAL
    )


def test_blocklist_merges_files() -> None:
    merged = Blocklist()
    parse_blocklist(["a.example"], "one", merged)
    parse_blocklist(["||b.example^", "x y z"], "two", merged)
    assert merged.hosts == {"a.example"} and merged.domains == {"b.example"}
    assert merged.problems == ["two:2: a hosts-file line must map to 0.0.0.0 or 127.0.0.1: 'x y z'"]
