"""The cache policy, as pure decisions (RFC 9111 with WWWOFFLE's habits): no sockets, no files.

Mode x what the cache holds x what the request asks x freshness -> one :class:`Action`; the
age and freshness lifetime of a stored response; the validators to revalidate it with; how a
304 updates it; which headers a replay sends; whether a stored copy fits the request's ``Vary``
headers and content codings; and which captures may stand for the resource (an error page never
replaces a good copy).  The server, the recording engine and the crawler carry these out; they
decide nothing themselves, so the proxy and ``wwwproxy fetch`` cannot disagree again.
"""

from __future__ import annotations

import base64
import enum
import functools
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

from .headers import HOP_BY_HOP, Headers, end_to_end, get_header

__all__ = [
    "CONDITIONAL_HEADERS",
    "CREDENTIALS_HEADER",
    "CREDENTIAL_HEADERS",
    "Action",
    "CredentialCheck",
    "Freshness",
    "Mode",
    "RequestDirectives",
    "Stored",
    "accepts_coding",
    "after_upstream_error",
    "credential_check",
    "credential_tags",
    "current_age",
    "decide",
    "finish_abandoned",
    "freshness",
    "is_fresh",
    "is_good",
    "is_servable",
    "max_age_for",
    "merge_not_modified",
    "not_modified",
    "not_modified_headers",
    "parse_cache_control",
    "recorded_request_headers",
    "replay_headers",
    "request_headers_for_reuse",
    "request_directives",
    "revalidation_headers",
    "timeless",
    "vary_matches",
    "vary_names",
    "without_conditionals",
]

#: WARC-renamed transfer headers (``X-Archive-Orig-Transfer-Encoding``): kept in the archive,
#: never replayed (the replay is its own hop).
ORIG_HEADER_PREFIX = "x-archive-orig-"
#: RFC 9111 §4.2.2: a heuristic lifetime is a fraction of the time since Last-Modified.
HEURISTIC_FRACTION = 0.1
HEURISTIC_CAP = 24 * 3600
#: RFC 9110 §15.1: statuses that are heuristically cacheable.
_HEURISTIC_STATUSES = frozenset({200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501})


class Mode(enum.StrEnum):
    """Runtime state (never read back from the config on a reload)."""

    ONLINE = "online"
    OFFLINE = "offline"
    AUTODIAL = "autodial"


class Action(enum.Enum):
    FETCH = "fetch"  # ask upstream for the whole resource
    REVALIDATE = "revalidate"  # ask upstream with our copy's validators
    SERVE = "serve"  # answer from the cache
    QUEUE = "queue"  # remember it for the next time we are online
    SERVE_AND_QUEUE = "serve+queue"  # offline forced reload: the copy now, a refresh later
    UNAVAILABLE = "unavailable"  # only-if-cached and nothing cached: 504 (RFC 9111 §5.2.1.7)


# --- directives -----------------------------------------------------------------------------

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


def _seconds(arg: str | None) -> int | None:
    """A delta-seconds argument (RFC 9111 §1.2.2), None if absent or malformed."""
    if arg is None or not arg.isascii() or not arg.isdigit():
        return None
    return min(int(arg), 2**31)


@dataclass(frozen=True)
class RequestDirectives:
    """What the browser asks of a cached answer (RFC 9111 §5.2.1)."""

    force: bool = False  # no-cache (a forced reload; Pragma: no-cache from HTTP/1.0 too)
    max_age: int | None = None  # a normal reload sends max-age=0
    only_if_cached: bool = False


@functools.lru_cache(maxsize=256)
def request_directives(cache_control: str | None, pragma: str | None = None) -> RequestDirectives:
    """The browser's Cache-Control (and Pragma) as the policy needs them (cached: browsers
    send the same few values on every request)."""
    cc = parse_cache_control(cache_control)
    force = "no-cache" in cc
    if not cache_control and pragma and "no-cache" in parse_cache_control(pragma):
        force = True  # RFC 9111 §5.4: Pragma only when there is no Cache-Control
    return RequestDirectives(
        force=force,
        max_age=_seconds(cc.get("max-age")) if "max-age" in cc else None,
        only_if_cached="only-if-cached" in cc,
    )


# --- age and freshness ----------------------------------------------------------------------


