"""Benchmark of the command pages that list the cache: ``/``, ``/index/`` and one host's pages.

Builds (once, then reused) a cache of 100,000 pages over 200 hosts, one host holding 20,000,
the rest a skewed spread; a tenth of the pages have a second capture (half of those a
revisit), statuses and types vary, captures are spread over a year and each file's mtime is its
newest capture's, as recording leaves it.  The WARC files are written with the real
``build_exchange``/``append_exchange`` and the index lines are the store's own, sorted into
``index/index.cdxj`` with ``write_index``: what a long-used cache looks like after compaction.

The proxy (``wwwproxy.app.start`` with a ``Config`` on port 0) runs in a child process (this
file with ``--serve``), so its RSS is its own; this process sends real HTTP GETs with aiohttp
to ``/``, ``/index/``, the big host's first page, a page in its middle, its time and size
orders, and a small host's page, one at a time; then every host's page in turn, twice (a
random order and page each).  Printed: each page's first (cold) time, p50 and p99 of the
following requests, its size, and the proxy's RSS after start, after the run, and after 20 s
idle (the child runs ``serve``'s housekeeping every 2 s and lets listings go after 15 s idle,
where ``serve`` waits 10 minutes).

Run:  .venv/bin/python bench/index_pages_bench.py                (build ~2 min the first time)
      .venv/bin/python bench/index_pages_bench.py --pages 6000 --big 1200 --repeat 20
      .venv/bin/python bench/index_pages_bench.py --source /tmp/before   (another checkout's
      wwwproxy serves the same cache: before/after)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from procs import close_and_wait  # bench/procs.py

BIG_HOST = "big.example"
WORDS = [
    "about", "api", "archive", "assets", "blog", "css", "docs", "en", "files", "img", "news",
    "p", "search", "static", "user", "v1", "wiki", "2024", "2025", "item", "tag", "page",
]  # fmt: skip
TYPES = [("text/html", 6), ("image/png", 2), ("text/css", 1), ("application/javascript", 1)]
STATUSES = [(200, 90), (404, 4), (301, 3), (500, 1), (304, 2)]


def _pick(rng: random.Random, weighted: list[tuple[object, int]]) -> object:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


def host_sizes(pages: int, hosts: int, big: int) -> list[tuple[str, int]]:
    """(host, pages) for every host: one big host, the others a skewed (1/rank) spread."""
    rest = pages - big
    weights = [1 / (rank + 5) for rank in range(hosts - 1)]
    total = sum(weights)
    sizes = [max(1, int(rest * w / total)) for w in weights]
    sizes[0] += rest - sum(sizes)
    names = [f"www.site{n:03d}.{('com', 'org', 'net', 'de')[n % 4]}" for n in range(hosts - 1)]
    return [(BIG_HOST, big), *zip(names, sizes, strict=True)]


def page_urls(rng: random.Random, host: str, count: int) -> Iterator[str]:
    seen: set[str] = set()
    while len(seen) < count:
        depth = rng.randint(1, 4)
        path = "/".join(rng.choice(WORDS) for _ in range(depth))
        url = f"http://{host}/{path}/{rng.randrange(10**6)}.html"
        if rng.random() < 0.15:
            url += f"?id={rng.randrange(10**4)}&sort=asc"
        if url not in seen:
            seen.add(url)
            yield url


def build(root: Path, pages: int, hosts: int, big: int, seed: int = 1) -> None:
    """Write the cache at ``root`` with the real WARC writer and the store's index lines."""
    from scale_cache import write_capture  # bench/scale_cache.py

    from wwwproxy.archive.cdxj import write_index
    from wwwproxy.archive.store import Store
    from wwwproxy.archive.warc.record import PreviousPayload

    rng = random.Random(seed)
    store = Store(root)
    end = datetime(2025, 6, 1, tzinfo=UTC)
    lines = []
    started = time.monotonic()
    done = 0
    for host, count in host_sizes(pages, hosts, big):
        for url in page_urls(rng, host, count):
            mime = str(_pick(rng, TYPES))
            body = hashlib.sha256(url.encode()).hexdigest().encode() * rng.randint(2, 40)
            when = end - timedelta(seconds=rng.randrange(365 * 86400))
            captures = 1 if rng.random() >= 0.1 else 2
            previous: PreviousPayload | None = None
            for n in range(captures):
                status = int(_pick(rng, STATUSES))  # type: ignore[call-overload]
                if n and rng.random() < 0.5:
                    status = 200
                else:
                    body = body + b"!" if n else body
                new, previous = write_capture(store, url, mime, body, when, previous, status)
                lines += new
                if n + 1 < captures:
                    when += timedelta(seconds=rng.randrange(1, 30 * 86400))
            done += 1
            if done % 10000 == 0:
                rate = done / (time.monotonic() - started)
                print(f"  {done} pages written ({rate:.0f}/s)", file=sys.stderr)
    write_index(store.index.index_path, lines)
    (root / ".bench-complete").write_text(f"{pages} {hosts} {big}\n")


