"""File descriptors (issue 12, finding 4): 1,100 stalled connections under systemd's default
limit of 1,024 open files stopped every other client and wrote 130,000 traceback lines in 30 s.

``wwwproxy serve`` runs in a process of its own with a tiny limit (soft and hard, so it cannot
raise it), more connections than that are opened and left stalled; the connections it has are
still served, its log has no traceback (one warning line at most), and once the stalled
connections are gone new ones are served again.  On uvloop (the loop ``serve`` runs on) and on
asyncio's own loop, whose server logs a traceback per failed accept.  And ``serve`` raises its
soft limit to the hard one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

NOFILE = 64
STALLED = 150  # connections left in the middle of a head: more than NOFILE
WAIT = 15.0  # generous bound for anything to happen
SERVE_ON_ASYNCIO = (
    "import asyncio, sys\n"
    "from wwwproxy.app import serve\n"
    "from wwwproxy.proxy.accesslog import setup_logging\n"
    "setup_logging()\n"
    "sys.exit(asyncio.run(serve(sys.argv[1], {})))\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_command(loop: str, config: Path) -> list[str]:
    if loop == "uvloop":  # the command as installed: uvloop's loop
        return [str(Path(sys.executable).with_name("wwwproxy")), "serve", "-c", str(config)]
    return [sys.executable, "-c", SERVE_ON_ASYNCIO, str(config)]


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Served:
    """A ``wwwproxy serve`` process and its log."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def get(self, url: str) -> tuple[int, str | None, bytes]:
        timeout = aiohttp.ClientTimeout(total=WAIT)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.get(url, proxy=self.url) as resp:
                return resp.status, resp.headers.get("X-Cache"), await resp.read()


#: no connection caps: they would refuse the flood before the descriptors run out
#: (tests/reliability/test_connection_caps.py); here the descriptors do run out
NO_CAPS = "max_connections: 0\nmax_client_connections: 0\n"


@contextlib.contextmanager
def serving(
    tmp_path: Path, loop: str, soft: int, hard: int, settings: str = NO_CAPS
) -> Iterator[Served]:
    """``wwwproxy serve`` with an open-files limit of ``soft``/``hard`` and ``settings``
    (YAML lines) in its configuration; stopped with SIGTERM at the end."""
    port = free_port()
    config = tmp_path / "wwwproxy.yaml"
    config.write_text(
        f"listen: 127.0.0.1:{port}\ncache: {tmp_path / 'cache'}\nrequest_changed: 600\n" + settings
    )
    log = tmp_path / "proxy.log"

    def limit() -> None:  # in the child only: the test process keeps its own limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    with open(log, "wb") as out:
        proc = subprocess.Popen(
            serve_command(loop, config), stdout=out, stderr=out, preexec_fn=limit
        )
    try:
        yield Served(proc, port, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


async def listening(served: Served) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while loop.time() < deadline:
        assert served.proc.poll() is None, served.log.read_text()
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", served.port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise AssertionError(f"not listening:\n{served.log.read_text()}")


async def answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    assert length, head
    return head, await asyncio.wait_for(reader.readexactly(int(length.group(1))), WAIT)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc")
@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_out_of_file_descriptors_keeps_serving_and_recovers(tmp_path, origin, loop):
    with serving(tmp_path, loop, NOFILE, NOFILE) as served:
        await listening(served)
        hot = origin.url("/page.html")
        assert (await served.get(hot))[0] == 200
        # the second time from the cache (and from then on from memory: no file to open)
        assert (await served.get(hot))[:2] == (200, "HIT")

        # a browser's keep-alive connection, open before the flood
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        request = f"GET {hot} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        writer.write(request)
        assert (await answer(reader))[1] == origin.HTML

        stalled: list[asyncio.StreamWriter] = []
        try:
            for _ in range(STALLED):
                try:
                    _, w = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", served.port), 2
                    )
                except (OSError, TimeoutError):
                    continue  # the listen queue is full: that is the flood too
                w.write(f"GET {origin.url('/image.png')} HTTP/1.1\r\nHo".encode())
                stalled.append(w)
            await asyncio.sleep(1.0)
            assert open_files(served.proc.pid) >= NOFILE - 2, "the limit was not reached"

            # the connections it has are served meanwhile
            writer.write(request)
            head, body = await answer(reader)
            assert head.startswith(b"HTTP/1.1 200 ") and body == origin.HTML
            assert served.proc.poll() is None
        finally:
            for w in stalled:
                w.transport.abort()
            writer.close()

        # and new ones once descriptors are free again (asyncio retries accepting each second)
        loop_ = asyncio.get_running_loop()
        deadline = loop_.time() + WAIT
        while True:
            try:
                status, cache, body = await served.get(origin.url("/image.png"))
                break
            except (aiohttp.ClientError, TimeoutError):
                assert loop_.time() < deadline, served.log.read_text()[-3000:]
                await asyncio.sleep(0.2)
        assert (status, body) == (200, origin.IMAGE)
        assert (await served.get(hot))[:2] == (200, "HIT")

    text = served.log.read_text()
    assert served.proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    warnings = [line for line in text.splitlines() if "cannot accept" in line]
    assert len(warnings) <= 2, warnings
    assert len(text.splitlines()) < 60, text[-3000:]


async def test_serve_raises_its_open_files_limit_to_the_hard_one(tmp_path):
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096)
    with serving(tmp_path, "uvloop", NOFILE, hard) as served:
        await listening(served)
        limits = Path(f"/proc/{served.proc.pid}/limits").read_text()
        soft_now = re.search(r"Max open files\s+(\d+)\s+(\d+)", limits)
        assert soft_now and int(soft_now.group(1)) == hard, limits
    assert f"open files limit raised from {NOFILE} to {hard}" in served.log.read_text()
