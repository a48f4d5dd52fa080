"""Origin answers aiohttp's client would not pass on as they are, through the real proxy:
interim (1xx) responses before the answer, and more body bytes than the Content-Length says."""

from __future__ import annotations

import asyncio
import contextlib

EARLY_HINTS = (
    b"HTTP/1.1 103 Early Hints\r\n"
    b"Link: </styles.css>; rel=preload; as=style\r\n"
    b"X-My-Header: test\r\n"
    b"Connection: X-Hop\r\n"
    b"X-Hop: dropped\r\n"
    b"\r\n"
)
PROCESSING = b"HTTP/1.1 102 Processing\r\n\r\n"
FINAL = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/plain\r\n"
    b"Cache-Control: max-age=100000\r\n"
    b"Content-Length: 5\r\n"
    b"\r\n"
    b"hello"
)
#: the origin says 10 bytes and writes 36 (the cache-tests suite's origin does this)
OVERLONG = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/plain\r\n"
    b"Content-Length: 10\r\n"
    b"\r\n"
    b"60d92ba3-2a41-4413-955f-e24a53aefe7c"
)


async def ask(proxy, url: str, version: str = "1.1"):  # noqa: ANN001, ANN201
    """A raw browser on its own connection: (connection's reader, its writer)."""
    reader, writer = await proxy.connect_raw()
    writer.write(f"GET {url} HTTP/{version}\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    return reader, writer


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await asyncio.wait_for(writer.wait_closed(), 1)


# --- interim responses ------------------------------------------------------------------------


async def test_interim_responses_are_forwarded_in_order_and_never_kept(proxy, raw_origin):
    origin = await raw_origin([EARLY_HINTS, PROCESSING, FINAL])
    url = origin.url("/hinted")
    reader, writer = await ask(proxy, url)
    try:
        hints = await proxy.read_response(reader)
        processing = await proxy.read_response(reader)
        answer = await proxy.read_response(reader)
    finally:
        await close(writer)
    assert (hints.status, hints.reason) == (103, "Early Hints")
    assert hints.header("Link") == "</styles.css>; rel=preload; as=style"
    assert hints.header("X-My-Header") == "test"
    assert hints.header("Via") == "1.1 wwwproxy"
    assert hints.header("X-Hop") is None and hints.header("Connection") is None  # hop-by-hop
    assert (processing.status, processing.reason) == (102, "Processing")
    assert (answer.status, answer.body) == (200, b"hello")
    assert answer.header("X-Cache") == "MISS"
    assert answer.header("X-My-Header") is None
    assert len(origin.requests) == 1

    request, response = await proxy.recorded(url)
    assert response.status == "200"
    assert response.payload == b"hello"
    assert all(name.lower() != "x-my-header" for name, _ in response.http_headers)
    assert [r.rec_type for r in proxy.records(url)] == ["request", "response"]

    again, writer = await ask(proxy, url)
    try:
        hit = await proxy.read_response(again)
    finally:
        await close(writer)
    assert (hit.status, hit.body) == (200, b"hello")
    assert hit.header("X-Cache") == "HIT"
    assert hit.header("X-My-Header") is None
    assert len(origin.requests) == 1


async def test_no_interim_response_to_an_http10_browser(proxy, raw_origin):
    origin = await raw_origin([EARLY_HINTS, PROCESSING, FINAL])
    reader, writer = await ask(proxy, origin.url("/old-browser"), version="1.0")
    try:
        answer = await proxy.read_response(reader)
    finally:
        await close(writer)
    assert (answer.status, answer.body) == (200, b"hello")
    assert len(origin.requests) == 1


async def test_interim_responses_in_one_read_with_the_answer(proxy, raw_origin):
    origin = await raw_origin(EARLY_HINTS + PROCESSING + FINAL)
    reader, writer = await ask(proxy, origin.url("/together"))
    try:
        statuses = [(await proxy.read_response(reader)).status for _ in range(3)]
    finally:
        await close(writer)
    assert statuses == [103, 102, 200]


# --- more body than the Content-Length ----------------------------------------------------------


async def test_bytes_beyond_the_content_length_are_dropped(proxy, raw_origin):
    # the origin keeps its connection open: were it used again, the next request would read
    # the extra bytes as its answer (or wait for an answer that never comes)
    origin = await raw_origin(OVERLONG, close=False)
    url = origin.url("/overlong")
    first = await proxy.get(url)
    assert (first.status, first.body) == (200, b"60d92ba3-2")
    assert first.header("Content-Length") == "10"
    request, response = await proxy.recorded(url)
    assert response.status == "200"
    assert response.payload == b"60d92ba3-2"
    assert len(origin.requests) == 1  # asked once: no retry

    second = await proxy.get(url)
    assert (second.status, second.body) == (200, b"60d92ba3-2")
    assert second.header("X-Cache") == "MISS"
    assert len(origin.requests) == 2