# ---------------------------------------------------------------------------------------------
# the proxy, in its own process


#: the bench's idle time before kept host listings are let go (LISTING_IDLE, in versions
#: that keep them; the catalog's pages keep none)
LET_GO_AFTER = 15.0


def serve(cache: Path) -> None:
    """Run the proxy on the cache until stdin closes; print its port first."""
    from wwwproxy import allocator
    from wwwproxy.app import compact_loop, give_back_loop, start
    from wwwproxy.commands import listing
    from wwwproxy.config import Config

    allocator.limit_arenas()  # as `wwwproxy serve` does
    allocator.fix_mmap_threshold()
    listing.LISTING_IDLE = LET_GO_AFTER  # (10 minutes in `serve`: too long to wait for here)

    async def main() -> None:
        running = await start(Config(listen_port=0, cache=cache))
        # serve's housekeeping, every 2 s instead of a minute: idle listings let go, memory
        # given back
        housekeeping = asyncio.create_task(compact_loop(running.services.store, every=2.0))
        trimming = asyncio.create_task(give_back_loop(every=2.0))
        print(running.port, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes it (or dies)
        housekeeping.cancel()
        trimming.cancel()
        await running.stop()

    asyncio.run(main())


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def measure(port: int, pid: int, repeat: int, small: str) -> None:
    base = f"http://127.0.0.1:{port}"
    big = f"/index/http/{BIG_HOST}/"
    pages = [
        ("/", "/"),
        ("/index/", "/index/"),
        ("big host, page 1", big),
        ("big host, page 100", big + "?page=100"),
        ("big host, by time", big + "?sort=time"),
        ("big host, by size", big + "?sort=size&page=7"),
        ("small host", f"/index/http/{small}/"),
        ("big host, JSON", big + "?format=json&page=3"),
    ]
    rss0, _ = rss_mb(pid)
    print(f"proxy RSS after start: {rss0:.0f} MB")
    print(f"{'page':<22}{'cold ms':>9}{'p50 ms':>9}{'p99 ms':>9}{'KB':>8}{'status':>8}")
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for label, path in pages:
            times = []
            size = status = 0
            for _ in range(repeat + 1):
                t0 = time.perf_counter()
                async with session.get(base + path) as resp:
                    body = await resp.read()
                    status = resp.status
                times.append((time.perf_counter() - t0) * 1000)
                size = len(body)
            rest = times[1:]
            print(
                f"{label:<22}{times[0]:9.1f}{statistics.median(rest):9.1f}"
                f"{pct(rest, 99):9.1f}{size / 1024:8.0f}{status:8d}"
            )
        # every host's page in turn, twice: first visits (each host's listing is built), then
        # again (kept, unless dropped to stay within the memory bound)
        async with session.get(base + "/index/?format=json") as resp:
            hosts = [h["index"] for h in (await resp.json())["hosts"]]
        rng = random.Random(7)
        for label in ("every host, 1st visit", "every host, 2nd visit"):
            times = []
            for path in hosts:
                args = f"?sort={rng.choice(['name', 'time', 'size'])}&page={rng.randint(1, 3)}"
                t0 = time.perf_counter()
                async with session.get(base + path + args) as resp:
                    await resp.read()
                    assert resp.status == 200, (path, resp.status)
                times.append((time.perf_counter() - t0) * 1000)
            print(
                f"{label:<22}{'':>9}{statistics.median(times):9.1f}{pct(times, 99):9.1f}"
                f"{'':>8}{len(times):>8}"
            )
    rss1, hwm = rss_mb(pid)
    print(f"proxy RSS after the run: {rss1:.0f} MB (peak {hwm:.0f} MB)")
    await asyncio.sleep(LET_GO_AFTER + 5)
    rss2, _ = rss_mb(pid)
    print(
        f"proxy RSS after {LET_GO_AFTER + 5:.0f} s idle (the listings let go): {rss2:.0f} MB "
        f"({rss2 - rss0:+.0f} MB from start)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--big", type=int, default=20_000, help="pages of the biggest host")
    parser.add_argument("--repeat", type=int, default=30, help="timed requests per page")
    parser.add_argument("--cache", type=Path, help="where the cache is built (and kept)")
    parser.add_argument("--source", type=Path, help="a checkout whose wwwproxy serves")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    cache = args.cache or Path(tempfile.gettempdir()) / (
        f"wwwproxy-index-pages-{args.pages}-{args.hosts}-{args.big}"
    )
    if not (cache / ".bench-complete").exists():
        print(f"building {args.pages} pages over {args.hosts} hosts in {cache} ...")
        t0 = time.monotonic()
        build(cache, args.pages, args.hosts, args.big)
        print(f"built in {time.monotonic() - t0:.0f} s")
    small = host_sizes(args.pages, args.hosts, args.big)[-1][0]
    env = dict(os.environ)
    if args.source:
        env["PYTHONPATH"] = str(args.source)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(cache)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        asyncio.run(measure(port, proc.pid, args.repeat, small))
    finally:
        close_and_wait(proc, 30)


if __name__ == "__main__":
    main()
