"""The rows: each a set of legs (a server, or a client variant) measured in interleaved runs
(leg after leg, then again), with the server's CPU time, peak RSS and access-log outcomes."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import ssl
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from .load import (
    Run,
    client_load,
    describe,
    log_offset,
    new_connection_costs,
    run_wrk,
    served_as,
)
from .processes import Server
from .servers import MIXED_KIB, SIZES, URL_COUNTS

MISS_STRIDE = 10_000_000  # each cold-miss run starts its URL numbers this far from the last
HANDSHAKES = 50  # new connections timed for the handshake cost
IDLE_SHARE = 0.05  # a server using less of a core than this is idle again after a run
IDLE_QUIET = 3  # ... for this many quarter seconds in a row (not one wait for the disk)
IDLE_LIMIT = 60.0  # seconds at most that a run waits for its server to be idle

#: the cold-miss rows: key -> (path under the origin, title)
COLD_ROWS = {
    "misses-1k": ("/1k/", "online cold misses 1 KB, 8 conns"),
    "misses-mixed": ("/mixed/", "online cold misses 1 KB-1 MB, 8 conns"),
}


@dataclasses.dataclass
class Leg:
    """One server (or client variant) in one row: its runs and its peak RSS after the row."""

    label: str
    server: Server
    runs: list[Run] = dataclasses.field(default_factory=list)
    rss_kib: int | None = None

    def median(self, attr: str) -> float:
        values = [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None]
        return statistics.median(values) if values else float("nan")

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.runs)

    @property
    def served(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for r in self.runs:
            total.update(r.served)
        return total


@dataclasses.dataclass
class Row:
    key: str
    title: str
    legs: list[Leg]
    subjects: list[str]  # labels of the legs compared with the others (wwwproxy's)
    notes: list[str] = dataclasses.field(default_factory=list)

    def leg(self, label: str) -> Leg | None:
        return next((leg for leg in self.legs if leg.label == label and leg.runs), None)


@dataclasses.dataclass
class Setup:
    """What every row's load needs: where, against which origin, how long."""

    tmp: Path
    origin: str  # 127.0.0.1:PORT of nginx's plain-HTTP port
    runs: int
    duration: float


def fmt(value: float | None, spec: str) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return format(value, spec)


async def wait_idle(server: Server) -> float:
    """Seconds until ``server`` uses less than IDLE_SHARE of a core, IDLE_QUIET quarter seconds
    in a row (warcprox writes its WARC records from a queue after answering; any server may
    have work left after a run)."""
    start = time.monotonic()
    before = server.stats()
    quiet_since: float | None = None
    quiet = 0
    while time.monotonic() - start < IDLE_LIMIT:
        last = time.monotonic()
        await asyncio.sleep(0.25)
        after, now = server.stats(), time.monotonic()
        if before is None or after is None:
            return now - start
        if after[0] - before[0] <= IDLE_SHARE * (now - last):
            quiet_since = last if quiet_since is None else quiet_since
            quiet += 1
            if quiet >= IDLE_QUIET:
                return quiet_since - start
        else:
            quiet_since, quiet = None, 0
        before = after
    return time.monotonic() - start


async def measured(leg: Leg, run: Callable[[], Awaitable[Run]], settle: bool = False) -> Run:
    """One run of ``run()`` with the server's CPU time and access-log outcomes around it; with
    ``settle``, the CPU time until the server is idle again."""
    before = leg.server.stats()
    offset = log_offset(leg.server)
    result = await run()
    if settle:
        result.idle_s = await wait_idle(leg.server)
    after = leg.server.stats()
    if before and after and result.requests:
        result.cpu_us = (after[0] - before[0]) / result.requests * 1e6
    result.served = served_as(leg.server, offset)
    leg.runs.append(result)
    return result


def progress(row: Row, leg: Leg, i: int, runs: int, r: Run) -> None:
    idle = f" +{r.idle_s:.1f}s to idle" if r.idle_s >= 0.25 else ""
    print(
        f"  {row.key:<12} {i + 1}/{runs} {leg.label:<19} {r.rps:>6.0f}/s p50 {r.p50_ms:6.2f} "
        f"p99 {r.p99_ms:7.2f} err {r.errors} cpu {fmt(r.cpu_us, '.0f'):>5}us "
        f"{describe(r.served)}{idle}",
        flush=True,
    )


async def measure_row(
    row: Row, runs: int, load: Callable[[Leg], Awaitable[Run]], settle: bool = False
) -> Row:
    """``runs`` rounds of every leg in turn; then each leg's peak RSS."""
    for i in range(runs):
        for leg in row.legs:
            r = await measured(leg, functools.partial(load, leg), settle)
            progress(row, leg, i, runs, r)
    for leg in row.legs:
        stats = leg.server.stats()
        leg.rss_kib = stats[1] if stats else None
    return row


