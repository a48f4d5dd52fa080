"""CONNECT tunnels (HTTPS through the proxy): bytes both ways, never cached.

A tunnel reads what it needs of the proxy through :class:`TunnelServices` (the settings, the
mode, the local network and the upstream proxy: :class:`~wwwproxy.recording.services.Services`
has them), hands the hosts it intercepts to the :class:`~.intercept.Interceptor`, and ends
when the server's ``closing`` event is set."""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
from typing import Protocol

from aiohttp import web

from ..http.policy import Mode
from ..recording.upstream import UpstreamProxy
from ..url import InvalidURL, canonicalize
from .certs import should_intercept
from .intercept import Interceptor, Target
from .pages import page_response

__all__ = [
    "ConnectSettings",
    "TunnelServices",
    "connect_request",
    "parse_connect_reply",
    "parse_connect_target",
    "tunnel",
]

CHUNK = 64 * 1024
_AUTHORITY = re.compile(r"(\[[^\]/@]*\]|[^\[\]:/@?#]+):([0-9]{1,5})")
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: ([^\r\n]*))?")


class ConnectSettings(Protocol):
    """The settings a CONNECT reads (of :class:`~wwwproxy.config.Config`)."""

    @property
    def connect_ports(self) -> tuple[int, ...]: ...
    @property
    def https_intercept(self) -> tuple[str, ...]: ...
    @property
    def https_bypass(self) -> tuple[str, ...]: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def read_timeout(self) -> float: ...


class TunnelServices(Protocol):
    """What a CONNECT reads of the shared services, each time anew (a config reload or a
    mode switch changes it)."""

    @property
    def config(self) -> ConnectSettings: ...
    @property
    def mode(self) -> Mode: ...

    def direct_connect(self, host: str, port: int) -> bool:
        """Is ``host:port`` on the local network (tunnelled even offline)?"""
        ...

    def upstream_proxy(self, proto: str, host: str, port: int) -> UpstreamProxy | None:
        """The upstream proxy a connection to ``host:port`` goes through, if any."""
        ...


def parse_connect_target(target: str) -> tuple[str, int]:
    """``host:port`` of a CONNECT (RFC 9110 §9.3.6: authority-form, the port is required) as
    the host to connect to (no brackets) and the port; ValueError says what is wrong."""
    match = _AUTHORITY.fullmatch(target)
    if match is None:
        raise ValueError(f"the target {target!r} is not host:port")
    port = int(match.group(2))
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is out of range")
    try:
        url = canonicalize(f"https://{match.group(1)}/")
    except InvalidURL as exc:
        raise ValueError(exc.reason) from None
    host = url.host
    return (host[1:-1] if host.startswith("[") else host), port


def connect_request(host: str, port: int, proxy: UpstreamProxy) -> bytes:
    """The CONNECT an upstream proxy is sent for a tunnel to ``host:port`` (with its
    credentials, which go to that proxy only)."""
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def parse_connect_reply(head: bytes) -> tuple[int, str]:
    """Status and reason of an upstream proxy's answer to CONNECT; ValueError if it is not
    an HTTP/1.x answer."""
    match = _STATUS_LINE.match(head)
    if match is None:
        shown = head.split(b"\r\n", 1)[0][:80].decode("latin-1")
        raise ValueError(f"it did not answer in HTTP ({shown!r})")
    return int(match.group(1)), (match.group(2) or b"").decode("latin-1").strip()


