"""Answering from the cache, as data: the status line, headers and body decoding of a replay,
shared by the aiohttp path (:mod:`.server`) and the fast front (:mod:`.front`), and the range
of it a ``Range`` request asks for (:func:`plan_range`); whether the
fast front may answer a request itself, and with what bytes (:func:`plan_fast_answer`), or
why aiohttp's path answers it (:class:`ToAiohttp`); and the two checks both fronts make on
every request."""

from __future__ import annotations

import enum
import functools
import ipaddress
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

from ..archive.store import CachedEntry, Store
from ..config import Config, ModifyHTMLRule
from ..fetch.html_links import prescan_charset
from ..fetch.links import canonical_link, decode_bom, decode_text, page_base, web_codec
from ..http.content import ContentDecoder, charset_param, decode_content, decodes
from ..http.headers import Headers, add_via, get_header, set_header
from ..http.html_tokens import start_tags
from ..http.modify_html import (
    MAX_HTML,
    MAX_MARKED_LINKS,
    REWRITTEN_TAGS,
    StartTag,
    is_plain_html,
    link_refs,
    rewrite,
    rule_for,
)
from ..http.policy import (
    Action,
    accepts_coding,
    current_age,
    not_modified,
    not_modified_headers,
    replay_headers,
)
from ..http.ranges import RangePlan, body_parts, plan_ranges
from ..recording.engine import PSEUDONYM
from ..url import InvalidURL, canonicalize
from .heads import connection_line, header_lines, http_now, sendable_headers, status_line

if TYPE_CHECKING:
    from .request_head import ParsedHead

__all__ = [
    "JOINED_BODY",
    "MAX_BUFFERED",
    "FastAnswer",
    "RenderedHead",
    "Replay",
    "ToAiohttp",
    "accepts",
    "allowed_address",
    "bodiless",
    "cached_keys",
    "html_start_tags",
    "modified_page",
    "page_rule",
    "plan_fast_answer",
    "plan_range",
    "plan_replay",
    "sendable_headers",
]

log = logging.getLogger(__name__)


@dataclass
class Replay:
    """How a cached copy is answered: status line, headers, whether a body follows, and the
    decoder a client that does not take its content coding needs."""

    status: int
    reason: str
    headers: Headers
    send_body: bool
    decoder: ContentDecoder | None

    def ranged(self, plan: RangePlan) -> Replay:
        """This replay as ``plan`` answers it: a 206 or 416 in its place, or the whole with
        the plan's ``Accept-Ranges``."""
        status, reason = (plan.status, plan.reason) if plan.ranged else (self.status, self.reason)
        return Replay(status, reason, plan.apply(self.headers), self.send_body, self.decoder)


def plan_replay(
    cached: CachedEntry,
    method: str,
    request_headers: Mapping[str, str],
    *,
    stale: str | None = None,
    now: datetime | None = None,
    set_cookie: bool = False,
    max_decoded_size: int = 0,
) -> Replay:
    """The answer from the cache (the aiohttp path and the fast front share it): recorded
    end-to-end headers, ``Age``, ``X-Cache: HIT``, ``Via``; a decoded copy for a client without
    the coding (at most ``max_decoded_size`` bytes of it, 0: no limit); a 304 when the
    browser's own validators match (RFC 9111 §4.3.2).  The recorded ``Set-Cookie`` only with
    ``set_cookie`` (``replay_set_cookie``)."""
    now = now or datetime.now(UTC)
    headers = replay_headers(cached.headers, set_cookie=set_cookie)
    recorded_length = get_header(cached.headers, "Content-Length")
    headers = [(n, v) for n, v in headers if n.lower() not in ("content-length", "age")]
    coding = get_header(cached.headers, "Content-Encoding")
    decoder: ContentDecoder | None = None
    if (
        not bodiless(cached)
        and not accepts_coding(request_headers.get("Accept-Encoding"), coding)
        and decodes(coding)
    ):
        # Vary: Accept-Encoding: this client cannot take the coded copy: decode it on the
        # way out (a different representation, so its ETag becomes weak)
        decoder = ContentDecoder(coding, max_size=max_decoded_size or None)
        headers = [(n, v) for n, v in headers if n.lower() != "content-encoding"]
        etag = get_header(headers, "ETag")
        if etag and not etag.startswith("W/"):
            headers = set_header(headers, "ETag", "W/" + etag)
    elif bodiless(cached) and recorded_length is not None:
        # a HEAD (or 204/304) answer: its Content-Length describes the GET body it lacks
        headers.append(("Content-Length", recorded_length))
    elif not bodiless(cached):
        headers.append(("Content-Length", str(cached.payload_length)))
    age = current_age(cached.date, now, get_header(cached.headers, "Age"))
    headers.append(("Age", str(age)))
    # ours alone: an X-Cache the origin's CDN sent stays in the archive, not in the answer
    headers = set_header(headers, "X-Cache", "HIT")
    if stale is not None:
        headers.append(("Warning", f'111 {PSEUDONYM} "Revalidation Failed"'))
        headers = set_header(headers, "X-Cache-Stale", stale)
    headers = add_via(headers, (1, 1), PSEUDONYM)
    status, reason = cached.status, cached.reason
    send_body = method != "HEAD"
    if stale is None and not_modified(
        method, request_headers.items(), cached.status, cached.headers
    ):
        status, reason, send_body = 304, "Not Modified", False
        headers = not_modified_headers(headers) + [
            (n, v) for n, v in headers if n in ("Age", "X-Cache", "Via")
        ]
    return Replay(status, reason, headers, send_body, decoder)


