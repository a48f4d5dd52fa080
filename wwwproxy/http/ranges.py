"""Range requests answered from a stored response (RFC 9110 §14, §13.1.5), as pure decisions.

A browser asks for media with ``Range: bytes=0-`` and seeks with other ranges; its PDF viewer
reads a document by ranges.  A stored complete 200 holds every byte of the representation, so
the proxy can answer those requests itself, online and offline: :func:`plan_ranges` turns the
request's ``Range`` and ``If-Range`` and the stored response into a :class:`RangePlan` (the
status, the headers to change and the body as pieces: bytes to write and spans of the stored
body), which the server carries out on a body in memory (:func:`body_parts`) or on one read
from disk in chunks (:func:`file_reads`).  :func:`combine_partials` says when stored 206s and a
new one make up a complete response (RFC 9111 §3.3, §3.4), for the recording side;
:func:`upstream_range` what of a browser's range goes to the origin on a miss.

Which bytes a range counts: those of the selected representation, content coding included
(RFC 9110 §8.4, §14.1).  A copy replayed with its ``Content-Encoding`` as recorded is
those bytes exactly, so its ranges are spans of the stored payload.  A copy the proxy decodes
for a client that does not take its coding, or rewrites (``modify_html``), is another
representation whose length is only known once all of it is made: its ranges are ignored and
the whole of it is sent (200, always allowed by §14.2), and it says nothing of ``Accept-Ranges``.

No sockets, no files, no aiohttp.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import NamedTuple

from .freshness import http_date
from .headers import Headers, get_header, set_header
from .policy import merge_not_modified

__all__ = [
    "ACCEPT_RANGES",
    "COALESCE_GAP",
    "MAX_RANGES",
    "Combined",
    "Piece",
    "RangePlan",
    "RangeSpec",
    "Span",
    "body_parts",
    "combine_partials",
    "file_reads",
    "if_range_holds",
    "parse_content_range",
    "parse_range",
    "plan_ranges",
    "ranges_apply",
    "resolve_ranges",
    "upstream_range",
]

#: what a replayed copy that ranges apply to says (RFC 9110 §14.3)
ACCEPT_RANGES = ("Accept-Ranges", "bytes")
#: a ``Range`` with more range-specs than this is ignored (RFC 9110 §14.2: a server MAY ignore
#: a set of many small ranges; no player or PDF reader asks for more than a few at once)
MAX_RANGES = 100
#: ranges that overlap, or lie fewer bytes apart than this, are sent as one part: about the
#: cost of a part's head (RFC 9110 §14.6).  With :data:`MAX_RANGES`, what a 206 sends is at
#: most the body plus a hundred part heads, whatever the request repeats or overlaps.
COALESCE_GAP = 80
#: numbers with more digits than this are taken as this large (no representation is that
#: long): ``int()`` of thousands of digits is slow, and refused past 4,300 of them
_MAX_DIGITS = 19
_HUGE = 10**_MAX_DIGITS

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_INT_RANGE = re.compile(r"([0-9]+)-([0-9]*)")
_SUFFIX_RANGE = re.compile(r"-([0-9]+)")
_CONTENT_RANGE = re.compile(r"bytes[ \t]+([0-9]+)-([0-9]+)/([0-9]+|\*)", re.IGNORECASE)


class RangeSpec(NamedTuple):
    """One range-spec as written (RFC 9110 §14.1.1): ``first-last`` (``last`` None for an
    open ``first-``), or a suffix ``-last`` (``first`` None: the final ``last`` bytes)."""

    first: int | None
    last: int | None


class Span(NamedTuple):
    """Bytes ``first`` to ``last`` of the stored body, both included (as Content-Range
    counts them)."""

    first: int
    last: int

    @property
    def stop(self) -> int:
        """The end of the span as a slice takes it: ``body[span.first : span.stop]``."""
        return self.last + 1

    @property
    def size(self) -> int:
        return self.last + 1 - self.first


#: a piece of a planned body: bytes to write as they are, or a span of the stored body
Piece = bytes | Span


def _number(digits: str) -> int:
    return _HUGE if len(digits) > _MAX_DIGITS else int(digits)


def parse_range(value: str | None) -> tuple[RangeSpec, ...] | None:
    """The range-specs of a ``Range`` header value (RFC 9110 §14.1.1, §14.2), in order; None
    when the header is to be ignored: absent, a unit other than ``bytes`` (compared without
    regard to case, §14.1), invalid syntax (no range-spec, ``last`` before ``first``, white
    space inside a range-spec or before ``=``), or more than :data:`MAX_RANGES` range-specs.
    Optional white space around the commas and empty list elements are allowed (§5.6.1)."""
    if value is None:
        return None
    unit, equals, rest = value.strip(" \t").partition("=")
    if not equals or not _TOKEN.fullmatch(unit) or unit.lower() != "bytes":
        return None
    specs: list[RangeSpec] = []
    for element in rest.split(","):
        element = element.strip(" \t")
        if not element:
            continue
        if len(specs) == MAX_RANGES:
            return None
        if match := _INT_RANGE.fullmatch(element):
            first = _number(match.group(1))
            last = _number(match.group(2)) if match.group(2) else None
            if last is not None and last < first:
                return None
            specs.append(RangeSpec(first, last))
        elif match := _SUFFIX_RANGE.fullmatch(element):
            specs.append(RangeSpec(None, _number(match.group(1))))
        else:
            return None
    return tuple(specs) or None


def resolve_ranges(specs: Iterable[RangeSpec], length: int) -> tuple[Span, ...]:
    """The satisfiable ranges of a representation of ``length`` bytes (RFC 9110 §14.1.1): a
    ``first-`` or ``first-last`` whose ``first`` is inside it (``last`` cut to its end), a
    suffix of more than 0 bytes (the whole of it when longer).  Then coalesced (§14.2):
    ranges that overlap or are less than :data:`COALESCE_GAP` bytes apart become one, which
    takes the place of the first of them in the request; the rest keep the request's order
    (§15.3.7.2).  Empty when none is satisfiable, or ``length`` is 0."""
    spans: list[Span] = []
    if length <= 0:
        return ()
    for first, last in specs:
        if first is None:
            if last:
                spans.append(Span(max(0, length - last), length - 1))
        elif first < length:
            spans.append(Span(first, length - 1 if last is None else min(last, length - 1)))
    if len(spans) < 2:
        return tuple(spans)
    # groups of (index of its first range in the request, span), in ascending order
    groups: list[tuple[int, Span]] = []
    for index, span in sorted(enumerate(spans), key=lambda item: item[1]):
        if groups and span.first - groups[-1][1].stop < COALESCE_GAP:
            at, merged = groups[-1]
            groups[-1] = (min(at, index), Span(merged.first, max(merged.last, span.last)))
        else:
            groups.append((index, span))
    return tuple(span for _, span in sorted(groups))


def _strong_etag(headers: Sequence[tuple[str, str]]) -> str | None:
    """The response's ETag if it is strong (RFC 9110 §8.8.3), else None."""
    etag = (get_header(headers, "ETag") or "").strip()
    return etag if etag.startswith('"') else None


