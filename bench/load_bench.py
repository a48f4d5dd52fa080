"""Load benchmark of the proxy against a local origin (not run by CI).

Three scenarios, each for 1 KB and 100 KB objects, measured in one run:

(a) direct: the load generator asks the origin itself (the baseline);
(b) online: the same requests through the proxy, every URL distinct, so each one is a real
    fetch from the origin and a WARC record (``X-Cache: MISS`` is checked);
(c) offline: the proxy switched offline re-serves exactly the URLs of (b) from its archive
    (``X-Cache: HIT`` is checked; a queued miss would be a 503 and counts as an error).

Each party runs in its own process so the load generator does not share the proxy's event loop:
the origin is this file run with ``--origin-port`` (a small aiohttp app serving ``/1k/N`` and
``/100k/N`` with fixed bodies, Content-Length and an ETag), the proxy is ``python -m wwwproxy
serve`` on a temporary cache, switched with ``python -m wwwproxy offline``.  Only loopback is
used.  The run is bounded: a fixed number of requests per scenario at fixed concurrency, a time
cap per scenario, and a global deadline; the child processes are stopped in ``finally`` (and the
origin also exits when its stdin closes, i.e. when this process dies).

Printed: per scenario and size, requests, requests per second, p50 and p99 latency (request
sent to body read), errors, and the CPU seconds the proxy process used; then the ratios
(b)/(a) and (c)/(a) of rps, p50 and p99.  Failures are listed by kind (status, missing X-Cache,
short body, exception type) and the proxy's last log lines are printed.

Run:  .venv/bin/python bench/load_bench.py                      (well under a minute)
      .venv/bin/python bench/load_bench.py --small 500 --large 200 --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web
from procs import free_port, wait_for_port  # bench/procs.py (run from bench/)
from sbs.servers import make_body  # bench/sbs/ (run from bench/)

SIZES = {"1k": 1024, "100k": 100 * 1024}
WARMUP = 32  # requests per scenario before the clock starts (own URLs in (b), not counted)
REQUEST_TIMEOUT = 30.0  # per request, so a stuck proxy shows as an error, not a hang
SCENARIO_CAP = 45.0  # seconds: after this, no new requests are started in a scenario
ORIGIN_LIFETIME = 300.0  # the origin exits by itself after this, whatever happens
PROXY_LOG_TAIL = 30


# --- the origin (child process) --------------------------------------------------------------


def run_origin(port: int) -> None:
    """Serve the fixed bodies on 127.0.0.1:port until stdin closes or the lifetime ends."""
    bodies = {name: make_body(size, seed=size) for name, size in SIZES.items()}

    async def handler(request: web.Request) -> web.Response:
        size = request.match_info["size"]
        body = bodies.get(size)
        if body is None:
            return web.Response(status=404, text="no such size\n")
        return web.Response(
            body=body,
            content_type="text/html",
            headers={"ETag": f'"{size}-v1"', "Cache-Control": "max-age=60"},
        )

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{size}/{n}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stdin_closed, ORIGIN_LIFETIME)
        await runner.cleanup()

    asyncio.run(main())
    os._exit(0)  # the stdin reader thread may still block; leave without joining it


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    size: str
    requested: int
    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    examples: dict[str, str] = field(default_factory=dict)
    proxy_cpu: float | None = None

    @property
    def done(self) -> int:
        return len(self.latencies) + sum(self.errors.values())

    @property
    def rps(self) -> float:
        return self.done / self.elapsed if self.elapsed else 0.0

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile of the successful requests' latencies, in ms."""
        if not self.latencies:
            return math.nan
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1000


async def one_request(
    session: aiohttp.ClientSession,
    url: str,
    proxy: str | None,
    expect_cache: str | None,
    size: int,
) -> tuple[float, str | None, str]:
    """(latency, error kind or None, detail) for one GET, body read whole."""
    start = time.perf_counter()
    try:
        async with session.get(url, proxy=proxy) as response:
            body = await response.read()
            latency = time.perf_counter() - start
            if response.status != 200:
                detail = body[:200].decode("utf-8", "replace")
                return latency, f"status {response.status}", f"{url}: {detail!r}"
            if len(body) != size:
                return latency, "wrong body length", f"{url}: {len(body)} bytes, not {size}"
            if expect_cache is not None:
                got = response.headers.get("X-Cache")
                if got != expect_cache:
                    return latency, f"X-Cache {got} (not {expect_cache})", url
            return latency, None, ""
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        return time.perf_counter() - start, f"exception {type(exc).__name__}", f"{url}: {exc}"


