"""The cache policy, as pure decisions (RFC 9111 with WWWOFFLE's habits): no sockets, no files.

Mode x what the cache holds x what the request asks x freshness -> one :class:`Action`; when
a stale copy may stand in for an unreachable origin; the validators to revalidate it with; how
a 304 updates it; which headers a replay sends; and which captures may stand for the resource
(an error page never replaces a good copy).  Freshness itself is :mod:`.freshness`, which copy
fits which request (Vary, codings, credentials) :mod:`.reuse`, what an unsafe request makes
stale :mod:`.invalidation` (the first two re-exported here).  The server, the recording
engine and the crawler carry these out; they decide nothing themselves, so the proxy and
``wwwproxy fetch`` cannot disagree again.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .freshness import (
    DELTA_SECONDS_MAX,
    HEURISTIC_CAP,
    HEURISTIC_FRACTION,
    Freshness,
    current_age,
    freshness,
    http_date,
    initial_age,
    parse_cache_control,
    seconds,
    shared_reusable,
)
from .headers import HOP_BY_HOP, Headers, end_to_end, get_header
from .reuse import (
    CREDENTIAL_HEADERS,
    CREDENTIALS_HEADER,
    CredentialCheck,
    accepts_coding,
    credential_check,
    credential_tags,
    recorded_request_headers,
    replaces,
    request_headers_for_reuse,
    select_variant,
    vary_matches,
    vary_names,
)

__all__ = [
    "ANY_STALENESS",
    "CONDITIONAL_HEADERS",
    "CREDENTIALS_HEADER",
    "CREDENTIAL_HEADERS",
    "Action",
    "CredentialCheck",
    "HEURISTIC_CAP",
    "HEURISTIC_FRACTION",
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
    "prefers_good",
    "finish_abandoned",
    "freshness",
    "is_fresh",
    "is_good",
    "is_servable",
    "max_age_for",
    "may_serve_stale",
    "merge_not_modified",
    "not_modified",
    "not_modified_headers",
    "parse_cache_control",
    "recorded_request_headers",
    "replaces",
    "replay_headers",
    "request_headers_for_reuse",
    "request_directives",
    "revalidation_headers",
    "select_variant",
    "timeless",
    "vary_matches",
    "vary_names",
    "without_conditionals",
]

#: WARC-renamed transfer headers (``X-Archive-Orig-Transfer-Encoding``): kept in the archive,
#: never replayed (the replay is its own hop).
ORIG_HEADER_PREFIX = "x-archive-orig-"


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
    #: stale within its stale-while-revalidate window: the copy now, a revalidation in the
    #: background (RFC 5861 §3)
    SERVE_STALE = "serve-stale"


# --- the browser's directives ---------------------------------------------------------------

#: ``max-stale`` without a value (RFC 9111 §5.2.1.2): any staleness will do.
ANY_STALENESS = DELTA_SECONDS_MAX


@dataclass(frozen=True)
class RequestDirectives:
    """What the browser asks of a cached answer (RFC 9111 §5.2.1)."""

    force: bool = False  # no-cache (a forced reload; Pragma: no-cache from HTTP/1.0 too)
    max_age: int | None = None  # a normal reload sends max-age=0
    only_if_cached: bool = False
    #: max-stale: a copy stale by up to this many seconds will do (:data:`ANY_STALENESS`
    #: without a value), unless the origin said must-revalidate
    max_stale: int | None = None
    min_fresh: int | None = None  # min-fresh: the copy must stay fresh this much longer
    #: no-store: the request and its answer are not to be stored (RFC 9111 §5.2.1.5); a
    #: stored copy may still answer it, so :func:`decide` does not read it
    no_store: bool = False


@functools.lru_cache(maxsize=256)
def request_directives(cache_control: str | None, pragma: str | None = None) -> RequestDirectives:
    """The browser's Cache-Control (and Pragma) as the policy needs them (cached: browsers
    send the same few values on every request).  A malformed argument counts as absent."""
    cc = parse_cache_control(cache_control)
    force = "no-cache" in cc
    if not cache_control and pragma and "no-cache" in parse_cache_control(pragma):
        force = True  # RFC 9111 §5.4: Pragma only when there is no Cache-Control
    max_stale = None
    if "max-stale" in cc:
        max_stale = ANY_STALENESS if cc["max-stale"] is None else seconds(cc["max-stale"])
    return RequestDirectives(
        force=force,
        max_age=seconds(cc.get("max-age")),
        only_if_cached="only-if-cached" in cc,
        max_stale=max_stale,
        min_fresh=seconds(cc.get("min-fresh")),
        no_store="no-store" in cc,
    )


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
        """:func:`freshness` of this response for a private cache, worked out once: a copy in
        the memory cache is judged on every hit, and its headers do not change."""
        return freshness(self.status, self.headers, self.date)

    @functools.cached_property
    def shared_freshness(self) -> Freshness:
        """:func:`freshness` of this response for a shared cache, worked out once."""
        return freshness(self.status, self.headers, self.date, shared=True)

    def freshness_for(self, shared: bool) -> Freshness:
        return self.shared_freshness if shared else self.origin_freshness

    @functools.cached_property
    def shared_reusable(self) -> bool:
        """May a shared cache give it to another client?  Not a ``private`` answer (RFC 9111
        §5.2.2.7); it is kept all the same, for its owner's offline reading."""
        return shared_reusable(self.headers)

    @functools.cached_property
    def initial_age(self) -> int:
        """How old it was when recorded: its ``Age`` or, if larger, how long before then its
        ``Date`` says it was made (RFC 9111 §4.2.3); worked out once."""
        return initial_age(self.headers, self.date)

    def age(self, now: datetime) -> float:
        """Its current age in seconds (never rounded; a copy recorded in the future is new)."""
        return max(0.0, (now - self.date).total_seconds()) + self.initial_age


