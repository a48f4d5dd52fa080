"""What the catalog (:mod:`.catalog`) keeps of one page (archive key), folded from its index
lines one at a time: how many captures, the newest one, the capture that would be served,
and the size of its cache file.  Pure: the catalog stores these, the index pages show them.

The capture served is the store's rule (:func:`.served.served_record`): with keep-the-good-copy
the newest 2xx/3xx capture, else (or when there is none) the newest of any status, never a 304
or 206 (recorded for a browser's own conditional or range request).  Both choices are kept, so
the pages follow ``keep_good_copy`` without a rebuild.  Of two captures with the same time the
later in the file (the greater offset) is the one served, and the first the newest shown (as
the index's first line of that time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..http.policy import is_good, is_servable
from .cdxj import CDXJRecord
from .index_lines import INDEXED_TYPES

__all__ = ["Capture", "Line", "PageSummary", "fold", "host_of", "line_of", "summarize"]


def host_of(uri: str) -> tuple[str, str] | None:
    """(proto, host folder) of an archive key, as the store names its folders."""
    proto, sep, rest = uri.partition("://")
    if not sep:
        return None
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    return proto, authority[authority.rfind("@") + 1 :]


class Capture(NamedTuple):
    """One capture as the pages show it."""

    ts: str  # the index's timestamp (2026-11-22T05:04:30.123456Z): sorts as text
    offset: int  # of its record in the cache file: orders captures of the same time
    status: int | None  # None: the line has no integer status (counted as a 200)
    mime: str | None
    payload: int | None  # payload bytes (a revisit's are its response's); None: unknown

    def later_than(self, other: Capture | None) -> bool:
        return other is None or (self.ts, self.offset) >= (other.ts, other.offset)


class Line(NamedTuple):
    """What the catalog takes from one index line."""

    uri: str
    capture: Capture
    revisit: bool
    end: int | None  # where its record ends in the file (None: the line has no length)


def _int(value: object) -> int | None:
    return value if type(value) is int and 0 <= value < 1 << 63 else None


def line_of(record: CDXJRecord) -> Line | None:
    """The catalog's view of an index line; None for a line it does not count (a request,
    a reference that is not to a cache file)."""
    if record.record_type not in INDEXED_TYPES:
        return None
    ref = record.warcfile
    if ref is None:
        return None
    fields = record.fields
    status = fields.get("hsc", 200)
    mime = fields.get("mct")
    length = _int(fields.get("rle"))
    capture = Capture(
        record.timestamp,
        ref[1],
        _int(status) if type(status) is int and status < 1000 else None,
        mime if isinstance(mime, str) else None,
        _int(fields.get("ple")),
    )
    return Line(record.uri, capture, record.record_type == "revisit", _end(ref[1], length))


def _end(offset: int, length: int | None) -> int | None:
    return None if length is None else offset + length


@dataclass(frozen=True)
class PageSummary:
    """One page's captures summed up."""

    captures: int
    last_offset: int  # the greatest offset counted
    size: int | None  # bytes of its cache file (the end of its last record); None: unknown
    response_payload: int | None  # the newest response's payload: a later revisit's
    newest: Capture  # the first of the newest time
    good: Capture | None  # the newest 2xx/3xx capture (never a 304/206)
    servable: Capture | None  # the newest capture that is not a 304/206

    def served(self, keep_good: bool) -> Capture | None:
        """The capture the proxy would serve (None: none can be)."""
        return (self.good or self.servable) if keep_good else self.servable

    def shown_size(self, keep_good: bool) -> int | None:
        """The Size column's value: the served payload, else the file's size."""
        served = self.served(keep_good)
        if served is not None and served.payload is not None:
            return served.payload
        return self.size


def fold(summary: PageSummary | None, line: Line, *, again: bool = False) -> PageSummary | None:
    """``summary`` with ``line`` counted in.  With ``again`` (the line may have been counted
    by a build that read the index meanwhile) None when it is counted already: a line at or
    before the last offset counted (captures are appended).  Otherwise every line counts,
    whatever order lines of two writers come in."""
    capture = line.capture
    if again and summary is not None and capture.offset <= summary.last_offset:
        return None
    if line.revisit:  # a revisit's payload is its response's
        payload = summary.response_payload if summary is not None else None
        capture = capture._replace(payload=payload)
        response_payload = payload
    else:
        response_payload = capture.payload
    code = 200 if capture.status is None else capture.status
    if summary is None:
        return PageSummary(
            captures=1,
            last_offset=capture.offset,
            size=line.end,
            response_payload=response_payload,
            newest=capture,
            good=capture if is_good(code) else None,
            servable=capture if is_servable(code) else None,
        )
    good, servable = summary.good, summary.servable
    if is_servable(code) and capture.later_than(servable):
        servable = capture
    if is_good(code) and capture.later_than(good):
        good = capture
    size = summary.size
    if line.end is None or size is None:
        size = None
    elif line.end > size:
        size = line.end
    return replace(
        summary,
        captures=summary.captures + 1,
        last_offset=max(summary.last_offset, capture.offset),
        size=size,
        response_payload=response_payload,
        newest=capture if capture.ts > summary.newest.ts else summary.newest,
        good=good,
        servable=servable,
    )


def summarize(
    summary: PageSummary | None, lines: Iterable[Line], *, again: bool = False
) -> PageSummary | None:
    """``summary`` (None: a page not seen yet) with one page's ``lines`` counted in, in file
    order whatever order they come in (their index order is by time); ``again``: as
    :func:`fold`'s."""
    for line in sorted(lines, key=lambda line: line.capture.offset):
        summary = fold(summary, line, again=again) or summary
    return summary
