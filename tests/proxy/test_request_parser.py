"""aiohttp's C request parser, fed by :class:`UpgradeIgnoringParser`, reads pipelined requests
behind an Upgrade it does not take as aiohttp's pure-Python parser does: the same messages,
whatever the writes the bytes came in."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp.http_parser import HttpRequestParserC, HttpRequestParserPy

from wwwproxy.proxy.request_parser import UpgradeIgnoringParser, head_ends

H2C = b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAA\r\n"
NEXT = b"GET http://a/next HTTP/1.1\r\nHost: a\r\n\r\n"

HEAD_ENDS = [
    # (the bytes before, the bytes, the positions after each CRLF CRLF ending in them)
    (b"", b"", []),
    (b"", b"GET / HTTP/1.1\r\n\r\n", [18]),
    (b"", b"a\r\n\r\nb\r\n\r\n", [5, 10]),
    (b"", b"\r\n\r\n\r\n", [4, 6]),
    (b"x\r\n\r", b"\nGET", [1]),
    (b"\r\n", b"\r\nGET", [2]),
    (b"\r", b"\n\r\n", [3]),
    (b"\r\n\r", b"\n\r\n", [1, 3]),
    (b"long ago\r\n\r\n", b"x", []),
]


@pytest.mark.parametrize(("before", "data", "ends"), HEAD_ENDS)
def test_head_ends(before: bytes, data: bytes, ends: list[int]) -> None:
    assert list(head_ends(before, data)) == ends


STREAMS = {
    "h2c, then a request": b"GET http://a/x HTTP/1.1\r\nHost: a\r\n" + H2C + b"\r\n" + NEXT,
    "h2c with a body": b"POST http://a/x HTTP/1.1\r\nHost: a\r\n"
    + H2C
    + b"Content-Length: 9\r\n\r\nab\r\n\r\ncde"
    + NEXT,
    "h2c with a chunked body": b"POST http://a/x HTTP/1.1\r\nHost: a\r\n"
    + H2C
    + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    + NEXT,
    "two in a row": (b"GET http://a/x HTTP/1.1\r\nHost: a\r\n" + H2C + b"\r\n") * 2 + NEXT,
    "plain requests": NEXT * 3,
    "a body with a blank line": b"POST http://a/x HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\n"
    b"\r\n\r\n\r\n" + NEXT,
    "a WebSocket": b"GET http://a/ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\n\r\n\x81\x85frame",
}


def read(parser: object, writes: list[bytes]) -> tuple[list[tuple[str, str, bytes]], bytes]:
    """(method, path, body) of each message, and the bytes left to an upgraded protocol."""
    messages, left, upgraded = [], b"", False
    for data in writes:
        if upgraded:
            left += data
            continue
        got, upgraded, left = parser.feed_data(data)  # type: ignore[attr-defined]
        messages += got
    return [(m.method, m.path, p.read_nowait()) for m, p in messages], left


@pytest.mark.parametrize("name", list(STREAMS))
async def test_the_c_parser_reads_as_the_python_parser_whatever_the_writes(name: str) -> None:
    stream = STREAMS[name]
    loop = asyncio.get_running_loop()

    def parser(kind: type) -> object:
        return kind(mock.Mock(), loop, 2**16, max_line_size=8190, max_field_size=8190)

    expected = read(parser(HttpRequestParserPy), [stream])
    assert len(expected[0]) >= 2 or expected[1], expected
    splits = [[stream[:cut], stream[cut:]] for cut in range(1, len(stream))]
    for writes in [[stream], *splits, [stream[i : i + 1] for i in range(len(stream))]]:
        got = read(UpgradeIgnoringParser(parser(HttpRequestParserC)), writes)
        assert got == expected, writes[:3]


def test_the_c_parser_alone_loses_the_request_behind_h2c() -> None:
    """What the wrapper is for (if aiohttp fixes it, this fails, and the wrapper can go)."""
    loop = asyncio.new_event_loop()
    try:
        bare = HttpRequestParserC(mock.Mock(), loop, 2**16, max_line_size=8190, max_field_size=8190)
        messages, _, _ = bare.feed_data(STREAMS["h2c, then a request"])
    finally:
        loop.close()
    assert [m.path for m, _ in messages] == ["http://a/x"]
