"""How long a stored response stays fresh (RFC 9111 §4.2), as pure functions: the
``Cache-Control`` list, HTTP dates (RFC 9110 §5.6.7), ``Age``, and the lifetime the origin gave,
for a private cache (the default) or a shared one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import http_sf

from .headers import get_header

__all__ = [
    "HEURISTIC_CAP",
    "HEURISTIC_FRACTION",
    "Freshness",
    "current_age",
    "freshness",
    "http_date",
    "initial_age",
    "parse_age",
    "parse_cache_control",
    "parse_http_date",
    "shared_reusable",
    "targeted_cache_control",
]

#: RFC 9111 §4.2.2: a heuristic lifetime is a fraction of the time since Last-Modified.
HEURISTIC_FRACTION = 0.1
HEURISTIC_CAP = 24 * 3600
#: RFC 9110 §15.1: statuses that are heuristically cacheable.
_HEURISTIC_STATUSES = frozenset({200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501})
#: RFC 9111 §1.2.2: delta-seconds saturate here.
DELTA_SECONDS_MAX = 2**31

# --- Cache-Control --------------------------------------------------------------------------

_DIRECTIVE = re.compile(r'\s*([A-Za-z0-9!#$%&\'*+.^_`|~-]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^,]*))?')


def parse_cache_control(value: str | None) -> dict[str, str | None]:
    """``Cache-Control`` as {lower-case directive: argument or None} (RFC 9111 §5.2); the
    first occurrence of a directive wins; malformed parts are skipped."""
    out: dict[str, str | None] = {}
    for part in (value or "").split(","):
        match = _DIRECTIVE.fullmatch(part)
        if not match:
            continue
        name, arg = match.group(1).lower(), match.group(2)
        if arg is not None:
            arg = arg.strip()
            if arg.startswith('"') and arg.endswith('"') and len(arg) >= 2:
                arg = arg[1:-1]
        out.setdefault(name, arg)
    return out


def response_cache_control(headers: Sequence[tuple[str, str]]) -> dict[str, str | None]:
    """All the response's ``Cache-Control`` lines as one list (RFC 9110 §5.3)."""
    return parse_cache_control(", ".join(v for n, v in headers if n.lower() == "cache-control"))


#: RFC 9213: the targeted field a shared wwwproxy obeys in place of Cache-Control and Expires
TARGETED_FIELD = "CDN-Cache-Control"


def targeted_cache_control(headers: Sequence[tuple[str, str]]) -> dict[str, str | None] | None:
    """``CDN-Cache-Control`` (RFC 9213) as :func:`parse_cache_control` gives Cache-Control,
    or None when the response has none, or none that parses as a Structured-Field Dictionary
    (RFC 8941 §3.2; then Cache-Control governs, §2.1).  A member whose value is not what the
    directive takes (``max-age="10000"``: a string, not an integer) is left out."""
    lines = [v for n, v in headers if n.lower() == "cdn-cache-control"]
    if not lines:
        return None
    try:
        parsed = http_sf.parse(", ".join(lines).encode("latin-1"), tltype="dictionary")
    except (http_sf.StructuredFieldError, UnicodeEncodeError, ValueError):
        return None
    if not isinstance(parsed, dict) or not parsed:
        return None
    out: dict[str, str | None] = {}
    for name, member in parsed.items():
        value = member[0] if isinstance(member, tuple) else None  # an Item: (value, params)
        if value is True:
            out[name] = None
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[name] = str(value)
    return out


def _governing_cache_control(
    headers: Sequence[tuple[str, str]], shared: bool
) -> tuple[dict[str, str | None], bool]:
    """The directives that govern caching here, and whether they are the targeted field's:
    a shared cache takes a valid ``CDN-Cache-Control`` in place of Cache-Control and Expires
    (RFC 9213 §2.1); a private one only Cache-Control."""
    targeted = targeted_cache_control(headers) if shared else None
    if targeted is not None:
        return targeted, True
    return response_cache_control(headers), False


def seconds(arg: str | None) -> int | None:
    """A delta-seconds argument (RFC 9111 §1.2.2), None if absent or malformed."""
    if arg is None or not arg.isascii() or not arg.isdigit():
        return None
    return min(int(arg), DELTA_SECONDS_MAX)


