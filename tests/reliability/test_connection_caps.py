"""Connection caps (issue 12, floods): one client address, and all clients together, hold at
most ``max_client_connections`` / ``max_connections`` connections; one over a cap is answered
503 and closed, and other clients are served meanwhile.  And 500 clients against an origin that
never answers, in a ``wwwproxy serve`` with systemd's default open-files limit: every client
gets a clean answer (504, or 503 from the cap the limit leaves room for), no descriptor runs out,
no traceback, and normal requests are served afterwards.

Clients come from different loopback addresses (127.0.0.0/8 is all local on Linux) so that a
flood from one address and a browser at another can be told apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import resource
from pathlib import Path

import pytest

from .test_fd_limits import listening, open_files, serving

BOUND = 15.0
FLOOD = 1_000


async def connect(port: int, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), BOUND
    )


async def answer(reader: asyncio.StreamReader) -> tuple[int, bytes, bytes]:
    """Status, head and body of one answer (Content-Length framed)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)
    status = int(head.split(b" ", 2)[1])
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    assert length, head
    body = await asyncio.wait_for(reader.readexactly(int(length.group(1))), BOUND)
    return status, head, body


async def get(port: int, source: str, url: str) -> tuple[int, bytes, bytes]:
    reader, writer = await connect(port, source)
    try:
        writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return await answer(reader)
    finally:
        writer.close()


async def stall(port: int, source: str, url: str) -> asyncio.StreamWriter:
    """A connection left in the middle of a request head."""
    _, writer = await connect(port, source)
    writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\nUser-Agent: slo".encode())
    await writer.drain()
    return writer


async def refused(port: int, source: str) -> bytes:
    """What a connection that should be over a cap is told before it is closed."""
    reader, writer = await connect(port, source)
    try:
        return await asyncio.wait_for(reader.read(), BOUND)
    finally:
        writer.close()


async def test_one_address_over_its_cap_is_refused_and_others_are_served(make_proxy, origin):
    proxy = await make_proxy(max_client_connections=20, request_changed=600)
    page = origin.url("/page.html")
    held = [await stall(proxy.port, "127.0.0.1", page) for _ in range(20)]
    try:
        told = await refused(proxy.port, "127.0.0.1")
        assert told.startswith(b"HTTP/1.1 503 "), told
        assert b"Retry-After: 5" in told and b"max_client_connections: 20" in told
        # another address is served: a miss, then a hit from memory
        assert (await get(proxy.port, "127.0.0.2", page))[0] == 200
        await proxy.recorded(page)
        status, head, body = await get(proxy.port, "127.0.0.2", page)
        assert (status, body) == (200, origin.HTML) and b"X-Cache: HIT" in head
        # once some of the flood's connections end, the address gets in again
        for writer in held[:5]:
            writer.transport.abort()
        del held[:5]
        await proxy.wait_until(lambda: len(proxy.running.front.connections) <= 15, BOUND)
        assert (await get(proxy.port, "127.0.0.1", page))[0] == 200
    finally:
        for writer in held:
            writer.transport.abort()
    assert origin.hits["/page.html"] == 1


async def test_the_total_cap_counts_every_address(make_proxy, origin):
    proxy = await make_proxy(max_connections=30, max_client_connections=0, request_changed=600)
    page = origin.url("/page.html")
    held = [await stall(proxy.port, f"127.0.3.{i + 1}", page) for i in range(30)]
    try:
        told = await refused(proxy.port, "127.0.0.2")
        assert told.startswith(b"HTTP/1.1 503 ") and b"max_connections: 30" in told, told
    finally:
        for writer in held:
            writer.transport.abort()
    await proxy.wait_until(lambda: not proxy.running.front.connections, BOUND)
    assert (await get(proxy.port, "127.0.0.2", page))[0] == 200
    assert origin.hits["/page.html"] == 1


