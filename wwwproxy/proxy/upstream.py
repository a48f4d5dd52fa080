"""Requests to origin servers (aiohttp client), with bounded timeouts and raw bodies.

Bodies are taken as the origin sent them (``auto_decompress=False``): the archive must hold the
bytes the browser received, with their Content-Encoding, so a replay is byte-identical.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

import aiohttp
from yarl import URL as YURL

from ..url import URL

__all__ = ["UpstreamError", "UpstreamTimeouts", "new_session", "open_upstream", "upstream_url"]


class UpstreamError(Exception):
    """The origin could not be reached or failed mid-response; ``status`` is 502 or 504."""

    def __init__(self, url: str, reason: str, status: int = 502) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class UpstreamTimeouts:
    connect: float = 10.0
    read: float = 60.0


def new_session(
    timeouts: UpstreamTimeouts,
    limit_per_host: int = 8,
    resolver: aiohttp.abc.AbstractResolver | None = None,
) -> aiohttp.ClientSession:
    """One shared client session: keep-alive to origins, no cookies, no decompression.
    ``resolver`` replaces DNS (tests send names such as ``example.com`` to local servers)."""
    if resolver is None:
        connector = aiohttp.TCPConnector(limit=256, limit_per_host=limit_per_host, ttl_dns_cache=60)
    else:
        connector = aiohttp.TCPConnector(
            limit=256, limit_per_host=limit_per_host, resolver=resolver, use_dns_cache=False
        )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect, sock_read=timeouts.read
        ),
        skip_auto_headers=("Accept-Encoding", "User-Agent", "Accept"),
        trust_env=False,
    )


def upstream_url(url: URL) -> YURL:
    """The canonical URL exactly as canonicalized (``encoded=True``: yarl must not requote)."""
    return YURL(url.canonical, encoded=True)


def _basic_auth(url: URL) -> aiohttp.BasicAuth | None:
    if url.user is None:
        return None
    from urllib.parse import unquote

    return aiohttp.BasicAuth(unquote(url.user), unquote(url.password or ""))


def describe_error(exc: BaseException) -> tuple[str, int]:
    """A reason a person can read, and 502 or 504."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "the connection to the server timed out", 504
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "the server did not answer in time", 504
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
    try:
        return await session.request(
            method,
            upstream_url(url),
            headers=headers,
            data=body if body else None,
            allow_redirects=False,
            auth=_basic_auth(url),
            ssl=None,
        )
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        reason, status = describe_error(exc)
        raise UpstreamError(url.canonical, reason, status) from exc
