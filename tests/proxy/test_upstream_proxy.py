"""Through an upstream proxy, over real sockets: a small forward proxy written here (plain
asyncio, so it sees and counts the bytes it is sent: absolute-form requests and CONNECTs,
with their Proxy-Authorization) between wwwproxy and the origin."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
import pytest

from .conftest import TIMEOUT, raw_exchange, read_response, wait_until
from .test_intercept import _trust_after_first, fetch

SECRET = "s3cret-pw"
AUTH = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
BODY_LIMIT = 1 << 20


@dataclass
class Asked:
    method: str
    target: str
    headers: dict[str, str]


@dataclass
class ForwardProxy:
    """An HTTP forward proxy: absolute-form requests are sent on to the origin (one per
    connection) and CONNECT opens a tunnel.  ``required``: the Proxy-Authorization it wants
    (else 407)."""

    required: str | None = None
    asked: list[Asked] = field(default_factory=list)
    port: int = 0
    server: asyncio.base_events.Server | None = None
    tasks: set[asyncio.Task] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def targets(self, method: str | None = None) -> list[str]:
        return [a.target for a in self.asked if method is None or a.method == method]

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if line)
            self.asked.append(Asked(method, target, headers))
            if self.required is not None and headers.get("Proxy-Authorization") != self.required:
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 4\r\n'
                    b"Connection: close\r\n\r\nauth"
                )
                await writer.drain()
                return
            if method == "CONNECT":
                await self.tunnel(target, reader, writer)
            else:
                await self.forward(method, target, headers, reader, writer)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
            pass
        finally:
            writer.close()

    async def forward(self, method, target, headers, reader, writer) -> None:  # noqa: ANN001
        parts = urlsplit(target)
        assert parts.scheme == "http", target  # absolute-form, as a proxy is sent
        body = b""
        if "Content-Length" in headers:
            body = await reader.readexactly(int(headers["Content-Length"]))
        upgrade = "Upgrade" in headers  # a WebSocket: keep its Connection: Upgrade
        dropped = {"proxy-authorization", "proxy-connection", *(() if upgrade else ("connection",))}
        kept = {k: v for k, v in headers.items() if k.lower() not in dropped}
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        out = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept.items())
        out += "\r\n" if upgrade else "Connection: close\r\n\r\n"
        up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port)
        up_writer.write(out.encode("latin-1") + body)
        await splice(reader, writer, up_reader, up_writer)

    async def tunnel(self, target: str, reader, writer) -> None:  # noqa: ANN001
        host, port = target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await splice(reader, writer, up_reader, up_writer)


async def splice(reader, writer, up_reader, up_writer) -> None:  # noqa: ANN001
    """Bytes both ways until both sides are done (bounded in time)."""

    async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
        with contextlib.suppress(OSError):
            dst.write_eof()

    try:
        await asyncio.wait_for(asyncio.gather(pump(reader, up_writer), pump(up_reader, writer)), 10)
    finally:
        up_writer.close()


@pytest.fixture
async def upstream() -> AsyncIterator[ForwardProxy]:
    proxy = ForwardProxy(required=AUTH)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def with_credentials(forward: ForwardProxy) -> str:
    return f"http://alice:{SECRET}@127.0.0.1:{forward.port}"


async def test_plain_http_goes_through_it_and_records_the_origin(
    make_proxy, origin, upstream, clean_environment, caplog
) -> None:
    proxy = await make_proxy(upstream_proxy=with_credentials(upstream))
    url = origin.url("/page.html")
    reply = await proxy.get(url)
    assert reply.status == 200 and reply.body == origin.HTML
    # the upstream proxy was asked, in absolute form, with its credentials
    assert upstream.targets("GET") == [url]
    assert upstream.asked[0].headers["Proxy-Authorization"] == AUTH
    # the origin never saw them
    seen = origin.last("/page.html")
    assert seen.header("Proxy-Authorization") is None
    # the archive holds the origin's exchange: its URL, no Proxy-Authorization
    records = await proxy.recorded(url)
    assert [r.target_uri for r in records] == [url, url]
    assert all(
        SECRET not in repr(r.http_headers) and AUTH not in repr(r.http_headers) for r in records
    )
    request = next(r for r in records if r.rec_type == "request")
    assert not any(n.lower() == "proxy-authorization" for n, _ in request.http_headers)
    assert SECRET not in caplog.text and SECRET not in "\n".join(proxy.access_lines())


async def test_no_proxy_hosts_go_direct(make_proxy, origin, upstream, clean_environment) -> None:
    proxy = await make_proxy(upstream_proxy=with_credentials(upstream), no_proxy=("127.0.0.1",))
    direct = await proxy.get(origin.url("/page.html"))
    assert direct.status == 200 and upstream.asked == []
    # another name of the same origin is not in no_proxy: through the proxy
    via = f"http://localhost:{origin.port}/image.png"
    reply = await proxy.get(via)
    assert reply.status == 200 and reply.body == origin.IMAGE
    assert upstream.targets() == [via]


async def test_local_net_hosts_go_direct(make_proxy, origin, upstream, clean_environment):
    """local_net (WWWOFFLE's LocalNet): fetched directly, plain and tunnelled, never through
    the upstream proxy (and never recorded)."""
    proxy = await make_proxy(
        upstream_proxy=with_credentials(upstream),
        local_net=("127.0.0.1",),
        connect_ports=(origin.port,),
    )
    direct = await proxy.get(origin.url("/page.html"))
    assert (direct.status, direct.body) == (200, origin.HTML)
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200"), head
    finally:
        writer.close()
    assert upstream.asked == []
    # a host outside local_net still goes through it
    via = f"http://localhost:{origin.port}/image.png"
    assert (await proxy.get(via)).status == 200
    assert upstream.targets() == [via]


async def test_connect_tunnel_goes_through_it(make_proxy, origin, upstream, clean_environment):
    proxy = await make_proxy(
        upstream_proxy=with_credentials(upstream), connect_ports=(origin.port,)
    )
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200"), head
        # in the tunnel: whatever the browser speaks (here plain HTTP) reaches the origin
        writer.write(f"GET /page.html HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n\r\n".encode())
        reply = await read_response(reader)
        assert reply.status == 200 and reply.body == origin.HTML
    finally:
        writer.close()
    assert upstream.targets("CONNECT") == [f"127.0.0.1:{origin.port}"]
    assert upstream.asked[0].headers["Proxy-Authorization"] == AUTH
    assert origin.last("/page.html").header("Proxy-Authorization") is None


async def test_intercepted_https_goes_through_it(
    make_proxy, tls_origin, upstream, clean_environment
) -> None:
    proxy = await make_proxy(
        upstream_proxy=with_credentials(upstream),
        https_intercept=("*",),
        upstream_ca=tls_origin.ca_pem,
        connect_ports=(tls_origin.port,),
    )
    url = tls_origin.url("/secure")
    status, _, body = await fetch(proxy, url, _trust_after_first(proxy))
    assert status == 200 and body == b"secret GET /secure "
    assert upstream.targets("CONNECT") == [f"localhost:{tls_origin.port}"]
    assert upstream.asked[0].headers["Proxy-Authorization"] == AUTH
    records = await proxy.recorded(url)
    assert [r.target_uri for r in records] == [url, url]
    assert not any(AUTH in repr(r.http_headers) for r in records)


async def test_websocket_goes_through_it(make_proxy, origin, upstream, clean_environment):
    proxy = await make_proxy(upstream_proxy=with_credentials(upstream))
    url = origin.url("/ws").replace("http://", "ws://")
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.ws_connect(url, proxy=proxy.url, protocols=("chat",)) as ws:
            await ws.send_str("via the proxy")
            assert (await ws.receive(timeout=5)).data == "echo via the proxy"
    assert upstream.targets("GET") == [origin.url("/ws")]
    assert upstream.asked[0].headers["Proxy-Authorization"] == AUTH
    assert origin.last("/ws").header("Proxy-Authorization") is None


async def test_environment_variables_when_the_key_is_unset(
    make_proxy, origin, clean_environment
) -> None:
    forward = ForwardProxy()  # no credentials asked
    await forward.start()
    try:
        clean_environment.setenv("http_proxy", forward.url)
        clean_environment.setenv("no_proxy", "localhost")
        proxy = await make_proxy()
        through = origin.url("/page.html")
        assert (await proxy.get(through)).status == 200
        assert (await proxy.get(f"http://localhost:{origin.port}/image.png")).status == 200
        assert forward.targets() == [through]  # localhost: direct, by no_proxy
        # `upstream_proxy: direct` ignores the environment
        direct = await make_proxy(upstream_proxy="direct", cache=proxy.cache.parent / "c2")
        assert (await direct.get(origin.url("/image.png"))).status == 200
        assert forward.targets() == [through]
    finally:
        await forward.stop()


async def test_environment_naming_this_proxy_is_ignored(
    make_proxy, origin, clean_environment, caplog
) -> None:
    """A shell that exported http_proxy for its tools, pointing at wwwproxy, then started
    wwwproxy: forwarding to it would loop; requests go direct instead."""
    proxy = await make_proxy()
    clean_environment.setenv("http_proxy", proxy.url)
    caplog.set_level(logging.WARNING, "wwwproxy.recording")
    services = proxy.running.services
    services.reload(dataclasses.replace(services.config))
    assert "is this proxy itself" in caplog.text
    reply = await proxy.get(origin.url("/page.html"))
    assert reply.status == 200 and origin.hits["/page.html"] == 1


async def test_dead_upstream_proxy_is_a_502_naming_it(
    make_proxy, origin, clean_environment
) -> None:
    port = closed_port()
    proxy = await make_proxy(
        upstream_proxy=f"http://alice:{SECRET}@127.0.0.1:{port}", connect_ports=(origin.port,)
    )
    reply = await proxy.get(origin.url("/page.html"))
    assert reply.status == 502
    assert f"upstream proxy 127.0.0.1:{port}" in reply.text
    assert "could not be reached" in reply.text and SECRET not in reply.text
    assert origin.hits["/page.html"] == 0 and proxy.records(origin.url("/page.html")) == []
    # a CONNECT through it likewise
    answer = await raw_exchange(
        proxy.port, f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 502"), answer
    assert f"upstream proxy 127.0.0.1:{port}".encode() in answer


async def test_wrong_credentials_are_a_502_not_a_recorded_page(
    make_proxy, origin, upstream, clean_environment
) -> None:
    proxy = await make_proxy(
        upstream_proxy=f"http://alice:wrong@127.0.0.1:{upstream.port}",
        connect_ports=(origin.port,),
    )
    url = origin.url("/page.html")
    reply = await proxy.get(url)
    assert reply.status == 502 and "asks for credentials (407)" in reply.text
    assert reply.header("Proxy-Authenticate") is None  # the browser is not asked for them
    assert not await wait_until(lambda: bool(proxy.records(url)), 0.3)
    answer = await raw_exchange(
        proxy.port, f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 502") and b"refused the tunnel (407" in answer, answer
    assert origin.hits["/page.html"] == 0


async def test_a_config_edit_takes_effect_at_once(
    make_proxy, origin, upstream, clean_environment, tmp_path
) -> None:
    """Set on /config/ (the file rewritten, the configuration reloaded): the next request goes
    through the upstream proxy; ``direct`` again: it does not."""
    conf = tmp_path / "wwwproxy.yaml"
    conf.write_text("# test\nmode: online\n")
    proxy = await make_proxy(source=str(conf))
    assert (await proxy.get(origin.url("/page.html"))).status == 200 and upstream.asked == []

    async def set_to(value: str) -> None:
        async with proxy.session() as session:
            async with session.post(
                f"{proxy.url}/config/?format=json",
                data={"key": "upstream_proxy", "value": value},
                headers={"X-Wwwproxy-Request": "1"},
            ) as resp:
                assert resp.status == 200, await resp.text()

    await set_to(with_credentials(upstream))
    assert f"upstream_proxy: {with_credentials(upstream)}" in conf.read_text()
    assert (await proxy.get(origin.url("/image.png"))).status == 200
    assert upstream.targets() == [origin.url("/image.png")]
    await set_to("direct")
    assert (await proxy.get(origin.url("/counted"))).status == 200
    assert upstream.targets() == [origin.url("/image.png")]


async def test_config_page_never_shows_the_credentials(
    make_proxy, upstream, clean_environment, tmp_path
) -> None:
    conf = tmp_path / "wwwproxy.yaml"
    conf.write_text(f"upstream_proxy: {with_credentials(upstream)}\nno_proxy: ['*.lan']\n")
    proxy = await make_proxy(
        upstream_proxy=with_credentials(upstream), no_proxy=("*.lan",), source=str(conf)
    )
    async with proxy.session() as session:
        async with session.get(f"{proxy.url}/config/?format=json") as resp:
            data = await resp.json()
        async with session.get(f"{proxy.url}/config/") as resp:
            page = await resp.text()
    assert data["effective"]["upstream_proxy"] == f"http://***@127.0.0.1:{upstream.port}"
    assert data["effective"]["no_proxy"] == ["*.lan"]
    assert data["file"]["upstream_proxy"] == ""
    assert SECRET not in page and SECRET not in str(data)
    assert f"http://***@127.0.0.1:{upstream.port}" in page
