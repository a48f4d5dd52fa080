"""CONNECT tunnels (HTTPS through the proxy): bytes both ways, never cached."""

from __future__ import annotations

import asyncio
import contextlib
import html
from typing import TYPE_CHECKING

from aiohttp import web

from ..url import InvalidURL, canonicalize
from .modes import Mode
from .pages import page_response

if TYPE_CHECKING:
    from .server import ProxyServer

__all__ = ["tunnel"]

CHUNK = 64 * 1024


async def _pump_to_upstream(request: web.Request, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await request.content.readany():
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def _pump_to_client(reader: asyncio.StreamReader, request: web.Request) -> None:
    transport = request.transport
    try:
        while chunk := await reader.read(CHUNK):
            if transport is None or transport.is_closing():
                return
            transport.write(chunk)
            protocol = request.protocol
            # respect the client's pace (aiohttp's protocol pauses writing when buffers fill)
            if protocol is not None and getattr(protocol, "_paused", False):
                await protocol._drain_helper()  # noqa: SLF001 (aiohttp flow control)
    except (ConnectionError, OSError):
        pass


async def tunnel(request: web.Request, server: ProxyServer) -> web.StreamResponse:
    """Open a TCP tunnel to ``host:port`` when online and the port is allowed."""
    target = request.raw_path
    try:
        url = canonicalize(f"https://{target}/")
    except InvalidURL as exc:
        return page_response(400, "Invalid CONNECT target", html.escape(exc.reason))
    port = url.port or 443
    if port not in server.config.connect_ports:
        return page_response(
            403,
            "Port not allowed",
            f"CONNECT to port {port} is not allowed (allowed: "
            f"{', '.join(map(str, server.config.connect_ports))}).",
        )
    if server.state.mode is Mode.OFFLINE:
        return page_response(
            503,
            "Offline",
            f"wwwproxy is offline: the secure connection to <code>{html.escape(target)}</code> "
            "cannot be made, and encrypted traffic is not cached.",
        )
    host = url.host[1:-1] if url.host.startswith("[") else url.host
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), server.config.connect_timeout
        )
    except (TimeoutError, OSError) as exc:
        reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else str(exc)
        return page_response(
            502,
            "Bad gateway",
            f"Could not connect to <code>{html.escape(target)}</code>: {html.escape(reason)}.",
        )
    response = web.StreamResponse(status=200, reason="Connection Established")
    response.force_close()
    await response.prepare(request)
    up = asyncio.ensure_future(_pump_to_upstream(request, writer))
    down = asyncio.ensure_future(_pump_to_client(reader, request))
    try:
        done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if down not in done:
            # the browser is done sending; let the server finish its answer, within bounds
            await asyncio.wait({down}, timeout=server.config.read_timeout)
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        if request.transport is not None:
            request.transport.close()
    return response
