"""Soak: wwwproxy under steady mixed load for a long time; memory, open files and p99 must stay
flat (not run by CI).

``python -m wwwproxy serve`` runs in its own process against an origin in this process (pages of
1 to 60 KB, some slow). A fixed request rate (default 100/s) of: hits of pages recorded earlier
(60%), misses of new pages (30%), command pages (5%: ``/``, ``/index/``, the host index, a
search) and revalidations with ``Cache-Control: max-age=0`` (5%); every ``--switch-every``
seconds the proxy goes offline for five seconds (misses are then queued) and back online.
Every 30 s it prints the proxy's RSS (alone, and with the helper processes it started), its open
files, the window's requests, errors and p50/p99, and how many recorded pages the search index
has yet to take in (a backlog waits in memory); at the end the table's first, last and
peak, and tried / failed / lost / crashed ("lost": a page answered whole online that was not
served offline afterwards).  After the first ten minutes (caches filling; ``SOAK_WARM_UP``
seconds) it also prints the RSS trend, the least-squares slope over the samples, in MiB a
minute: one sample taken during a burst does not decide it.

Run:  python bench/soak.py                  (an hour, as the reliability issue asks)
      python bench/soak.py --duration 300   (five minutes)
      python bench/soak.py --pages 20000    (the same pages again once 20,000 are recorded)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import free_port, wait_for_port  # noqa: E402

SAMPLE_EVERY = float(os.environ.get("SOAK_SAMPLE_EVERY", 30))
WORDS = [
    "cache",
    "proxy",
    "offline",
    "archive",
    "page",
    "browser",
    "index",
    "search",
    "fetch",
    "queue",
]


#: seconds of warm-up (caches filling) before memory is expected to stay flat
WARM_UP = float(os.environ.get("SOAK_WARM_UP", 600))


def slope(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of (t, value) points: a trend that one sample taken during a
    burst (the queue fetched on going online) does not decide."""
    mt = statistics.fmean(t for t, _ in points)
    mv = statistics.fmean(v for _, v in points)
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / var if var else 0.0


#: the words pages are cut from (made once: making 9,000 random words per page, twice per
#: request, made this process the bottleneck of its own load)
_TEXT = " ".join(random.Random(0).choice(WORDS) for _ in range(200_000))


def page(n: int) -> bytes:
    """Page ``n``: 1 to 60 KB of the words, the same bytes every time."""
    rng = random.Random(n)
    size = rng.randrange(150, 9000) * 7
    at = _TEXT.find(" ", rng.randrange(len(_TEXT) - size - 10)) + 1
    words = _TEXT[at : at + size].rstrip()
    return f"<html><title>page {n}</title><body><p>{words}</p></body></html>".encode()


