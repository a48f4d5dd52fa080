"""The network log of a rendered page (:mod:`wwwproxy.fetch.render_network`): when the network
is idle, how requests count, and that its memory is bounded, as tables over fed-in events."""

from __future__ import annotations

import pytest

from wwwproxy.fetch.render_network import MAX_LISTED, Loaded, NetworkLog, Tally, browsers_own

from .test_progress import Clock


@pytest.mark.parametrize(
    ("events", "idle"),
    [
        ([], False),  # just made: nothing has been quiet for long enough
        ([("wait", 0.6)], True),
        ([("start", 1), ("wait", 5)], False),  # a request in flight is never idle
        ([("start", 1), ("end", 1), ("wait", 0.4)], False),
        ([("start", 1), ("end", 1), ("wait", 0.5)], True),
        ([("start", 1), ("start", 2), ("end", 1), ("wait", 1)], False),
        ([("start", 1), ("start", 2), ("end", 1), ("end", 2), ("wait", 1)], True),
        ([("wait", 1), ("touch", 0), ("wait", 0.2)], False),  # a scroll counts anew
        ([("start", 1), ("end", 1), ("end", 1), ("wait", 1)], True),  # never below zero
        ([("start", 1), ("answer", 1), ("wait", 0.6)], False),
    ],
)
def test_network_idle(events: list[tuple[str, float]], idle: bool) -> None:
    clock = Clock()
    log = NetworkLog(clock)
    for kind, value in events:
        if kind == "wait":
            clock.now += value
        elif kind == "start":
            log.started(int(value), f"http://example.com/{value}", "GET")
        elif kind == "end":
            log.ended(int(value))
        elif kind == "answer":
            log.answered(int(value), 200, False)
        else:
            log.touch()
    assert log.idle(0.5) is idle


def test_network_log_lists_and_counts_the_requests_but_the_document() -> None:
    log = NetworkLog(Clock())
    log.started(1, "http://example.com/", "GET", document=True)
    log.started(2, "http://example.com/a.js", "GET")
    log.started(3, "http://example.com/api", "POST")
    log.started(4, "http://example.com/b.png", "GET")
    log.started(5, "http://example.com/c.png", "GET")
    assert log.document_status is None
    log.answered(1, 200, True)
    log.answered(2, 404, True)
    log.ended(3, "net::ERR_FAILED")
    log.answered(4, 200, False)
    log.ended(4)
    log.answered(5, 200, True)
    log.ended(5)
    assert log.requests() == [
        Loaded("http://example.com/api", "POST", None, False, "net::ERR_FAILED"),
        Loaded("http://example.com/b.png", "GET", 200, False),
        Loaded("http://example.com/c.png", "GET", 200, True),
        Loaded("http://example.com/a.js", "GET", 404, True),  # still in flight
    ]
    assert log.tally() == Tally(requests=4, fetched=1, from_cache=1, failed=2)
    assert log.inflight == 2  # the document and a.js have not ended
    assert log.document_status == 200
    log.ended(1)
    log.ended(2)
    assert log.inflight == 0 and log.tally() == Tally(4, 1, 1, 2)


def test_network_log_memory_is_bounded_whatever_the_page_asks() -> None:
    log = NetworkLog(Clock())
    for key in range(MAX_LISTED * 3):
        log.started(key, f"http://example.com/{key}", "GET")
        log.answered(key, 200, False)
        log.ended(key)
    assert len(log.requests()) == MAX_LISTED
    assert log.tally() == Tally(requests=MAX_LISTED * 3, fetched=MAX_LISTED * 3)


@pytest.mark.parametrize(
    ("initiator", "url", "own"),
    [
        ("other", "http://example.com/favicon.ico", True),
        ("parser", "http://example.com/favicon.ico", False),  # the page's <link rel=icon>
        ("other", "http://example.com/", False),  # a navigation
        ("script", "http://example.com/api/favicon.ico", False),
    ],
)
def test_the_browsers_own_favicon_probe_is_not_the_pages(
    initiator: str, url: str, own: bool
) -> None:
    event = {"initiator": {"type": initiator}, "request": {"url": url}}
    assert browsers_own(event) is own