def current_age(recorded: datetime, now: datetime, age_header: str | None = None) -> int:
    """RFC 9111 §4.2.3: seconds in our cache plus the ``Age`` the response already had."""
    resident = max(0, int((now - recorded).total_seconds()))
    initial = _seconds(age_header.strip()) if age_header else None
    return (initial or 0) + resident


def _http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo is not None else None


@dataclass(frozen=True)
class Freshness:
    """A stored response's freshness lifetime (RFC 9111 §4.2.1) and what the origin said."""

    lifetime: float  # seconds
    explicit: bool  # from max-age or Expires, not a heuristic
    must_ask: bool  # no-cache / no-store / private-to-nobody: reuse needs revalidation


def freshness(status: int, headers: Sequence[tuple[str, str]], recorded: datetime) -> Freshness:
    """The lifetime the origin gave (``max-age``, else ``Expires`` - ``Date``), else a
    heuristic of 10% of the time since ``Last-Modified`` (capped at a day) for heuristically
    cacheable statuses (§4.2.2), else 0.  ``s-maxage`` is for shared caches, not ours."""
    cc = parse_cache_control(", ".join(v for n, v in headers if n.lower() == "cache-control"))
    if "no-store" in cc or "no-cache" in cc:
        return Freshness(0.0, True, True)
    if "max-age" in cc:
        age = _seconds(cc["max-age"])
        return Freshness(float(age or 0), True, False)
    date = _http_date(get_header(headers, "Date")) or recorded
    expires_value = get_header(headers, "Expires")
    if expires_value is not None:
        expires = _http_date(expires_value)  # an invalid Expires means "already expired"
        lifetime = (expires - date).total_seconds() if expires is not None else 0.0
        return Freshness(max(0.0, lifetime), True, False)
    modified = _http_date(get_header(headers, "Last-Modified"))
    if modified is not None and status in _HEURISTIC_STATUSES and modified < date:
        lifetime = min(HEURISTIC_CAP, (date - modified).total_seconds() * HEURISTIC_FRACTION)
        return Freshness(lifetime, False, False)
    return Freshness(0.0, False, False)


def max_age_for(url: str, rules: Iterable[tuple[re.Pattern[str], int]]) -> int | None:
    """The first configured freshness rule whose pattern matches the canonical URL, if any."""
    for regex, max_age in rules:
        if regex.search(url):
            return max_age
    return None


@dataclass(frozen=True)
class Stored:
    """What the cache holds for the request: the capture that would be served."""

    date: datetime  # when it was recorded (its WARC-Date)
    status: int
    headers: tuple[tuple[str, str], ...]

    @property
    def has_validators(self) -> bool:
        return any(n.lower() in ("etag", "last-modified") for n, _ in self.headers)

    @functools.cached_property
    def origin_freshness(self) -> Freshness:
        """:func:`freshness` of this response, worked out once: a copy in the memory cache
        is judged on every hit, and its headers do not change."""
        return freshness(self.status, self.headers, self.date)

    @functools.cached_property
    def initial_age(self) -> int:
        """The ``Age`` it came with (0 when none or malformed), worked out once."""
        return _seconds((get_header(self.headers, "Age") or "").strip()) or 0


def is_fresh(
    stored: Stored,
    now: datetime,
    *,
    rule_max_age: int | None = None,
    request_changed: int = 0,
    client_max_age: int | None = None,
) -> bool:
    """May the copy be used without asking the origin?

    A configured ``freshness`` rule for the URL overrides what the origin said; otherwise the
    origin's lifetime, raised to ``request_changed`` seconds (WWWOFFLE's minimum age before
    asking again) unless the origin demanded revalidation.  A browser's ``max-age`` (a reload
    sends 0) caps it.  Fresh while the age is below the lifetime: a lifetime of 0 is never
    fresh.  Error captures are never fresh: they are what we want to replace.
    """
    if not is_good(stored.status):
        return False
    age = max(0.0, (now - stored.date).total_seconds()) + stored.initial_age  # never rounded
    if rule_max_age is not None:
        lifetime = float(rule_max_age)
    else:
        origin = stored.origin_freshness
        lifetime = origin.lifetime if origin.must_ask else max(origin.lifetime, request_changed)
    if client_max_age is not None and age > client_max_age:
        return False  # RFC 9111 §5.2.1.1: the browser takes an age up to its max-age
    return age < lifetime