async def load(
    result: Result,
    urls: list[str],
    *,
    proxy: str | None,
    expect_cache: str | None,
    concurrency: int,
    count: bool = True,
) -> None:
    """Run ``urls`` with ``concurrency`` workers on one keep-alive session."""
    size = SIZES[result.size]
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    pending = iter(urls)
    deadline = time.perf_counter() + SCENARIO_CAP

    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, trust_env=False, auto_decompress=False
    ) as session:

        async def worker() -> None:
            for url in pending:
                if time.perf_counter() > deadline:
                    return
                latency, error, detail = await one_request(session, url, proxy, expect_cache, size)
                if not count:
                    continue
                if error is None:
                    result.latencies.append(latency)
                else:
                    result.errors[error] += 1
                    result.examples.setdefault(error, detail)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        if count:
            result.elapsed = time.perf_counter() - start


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process, from /proc (None where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def scenario(
    name: str,
    size: str,
    urls: list[str],
    warm: list[str],
    *,
    proxy: str | None,
    expect_cache: str | None,
    concurrency: int,
    proxy_pid: int,
) -> Result:
    result = Result(name, size, len(urls))
    await load(
        result, warm, proxy=proxy, expect_cache=expect_cache, concurrency=concurrency, count=False
    )
    before = cpu_seconds(proxy_pid)
    await load(result, urls, proxy=proxy, expect_cache=expect_cache, concurrency=concurrency)
    after = cpu_seconds(proxy_pid)
    if proxy is not None and before is not None and after is not None:
        result.proxy_cpu = after - before
    return result


# --- the processes ---------------------------------------------------------------------------


def stop_process(proc: subprocess.Popen[bytes] | None, what: str) -> str:
    """SIGTERM by PID, then SIGKILL if it lingers; returns how it ended."""
    if proc is None:
        return ""
    if proc.stdin is not None:  # the origin leaves when its stdin closes
        proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
            return f"{what}: did not stop on SIGTERM within 10 s, killed"
    return f"{what}: exited with status {proc.returncode}"


def tail(path: Path, lines: int) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return [f"(cannot read {path}: {exc})"]
    return text.splitlines()[-lines:]


# --- the report ------------------------------------------------------------------------------


def print_table(results: list[Result]) -> None:
    header = (
        f"{'scenario':<9} {'size':>5} {'requests':>9} {'rps':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'errors':>7} {'proxy cpu s':>12}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        cpu = f"{r.proxy_cpu:.2f}" if r.proxy_cpu is not None else "-"
        done = f"{r.done}" if r.done == r.requested else f"{r.done}/{r.requested}"
        print(
            f"{r.scenario:<9} {r.size:>5} {done:>9} {r.rps:>9.0f} {r.percentile(0.5):>8.2f} "
            f"{r.percentile(0.99):>8.2f} {sum(r.errors.values()):>7} {cpu:>12}"
        )


def print_ratios(results: list[Result]) -> None:
    by = {(r.scenario, r.size): r for r in results}
    print()
    print("ratios against (a) direct, same run (rps: higher is better; latency: lower is better)")
    print(f"{'':<20} {'rps':>7} {'p50':>7} {'p99':>7}")
    for size in SIZES:
        base = by.get(("direct", size))
        if base is None:
            continue
        for name, label in (("online", "(b)/(a)"), ("offline", "(c)/(a)")):
            r = by.get((name, size))
            if r is None:
                continue
            rps = r.rps / base.rps if base.rps else math.nan
            p50 = r.percentile(0.5) / base.percentile(0.5)
            p99 = r.percentile(0.99) / base.percentile(0.99)
            print(f"{label + ' ' + size:<20} {rps:>7.2f} {p50:>7.2f} {p99:>7.2f}")


def print_errors(results: list[Result]) -> bool:
    failed = False
    for r in results:
        for kind, n in r.errors.most_common():
            if not failed:
                print()
                print("failures:")
                failed = True
            print(f"  {r.scenario} {r.size}: {n} x {kind}; e.g. {r.examples[kind]}")
        if r.done < r.requested:
            failed = True
            print(
                f"  {r.scenario} {r.size}: only {r.done} of {r.requested} requests ran "
                f"within the {SCENARIO_CAP:.0f} s cap"
            )
    return failed


# --- main ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, tmp: Path) -> int:
    counts = {"1k": args.small, "100k": args.large}
    origin_port, proxy_port = free_port(), free_port()
    proxy_log = tmp / "proxy.log"
    cache = tmp / "cache"
    origin: subprocess.Popen[bytes] | None = None
    proxy: subprocess.Popen[bytes] | None = None
    results: list[Result] = []
    failed = False
    try:
        origin = subprocess.Popen(
            [sys.executable, __file__, "--origin-port", str(origin_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            cwd=tmp,
        )
        with proxy_log.open("wb") as log_file:
            # cwd=tmp: no conf/wwwproxy.yaml there, so the proxy runs on its defaults
            proxy = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "wwwproxy",
                    "serve",
                    "--listen",
                    f"127.0.0.1:{proxy_port}",
                    "--cache",
                    str(cache),
                    "--mode",
                    "online",
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=tmp,
            )
        await wait_for_port(origin_port, origin, "the origin", 15)
        await wait_for_port(proxy_port, proxy, "the proxy", 15)
        print(
            f"origin 127.0.0.1:{origin_port} (pid {origin.pid}), proxy 127.0.0.1:{proxy_port} "
            f"(pid {proxy.pid}), cache {cache}; concurrency {args.concurrency}, "
            f"{os.cpu_count()} CPUs"
        )
        proxy_url = f"http://127.0.0.1:{proxy_port}"
        base = f"http://127.0.0.1:{origin_port}"
        urls = {s: [f"{base}/{s}/{i}" for i in range(counts[s])] for s in SIZES}
        warm = {s: [f"{base}/{s}/warm{i}" for i in range(WARMUP)] for s in SIZES}
        common = {"concurrency": args.concurrency, "proxy_pid": proxy.pid}

        for s in SIZES:
            results.append(
                await scenario(
                    "direct", s, urls[s], warm[s], proxy=None, expect_cache=None, **common
                )
            )
        for s in SIZES:
            results.append(
                await scenario(
                    "online", s, urls[s], warm[s], proxy=proxy_url, expect_cache="MISS", **common
                )
            )
        switch = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "wwwproxy", "offline", "--proxy", f"127.0.0.1:{proxy_port}"],
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=20,
        )
        said = (switch.stdout + switch.stderr).strip().replace("\n", "; ")
        print(f"switch offline: exit {switch.returncode}: {said}")
        if switch.returncode != 0 or "mode: offline" not in switch.stdout:
            failed = True
            print("the proxy did not switch offline; scenario (c) skipped")
        else:
            for s in SIZES:
                results.append(
                    await scenario(
                        "offline",
                        s,
                        urls[s],
                        warm[s],
                        proxy=proxy_url,
                        expect_cache="HIT",
                        **common,
                    )  # fmt: skip
                )
    finally:
        print()
        print_table(results)
        print_ratios(results)
        failed = print_errors(results) or failed
        proxy_end = stop_process(proxy, "proxy")
        origin_end = stop_process(origin, "origin")
        print()
        print(f"{proxy_end}; {origin_end}")
        warcs = sorted(cache.rglob("*.warc*")) if cache.is_dir() else []
        total = sum(p.stat().st_size for p in warcs)
        print(f"archive: {len(warcs)} WARC file(s), {total / 2**20:.1f} MiB")
        if failed or (proxy is not None and proxy.returncode not in (0, None)):
            print()
            print(f"last {PROXY_LOG_TAIL} lines of the proxy's log ({proxy_log}):")
            for line in tail(proxy_log, PROXY_LOG_TAIL):
                print("  " + line)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=2000, help="1 KB requests per scenario")
    parser.add_argument("--large", type=int, default=1000, help="100 KB requests per scenario")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--budget", type=float, default=180.0, help="whole run, in seconds")
    parser.add_argument("--origin-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.origin_port is not None:
        run_origin(args.origin_port)
        return 0
    with tempfile.TemporaryDirectory(prefix="wwwproxy-load-") as name:
        try:
            return asyncio.run(asyncio.wait_for(run(args, Path(name)), args.budget))
        except TimeoutError:
            print(f"stopped: the run exceeded its {args.budget:.0f} s budget", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
