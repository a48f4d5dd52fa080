"""The fast front and aiohttp's path give the same bytes on the wire.

Each request is sent twice on real sockets: to the proxy's port (the fast front, which answers
it or hands it to aiohttp) and to a second port where aiohttp's request handler of the same
proxy reads every request.  The answers, the moment aside (Date, Age), must be byte for byte
the same, and the connection closed (or kept) alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import re
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace

import pytest

from wwwproxy.http import ranges as ranges_module
from wwwproxy.http.modify_html import ModifyHTMLRule
from wwwproxy.proxy import front as front_module
from wwwproxy.proxy import replay as replay_module
from wwwproxy.proxy.replay import ToAiohttp
from wwwproxy.recording.engine import PSEUDONYM

from .conftest import Proxy, offline_with_copy

#: how long a connection that sent all it will is watched for more (or its close)
QUIET = 0.5
#: a rule that changes the page (its scripts off)
SCRIPTS_OFF = (ModifyHTMLRule("/page", re.compile("/page"), disable_scripts=True),)
AUTH = {"Authorization": "Basic YWxpY2U6c2VjcmV0"}
COOKIE_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSet-Cookie: a=b\r\n\r\nok"
#: a copy to cut ranges from: 200 bytes, a strong ETag, fresh for an hour
RANGED_BODY = b"0123456789" * 20
RANGED_ANSWER = (
    b'HTTP/1.1 200 OK\r\nContent-Length: 200\r\nContent-Type: text/plain\r\nETag: "r1"\r\n'
    b"Cache-Control: max-age=3600\r\n\r\n" + RANGED_BODY
)
#: multipart/byteranges boundaries made alike on both ways (a random one by default)
FIXED_BOUNDARY = SimpleNamespace(token_hex=lambda _: "b" * 32)


async def exchange(port: int, data: bytes) -> tuple[bytes, bool]:
    """Send ``data`` on a new connection; everything answered, and whether the proxy closed
    the connection (an end of input within QUIET of the last byte)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    return await exchange_on(reader, writer, data)


async def exchange_on(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> tuple[bytes, bool]:
    """Send ``data`` on an open connection, as :func:`exchange`."""
    chunks, closed = [], False
    try:
        writer.write(data)
        await writer.drain()
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), QUIET)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            chunks.append(chunk)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await asyncio.wait_for(writer.wait_closed(), 1)
    return b"".join(chunks), closed


def moment_aside(answer: bytes) -> bytes:
    """The answer with the values that depend on the moment blanked."""
    return re.sub(rb"(?im)^(date|age): [^\r\n]*", rb"\1: -", answer)


@pytest.fixture
async def aiohttp_port(make_proxy) -> AsyncIterator[Callable[[Proxy], asyncio.Future[int]]]:  # noqa: ANN001
    """A port where aiohttp's request handler of a proxy reads every request."""
    servers: list[asyncio.Server] = []

    async def listen(proxy: Proxy) -> int:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(proxy.running.runner.server, "127.0.0.1", 0)
        servers.append(server)
        return server.sockets[0].getsockname()[1]

    yield listen  # type: ignore[misc]
    for server in servers:
        server.close()


async def both_ways(proxy: Proxy, direct: int, data: bytes) -> tuple[tuple[bytes, bool], ...]:
    """(the fast front's answer and close, aiohttp's), the moment aside."""
    fast, fast_closed = await exchange(proxy.port, data)
    slow, slow_closed = await exchange(direct, data)
    return (moment_aside(fast), fast_closed), (moment_aside(slow), slow_closed)


# --- keep-alive and close ---------------------------------------------------------------------

CONNECTION_CASES = [
    # (about, the request lines after the request line, its version, closed after it)
    ("HTTP/1.1", "Host: x", "1.1", False),
    ("HTTP/1.1, Connection: close", "Host: x\r\nConnection: close", "1.1", True),
    ("HTTP/1.1, Connection: Close", "Host: x\r\nConnection: Close", "1.1", True),
    ("HTTP/1.1, close in a list", "Host: x\r\nConnection: keep-alive, close", "1.1", True),
    ("HTTP/1.0", "Host: x", "1.0", True),
    ("HTTP/1.0, Connection: keep-alive", "Host: x\r\nConnection: keep-alive", "1.0", False),
]