def _strong_last_modified(headers: Sequence[tuple[str, str]]) -> datetime | None:
    """The response's Last-Modified if a cache may take it as a strong validator: at least
    a second before the response's Date (RFC 9110 §8.8.2.2), and no weak ETag beside it (the
    origin saying that its bytes may differ from one response to the next, as a server
    compressing on the fly does); else None."""
    if (get_header(headers, "ETag") or "").strip().startswith("W/"):
        return None
    modified = http_date(get_header(headers, "Last-Modified"))
    date = http_date(get_header(headers, "Date"))
    if modified is None or date is None or date - modified < timedelta(seconds=1):
        return None
    return modified


def if_range_holds(if_range: str | None, stored_headers: Sequence[tuple[str, str]]) -> bool:
    """RFC 9110 §13.1.5: may the ``Range`` be applied?  Yes without an ``If-Range``; with an
    entity-tag, only if it and the stored ETag are strong and the same; with an HTTP-date,
    only if it is the stored Last-Modified (compared as dates) and that is strong
    (:func:`_strong_last_modified`).  A weak tag or anything else: no, the whole response."""
    if if_range is None:
        return True
    value = if_range.strip(" \t")
    if value.startswith('"'):
        return value == _strong_etag(stored_headers)
    if value.startswith("W/"):
        return False
    asked = http_date(value)
    return asked is not None and asked == _strong_last_modified(stored_headers)


def ranges_apply(status: int, *, transformed: bool = False) -> bool:
    """Are ranges served from this stored response?  Only from a complete 200 replayed as
    stored: not from a 206 (a part), nor another status, nor a copy ``transformed`` on the way
    out (decoded for a client without its coding, or rewritten by ``modify_html``: the bytes
    sent are not the stored ones and their length is not known beforehand).  Also what
    ``Accept-Ranges`` the replay says (:meth:`RangePlan.apply`)."""
    return status == 200 and not transformed


def _coded(headers: Sequence[tuple[str, str]]) -> bool:
    coding = get_header(headers, "Content-Encoding") or ""
    return any(c.strip().lower() not in ("", "identity") for c in coding.split(","))


