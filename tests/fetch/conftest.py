"""A local multi-page web site for the fetch tests, served from a thread (so both async
tests and the synchronous CLI tests, which run their own event loop, can use it).

The main site is on 127.0.0.1; "another host" is the same server on 127.0.0.2 (a different
host name as far as scope rules go).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

if TYPE_CHECKING:
    from wwwproxy.fetch.links import Link


@dataclass
class Site:
    port: int
    other_port: int
    hits: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # time.monotonic() of each hit
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: path -> number of requests to hold until they have all arrived (forces overlap)
    gates: dict[str, int] = field(default_factory=dict)
    arrived: dict[str, int] = field(default_factory=dict)
    opened: dict[str, asyncio.Event] = field(default_factory=dict)
    #: (path, If-None-Match) of every conditional request
    conditional: list[tuple[str, str]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def other(self) -> str:
        return f"http://127.0.0.2:{self.other_port}"

    def url(self, path: str) -> str:
        return self.base + path

    def take_hits(self) -> list[str]:
        with self.lock:
            hits, self.hits[:], self.times[:] = list(self.hits), [], []
        return hits


STATIC = b"M51, the Whirlpool Galaxy\n" * 40


def _named_pages(counter: int) -> dict[str, tuple[int, str, bytes | str, dict[str, str]]]:
    """The pages of example.com and friends (reached through :class:`MapResolver`), with
    the content types of the URL database spec's examples."""
    html = "text/html"
    return {
        "/": (200, html, '<p>home</p><a href="/about/">about</a>', {}),
        "/index.html?foo=bar": (200, html, "<p>foo</p>", {}),
        "/about/": (200, "text/html; charset=utf-8", "<p>about</p>", {}),
        "/favicon.ico": (200, "image/x-icon", b"\x00\x00\x01\x00", {}),
        "/robots.txt": (200, "text/plain", "User-agent: *\nDisallow:\n", {}),
        "/m51.txt": (200, "text/ascii", STATIC, {}),
        "/m51.gz": (200, "text/ascii", STATIC, {"gzip": "always"}),
        "/moved": (302, html, "", {"Location": "/about/"}),
        "/loop": (302, html, "", {"Location": "/loop"}),
        "/gone": (404, html, "<p>gone</p>", {}),
        "/changing": (200, "text/plain", f"version {counter}\n", {}),
        "/hello": (200, "text/plain", "hello\n", {}),
        "/bare": (200, "", b"", {}),  # aiohttp adds a type to any non-empty body
    }


def _pages(site: Site) -> dict[str, tuple[int, str, bytes | str, dict[str, str]]]:
    """path -> (status, content type, body, extra headers)."""
    html = "text/html; charset=utf-8"
    other = site.other
    return {
        "/robots.txt": (200, "text/plain", "User-agent: *\nDisallow: /private/\n", {}),
        "/": (
            200,
            html,
            f"""<!DOCTYPE html><html><head><title>Home</title>
<link rel="stylesheet" href="/css/site.css"><script src="/js/app.js"></script>
<link rel="icon" href="/favicon.ico"></head><body>
<img src="img/logo.png" srcset="img/logo-2x.png 2x">
<img src="{other}/img/cdn.png">
<a href="a.html">A</a> <a href="/search?q=1&amp;page=2">search</a>
<a href="/private/secret.html">secret</a> <a href="/missing.html">missing</a>
<a href="/loop1">loop</a> <a href="/redirect">redirect</a>
<a href="{other}/offhost.html">elsewhere</a> <a href="/frames.html">frames</a>
<a href="mailto:someone@example.com">mail</a> <a href="#top">top</a>
<iframe src="/iframe.html"></iframe>
</body></html>""",
            {},
        ),
        "/css/site.css": (
            200,
            "text/css",
            '@import "base.css";\nbody { background: url(../img/bg.png) }\n',
            {},
        ),
        "/css/base.css": (200, "text/css", 'h1 { background: url("/img/h1.png") }\n', {}),
        "/js/app.js": (200, "application/javascript", "console.log('hi');\n", {}),
        "/favicon.ico": (200, "image/x-icon", b"\x00\x00\x01\x00", {}),
        "/a.html": (
            200,
            html,
            '<p>A</p><a href="/deep/c.html">C</a><img src="/img/a.png">',
            {"gzip": "yes"},
        ),
        "/deep/c.html": (200, html, '<a href="/deep/d.html">D</a>', {}),
        "/deep/d.html": (200, html, "<p>D, the end</p>", {}),
        "/search?q=1&page=2": (200, html, "<p>results</p>", {}),
        "/private/secret.html": (200, html, '<p>secret</p><img src="/img/secret.png">', {}),
        "/missing.html": (404, html, "<p>not here</p>", {}),
        "/loop1": (302, html, "", {"Location": "/loop2"}),
        "/loop2": (302, html, "", {"Location": "/loop1"}),
        "/redirect": (301, html, "", {"Location": "/a.html"}),
        "/to-other": (302, html, "", {"Location": f"{other}/offhost.html"}),
        "/frames.html": (
            200,
            html,
            '<frameset><frame src="/frame1.html"><frame src="/frame2.html"></frameset>',
            {},
        ),
        "/frame1.html": (200, html, '<img src="/img/frame.png"><a href="/deep/c.html">C</a>', {}),
        "/frame2.html": (200, html, "<p>frame 2</p>", {}),
        "/iframe.html": (200, html, '<img src="/img/iframe.png">', {}),
        # what the cache policy looks at: an origin's lifetime, validators, errors
        "/max60.txt": (200, "text/plain", "fresh for a minute\n", {"Cache-Control": "max-age=60"}),
        "/etag.txt": (
            200,
            "text/plain",
            "ask every time\n",
            {"ETag": '"v1"', "Cache-Control": "no-cache"},
        ),
        "/broken.html": (500, html, "<p>server error</p>", {}),
        **{
            f"/img/{name}.png": (200, "image/png", b"\x89PNG" + name.encode(), {})
            for name in ("logo", "logo-2x", "bg", "h1", "a", "frame", "iframe", "secret")
        },
        # the other host
        "other:/offhost.html": (
            200,
            html,
            '<img src="/img/off.png"><a href="/other-page.html">more</a>',
            {},
        ),
        "other:/other-page.html": (200, html, "<p>more elsewhere</p>", {}),
        "other:/img/cdn.png": (200, "image/png", b"\x89PNGcdn", {}),
        "other:/img/off.png": (200, "image/png", b"\x89PNGoff", {}),
    }


