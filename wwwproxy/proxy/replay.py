"""Answering from the cache, as data: the status line, headers and body decoding of a replay,
shared by the aiohttp path (:mod:`.server`) and the fast front (:mod:`.front`); and the two
checks both fronts make on every request."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from ..archive.store import CachedEntry
from ..http.content import ContentDecoder, decodes
from ..http.headers import Headers, add_via, get_header, set_header
from ..http.policy import (
    accepts_coding,
    current_age,
    not_modified,
    not_modified_headers,
    replay_headers,
)
from ..recording.engine import PSEUDONYM

__all__ = ["Replay", "allowed_address", "bodiless", "plan_replay", "sendable_headers"]


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
) -> Replay:
    """The answer from the cache (the aiohttp path and the fast front share it): recorded
    end-to-end headers, ``Age``, ``X-Cache: HIT``, ``Via``; a decoded copy for a client without
    the coding; a 304 when the browser's own validators match (RFC 9111 §4.3.2)."""
    now = now or datetime.now(UTC)
    headers = replay_headers(cached.headers)
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