async def test_connections_handed_to_aiohttp_count_until_they_close(make_proxy, origin):
    """A miss goes through aiohttp's handler: its keep-alive connection still counts, and
    stops counting once closed (the caps see it closing; nothing leaks)."""
    proxy = await make_proxy(max_client_connections=10)
    kept: list[asyncio.StreamWriter] = []
    try:
        for i in range(10):
            reader, writer = await connect(proxy.port, "127.0.0.1")
            kept.append(writer)
            writer.write(f"GET {origin.url(f'/echo?{i}')} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert (await answer(reader))[0] == 200
        told = await refused(proxy.port, "127.0.0.1")
        assert told.startswith(b"HTTP/1.1 503 "), told
    finally:
        for writer in kept:
            writer.close()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOUND
    while True:  # closed by the client: the proxy sees the end and lets the address in again
        status = (await get(proxy.port, "127.0.0.1", origin.url("/page.html")))[0]
        if status == 200 or loop.time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert status == 200


async def test_a_thousand_stalled_connections_from_one_address(make_proxy, origin, caplog):
    """The slowloris flood of the issue: 1,000 half-sent heads from one address.  The proxy holds
    at most the per-client cap of them, refuses the rest at once with one log line, and a
    browser at another address is served meanwhile."""
    proxy = await make_proxy(request_changed=600)
    cap = proxy.running.services.config.max_client_connections
    assert 0 < cap < FLOOD
    hot = origin.url("/page.html")
    assert (await get(proxy.port, "127.0.0.2", hot))[0] == 200
    await proxy.recorded(hot)
    held: list[asyncio.StreamWriter] = []
    answers: list[bytes] = []
    try:
        for _ in range(FLOOD):
            reader, writer = await connect(proxy.port, "127.0.0.1")
            writer.write(f"GET {hot} HTTP/1.1\r\nHost: x\r\nUser-Agent: slo".encode())
            held.append(writer)
            if len(held) > cap:
                answers.append(await asyncio.wait_for(reader.read(), BOUND))
        assert len(answers) == FLOOD - cap
        assert all(a.startswith(b"HTTP/1.1 503 ") for a in answers)
        assert len(proxy.running.front.connections) <= cap

        status, head, body = await get(proxy.port, "127.0.0.2", hot)
        assert (status, body) == (200, origin.HTML) and b"X-Cache: HIT" in head
        miss = await get(proxy.port, "127.0.0.2", origin.url("/image.png"))
        assert (miss[0], miss[2]) == (200, origin.IMAGE)
    finally:
        for writer in held:
            writer.transport.abort()
    warnings = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert origin.hits["/page.html"] == 1


# --- 500 clients against an origin that never answers ------------------------------------------


class SilentOrigin:
    """Accepts connections and reads requests, and never answers (until stopped)."""

    def __init__(self) -> None:
        self.requests = 0
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        with contextlib.suppress(Exception):
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            await reader.read()  # until the proxy gives up and closes

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=1024)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()


CLIENTS = 500
#: systemd's default for a service without LimitNOFILE: soft and hard, so serve cannot raise it
PROXY_NOFILE = 1024


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc")
async def test_five_hundred_clients_against_a_silent_origin(tmp_path, origin):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # this process holds both ends of the flood: a client and an origin socket per client
    needed = 3 * CLIENTS + 200
    if soft < needed:
        assert hard == resource.RLIM_INFINITY or hard >= needed, (
            f"this test needs {needed} open files in the test process (hard limit {hard})"
        )
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    silent = SilentOrigin()
    silent_port = await silent.start()
    peak_files = 0
    settings = "read_timeout: 2\nconnect_timeout: 2\n"  # the connection caps as shipped
    try:
        with serving(tmp_path, "uvloop", PROXY_NOFILE, PROXY_NOFILE, settings) as served:
            await listening(served)
            port, proc = served.port, served.proc
            target = f"http://127.0.0.1:{silent_port}/slow"

            async def client(i: int) -> tuple[int, bytes]:
                source = f"127.0.{10 + i // 200}.{1 + i % 200}"
                status, _, body = await get(port, source, f"{target}?{i}")
                return status, body

            async def watch_files() -> None:
                nonlocal peak_files
                while True:
                    peak_files = max(peak_files, open_files(proc.pid))
                    await asyncio.sleep(0.05)

            watcher = asyncio.ensure_future(watch_files())
            try:
                results = await asyncio.gather(*(client(i) for i in range(CLIENTS)))
            finally:
                watcher.cancel()
            statuses = [s for s, _ in results]
            assert set(statuses) <= {503, 504}, sorted(set(statuses))
            timed_out = [b for s, b in results if s == 504]
            capped = [b for s, b in results if s == 503]
            assert len(timed_out) >= (PROXY_NOFILE - 64) // 2 - 10, (len(timed_out), len(capped))
            assert all(b"did not answer in time" in b for b in timed_out)
            assert all(b"max_connections" in b for b in capped)
            assert peak_files < PROXY_NOFILE, peak_files
            assert silent.requests == len(timed_out)

            # and afterwards normal requests are served
            status, _, body = await get(port, "127.0.0.2", origin.url("/page.html"))
            assert (status, body) == (200, origin.HTML)
    finally:
        await silent.stop()
    text = served.log.read_text()
    assert served.proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text and "Too many open files" not in text, text[-3000:]