# --- HTTP dates -----------------------------------------------------------------------------

_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_DAY = r"(?:mon|tue|wed|thu|fri|sat|sun)"
_DAY_L = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = r"(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
_TIME = r"(?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)"
#: RFC 9110 §5.6.7's three forms; names compare without regard to case (servers send ``GMT``
#: in other cases and caches accept it), everything else exactly as the grammar says.
_IMF_FIXDATE = re.compile(rf"{_DAY}, (?P<day>\d\d) {_MONTH} (?P<year>\d{{4}}) {_TIME} gmt", re.I)
_RFC850 = re.compile(rf"{_DAY_L}, (?P<day>\d\d)-{_MONTH}-(?P<year>\d\d) {_TIME} gmt", re.I)
_ASCTIME = re.compile(rf"{_DAY} {_MONTH} (?P<day>\d\d| \d) {_TIME} (?P<year>\d{{4}})", re.I)


def parse_http_date(value: str, *, now: datetime | None = None) -> datetime | None:
    """An HTTP-date (RFC 9110 §5.6.7) in any of its three forms (IMF-fixdate, the obsolete
    RFC 850 form and asctime), as an aware UTC datetime; None for anything else: another time
    zone than GMT, a missing comma, extra spaces, ``.`` in the time, a one-digit hour, a
    two-digit year in the IMF form, an impossible day.  An RFC 850 two-digit year more than
    50 years after ``now`` (default: the current time) is the century before."""
    text = value.strip(" \t")
    match = _IMF_FIXDATE.fullmatch(text) or _ASCTIME.fullmatch(text)
    two_digit = False
    if match is None:
        match = _RFC850.fullmatch(text)
        two_digit = match is not None
    if match is None:
        return None
    year = int(match["year"])
    if two_digit:
        reference = (now or datetime.now(UTC)).year
        year += reference // 100 * 100
        if year > reference + 50:
            year -= 100
    try:
        return datetime(
            year,
            _MONTHS[match["month"].lower()],
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            min(int(match["second"]), 59),  # a leap second
            tzinfo=UTC,
        )
    except ValueError:  # hour 24, 31 February ...
        return None


def http_date(value: str | None) -> datetime | None:
    """A date header read leniently (``Date``, ``Last-Modified``, ``If-Modified-Since``): the
    three HTTP-date forms, else what :mod:`email.utils` makes of it with a time zone; None when
    absent or unreadable.  ``Expires`` is read strictly (:func:`parse_http_date`)."""
    if not value:
        return None
    strict = parse_http_date(value)
    if strict is not None:
        return strict
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo is not None else None


def expires_time(headers: Sequence[tuple[str, str]], recorded: datetime) -> datetime | None:
    """When the ``Expires`` header says the response goes stale (RFC 9111 §5.3), or None
    when it says nothing usable: an invalid date and more than one ``Expires`` line mean
    "already expired" (§4.2: a cache may treat repeated values as stale), which the caller
    tells from an absent header."""
    values = [v for n, v in headers if n.lower() == "expires"]
    if len(values) != 1:
        return None
    return parse_http_date(values[0], now=recorded)


# --- Age ------------------------------------------------------------------------------------


def parse_age(value: str | None) -> int | None:
    """An ``Age`` field value (RFC 9111 §5.1): its first member's delta-seconds (``7200, 0``
    is 7200; a parameter after ``;`` is cut off), None when that is not a non-negative whole
    number (``abc``, ``-5``, ``1.5``: the header is then ignored)."""
    if value is None:
        return None
    first = value.split(",", 1)[0].split(";", 1)[0].strip(" \t")
    return seconds(first)


def initial_age(headers: Sequence[tuple[str, str]], recorded: datetime) -> int:
    """RFC 9111 §4.2.3's corrected initial age: the larger of the ``Age`` the response came
    with (its first line's first member) and its apparent age (how long before it was
    recorded its ``Date`` says it was made).  0 when neither says anything."""
    age = parse_age(get_header(headers, "Age")) or 0
    date = http_date(get_header(headers, "Date"))
    apparent = int((recorded - date).total_seconds()) if date is not None else 0
    return max(age, apparent, 0)


