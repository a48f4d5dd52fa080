"""Requests to origin servers (aiohttp client), with bounded timeouts and raw bodies.

Bodies are taken as the origin sent them (``auto_decompress=False``): the archive must hold the
bytes the browser received, with their Content-Encoding, so a replay is byte-identical.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote_to_bytes

import aiohttp
from aiohttp import http_writer
from yarl import URL as YURL

from ..url import URL

__all__ = [
    "UpstreamError",
    "UpstreamTimeouts",
    "basic_authorization",
    "new_session",
    "open_upstream",
    "serialize_head",
    "upstream_url",
]


class UpstreamError(Exception):
    """The origin could not be reached or failed mid-response; ``status`` is 502 or 504.
    ``untrusted``: its TLS certificate failed verification (never answered with a copy)."""

    def __init__(self, url: str, reason: str, status: int = 502, *, untrusted: bool = False):
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status
        self.untrusted = untrusted


def tls_context(extra_ca: str | os.PathLike[str] | None = None) -> ssl.SSLContext:
    """Upstream TLS: verified against the system's CAs, plus ``extra_ca`` (a PEM file: a
    corporate or test CA).  Nothing is downgraded; ValueError says what is wrong with the file."""
    context = ssl.create_default_context()
    if extra_ca is not None:
        try:
            context.load_verify_locations(cafile=os.fspath(extra_ca))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"upstream_ca {os.fspath(extra_ca)!r}: {exc}") from None
    return context


@dataclass(frozen=True)
class UpstreamTimeouts:
    connect: float = 10.0
    read: float = 60.0


# --- header bytes as they came ----------------------------------------------------------------

#: what aiohttp refuses in a head (RFC 9110 §5.5): control characters but HTAB, and DEL
_FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class _Items(Protocol):
    def items(self) -> Iterable[tuple[str, str]]: ...


def _escaped(text: str) -> bool:
    """Does ``text`` hold bytes that were not UTF-8 (surrogate escapes), which aiohttp's
    serializer would drop (its C one) or refuse (its Python one)?"""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


#: aiohttp's own serializer (C), for the heads that are text throughout
_AIOHTTP_HEAD = http_writer._serialize_headers


def serialize_head(status_line: str, headers: _Items) -> bytes:
    """A request or response head as aiohttp writes it, but a header that came with bytes
    that are not UTF-8 (held as surrogate escapes, as aiohttp's parser decodes them) goes out
    as exactly those bytes: ``caf\\xe9`` reaches the origin as it came, not as ``caf``.
    Control characters are refused as aiohttp refuses them (ValueError), so CR, LF and NUL
    never reach the wire.  Heads without such bytes take aiohttp's fast serializer."""
    items = list(headers.items())
    if not any(_escaped(name) or _escaped(value) for name, value in items):
        return _AIOHTTP_HEAD(status_line, headers)
    lines = [status_line, *(f"{name}: {value}" for name, value in items)]
    if any(_FORBIDDEN.search(line) for line in lines):
        raise ValueError(
            "Forbidden control character detected in headers. Potential header injection attack."
        )
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


# aiohttp builds every head in ``http_writer._serialize_headers``, a module global it looks up
# on each call (its request and response classes offer no other hook: ClientRequest.send makes
# its StreamWriter itself), so that is where the header bytes are kept.
http_writer._serialize_headers = serialize_head


def new_session(
    timeouts: UpstreamTimeouts,
    limit_per_host: int = 8,
    resolver: aiohttp.abc.AbstractResolver | None = None,
    *,
    limit: int = 256,
    ssl_context: ssl.SSLContext | None = None,
) -> aiohttp.ClientSession:
    """One shared client session: keep-alive to origins, no cookies, no decompression.
    ``resolver`` replaces DNS (tests send names such as ``example.com`` to local servers).
    ``limit_per_host`` and ``limit`` bound the open connections (0: no bound); a request over
    the bound waits, without a time limit, for a response to finish."""
    tls = ssl_context if ssl_context is not None else tls_context()
    if resolver is None:
        connector = aiohttp.TCPConnector(
            limit=limit, limit_per_host=limit_per_host, ttl_dns_cache=60, ssl=tls
        )
    else:
        connector = aiohttp.TCPConnector(
            limit=limit,
            limit_per_host=limit_per_host,
            resolver=resolver,
            use_dns_cache=False,
            ssl=tls,
        )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect, sock_read=timeouts.read
        ),
        # only what the browser sent: no Content-Type made up for a body sent without one
        skip_auto_headers=("Accept-Encoding", "User-Agent", "Accept", "Content-Type"),
        trust_env=False,
    )


def upstream_url(url: URL) -> YURL:
    """The canonical URL exactly as canonicalized (``encoded=True``: yarl must not requote)."""
    return YURL(url.canonical, encoded=True)


def basic_authorization(url: URL) -> str | None:
    """The ``Authorization`` value for credentials in the URL (RFC 7617), from the bytes the
    URL holds, as browsers send them (UTF-8 for non-ASCII text); None without credentials."""
    if url.user is None:
        return None
    credentials = unquote_to_bytes(url.user) + b":" + unquote_to_bytes(url.password or "")
    return "Basic " + base64.b64encode(credentials).decode("ascii")


def describe_error(exc: BaseException) -> tuple[str, int]:
    """A reason a person can read, and 502 or 504."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "the connection to the server timed out", 504
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "the server did not answer in time", 504
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        inner = exc.certificate_error
        why = getattr(inner, "verify_message", None) or getattr(inner, "reason", None) or inner
        return f"its TLS certificate could not be verified ({why})", 502
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"the TLS handshake failed ({exc.os_error})", 502
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "the host name could not be resolved", 502
    if isinstance(exc, aiohttp.ClientConnectorError):
        inner = exc.os_error
        if isinstance(inner, ConnectionRefusedError):
            return "the connection was refused", 502
        if isinstance(inner, socket.gaierror):
            return "the host name could not be resolved", 502
        return f"could not connect ({inner.strerror or inner})", 502
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection without answering", 502
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"the response body was cut off ({exc})", 502
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"the server sent a malformed response ({exc.message})", 502
    if isinstance(exc, aiohttp.ClientError | OSError):
        return f"{type(exc).__name__}: {exc}", 502
    return f"{type(exc).__name__}: {exc}", 502


async def open_upstream(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    headers: list[tuple[str, str]],
    body: bytes | None,
) -> aiohttp.ClientResponse:
    """Send the request and return the response with its body not yet read.

    Raises :class:`UpstreamError` with a readable reason for any failure to connect or answer.
    """
    # The browser's own Authorization wins over credentials in the URL.
    authorization = basic_authorization(url)
    if authorization is not None and not any(n.lower() == "authorization" for n, _ in headers):
        headers = [*headers, ("Authorization", authorization)]
    try:
        response = await session.request(
            method,
            upstream_url(url),
            headers=headers,
            data=body if body else None,
            allow_redirects=False,
        )
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        reason, status = describe_error(exc)
        untrusted = isinstance(exc, aiohttp.ClientSSLError)
        raise UpstreamError(url.canonical, reason, status, untrusted=untrusted) from exc
    if response.status == 101:
        # The Upgrade header is hop-by-hop and was not forwarded, so this is the server's
        # error; relayed, it would leave the browser waiting on a connection nobody speaks on.
        response.close()
        raise UpstreamError(
            url.canonical, "the server switched protocols, which the proxy does not relay"
        )
    return response
