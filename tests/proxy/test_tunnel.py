"""A CONNECT tunnel on its own: :func:`tunnel` served by a bare aiohttp app, given only the
settings, mode and local network it reads (:class:`TunnelServices`), to a real TCP echo
server on 127.0.0.1 (no proxy server, store or engine)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from wwwproxy.http.policy import Mode
from wwwproxy.proxy.intercept import Interceptor
from wwwproxy.proxy.tunnel import tunnel
from wwwproxy.recording.upstream import UpstreamProxy


@dataclass(frozen=True)
class Settings:
    connect_ports: tuple[int, ...]
    https_intercept: tuple[str, ...] = ()
    https_bypass: tuple[str, ...] = ()
    connect_timeout: float = 5.0
    read_timeout: float = 5.0


@dataclass
class FixedServices:
    """The :class:`TunnelServices` a test sets: its settings, mode and local hosts."""

    config: Settings
    mode: Mode = Mode.ONLINE
    local: set[str] = field(default_factory=set)

    def direct_connect(self, host: str, port: int) -> bool:
        return host in self.local

    def upstream_proxy(self, proto: str, host: str, port: int) -> UpstreamProxy | None:
        return None


@dataclass
class Front:
    port: int
    services: FixedServices
    closing: asyncio.Event

    async def connect(
        self, target: str
    ) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
        """The head of the answer to a CONNECT to ``target``, and the connection."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        return head, reader, writer


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 that sends back what it reads; its port."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


@pytest.fixture
async def front(tmp_path: Path, echo: int) -> AsyncIterator[Front]:
    services = FixedServices(Settings(connect_ports=(echo,)))
    closing = asyncio.Event()
    interceptor = Interceptor(tmp_path / "certificates")

    @web.middleware
    async def every_request(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        response = await tunnel(request, services, interceptor, closing)
        response.force_close()
        return response

    runner = web.AppRunner(web.Application(middlewares=[every_request]))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Front(port, services, closing)
    finally:
        closing.set()
        await runner.cleanup()


async def test_an_allowed_port_is_tunnelled_both_ways(front, echo):
    head, reader, writer = await front.connect(f"127.0.0.1:{echo}")
    assert head.startswith(b"HTTP/1.1 200 Connection Established")
    writer.write(b"ping")
    assert await asyncio.wait_for(reader.readexactly(4), 10) == b"ping"
    writer.close()


async def test_a_port_the_settings_do_not_allow_is_refused(front, echo):
    front.services.config = Settings(connect_ports=(443,))
    head, _, writer = await front.connect(f"127.0.0.1:{echo}")
    assert head.startswith(b"HTTP/1.1 403")
    writer.close()


@pytest.mark.parametrize(("local", "status"), [(set(), b"503"), ({"127.0.0.1"}, b"200")])
async def test_offline_only_the_local_network_is_tunnelled(front, echo, local, status):
    front.services.mode = Mode.OFFLINE
    front.services.local = local
    head, _, writer = await front.connect(f"127.0.0.1:{echo}")
    assert head.split(b" ")[1] == status
    writer.close()


async def test_closing_ends_an_open_tunnel(front, echo):
    head, reader, writer = await front.connect(f"127.0.0.1:{echo}")
    assert head.startswith(b"HTTP/1.1 200")
    front.closing.set()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # the tunnel was closed
    writer.close()
