"""Hostile input, slowloris and running out of file descriptors, against a real ``wwwproxy
serve`` (not run by CI; issue 12, finding 4 and the hostile-request suite).

Three phases, each with a proxy process of its own on a temporary cache, a hand-written origin
in this process (it frames and records what it is sent), and loopback only:

(1) hostile: N (default 100,000) seeded malformed and hostile requests, the generator of
    ``tests/reliability/test_hostile_requests.py`` (loaded from there), sent by a client
    process at a fixed concurrency.  Printed: requests per second, answers by status, broken
    promises (a 500, a traceback, a smuggled request, CR/LF/NUL at the origin, a hang), the
    known gaps met, p50/p99 of an answered case, the proxy's RSS (before, peak, after) and
    open files, and whether a normal miss and hit are still served.
(2) slowloris: S (default 1,000) connections send a request head one byte a second, for ever;
    meanwhile a browser asks for a page every 0.1 s (a memory hit and a miss in turn, each on a
    new connection).  Printed: the browser's answers (p50/p99, failures), how many stalled
    connections the proxy closed and when (its header-read time is 20 s), RSS and open files.
(3) fds: the issue's numbers: the proxy with an open-files limit of 1,024 (soft and hard, as
    systemd's default soft limit, without the unit's LimitNOFILE) and 1,100 stalled heads;
    a browser keeps a connection opened before the flood and asks on it every 0.5 s, and asks
    on new connections every 0.1 s.  Printed: answers on the kept connection, answers and
    refusals on new ones, when new ones were served again, the log's size and tracebacks.

The proxy runs this file with ``--serve``: ``wwwproxy serve`` itself (uvloop, the raised
open-files limit, the accept-error handler), with a resolver that refuses every name that is
not this machine, so no mutated request can make it look a name up on the network.

Run:  .venv/bin/python bench/hostile_bench.py                       (about 6 minutes)
      .venv/bin/python bench/hostile_bench.py --cases 20000 --phases hostile
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
from procs import free_port, wait_for_port  # bench/procs.py (run from bench/)

ROOT = Path(__file__).resolve().parents[1]
CASES_FILE = ROOT / "tests" / "reliability" / "test_hostile_requests.py"
SEED = 20_261_213
REQUEST_TIMEOUT = 10.0


def hostile_cases() -> ModuleType:
    """The test suite's generator, origin and client (the file imports nothing of the tests)."""
    spec = importlib.util.spec_from_file_location("hostile_cases", CASES_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hostile_cases"] = module
    spec.loader.exec_module(module)
    return module


H = hostile_cases()


# --- the proxy process -------------------------------------------------------------------------


def serve_main(config: str) -> int:
    """``--serve``: wwwproxy serve, its DNS limited to this machine."""
    sys.path.insert(0, str(ROOT))
    from wwwproxy.app import serve
    from wwwproxy.cli.loop import run
    from wwwproxy.proxy.accesslog import setup_logging

    def loopback_only(running: Any) -> None:
        running.services.engine._resolver = H.LoopbackResolver()  # noqa: SLF001

    setup_logging()
    return run(serve(config, {}, on_ready=loopback_only))


class Proxy:
    """A ``--serve`` process on a free port, its log, and its memory and open files."""

    def __init__(self, tmp: Path, name: str, nofile: int | None = None) -> None:
        self.port = free_port()
        self.log = tmp / f"{name}.log"
        config = tmp / f"{name}.yaml"
        config.write_text(
            f"listen: 127.0.0.1:{self.port}\ncache: {tmp / name}\nrequest_changed: 600\n"
        )

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(config)],
                stdout=out,
                stderr=out,
                preexec_fn=limit,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def ready(self) -> None:
        await wait_for_port(self.port, self.proc, "the proxy", 30, self.tail)

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def rss_mb(self) -> float:
        return H.rss_bytes(self.proc.pid) / 2**20

    def open_files(self) -> int:
        return len(list(Path(f"/proc/{self.proc.pid}/fd").iterdir()))

    def errors(self, most: int = 5, context: int = 12) -> list[str]:
        """The log's first ERROR lines and tracebacks, each with the lines after it."""
        lines = self.log.read_text(errors="replace").splitlines()
        found = [i for i, line in enumerate(lines) if " ERROR " in line or "Traceback" in line]
        return ["\n".join(lines[i : i + context]) for i in found[:most]]

    def log_figures(self) -> dict[str, int]:
        text = self.log.read_text(errors="replace")
        lines = text.splitlines()
        return {
            "log lines": len(lines),
            "log bytes": len(text.encode()),
            "tracebacks": text.count("Traceback"),
            "ERROR lines": sum(" ERROR " in line for line in lines),
            "accept warnings": sum("cannot accept" in line for line in lines),
        }

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    async def get(self, url: str, timeout: float = REQUEST_TIMEOUT) -> tuple[int, str, bytes]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.get(url, proxy=self.url) as resp:
                return resp.status, resp.headers.get("X-Cache", "-"), await resp.read()


