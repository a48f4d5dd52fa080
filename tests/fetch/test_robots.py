"""robots.txt answers (RFC 9309) for the fetcher."""

from __future__ import annotations

import pytest

from wwwproxy.fetch.robots import MAX_CRAWL_DELAY, parse_robots, robots_url
from wwwproxy.url import canonicalize

ROBOTS = b"""# comment
User-agent: wwwproxy
Disallow: /not-for-us/
Crawl-delay: 2

User-agent: *
Disallow: /private/
Disallow: /tmp
"""


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/", True),
        ("/private/x.html", True),  # only the * group says so; our own group wins
        ("/not-for-us/a", False),
        ("/not-for-us", True),
    ],
)
def test_our_group_applies(path: str, allowed: bool) -> None:
    rules = parse_robots(200, ROBOTS)
    assert rules.allowed(f"http://example.com{path}") is allowed
    assert rules.crawl_delay() == 2


def test_the_star_group_applies_when_we_are_not_named() -> None:
    rules = parse_robots(200, b"User-agent: *\nDisallow: /private/\n")
    assert not rules.allowed(canonicalize("http://example.com/private/a?b=1"))
    assert rules.allowed(canonicalize("http://example.com/public/"))
    assert rules.crawl_delay() is None


def test_crawl_delay_is_capped() -> None:
    rules = parse_robots(200, b"User-agent: *\nCrawl-delay: 86400\nDisallow:\n")
    assert rules.crawl_delay() == MAX_CRAWL_DELAY


@pytest.mark.parametrize("status", [401, 403, 404, 410])
def test_client_errors_allow_everything(status: int) -> None:
    rules = parse_robots(status, b"User-agent: *\nDisallow: /\n")
    assert rules.allowed("http://example.com/anything") and rules.unavailable is None


def test_server_errors_and_no_answer_allow_nothing_and_say_why() -> None:
    failing = parse_robots(503)
    assert not failing.allowed("http://example.com/")
    assert "503" in (failing.unavailable or "")
    gone = parse_robots(None, error="the connection was refused")
    assert not gone.allowed("http://example.com/")
    assert "refused" in (gone.unavailable or "")


def test_bad_bytes_and_a_bom_do_not_break_parsing() -> None:
    rules = parse_robots(200, b"\xef\xbb\xbfUser-agent: *\n# caf\xe9\nDisallow: /x\n")
    assert not rules.allowed("http://example.com/x")
    assert rules.allowed("http://example.com/y")


def test_robots_url_keeps_scheme_host_and_port() -> None:
    assert robots_url(canonicalize("https://Example.COM:8443/a/b?c")) == (
        "https://example.com:8443/robots.txt"
    )