def plan_range(
    replay: Replay,
    cached: CachedEntry,
    method: str,
    request_headers: Mapping[str, str],
    *,
    transformed: bool = False,
) -> RangePlan | None:
    """What of ``replay`` the request's ``Range`` and ``If-Range`` ask for
    (:func:`~wwwproxy.http.ranges.plan_ranges`, after the 304 check as RFC 9110 §13.2.2 says);
    None when the replay goes as it is: a 304, or a copy without a body of its own (a HEAD's,
    a 204).  ``transformed``: the copy is rewritten on the way out (``modify_html``); a copy
    decoded for the client is too."""
    if replay.status == 304 or bodiless(cached):
        return None
    return plan_ranges(
        request_headers.get("Range"),
        cached.status,
        cached.headers,
        cached.payload_length,
        method=method,
        if_range=request_headers.get("If-Range"),
        transformed=transformed or replay.decoder is not None,
    )


# --- the fast front's answer ------------------------------------------------------------------

#: bodies up to this are joined to their head for one write; larger ones are not copied
JOINED_BODY = 16 * 1024
#: bytes waiting for a browser that does not read, past which aiohttp's flow control answers
MAX_BUFFERED = 4 * 1024 * 1024


class ToAiohttp(enum.Enum):
    """Why the fast front leaves a request to aiohttp's path (from the first byte of that
    request on): each is something that path does that the fast answer does not."""

    CLIENT = "a client the allowed networks leave out (refused)"
    NOT_PLAIN_GET = "not a GET of an http:// URL in absolute form"
    HEAD_TOO_LONG = "a head longer than aiohttp's line and field limits"
    BARE_LINE_FEEDS = "lines ended by a bare line feed"
    MALFORMED = "a head httptools refuses (or that is not a whole message)"
    VERSION = "an HTTP version other than 1.0 and 1.1"
    UPGRADE = "an upgrade (a WebSocket)"
    BODY = "a request body (Content-Length, Transfer-Encoding)"
    EXPECT = "an Expect header"
    PROXY_AUTHORIZATION = "a Proxy-Authorization header"
    LOOP = "our own pseudonym in a Via header (a loop)"
    AFTER_CLOSE = "bytes after a request that closes the connection (aiohttp refuses them)"
    TARGET = "a URL the cache does not answer: not http, the proxy's own, filtered, invalid"
    NOT_CACHED = "no copy of it (a miss)"
    NOT_IN_MEMORY = "a copy too large for memory: streamed from disk"
    MODIFY_HTML = "a URL a modify_html rule covers (changed, or its scripts off)"
    BACKLOG = "a browser that does not read its answers (flow control)"
    CREDENTIALS = "a copy for other credentials"
    SET_COOKIE = "a copy whose Set-Cookie is replayed"
    POLICY = "the policy says other than serve (fetch, revalidate, queue...)"
    DECODE = "a coding the browser does not take: decoded on the way out"
    MULTIPART = "ranges answered as multipart/byteranges"
    FAILED = "an error in the fast path (logged)"