@dataclass(frozen=True)
class RangePlan:
    """How to answer one request from a stored response.

    ``status`` 206: the ranges, ``body`` being what to write, in order; 416: nothing
    satisfiable, an empty body.  Not ``ranged``: the stored status, the whole response as the
    replay has it (``body`` the whole stored body).  ``headers`` replace those of the same
    name; ``removed`` names (lower-case) are dropped.  :meth:`apply` does both."""

    status: int
    headers: tuple[tuple[str, str], ...]
    removed: frozenset[str]
    body: tuple[Piece, ...]
    #: a 206 or 416 made here, not the whole replay
    ranged: bool = True

    @property
    def reason(self) -> str:
        return HTTPStatus(self.status).phrase

    @property
    def content_length(self) -> int:
        """The length of the planned body."""
        return _size(self.body)

    def apply(self, headers: Iterable[tuple[str, str]]) -> Headers:
        """The replay's headers as this answer needs them."""
        out = [(n, v) for n, v in headers if n.lower() not in self.removed]
        for name, value in self.headers:
            out = set_header(out, name, value)
        return out


def _size(pieces: Iterable[Piece]) -> int:
    return sum(len(p) if isinstance(p, bytes) else p.size for p in pieces)


def _whole(status: int, length: int, rangeable: bool) -> RangePlan:
    return RangePlan(
        status,
        (ACCEPT_RANGES,) if rangeable else (),
        frozenset() if rangeable else frozenset({"accept-ranges"}),
        (Span(0, length - 1),) if length > 0 else (),
        ranged=False,
    )


def _raw(value: str) -> bytes:
    """A header value as the bytes it was read from (the archive's text keeps them)."""
    return value.encode("utf-8", "surrogateescape")


def plan_ranges(
    range_value: str | None,
    stored_status: int,
    stored_headers: Sequence[tuple[str, str]],
    length: int,
    *,
    method: str = "GET",
    if_range: str | None = None,
    transformed: bool = False,
    boundary: str | None = None,
) -> RangePlan:
    """The answer to a request with this ``Range`` (and ``If-Range``) from a stored response
    whose body is ``length`` bytes (its payload as stored).  Not :attr:`RangePlan.ranged`:
    the replay as it is, with the plan's ``Accept-Ranges`` (:meth:`RangePlan.apply`).

    Asked after the 304 check: a browser's matching If-None-Match / If-Modified-Since wins
    (RFC 9110 §13.2.2).  In the order of §13.2.2 and §14.2: only GET has ranges; ranges must
    apply to the copy (:func:`ranges_apply`), the header must parse (:func:`parse_range`) and
    ``If-Range`` hold (:func:`if_range_holds`), else the whole response; an empty body is
    always sent whole.  None satisfiable: 416 with ``Content-Range: bytes */length``.  One
    range (or several coalesced into one): a 206 with its Content-Range.  Several: a 206
    ``multipart/byteranges`` whose parts carry the stored Content-Type (§14.6), unless the
    copy has a content coding (the message's Content-Encoding would then claim to code the
    multipart body itself): that is answered whole.  ``boundary``: fixed for tests; by default
    a random one, which a stored body cannot have been made to contain."""
    rangeable = ranges_apply(stored_status, transformed=transformed)
    whole = _whole(stored_status, length, rangeable)
    if method.upper() != "GET" or not rangeable or length <= 0:
        return whole
    specs = parse_range(range_value)
    if specs is None or not if_range_holds(if_range, stored_headers):
        return whole
    spans = resolve_ranges(specs, length)
    if not spans:
        return RangePlan(
            416,
            (ACCEPT_RANGES, ("Content-Range", f"bytes */{length}"), ("Content-Length", "0")),
            frozenset({"content-type", "content-encoding"}),
            (),
        )
    if len(spans) == 1:
        (span,) = spans
        return RangePlan(
            206,
            (
                ACCEPT_RANGES,
                ("Content-Range", f"bytes {span.first}-{span.last}/{length}"),
                ("Content-Length", str(span.size)),
            ),
            frozenset(),
            (span,),
        )
    if _coded(stored_headers):
        return whole
    boundary = boundary or secrets.token_hex(16)
    content_type = get_header(stored_headers, "Content-Type")
    type_line = b"Content-Type: " + _raw(content_type) + b"\r\n" if content_type else b""
    delimiter = boundary.encode("ascii")
    body: list[Piece] = []
    for i, span in enumerate(spans):
        body.append(
            (b"\r\n" if i else b"")
            + b"--%s\r\n%sContent-Range: bytes %d-%d/%d\r\n\r\n"
            % (delimiter, type_line, span.first, span.last, length)
        )
        body.append(span)
    body.append(b"\r\n--%s--\r\n" % delimiter)
    size = _size(body)
    return RangePlan(
        206,
        (
            ACCEPT_RANGES,
            ("Content-Type", f"multipart/byteranges; boundary={boundary}"),
            ("Content-Length", str(size)),
        ),
        frozenset(),
        tuple(body),
    )


