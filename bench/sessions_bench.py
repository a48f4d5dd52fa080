"""Benchmark of the lasttime / prevtime / lastout pages on a 100,000-capture index.

Writes (into a temporary cache) an index of 100,000 captures over 200 hosts, one every 30 s,
sorted into ``index/index.cdxj`` by the real index code (``Index.rebuild``), with payload
lengths; no WARC files (these pages read only the index).  The session log holds 10 sessions:
the last (still open) covers the newest 20,000 captures, the nine before 2,000 each.  The proxy
(``wwwproxy.app.start``, offline) serves it in this process; real HTTP GETs with aiohttp ask
for ``/index/lasttime/`` (the first one collects the session's captures from the index), then
20 times each for: the first page, a page in the middle, oldest first, prevtime5, JSON, 1,000
a page, lastout and ``/``.  Printed: the first time, then p50 and the maximum of each.

Run:  .venv/bin/python bench/sessions_bench.py [--captures 100000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

from wwwproxy.app import start
from wwwproxy.archive.cdxj import CDXJRecord
from wwwproxy.archive.cdxj.line import make_ref
from wwwproxy.archive.sessions import SessionLog
from wwwproxy.archive.store import Store
from wwwproxy.config import Config
from wwwproxy.url.surt import surt

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEP = 30  # seconds between captures


def build(root: Path, captures: int) -> None:
    store = Store(root)
    records = []
    for i in range(captures):
        key = f"http://h{i % 200}.example/p{i:06d}"
        records.append(
            CDXJRecord.build(
                surt(key),
                T0 + timedelta(seconds=i * STEP),
                "response",
                uri=key,
                ref=make_ref(f"x{i}.warc.gz", 0),
                hsc=200,
                mct="text/html",
                rle=500,
                ple=1234 + i % 5000,
            )
        )
    started = time.perf_counter()
    store.index.rebuild(records)
    print(f"index of {captures} captures written in {time.perf_counter() - started:.2f} s")
    end = T0 + timedelta(seconds=captures * STEP)
    start = end - timedelta(seconds=20_000 * STEP)
    spans: list[tuple[datetime, datetime | None]] = [(start, None)]
    for _ in range(9):
        stop = start - timedelta(seconds=100)
        start = stop - timedelta(seconds=2_000 * STEP)
        spans.append((start, stop))
    log = SessionLog(root)
    for begin, stop in reversed(spans):
        log.note("offline", "online", begin)
        if stop is not None:
            log.note("online", "offline", stop)


async def run(root: Path, repeat: int) -> None:
    running = await start(Config(listen_port=0, cache=root, mode="offline"))
    base = f"http://127.0.0.1:{running.port}"
    try:
        async with aiohttp.ClientSession() as session:

            async def get(path: str) -> float:
                started = time.perf_counter()
                async with session.get(base + path) as resp:
                    await resp.read()
                    assert resp.status == 200, (path, resp.status)
                return (time.perf_counter() - started) * 1000

            first = await get("/index/lasttime/")
            print(f"{'/index/lasttime/ (first: collects)':45s} {first:7.1f} ms")
            for path in (
                "/index/lasttime/",
                "/index/lasttime/?page=100",
                "/index/lasttime/?order=asc&page=50",
                "/index/prevtime5/",
                "/index/lasttime/?format=json",
                "/index/lasttime/?per=1000",
                "/index/lastout/",
                "/",
            ):
                times = sorted([await get(path) for _ in range(repeat)])
                print(f"{path:45s} p50 {statistics.median(times):6.1f} ms  max {times[-1]:6.1f} ms")
    finally:
        await running.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cache"
        build(root, args.captures)
        asyncio.run(run(root, args.repeat))


if __name__ == "__main__":
    main()
