"""The served pages of scale_bench.py: the proxy runs on the cache in a child process (this
file's :func:`serve`, ``wwwproxy.app.start`` on 127.0.0.1, port 0), and :func:`measure_pages`
sends it real HTTP GETs, one at a time, with the proxy's own address as Host (as a browser
asking the proxy for its pages does), timing each and taking the CPU the server's process and
its children (the search text helper) spent on it from ``/proc/PID/task/*/schedstat``
(nanoseconds, every thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from index_pages_bench import pct, rss_mb  # bench/index_pages_bench.py (run from bench/)
from procs import close_and_wait  # bench/procs.py

#: the requests after the first one, per page
REPEAT = 20
#: search queries: a word in every page, a word in half of the pages, a prefix of many words
QUERIES = ("the", "but", "wa*")


def serve(cache: Path) -> None:
    """Run the proxy on ``cache`` until stdin closes; print its port first."""
    from wwwproxy import allocator
    from wwwproxy.app import start
    from wwwproxy.config import Config

    allocator.limit_arenas()  # as `wwwproxy serve` does
    allocator.fix_mmap_threshold()

    async def main() -> None:
        running = await start(Config(listen_host="127.0.0.1", listen_port=0, cache=cache))
        print(running.port, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes it (or dies)
        await running.stop()

    asyncio.run(main())


def _pids(pid: int) -> list[int]:
    """``pid`` and its children."""
    out = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(p) for p in (task / "children").read_text().split()]
    return out


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of ``pid`` and of its children, in nanoseconds."""
    total = 0
    for proc in _pids(pid):
        try:
            tasks = list(Path(f"/proc/{proc}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int((task / "schedstat").read_text().split()[0])
    return total


def wait_idle(pid: int, end: float) -> float:
    """Wait until the server spends under 10 ms CPU a second (its start-up work done, such as
    warming the host summaries); the seconds that took."""
    start = time.monotonic()
    last = cpu_ns(pid)
    while time.time() < end:
        time.sleep(1.0)
        now = cpu_ns(pid)
        if now - last < 10_000_000:
            break
        last = now
    return time.monotonic() - start


class Client:
    """One keep-alive connection to the proxy, timing requests and the server's CPU."""

    def __init__(self, port: int, pid: int, end: float) -> None:
        self.port, self.pid, self.end = port, pid, end
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=max(1, end - time.time()))

    def get(self, path: str) -> tuple[float, float, int, int]:
        """(wall ms, server CPU ms, status, body bytes) of one GET."""
        cpu0, t0 = cpu_ns(self.pid), time.perf_counter()
        self.conn.request("GET", path, headers={"Host": f"127.0.0.1:{self.port}"})
        response = self.conn.getresponse()
        body = response.read()
        wall = (time.perf_counter() - t0) * 1000
        return wall, (cpu_ns(self.pid) - cpu0) / 1e6, response.status, len(body)

    def page(self, path: str, repeat: int = REPEAT) -> dict:
        """The first (cold) request and ``repeat`` more (p50/p99), while within the budget."""
        first = self.get(path)
        walls, cpus = [], []
        for _ in range(repeat):
            if time.time() > self.end:
                break
            wall, cpu, _, _ = self.get(path)
            walls.append(wall)
            cpus.append(cpu)
        out = {"path": path, "first_ms": first[0], "first_cpu_ms": first[1],
               "status": first[2], "bytes": first[3], "n": len(walls)}  # fmt: skip
        if walls:
            out |= {"p50_ms": statistics.median(walls), "p99_ms": pct(walls, 99),
                    "p50_cpu_ms": statistics.median(cpus), "p99_cpu_ms": pct(cpus, 99)}  # fmt: skip
        return out


def measure_pages(cache: Path, big_host: str, env: dict[str, str], end: float) -> dict:
    """Start the proxy on ``cache`` and request ``/``, ``/index/``, ``big_host``'s first page
    and the search queries; every figure of the served rows."""
    proc = subprocess.Popen(
        [sys.executable, __file__, str(cache)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=cache,
    )
    out: dict = {}
    try:
        assert proc.stdout is not None
        t0 = time.monotonic()
        port = int(proc.stdout.readline())
        out["start_s"] = time.monotonic() - t0
        out["settle_s"] = wait_idle(proc.pid, min(end, time.time() + 300))
        out["start_cpu_ms"] = cpu_ns(proc.pid) / 1e6
        out["start_rss_mb"] = rss_mb(proc.pid)[0]
        client = Client(port, proc.pid, end)
        out["host"] = client.page(f"/index/https/{big_host}/", repeat=5)
        out["root"] = client.page("/")
        out["index"] = client.page("/index/")
        out["search"] = {q: client.page(f"/search/?q={quote(q)}") for q in QUERIES}
        out["rss_mb"], out["hwm_mb"] = rss_mb(proc.pid)
    finally:
        close_and_wait(proc, 60)
    return out


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
