"""The browsers' and systems' background requests (wwwproxy.http.background): which URLs are
one, what a connectivity check is answered offline, and which offline misses are queued."""

from __future__ import annotations

from pathlib import Path

import pytest

from wwwproxy.http.background import (
    CHECKS,
    ENDPOINTS,
    Refusal,
    background_endpoint,
    queue_refusal,
)
from wwwproxy.http.background_reference import reference
from wwwproxy.http.filters import Filters, parse_pattern
from wwwproxy.url import canonicalize

#: URL -> (the pattern it matches, the status it is answered with offline: None for a 503)
ENDPOINT_CASES = [
    # Chromium's own, as seen from a headless Chromium offline
    (
        "http://clients2.google.com/time/1/current?cup2key=9:abc&cup2hreq=e3b0",
        (
            "clients2.google.com",
            None,
        ),
    ),
    (
        "http://update.googleapis.com/service/update2/json?cup2key=1",
        ("update.googleapis.com", None),
    ),
    (
        "https://optimizationguide-pa.googleapis.com/v1:GetHints",
        (
            "optimizationguide-pa.googleapis.com",
            None,
        ),
    ),
    ("http://r3---sn-4g5e6nzs.gvt1.com/edgedl/chrome/x.crx", ("*.gvt1.com", None)),
    ("http://redirector.gvt1.com/edgedl/x", ("*.gvt1.com", None)),
    (
        "https://safebrowsing.googleapis.com/v4/threatListUpdates:fetch",
        (
            "safebrowsing.googleapis.com",
            None,
        ),
    ),
    # Firefox's
    (
        "http://detectportal.firefox.com/success.txt?ipv4",
        (
            "detectportal.firefox.com/success.txt",
            200,
        ),
    ),
    (
        "http://detectportal.firefox.com/canonical.html",
        (
            "detectportal.firefox.com/canonical.html",
            200,
        ),
    ),
    ("http://detectportal.firefox.com/other", ("detectportal.firefox.com", None)),
    (
        "https://incoming.telemetry.mozilla.org/submit/telemetry/x",
        (
            "incoming.telemetry.mozilla.org",
            None,
        ),
    ),
    (
        "https://firefox.settings.services.mozilla.com/v1/buckets",
        (
            "*.services.mozilla.com",
            None,
        ),
    ),
    ("https://push.services.mozilla.com/", ("*.services.mozilla.com", None)),
    ("https://aus5.mozilla.org/update/6/Firefox/x", ("aus5.mozilla.org", None)),
    # the operating systems' connectivity checks
    ("http://connectivitycheck.gstatic.com/generate_204", ("*/generate_204", 204)),
    ("http://www.gstatic.com/generate_204", ("*/generate_204", 204)),
    ("http://clients3.google.com/generate_204", ("*/generate_204", 204)),
    ("http://captive.apple.com/hotspot-detect.html", ("captive.apple.com", 200)),
    (
        "http://www.apple.com/library/test/success.html",
        (
            "www.apple.com/library/test/success.html",
            200,
        ),
    ),
    (
        "http://www.msftconnecttest.com/connecttest.txt",
        (
            "www.msftconnecttest.com/connecttest.txt",
            200,
        ),
    ),
    (
        "http://nmcheck.gnome.org/check_network_status.txt",
        (
            "nmcheck.gnome.org/check_network_status.txt",
            200,
        ),
    ),
    ("http://network-test.debian.org/nm", ("network-test.debian.org/nm", 200)),
    ("http://connectivity-check.ubuntu.com./", ("connectivity-check.ubuntu.com", 204)),
    # what a person asks for is none of them
    ("http://www.google.com/search?q=generate_204", None),
    ("http://www.gstatic.com/images/logo.png", None),
    ("http://www.apple.com/", None),
    ("http://www.mozilla.org/firefox/", None),
    ("http://example.com/time/1/current", None),
    ("http://google.com/", None),
    ("http://notclients2.google.com/", None),
    ("http://www.msftconnecttest.com/redirect", None),
    ("http://127.0.0.1:8000/page.html", None),
]


@pytest.mark.parametrize(("url", "expected"), ENDPOINT_CASES)
def test_background_endpoints(url: str, expected: tuple[str, int | None] | None) -> None:
    endpoint = background_endpoint(canonicalize(url))
    if expected is None:
        assert endpoint is None
        return
    assert endpoint is not None
    pattern, status = expected
    assert endpoint.pattern == pattern
    assert (endpoint.answer.status if endpoint.answer else None) == status


