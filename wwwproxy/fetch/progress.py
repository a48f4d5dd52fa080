"""Progress of a fetch: one updating line on a terminal, one plain line per URL otherwise.

On a terminal the line is redrawn (``\\r``, at most :data:`REDRAW` times a second) with the
counts, bytes, rate and failures; failures are also printed as lines of their own above it, so
they stay on screen.  Not on a terminal (a log, a pipe, cron), each finished URL is one line:

    fetched 200 12.3 KiB http://example.com/
    fresh   200 http://example.com/style.css
    FAILED  404 http://example.com/missing: HTTP 404 Not Found
    robots  http://example.com/private/: disallowed by robots.txt
    links   http://example.com/big.html: 180000 references past max_links_per_page (20000) unread
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from .tasks import Outcome, RenderReport, Result, Summary

__all__ = [
    "REDRAW",
    "Counts",
    "Progress",
    "format_bytes",
    "format_summary",
    "left_out_line",
    "render_line",
    "result_line",
]

REDRAW = 10.0  # times a second, at most


def format_bytes(n: float) -> str:
    """``1.2 MiB``: binary units, three significant figures."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - the loop always returns


@dataclass
class Counts:
    fetched: int = 0
    fresh: int = 0
    failed: int = 0
    robots: int = 0
    bytes: int = 0
    active: int = 0
    queued: int = 0
    outcomes: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.fetched + self.fresh + self.failed + self.robots


def result_line(result: Result) -> str:
    """The plain line for one finished URL."""
    status = "" if result.status is None else f"{result.status} "
    if result.outcome is Outcome.FETCHED:
        return f"fetched {status}{format_bytes(result.size)} {result.label}"
    if result.outcome is Outcome.FRESH:
        return f"fresh   {status}{result.label}"
    if result.outcome is Outcome.ROBOTS:
        return f"robots  {result.label}: {result.problem}"
    return f"FAILED  {status}{result.label}: {result.problem}"


def render_line(label: str, report: RenderReport) -> str:
    """The line for a page rendered in the browser: what its scripts and markup loaded."""
    if report.problem is not None:
        return f"render  {label}: not rendered: {report.problem}"
    text = (
        f"render  {label}: {report.requests} request{'s' if report.requests != 1 else ''} "
        f"({report.fetched} fetched, {report.from_cache} from the cache"
    )
    if report.failed:
        text += f", {report.failed} failed"
    text += ")"
    if report.capped:
        text += ", stopped at the time cap"
    return text


def left_out_line(label: str, left_out: int, bound: int) -> str:
    """The line for a page with more links than ``max_links_per_page`` (``bound``)."""
    return f"links   {label}: {left_out} references past max_links_per_page ({bound}) unread"


