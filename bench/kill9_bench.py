"""kill -9 at random moments while eight clients record distinct URLs, many times over (not run
by CI; issue 12: the CI test ``tests/reliability/test_kill9.py`` does 10 cycles, this does 200).

Each cycle: ``python -m wwwproxy serve`` starts offline on the same cache; every response a
client received whole before the earlier kills (the newest ``--check`` of them) is asked for
and must be served byte for byte (anything else is "lost", a different body "torn"); the proxy
goes online, eight clients fetch distinct URLs (50 to 600 KB, trickled) through it, and it is
killed with SIGKILL after 0.3 to 1.2 s; then ``index check`` (and ``index rebuild`` when the
check is not clean: it must leave nothing and lose nothing) and warcio reading every WARC file
that is new or changed since the cycle before (the others were read whole already). Every
``--fresh-every`` cycles (25), once its last check is done, the cache is removed and the next
cycles start on an empty one: the index check and a rebuild read the whole cache, so on one
cache growing for 200 cycles (about 6 GB) each cycle cost more than the one before.

Printed: a line per 20 cycles, and at the end the table the issue asks for: cycles tried,
failed (a cycle with any problem), responses received whole, offline checks, lost, torn
served, crashed (the proxy did not start, or a traceback in its log), index checks not clean
before a rebuild, rebuilds that left problems or lost a record, unreadable WARC files, the
proxy's peak RSS, and the p50/p99 of an offline check.

Run:  .venv/bin/python bench/kill9_bench.py                 (200 cycles, about 40 minutes)
      .venv/bin/python bench/kill9_bench.py --cycles 20 --sync flush   (write, group, flush)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import logging
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _load_test_harness():  # noqa: ANN202 (a module)
    """The CI test's origin, clients and proxy start (one harness, not a copy)."""
    path = ROOT / "tests" / "reliability" / "test_kill9.py"
    spec = importlib.util.spec_from_file_location("kill9_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


k9 = _load_test_harness()


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Received(dict):
    """URL numbers a client received whole (``k9.client`` stores the body: only the number is
    kept, the body is :func:`k9.body_of` again; 200 cycles received gigabytes)."""

    def __setitem__(self, n: int, body: bytes) -> None:
        super().__setitem__(n, None)


def read_changed_files(cache: Path, seen: dict[Path, tuple[int, int]]) -> int:
    """warcio reads (digests checked) every cache file that is new or changed since the last
    call: the files no cycle touched were read whole before, and reading them all again made
    each cycle cost more than the one before. Returns how many files were read."""
    changed = []
    for path in sorted(cache.rglob("*.warc.gz")):
        st = path.stat()
        if seen.get(path) != (st.st_size, st.st_mtime_ns):
            changed.append((path, (st.st_size, st.st_mtime_ns)))
    for path, signature in changed:
        with open(path, "rb") as f:
            for record in k9.ArchiveIterator(f, check_digests=True):
                record.content_stream().read()
        seen[path] = signature
    return len(changed)


def index_state(cache: Path) -> tuple[bool, bool, str]:
    """(check was clean, rebuild was needed and failed or lost a record, problem text)."""
    store = k9.Store(cache)
    problems = store.check_index()
    if not problems:
        return True, False, ""
    before = {(r.uri, r.timestamp) for r in store.list_prefix("")}
    _, left = store.rebuild_index()
    after = {(r.uri, r.timestamp) for r in store.list_prefix("")}
    still = store.check_index()
    bad = bool(left or still or not before <= after)
    return False, bad, f"{left or still or sorted(before - after)[:3]}" if bad else ""


async def run(cycles: int, check: int, seed: int, fresh_every: int, sync: str) -> int:
    rng = random.Random(seed)
    counts = dict.fromkeys(
        ("failed", "checked", "lost", "torn", "crashed", "unclean", "bad_rebuild", "unreadable"),
        0,
    )
    received = Received()
    total_received = 0
    generation = 0
    numbers = itertools.count()
    check_times: list[float] = []
    peak_rss = 0.0
    read_whole: dict[Path, tuple[int, int]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wwwproxy-kill9-") as tmp:
        cache = Path(tmp) / "cache0"
        log = Path(tmp) / "wwwproxy.log"
        origin, origin_port = await k9.start_origin()
        timeout = aiohttp.ClientTimeout(total=30)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                for cycle in range(cycles + 1):
                    problem = False
                    port = k9.free_port()
                    proxy = f"http://127.0.0.1:{port}"
                    try:
                        proc = await k9.serve(cache, port, "offline", log, sync)
                    except AssertionError as exc:
                        counts["crashed"] += 1
                        counts["failed"] += 1
                        print(f"cycle {cycle}: did not start: {str(exc)[-300:]}")
                        break
                    for n in sorted(received)[-check:]:
                        url = f"http://127.0.0.1:{origin_port}/obj/{n}"
                        t0 = time.perf_counter()
                        try:
                            async with session.get(url, proxy=proxy) as reply:
                                body = await reply.read()
                                status = reply.status
                        except (aiohttp.ClientError, TimeoutError):
                            status, body = 0, b""
                        check_times.append(time.perf_counter() - t0)
                        counts["checked"] += 1
                        if status != 200:
                            counts["lost"] += 1
                            problem = True
                        elif body != k9.body_of(n):
                            counts["torn"] += 1
                            problem = True
                    peak_rss = max(peak_rss, rss_mib(proc.pid))
                    if cycle == cycles:
                        proc.send_signal(signal.SIGTERM)
                        proc.wait(30)
                        break
                    if cycle and cycle % fresh_every == 0:  # this cache checked: a fresh one
                        proc.send_signal(signal.SIGTERM)
                        proc.wait(30)
                        shutil.rmtree(cache)
                        generation += 1
                        cache = Path(tmp) / f"cache{generation}"
                        total_received += len(received)
                        received.clear()
                        read_whole.clear()
                        proc = await k9.serve(cache, port, "offline", log, sync)
                    async with session.post(
                        f"{proxy}/control/?format=json",
                        data={"mode": "online"},
                        headers={"X-Wwwproxy-Request": "1"},
                    ) as reply:
                        assert reply.status == 200, await reply.text()
                    stop = asyncio.Event()
                    clients = [
                        asyncio.create_task(
                            k9.client(session, proxy, origin_port, numbers, stop, received)
                        )
                        for _ in range(k9.CLIENTS)
                    ]
                    await asyncio.sleep(rng.uniform(0.3, 1.2))
                    peak_rss = max(peak_rss, rss_mib(proc.pid))
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(10)
                    stop.set()
                    await asyncio.gather(*clients)
                    clean, bad, text = index_state(cache)
                    counts["unclean"] += not clean
                    if bad:
                        counts["bad_rebuild"] += 1
                        problem = True
                        print(f"cycle {cycle}: rebuild: {text}")
                    try:
                        read_changed_files(cache, read_whole)
                    except Exception as exc:  # noqa: BLE001 (counted and shown)
                        counts["unreadable"] += 1
                        problem = True
                        print(f"cycle {cycle}: warcio: {exc}")
                    counts["failed"] += problem
                    if (cycle + 1) % 20 == 0:
                        print(
                            f"cycle {cycle + 1:4}: received {total_received + len(received):6}  "
                            f"checked {counts['checked']:6}  lost {counts['lost']}  "
                            f"torn {counts['torn']}  {time.monotonic() - started:6.0f} s",
                            flush=True,
                        )
        finally:
            await origin.cleanup()
        tracebacks = log.read_text(errors="replace").count("Traceback")
    counts["crashed"] += tracebacks
    check_times.sort()
    p50 = statistics.median(check_times) * 1000 if check_times else 0.0
    p99 = check_times[int(len(check_times) * 0.99) - 1] * 1000 if check_times else 0.0
    print()
    print("| cycles | failed | received whole | offline checks | lost | torn served | crashed |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {cycles} | {counts['failed']} | {total_received + len(received)} | "
        f"{counts['checked']} | "
        f"{counts['lost']} | {counts['torn']} | {counts['crashed']} |"
    )
    print()
    print(
        f"index check not clean before rebuild: {counts['unclean']} of {cycles}; "
        f"rebuilds that left problems or lost records: {counts['bad_rebuild']}; "
        f"unreadable WARC: {counts['unreadable']}; tracebacks: {tracebacks}"
    )
    print(
        f"proxy peak RSS {peak_rss:.0f} MiB; offline check p50 {p50:.1f} ms, p99 {p99:.1f} ms; "
        f"{time.monotonic() - started:.0f} s"
    )
    bad = counts["failed"] + counts["crashed"]
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--check", type=int, default=k9.CHECKED_PER_CYCLE, help="per cycle")
    parser.add_argument("--seed", type=int, default=k9.SEED)
    parser.add_argument(
        "--fresh-every",
        type=int,
        default=25,
        help="cycles on one cache before a fresh one (each cycle's checks read the whole cache)",
    )
    parser.add_argument(
        "--sync",
        choices=("write", "group", "flush"),
        default="write",
        help="the proxy's sync setting (default: write, its default)",
    )
    args = parser.parse_args()
    # the origin's writes to a killed proxy fail by design: not worth a traceback each
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    return asyncio.run(run(args.cycles, args.check, args.seed, args.fresh_every, args.sync))


if __name__ == "__main__":
    sys.exit(main())