def prefers_good(mode: Mode, keep_good_copy: bool) -> bool:
    """Does a lookup prefer the newest good capture over newer error answers?  Where the cache
    answers for the origin (offline, autodial) ``keep_good_copy`` decides, as WWWOFFLE's
    keep-cache-if-not-found; online the newest response counts, judged by its own freshness
    (RFC 9111 §4)."""
    return keep_good_copy and mode is not Mode.ONLINE


def _stretchable(
    stored: Stored, origin: Freshness, shared: bool, request_expired: bool, request_no_cache: bool
) -> bool:
    """May WWWOFFLE's ``request_changed`` raise this copy's lifetime?  Never for an error
    answer, ``no-store``, or in a shared cache what must be revalidated (s-maxage,
    proxy-revalidate, must-revalidate); a ``no-cache`` copy only without request_no_cache, an
    explicit lifetime (max-age, Expires) only without request_expired; a copy that gave no
    lifetime always."""
    if not is_good(stored.status) or origin.no_store or (shared and origin.must_revalidate):
        return False
    if origin.must_ask:
        return not request_no_cache
    return not (origin.explicit and request_expired)


def is_fresh(
    stored: Stored,
    now: datetime,
    *,
    rule_max_age: int | None = None,
    request_changed: int = 0,
    request_expired: bool = True,
    request_no_cache: bool = True,
    client_max_age: int | None = None,
    shared: bool = False,
    max_stale: int | None = None,
    min_fresh: int | None = None,
) -> bool:
    """May the copy be used without asking the origin?

    A configured ``freshness`` rule for the URL overrides what the origin said of a good
    answer (never of an error answer: a refetch may bring the good one back).  Otherwise
    the origin's lifetime (:func:`freshness`; ``shared``: a shared cache's, where s-maxage
    and CDN-Cache-Control count), raised to ``request_changed`` seconds where WWWOFFLE's
    saving rules allow it (:func:`_stretchable`: ``request_expired`` and
    ``request_no_cache`` off let it stretch explicit and no-cache lifetimes too).

    The browser's directives (RFC 9111 §5.2.1): its ``client_max_age`` (a reload sends 0)
    caps the age; ``min_fresh`` asks for that many seconds of freshness left; ``max_stale``
    accepts a copy stale by up to that many seconds, unless the origin said must-revalidate
    (or the shared equivalents) or no-cache.

    Fresh while the age is below the lifetime: a lifetime of 0 is never fresh.  An error
    answer is fresh as any other (the lookup decides which capture stands for the resource:
    :func:`prefers_good`).
    """
    if not is_servable(stored.status):
        return False  # a part or a 304 never stands for the resource
    age = stored.age(now)
    origin = stored.freshness_for(shared)
    if rule_max_age is not None and is_good(stored.status):
        lifetime = float(rule_max_age)
    else:
        lifetime = origin.lifetime
        if request_changed > lifetime and _stretchable(
            stored, origin, shared, request_expired, request_no_cache
        ):
            lifetime = float(request_changed)
    if client_max_age is not None and age > client_max_age:
        return False  # RFC 9111 §5.2.1.1: the browser takes an age up to its max-age
    if min_fresh is not None and lifetime - age < min_fresh:
        return False  # RFC 9111 §5.2.1.3
    if age < lifetime:
        return True
    stale_allowed = not (origin.must_ask or origin.must_revalidate)
    return max_stale is not None and stale_allowed and age - lifetime <= max_stale