class Progress:
    """Receives the prefetcher's events and shows them.  ``stream`` None: silent."""

    def __init__(
        self,
        stream: TextIO | None = sys.stderr,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        if tty is None:
            isatty = getattr(stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty and stream is not None
        self.clock = clock
        self.start = clock()
        self.counts = Counts()
        self._last_draw = -1.0
        self._current = ""
        self._drawn = False

    # -- events --

    def queued(self, n: int = 1) -> None:
        self.counts.queued += n
        self._draw()

    def taken(self) -> None:
        """A queued URL is being worked on (it may turn out to need nothing)."""
        self.counts.queued = max(0, self.counts.queued - 1)

    def started(self, label: str) -> None:
        self.counts.active += 1
        self._current = label
        self._draw()

    def stopped(self) -> None:
        self.counts.active = max(0, self.counts.active - 1)

    def result(self, result: Result) -> None:
        """A URL is finished (or its outcome changed: a fetched page found to loop)."""
        c = self.counts
        previous = c.outcomes.get(result.label)
        if previous is not None:
            setattr(c, previous, getattr(c, previous) - 1)
        name = result.outcome.value
        c.outcomes[result.label] = name
        setattr(c, name, getattr(c, name) + 1)
        if result.outcome is Outcome.FETCHED or (
            result.outcome is Outcome.FAILED and result.size and previous is None
        ):
            c.bytes += result.size
        if self.stream is None:
            return
        if not self.tty:
            self.stream.write(result_line(result) + "\n")
            self.stream.flush()
        elif result.outcome is Outcome.FAILED:
            self._clear()
            self.stream.write(result_line(result) + "\n")
            self._draw(force=True)
        else:
            self._draw()

    def links_left_out(self, label: str, left_out: int, bound: int) -> None:
        """A page had more links than ``bound``: ``left_out`` more references were not read."""
        if self.stream is None:
            return
        self._clear()
        self.stream.write(left_out_line(label, left_out, bound) + "\n")
        if self.tty:
            self._draw(force=True)
        else:
            self.stream.flush()

    def rendered(self, label: str, report: RenderReport) -> None:
        """A page was rendered in the browser (or could not be)."""
        if self.stream is None:
            return
        if self.tty and report.problem is None:
            self._draw()
            return
        self._clear()
        self.stream.write(render_line(label, report) + "\n")
        if self.tty:
            self._draw(force=True)
        else:
            self.stream.flush()

    # -- display --

    def rate(self) -> float:
        elapsed = max(self.clock() - self.start, 1e-6)
        return self.counts.bytes / elapsed

    def line(self) -> str:
        """The status line (without the URL being fetched): done/known, counts, bytes, rate."""
        c = self.counts
        known = c.done + c.active + c.queued
        text = f"{c.done}/{known} done: {c.fetched} fetched, {c.fresh} fresh"
        if c.failed:
            text += f", {c.failed} failed"
        if c.robots:
            text += f", {c.robots} robots"
        return f"{text}, {format_bytes(c.bytes)}, {format_bytes(self.rate())}/s"

    def _draw(self, force: bool = False) -> None:
        if not self.tty or self.stream is None:
            return
        now = self.clock()
        if not force and now - self._last_draw < 1 / REDRAW:
            return
        self._last_draw = now
        width = shutil.get_terminal_size((80, 24)).columns - 1
        text = self.line()
        if self._current and len(text) + 3 < width:
            room = width - len(text) - 2
            label = self._current
            if len(label) > room:
                label = label[: max(room - 1, 0)] + "…"
            text = f"{text}  {label}"
        self.stream.write("\r" + text[:width] + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def _clear(self) -> None:
        if self.tty and self.stream is not None and self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False

    def close(self) -> None:
        """Leave the terminal clean for the summary."""
        if self.stream is None:
            return
        self._clear()
        self.stream.flush()


def format_summary(summary: Summary) -> str:
    """The end-of-run report: counts, bytes, time, and every failure with its reason."""
    c = summary.counts()
    rate = summary.bytes / summary.elapsed if summary.elapsed > 0 else 0.0
    head = (
        f"{c['total']} URL{'s' if c['total'] != 1 else ''}: {c['fetched']} fetched "
        f"({format_bytes(summary.bytes)} in {summary.elapsed:.1f} s, {format_bytes(rate)}/s), "
        f"{c['fresh']} already fresh, {c['failed']} failed"
    )
    if c["robots"]:
        head += f", {c['robots']} disallowed by robots.txt"
    lines = [head]
    left_out = summary.links_left_out
    if left_out:
        pages = len(left_out)
        lines.append(
            f"{sum(left_out.values())} link references not read on {pages} "
            f"page{'s' if pages != 1 else ''} with more links than max_links_per_page:"
        )
        lines += [f"  {label}: {n}" for label, n in left_out.items()]
    rendered = summary.rendered
    if rendered:
        reports = rendered.values()
        requests = sum(r.requests for r in reports)
        line = (
            f"{len(rendered)} page{'s' if len(rendered) != 1 else ''} rendered in the browser: "
            f"{requests} request{'s' if requests != 1 else ''} made by them "
            f"({sum(r.fetched for r in reports)} fetched, "
            f"{sum(r.from_cache for r in reports)} from the cache, "
            f"{sum(r.failed for r in reports)} failed)"
        )
        capped = sum(1 for r in reports if r.capped)
        if capped:
            line += f"; {capped} stopped at the time cap"
        lines.append(line)
    failures = summary.failed
    if failures:
        lines.append("failed:")
        lines += [f"  {r.label}: {r.problem}" for r in failures]
    return "\n".join(lines)
