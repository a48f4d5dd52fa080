"""End-to-end fixtures: a real aiohttp origin, the real proxy on a real port, real clients.

Everything talks over loopback sockets; nothing is mocked.  Every await that could hang is
bounded (client timeouts, ``asyncio.wait_for``), so a broken proxy fails a test instead of
stalling the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import io
import ipaddress
import json
import logging
import re
import socket
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import pytest
import trustme
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.app import Running, start
from wwwproxy.config import Config, FreshnessRule
from wwwproxy.http.policy import Mode
from wwwproxy.url import URL, canonicalize
from wwwproxy.url.requestkey import request_key

TIMEOUT = aiohttp.ClientTimeout(total=10)

HTML = (
    b"<!DOCTYPE html><html><head><title>Origin page</title></head>"
    b'<body><p>Hello from the origin.</p><img src="/image.png"></body></html>\n'
)
IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64
GZIP_PLAIN = b"compressible text, " * 500
GZIP_BODY = gzip.compress(GZIP_PLAIN, mtime=0)
CHUNKS = [b"first chunk;", b"second chunk;", b"third and last chunk."]
TRICKLE = [b"early part;", b"late part."]
SLOW_CHUNK = b"s" * 16384
SLOW_CHUNKS = 12
SLOW_DELAY = 0.05
# more than the socket buffers between proxy and client hold, so a client that stops reading
# leaves the proxy's writes paused
LARGE_BODY = bytes(range(256)) * (32 * 1024)  # 8 MiB
ETAG = '"v1-abc"'
LAST_MODIFIED = "Tue, 01 Oct 2024 10:00:00 GMT"


@dataclass
class Seen:
    """One request as the origin received it."""

    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    peer: tuple[str, int] | None = None

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


@dataclass
class Origin:
    """A local web server with one route per kind of content the proxy must handle."""

    # the content it serves, for tests to compare against
    HTML: ClassVar[bytes] = HTML
    IMAGE: ClassVar[bytes] = IMAGE
    GZIP_BODY: ClassVar[bytes] = GZIP_BODY
    GZIP_PLAIN: ClassVar[bytes] = GZIP_PLAIN
    CHUNKS: ClassVar[list[bytes]] = CHUNKS
    TRICKLE: ClassVar[list[bytes]] = TRICKLE
    SLOW_BODY: ClassVar[bytes] = SLOW_CHUNK * SLOW_CHUNKS
    LARGE_BODY: ClassVar[bytes] = LARGE_BODY
    ETAG: ClassVar[str] = ETAG

    port: int = 0
    hits: Counter[str] = field(default_factory=Counter)
    seen: list[Seen] = field(default_factory=list)
    runner: web.AppRunner | None = None
    release: asyncio.Event = field(default_factory=asyncio.Event)
    slow_done: asyncio.Event = field(default_factory=asyncio.Event)
    #: /trickle and /trickle-length send their second part only once this is set
    trickle: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def last(self, path: str) -> Seen:
        return [s for s in self.seen if s.path == path][-1]

    async def start(self) -> None:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001

    async def stop(self) -> None:
        """Stop listening: the port refuses connections afterwards."""
        self.release.set()
        if self.runner is not None:
            await asyncio.wait_for(self.runner.cleanup(), 5)
            self.runner = None
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        path = request.path
        self.hits[path] += 1
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.seen.append(
            Seen(request.method, path, list(request.headers.items()), body, peer and peer[:2])
        )
        route = _ROUTES.get(path)
        if route is None:
            return web.Response(status=404, text=f"no route {path}", content_type="text/plain")
        return await route(self, request, body)


async def _page(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(body=HTML, content_type="text/html", charset="utf-8")


async def _image(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(body=IMAGE, content_type="image/png")


async def _redirect(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(status=302, headers={"Location": "/page.html"}, text="moved")


async def _chunked(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    resp.enable_chunked_encoding()
    await resp.prepare(r)
    for chunk in CHUNKS:
        await resp.write(chunk)
        await asyncio.sleep(0.01)
    await resp.write_eof()
    return resp


async def _gzip(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(
        body=GZIP_BODY,
        headers={"Content-Encoding": "gzip", "Content-Type": "text/plain", "Vary": "Accept"},
    )


async def _gzip_chunked(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    resp.enable_chunked_encoding()
    await resp.prepare(r)
    half = len(GZIP_BODY) // 2
    await resp.write(GZIP_BODY[:half])
    await resp.write(GZIP_BODY[half:])
    await resp.write_eof()
    return resp


async def _slow(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    resp.content_length = len(SLOW_CHUNK) * SLOW_CHUNKS
    await resp.prepare(r)
    try:
        for _ in range(SLOW_CHUNKS):
            await resp.write(SLOW_CHUNK)
            await asyncio.sleep(SLOW_DELAY)
        await resp.write_eof()
    except ConnectionError:  # the proxy hung up (tests that expect it)
        return resp
    o.slow_done.set()
    return resp


async def _trickle(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    """A body whose first part is sent long before the rest (a progressively rendered page,
    server-sent events): chunked, or with a Content-Length on ``/trickle-length``."""
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    if r.path == "/trickle-length":
        resp.content_length = len(b"".join(TRICKLE))
    else:
        resp.enable_chunked_encoding()
    await resp.prepare(r)
    try:
        await resp.write(TRICKLE[0])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(o.trickle.wait(), 5)
        await resp.write(TRICKLE[1])
        await resp.write_eof()
    except ConnectionError:  # the proxy hung up (tests that expect it)
        pass
    return resp


async def _late_body(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    """The head at once, the body (with a Content-Length) only once ``trickle`` is set."""
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    resp.content_length = len(TRICKLE[1])
    await resp.prepare(r)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(o.trickle.wait(), 5)
        await resp.write(TRICKLE[1])
        await resp.write_eof()
    except ConnectionError:  # the proxy hung up (tests that expect it)
        pass
    return resp


async def _cdn(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    """As sites behind a CDN answer: with the CDN's own cache status."""
    return web.Response(
        text="from the edge", content_type="text/plain", headers={"X-Cache": "Hit from cdn"}
    )