async def _open_via(
    proxy: UpstreamProxy, host: str, port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A tunnel to ``host:port`` through the upstream proxy; ValueError says why it refused.
    Bytes it sent after its answer stay in the reader: they are the origin's."""
    reader, writer = await asyncio.open_connection(proxy.host.strip("[]"), proxy.port)
    try:
        writer.write(connect_request(host, port, proxy))
        head = await reader.readuntil(b"\r\n\r\n")
        status, reason = parse_connect_reply(head)
        if not 200 <= status < 300:
            raise ValueError(f"it refused the tunnel ({status} {reason})".rstrip())
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        writer.close()
        raise ValueError("it closed the connection without answering") from exc
    except BaseException:
        writer.close()
        raise
    return reader, writer


class _ClientFeed:
    """The browser's bytes after the CONNECT, handed over by aiohttp's payload-parser hook
    (the one its websockets use) into a StreamReader that pauses the socket when full."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def feed_data(self, data: bytes | bytearray | memoryview) -> tuple[bool, bytes]:
        self.reader.feed_data(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self.reader.feed_eof()


async def _pump_to_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
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
            if protocol is not None and protocol.writing_paused:
                await protocol._drain_helper()  # noqa: SLF001 (aiohttp flow control)
    except (ConnectionError, OSError):
        pass


async def tunnel(
    request: web.Request,
    services: TunnelServices,
    interceptor: Interceptor,
    closing: asyncio.Event,
) -> web.StreamResponse:
    """Open a TCP tunnel to ``host:port`` when online and the port is allowed (or hand the
    connection to ``interceptor`` when its host is intercepted); it ends when ``closing``
    is set."""
    target = request.raw_path
    try:
        host, port = parse_connect_target(target)
    except ValueError as exc:
        return page_response(
            400,
            "Invalid CONNECT target",
            f"Cannot tunnel to <code>{html.escape(target)}</code>: {html.escape(str(exc))}.",
        )
    config = services.config
    if port not in config.connect_ports:
        return page_response(
            403,
            "Port not allowed",
            f"CONNECT to port {port} is not allowed (allowed: "
            f"{', '.join(map(str, config.connect_ports))}).",
        )
    if should_intercept(host, config.https_intercept, config.https_bypass):
        # recorded and served offline like plain HTTP (offline too: answered from the cache)
        return await interceptor.intercept(request, Target(host, port), closing)
    if services.mode is Mode.OFFLINE and not services.direct_connect(host, port):
        return page_response(
            503,
            "Offline",
            f"wwwproxy is offline: the secure connection to <code>{html.escape(target)}</code> "
            "cannot be made, and encrypted traffic is not cached.",
        )
    proxy = services.upstream_proxy("https", host, port)
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port) if proxy is None else _open_via(proxy, host, port),
            config.connect_timeout,
        )
    except (TimeoutError, OSError, ValueError) as exc:
        if isinstance(exc, TimeoutError):
            reason = "timed out"
        else:
            reason = str(exc) if isinstance(exc, ValueError) else (exc.strerror or str(exc))
        via = "" if proxy is None else f" through the upstream proxy {proxy.address}"
        return page_response(
            502,
            "Bad gateway",
            f"Could not connect to <code>{html.escape(target)}</code>{html.escape(via)}: "
            f"{html.escape(reason)}.",
        )
    from_client = asyncio.StreamReader(limit=CHUNK)
    if request.transport is not None:
        from_client.set_transport(request.transport)
    response = web.StreamResponse(status=200, reason="Connection Established")
    response.force_close()
    try:
        await response.prepare(request)
        request.protocol.set_parser(_ClientFeed(from_client))  # type: ignore[arg-type]
    except (ConnectionError, OSError):
        writer.close()
        return response
    up = asyncio.ensure_future(_pump_to_upstream(from_client, writer))
    down = asyncio.ensure_future(_pump_to_client(reader, request))
    ended = asyncio.ensure_future(closing.wait())
    try:
        done, _ = await asyncio.wait({up, down, ended}, return_when=asyncio.FIRST_COMPLETED)
        client_gone = request.transport is None or request.transport.is_closing()
        if up in done and down not in done and not client_gone:
            # the browser is done sending; let the server finish its answer, within bounds.
            # (aiohttp closes the browser's side on its EOF, so usually it is gone already:
            # then nothing the server sends could reach it, and the tunnel ends now.)
            await asyncio.wait({down, ended}, timeout=services.config.read_timeout)
    finally:
        for task in (up, down, ended):
            task.cancel()
        await asyncio.gather(up, down, ended, return_exceptions=True)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        if request.transport is not None:
            request.transport.close()
    return response
