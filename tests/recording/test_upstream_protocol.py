"""How upstream responses are read (:mod:`wwwproxy.recording.upstream_protocol`), over real
sockets: a hand-written keep-alive origin on 127.0.0.1 and the upstream session."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import pytest

from wwwproxy.recording.upstream import UpstreamTimeouts, new_session
from wwwproxy.recording.upstream_protocol import reporting_interim

EXTRA = b"60d92ba3-2a41-4413-955f-e24a53aefe7c"
HEAD_10 = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
PROCESSING = b"HTTP/1.1 102 Processing\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@dataclass
class KeepAliveOrigin:
    """Answers each request on each connection with ``parts``, written a moment apart."""

    parts: list[bytes]
    port: int = 0
    connections: int = 0
    requests: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                self.requests += 1
                for i, part in enumerate(self.parts):
                    if i:
                        await asyncio.sleep(0.02)
                    writer.write(part)
                    await writer.drain()
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@pytest.fixture
async def keep_alive_origin() -> AsyncIterator[Callable[[list[bytes]], Awaitable[KeepAliveOrigin]]]:
    made: list[asyncio.base_events.Server] = []

    async def make(parts: list[bytes]) -> KeepAliveOrigin:
        origin = KeepAliveOrigin(parts)
        server = await asyncio.start_server(origin.serve, "127.0.0.1", 0)
        made.append(server)
        origin.port = server.sockets[0].getsockname()[1]
        return origin

    yield make
    for server in made:
        server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2)


async def get_twice(origin: KeepAliveOrigin):  # noqa: ANN201
    """Two requests in a row on one session: [(status, body) or the error's type], and the
    interim responses reported."""
    session = new_session(UpstreamTimeouts(connect=2, read=2))
    seen: list[tuple[int, str, tuple[int, int], tuple[tuple[bytes, bytes], ...]]] = []
    results: list[object] = []
    try:
        with reporting_interim(lambda *interim: seen.append(interim)):
            for _ in range(2):
                try:
                    async with session.get(origin.url) as response:
                        results.append((response.status, await response.read()))
                except aiohttp.ClientError as exc:
                    results.append(type(exc))
    finally:
        await session.close()
    return results, seen


@pytest.mark.parametrize(
    ("name", "parts", "body", "connections"),
    [
        # a response and the bytes beyond its Content-Length, in one read: kept, and the
        # connection is not used again (its next bytes cannot be trusted)
        ("extra bytes", [HEAD_10 + EXTRA], b"60d92ba3-2", 2),
        ("extra lines", [HEAD_10 + b"0123456789<p>\r\n\r\nHTTP/1.1 200\r\n\r\n"], b"0123456789", 2),
        ("body split", [HEAD_10 + EXTRA[:5], EXTRA[5:]], b"60d92ba3-2", 2),
        (
            "chunked",
            [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nxy"],
            b"abc",
            2,
        ),
        ("after interim", [HINTS + HEAD_10 + EXTRA], b"60d92ba3-2", 2),
        (
            "interim split",
            [HINTS + b"HTTP/1.1 2", b"00 OK\r\nContent-Length: 10\r\n\r\n" + EXTRA],
            b"60d92ba3-2",
            2,
        ),
        # a well-framed answer: the connection is kept
        ("exact", [HEAD_10 + EXTRA[:10]], b"60d92ba3-2", 1),
    ],
)
async def test_a_response_is_read_as_its_framing_says(
    keep_alive_origin, name, parts, body, connections
):
    origin = await keep_alive_origin(parts)
    results, _ = await get_twice(origin)
    assert results == [(200, body), (200, body)], name
    assert origin.requests == 2  # each request sent once: nothing retried
    assert origin.connections == connections


async def test_a_malformed_response_is_still_refused(keep_alive_origin):
    origin = await keep_alive_origin(
        [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nBad Header\r\n\r\n0123456789"]
    )
    results, _ = await get_twice(origin)
    assert results == [aiohttp.ClientResponseError, aiohttp.ClientResponseError]


@pytest.mark.parametrize(
    "parts",
    [
        [HINTS, PROCESSING, OK],  # each on its own
        [HINTS + PROCESSING + OK],  # all in one read
        [HINTS + PROCESSING[:9], PROCESSING[9:] + OK],  # a head cut in two
    ],
)
async def test_interim_responses_are_reported_in_order(keep_alive_origin, parts):
    origin = await keep_alive_origin(parts)
    results, seen = await get_twice(origin)
    assert results == [(200, b"ok"), (200, b"ok")]
    assert [(status, reason) for status, reason, _, _ in seen] == [
        (103, "Early Hints"),
        (102, "Processing"),
    ] * 2
    assert seen[0][2] == (1, 1)
    assert seen[0][3] == ((b"Link", b"</s.css>; rel=preload"),)
    assert origin.connections == 1


async def test_continue_is_not_reported(keep_alive_origin):
    origin = await keep_alive_origin([b"HTTP/1.1 100 Continue\r\n\r\n" + OK])
    results, seen = await get_twice(origin)
    assert results == [(200, b"ok"), (200, b"ok")]
    assert seen == []


async def test_reported_only_within_the_block(keep_alive_origin):
    """Outside :func:`reporting_interim` (the queue's fetcher, the crawler) interim responses
    are dropped, as aiohttp drops them."""
    origin = await keep_alive_origin([HINTS, OK])
    seen: list[int] = []
    session = new_session(UpstreamTimeouts(connect=2, read=2))
    try:
        with reporting_interim(lambda status, *_: seen.append(status)):
            async with session.get(origin.url) as response:
                assert await response.read() == b"ok"
        async with session.get(origin.url) as response:
            assert await response.read() == b"ok"
    finally:
        await session.close()
    assert seen == [103]
    assert origin.requests == 2