async def _large(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(body=LARGE_BODY, content_type="application/octet-stream")


async def _form(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    if r.method != "POST":
        return web.Response(
            status=405, text="post a form", headers={"Allow": "POST"}, content_type="text/plain"
        )
    return web.Response(text=f"<p>you sent {body.decode('latin-1')}</p>", content_type="text/html")


async def _echo(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    data = {
        "method": r.method,
        "headers": [[k, v] for k, v in r.headers.items()],
        "body": body.decode("latin-1"),
        "path_qs": r.path_qs,
        "raw_path": r.raw_path,
    }
    return web.Response(text=json.dumps(data), content_type="application/json")


async def _etag(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    headers = {"ETag": ETAG, "Last-Modified": LAST_MODIFIED, "Cache-Control": "max-age=0"}
    if r.headers.get("If-None-Match") == ETAG:
        return web.Response(status=304, headers=headers)
    return web.Response(body=b"validated body", headers=headers, content_type="text/plain")


async def _ranged(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    """Honours ``Range: bytes=A-B`` (206) and validators, as media servers do."""
    headers = {"ETag": ETAG, "Accept-Ranges": "bytes", "Content-Type": "image/png"}
    if r.headers.get("If-None-Match") == ETAG:
        return web.Response(status=304, headers=headers)
    match = re.fullmatch(r"bytes=(\d+)-(\d+)", r.headers.get("Range", ""))
    if match:
        start, end = int(match.group(1)), int(match.group(2))
        headers["Content-Range"] = f"bytes {start}-{end}/{len(IMAGE)}"
        return web.Response(status=206, body=IMAGE[start : end + 1], headers=headers)
    return web.Response(body=IMAGE, headers=headers)


async def _missing(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(status=404, text="not here", content_type="text/plain")


async def _error(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(status=500, text="origin broke", content_type="text/plain")


async def _hang(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(o.release.wait(), 5)
    return web.Response(text="late", content_type="text/plain")


async def _counted(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(text=f"hit {o.hits[r.path]}", content_type="text/plain")


async def _max_age(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(
        text=f"hit {o.hits[r.path]}",
        content_type="text/plain",
        headers={"Cache-Control": "max-age=60"},
    )


async def _no_cache(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    return web.Response(
        text=f"hit {o.hits[r.path]}",
        content_type="text/plain",
        headers={"Cache-Control": "no-cache"},
    )


async def _then_gone(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    """A good page at first; then 404 (``/then-gone``) or 500 (``/then-broken``)."""
    if o.hits[r.path] == 1:
        return web.Response(text="the good copy", content_type="text/plain")
    status = 404 if r.path == "/then-gone" else 500
    return web.Response(status=status, text="gone wrong", content_type="text/plain")


async def _vary_language(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    language = r.headers.get("Accept-Language", "none")
    return web.Response(
        text=f"page in {language}", content_type="text/plain", headers={"Vary": "Accept-Language"}
    )


async def _websocket(o: Origin, r: web.Request, body: bytes) -> web.StreamResponse:
    ws = web.WebSocketResponse(protocols=("chat",))
    await ws.prepare(r)
    async for message in ws:
        if message.type == aiohttp.WSMsgType.TEXT:
            await ws.send_str(f"echo {message.data}")
        elif message.type == aiohttp.WSMsgType.BINARY:
            await ws.send_bytes(message.data[::-1])
    return ws


_ROUTES: dict[str, Callable[[Origin, web.Request, bytes], Awaitable[web.StreamResponse]]] = {
    "/page.html": _page,
    "/image.png": _image,
    "/redirect": _redirect,
    "/chunked": _chunked,
    "/gzip": _gzip,
    "/gzip-chunked": _gzip_chunked,
    "/slow": _slow,
    "/form": _form,
    "/large": _large,
    "/cdn": _cdn,
    "/trickle": _trickle,
    "/trickle-length": _trickle,
    "/late-body": _late_body,
    "/echo": _echo,
    "/etag": _etag,
    "/missing": _missing,
    "/ranged": _ranged,
    "/error": _error,
    "/hang": _hang,
    "/counted": _counted,
    "/counted-other": _counted,
    "/max-age": _max_age,
    "/no-cache": _no_cache,
    "/then-gone": _then_gone,
    "/then-broken": _then_gone,
    "/vary-language": _vary_language,
    "/ws": _websocket,
}


@pytest.fixture
async def origin() -> AsyncIterator[Origin]:
    o = Origin()
    await o.start()
    try:
        yield o
    finally:
        await o.stop()


# --- the proxy -------------------------------------------------------------------------------


@dataclass
class Proxy:
    """A running proxy and the ways a test talks to it."""

    running: Running
    cache: Path

    @property
    def port(self) -> int:
        return self.running.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def store(self):  # noqa: ANN201 (wwwproxy.archive.store.Store)
        return self.running.services.store

    @property
    def mode(self) -> Mode:
        return self.running.services.mode

    def access_lines(self) -> list[str]:
        """The access-log lines so far (written out now, not at the next second)."""
        access_log = self.running.server.access_log
        access_log.flush()
        assert isinstance(access_log.stream, io.StringIO)
        return access_log.stream.getvalue().splitlines()

    def session(self, **kwargs: Any) -> aiohttp.ClientSession:
        """A browser-like client; bodies are left encoded so bytes can be compared."""
        kwargs.setdefault("auto_decompress", False)
        kwargs.setdefault("timeout", TIMEOUT)
        return aiohttp.ClientSession(**kwargs)

    async def get(self, url: str, method: str = "GET", **kwargs: Any) -> Reply:
        """One request through the proxy on a fresh client."""
        async with self.session() as s:
            return await self.request(s, method, url, **kwargs)

    async def request(
        self, session: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
    ) -> Reply:
        kwargs.setdefault("allow_redirects", False)  # see what the proxy sent, not follow it
        async with session.request(method, url, proxy=self.url, **kwargs) as resp:
            body = await resp.read()
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
            return Reply(resp.status, resp.reason or "", headers, body)

    async def control(self, **form: str) -> dict[str, Any]:
        """POST to /control/ as the CLI does (GET without a form); returns the JSON status."""
        async with self.session() as s:
            async with s.request(
                "POST" if form else "GET",
                f"{self.url}/control/?format=json",
                data=form or None,
                headers={"X-Wwwproxy-Request": "1"},
            ) as resp:
                assert resp.status == 200, await resp.text()
                return await resp.json()

    async def raw(self, data: bytes, timeout: float = 5.0) -> bytes:
        """Bytes on a new connection to the proxy; everything it answers until it closes."""
        return await raw_exchange(self.port, data, timeout=timeout)

    async def connect_raw(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 5)

    async def stalled_get(self, url: str) -> asyncio.StreamWriter:
        """A browser that asks for ``url``, reads the head and then stops reading: with a
        small receive buffer the proxy's writes to it soon pause (a download the user is
        about to cancel).  The caller aborts the returned connection."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.wait_for(
            asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", self.port)), 5
        )
        reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
        writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200"), head
        await asyncio.sleep(0.3)  # the proxy fills the buffers and waits for the browser
        return writer

    read_response = staticmethod(lambda reader, timeout=5.0: read_response(reader, timeout))
    wait_until = staticmethod(lambda check, timeout=5.0: wait_until(check, timeout))
    key_for = staticmethod(lambda *a, **k: key_for(*a, **k))

    async def recorded(
        self,
        url: str,
        count: int = 2,
        method: str = "GET",
        body: bytes = b"",
        ctype: str | None = None,
    ) -> list[WarcRecord]:
        """Wait until ``count`` records are in the URL's file and indexed (the proxy records
        while and just after it answers), then return them."""
        key = key_for(url, method, body, ctype)

        def done() -> bool:
            records = self.records(url, method, body, ctype)
            return len(records) >= count and len(self.store.captures(key)) >= count // 2

        assert await wait_until(done), f"{url}: {self.records(url, method, body, ctype)}"
        return self.records(url, method, body, ctype)

    def outgoing(self) -> list[Path]:
        directory = self.cache / "outgoing"
        if not directory.is_dir():
            return []
        return sorted(p for p in directory.glob("*.json") if not p.name.startswith("."))

    def records(self, url: str, method: str = "GET", body: bytes = b"", ctype: str | None = None):
        """Every WARC record of the URL's cache file, read back with warcio."""
        key = key_for(url, method, body, ctype)
        path = self.store.path_for(canonicalize(url), key)
        out = []
        if not path.exists():
            return out
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                out.append(
                    WarcRecord(
                        rec.rec_type,
                        rec.rec_headers.get_header("WARC-Target-URI"),
                        rec.rec_headers.get_header("WARC-Archive-Key"),
                        rec.rec_headers.get_header("WARC-Payload-Digest"),
                        rec.http_headers.get_statuscode() if rec.http_headers else None,
                        list(rec.http_headers.headers) if rec.http_headers else [],
                        rec.raw_stream.read(),
                        rec.http_headers.protocol if rec.http_headers else "",
                    )
                )
        return out


@dataclass
class Reply:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass
class WarcRecord:
    rec_type: str
    target_uri: str
    archive_key: str | None
    payload_digest: str | None
    status: str | None
    http_headers: list[tuple[str, str]]
    payload: bytes
    protocol: str


def key_for(url: str, method: str = "GET", body: bytes = b"", ctype: str | None = None) -> str:
    return request_key(canonicalize(url).file, method, ctype, body)


def canon(url: str) -> URL:
    return canonicalize(url)


def _unexpected(record: logging.LogRecord) -> bool:
    """A log record of a handler crash (aiohttp logs it and answers 500) or an error of ours.
    aiohttp also logs the parse errors of malformed requests it answers with 400: those are
    the expected answer, not a crash."""
    if record.levelno < logging.ERROR:
        return False
    if record.name.startswith("wwwproxy"):
        return True
    if record.name == "aiohttp.server" and record.exc_info:
        return not isinstance(record.exc_info[1], HttpProcessingError)
    return False


@pytest.fixture
async def make_proxy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Callable[..., Awaitable[Proxy]]]:
    """Start proxies with a test config (``Config`` fields as keywords); all stop at the end,
    and the test fails if the proxy logged an unexpected exception meanwhile."""
    started: list[Running] = []

    async def make(mode: str = "online", **overrides: Any) -> Proxy:
        cache = overrides.pop("cache", tmp_path / "cache")
        fresh = overrides.pop("freshness", ())
        rules = tuple(FreshnessRule(p, age, re.compile(p)) for p, age in fresh)
        config = Config(
            listen_host="127.0.0.1",
            listen_port=0,
            cache=cache,
            connect_timeout=2.0,
            read_timeout=3.0,
            freshness=rules,
            # every repeat request asks the origin unless a test says otherwise (the
            # default minimum age before asking again has tests of its own)
            request_changed=0,
        )
        config = dataclasses.replace(config, **overrides)
        running = await asyncio.wait_for(start(config, mode=Mode(mode)), 5)
        running.server.access_log.stream = io.StringIO()  # read by Proxy.access_lines
        caplog.set_level(logging.INFO, logger="aiohttp.access")  # as `serve` logs
        started.append(running)
        return Proxy(running, cache)

    yield make
    for running in started:
        await asyncio.wait_for(running.stop(), 10)
    records = caplog.get_records("setup") + caplog.get_records("call") + caplog.records
    crashes = [r for r in records if _unexpected(r)]
    assert not crashes, "\n".join(
        f"{r.name}: {r.getMessage()} {r.exc_info[1]!r}" if r.exc_info else r.getMessage()
        for r in crashes
    )


@pytest.fixture
async def proxy(make_proxy: Callable[..., Awaitable[Proxy]]) -> Proxy:
    return await make_proxy()


def networks(*nets: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(n) for n in nets)


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[int]:
    """``app`` served on a free loopback port (yielded) until the block ends: a test's own
    small origin."""
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    finally:
        await asyncio.wait_for(runner.cleanup(), 5)


# --- raw sockets -----------------------------------------------------------------------------


def _complete(buf: bytes) -> bool:
    """A whole response with a Content-Length has arrived."""
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
    return match is not None and len(body) >= int(match.group(1))


async def raw_exchange(port: int, data: bytes, *, timeout: float = 5.0) -> bytes:
    """Send bytes on a new connection and read one response: until a Content-Length body is
    complete or the proxy closes the connection (or the timeout: then whatever arrived)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(data)
        await writer.drain()
        chunks = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), left)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if _complete(b"".join(chunks)):
                break
        return b"".join(chunks)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await asyncio.wait_for(writer.wait_closed(), 1)


async def read_response(reader: asyncio.StreamReader, timeout: float = 5.0) -> Reply:
    """Read one Content-Length or chunked HTTP/1.1 response off a raw connection."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode("latin-1").split("\r\n")
    _, status, reason = (lines[0].split(" ", 2) + [""])[:3]
    headers = [tuple(line.split(": ", 1)) for line in lines[1:] if line]
    reply = Reply(int(status), reason, headers, b"")  # type: ignore[arg-type]
    if reply.header("Content-Length") is not None:
        reply.body = await asyncio.wait_for(
            reader.readexactly(int(reply.header("Content-Length") or 0)), timeout
        )
    elif (reply.header("Transfer-Encoding") or "").lower() == "chunked":
        parts = []
        while True:
            size = int((await asyncio.wait_for(reader.readline(), timeout)).split(b";")[0], 16)
            data = await asyncio.wait_for(reader.readexactly(size + 2), timeout)
            if size == 0:
                break
            parts.append(data[:-2])
        reply.body = b"".join(parts)
    return reply


# --- TLS origin for CONNECT ------------------------------------------------------------------


@dataclass
class TLSOrigin:
    port: int
    client_context: ssl.SSLContext
    #: its CA as a PEM file (for the proxy's ``upstream_ca``)
    ca_pem: Path
    hits: Counter[str] = field(default_factory=Counter)

    def url(self, path: str, host: str = "localhost") -> str:
        return f"https://{host}:{self.port}{path}"


@pytest.fixture
async def tls_origin(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TLSOrigin]:
    ca = trustme.CA()
    ca_pem = tmp_path_factory.mktemp("origin-ca") / "origin-ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    hits: Counter[str] = Counter()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)

    async def hello(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        hits[request.path] += 1
        if request.path == "/style.css":
            return web.Response(text="p { color: rgb(1, 2, 3) }", content_type="text/css")
        if request.path == "/ws":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            async for message in ws:
                await ws.send_str(f"echo {message.data}")
            return ws
        return web.Response(text=f"secret {request.method} {request.path} {body.decode()}")

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", hello)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    try:
        yield TLSOrigin(port, client_ctx, ca_pem, hits)
    finally:
        await asyncio.wait_for(runner.cleanup(), 5)


async def wait_until(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``check`` (for work the proxy finishes after answering)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if check():
            return True
        await asyncio.sleep(0.02)
    return check()


# --- a hand-written origin, for responses aiohttp would not send ------------------------------


@dataclass
class RawOrigin:
    """Answers every request with the same bytes (then closes, unless told to keep open); an
    answer given in parts is written part by part, a moment apart."""

    port: int
    requests: list[bytes]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
async def raw_origin() -> AsyncIterator[Callable[..., Awaitable[RawOrigin]]]:
    servers: list[asyncio.base_events.Server] = []

    async def make(answer: bytes | list[bytes], *, close: bool = True) -> RawOrigin:
        requests: list[bytes] = []
        parts = [answer] if isinstance(answer, bytes) else answer

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                requests.append(head)
                for i, part in enumerate(parts):
                    if i:
                        await asyncio.sleep(0.05)
                    writer.write(part)
                    await writer.drain()
                if not close:
                    await asyncio.wait_for(reader.read(), 5)
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        return RawOrigin(server.sockets[0].getsockname()[1], requests)

    yield make
    for server in servers:
        server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2)


async def offline_with_copy(make_proxy, origin, path: str = "/page.html", **config):  # noqa: ANN001, ANN003, ANN201
    """A proxy (``config``: Config fields) that recorded ``path`` of the origin and is now
    offline: (proxy, url)."""
    proxy = await make_proxy(**config)
    url = origin.url(path)
    await proxy.get(url)
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    return proxy, url
