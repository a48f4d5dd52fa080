"""Memory stays bounded whatever the input's framing (issue 30): ``wwwproxy serve`` runs in a
process of its own and its peak resident set (``VmHWM`` in ``/proc``) is read after each flood.

Twelve 60 MiB chunked uploads at once once held 788 MiB (their bodies escaped the room for
bodies held at once), and one 400 MiB WebSocket message 1.25 GiB: now the uploads take turns
as Content-Length ones do, and a message past ``websocket_max_message`` closes the WebSocket
with 1009 (message too big), either way.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import resource
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import aiohttp
from aiohttp import web

from .test_fd_limits import Served, listening, serving

T = TypeVar("T")
PEAK_RSS = 300_000_000  # bytes the proxy process may reach at its peak (300 MB)
MiB = 1024 * 1024
UPLOADS, UPLOAD_SIZE = 12, 60 * MiB
MESSAGE_SIZE = 400 * MiB
BLOCK = b"x" * MiB
MESSAGE_TOO_BIG = 1009
WAIT = 20.0  # seconds for any step; the whole of a test takes a few
REFUSAL = 2.0  # seconds a frame's head may take to be refused
CLOSE_REPLY = b"\x88\x82\0\0\0\0"  # a browser's close frame (masked with zeros), code to follow
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's


def peak_rss(pid: int) -> int:
    """The process's resident set at its largest so far, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc")


@contextlib.contextmanager
def proxy_process(tmp_path: Path) -> Iterator[Served]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with serving(tmp_path, "uvloop", soft, hard) as served:
        yield served


@contextlib.asynccontextmanager
async def local_server(app: web.Application) -> AsyncIterator[int]:
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
    finally:
        await runner.cleanup()


# --- request bodies ---------------------------------------------------------------------------


async def _discard(request: web.Request) -> web.Response:
    """Read the body and keep none of it: the answer is its length."""
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
    return web.Response(text=str(size))


async def test_concurrent_chunked_uploads_stay_within_the_room(tmp_path):
    app = web.Application()
    app.router.add_post("/discard", _discard)
    async with local_server(app) as port:
        with proxy_process(tmp_path) as served:
            await listening(served)

            async def blocks() -> AsyncIterator[bytes]:
                for _ in range(UPLOAD_SIZE // MiB):
                    yield BLOCK

            async def upload(session: aiohttp.ClientSession, i: int) -> str:
                async with session.post(
                    f"http://127.0.0.1:{port}/discard?n={i}", data=blocks(), proxy=served.url
                ) as reply:
                    assert reply.request_info.headers.get("Transfer-Encoding") == "chunked"
                    return f"{reply.status} {await reply.text()}"

            # the uploads take turns: the last waits for the others (seconds, more on a
            # loaded machine); a hang is still an error
            timeout = aiohttp.ClientTimeout(total=6 * WAIT)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                answers = await asyncio.gather(*(upload(session, i) for i in range(UPLOADS)))
            peak = peak_rss(served.proc.pid)
    assert answers == [f"200 {UPLOAD_SIZE}"] * UPLOADS
    assert peak < PEAK_RSS, f"peak RSS {peak / MiB:.0f} MiB"


# --- WebSocket messages -----------------------------------------------------------------------


def accept_key(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + GUID).digest())  # noqa: S324 (RFC 6455)


def frame_head(size: int, *, masked: bool) -> bytes:
    """A final binary frame's head for ``size`` bytes (masked with zeros: sent as they are)."""
    return (
        b"\x82"
        + bytes([(0x80 if masked else 0) | 127])
        + struct.pack("!Q", size)
        + (b"\0\0\0\0" if masked else b"")
    )