@pytest.mark.parametrize(
    ("lines", "version", "closed"),
    [c[1:] for c in CONNECTION_CASES],
    ids=[c[0] for c in CONNECTION_CASES],
)
async def test_a_memory_hit_keeps_or_closes_the_connection_as_aiohttp(
    make_proxy, origin, aiohttp_port, lines: str, version: str, closed: bool
):
    """A memory hit answered by the fast front keeps the connection open, or closes it, as
    aiohttp's path does for the same request; bytes pipelined after a request that closes
    the connection are refused by aiohttp (400, its parser's rule), so the fast front leaves
    them to it."""
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)  # into memory
    direct = await aiohttp_port(proxy)
    request = f"GET {url} HTTP/{version}\r\n{lines}\r\n\r\n".encode()
    pipelined = request + f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    front = proxy.running.front
    for data, answers in ((request, 1), (pipelined, 0 if closed else 2)):
        before, handed = front.answered, front.handed[ToAiohttp.AFTER_CLOSE]
        fast, slow = await both_ways(proxy, direct, data)
        assert fast == slow
        assert fast[1] == closed
        assert front.answered == before + answers
        assert fast[0].count(b" 200 OK\r\n") == answers, fast[0]
        if not answers:  # aiohttp's path refuses bytes after a close: the fast front too
            assert fast[0].startswith(b"HTTP/1.0 400 "), fast[0]
            assert front.handed[ToAiohttp.AFTER_CLOSE] == handed + 1


H2C = "Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAA"
#: (about, the first request's method, its lines after the request line, its body)
UPGRADE_CASES = [
    ("h2c", "GET", f"Host: x\r\n{H2C}", ""),
    ("h2c, the head in two writes", "GET", f"Host: x\r\n{H2C}", None),
    ("h2c with a body", "POST", f"Host: x\r\n{H2C}\r\nContent-Length: 3", "abc"),
    (
        "h2c with a chunked body",
        "POST",
        f"Host: x\r\n{H2C}\r\nTransfer-Encoding: chunked",
        "3\r\nabc\r\n0\r\n\r\n",
    ),
    ("another protocol", "GET", "Host: x\r\nUpgrade: foo/2\r\nConnection: upgrade", ""),
    ("Upgrade not named in Connection", "GET", "Host: x\r\nUpgrade: h2c", ""),
]


@pytest.mark.parametrize(
    ("method", "lines", "body"), [c[1:] for c in UPGRADE_CASES], ids=[c[0] for c in UPGRADE_CASES]
)
async def test_an_upgrade_other_than_websocket_is_ignored_on_both_paths(
    make_proxy, origin, aiohttp_port, method: str, lines: str, body: str | None
):
    """An ``Upgrade`` the proxy does not take (anything but a WebSocket) is ignored, as RFC
    9110 §7.8 allows: the request is answered as a plain one and the connection goes on, so
    a request pipelined after it is answered too, with the same bytes on both paths."""
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)  # into memory
    direct = await aiohttp_port(proxy)
    first = f"{method} {url} HTTP/1.1\r\n{lines}\r\n\r\n{body or ''}".encode()
    second = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    if body is None:  # the head's end in the second write: what the parser must join
        answers = []
        for port in (proxy.port, direct):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(first[:-1])
            await writer.drain()
            await asyncio.sleep(0.05)
            answer, closed = await exchange_on(reader, writer, first[-1:] + second)
            answers.append((moment_aside(answer), closed))
        fast, slow = answers
    else:
        fast, slow = await both_ways(proxy, direct, first + second)
    assert fast == slow
    assert fast[0].count(b"HTTP/1.1 ") == 2, fast[0]  # both requests answered
    assert fast[0].rsplit(b"HTTP/1.1 ", 1)[1].startswith(b"200 OK\r\n"), fast[0]
    assert not fast[1]  # and the connection kept


# --- every reason the fast front leaves a request to aiohttp ----------------------------------


@dataclasses.dataclass
class Setting:
    """What one case needs beyond the offline proxy: its URLs, and ways to change it."""

    proxy: Proxy
    monkeypatch: pytest.MonkeyPatch
    urls: dict[str, str]

    def reload(self, **changes: object) -> None:
        services = self.proxy.running.services
        services.reload(dataclasses.replace(services.config, **changes))


def _get(url: str, *lines: str, version: str = "1.1", method: str = "GET") -> bytes:
    head = "".join(f"{line}\r\n" for line in ("Host: x", *lines, "Connection: close"))
    return f"{method} {url} HTTP/{version}\r\n{head}\r\n".encode()


def _failing(*args: object, **kwargs: object) -> object:
    raise RuntimeError("a test's fault in the fast path")