def body_parts(pieces: Iterable[Piece], body: bytes) -> Iterator[bytes | memoryview]:
    """What to write, for a body held in memory: each span a view of it (no copy)."""
    view = memoryview(body)
    for piece in pieces:
        yield piece if isinstance(piece, bytes) else view[piece.first : piece.stop]


def file_reads(pieces: Iterable[Piece], chunk: int) -> Iterator[bytes | tuple[int, int]]:
    """What to write, for a body read from a stream: bytes to write as they are, or
    ``(offset, size)``: read ``size`` bytes at ``offset`` of the stored body and write them
    (``size`` at most ``chunk``, so the server holds one chunk at a time).  Offsets go up
    within a span; a later span may start before an earlier one (the request's order)."""
    for piece in pieces:
        if isinstance(piece, bytes):
            yield piece
            continue
        for offset in range(piece.first, piece.stop, chunk):
            yield offset, min(chunk, piece.stop - offset)


def upstream_range(headers: Iterable[tuple[str, str]]) -> Headers:
    """The browser's request headers as they go upstream: a ``Range`` that asks for every
    byte (``bytes=0-``, a media element's first request) goes without it and its
    ``If-Range``, so that the origin's answer is the whole 200 the cache records (a page's
    first full fetch is what is served later, online and offline), which the browser gets
    as it is (RFC 9110 §14.2: a server may ignore a Range).  Any other range goes as asked:
    its 206 is relayed, and recorded as history, never served as the resource."""
    headers = list(headers)
    ranges = [v for n, v in headers if n.lower() == "range"]
    if len(ranges) != 1 or parse_range(ranges[0]) != (RangeSpec(0, None),):
        return headers
    return [(n, v) for n, v in headers if n.lower() not in ("range", "if-range")]


# --- combining partial responses (RFC 9111 §3.3, §3.4) ----------------------------------------


def parse_content_range(value: str | None) -> tuple[Span, int | None] | None:
    """A 206's ``Content-Range: bytes first-last/length`` (RFC 9110 §14.4) as its span and
    the complete length (None for ``*``); None when absent, malformed, another unit, the
    unsatisfied form ``*/length``, or ``last`` past the length."""
    match = _CONTENT_RANGE.fullmatch((value or "").strip(" \t"))
    if not match:
        return None
    first, last = _number(match.group(1)), _number(match.group(2))
    length = None if match.group(3) == "*" else _number(match.group(3))
    if last < first or (length is not None and last >= length):
        return None
    return Span(first, last), length


@dataclass(frozen=True)
class Combined:
    """A complete 200 made of partial responses: its length, its headers, and its body as
    ``(index of a part, start, stop)`` slices of the parts' bodies, in order."""

    length: int
    headers: Headers
    pieces: tuple[tuple[int, int, int], ...]


def combine_partials(parts: Sequence[Sequence[tuple[str, str]]]) -> Combined | None:
    """Do these 206 responses (their headers, oldest first, the new one last) make up the
    whole representation?  RFC 9111 §3.4 and RFC 9110 §15.3.7.3: only single-range parts
    (a Content-Range each) of one known complete length, sharing one strong validator (a
    strong ETag, or without one a strong Last-Modified), whose ranges cover every byte.
    The headers are the oldest part's, updated by each newer one's as a 304 would update
    them (RFC 9111 §3.2), without Content-Range and with the complete Content-Length.
    None when they do not (the caller keeps or drops the parts; it never serves them)."""
    if not parts:
        return None
    ranges = [parse_content_range(get_header(p, "Content-Range")) for p in parts]
    lengths = {r[1] if r else None for r in ranges}
    if len(lengths) != 1 or None in lengths:
        return None
    (length,) = lengths
    assert length is not None
    etags = {_strong_etag(p) for p in parts}
    if len(etags) != 1:
        return None  # a strong ETag in some parts and not in others, or different ones
    if etags == {None}:
        modified = {_strong_last_modified(p) for p in parts}
        if len(modified) != 1 or None in modified:
            return None  # without strong ETags: one strong Last-Modified for all
    spans = [r[0] for r in ranges if r is not None]
    pieces: list[tuple[int, int, int]] = []
    position = 0
    while position < length:
        covering = [i for i, s in enumerate(spans) if s.first <= position <= s.last]
        if not covering:
            return None
        best = max(covering, key=lambda i: (spans[i].last, i))  # the furthest, then newest
        span = spans[best]
        pieces.append((best, position - span.first, span.size))
        position = span.stop
    headers: Headers = list(parts[0])
    for newer in parts[1:]:
        headers = merge_not_modified(headers, newer)
    headers = [(n, v) for n, v in headers if n.lower() != "content-range"]
    return Combined(length, set_header(headers, "Content-Length", str(length)), tuple(pieces))