#: the answers the clients compare against, exactly (their sources' expected strings)
ANSWERS = [
    ("http://detectportal.firefox.com/success.txt", b"success\n"),
    (
        "http://detectportal.firefox.com/canonical.html",
        b'<meta http-equiv="refresh" content="0;url=https://support.mozilla.org/kb/captive-portal"/>',
    ),
    (
        "http://captive.apple.com/hotspot-detect.html",
        b"<HTML><HEAD><TITLE>Success</TITLE></HEAD><BODY>Success</BODY></HTML>",
    ),
    ("http://www.msftconnecttest.com/connecttest.txt", b"Microsoft Connect Test"),
    ("http://www.msftncsi.com/ncsi.txt", b"Microsoft NCSI"),
    ("http://nmcheck.gnome.org/check_network_status.txt", b"NetworkManager is online\n"),
    ("http://connectivitycheck.gstatic.com/generate_204", b""),
]


@pytest.mark.parametrize(("url", "body"), ANSWERS)
def test_connectivity_checks_get_what_they_expect_with_no_portal(url: str, body: bytes) -> None:
    endpoint = background_endpoint(canonicalize(url))
    assert endpoint is not None and endpoint.answer is not None
    assert endpoint.answer.body == body


def test_every_entry_parses_says_why_and_is_listed_once() -> None:
    patterns = [e.pattern for e in ENDPOINTS]
    assert len(patterns) == len(set(patterns))
    for endpoint in ENDPOINTS:
        assert parse_pattern(endpoint.pattern).text == endpoint.pattern
        assert endpoint.why
    assert all(e.answer is not None for e in CHECKS)
    assert all(e.answer is None for e in ENDPOINTS if e not in CHECKS)


FILTERS = Filters(dont_queue=["*/*.iso"], dont_cache=["bank.example"])
GET_HEAD = ("GET", "HEAD")

#: (url, method, queue_methods, queue_background) -> the refusal's (listed_in, pattern) or None
REFUSALS = [
    ("http://example.com/", "GET", GET_HEAD, False, None),
    ("http://example.com/", "HEAD", GET_HEAD, False, None),
    ("http://example.com/", "POST", GET_HEAD, False, ("queue_methods", "POST")),
    ("http://example.com/", "POST", (*GET_HEAD, "POST"), False, None),
    ("http://example.com/", "GET", ("POST",), False, ("queue_methods", "GET")),
    ("http://example.com/x.iso", "GET", GET_HEAD, False, ("dont_queue", "*/*.iso")),
    ("http://bank.example/", "GET", GET_HEAD, False, ("dont_cache", "bank.example")),
    # the built-in list, unless queue_background; dont_queue is asked first
    (
        "http://clients2.google.com/time/1/current",
        "GET",
        GET_HEAD,
        False,
        (
            "queue_background",
            "clients2.google.com",
        ),
    ),
    ("http://clients2.google.com/time/1/current", "GET", GET_HEAD, True, None),
    (
        "http://update.googleapis.com/service/update2/json",
        "POST",
        GET_HEAD,
        False,
        (
            "queue_background",
            "update.googleapis.com",
        ),
    ),
    (
        "http://update.googleapis.com/service/update2/json",
        "POST",
        GET_HEAD,
        True,
        (
            "queue_methods",
            "POST",
        ),
    ),
    ("http://clients2.google.com/x.iso", "GET", GET_HEAD, False, ("dont_queue", "*/*.iso")),
]


@pytest.mark.parametrize(("url", "method", "methods", "background", "expected"), REFUSALS)
def test_which_offline_misses_are_queued(
    url: str,
    method: str,
    methods: tuple[str, ...],
    background: bool,
    expected: tuple[str, str] | None,
) -> None:
    parsed = canonicalize(url)
    refusal = queue_refusal(
        parsed, method, FILTERS.verdict(parsed), methods=methods, background=background
    )
    if expected is None:
        assert refusal is None
        return
    assert isinstance(refusal, Refusal)
    assert (refusal.listed_in, refusal.pattern) == expected
    assert (refusal.endpoint is not None) == (refusal.listed_in == "queue_background")


def test_the_committed_list_for_people_is_what_the_data_generates() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "background-requests.md"
    assert docs.read_text(encoding="utf-8") == reference(), (
        "regenerate it: python -m wwwproxy.http.background_reference > docs/background-requests.md"
    )
    assert all(f"`{e.pattern}`" in reference() for e in ENDPOINTS)