class FastAnswer(NamedTuple):
    """The fast front's whole answer to one request: written as ``head`` then ``body``."""

    status: int
    head: bytes  # the head, with the body joined when it is small (then ``body`` is empty)
    body: bytes  # a large body, written after the head without copying it
    length: int  # the body's length (the access log's)
    close: bool  # the connection ends after the answer


def plan_fast_answer(
    request: ParsedHead,
    cached: CachedEntry,
    config: Config,
    *,
    admitted: bool,
    action: Action,
    backlog: int,
    pipelined: bool,
    now: float,
) -> FastAnswer | ToAiohttp:
    """May the fast front answer ``request`` from ``cached`` (a copy with its body read),
    and with what bytes at ``now`` (``time.time()``); else why aiohttp's path answers it.
    ``admitted`` is :meth:`~.server.ProxyServer.may_serve`, ``action`` what the policy says
    (:meth:`~.server.ProxyServer.action_for`), ``backlog`` the bytes not yet written to the
    browser, ``pipelined`` whether bytes came after the request.  The fast answer is only
    ever the one aiohttp's path would give, and it closes the connection when that does."""
    version, keep_alive = request.version, request.keep_alive
    if pipelined and not keep_alive:
        return ToAiohttp.AFTER_CLOSE
    body = cached.body
    if body is None:
        return ToAiohttp.NOT_IN_MEMORY
    if config.modify_html and url_rule(config.modify_html, cached) is not None:
        return ToAiohttp.MODIFY_HTML
    if backlog > MAX_BUFFERED:
        return ToAiohttp.BACKLOG
    if not admitted:
        return ToAiohttp.CREDENTIALS
    if config.replay_set_cookie and get_header(cached.headers, "Set-Cookie"):
        return ToAiohttp.SET_COOKIE  # the heads made here leave Set-Cookie out
    if action is not Action.SERVE:
        return ToAiohttp.POLICY
    if request.conditional:  # the browser's validators or range (a 304, a 206): in full
        replay = plan_replay(cached, "GET", request.headers)
        if replay.decoder is not None:
            return ToAiohttp.DECODE
        plan = plan_range(replay, cached, "GET", request.headers)
        if plan is not None:
            if plan.ranged and len(plan.body) > 1:
                return ToAiohttp.MULTIPART
            replay = replay.ranged(plan)
            if plan.ranged:  # one span of the body, or none (416)
                body = b"".join(body_parts(plan.body, body))
        date = b"" if get_header(replay.headers, "Date") else b"Date: " + http_now() + b"\r\n"
        head = (
            status_line(version, replay.status, replay.reason)
            + header_lines(replay.headers)
            + date
            + connection_line(version, keep_alive)
            + b"\r\n"
        )
        status = replay.status
        if not replay.send_body:
            body = b""
    else:
        rendered = RenderedHead.of(cached)
        if rendered.coding is not None and not accepts(
            request.headers.get("Accept-Encoding"), rendered.coding
        ):
            return ToAiohttp.DECODE
        status = rendered.status
        if keep_alive and version == "1.1":
            joined = rendered.usual(now)
            if joined is not None:
                return FastAnswer(status, joined, b"", len(body), False)
            head = rendered.kept_alive
        else:
            head = rendered.head(version, keep_alive, now)
    if len(body) > JOINED_BODY:
        return FastAnswer(status, head, body, len(body), not keep_alive)
    return FastAnswer(status, head + body, b"", len(body), not keep_alive)


@functools.lru_cache(maxsize=256)
def accepts(accept_encoding: str | None, coding: str) -> bool:
    """accepts_coding, cached: browsers send the same few Accept-Encoding values."""
    return accepts_coding(accept_encoding, coding)