@pytest.fixture
def site() -> Iterator[Site]:
    ready = threading.Event()
    stop: asyncio.Event | None = None
    loop = asyncio.new_event_loop()
    holder: dict[str, object] = {}

    async def handler(request: web.Request) -> web.StreamResponse:
        this: Site = holder["site"]  # type: ignore[assignment]
        host = request.host.rsplit(":", 1)[0]
        if host.startswith("127.0.0.1"):
            prefix = ""
        elif host.startswith("127.0.0.2"):
            prefix = "other:"
        else:
            prefix = f"{host}:"
        with this.lock:
            this.hits.append(prefix + request.path_qs)
            this.times.append(time.monotonic())
            counter = len(this.hits)
        if host == "broken.example" and request.path == "/robots.txt":
            return web.Response(status=503, text="down for maintenance")
        need = this.gates.get(prefix + request.path_qs)
        if need:
            key = prefix + request.path_qs
            this.arrived[key] = this.arrived.get(key, 0) + 1
            gate = this.opened.setdefault(key, asyncio.Event())
            if this.arrived[key] >= need:
                gate.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.wait(), 10)
        if request.method == "POST" and request.path == "/form":
            body = await request.read()
            return web.Response(text=f"posted {body.decode()}", content_type="text/plain")
        if request.method != "GET":
            return web.Response(status=405, text="GET only", content_type="text/plain")
        if prefix in ("", "other:"):
            pages = _pages(this)
            key = prefix + request.path_qs
        else:
            pages = _named_pages(counter)
            key = request.path_qs
            if host == "example.net":  # a server that ignores the case of paths
                key = key.lower()
        if key not in pages:
            return web.Response(status=404, text="no such page", content_type="text/plain")
        status, ctype, body, extra = pages[key]
        data = body.encode() if isinstance(body, str) else body
        headers = {k: v for k, v in extra.items() if k != "gzip"}
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match is not None:
            with this.lock:
                this.conditional.append((key, if_none_match))
            if "ETag" in headers and headers["ETag"] in if_none_match:
                return web.Response(status=304, headers={"ETag": headers["ETag"]})
        encode = extra.get("gzip")
        if encode == "always" or (encode and "gzip" in request.headers.get("Accept-Encoding", "")):
            data = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        response = web.Response(status=status, body=data, headers=headers)
        if ctype:
            response.headers["Content-Type"] = ctype
        else:
            response.headers.pop("Content-Type", None)
        return response

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        main = web.TCPSite(runner, "127.0.0.1", 0)
        await main.start()
        second = web.TCPSite(runner, "127.0.0.2", 0)
        await second.start()
        holder["site"] = Site(
            main._server.sockets[0].getsockname()[1],  # noqa: SLF001
            second._server.sockets[0].getsockname()[1],  # noqa: SLF001
        )
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10), "the test site did not start"
    try:
        yield holder["site"]  # type: ignore[misc]
    finally:
        assert stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


class MapResolver(AbstractResolver):
    """DNS for the tests: every name goes to the test site's main address and port, so
    ``http://example.com/`` (port 80, as the URL database needs) reaches it."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            {
                "hostname": host,
                "host": "127.0.0.1",
                "port": self.port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        pass


# --- link extraction helpers ------------------------------------------------------------------


def triples(links: list[Link]) -> list[tuple[str, str, bool]]:
    return [(link.url, link.kind, link.requisite) for link in links]


def urls(links: list[Link]) -> list[str]:
    return [link.url for link in links]