def make_legs(servers: list[tuple[str, Server]]) -> list[Leg]:
    return [Leg(label, server) for label, server in servers]


async def wrk_leg(setup: Setup, leg: Leg, path: str, first: int, count: int, conns: int) -> Run:
    """wrk against ``leg``'s server: through a proxy the absolute URL, to the origin the path."""
    direct = leg.label == "direct"
    return await run_wrk(
        setup.tmp,
        leg.server.port,
        prefix=path if direct else f"http://{setup.origin}{path}",
        first=first,
        count=count,
        host=setup.origin,
        conns=conns,
        duration=setup.duration,
    )


async def hit_row(setup: Setup, size: str, servers: list[tuple[str, Server]]) -> Row:
    """hits-1k or hits-100k: the same URLs again and again, every one cached."""
    label = {"1k": "1 KB", "100k": "100 KB"}[size]
    row = Row(f"hits-{size}", f"offline hits {label}, 16 conns", make_legs(servers), ["wwwproxy"])
    return await measure_row(
        row,
        setup.runs,
        lambda leg: wrk_leg(setup, leg, f"/{size}/", 0, URL_COUNTS[size], 16),
    )


async def disk_row(setup: Setup, servers: list[tuple[str, Server]]) -> Row:
    """disk-100k: 100 KB hits that wwwproxy reads from disk (its memory cache off)."""
    row = Row("disk-100k", "offline hits 100 KB, from disk", make_legs(servers), ["wwwproxy-disk"])
    return await measure_row(
        row,
        setup.runs,
        lambda leg: wrk_leg(setup, leg, "/100k/", 0, URL_COUNTS["100k"], 16),
    )


async def https_row(
    setup: Setup,
    www: Server,
    tls_port: int,
    http_urls: list[str],
    https_urls: list[str],
    proxy_ca: ssl.SSLContext,
) -> tuple[Row, str]:
    """https-1k: the Python client through wwwproxy over plain HTTP and over https; and the
    cost of a new connection (a line for the report)."""
    row = Row(
        "https-1k",
        "HTTPS offline hits 1 KB, 16 conns",
        make_legs([("wwwproxy http", www), ("wwwproxy https", www)]),
        ["wwwproxy https"],
    )
    www_url = f"http://127.0.0.1:{www.port}"
    contexts: dict[str, tuple[list[str], ssl.SSLContext | bool]] = {
        "wwwproxy http": (http_urls, False),
        "wwwproxy https": (https_urls, proxy_ca),
    }

    async def load(leg: Leg) -> Run:
        urls, ctx = contexts[leg.label]
        return await client_load(urls, www_url, ctx, SIZES["1k"], setup.duration)

    await measure_row(row, setup.runs, load)
    row.notes.append(
        "HTTPS row: a Python aiohttp client in this process (wrk cannot CONNECT), the\n"
        "  same for both legs; it shares the CPUs with wwwproxy (whose cpu % shows which\n"
        "  of the two is the limit)"
    )
    origin_port = int(setup.origin.rsplit(":", 1)[1])
    costs = await new_connection_costs(www, tls_port, origin_port, proxy_ca, HANDSHAKES)
    return row, (
        f"new connection to wwwproxy, median of {HANDSHAKES} (cached leaf):\n  "
        + ", ".join(f"{k} {statistics.median(t) * 1000:.2f} ms" for k, t in costs.items())
    )


def mixed_note(row: Row) -> str:
    """The mixed row's size distribution, and the average response each leg read."""
    sizes = ", ".join(str(k) for k in MIXED_KIB)
    average = sum(MIXED_KIB) / len(MIXED_KIB)
    read = []
    for leg in row.legs:
        requests = sum(r.requests for r in leg.runs)
        if requests:
            read.append(f"{leg.label} {sum(r.bytes for r in leg.runs) / requests / 1024:.0f}")
    return (
        f"misses-mixed: /mixed/N is the body of N's last digit, {sizes} KiB:\n"
        f"  average {average:.1f} KiB; read per response (KiB, headers included):\n  "
        + ", ".join(read)
    )


async def cold_row(setup: Setup, key: str, servers: list[tuple[str, Server]]) -> Row:
    """misses-1k or misses-mixed: each run of each leg asks URLs never asked before (its own
    range of N); the CPU counted until the server is idle again."""
    path, title = COLD_ROWS[key]
    row = Row(key, title, make_legs(servers), [s[0] for s in servers if s[0].startswith("www")])
    first = MISS_STRIDE

    async def load(leg: Leg) -> Run:
        nonlocal first
        r = await wrk_leg(setup, leg, path, first, 0, 8)
        if r.requests >= MISS_STRIDE:
            raise RuntimeError("a cold-miss run went past its URL range")
        first += MISS_STRIDE
        return r

    await measure_row(row, setup.runs, load, settle=True)
    if key == "misses-mixed":
        row.notes.append(mixed_note(row))
    return row