class RenderedHead:
    """A memory copy's answer head rendered once, for requests without the browser's own
    conditions: everything but ``Age``, ``Date`` (when the recording has none) and
    ``Connection``, which depend on the moment and the request."""

    __slots__ = (
        "status",
        "status_reason",
        "lines",
        "after_age",
        "http11",
        "recorded",
        "initial_age",
        "date",
        "coding",
        "moment",
        "kept_alive",
        "joined",
        "body",
    )

    def __init__(self, entry: CachedEntry) -> None:
        # as for a browser that takes any coding: one that does not is checked per request
        replay = plan_replay(entry, "GET", {"Accept-Encoding": "*"})
        plan = plan_range(replay, entry, "GET", {})  # no Range: its Accept-Ranges
        if plan is not None:
            replay = replay.ranged(plan)
        self.status = replay.status
        self.status_reason = replay.reason
        #: the header lines before Age (which is made per answer), and after it
        at = next(i for i, (n, _) in enumerate(replay.headers) if n.lower() == "age")
        self.lines = header_lines(replay.headers[:at])
        self.after_age = header_lines(replay.headers[at + 1 :])
        self.http11 = status_line("1.1", replay.status, replay.reason) + self.lines
        self.recorded = entry.date.timestamp()
        age = get_header(entry.headers, "Age")
        self.initial_age = current_age(entry.date, entry.date, age)
        self.date = not any(n.lower() == "date" for n, _ in replay.headers)
        coding = get_header(entry.headers, "Content-Encoding")
        #: a coding the browser must accept, or the aiohttp path decodes it on the way
        self.coding = coding if coding and not bodiless(entry) and decodes(coding) else None
        #: the HTTP/1.1 keep-alive head (the usual one) as made at ``moment`` (the second
        #: of Date, and of the time in the cache): Age and Date change once a second
        self.moment = (-1, -1)
        self.kept_alive = b""
        #: ``kept_alive`` and the body, for a body small enough to join (else None)
        self.joined: bytes | None = None
        self.body = entry.body if entry.body is not None else b""

    @classmethod
    def of(cls, entry: CachedEntry) -> RenderedHead:
        """The entry's rendered head, made on its first answer and kept with it."""
        rendered = entry.memo.get("front.head")
        if rendered is None:
            rendered = entry.memo["front.head"] = cls(entry)
        return rendered

    def head(self, version: str, keep_alive: bool, now: float) -> bytes:
        """The head for an answer at ``now`` (``time.time()``)."""
        resident = int(now - self.recorded)
        usual = keep_alive and version == "1.1"
        if usual and (int(now), resident) == self.moment:
            return self.kept_alive
        age = self.initial_age + max(0, resident)
        if usual:
            head = self._make(self.http11, age, b"")
            self.moment, self.kept_alive = (int(now), resident), head
            self.joined = head + self.body if len(self.body) <= JOINED_BODY else None
            return head
        if version == "1.1":
            start = self.http11
        else:
            start = status_line(version, self.status, self.status_reason) + self.lines
        return self._make(start, age, connection_line(version, keep_alive))

    def usual(self, now: float) -> bytes | None:
        """The whole HTTP/1.1 keep-alive answer at ``now``, head and body in one bytes
        (made once per moment, as its head), or None when the body is not joined."""
        if (int(now), int(now - self.recorded)) != self.moment:
            self.head("1.1", True, now)
        return self.joined

    def _make(self, start: bytes, age: int, connection: bytes) -> bytes:
        date = b"Date: " + http_now() + b"\r\n" if self.date else b""
        return b"%sAge: %d\r\n%s%s%s\r\n" % (start, age, self.after_age, date, connection)


@functools.lru_cache(maxsize=1024)
def allowed_address(
    peer: str, networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
) -> bool:
    """Is this client address in the allowed networks?  (Cached: a browser's address is asked
    about on every request, and parsing it costs more than the rest of a memory hit's checks.)"""
    try:
        addr = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    return any(addr in net for net in networks)


def bodiless(cached: CachedEntry) -> bool:
    """A capture whose recorded Content-Length is not its (empty) payload's length."""
    return (
        (cached.request_method or "").upper() == "HEAD"
        or cached.status in (204, 304)
        or 100 <= cached.status < 200
    )


# --- offline reading (modify_html) ------------------------------------------------------------


def url_rule(rules: Sequence[ModifyHTMLRule], cached: CachedEntry) -> ModifyHTMLRule | None:
    """The ``modify_html`` rule of this copy's URL, whatever the copy is (a page too large
    to change, XHTML or SVG still gets ``disable_scripts``' Content-Security-Policy).  Kept
    with the copy for these rules: the fast front asks on every memory hit."""
    if not rules:
        return None
    memo = cached.memo.get("modify_html.url_rule")
    if memo is not None and memo[0] is rules:
        return memo[1]
    try:
        rule = rule_for(rules, canonicalize(cached.target_uri).canonical)
    except InvalidURL:
        rule = None
    cached.memo["modify_html.url_rule"] = (rules, rule)
    return rule


