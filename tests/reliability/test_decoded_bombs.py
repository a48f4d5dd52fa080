"""Decompression bombs in the cache (issue 30, finding 1): a copy whose Content-Encoding the
browser does not take is decoded on its way out.  A 1,652-byte ``br`` page of 1 GiB of spaces,
served to ``Accept-Encoding: gzip, deflate`` (a browser on plain http, curl, wget), once took
the proxy to 2.16 GB: the whole page was decoded in one buffer before a byte was written.

``wwwproxy serve`` runs in a process of its own; a bomb of 256 MiB of spaces (a few hundred
bytes of ``br``, a few KB of ``gzip, gzip``) is recorded through a miss and then served
decoded.  The proxy's peak RSS (``VmHWM`` in /proc) stays far below the page's size, the
browser gets the decoded bytes up to ``max_decoded_size`` and then a cut-off answer (through
the proxy and on its ``/cache/`` page alike), and a browser that leaves early leaves the proxy
small."""

from __future__ import annotations

import asyncio
import functools
import gzip
import resource
from pathlib import Path
from urllib.parse import quote

import aiohttp
import brotli
import pytest
from aiohttp import web

from ..proxy.conftest import serving as serving_app
from .test_fd_limits import WAIT, Served, listening, serving

BOMB = 256 * 1024 * 1024  # bytes of spaces each bomb decodes to
PEAK_LIMIT = 300 * 1024 * 1024  # the proxy's peak RSS, bytes
SPACE = ord(" ")

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").is_file(), reason="reads the proxy's RSS in /proc"
)


@functools.cache
def bomb(coding: str) -> bytes:
    spaces = b" " * BOMB
    if coding == "br":
        return brotli.compress(spaces, quality=5)
    assert coding == "gzip, gzip"
    return gzip.compress(gzip.compress(spaces, 1), 1)


