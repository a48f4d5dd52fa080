"""kill -9 at random moments while eight clients record distinct URLs, ten times over: after
each restart the index check is clean (or ``index rebuild`` makes it clean, losing nothing),
every WARC file reads whole with warcio, and every response a client received whole before a
kill is served offline byte for byte; no torn record is ever served.

The proxy runs as ``python -m wwwproxy serve`` in its own process (as under systemd), against
an origin in this process whose bodies (50 KB to 600 KB, trickled) keep records in flight."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive.store import Store

CYCLES = 6  # per sync mode (bench/kill9_bench.py does 200)
CLIENTS = 8
SEED = 20261124
CHECKED_PER_CYCLE = 40  # received copies re-read offline per cycle (the newest first)


def body_of(n: int) -> bytes:
    rng = random.Random(n)
    size = rng.randrange(50_000, 600_000)
    seed = hashlib.sha256(str(n).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


async def start_origin() -> tuple[web.AppRunner, int]:
    async def obj(request: web.Request) -> web.StreamResponse:
        n = int(request.match_info["n"])
        body = body_of(n)
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(body)
        await response.prepare(request)
        for i in range(0, len(body), 65536):  # a little at a time: kills land mid-record
            await response.write(body[i : i + 65536])
            await asyncio.sleep(0.002)
        return response

    app = web.Application()
    app.router.add_get("/obj/{n}", obj)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def serve(
    cache: Path, port: int, mode: str, log: Path, sync: str = "write"
) -> subprocess.Popen[bytes]:
    conf = cache.parent / "wwwproxy.yaml"
    conf.write_text(f"request_changed: 0\nsync: {sync}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "wwwproxy", "serve", "-c", str(conf), "--cache", str(cache)]
        + ["--listen", f"127.0.0.1:{port}", "--mode", mode],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"wwwproxy exited: {log.read_text()[-3000:]}") from None
            await asyncio.sleep(0.05)
    proc.kill()
    raise AssertionError("wwwproxy did not start listening")


def every_file_reads_whole(cache: Path) -> int:
    files = sorted(cache.rglob("*.warc.gz"))
    for path in files:
        with open(path, "rb") as f:
            for record in ArchiveIterator(f, check_digests=True):
                record.content_stream().read()
    return len(files)


async def client(
    session: aiohttp.ClientSession,
    proxy: str,
    origin_port: int,
    numbers: itertools.count[int],
    stop: asyncio.Event,
    received: dict[int, bytes],
) -> None:
    """Distinct URLs through the proxy until stopped or the proxy is killed under it."""
    while not stop.is_set():
        n = next(numbers)
        try:
            async with session.get(f"http://127.0.0.1:{origin_port}/obj/{n}", proxy=proxy) as r:
                body = await r.read()
        except (TimeoutError, aiohttp.ClientError, OSError):
            return
        if r.status == 200 and body == body_of(n):
            received[n] = body


def index_is_clean(cache: Path, cycle: int) -> None:
    """``index check`` clean, or made clean by ``index rebuild`` (what the CLI commands run),
    which cuts the torn tails off and loses no complete record."""
    store = Store(cache)
    problems = store.check_index()
    if problems:
        before = {(r.uri, r.timestamp) for r in store.list_prefix("")}
        _, left = store.rebuild_index()
        assert left == [], f"cycle {cycle}: {left}"
        after = {(r.uri, r.timestamp) for r in store.list_prefix("")}
        assert before <= after, f"cycle {cycle}: rebuild lost {before - after}"
        problems = store.check_index()
    assert problems == [], f"cycle {cycle}: {problems}"


@pytest.mark.parametrize("sync", ["write", "flush"])
async def test_kill_9_loses_nothing_received_and_serves_nothing_torn(
    tmp_path: Path, sync: str
) -> None:
    """In every ``sync`` mode: the records are written before the browser's last byte (the
    flush only matters to a power cut)."""
    rng = random.Random(SEED)
    cache = tmp_path / "cache"
    log = tmp_path / "wwwproxy.log"
    origin, origin_port = await start_origin()
    received: dict[int, bytes] = {}  # URL number -> what a client got whole
    numbers = itertools.count()
    timeout = aiohttp.ClientTimeout(total=20)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for cycle in range(CYCLES + 1):
                port = free_port()
                proxy = f"http://127.0.0.1:{port}"
                proc = await serve(cache, port, "offline", log, sync)
                # offline: what was received whole before the kills is served byte for byte
                for n in sorted(received)[-CHECKED_PER_CYCLE:]:
                    url = f"http://127.0.0.1:{origin_port}/obj/{n}"
                    async with session.get(url, proxy=proxy) as reply:
                        body = await reply.read()
                    assert (reply.status, reply.headers.get("X-Cache")) == (200, "HIT"), n
                    assert body == received[n], f"cycle {cycle}: URL {n} differs"
                if cycle == CYCLES:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
                    break
                async with session.post(
                    f"{proxy}/control/?format=json",
                    data={"mode": "online"},
                    headers={"X-Wwwproxy-Request": "1"},
                ) as reply:
                    assert reply.status == 200, await reply.text()
                stop = asyncio.Event()
                clients = [
                    asyncio.create_task(
                        client(session, proxy, origin_port, numbers, stop, received)
                    )
                    for _ in range(CLIENTS)
                ]
                await asyncio.sleep(rng.uniform(0.3, 1.2))
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
                stop.set()
                await asyncio.gather(*clients)
                index_is_clean(cache, cycle)
                assert every_file_reads_whole(cache) > 0
        assert len(received) >= CYCLES, "too few responses completed to test anything"
    finally:
        await origin.cleanup()
    assert "Traceback" not in log.read_text(errors="replace")
