"""The origin receives the request target the browser sent, byte for byte, while the canonical
URL names the cache entry: online, and from the outgoing queue fetched later."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.url import canonicalize

SEARCH = "/w/index.php?title=Special%3ASearch&search=a+b"
DECODED = "/w/index.php?title=Special:Search&search=a+b"


@dataclass
class EchoOrigin:
    """A server that answers every request with the target it received (``raw_path``)."""

    port: int = 0
    targets: list[str] = field(default_factory=list)
    runner: web.AppRunner | None = None

    def url(self, target: str) -> str:
        return f"http://127.0.0.1:{self.port}{target}"

    async def handle(self, request: web.Request) -> web.Response:
        self.targets.append(request.raw_path)
        return web.Response(text=request.raw_path, content_type="text/plain")


@pytest.fixture
async def echo() -> AsyncIterator[EchoOrigin]:
    origin = EchoOrigin()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", origin.handle)
    origin.runner = web.AppRunner(app, shutdown_timeout=0.5)
    await origin.runner.setup()
    site = web.TCPSite(origin.runner, "127.0.0.1", 0)
    await site.start()
    origin.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    try:
        yield origin
    finally:
        await origin.runner.cleanup()


async def get(proxy, url: str) -> tuple[int, str, bytes]:
    """GET ``url`` through the proxy with exactly these bytes in the request line (a client
    library would requote it): the status, the X-Cache header and the body."""
    raw = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers.get("X-Cache", ""), body


def request_lines(proxy, url: str) -> list[tuple[str, str]]:
    """The WARC-Target-URI and HTTP request line of each request record in the entry of
    ``url``, read with warcio."""
    path = proxy.store.path_for(canonicalize(url), proxy.key_for(url))
    with open(path, "rb") as f:
        return [
            (
                rec.rec_headers.get_header("WARC-Target-URI"),
                f"{rec.http_headers.protocol} {rec.http_headers.statusline}",
            )
            for rec in ArchiveIterator(f)
            if rec.rec_type == "request"
        ]


@pytest.mark.parametrize(
    "target",
    [SEARCH, DECODED, "/%7euser/a%2Fb?q=%3a&r=a%20b", "/x/./y/../z?k=v"],
)
async def test_an_online_miss_sends_the_browsers_target(proxy, echo, target):
    url = echo.url(target)
    status, cache, body = await get(proxy, url)
    assert (status, cache) == (200, "MISS")
    assert echo.targets == [target]
    assert body == target.encode()
    await proxy.recorded(url)
    # the archive names the entry by the canonical URL; its request line is what was sent
    canonical = canonicalize(url).canonical
    assert request_lines(proxy, url) == [(canonical, f"GET {target} HTTP/1.1")]


async def test_both_spellings_are_one_cache_entry(proxy, echo):
    """Fetched as ``%3A``, served offline for ``:`` (and the other way round)."""
    await get(proxy, echo.url(SEARCH))
    await proxy.recorded(echo.url(SEARCH))
    assert proxy.key_for(echo.url(SEARCH)) == proxy.key_for(echo.url(DECODED))
    await proxy.control(mode="offline")
    for spelling in (SEARCH, DECODED):
        status, cache, body = await get(proxy, echo.url(spelling))
        assert (status, cache, body) == (200, "HIT", SEARCH.encode())
    assert echo.targets == [SEARCH]


async def test_a_queued_request_is_fetched_as_the_browser_sent_it(make_proxy, echo):
    proxy = await make_proxy("offline")
    url = echo.url(SEARCH)
    status, _, _ = await get(proxy, url)
    assert status == 503
    assert echo.targets == []
    (queued,) = proxy.outgoing()
    entry = json.loads(queued.read_text())
    assert entry["url"] == canonicalize(url).file  # the cache entry it fills
    assert entry["target"] == SEARCH  # what will be sent

    fetched = await proxy.control(mode="online", action="fetch")
    assert "Fetched 1" in fetched["message"]
    assert echo.targets == [SEARCH]
    assert request_lines(proxy, url) == [(canonicalize(url).canonical, f"GET {SEARCH} HTTP/1.1")]

    await proxy.control(mode="offline")
    for spelling in (SEARCH, DECODED):
        status, cache, body = await get(proxy, echo.url(spelling))
        assert (status, cache, body) == (200, "HIT", SEARCH.encode())


async def test_a_queue_file_without_a_target_sends_the_canonical_url(make_proxy, echo):
    """A request queued before the target was kept goes as its canonical URL."""
    proxy = await make_proxy("offline")
    await get(proxy, echo.url(SEARCH))
    (queued,) = proxy.outgoing()
    entry = json.loads(queued.read_text())
    del entry["target"]
    queued.write_text(json.dumps(entry))
    await proxy.control(mode="online", action="fetch")
    assert echo.targets == [DECODED]