async def start_origin() -> tuple[web.AppRunner, int]:
    async def handle(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n % 50 == 0:
            await asyncio.sleep(0.5)  # a slow page now and then
        return web.Response(
            body=page(n), content_type="text/html", headers={"Cache-Control": "max-age=60"}
        )

    app = web.Application()
    app.router.add_get("/p/{n}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (its search-text helper), from /proc: each thread lists
    the children it started."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    return found


def proc_stats(pid: int) -> tuple[float, float, int]:
    """(RSS in MiB of the process, of it and the processes it started, its open file
    descriptors)."""
    own = _rss_mib(pid)
    total = own
    for child in _children(pid):
        with contextlib.suppress(OSError):  # gone meanwhile
            total += _rss_mib(child)
    return own, total, len(os.listdir(f"/proc/{pid}/fd"))


class Window:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0

    def p(self, q: float) -> float:
        if len(self.latencies) < 2:  # a window with (almost) nothing answered: a stall
            return float("nan")
        return statistics.quantiles(self.latencies, n=100)[int(q) - 1] * 1000


async def soak(args: argparse.Namespace, tmp: Path) -> int:
    origin, oport = await start_origin()
    port = free_port()
    log = tmp / "wwwproxy.log"
    conf = tmp / "wwwproxy.yaml"
    conf.write_text("request_changed: 0\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "wwwproxy", "serve", "-c", str(conf), "--cache", str(tmp / "c")]
        + ["--listen", f"127.0.0.1:{port}", "--mode", "online"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    proxy = f"http://127.0.0.1:{port}"
    api = {"X-Wwwproxy-Request": "1"}
    tried = failed = crashed = 0
    #: each failed request: when, what, and why (printed as it happens and at the end)
    failures: list[str] = []
    #: mode switches begun so far: a request that overlaps one may be answered in either mode
    switches = 0
    lost = -1  # not known until the offline check at the end
    answered_online: set[int] = set()
    #: the same, in a list to pick from (a tuple of the set per request made the client
    #: itself the bottleneck after a few minutes: O(pages) per request)
    answered_list: list[int] = []
    next_new = 0
    offline = False
    window = Window()
    rows: list[tuple[float, float, int, int, int, float, float, float, int]] = []
    rng = random.Random(1)
    try:
        await wait_for_port(port, proc, "wwwproxy", 30, lambda: log.read_text()[-2000:])
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as session:

            async def one() -> None:
                nonlocal tried, failed, next_new
                r = rng.random()
                if r < 0.6 and answered_online:
                    n = rng.choice(answered_list)
                    url, headers = f"http://127.0.0.1:{oport}/p/{n}", {}
                elif (r < 0.9 or not answered_online) and (not args.pages or next_new < args.pages):
                    n, next_new = next_new, next_new + 1
                    url, headers = f"http://127.0.0.1:{oport}/p/{n}", {}
                elif r < 0.9:  # --pages all made: fetched again and recorded (a revisit)
                    n = rng.choice(answered_list)
                    url = f"http://127.0.0.1:{oport}/p/{n}"
                    headers = {"Cache-Control": "no-cache"}
                elif r < 0.95:
                    n = -1
                    url = rng.choice(
                        [
                            f"{proxy}/",
                            f"{proxy}/index/",
                            f"{proxy}/index/http/127.0.0.1:{oport}/",
                            f"{proxy}/search/?q={rng.choice(WORDS)}",
                        ]
                    )
                    headers = {}
                else:
                    if not answered_online:
                        return
                    n = rng.choice(answered_list)
                    url = f"http://127.0.0.1:{oport}/p/{n}"
                    headers = {"Cache-Control": "max-age=0"}
                tried += 1
                start, switches_before = time.monotonic(), switches
                why = ""
                try:
                    via = None if url.startswith(proxy) else proxy
                    async with session.get(url, proxy=via, headers=headers) as reply:
                        body = await reply.read()
                    window.latencies.append(time.monotonic() - start)
                    steady = switches == switches_before  # no mode switch while it ran
                    if n >= 0 and reply.status == 200 and body == page(n) and not offline:
                        if n not in answered_online:
                            answered_online.add(n)
                            answered_list.append(n)
                    elif reply.status == 503 and (offline or not steady):
                        pass  # queued while offline, or sent just before going online
                    elif reply.status >= 500:
                        why = f"{reply.status} {reply.reason}: {body[:200]!r}"
                except (aiohttp.ClientError, OSError, TimeoutError) as error:
                    why = f"{type(error).__name__}: {error}"
                if why:
                    failed += 1
                    window.errors += 1
                    failures.append(
                        f"at {start - started:.1f} s, after {time.monotonic() - start:.2f} s, "
                        f"{'offline' if offline else 'online'}"
                        f"{'' if switches == switches_before else ' (mode switched)'}: "
                        f"GET {url} {headers or ''} -> {why}"
                    )
                    print(f"failed {failures[-1]}", flush=True)

            async def search_behind() -> int:
                """Pages recorded that the search index has not taken in yet (-1: unknown):
                a backlog holds their payloads in memory, so it shows as memory."""
                try:
                    async with session.get(f"{proxy}/?format=json", headers=api) as reply:
                        data = await reply.json()
                    return max(0, int(data["pages"]) - int(data["search_indexed"]))
                except (aiohttp.ClientError, OSError, TimeoutError, ValueError, KeyError):
                    return -1

            async def switch(mode: str) -> None:
                nonlocal offline, switches
                offline = mode == "offline"
                switches += 1
                async with session.post(
                    f"{proxy}/control/?format=json", data={"mode": mode}, headers=api
                ) as reply:
                    await reply.read()

            async def switching() -> None:
                """Offline for five seconds every ``--switch-every`` seconds, beside the load
                (which goes on at the same rate: offline is when misses are queued)."""
                while True:
                    await asyncio.sleep(args.switch_every)
                    await switch("offline")
                    await asyncio.sleep(5)
                    await switch("online")

            async def sampling() -> None:
                nonlocal window
                next_sample = started + SAMPLE_EVERY
                while True:
                    await asyncio.sleep(max(0.0, next_sample - time.monotonic()))
                    now = time.monotonic()
                    rss, with_helpers, fds = proc_stats(proc.pid)
                    done, window = window, Window()
                    behind = await search_behind()
                    row = (now - started, rss, fds, len(done.latencies), done.errors,
                           done.p(50), done.p(99), with_helpers, behind)  # fmt: skip
                    rows.append(row)
                    print(f"{row[0]:>6.0f} {row[1]:>8.0f} {row[7]:>8.0f} {row[2]:>5} {row[3]:>6} "
                          f"{row[4]:>5} {row[5]:>7.1f} {row[6]:>7.1f} {row[8]:>13}",
                          flush=True)  # fmt: skip
                    next_sample += SAMPLE_EVERY

            started = time.monotonic()
            tasks: set[asyncio.Task[None]] = set()
            interval = 1 / args.rate
            tick = started
            print(f"{'t s':>6} {'RSS MiB':>8} {'+helper':>8} {'fds':>5} {'reqs':>6} {'errs':>5} "
                  f"{'p50 ms':>7} {'p99 ms':>7} {'search behind':>13}", flush=True)  # fmt: skip
            background = [asyncio.create_task(switching()), asyncio.create_task(sampling())]
            while time.monotonic() - started < args.duration:
                if proc.poll() is not None:
                    crashed += 1
                    break
                task = asyncio.create_task(one())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                tick += interval
                await asyncio.sleep(max(0.0, tick - time.monotonic()))
            for job in background:
                job.cancel()
            await asyncio.gather(*tasks, *background, return_exceptions=True)

            # everything answered whole online is served offline afterwards
            await switch("offline")
            lost = 0
            for n in sorted(answered_online):
                async with session.get(f"http://127.0.0.1:{oport}/p/{n}", proxy=proxy) as reply:
                    if reply.status != 200 or await reply.read() != page(n):
                        lost += 1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        await origin.cleanup()
    tracebacks = log.read_text(errors="replace").count("Traceback")
    print()
    if rows:
        rss = [r[1] for r in rows]
        fds = [r[2] for r in rows]
        p99 = [r[6] for r in rows if r[6] == r[6]]
        both = [r[7] for r in rows]
        print(f"RSS MiB first {rss[0]:.0f}, last {rss[-1]:.0f}, peak {max(rss):.0f}")
        print(
            f"RSS MiB with helpers first {both[0]:.0f}, last {both[-1]:.0f}, peak {max(both):.0f}"
        )
        print(f"open files first {fds[0]}, last {fds[-1]}, peak {max(fds)}")
        settled = [(r[0], r[1]) for r in rows if r[0] >= WARM_UP]
        if len(settled) >= 3:
            print(
                f"RSS after the first {WARM_UP / 60:.3g} minutes: median of the first five "
                f"samples {statistics.median(m for _, m in settled[:5]):.0f} MiB, of the last "
                f"five {statistics.median(m for _, m in settled[-5:]):.0f} MiB; trend "
                f"{slope(settled) * 60:+.2f} MiB a minute (least squares)"
            )
        if p99:
            print(f"p99 ms first {p99[0]:.1f}, last {p99[-1]:.1f}, worst {max(p99):.1f}")
        behind = [r[8] for r in rows if r[8] >= 0]
        if behind:
            print(f"search index behind by at most {max(behind)} pages, at the end {behind[-1]}")
    for failure in failures[:20]:
        print(f"failed {failure}")
    print(
        f"tried {tried}, failed {failed}, lost {lost if lost >= 0 else '-'}, "
        f"crashed {crashed}, tracebacks in the log {tracebacks}"
    )
    return 1 if crashed or tracebacks else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--switch-every", type=float, default=300.0, help="seconds")
    parser.add_argument(
        "--pages",
        type=int,
        default=0,
        help="at most this many distinct pages (0: a new page for every miss); once all are "
        "recorded, misses fetch a known page again (Cache-Control: no-cache) and the proxy "
        "records a revisit: memory that grows with the number of pages kept (the host page "
        "list, the index) then stops growing, and what is left is a leak",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wwwproxy-soak-") as tmp:
        return asyncio.run(soak(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