def decide(
    mode: Mode,
    stored: Stored | None,
    now: datetime,
    *,
    method: str = "GET",
    directives: RequestDirectives = RequestDirectives(),  # noqa: B008 (frozen, shared safely)
    rule_max_age: int | None = None,
    request_changed: int = 0,
    ranged: bool = False,
) -> Action:
    """The action for one request.

    * offline: serve what is cached (a forced reload also queues a refresh, as WWWOFFLE
      does), queue the rest; the network is never touched;
    * autodial: serve what is cached unless the browser forces a reload, fetch the rest
      (the caller queues when the fetch fails);
    * online: serve a fresh copy (:func:`is_fresh`), revalidate one with validators, fetch
      otherwise.  Methods other than GET and HEAD always go upstream: their stored answers
      are history, not a cache; so does a ``ranged`` request (a Range header: a media player
      seeking wants its 206, which is relayed and recorded, never served as the resource).
    """
    safe = method.upper() in ("GET", "HEAD")
    if directives.only_if_cached and safe and mode is not Mode.OFFLINE:
        return Action.SERVE if stored is not None else Action.UNAVAILABLE
    if mode is Mode.OFFLINE:
        if stored is None:
            return Action.QUEUE
        return Action.SERVE_AND_QUEUE if directives.force and safe else Action.SERVE
    if mode is Mode.AUTODIAL and stored is not None and not directives.force:
        return Action.SERVE
    if stored is None or not safe or ranged:
        return Action.FETCH
    if not directives.force and is_fresh(
        stored,
        now,
        rule_max_age=rule_max_age,
        request_changed=request_changed,
        client_max_age=directives.max_age,
    ):
        return Action.SERVE
    return Action.REVALIDATE if stored.has_validators else Action.FETCH


def timeless(mode: Mode) -> bool:
    """Does :func:`decide` in this mode depend only on the copy, the method and the browser's
    directives, never on the moment, the freshness rules or ``request_changed``?  Offline,
    a copy is served whatever its age: a decision may then be kept with the copy and the
    request head (the fast front does, for every memory hit)."""
    return mode is Mode.OFFLINE


def after_upstream_error(mode: Mode, has_copy: bool) -> Action | None:
    """The origin could not be reached: serve the stale copy (with a Warning), queue the
    request in autodial, or None for an error page."""
    if has_copy:
        return Action.SERVE
    if mode is Mode.AUTODIAL:
        return Action.QUEUE
    return None


# --- which captures stand for the resource ---------------------------------------------------


def is_servable(status: int) -> bool:
    """A 304 has no body of its own and a 206 only a part of one: recorded, never replayed."""
    return status not in (206, 304)


def is_good(status: int) -> bool:
    """A 2xx/3xx answer that stands for the resource; a 4xx/5xx is recorded (history shows
    it) but never replaces a good copy when ``keep_good_copy`` is on (WWWOFFLE's
    keep-cache-if-not-found)."""
    return 200 <= status < 400 and is_servable(status)


# --- validators and 304s ---------------------------------------------------------------------

#: Request headers that make the answer depend on what the browser already has (RFC 9110
#: §13.1, §14.2).
CONDITIONAL_HEADERS = frozenset(
    {"if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range"}
)
_VALIDATION = frozenset({"if-none-match", "if-modified-since"})


def without_conditionals(
    headers: Iterable[tuple[str, str]], *, keep_range: bool = False
) -> Headers:
    """The request without the browser's own validators (and its Range unless ``keep_range``):
    the proxy wants the whole resource to record; it answers the browser's conditions itself
    (:func:`not_modified`)."""
    drop = _VALIDATION if keep_range else CONDITIONAL_HEADERS
    if keep_range:
        drop = drop | {"if-match", "if-unmodified-since"}
    return [(n, v) for n, v in headers if n.lower() not in drop]


def revalidation_headers(stored_headers: Sequence[tuple[str, str]]) -> Headers:
    """Our copy's validators for a conditional request (RFC 9111 §4.3.1)."""
    out: Headers = []
    etag = get_header(stored_headers, "ETag")
    modified = get_header(stored_headers, "Last-Modified")
    if etag:
        out.append(("If-None-Match", etag))
    if modified:
        out.append(("If-Modified-Since", modified))
    return out


