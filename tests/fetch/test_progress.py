"""What a fetch shows: plain lines off a terminal, one updating line on it, the summary."""

from __future__ import annotations

import io

import pytest

from wwwproxy.fetch.progress import Progress, format_bytes, format_summary
from wwwproxy.fetch.tasks import Outcome, Result, Summary

OK = Result("http://example.com/", Outcome.FETCHED, 200, 12_630)
FRESH = Result("http://example.com/a.css", Outcome.FRESH, 200)
GONE = Result("http://example.com/gone", Outcome.FAILED, 404, 120, "HTTP 404 Not Found")
BLOCKED = Result("http://example.com/private/", Outcome.ROBOTS, problem="disallowed by robots.txt")
POSTED = Result("http://example.com/form", Outcome.FETCHED, 200, 5, method="POST")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (12_630, "12.3 KiB"), (5 * 2**30, "5.0 GiB")],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = Progress(out)
    assert not progress.tty  # a StringIO is no terminal
    for r in (OK, FRESH, GONE, BLOCKED, POSTED):
        progress.result(r)
    progress.close()
    assert out.getvalue() == (
        "fetched 200 12.3 KiB http://example.com/\n"
        "fresh   200 http://example.com/a.css\n"
        "FAILED  404 http://example.com/gone: HTTP 404 Not Found\n"
        "robots  http://example.com/private/: disallowed by robots.txt\n"
        "fetched 200 5 B POST http://example.com/form\n"
    )
    c = progress.counts
    assert (c.fetched, c.fresh, c.failed, c.robots, c.bytes) == (2, 1, 1, 1, 12_630 + 120 + 5)


def test_one_updating_line_on_a_terminal() -> None:
    out = io.StringIO()
    clock = Clock()
    progress = Progress(out, tty=True, clock=clock)
    progress.queued(3)
    progress.taken()
    progress.started("http://example.com/")
    clock.now += 1
    progress.stopped()
    progress.result(OK)
    clock.now += 1
    progress.taken()
    progress.result(FRESH)
    text = out.getvalue()
    assert "\n" not in text  # only \r redraws so far
    assert text.count("\r") >= 2
    last = text.rsplit("\r", 1)[1]
    assert last.startswith("2/3 done: 1 fetched, 1 fresh, 12.3 KiB, 6.2 KiB/s")  # in 2 s
    assert last.endswith("\x1b[K")
    clock.now += 1
    progress.taken()
    progress.result(GONE)  # a failure gets a line of its own that stays
    assert "\nFAILED  404 http://example.com/gone" not in out.getvalue()
    assert "\r\x1b[KFAILED  404 http://example.com/gone: HTTP 404 Not Found\n" in out.getvalue()
    assert out.getvalue().rsplit("\n", 1)[1].startswith("\r3/3 done: 1 fetched, 1 fresh, 1 failed")
    progress.close()
    assert out.getvalue().endswith("\r\x1b[K")


def test_redraws_are_throttled() -> None:
    out = io.StringIO()
    clock = Clock()
    progress = Progress(out, tty=True, clock=clock)
    for _ in range(50):
        progress.queued()
    assert out.getvalue().count("\r") == 1
    clock.now += 1
    progress.queued()
    assert out.getvalue().count("\r") == 2


def test_a_changed_outcome_moves_the_count() -> None:
    progress = Progress(None)
    progress.queued(2)
    progress.taken()
    progress.result(Result("http://example.com/loop", Outcome.FETCHED, 302, 0))
    progress.result(Result("http://example.com/loop", Outcome.FAILED, 302, 0, "redirect loop"))
    c = progress.counts
    assert (c.fetched, c.failed, c.done, c.queued) == (0, 1, 1, 1)


def test_summary() -> None:
    summary = Summary({r.label: r for r in (OK, FRESH, GONE, BLOCKED)}, elapsed=2.0)
    assert format_summary(summary) == (
        "4 URLs: 1 fetched (12.5 KiB in 2.0 s, 6.2 KiB/s), 1 already fresh, 1 failed, "
        "1 disallowed by robots.txt\n"
        "failed:\n"
        "  http://example.com/gone: HTTP 404 Not Found"
    )
    assert format_summary(Summary({}, 0.0)) == (
        "0 URLs: 0 fetched (0 B in 0.0 s, 0 B/s), 0 already fresh, 0 failed"
    )
