"""Ranges on the wire: a real origin on 127.0.0.1 that answers ranges, the proxy in front of
it, online and offline, with a copy in memory (the fast front) and one on disk (over the
memory cache's 1 MiB: aiohttp's path, read from the WARC file).  What a browser's media
element and PDF viewer ask for: ``bytes=0-`` first (on a miss: the whole recorded), then seeks.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from wwwproxy.archive.memory import MAX_OBJECT

from .conftest import Proxy

#: 50 ms waits for an access-log line
LOG_WAITS = 100

SMALL = random.Random(1).randbytes(5000)  # held in memory: the fast front answers
LARGE = random.Random(2).randbytes(MAX_OBJECT + 300_000)  # on disk: aiohttp's path
BODIES = {"/small": SMALL, "/large": LARGE}
_RANGE = re.compile(r"bytes=([0-9]+)-([0-9]*)")


@dataclass
class RangeOrigin:
    """An origin that answers one ``first-last`` range of a GET with a 206, as servers do,
    and says what Range each GET had."""

    port: int = 0
    seen: list[tuple[str, str | None]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def ranges(self, path: str) -> list[str | None]:
        return [r for p, r in self.seen if p == path]

    async def handle(self, request: web.Request) -> web.Response:
        body = BODIES[request.path]
        asked = request.headers.get("Range") if request.method == "GET" else None
        if request.method == "GET":
            self.seen.append((request.path, asked))
        headers = {
            "Content-Type": "video/webm",
            "ETag": f'"{request.path[1:]}-1"',
            "Accept-Ranges": "bytes",
            "Cache-Control": "max-age=3600",
        }
        match = _RANGE.fullmatch(asked or "")
        if match is None:
            return web.Response(body=body, headers=headers)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else len(body) - 1
        headers["Content-Range"] = f"bytes {first}-{last}/{len(body)}"
        return web.Response(status=206, body=body[first : last + 1], headers=headers)


@pytest.fixture
async def range_origin() -> AsyncIterator[RangeOrigin]:
    origin = RangeOrigin()
    app = web.Application()
    app.router.add_get("/{tail:.*}", origin.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    origin.port = runner.addresses[0][1]
    try:
        yield origin
    finally:
        await runner.cleanup()


async def _recorded_by_a_media_request(make_proxy, origin: RangeOrigin, path: str) -> Proxy:  # noqa: ANN001
    """A proxy whose first request for ``path`` was a media element's ``bytes=0-``."""
    proxy = await make_proxy()
    url = origin.url(path)
    first = await proxy.get(url, headers={"Range": "bytes=0-"})
    # asked upstream without the Range: the whole, relayed as the 200 and recorded
    assert origin.ranges(path) == [None]
    assert (first.status, first.body) == (200, BODIES[path])
    await proxy.recorded(url)
    return proxy


def _logged_now(proxy: Proxy, url: str, status: int, length: int) -> bool:
    lines = [line for line in proxy.access_lines() if f" {url}" in line]
    if not lines:
        return False
    logged = re.search(r'" (\d+) (\d+) ', lines[-1])
    assert logged is not None, lines[-1]
    return int(logged.group(1)) == status and 0 <= int(logged.group(2)) - length < 1024


async def _logged(proxy: Proxy, url: str, status: int, length: int) -> bool:
    """Does the access log's last line for ``url`` say ``status`` and ``length`` bytes?  (The
    fast front counts the body; aiohttp's path counts the head too, as aiohttp does.)  The
    line is written once the proxy has finished its side of the answer, which may be a moment
    after the client has read the last byte: waited for, a few seconds at most."""
    for _ in range(LOG_WAITS):
        if _logged_now(proxy, url, status, length):
            return True
        await asyncio.sleep(0.05)
    return _logged_now(proxy, url, status, length)


def part(boundary: str, content_range: str, before: str) -> bytes:
    """A multipart/byteranges part's head (RFC 9110 §14.6)."""
    return (
        f"{before}--{boundary}\r\nContent-Type: video/webm\r\n"
        f"Content-Range: bytes {content_range}\r\n\r\n"
    ).encode()


#: (Range, If-Range, the status, the body's bytes of the copy as (first, stop), Content-Range)
SINGLE = [
    ("bytes=0-", None, 206, (0, None), "0-{last}/{n}"),
    ("bytes=0-1", None, 206, (0, 2), "0-1/{n}"),
    ("bytes=4000-", None, 206, (4000, None), "4000-{last}/{n}"),
    ("bytes=-3", None, 206, (-3, None), "{n3}-{last}/{n}"),
    ("bytes=4990-4999", None, 206, (4990, 5000), "4990-4999/{n}"),
    ("bytes=0-1", '"{etag}-1"', 206, (0, 2), "0-1/{n}"),
    ("bytes=0-1", '"{etag}-0"', 200, (0, None), None),
    ("items=0-1", None, 200, (0, None), None),
]