#: RFC 9111 §3.2: headers a 304 must not change in the stored response.
_NOT_UPDATED = frozenset({"content-length", "content-encoding", "content-range"}) | HOP_BY_HOP


def merge_not_modified(
    stored_headers: Sequence[tuple[str, str]], fresh_headers: Iterable[tuple[str, str]]
) -> Headers:
    """The stored headers updated by a 304 (RFC 9111 §3.2, §4.3.4): each header the 304
    carries replaces the stored ones of that name, but for the framing and coding of the body
    it has not sent."""
    fresh = [(n, v) for n, v in end_to_end(fresh_headers) if n.lower() not in _NOT_UPDATED]
    names = {n.lower() for n, _ in fresh}
    kept = [(n, v) for n, v in stored_headers if n.lower() not in names]
    return kept + fresh


def _etags(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def _weak_equal(a: str, b: str) -> bool:
    return a.removeprefix("W/") == b.removeprefix("W/")


def not_modified(
    method: str,
    request_headers: Iterable[tuple[str, str]],
    response_status: int,
    response_headers: Sequence[tuple[str, str]],
) -> bool:
    """RFC 9110 §13.2.2: would the browser's own If-None-Match / If-Modified-Since make the
    answer a 304?  (Evaluated by the proxy against the copy it serves, so the browser's 304s
    never replace the page in the archive.)"""
    if method.upper() not in ("GET", "HEAD") or not 200 <= response_status < 300:
        return False
    request_headers = list(request_headers)
    inm = get_header(request_headers, "If-None-Match")
    if inm is not None:
        tags = _etags(inm)
        if "*" in tags:
            return True  # any current representation matches (RFC 9110 §13.1.2)
        etag = get_header(response_headers, "ETag")
        return etag is not None and any(_weak_equal(t, etag.strip()) for t in tags)
    ims = _http_date(get_header(request_headers, "If-Modified-Since"))
    if ims is None:
        return False
    modified = _http_date(get_header(response_headers, "Last-Modified"))
    return modified is not None and modified <= ims


#: RFC 9110 §15.4.5: what a 304 carries of the full answer.
_NOT_MODIFIED_KEEP = frozenset(
    {"cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified"}
)


def not_modified_headers(response_headers: Iterable[tuple[str, str]]) -> Headers:
    return [(n, v) for n, v in response_headers if n.lower() in _NOT_MODIFIED_KEEP]


# --- Vary and content codings ---------------------------------------------------------------


def vary_names(headers: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The request headers a stored response's ``Vary`` names, lower-cased (``*`` included);
    a caller that asks often keeps them (:func:`vary_matches`'s ``names``)."""
    names: list[str] = []
    for n, v in headers:
        if n.lower() == "vary":
            names += [t.strip().lower() for t in v.split(",") if t.strip()]
    return tuple(names)


#: request headers whose values compare without regard to case (RFC 9110 §12.5)
_CASELESS = frozenset({"accept", "accept-charset", "accept-language", "accept-encoding"})


def _normalized(headers: Sequence[tuple[str, str]], name: str) -> str | None:
    """The header's values joined with white space removed (RFC 9111 §4.1), lower-cased only
    where the header's values are case-insensitive; None when absent (an empty header is
    present, and matches only an empty one)."""
    values = [v for n, v in headers if n.lower() == name]
    if not values:
        return None
    joined = ",".join("".join(v.split()) for v in values)
    return joined.lower() if name in _CASELESS else joined


def vary_matches(
    stored_headers: Sequence[tuple[str, str]],
    recorded_request: Sequence[tuple[str, str]] | None,
    request: Sequence[tuple[str, str]],
    *,
    names: Sequence[str] | None = None,
) -> bool:
    """Does a stored response fit this request on the headers its ``Vary`` names (RFC 9111
    §4.1)?  ``Vary: *`` never fits.  ``Accept-Encoding`` is left to :func:`accepts_coding`
    (a coded copy can be decoded on the way out), so it does not count here.  ``names``:
    :func:`vary_names` of ``stored_headers``, when the caller has them.  ``Cookie`` and
    ``Authorization`` recorded as digests (:func:`recorded_request_headers`) are left to
    :class:`CredentialCheck`."""
    if names is None:
        names = vary_names(stored_headers)
    if not names:
        return True
    if "*" in names:
        return False
    recorded = recorded_request or []
    # Accept-Encoding; and credentials the archive keeps only as digests (judged by
    # :class:`CredentialCheck`, which has the key)
    skip = {"accept-encoding"}
    if get_header(recorded, CREDENTIALS_HEADER) is not None:
        skip |= CREDENTIAL_HEADERS
    names = [n for n in names if n not in skip]
    if not names:
        return True
    return all(_normalized(recorded, n) == _normalized(request, n) for n in names)


def _qvalues(accept_encoding: str) -> Mapping[str, float]:
    out: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
        out.setdefault(coding, q)
    return out


def accepts_coding(accept_encoding: str | None, content_encoding: str | None) -> bool:
    """RFC 9110 §12.5.3: may a response with this ``Content-Encoding`` be sent to a request
    with this ``Accept-Encoding``?  No Accept-Encoding means only identity is safe (what curl
    and scripts send); ``x-gzip`` is ``gzip``."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return True
    if accept_encoding is None:
        return False
    q = _qvalues(accept_encoding)

    def accepted(coding: str) -> bool:
        coding = "gzip" if coding == "x-gzip" else coding
        if coding in q:
            return q[coding] > 0
        if coding == "gzip" and "x-gzip" in q:
            return q["x-gzip"] > 0
        return q.get("*", 0.0) > 0

    return all(accepted(c) for c in codings)


def replay_headers(headers: Iterable[tuple[str, str]], *, set_cookie: bool = False) -> Headers:
    """The recorded headers a replay sends: end-to-end ones, without the archive's renamed
    transfer-coding headers (``X-Archive-Orig-Transfer-Encoding`` describes a hop the replay
    does not repeat: it is sent with a Content-Length), and without ``Set-Cookie`` unless
    ``set_cookie`` (``replay_set_cookie``): a copy must not log the browser back into a
    session, nor set again a cookie the user has since deleted."""
    prefix = ORIG_HEADER_PREFIX
    return [
        (n, v)
        for n, v in end_to_end(headers)
        if not (n.lower().startswith(prefix) and n.lower()[len(prefix) :] in HOP_BY_HOP)
        and (set_cookie or n.lower() != "set-cookie")
    ]


# --- credentials ----------------------------------------------------------------------------

#: Request headers that say who the user is to the origin.  (``Proxy-Authorization`` is ours,
#: hop-by-hop: never sent upstream nor recorded.)
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie"})
#: The recorded request's header that holds keyed digests of its credentials, in place of them
#: (``authorization=<digest>; cookie=<digest>``): enough to tell whether a later request
#: carries the same ones, and nothing that would let anyone who reads the archive log in.
CREDENTIALS_HEADER = "WWWProxy-Credentials"


def _digest(key: bytes, name: str, values: Sequence[str]) -> str:
    data = name.encode("ascii") + b"\0" + "\n".join(values).encode("utf-8", "surrogateescape")
    mac = hmac.digest(key, data, "sha256")  # the one-shot C path: asked on hits
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def credential_tags(headers: Iterable[tuple[str, str]], key: bytes) -> dict[str, str]:
    """{credential header name: HMAC-SHA256 of its values under the cache's ``key``} for the
    credential headers the request carries."""
    values: dict[str, list[str]] = {}
    for n, v in headers:
        name = n.lower()
        if name in CREDENTIAL_HEADERS:
            values.setdefault(name, []).append(v.strip())
    return {name: _digest(key, name, vs) for name, vs in sorted(values.items())}


def _parse_tags(value: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for part in value.split(";"):
        name, sep, digest = part.strip().partition("=")
        if sep and name.strip().lower() in CREDENTIAL_HEADERS:
            tags[name.strip().lower()] = digest.strip()
    return tags


def recorded_request_headers(
    headers: Sequence[tuple[str, str]], key: bytes, *, keep_credentials: bool = False
) -> Headers:
    """The request headers as the archive records them: ``Cookie`` and ``Authorization``
    left out unless ``keep_credentials`` (``record_credentials``), and their digests added in
    :data:`CREDENTIALS_HEADER` either way (what :class:`CredentialCheck` compares)."""
    tags = credential_tags(headers, key)
    out = [(n, v) for n, v in headers if n.lower() != CREDENTIALS_HEADER.lower()]
    if not keep_credentials:
        out = [(n, v) for n, v in out if n.lower() not in CREDENTIAL_HEADERS]
    if tags:
        out.append((CREDENTIALS_HEADER, "; ".join(f"{n}={d}" for n, d in tags.items())))
    return out


@dataclass(frozen=True)
class CredentialCheck:
    """Which credentials a request must carry, alike, to be served a stored copy: the
    ``Authorization`` of the request that fetched it, if it had one; both ``Authorization`` and
    ``Cookie`` (or their absence) for a ``Cache-Control: private`` answer; and those of them
    its ``Vary`` names.  Alike means the same digest under the cache's key."""

    needed: frozenset[str]
    #: the recorded request's digests of the needed headers (absent: it had none)
    recorded: tuple[tuple[str, str], ...] = ()

    def admits(self, request: Iterable[tuple[str, str]], key: bytes) -> bool:
        """May a request with these headers have the copy?"""
        if not self.needed:
            return True
        asked = credential_tags(((n, v) for n, v in request if n.lower() in self.needed), key)
        recorded = dict(self.recorded)
        return all(hmac.compare_digest(asked.get(n, ""), recorded.get(n, "")) for n in self.needed)


def credential_check(
    response_headers: Sequence[tuple[str, str]],
    recorded_request: Sequence[tuple[str, str]],
    key: bytes,
) -> CredentialCheck:
    """The :class:`CredentialCheck` of a stored copy (made once per copy: it is asked on every
    hit).  The recorded request's :data:`CREDENTIALS_HEADER`, or, in a record without it,
    the credentials themselves (``record_credentials``, or an older recording)."""
    marked = get_header(recorded_request, CREDENTIALS_HEADER)
    tags = _parse_tags(marked) if marked is not None else credential_tags(recorded_request, key)
    needed: set[str] = set()
    if "authorization" in tags:
        needed.add("authorization")
    cc = parse_cache_control(
        ", ".join(v for n, v in response_headers if n.lower() == "cache-control")
    )
    if "private" in cc:
        needed |= CREDENTIAL_HEADERS
    needed |= CREDENTIAL_HEADERS.intersection(vary_names(response_headers))
    recorded = tuple(sorted((n, d) for n, d in tags.items() if n in needed))
    return CredentialCheck(frozenset(needed), recorded)


def request_headers_for_reuse(
    response_headers: Sequence[tuple[str, str]], recorded_request: Sequence[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """Of a recorded request's headers, those that decide whether its copy may serve a later
    request: the ones the response's ``Vary`` names, the credentials and their digests
    (:func:`vary_matches` and :func:`credential_check` read no others).  What a copy kept in
    memory holds instead of the whole request: a few hundred bytes fewer of small objects
    each, which thousands of copies coming and going had spread over the allocator's pools."""
    wanted = {CREDENTIALS_HEADER.lower(), *CREDENTIAL_HEADERS, *vary_names(response_headers)}
    return tuple((n, v) for n, v in recorded_request if n.lower() in wanted)


# --- a download the browser left --------------------------------------------------------------


def finish_abandoned(
    received: int,
    expected: int | None,
    *,
    max_bytes: int | None = None,
    percent: int | None = None,
) -> bool:
    """Go on recording a download the browser has left (``finish_on_disconnect``)?
    (WWWOFFLE's intr-download-size and intr-download-percent.)  With no limit set, always;
    else if its whole size is at most ``max_bytes`` (a body of unknown length: while what has
    come is), or if at least ``percent`` of it has come already (never known without a
    length).  Asked again as the rest comes: a body without a length is cut once it passes
    ``max_bytes``; cut, it is not recorded."""
    if max_bytes is None and percent is None:
        return True
    size = expected if expected is not None else received
    if max_bytes is not None and size <= max_bytes:
        return True
    if percent is not None and expected is not None:
        return received * 100 >= percent * expected
    return False