def page_rule(rules: Sequence[ModifyHTMLRule], cached: CachedEntry) -> ModifyHTMLRule | None:
    """The ``modify_html`` rule that changes this copy on its way out: a ``text/html`` body
    (not a partial one) of a URL a rule matches; None for every other copy."""
    rule = url_rule(rules, cached)
    if (
        rule is None
        or bodiless(cached)
        or cached.status == 206
        or not is_plain_html(get_header(cached.headers, "Content-Type"))
    ):
        return None
    return rule


def html_start_tags(text: str) -> Iterator[StartTag]:
    """The start tags of a page that links, scripts and meta refresh are in, where they are,
    read by the link extractor's tokenizer (:mod:`wwwproxy.http.html_tokens`); text inside
    ``<script>``, ``<style>``, ``<textarea>``... is text.  Never raises."""
    for start, end, name, attrs, _ in start_tags(text, REWRITTEN_TAGS):
        yield start, end, name, attrs


def cached_keys(store: Store, keys: list[str]) -> set[str]:
    """Which of these archive keys the index has a capture of (any status: what a browser
    following the link offline would be served); one worker-thread hop for a whole page."""
    return {key for key in keys if store.captures(key)}


def _decode_page(data: bytes, content_type: str | None) -> str:
    """A page's text by the browser's order: BOM, the Content-Type charset, a ``<meta>`` in the
    first 1024 bytes; a page that says nothing is UTF-8 if it is valid UTF-8, else
    windows-1252 (what browsers fall back to)."""
    bom = decode_bom(data)
    if bom is not None:
        return bom[0]
    codec = web_codec(charset_param(content_type)) or prescan_charset(data)
    if codec is not None:
        return decode_text(data, codec)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return decode_text(data, "cp1252")


def modified_page(
    cached: CachedEntry,
    rule: ModifyHTMLRule,
    in_cache: Callable[[list[str]], set[str]],
) -> bytes | None:
    """The copy's page with ``rule``'s changes, as UTF-8 (whatever its charset was: every
    character the page had can be written in it), or None to serve it as it is: too large,
    a coding that cannot be undone, or anything unexpected (logged).  ``in_cache`` gets the
    archive keys of all the page's links at once and returns those that are cached.  Blocks
    (it reads the stored body): call it in a worker thread."""
    try:
        if cached.payload_length > MAX_HTML:
            return None
        coding = get_header(cached.headers, "Content-Encoding")
        if not decodes(coding):
            return None
        if cached.body is not None:
            raw = cached.body
        else:
            with cached.open_body() as stream:
                raw = stream.read(MAX_HTML + 1)
        data = decode_content(raw, coding, MAX_HTML + 1)
        if len(data) > MAX_HTML:
            return None
        text = _decode_page(data, get_header(cached.headers, "Content-Type"))
        # NUL as the HTML tokenizer reads it: one character for one, so places stay
        tags = list(html_start_tags(text.replace("\x00", "\ufffd")))
        state: dict[str, bool] = {}
        base_href, refs = link_refs(tags) if rule.mark_links else (None, [])
        if rule.mark_links and len(refs) <= MAX_MARKED_LINKS:
            base = page_base(cached.target_uri)
            if base_href is not None:
                base = canonical_link(base_href, base, None) or base
            # sent as UTF-8, the page's links are asked for with UTF-8 queries
            keys = {ref: canonical_link(ref, base, None) for ref in set(refs)}
            found = in_cache(sorted({k for k in keys.values() if k is not None}))
            state = {ref: key in found for ref, key in keys.items() if key is not None}
        return rewrite(text, tags, rule, state).encode("utf-8")
    except (ValueError, OSError) as exc:  # a coded copy that does not decode, a lost file
        log.warning("served %s unmodified: %s", cached.target_uri, exc)
    except Exception:  # noqa: BLE001 (never fail a cache hit for the rewrite's sake)
        log.exception("served %s unmodified: the HTML rewrite failed", cached.target_uri)
    return None