def current_age(recorded: datetime, now: datetime, age_header: str | None = None) -> int:
    """RFC 9111 §4.2.3: seconds in our cache plus the ``Age`` the response already had."""
    resident = max(0, int((now - recorded).total_seconds()))
    return (parse_age(age_header) or 0) + resident


# --- the freshness lifetime -----------------------------------------------------------------


@dataclass(frozen=True)
class Freshness:
    """A stored response's freshness lifetime (RFC 9111 §4.2.1) and what the origin said."""

    lifetime: float  # seconds
    explicit: bool  # from s-maxage, max-age or Expires, not a heuristic
    must_ask: bool  # no-cache / no-store: every reuse needs revalidation
    #: once stale, never served without revalidation, not even when the origin cannot be
    #: reached or the browser allows staleness (must-revalidate; in a shared cache also
    #: proxy-revalidate and s-maxage: RFC 9111 §5.2.2.2, §5.2.2.8, §5.2.2.10)
    must_revalidate: bool = False
    #: no-store: asked for every time whatever the saving rules say
    no_store: bool = False
    #: seconds past its lifetime a stale copy may be served while it is revalidated in the
    #: background (stale-while-revalidate, RFC 5861 §3); 0 when revalidation is mandatory
    stale_while_revalidate: float = 0.0


def shared_reusable(headers: Sequence[tuple[str, str]]) -> bool:
    """May a shared cache give this response to another client (RFC 9111 §5.2.2.7)?  Not
    when it says ``private`` (in CDN-Cache-Control when that governs); the qualified
    ``private="field"`` counts as plain ``private``, as the RFC notes most caches do."""
    return "private" not in _governing_cache_control(headers, True)[0]


def freshness(
    status: int,
    headers: Sequence[tuple[str, str]],
    recorded: datetime,
    *,
    shared: bool = False,
) -> Freshness:
    """The lifetime the origin gave, else a heuristic, else 0.

    In order: ``no-store`` / ``no-cache`` (lifetime 0, ask every time); in a ``shared`` cache
    ``s-maxage`` (§5.2.2.10: it overrides max-age and Expires, and implies proxy-revalidate);
    ``max-age``; ``Expires`` - ``Date`` (an invalid or repeated Expires: 0); else 10% of the
    time since ``Last-Modified`` (capped at a day) for heuristically cacheable statuses
    (§4.2.2).  A private cache (the default) ignores ``s-maxage`` and ``proxy-revalidate``.
    A shared cache reads a valid ``CDN-Cache-Control`` (RFC 9213) instead of Cache-Control
    and Expires: the directives an origin gives the shared caches in front of it."""
    cc, targeted = _governing_cache_control(headers, shared)
    revalidate = "must-revalidate" in cc or (
        shared and ("proxy-revalidate" in cc or "s-maxage" in cc)
    )
    swr = 0.0 if revalidate else float(seconds(cc.get("stale-while-revalidate")) or 0)
    if "no-store" in cc or "no-cache" in cc:
        return Freshness(0.0, True, True, True, no_store="no-store" in cc)
    if shared and "s-maxage" in cc:
        return Freshness(float(seconds(cc["s-maxage"]) or 0), True, False, revalidate, False, swr)
    if "max-age" in cc:
        return Freshness(float(seconds(cc["max-age"]) or 0), True, False, revalidate, False, swr)
    date = http_date(get_header(headers, "Date")) or recorded
    if not targeted and get_header(headers, "Expires") is not None:
        expires = expires_time(headers, recorded)  # None: invalid, so already expired
        lifetime = (expires - date).total_seconds() if expires is not None else 0.0
        return Freshness(max(0.0, lifetime), True, False, revalidate, False, swr)
    modified = http_date(get_header(headers, "Last-Modified"))
    if modified is not None and status in _HEURISTIC_STATUSES and modified < date:
        lifetime = min(HEURISTIC_CAP, (date - modified).total_seconds() * HEURISTIC_FRACTION)
        return Freshness(lifetime, False, False, revalidate, False, swr)
    return Freshness(0.0, False, False, revalidate, False, swr)