async def send_until_closed(writer: asyncio.StreamWriter, closed: asyncio.Future[bytes]) -> None:
    """The message's body, a block at a time, until it is all sent or the peer closed (a
    refusal by the frame's head is awaited first: the body sent into a closed connection
    would reset it, and the close frame be lost)."""
    await asyncio.wait({closed}, timeout=REFUSAL)
    with contextlib.suppress(ConnectionError):
        for _ in range(MESSAGE_SIZE // MiB):
            if closed.done():
                return
            writer.write(BLOCK)
            await writer.drain()


async def close_frame(reader: asyncio.StreamReader) -> bytes:
    """The first frame the peer sends, expected a close: its code and reason."""
    head = await reader.readexactly(2)
    assert head[0] == 0x88, head  # a final close frame
    return await reader.readexactly(head[1] & 0x7F)


async def test_a_huge_websocket_message_from_the_browser_closes_it_with_1009(tmp_path):
    closes: list[int | None] = []

    async def websocket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        async for _ in ws:
            pass
        closes.append(ws.close_code)
        return ws

    app = web.Application()
    app.router.add_get("/ws", websocket)
    async with local_server(app) as port:
        with proxy_process(tmp_path) as served:
            await listening(served)
            reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
            try:
                writer.write(
                    f"GET http://127.0.0.1:{port}/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode()
                )
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
                assert head.startswith(b"HTTP/1.1 101 "), head
                writer.write(frame_head(MESSAGE_SIZE, masked=True))
                closed = asyncio.ensure_future(close_frame(reader))
                await send_until_closed(writer, closed)
                close = await within(closed)
                peak = peak_rss(served.proc.pid)
                assert peak < PEAK_RSS, f"peak RSS {peak / MiB:.0f} MiB"
                assert close is not None and close[:2] == struct.pack("!H", MESSAGE_TOO_BIG)
                writer.write(CLOSE_REPLY + close[:2])  # the close answered, as a browser does
                await writer.drain()
            finally:
                writer.transport.abort()
            await within(until(lambda: bool(closes)))
    assert closes == [MESSAGE_TOO_BIG]  # the server is told why too


async def test_a_huge_websocket_message_from_the_server_closes_it_with_1009(tmp_path):
    told: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def huge_message(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            key = next(
                line.split(b":", 1)[1].strip()
                for line in request.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key:")
            )
            writer.write(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
                + accept_key(key)
                + b"\r\n\r\n"
                + frame_head(MESSAGE_SIZE, masked=False)
            )
            closed = asyncio.ensure_future(reader.readexactly(2))
            await send_until_closed(writer, closed)
            head = await asyncio.wait_for(closed, WAIT)
            body = await reader.readexactly(4 + (head[1] & 0x7F))  # masked, as a client's
            mask, masked = body[:4], body[4:]
            told.set_result(bytes(b ^ mask[i % 4] for i, b in enumerate(masked)))
        except Exception as exc:  # noqa: BLE001 (the test reports it)
            if not told.done():
                told.set_exception(exc)
        finally:
            writer.transport.abort()

    origin = await asyncio.start_server(huge_message, "127.0.0.1", 0)
    port = origin.sockets[0].getsockname()[1]
    try:
        with proxy_process(tmp_path) as served:
            await listening(served)
            timeout = aiohttp.ClientTimeout(total=WAIT)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.ws_connect(
                    f"ws://127.0.0.1:{port}/ws", proxy=served.url, max_msg_size=0
                ) as ws:
                    message = await ws.receive(timeout=WAIT)
            peak = peak_rss(served.proc.pid)
            to_origin = await within(told)
    finally:
        origin.close()
    assert peak < PEAK_RSS, f"peak RSS {peak / MiB:.0f} MiB"
    assert (message.type, message.data) == (aiohttp.WSMsgType.CLOSE, MESSAGE_TOO_BIG)
    assert to_origin is not None and to_origin[:2] == struct.pack("!H", MESSAGE_TOO_BIG)


async def within(future: Awaitable[T], seconds: float = WAIT) -> T | None:
    """What ``future`` gives, if it does in time (else None)."""
    try:
        return await asyncio.wait_for(future, seconds)
    except TimeoutError:
        return None


async def until(condition: Callable[[], bool]) -> bool:
    while not condition():
        await asyncio.sleep(0.05)
    return True
