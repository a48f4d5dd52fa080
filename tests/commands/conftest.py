"""Fixtures for the command pages: a real origin, the real proxy on a real port, real clients.

Every test talks HTTP over loopback: to the proxy's own address directly (origin-form
``GET /index/``) and through the proxy (absolute-form ``GET http://127.0.0.1:PORT/index/``), as
the ``via`` fixture chooses.  Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import gzip
import html
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from wwwproxy.app import Running, start
from wwwproxy.commands import API_HEADER
from wwwproxy.config import Config
from wwwproxy.url import canonicalize

TIMEOUT = aiohttp.ClientTimeout(total=15)
EVIL_TITLE = "<script>alert('title')</script> Evil & co"

HOME = b"""<!DOCTYPE html><html><head><title>Origin home</title>
<link rel="stylesheet" href="/style.css"><script src="/app.js"></script></head>
<body><h1>Welcome</h1><p>The quick brown fox jumps over the lazy dog.</p>
<img src="/img.png"><a href="/a.html">A</a> <a href="/b.html">B</a>
<a href="http://other.invalid/x">elsewhere</a></body></html>"""
STYLE = b"body { background: url(/bg.png) }"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@dataclass
class Origin:
    port: int
    hits: Counter[str] = field(default_factory=Counter)
    versions: dict[str, int] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _origin_app(origin: Origin) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        origin.hits[path] += 1
        if path == "/":
            return web.Response(body=HOME, content_type="text/html")
        if path in ("/a.html", "/b.html"):
            name = path[1]
            body = f"<html><head><title>Page {name}</title></head><body>page {name} text"
            return web.Response(text=body + "</body></html>", content_type="text/html")
        if path == "/evil":
            body = (
                f"<html><head><title>{EVIL_TITLE}</title></head><body>"
                "<p>harmless words here</p><script>document.title='pwned'</script></body></html>"
            )
            return web.Response(
                text=body,
                content_type="text/html",
                headers={"Set-Cookie": "wwwproxy_token=attacker-chosen-token-value-123456789"},
            )
        if path == "/gz.html":
            body = b"<html><head><title>Zipped</title></head><body>zebracorn lives</body></html>"
            return web.Response(
                body=gzip.compress(body),
                headers={"Content-Type": "text/html", "Content-Encoding": "gzip"},
            )
        if path == "/latin1.html":
            body = "<html><head><title>Caf\u00e9</title></head><body>cr\u00e8me br\u00fbl\u00e9e"
            return web.Response(
                body=body.encode("latin-1"), headers={"Content-Type": "text/html; charset=latin-1"}
            )
        if path == "/changing":
            n = origin.versions.get(path, 0) + 1
            origin.versions[path] = n
            return web.Response(
                text=f"<html><head><title>Version {n}</title></head><body>version {n} "
                '<img src="pic.png"></body></html>',
                content_type="text/html",
            )
        if path == "/style.css":
            return web.Response(body=STYLE, content_type="text/css")
        if path in ("/img.png", "/bg.png", "/pic.png"):
            return web.Response(body=PNG, content_type="image/png")
        if path == "/app.js":
            return web.Response(text="var x = 1;", content_type="application/javascript")
        if path.startswith("/big/"):
            return web.Response(text="x" * int(path[5:]), content_type="text/plain")
        return web.Response(status=404, text=f"no {path}", content_type="text/plain")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@pytest.fixture
async def origin() -> AsyncIterator[Origin]:
    holder = Origin(0)
    runner = web.AppRunner(_origin_app(holder), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    holder.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    yield holder
    await runner.cleanup()


def make_config(tmp_path: Path, **kwargs: Any) -> Config:
    return Config(listen_port=0, cache=tmp_path / "cache", **kwargs)


async def start_proxy(config: Config, **kwargs: Any) -> Running:
    """The proxy as ``wwwproxy serve`` starts it (its services: store, queue, search index
    following every recording, engine, mode)."""
    running = await start(config, **kwargs)
    assert running.services.search is not None
    return running


async def stop_proxy(running: Running) -> None:
    await running.stop()  # as serve does at exit: closes the search index (no -wal left)


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Running]:
    running = await start_proxy(make_config(tmp_path))
    yield running
    await stop_proxy(running)


class Client:
    """A browser-like client (cookie jar) of the proxy's pages, directly or through it."""

    def __init__(self, port: int, via: str, session: aiohttp.ClientSession) -> None:
        self.port = port
        self.via = via
        self.session = session
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> URL:
        """The URL exactly as written (no re-encoding by the client library)."""
        return URL(self.base + path, encoded=True)

    def _kw(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.via == "proxy":
            kwargs.setdefault("proxy", self.base)
        kwargs.setdefault("allow_redirects", False)
        return kwargs

    async def get(self, path: str, **kwargs: Any) -> tuple[int, str, Any]:
        async with self.session.get(self.url(path), **self._kw(kwargs)) as resp:
            return resp.status, await resp.text(), resp.headers

    async def get_json(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        headers = {"Accept": "application/json", **kwargs.pop("headers", {})}
        async with self.session.get(self.url(path), headers=headers, **self._kw(kwargs)) as resp:
            return resp.status, await resp.json(content_type=None)

    async def post(
        self, path: str, data: Any = None, *, token: bool = True, **kwargs: Any
    ) -> tuple[int, str, Any]:
        """POST a form as the page's own form would (with the token unless ``token=False``)."""
        fields = list(data.items()) if isinstance(data, dict) else list(data or [])
        if token:
            fields.append(("token", await self.token()))
        # as a browser submitting the proxy's own form: its Origin is the proxy's
        kwargs["headers"] = {"Origin": self.base, **kwargs.get("headers", {})}
        async with self.session.post(self.url(path), data=fields, **self._kw(kwargs)) as resp:
            return resp.status, await resp.text(), resp.headers

    async def post_api(self, path: str, data: Any = None, **kwargs: Any) -> tuple[int, Any]:
        """POST as a program (the CLI) does: the API header, JSON back."""
        headers = {API_HEADER: "test", "Accept": "application/json", **kwargs.pop("headers", {})}
        async with self.session.post(
            self.url(path), data=data, headers=headers, **self._kw(kwargs)
        ) as resp:
            return resp.status, await resp.json(content_type=None)

    async def token(self) -> str:
        status, text, _ = await self.get("/control/")
        assert status == 200
        m = re.search(r'name="token" value="([^"]+)"', text)
        assert m, "no form token on /control/"
        return html.unescape(m.group(1))


@pytest.fixture(params=["direct", "proxy"])
def via(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def client(proxy: Running, via: str) -> AsyncIterator[Client]:
    jar = aiohttp.CookieJar(unsafe=True)  # cookies for 127.0.0.1
    async with aiohttp.ClientSession(cookie_jar=jar, timeout=TIMEOUT) as session:
        yield Client(proxy.port, via, session)


async def browse(proxy: Running, url: str, **kwargs: Any) -> tuple[int, bytes, Any]:
    """Fetch ``url`` through the proxy, as a browser would; when it was fetched (X-Cache:
    MISS), wait until the proxy has recorded it (it records after the body is sent)."""
    key = canonicalize(url).file
    store = proxy.services.store
    before = len(store.captures(key))
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.get(url, proxy=f"http://127.0.0.1:{proxy.port}", **kwargs) as resp:
            result = resp.status, await resp.read(), resp.headers
    relayed = "wwwproxy" in result[2].get("Via", "")  # not one of the proxy's own pages
    if result[2].get("X-Cache") == "MISS" and relayed:
        for _ in range(500):
            if len(store.captures(key)) > before:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"{url} was not recorded")
    return result


def text_of(page: str) -> str:
    """The visible text of a command page's main part (tags dropped, entities decoded)."""
    main = page.split("<main>", 1)[-1].split("</main>", 1)[0]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", main))).strip()


@pytest.fixture
def fetch(proxy: Running) -> Callable[..., Awaitable[tuple[int, bytes, Any]]]:
    """``await fetch(url)``: browse ``url`` through the proxy, recording it."""

    async def go(url: str, **kwargs: Any) -> tuple[int, bytes, Any]:
        return await browse(proxy, url, **kwargs)

    return go


@pytest.fixture
def visible() -> Callable[[str], str]:
    """``visible(html)``: the text of a page's main part, as a reader sees it."""
    return text_of