def memory(pid: int, field: str) -> int:
    """``VmHWM`` (peak RSS) or ``VmRSS`` of process ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture
async def bomb_origin():
    """An origin serving ``/br`` and ``/gzip-gzip``: the bombs, whatever the request asks."""

    async def page(request: web.Request) -> web.Response:
        coding = request.match_info["coding"].replace("-", ", ")
        headers = {"Content-Encoding": coding, "Content-Type": "text/html"}
        return web.Response(body=bomb(coding), headers=headers)

    app = web.Application()
    app.router.add_get("/{coding}", page)
    async with serving_app(app) as port:
        yield f"http://127.0.0.1:{port}"


def bomb_proxy(tmp_path: Path, settings: str = ""):
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096)
    return serving(tmp_path, "uvloop", hard, hard, settings)


def session() -> aiohttp.ClientSession:
    # the bytes as they come: the test counts what the proxy sends
    timeout = aiohttp.ClientTimeout(total=60, sock_read=WAIT)
    return aiohttp.ClientSession(auto_decompress=False, timeout=timeout)


async def recorded(served: Served, url: str, coding: str) -> None:
    """Fetch ``url`` through the proxy as a browser taking ``coding`` (a miss: recorded), then
    wait until the proxy serves it from the cache."""
    accept = {"Accept-Encoding": "gzip" if coding == "gzip, gzip" else coding}
    async with session() as client:
        for _ in range(100):
            async with client.get(url, proxy=served.url, headers=accept) as reply:
                assert reply.status == 200
                assert await reply.read() == bomb(coding)
                if reply.headers.get("X-Cache") == "HIT":
                    return
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} was not recorded:\n{served.log.read_text()[-3000:]}")


async def read_decoded(
    served: Served, url: str, accept: str, stop_after: int | None = None, *, page: bool = False
) -> tuple[int, bytes, bool]:
    """GET ``url`` from the cache with ``Accept-Encoding: accept`` (``page``: the proxy's own
    ``/cache/`` page of it): how many bytes came, those that are not spaces, and whether the
    answer ended whole.  With ``stop_after``, the browser leaves once that many have come."""
    received, marks, whole = 0, bytearray(), False
    target = f"{served.url}/cache/?url={quote(url, safe='')}" if page else url
    proxy = None if page else served.url
    async with session() as client:
        async with client.get(target, proxy=proxy, headers={"Accept-Encoding": accept}) as r:
            assert (r.status, r.headers.get("X-Cache")) == (200, "HIT")
            assert "Content-Encoding" not in r.headers
            try:
                async for chunk in r.content.iter_chunked(1024 * 1024):
                    if chunk.count(SPACE) != len(chunk):
                        marks += chunk.replace(b" ", b"")
                    received += len(chunk)
                    if stop_after is not None and received >= stop_after:
                        r.close()  # the browser leaves
                        return received, bytes(marks), False
                whole = True
            except aiohttp.ClientPayloadError:
                whole = False
    return received, bytes(marks), whole


async def test_a_br_bomb_decodes_in_pieces_up_to_max_decoded_size(tmp_path, bomb_origin):
    bound = 100 * 1024 * 1024
    with bomb_proxy(tmp_path, f"max_decoded_size: {bound}\n") as served:
        await listening(served)
        url = bomb_origin + "/br"
        await recorded(served, url, "br")
        # a browser on plain http: no br
        proxied = await read_decoded(served, url, "gzip, deflate")
        # the /cache/ page: decoded for its <base> (put first: this page has no <head>)
        page = await read_decoded(served, url, "gzip, deflate", page=True)
        peak = memory(served.proc.pid, "VmHWM")
    print(f"peak RSS {peak / 2**20:.0f} MiB")
    assert peak < PEAK_LIMIT, f"the proxy's peak RSS was {peak / 2**20:.0f} MiB"
    assert proxied == (bound, b"", False)  # the bytes up to the bound, then cut off
    base = f'<base href="{url}">'.encode()
    assert page == (bound + len(base), base.replace(b" ", b""), False)
    log = served.log.read_text()
    assert "cut off" in log and "max_decoded_size" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


async def test_a_double_gzip_bomb_streams_whole_within_the_default_bound(tmp_path, bomb_origin):
    # no memory cache: the copy is read from its WARC file (the br test's comes from memory)
    with bomb_proxy(tmp_path, "memory_cache_mb: 0\n") as served:
        await listening(served)
        url = bomb_origin + "/gzip-gzip"
        await recorded(served, url, "gzip, gzip")
        received, marks, whole = await read_decoded(served, url, "identity")  # wget, curl
        peak = memory(served.proc.pid, "VmHWM")
    print(f"peak RSS {peak / 2**20:.0f} MiB")
    assert peak < PEAK_LIMIT, f"the proxy's peak RSS was {peak / 2**20:.0f} MiB"
    assert (received, marks, whole) == (BOMB, b"", True)  # within the default 1 GiB
    assert "Traceback" not in served.log.read_text()


async def test_a_browser_leaving_a_bomb_early_leaves_the_proxy_small(tmp_path, bomb_origin):
    with bomb_proxy(tmp_path) as served:
        await listening(served)
        url = bomb_origin + "/br"
        await recorded(served, url, "br")
        for _ in range(2):  # twice: the second must not start from a grown process
            received, *_ = await read_decoded(served, url, "gzip, deflate", 10 * 1024 * 1024)
            assert received >= 10 * 1024 * 1024
        await asyncio.sleep(0.5)  # the proxy notices the browsers have gone
        peak, now = memory(served.proc.pid, "VmHWM"), memory(served.proc.pid, "VmRSS")
        # and it still answers: the page, from the cache, to a browser taking br
        await recorded(served, url, "br")
    print(f"peak RSS {peak / 2**20:.0f} MiB, {now / 2**20:.0f} MiB after")
    assert peak < PEAK_LIMIT, f"the proxy's peak RSS was {peak / 2**20:.0f} MiB"
    assert now < PEAK_LIMIT // 2, f"the proxy holds {now / 2**20:.0f} MiB after"