@pytest.mark.parametrize("mode", ["online", "offline"])
@pytest.mark.parametrize("path", ["/small", "/large"])
async def test_ranges_of_a_recorded_copy(make_proxy, range_origin, path: str, mode: str):
    """After a media element's first request recorded the whole: single ranges, If-Range,
    another unit, many ranges (multipart, in the request's order), 416 and HEAD, from a
    copy in memory and from one on disk, online (fresh: the origin is not asked) and
    offline; the access log says the status and the bytes sent."""
    proxy = await _recorded_by_a_media_request(make_proxy, range_origin, path)
    await proxy.control(mode=mode)
    body, url, n = BODIES[path], range_origin.url(path), len(BODIES[path])
    names = {"last": n - 1, "n": n, "n3": n - 3, "etag": path[1:]}
    for asked, if_range, status, (first, stop), content_range in SINGLE:
        headers = {"Range": asked}
        if if_range:
            headers["If-Range"] = if_range.format(**names)
        reply = await proxy.get(url, headers=headers)
        expected = body[first:stop]
        assert (reply.status, reply.body) == (status, expected), (asked, if_range)
        assert reply.header("Content-Length") == str(len(expected))
        assert reply.header("Accept-Ranges") == "bytes"
        if content_range is None:
            assert reply.header("Content-Range") is None
        else:
            assert reply.header("Content-Range") == "bytes " + content_range.format(**names)
        assert await _logged(proxy, url, status, len(expected))
    # several ranges: multipart, the later first (the disk copy is read again from the start)
    reply = await proxy.get(url, headers={"Range": "bytes=4500-4599,10-19"})
    assert reply.status == 206
    boundary = reply.header("Content-Type").partition("boundary=")[2]  # type: ignore[union-attr]
    assert reply.header("Content-Type") == f"multipart/byteranges; boundary={boundary}"
    assert reply.body == (
        part(boundary, f"4500-4599/{n}", "")
        + body[4500:4600]
        + part(boundary, f"10-19/{n}", "\r\n")
        + body[10:20]
        + f"\r\n--{boundary}--\r\n".encode()
    )
    assert await _logged(proxy, url, 206, len(reply.body))
    reply = await proxy.get(url, headers={"Range": f"bytes={n}-"})
    assert (reply.status, reply.body) == (416, b"")
    assert reply.header("Content-Range") == f"bytes */{n}"
    assert reply.header("Content-Type") is None
    assert await _logged(proxy, url, 416, 0)
    reply = await proxy.get(url, "HEAD", headers={"Range": "bytes=0-1"})  # GET only: a head
    assert (reply.status, reply.body) == (200, b"")
    assert reply.header("Content-Length") == str(n)
    assert reply.header("Accept-Ranges") == "bytes"
    # the validators still come before the range (RFC 9110 §13.2.2): a 304, no part
    reply = await proxy.get(url, headers={"Range": "bytes=0-1", "If-None-Match": f'"{path[1:]}-1"'})
    assert (reply.status, reply.body) == (304, b"")
    assert reply.header("Content-Range") is None
    assert range_origin.ranges(path) == [None]  # all from the copy


async def test_a_seek_on_a_miss_is_forwarded_and_never_served(make_proxy, range_origin):
    """A range other than ``bytes=0-`` on a miss goes upstream as asked: its 206 is relayed
    (and recorded as history), and offline it is no copy of the resource: the request is
    queued, without its Range."""
    proxy = await make_proxy()
    url = range_origin.url("/small")
    reply = await proxy.get(url, headers={"Range": "bytes=100-199"})
    assert (reply.status, reply.body) == (206, SMALL[100:200])
    assert reply.header("Content-Range") == f"bytes 100-199/{len(SMALL)}"
    assert range_origin.ranges("/small") == ["bytes=100-199"]
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    for asked in ("bytes=100-199", "bytes=0-", None):
        reply = await proxy.get(url, headers={"Range": asked} if asked else None)
        assert reply.status == 503, asked  # queued
    queued = proxy.outgoing()
    assert queued
    assert all(b"range" not in q.read_bytes().lower() for q in queued)
