"""CONNECT tunnels to a local TLS origin (a trustme certificate), through the real proxy."""

from __future__ import annotations

import asyncio
import contextlib
import re

import aiohttp
import pytest

from wwwproxy.proxy.tunnel import parse_connect_target


async def https_get(proxy, tls_origin, path="/secret", method="GET", data=None):
    async with proxy.session() as s:
        async with s.request(
            method,
            f"https://localhost:{tls_origin.port}{path}",
            proxy=proxy.url,
            ssl=tls_origin.client_context,
            data=data,
        ) as resp:
            return resp.status, await resp.read()


async def test_connect_tunnel_reaches_tls_origin(make_proxy, tls_origin):
    proxy = await make_proxy(connect_ports=(443, tls_origin.port))
    assert await https_get(proxy, tls_origin) == (200, b"secret GET /secret ")
    assert await https_get(proxy, tls_origin, "/form", "POST", b"a=1") == (
        200,
        b"secret POST /form a=1",
    )
    # nothing of the encrypted exchange is cached
    assert list(proxy.store.warc_files()) == []
    assert not (proxy.cache / "https").exists()


async def test_connect_tunnel_keeps_alive_inside(make_proxy, tls_origin):
    proxy = await make_proxy(connect_ports=(tls_origin.port,))
    async with proxy.session() as s:
        for i in range(3):
            async with s.get(
                f"https://localhost:{tls_origin.port}/n{i}",
                proxy=proxy.url,
                ssl=tls_origin.client_context,
            ) as resp:
                assert await resp.read() == f"secret GET /n{i} ".encode()


async def test_connect_refused_offline(make_proxy, tls_origin):
    proxy = await make_proxy("offline", connect_ports=(tls_origin.port,))
    with pytest.raises(aiohttp.ClientHttpProxyError) as info:
        await https_get(proxy, tls_origin)
    assert info.value.status == 503
    raw = await proxy.raw(
        f"CONNECT localhost:{tls_origin.port} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    )
    assert raw.startswith(b"HTTP/1.1 503")
    assert b"offline" in raw
    assert f"localhost:{tls_origin.port}".encode() in raw


async def test_connect_refused_on_disallowed_port(proxy, tls_origin):
    # the default allows 443 only
    raw = await proxy.raw(
        f"CONNECT 127.0.0.1:{tls_origin.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    assert raw.startswith(b"HTTP/1.1 403")
    assert str(tls_origin.port).encode() in raw
    with pytest.raises(aiohttp.ClientHttpProxyError) as info:
        await https_get(proxy, tls_origin)
    assert info.value.status == 403


async def test_connect_to_closed_port_is_502(make_proxy, tls_origin, origin):
    port = origin.port
    await origin.stop()
    proxy = await make_proxy(connect_ports=(port,))
    raw = await proxy.raw(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.1 502")
    assert f"127.0.0.1:{port}".encode() in raw


@pytest.mark.parametrize("target", [b"", b"no-port-here", b"[bad:443", b"host:99999"])
async def test_bad_connect_target_is_400(make_proxy, target):
    proxy = await make_proxy(connect_ports=(443,))
    raw = await proxy.raw(b"CONNECT " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert re.match(rb"HTTP/[0-9.]+ 400 ", raw), raw[:200]


async def test_tunnel_closes_when_client_leaves(make_proxy, tls_origin):
    proxy = await make_proxy(connect_ports=(tls_origin.port,))
    reader, writer = await proxy.connect_raw()
    writer.write(f"CONNECT 127.0.0.1:{tls_origin.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    writer.close()
    # the proxy must not hold the handler: stopping is quick
    await asyncio.wait_for(proxy.running.stop(), 5)


async def test_tunnel_carries_large_bodies_both_ways(make_proxy, tls_origin):
    proxy = await make_proxy(connect_ports=(tls_origin.port,))
    body = b"x" * (3 * 1024 * 1024)
    status, reply = await https_get(proxy, tls_origin, "/big", "POST", body)
    assert status == 200
    assert reply == b"secret POST /big " + body


async def test_open_idle_tunnel_does_not_hold_up_shutdown(make_proxy, tls_origin):
    proxy = await make_proxy(connect_ports=(tls_origin.port,))
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(f"CONNECT 127.0.0.1:{tls_origin.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 Connection Established\r\n")
        assert b"Transfer-Encoding" not in head and b"Content-Length" not in head
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(proxy.running.stop(), 5)
        assert loop.time() - started < 2
        assert await asyncio.wait_for(reader.read(), 2) == b""  # the tunnel was closed
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("example.com:443", ("example.com", 443)),
        ("EXAMPLE.com:8443", ("example.com", 8443)),
        ("127.0.0.1:1", ("127.0.0.1", 1)),
        ("[::1]:443", ("::1", 443)),
        ("bücher.example:443", ("xn--bcher-kva.example", 443)),
    ],
)
def test_parse_connect_target(target, expected):
    assert parse_connect_target(target) == expected


@pytest.mark.parametrize(
    "target",
    [
        "",
        "example.com",  # the port is required in authority-form
        "example.com:",
        ":443",
        "example.com:0",
        "example.com:65536",
        "example.com:443:1",
        "user@example.com:443",
        "example.com:443/path",
        "[::1:443",
        "exa mple.com:443",
        "http://example.com:443",
        "HTTP/1.1",
    ],
)
def test_parse_connect_target_refuses(target):
    with pytest.raises(ValueError):
        parse_connect_target(target)


async def test_tunnel_ends_when_client_leaves_and_server_is_silent(make_proxy):
    # aiohttp closes the browser's side when it sends EOF, so nothing the server might still
    # send can reach it: the tunnel must end then, not hold both sockets for read_timeout
    release = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # to EOF, then keep the connection open and say nothing
        await release.wait()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = await make_proxy(connect_ports=(port,), read_timeout=3.0)
    try:
        reader, writer = await proxy.connect_raw()
        writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        writer.write(b"hello")
        await writer.drain()
        writer.close()

        def logged() -> bool:
            return any('"CONNECT ' in line for line in proxy.access_lines())

        assert await proxy.wait_until(logged, timeout=1.5)
    finally:
        release.set()
        server.close()


async def test_bytes_sent_right_after_connect_reach_the_server(make_proxy):
    # a client may send its TLS ClientHello without waiting for the 200 (in the same packet
    # as the CONNECT): those bytes belong to the tunnel, not to a next HTTP request
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = await make_proxy(connect_ports=(port,))
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(
            f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode() + b"\x16\x03\x01eager"
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        assert await asyncio.wait_for(reader.readexactly(8), 3) == b"\x16\x03\x01eager"
        writer.write(b"later")
        assert await asyncio.wait_for(reader.readexactly(5), 3) == b"later"
    finally:
        writer.close()
        server.close()
