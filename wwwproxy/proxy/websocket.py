"""WebSocket upgrades relayed both ways while online (plain http and inside intercepted
tunnels).  Messages are not recorded: a conversation is not a resource to replay.  Each is
read whole before it is passed on, so each is bounded (``websocket_max_message``): a larger
one closes both sides with 1009 (message too big)."""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging

import aiohttp
from aiohttp import web
from yarl import URL as YURL

from ..recording.services import Services
from ..recording.upstream import describe_error, describe_proxy_error, proxy_arguments
from ..url import URL
from .pages import page_response

__all__ = ["is_websocket", "relay_websocket"]

log = logging.getLogger("wwwproxy.proxy")

#: what of the browser's handshake the origin needs to accept it (the rest is the handshake's)
_FORWARDED = frozenset({"origin", "cookie", "authorization", "user-agent", "accept-language"})


def is_websocket(request: web.BaseRequest) -> bool:
    return (
        request.method == "GET"
        and request.headers.get("Upgrade", "").strip().lower() == "websocket"
        and "upgrade" in request.headers.get("Connection", "").lower()
    )


async def relay_websocket(
    request: web.Request, url: URL, services: Services, path: str
) -> web.StreamResponse:
    """Open the same WebSocket upstream, then accept the browser's and relay until either
    side closes.  ``path``: the path and query as the browser sent them
    (:func:`~wwwproxy.url.wire.wire_target`), asked for as they are."""
    scheme = "wss" if url.proto == "https" else "ws"
    target = f"{scheme}://{url.hostport}{path}"
    protocols = [
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    ]
    headers = [(k, v) for k, v in request.headers.items() if k.lower() in _FORWARDED]
    proxy = services.engine.proxies.for_url(url)
    headers, via = proxy_arguments(proxy, url.proto == "https", headers)
    # a proxy is sent an http:// URL (the scheme proxies know; aiohttp would send ws://)
    address = (
        f"http://{url.hostport}{path}" if proxy is not None and url.proto == "http" else target
    )
    largest = services.config.websocket_max_message  # aiohttp's max_msg_size (0: no limit)
    try:
        upstream = await services.engine.session.ws_connect(
            YURL(address, encoded=True),  # as given: yarl must not requote
            protocols=protocols,
            headers=headers,
            max_msg_size=largest,
            heartbeat=None,
            **via,
        )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        described = describe_proxy_error(exc, proxy) if proxy is not None else None
        reason, status = described or describe_error(exc)
        if isinstance(exc, aiohttp.WSServerHandshakeError):
            reason = f"the server refused the WebSocket ({exc.status})"
        return page_response(
            status,
            "Bad gateway",
            f"Could not open the WebSocket <code>{html.escape(target)}</code>: "
            f"{html.escape(reason)}.",
        )
    browser = web.WebSocketResponse(
        protocols=[upstream.protocol] if upstream.protocol else (), max_msg_size=largest
    )
    try:
        await browser.prepare(request)
    except (ConnectionError, OSError):
        await upstream.close()
        return browser
    up = asyncio.ensure_future(_pump(browser, upstream))
    down = asyncio.ensure_future(_pump(upstream, browser))
    try:
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
        with contextlib.suppress(Exception):
            await upstream.close()
        with contextlib.suppress(Exception):
            await browser.close()
    return browser


async def _pump(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    code = None
    async for message in source:
        if message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            if isinstance(message.data, aiohttp.WebSocketError):
                # why the source was closed (1009: a message too big), passed on as it is:
                # its close code is 1006 by now (aiohttp's, closing after a broken frame)
                code = message.data.code
            break
    with contextlib.suppress(Exception):
        await sink.close(code=code or source.close_code or aiohttp.WSCloseCode.OK)