class PeakRSS:
    """Samples a process's RSS twice a second while running."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy, self.peak = proxy, 0.0
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.peak = max(self.peak, self.proxy.rss_mb())
                await asyncio.sleep(0.5)

    def stop(self) -> float:
        self.task.cancel()
        with contextlib.suppress(OSError):
            self.peak = max(self.peak, self.proxy.rss_mb())
        return self.peak


def table(title: str, rows: list[tuple[str, Any]]) -> None:
    print(f"\n{title}")
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    cuts = statistics.quantiles(values, n=100)
    return f"p50 {cuts[49] * 1000:.1f} ms, p99 {cuts[98] * 1000:.1f} ms"


async def still_serving(proxy: Proxy, origin_port: int) -> str:
    try:
        miss = await proxy.get(f"http://127.0.0.1:{origin_port}/after-{time.monotonic_ns()}")
        hit = await proxy.get(f"http://127.0.0.1:{origin_port}/hot")
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"NO ({exc!r})"
    ok = miss[0] == 200 and hit[:2] == (200, "HIT")
    return "yes (a miss and a memory hit)" if ok else f"NO ({miss[:2]}, {hit[:2]})"


# --- (1) hostile input -------------------------------------------------------------------------


async def hostile(tmp: Path, args: argparse.Namespace) -> bool:
    origin = H.RecordingOrigin()
    await origin.start()
    proxy = Proxy(tmp, "hostile")
    try:
        await proxy.ready()
        hot = f"http://127.0.0.1:{origin.port}/hot"
        await proxy.get(hot)
        await asyncio.sleep(1.0)  # recorded: the next ones are hits
        assert (await proxy.get(hot))[:2] == (200, "HIT"), "the warm-up page is not a hit"
        rss_before, files_before = proxy.rss_mb(), proxy.open_files()
        peak = PeakRSS(proxy)
        started = time.monotonic()
        tally = await H.run_in_child(
            proxy.port, origin.port, args.seed, args.cases, args.concurrency, args.limit
        )
        seconds = time.monotonic() - started
        peak_rss = peak.stop()
        await asyncio.sleep(2.0)  # the last recordings settle
        rss_after, files_after = proxy.rss_mb(), proxy.open_files()
        serving = await still_serving(proxy, origin.port)
        slim = {}  # what the origin check needs, without the cases' bodies
        for case in H.Generator(args.seed, origin.port, proxy.port).cases(args.cases):
            slim[case.number] = H.Case(case.number, case.kind, b"", case.expect, gap=case.gap)
        failures = tally.failures + H.origin_failures(origin, slim, tally)
    finally:
        status = proxy.stop()
        await origin.stop()
    figures = proxy.log_figures()
    rows = [
        ("tried", f"{args.cases:,} requests, {args.concurrency} connections at a time"),
        ("handled", f"{args.cases / seconds:,.0f} requests/s ({seconds:.1f} s)"),
        ("answers", ", ".join(f"{k} {v:,}" for k, v in tally.statuses.most_common())),
        ("answered case", quantiles(tally.latencies)),
        ("failed (promises broken)", len(failures)),
        ("known gaps met", dict(tally.gaps) or "none"),
        ("reached the origin", f"{len(origin.requests):,} requests"),
        ("crashed", f"{figures['tracebacks']} tracebacks, {figures['ERROR lines']} ERROR lines"),
        ("proxy RSS", f"{rss_before:.0f} MB before, {peak_rss:.0f} MB peak, {rss_after:.0f} after"),
        ("proxy open files", f"{files_before} before, {files_after} after"),
        ("still serving", serving),
        ("exit status", status),
    ]
    table("(1) hostile requests", rows)
    kinds: Counter[str] = Counter()
    for (kind, _), count in tally.by_kind.items():
        kinds[kind] += count
    print("  by mutation: " + ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items())))
    for line in failures[:20]:
        print(f"  FAILED {line[:400]}")
    for error in proxy.errors():
        print("  proxy log: " + error.replace("\n", "\n    "))
    return not failures and figures["tracebacks"] == 0 and serving.startswith("yes")


# --- (2) slowloris -----------------------------------------------------------------------------


async def open_stalled(
    port: int, count: int, head: bytes
) -> tuple[list[asyncio.StreamWriter], list[asyncio.Task[float | None]], int]:
    """``count`` connections that sent ``head`` (no end); each with a task that returns the
    seconds until the proxy closed it.  Returns the writers, the tasks and refused connects."""
    writers, closings, refused = [], [], 0
    for _ in range(count):
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
        except (OSError, TimeoutError):
            refused += 1
            continue
        writer.write(head)
        writers.append(writer)
        closings.append(asyncio.ensure_future(_closed(reader, time.monotonic())))
    return writers, closings, refused


async def _closed(reader: asyncio.StreamReader, since: float) -> float | None:
    with contextlib.suppress(ConnectionError, OSError):
        while await reader.read(65536):
            pass
        return time.monotonic() - since
    return time.monotonic() - since


async def browse(
    proxy: Proxy, origin_port: int, seconds: float, every: float
) -> tuple[list[float], Counter[str], list[tuple[float, bool]]]:
    """A browser asking for a page every ``every`` seconds on new connections (a hit and a miss
    in turn): latencies of the answers, outcomes, and (when asked, served) for each."""
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    events: list[tuple[float, bool]] = []
    start = time.monotonic()
    n = 0

    async def one(url: str) -> None:
        t = time.monotonic()
        try:
            status, cache, _ = await proxy.get(url, timeout=5)
        except (aiohttp.ClientError, TimeoutError) as exc:
            outcomes[type(exc).__name__] += 1
            events.append((t - start, False))
            return
        outcomes[f"{status} {cache}"] += 1
        events.append((t - start, status == 200))
        if status == 200:
            latencies.append(time.monotonic() - t)

    tasks = []
    while time.monotonic() - start < seconds:
        url = f"http://127.0.0.1:{origin_port}/" + ("hot" if n % 2 else f"miss-{n}")
        tasks.append(asyncio.ensure_future(one(url)))
        n += 1
        await asyncio.sleep(every)
    await asyncio.gather(*tasks)
    return latencies, outcomes, sorted(events)


def refused_window(events: list[tuple[float, bool]], offset: float = 0.0) -> str:
    """When new connections were refused, in seconds from ``offset``."""
    failed = [t - offset for t, ok in events if not ok]
    if not failed:
        return "never"
    later = [t - offset for t, ok in events if ok and t - offset > failed[-1]]
    back = f"; served again from {later[0]:.1f} s" if later else "; not served again"
    return f"{len(failed)} asked between {failed[0]:.1f} s and {failed[-1]:.1f} s{back}"


async def slowloris(tmp: Path, args: argparse.Namespace) -> bool:
    origin = H.RecordingOrigin()
    await origin.start()
    proxy = Proxy(tmp, "slowloris")
    writers: list[asyncio.StreamWriter] = []
    try:
        await proxy.ready()
        await proxy.get(f"http://127.0.0.1:{origin.port}/hot")
        await asyncio.sleep(1.0)
        rss_before = proxy.rss_mb()
        head = f"GET http://127.0.0.1:{origin.port}/slow HTTP/1.1\r\nHost: x\r\nX-A: ".encode()
        writers, closings, refused = await open_stalled(proxy.port, args.stalled, head)
        files_flood = proxy.open_files()

        async def trickle() -> None:
            while True:
                await asyncio.sleep(1.0)
                for writer in writers:
                    if not writer.is_closing():
                        with contextlib.suppress(OSError, RuntimeError):
                            writer.write(b"a")

        trickling = asyncio.ensure_future(trickle())
        latencies, outcomes, events = await browse(proxy, origin.port, args.slow_seconds, 0.1)
        trickling.cancel()
        done = [t.result() for t in closings if t.done()]
        files_after = proxy.open_files()
        rss_after = proxy.rss_mb()
    finally:
        for writer in writers:
            writer.transport.abort()
        status = proxy.stop()
        await origin.stop()
    figures = proxy.log_figures()
    closed_at = sorted(x for x in done if x is not None)
    rows = [
        ("stalled connections", f"{len(writers):,} open ({refused} refused), 1 byte/s each"),
        (
            "closed by the proxy",
            f"{len(closed_at):,} in {args.slow_seconds:.0f} s"
            + (f" (first {closed_at[0]:.1f} s, last {closed_at[-1]:.1f} s)" if closed_at else ""),
        ),
        ("browser answers", ", ".join(f"{k} {v}" for k, v in outcomes.most_common())),
        ("browser refused", refused_window(events)),
        ("browser latency", quantiles(latencies)),
        ("proxy RSS", f"{rss_before:.0f} MB before, {rss_after:.0f} MB after"),
        ("proxy open files", f"{files_flood} in the flood, {files_after} at the end"),
        ("crashed", f"{figures['tracebacks']} tracebacks, {figures['ERROR lines']} ERROR lines"),
        ("exit status", status),
    ]
    table(f"(2) slowloris: {args.stalled:,} heads sent a byte a second", rows)
    failed = sum(v for k, v in outcomes.items() if not k.startswith("200"))
    return failed == 0 and len(closed_at) == len(writers) and figures["tracebacks"] == 0


# --- (3) out of file descriptors ----------------------------------------------------------------


async def fds(tmp: Path, args: argparse.Namespace) -> bool:
    origin = H.RecordingOrigin()
    await origin.start()
    proxy = Proxy(tmp, "fds", nofile=args.nofile)
    writers: list[asyncio.StreamWriter] = []
    kept_ok = kept_failed = 0
    try:
        await proxy.ready()
        hot = f"http://127.0.0.1:{origin.port}/hot"
        await proxy.get(hot)
        await asyncio.sleep(1.0)
        await proxy.get(hot)  # into memory: answering it needs no file
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        request = f"GET {hot} HTTP/1.1\r\nHost: x\r\n\r\n".encode()

        async def kept() -> None:
            nonlocal kept_ok, kept_failed
            while True:
                writer.write(request)
                try:
                    answer = await asyncio.wait_for(H._read_answer(reader, [0]), 5)
                except (OSError, TimeoutError, H.Garbled):
                    answer = None
                if answer is None or answer.status != 200:
                    kept_failed += 1
                    return
                kept_ok += 1
                await asyncio.sleep(0.5)

        keeping = asyncio.ensure_future(kept())
        head = f"GET http://127.0.0.1:{origin.port}/stalled HTTP/1.1\r\nHost: x\r\n".encode()
        browsing = asyncio.ensure_future(browse(proxy, origin.port, args.fd_seconds, 0.1))
        await asyncio.sleep(1.0)
        flood_at = time.monotonic()
        writers, closings, refused = await open_stalled(proxy.port, args.fd_stalled, head)
        await asyncio.sleep(1.0)
        files_flood = proxy.open_files()
        latencies, outcomes, events = await browsing
        keeping.cancel()
        closed = sum(1 for t in closings if t.done())
        # new connections served again after the flood began, once the heads were closed
        recovered = await still_serving(proxy, origin.port)
        flood_seconds = time.monotonic() - flood_at
    finally:
        for w in writers:
            w.transport.abort()
        status = proxy.stop()
        await origin.stop()
    figures = proxy.log_figures()
    rows = [
        ("open files limit", f"{args.nofile} (soft and hard)"),
        ("stalled connections", f"{len(writers):,} opened, {refused} refused at connect"),
        ("proxy open files", f"{files_flood} in the flood"),
        ("closed by the proxy", f"{closed:,} in {flood_seconds:.0f} s (header-read time 20 s)"),
        ("kept connection", f"{kept_ok} answered, {kept_failed} failed"),
        ("new connections", ", ".join(f"{k} {v}" for k, v in outcomes.most_common())),
        ("new ones refused", refused_window(events, 1.0) + " (from the flood's start)"),
        ("new connection latency", quantiles(latencies)),
        ("served after", recovered),
        ("log", f"{figures['log lines']} lines, {figures['log bytes']:,} bytes"),
        ("crashed", f"{figures['tracebacks']} tracebacks, {figures['ERROR lines']} ERROR lines"),
        ("accept warnings", figures["accept warnings"]),
        ("exit status", status),
    ]
    table(f"(3) {args.fd_stalled:,} stalled heads under {args.nofile} open files", rows)
    return kept_failed == 0 and figures["tracebacks"] == 0 and recovered.startswith("yes")


async def run(args: argparse.Namespace) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this process holds the floods
    phases = {"hostile": hostile, "slowloris": slowloris, "fds": fds}
    ok = True
    with tempfile.TemporaryDirectory(prefix="wwwproxy-hostile-") as tmp:
        for name in args.phases.split(","):
            ok &= await phases[name](Path(tmp), args)
    print("\nall promises kept" if ok else "\nSOME PROMISES BROKEN (see above)")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", metavar="CONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--phases", default="hostile,slowloris,fds")
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--concurrency", type=int, default=96)
    parser.add_argument("--limit", type=float, default=3600.0, help="seconds for phase (1)")
    parser.add_argument("--stalled", type=int, default=1000)
    parser.add_argument("--slow-seconds", type=float, default=30.0)
    parser.add_argument("--nofile", type=int, default=1024)
    parser.add_argument("--fd-stalled", type=int, default=1100)
    parser.add_argument("--fd-seconds", type=float, default=30.0)
    args = parser.parse_args()
    if args.serve:
        return serve_main(args.serve)
    sys.path.insert(0, str(ROOT))
    from wwwproxy.cli.loop import run as run_loop

    return run_loop(run(args))


if __name__ == "__main__":
    sys.exit(main())