#: (the reason, or None for the fast answer; the request; what the case changes first)
REASON_CASES: list[tuple[ToAiohttp | None, Callable[[Setting], bytes]]] = [
    (None, lambda s: _get(s.urls["page"])),
    (
        ToAiohttp.CLIENT,
        lambda s: (
            s.reload(allowed_clients=(ipaddress.ip_network("192.0.2.0/24"),)),
            _get(s.urls["page"]),
        )[1],
    ),
    (ToAiohttp.NOT_PLAIN_GET, lambda s: _get(s.urls["page"], method="HEAD")),
    (ToAiohttp.HEAD_TOO_LONG, lambda s: _get(s.urls["page"], "X-Pad: " + "p" * 17000)),
    (
        ToAiohttp.BARE_LINE_FEEDS,
        lambda s: f"GET {s.urls['page']} HTTP/1.1\nHost: x\nConnection: close\n\n".encode(),
    ),
    (ToAiohttp.MALFORMED, lambda s: _get(s.urls["page"], "Ho st: x")),
    (ToAiohttp.VERSION, lambda s: _get(s.urls["page"], version="2.0")),
    (ToAiohttp.UPGRADE, lambda s: _get(s.urls["page"], "Upgrade: something")),
    (ToAiohttp.BODY, lambda s: _get(s.urls["page"], "Content-Length: 0")),
    (ToAiohttp.EXPECT, lambda s: _get(s.urls["page"], "Expect: 100-continue")),
    (ToAiohttp.PROXY_AUTHORIZATION, lambda s: _get(s.urls["page"], "Proxy-Authorization: a")),
    (ToAiohttp.LOOP, lambda s: _get(s.urls["page"], f"Via: 1.1 {PSEUDONYM}")),
    (ToAiohttp.AFTER_CLOSE, lambda s: _get(s.urls["page"]) * 2),
    (ToAiohttp.TARGET, lambda s: _get("http://[zz]/")),
    (ToAiohttp.NOT_CACHED, lambda s: _get(s.urls["never"])),
    (
        ToAiohttp.NOT_IN_MEMORY,
        lambda s: (
            s.monkeypatch.setattr(front_module, "MAX_OBJECT", 10),
            s.monkeypatch.setattr(s.proxy.store.memory, "max_object", 10),
            s.proxy.store.memory.clear(),
            _get(s.urls["page"]),
        )[3],
    ),
    (
        ToAiohttp.MODIFY_HTML,
        lambda s: (s.reload(modify_html=SCRIPTS_OFF), _get(s.urls["page"]))[1],
    ),
    (
        ToAiohttp.BACKLOG,
        lambda s: (
            s.monkeypatch.setattr(replay_module, "MAX_BUFFERED", -1),
            _get(s.urls["page"]),
        )[1],
    ),
    (ToAiohttp.CREDENTIALS, lambda s: _get(s.urls["echo"])),
    (
        ToAiohttp.SET_COOKIE,
        lambda s: (s.reload(replay_set_cookie=True), _get(s.urls["cookie"]))[1],
    ),
    (ToAiohttp.POLICY, lambda s: _get(s.urls["page"], "Cache-Control: no-cache")),
    (ToAiohttp.DECODE, lambda s: _get(s.urls["gzip"], "Accept: */*", "Accept-Encoding: x")),
    (
        ToAiohttp.MULTIPART,
        lambda s: (
            s.monkeypatch.setattr(ranges_module, "secrets", FIXED_BOUNDARY),
            _get(s.urls["ranged"], "Range: bytes=0-1,150-159"),
        )[1],
    ),
    (
        ToAiohttp.FAILED,
        lambda s: (
            s.monkeypatch.setattr(front_module, "plan_fast_answer", _failing),
            _get(s.urls["page"]),
        )[1],
    ),
]


def test_the_table_has_every_reason() -> None:
    assert {why for why, _ in REASON_CASES} == {*ToAiohttp, None}


async def test_every_reason_gives_the_bytes_aiohttp_gives(
    make_proxy, origin, raw_origin, aiohttp_port, monkeypatch, caplog
):
    """Each reason the fast front has to hand a request to aiohttp, met on the wire: the
    fast front hands it on (counted under that reason), and the answer is aiohttp's, byte
    for byte, as is the fast answer of a plain memory hit."""
    cookie_origin = await raw_origin(COOKIE_ANSWER)
    ranged_origin = await raw_origin(RANGED_ANSWER)
    proxy = await make_proxy()
    urls = {
        "page": origin.url("/page.html"),
        "gzip": origin.url("/gzip"),
        "echo": origin.url("/echo"),
        "cookie": cookie_origin.url("/cookie"),
        "ranged": ranged_origin.url("/ranged"),
        "never": origin.url("/never"),
    }
    for name in ("page", "gzip", "echo", "cookie", "ranged"):
        await proxy.get(urls[name], headers=AUTH if name == "echo" else None)
        await proxy.recorded(urls[name])
    await proxy.control(mode="offline")
    for name in ("page", "gzip", "cookie", "ranged"):
        await proxy.get(urls[name])  # into memory
    await proxy.get(urls["echo"], headers=AUTH)
    direct = await aiohttp_port(proxy)
    front = proxy.running.front
    services = proxy.running.services
    config = services.config
    for why, make in REASON_CASES:
        with monkeypatch.context() as patch:
            request = make(Setting(proxy, patch, urls))
            answered, handed = front.answered, front.handed[why] if why else 0
            fast, slow = await both_ways(proxy, direct, request)
            if why is ToAiohttp.FAILED:
                caplog.clear()  # the fault logged on purpose
        services.reload(config)
        assert fast == slow, why
        assert fast[0].startswith(b"HTTP/1."), (why, fast)
        if why is None:
            assert front.answered == answered + 1
        else:
            assert (front.answered, front.handed[why]) == (answered, handed + 1), why


