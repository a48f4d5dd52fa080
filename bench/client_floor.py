"""The upstream client's own cost: aiohttp's ``ClientSession`` fetching 1 KB from nginx with 8
requests at a time, on uvloop, nothing else (not run by CI).

A recorded cold miss cannot cost less CPU than the client that fetches it; issue 11 asks for
cold misses at Squid's rate (``bench/side_by_side.py --rows misses-1k`` prints Squid's CPU per
miss in the same conditions) while keeping aiohttp as the upstream client.  This prints that
floor: CPU microseconds per request of this process alone (the median of ``--runs``), beside
the requests per second.

Run:  python bench/client_floor.py [--runs 3] [--duration 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from sbs.processes import stop  # bench/sbs/ (run from bench/): nginx and its files
from sbs.servers import make_origin_files, start_nginx

CONCURRENCY = 8  # as the cold-miss row's wrk connections


async def one_run(session: aiohttp.ClientSession, url: str, duration: float) -> tuple[float, float]:
    """(requests per second, CPU µs per request) for ``duration`` seconds of load."""
    done = 0

    async def worker(stop: float) -> None:
        nonlocal done
        i = 0
        while time.monotonic() < stop:
            async with session.get(f"{url}?n={i}") as reply:
                await reply.read()
            done += 1
            i += 1

    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(worker(wall + duration) for _ in range(CONCURRENCY)))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    return done / wall, cpu / done * 1e6


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="wwwproxy-floor-") as name:
        tmp = Path(name)
        cert, _ = make_origin_files(tmp)
        nginx, _ = await start_nginx(tmp, cert)
        try:
            url = f"http://127.0.0.1:{nginx.port}/1k/"
            async with aiohttp.ClientSession() as session:
                await one_run(session, url, 1.0)  # connections made, code warm
                runs = [await one_run(session, url, args.duration) for _ in range(args.runs)]
        finally:
            print(stop(nginx.proc, "nginx"), file=sys.stderr)
    rps = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    print(f"aiohttp client, 1 KB from nginx, {CONCURRENCY} at a time, median of {args.runs}:")
    print(f"  {rps:.0f} requests/s, {cpu:.0f} µs of CPU a request (this process alone)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main_async(args))
    return uvloop.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
