"""Relaying an origin's answer to the browser over aiohttp: the engine's sink for a browser's
connection (:class:`BrowserSink`), the response that carries the origin's headers only
(:class:`ForwardedResponse`), and the answer to ``Expect: 100-continue``."""

from __future__ import annotations

import contextlib

import aiohttp
from aiohttp import web

from ..http.headers import Headers, add_via, end_to_end, get_header, set_header
from ..http.policy import not_modified, not_modified_headers
from ..recording.engine import PSEUDONYM, decode_headers
from ..recording.upstream_protocol import RawHeaders
from .heads import interim_head
from .replay import sendable_headers

__all__ = ["BrowserSink", "ForwardedResponse", "send_continue"]


class BrowserSink:
    """The engine's :class:`~wwwproxy.recording.engine.Sink` for a browser's connection: the
    origin's answer relayed with ``Via`` and ``X-Cache: MISS``, or a 304 when the browser's own
    validators match it (the whole answer is still recorded); before it, the origin's interim
    responses (:meth:`interim`)."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None
        self._swallow = False

    async def start(
        self,
        status: int,
        reason: str,
        headers: Headers,
        version: tuple[int, int],
        *,
        body_ready: bool = False,
    ) -> bool:
        request = self.request
        out = add_via(end_to_end(headers), version, PSEUDONYM)
        out = set_header(out, "X-Cache", "MISS")  # ours alone (see serve_cached)
        if not_modified(request.method, request.headers.items(), status, headers):
            status, reason, self._swallow = 304, "Not Modified", True
            out = not_modified_headers(out) + [(n, v) for n, v in out if n in ("X-Cache", "Via")]
        response = ForwardedResponse(status=status, reason=reason)
        if body_ready:
            # the head goes out with the first part of the body (or with its end): one write
            # to the browser fewer (aiohttp's switch; without it, the head goes at once)
            response._send_headers_immediately = False  # noqa: SLF001
        for name, value in sendable_headers(out):
            response.headers.add(name, value)
        has_length = get_header(headers, "Content-Length") is not None
        if not has_length and request.version < aiohttp.HttpVersion11:
            response.force_close()
        self.response = response
        try:
            await response.prepare(request)
        except ConnectionError:
            return False
        return True

    def interim(
        self, status: int, reason: str, version: tuple[int, int], raw_headers: RawHeaders
    ) -> None:
        """Forward an interim (1xx) response of the origin, with ``Via`` (RFC 9110 §15.2: a
        proxy forwards them, but never to an HTTP/1.0 client), while nothing of the answer has
        been written.  It is not recorded: the archive holds the final answer only."""
        request, transport = self.request, self.request.transport
        if self.response is not None or request.version < aiohttp.HttpVersion11:
            return
        if transport is None or transport.is_closing():
            return
        headers = add_via(end_to_end(decode_headers(raw_headers)), version, PSEUDONYM)
        transport.write(interim_head(status, reason, headers))

    async def write(self, chunk: bytes) -> bool:
        """Write to the browser; False once it has gone.  (A write waiting for a slow browser
        that then leaves fails with a plain ConnectionError, not ConnectionResetError.)"""
        if self._swallow:
            return True
        assert self.response is not None
        try:
            await self.response.write(chunk)
        except ConnectionError:
            return False
        return True

    async def end(self, complete: bool) -> None:
        if not complete:
            # a cut-off body must look cut off to the browser, never complete
            if self.request.transport is not None:
                self.request.transport.close()
            return
        assert self.response is not None
        with contextlib.suppress(ConnectionError):
            await self.response.write_eof()


async def send_continue(request: web.Request) -> None:
    """aiohttp's answer to ``Expect: 100-continue`` (417 for any other expectation), but a
    browser gone before its ``100 Continue`` is no traceback: the request then finds its body
    cut off, as for any browser that leaves."""
    expect = request.headers.get("Expect", "")
    if request.version != aiohttp.HttpVersion11:
        return
    if expect.lower() != "100-continue":
        raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
    try:
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    except ConnectionResetError:
        return
    request.writer.output_size = 0  # the answer's own size starts after it


class ForwardedResponse(web.StreamResponse):
    """A response relayed or replayed with the origin's headers only: aiohttp's defaults for
    a missing Content-Type (``application/octet-stream``, which would stop a browser from
    sniffing the type as it would without the proxy) and Server are taken out again."""

    async def _prepare_headers(self) -> None:
        absent = [name for name in ("Content-Type", "Server") if name not in self.headers]
        await super()._prepare_headers()
        for name in absent:
            self.headers.popall(name, None)