# --- ranges -----------------------------------------------------------------------------------

#: (about, the request's lines, the status, the body, its Content-Range: "multipart" for
#: parts, which aiohttp's path answers, None for none)
RANGE_CASES: list[tuple[str, tuple[str, ...], int, bytes, str | None]] = [
    ("no Range", (), 200, RANGED_BODY, None),
    ("bytes=0-", ("Range: bytes=0-",), 206, RANGED_BODY, "0-199/200"),
    ("bytes=0-1", ("Range: bytes=0-1",), 206, b"01", "0-1/200"),
    ("bytes=5-", ("Range: bytes=5-",), 206, RANGED_BODY[5:], "5-199/200"),
    ("bytes=-3", ("Range: bytes=-3",), 206, b"789", "197-199/200"),
    ("past the end", ("Range: bytes=190-999",), 206, b"0123456789", "190-199/200"),
    (
        "two ranges",
        ("Range: bytes=0-1,150-159",),
        206,
        b"\r\n--" + b"b" * 32 + b"--\r\n",
        "multipart",
    ),
    ("unsatisfiable", ("Range: bytes=200-",), 416, b"", "*/200"),
    ("If-Range matching", ('If-Range: "r1"', "Range: bytes=0-1"), 206, b"01", "0-1/200"),
    ("If-Range not matching", ('If-Range: "r0"', "Range: bytes=0-1"), 200, RANGED_BODY, None),
    ("If-Range weak", ('If-Range: W/"r1"', "Range: bytes=0-1"), 200, RANGED_BODY, None),
    ("a unit other than bytes", ("Range: items=0-1",), 200, RANGED_BODY, None),
    ("304 before the range", ('If-None-Match: "r1"', "Range: bytes=0-1"), 304, b"", None),
    ("If-Range alone", ('If-Range: "r1"',), 200, RANGED_BODY, None),
]


@pytest.mark.parametrize("mode", ["online", "offline"])
async def test_ranges_give_the_bytes_aiohttp_gives(
    make_proxy, raw_origin, aiohttp_port, monkeypatch, mode: str
):
    """A memory copy's ranges, online (fresh) and offline: the fast front answers a single
    range, a 416 and the whole copy itself, multipart ranges are aiohttp's, and the bytes
    are aiohttp's either way; a 206 carries only its range, a 304 no range at all."""
    monkeypatch.setattr(ranges_module, "secrets", FIXED_BOUNDARY)
    ranged_origin = await raw_origin(RANGED_ANSWER)
    proxy = await make_proxy()
    url = ranged_origin.url("/ranged")
    await proxy.get(url)
    await proxy.recorded(url)
    await proxy.control(mode=mode)
    await proxy.get(url)  # into memory
    direct = await aiohttp_port(proxy)
    front = proxy.running.front
    for about, lines, status, body, content_range in RANGE_CASES:
        answered = front.answered
        (answer, closed), slow = await both_ways(proxy, direct, _get(url, *lines))
        assert (answer, closed) == slow, about
        head, _, got = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 %d " % status), (about, head)
        headers = head.decode("latin-1").lower().split("\r\n")
        fast = content_range != "multipart"
        assert front.answered == answered + fast, about
        if fast:
            assert got == body, about
            assert f"content-length: {len(body)}" in headers or status == 304, about
            ranged = [h for h in headers if h.startswith("content-range:")]
            assert ranged == ([f"content-range: bytes {content_range}"] if content_range else [])
        else:
            assert got.endswith(body), about
        ranges_said = "accept-ranges: bytes" in headers
        assert ranges_said == (status != 304), about  # nothing of ranges in a 304
    multipart = (await proxy.raw(_get(url, "Range: bytes=0-1,150-159"))).decode("latin-1")
    assert "multipart/byteranges; boundary=" + "b" * 32 in multipart
    assert "Content-Range: bytes 0-1/200\r\n\r\n01\r\n" in multipart
    assert "Content-Range: bytes 150-159/200\r\n\r\n0123456789\r\n" in multipart
