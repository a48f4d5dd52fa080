"""Answer heads as bytes: the one place the proxy writes an HTTP head itself (the fast front's
answers, and the answers written before or instead of aiohttp: a refused connection, a head
that came too slowly, a request whose framing cannot be trusted, an origin's interim response).

Header text is written as aiohttp writes it (UTF-8), and a value that was not UTF-8 as its
bytes read as ISO-8859-1 (:func:`sendable_headers`), so both fronts send the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from email.utils import formatdate

__all__ = [
    "closing_answer",
    "connection_line",
    "header_lines",
    "http_now",
    "interim_head",
    "sendable_headers",
    "status_line",
]


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


def status_line(version: str, status: int, reason: str) -> bytes:
    """``HTTP/<version> <status> <reason>`` and its line end."""
    return f"HTTP/{version} {status} {reason}\r\n".encode("latin-1")


def header_lines(headers: Iterable[tuple[str, str]]) -> bytes:
    """One ``Name: value`` line per header, as :func:`sendable_headers` makes them."""
    return b"".join(f"{n}: {v}\r\n".encode() for n, v in sendable_headers(headers))


def interim_head(status: int, reason: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """An interim (1xx) head as forwarded to an HTTP/1.1 browser before the answer (RFC 9110
    §15.2): its status line and ``headers``, no body.  A reason phrase that is not printable
    ASCII is left out (the status code is what counts)."""
    if not (reason.isascii() and reason.isprintable()):
        reason = ""
    return status_line("1.1", status, reason) + header_lines(headers) + b"\r\n"


def connection_line(version: str, keep_alive: bool) -> bytes:
    """The Connection header line an answer needs, if any, as aiohttp writes it: what is not
    the version's default, ``close`` for HTTP/1.1 and ``keep-alive`` for HTTP/1.0."""
    if version == "1.0":
        return b"Connection: keep-alive\r\n" if keep_alive else b""
    return b"" if keep_alive else b"Connection: close\r\n"


_now_second = -1
_now_bytes = b""


def http_now() -> bytes:
    """The Date header's value for now, made once a second."""
    global _now_second, _now_bytes
    second = int(time.time())
    if second != _now_second:
        _now_second, _now_bytes = second, formatdate(second, usegmt=True).encode("latin-1")
    return _now_bytes


def closing_answer(
    status: int, reason: str, headers: Iterable[tuple[str, str]] = (), body: bytes = b""
) -> bytes:
    """A whole HTTP/1.1 answer after which the connection is closed: its status line,
    ``headers``, Content-Length, ``Connection: close`` and ``body``."""
    return (
        status_line("1.1", status, reason)
        + header_lines(headers)
        + b"Content-Length: %d\r\n" % len(body)
        + connection_line("1.1", False)
        + b"\r\n"
        + body
    )