def decide(
    mode: Mode,
    stored: Stored | None,
    now: datetime,
    *,
    method: str = "GET",
    directives: RequestDirectives = RequestDirectives(),  # noqa: B008 (frozen, shared safely)
    rule_max_age: int | None = None,
    request_changed: int = 0,
    request_expired: bool = True,
    request_no_cache: bool = True,
    ranged: bool = False,
    shared: bool = False,
    invalidated: bool = False,
) -> Action:
    """The action for one request.

    * offline: serve what is cached (a forced reload also queues a refresh, as WWWOFFLE
      does), queue the rest; the network is never touched;
    * autodial: serve what is cached unless the browser forces a reload, fetch the rest
      (the caller queues when the fetch fails);
    * online: serve a fresh copy (:func:`is_fresh`, with the browser's max-age, min-fresh
      and max-stale), serve a stale one within its stale-while-revalidate window while it is
      revalidated (SERVE_STALE), revalidate one with validators, fetch otherwise.  A copy an
      unsafe request has ``invalidated`` since it was recorded (RFC 9111 §4.4) is never
      fresh.  Methods other than GET and HEAD always go upstream: their stored answers are
      history, not a cache.  A ``ranged`` request (a Range header) is served from a fresh
      copy as any other (the replay cuts the range out); one that must go upstream is
      relayed and recorded as it is.

    A ``shared`` cache (many users behind one proxy) reads the shared rules (s-maxage,
    proxy-revalidate, CDN-Cache-Control) and, online and in autodial, treats a ``private``
    copy as no copy (RFC 9111 §5.2.2.7); offline it is served as before, to whoever the
    credential check (:class:`CredentialCheck`) admits.

    What it reads: the mode, the copy, the method, the directives, ``ranged``, ``shared``
    and ``invalidated``; online it also reads the time-dependent ``now``, and
    ``rule_max_age`` and the saving rules (see :func:`timeless`).
    """
    del ranged  # a range is the replay's business, not the decision's
    safe = method.upper() in ("GET", "HEAD")
    if mode is Mode.OFFLINE:
        if stored is None:
            return Action.QUEUE
        return Action.SERVE_AND_QUEUE if directives.force and safe else Action.SERVE
    if shared and stored is not None and not stored.shared_reusable:
        stored = None
    if directives.only_if_cached and safe:
        return Action.SERVE if stored is not None else Action.UNAVAILABLE
    if mode is Mode.AUTODIAL and stored is not None and not directives.force:
        return Action.SERVE
    if stored is None or not safe:
        return Action.FETCH
    if not directives.force and not invalidated:
        if is_fresh(
            stored,
            now,
            rule_max_age=rule_max_age,
            request_changed=request_changed,
            request_expired=request_expired,
            request_no_cache=request_no_cache,
            client_max_age=directives.max_age,
            shared=shared,
            max_stale=directives.max_stale,
            min_fresh=directives.min_fresh,
        ):
            return Action.SERVE
        if directives.max_age is None and _within_stale_window(stored, now, shared):
            return Action.SERVE_STALE
    return Action.REVALIDATE if stored.has_validators else Action.FETCH


def _within_stale_window(stored: Stored, now: datetime, shared: bool) -> bool:
    """Is the stale copy within its stale-while-revalidate window (RFC 5861 §3)?"""
    origin = stored.freshness_for(shared)
    window = origin.stale_while_revalidate
    return window > 0 and stored.age(now) < origin.lifetime + window


def timeless(mode: Mode) -> bool:
    """Does :func:`decide` in this mode depend only on the copy, the method, the browser's
    directives and ``shared`` (a config setting, fixed while the config object is), never on
    the moment, the freshness rules or ``request_changed``?  Offline, a copy is served
    whatever its age: a decision may then be kept with the copy and the request head (the
    fast front does, for every memory hit)."""
    return mode is Mode.OFFLINE


def may_serve_stale(stored: Stored, now: datetime | None = None, *, shared: bool = False) -> bool:
    """May this copy be served stale when the origin cannot be reached (RFC 9111 §4.2.4)?
    Not when the origin said ``no-cache`` or ``no-store`` (never without revalidation), nor
    once stale when it said ``must-revalidate`` (§5.2.2.2) or, in a ``shared`` cache,
    ``proxy-revalidate`` or ``s-maxage`` (§5.2.2.8, §5.2.2.10); nor, shared, a ``private``
    copy.  Without ``now`` the copy counts as stale."""
    origin = stored.freshness_for(shared)
    if origin.must_ask or (shared and not stored.shared_reusable):
        return False
    if not origin.must_revalidate:
        return True
    return now is not None and stored.age(now) < origin.lifetime


def after_upstream_error(
    mode: Mode,
    has_copy: bool,
    stored: Stored | None = None,
    now: datetime | None = None,
    *,
    shared: bool = False,
) -> Action | None:
    """The origin could not be reached: serve the stale copy (with a Warning), queue the
    request in autodial, or None for an error page.  With the ``stored`` copy (and ``now``),
    a copy the origin forbade serving stale (:func:`may_serve_stale`) counts as none."""
    if has_copy and (stored is None or may_serve_stale(stored, now, shared=shared)):
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
    ims = http_date(get_header(request_headers, "If-Modified-Since"))
    if ims is None:
        return False
    modified = http_date(get_header(response_headers, "Last-Modified"))
    return modified is not None and modified <= ims


#: RFC 9110 §15.4.5: what a 304 carries of the full answer.
_NOT_MODIFIED_KEEP = frozenset(
    {"cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified"}
)


def not_modified_headers(response_headers: Iterable[tuple[str, str]]) -> Headers:
    return [(n, v) for n, v in response_headers if n.lower() in _NOT_MODIFIED_KEEP]


# --- replays --------------------------------------------------------------------------------------


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
