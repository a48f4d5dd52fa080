"""Answering from the cache, as data: the status line, headers and body decoding of a replay,
shared by the aiohttp path (:mod:`.server`) and the fast front (:mod:`.front`); and the two
checks both fronts make on every request."""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..archive.store import CachedEntry, Store
from ..config import ModifyHTMLRule
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
    accepts_coding,
    current_age,
    not_modified,
    not_modified_headers,
    replay_headers,
)
from ..recording.engine import PSEUDONYM
from ..url import InvalidURL, canonicalize

__all__ = [
    "Replay",
    "allowed_address",
    "bodiless",
    "cached_keys",
    "html_start_tags",
    "modified_page",
    "page_rule",
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


def plan_replay(
    cached: CachedEntry,
    method: str,
    request_headers: Mapping[str, str],
    *,
    stale: str | None = None,
    now: datetime | None = None,
    set_cookie: bool = False,
) -> Replay:
    """The answer from the cache (the aiohttp path and the fast front share it): recorded
    end-to-end headers, ``Age``, ``X-Cache: HIT``, ``Via``; a decoded copy for a client without
    the coding; a 304 when the browser's own validators match (RFC 9111 §4.3.2).  The
    recorded ``Set-Cookie`` only with ``set_cookie`` (``replay_set_cookie``)."""
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
        decoder = ContentDecoder(coding)
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


def sendable_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers aiohttp can write: it writes text as UTF-8 and silently drops the escaped bytes
    of a value that was not UTF-8, so such a value is sent read as ISO-8859-1 instead (the
    archive keeps the exact bytes)."""
    out = []
    for name, value in headers:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "surrogateescape").decode("latin-1")
        out.append((name, value))
    return out


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
