"""WebSockets relayed both ways, on plain http and inside an intercepted HTTPS tunnel."""

from __future__ import annotations

import aiohttp
import pytest

from .conftest import TIMEOUT
from .test_intercept import _trust_after_first


async def test_websocket_echo_through_plain_http(proxy, origin):
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.ws_connect(
            origin.url("/ws").replace("http://", "ws://"), proxy=proxy.url, protocols=("chat",)
        ) as ws:
            assert ws.protocol == "chat"
            await ws.send_str("hello")
            assert (await ws.receive(timeout=5)).data == "echo hello"
            await ws.send_bytes(b"abc")
            assert (await ws.receive(timeout=5)).data == b"cba"
    # a conversation is not a resource: nothing recorded
    assert not proxy.records(origin.url("/ws"))


async def test_websocket_echo_inside_an_intercepted_tunnel(make_proxy, tls_origin):
    proxy = await make_proxy(
        https_intercept=("*",), upstream_ca=tls_origin.ca_pem, connect_ports=(tls_origin.port,)
    )
    context = _trust_after_first(proxy)
    url = tls_origin.url("/ws").replace("https://", "wss://")
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.ws_connect(url, proxy=proxy.url, ssl=context) as ws:
            await ws.send_str("over tls")
            assert (await ws.receive(timeout=5)).data == "echo over tls"


async def test_websocket_offline_is_refused_clearly(make_proxy, origin):
    proxy = await make_proxy(mode="offline")
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(origin.url("/ws").replace("http://", "ws://"), proxy=proxy.url)
    assert refused.value.status == 503
    assert origin.hits["/ws"] == 0


async def test_websocket_to_a_dead_origin_is_a_502(proxy, origin):
    url = origin.url("/ws").replace("http://", "ws://")
    await origin.stop()
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(url, proxy=proxy.url)
    assert refused.value.status == 502


async def test_a_message_past_websocket_max_message_closes_it_with_1009(make_proxy, origin):
    """Messages up to ``websocket_max_message`` are relayed; a larger one closes the
    WebSocket with 1009 (message too big)."""
    proxy = await make_proxy(websocket_max_message=1000)
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.ws_connect(
            origin.url("/ws").replace("http://", "ws://"), proxy=proxy.url
        ) as ws:
            await ws.send_bytes(b"a" * 900 + b"b")
            assert (await ws.receive(timeout=5)).data == b"b" + b"a" * 900
            await ws.send_bytes(b"c" * 1001)
            closed = await ws.receive(timeout=5)
    assert (closed.type, closed.data) == (aiohttp.WSMsgType.CLOSE, 1009)
