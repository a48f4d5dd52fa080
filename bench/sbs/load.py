"""The load: wrk (with a Lua script writing a proxy's absolute-form request lines) for plain
HTTP, a Python aiohttp client for the recording passes and the HTTPS row; and how the proxies
say, in their access logs, they served a run."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
from collections import Counter
from pathlib import Path

import aiohttp

from .processes import Server
from .servers import SIZES, URL_COUNTS

WRK = "wrk"
CLIENT_CONCURRENCY = 16  # the Python client's connections (recording passes, HTTPS row)

LUA = r"""
-- wrk script: request() cycles over URL numbers; every thread takes every nthreads-th one.
-- args: prefix first count host nthreads   (count 0: never repeat a number; then each
-- thread takes blocks of ten, so that it goes through every last digit in turn)
local made = 0
function setup(thread)
  thread:set("id", made)
  made = made + 1
end

function init(args)
  prefix = args[1]
  first = tonumber(args[2])
  count = tonumber(args[3])
  headers = { Host = args[4] }
  nthreads = tonumber(args[5])
  n = 0
end

function request()
  local k
  if count > 0 then
    k = (n * nthreads + id) % count
  else
    k = (math.floor(n / 10) * nthreads + id) * 10 + n % 10
  end
  n = n + 1
  return wrk.format("GET", prefix .. string.format("%d", first + k), headers)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d %d %d %d %d\n",
    summary.requests, summary.duration, summary.bytes, e.status, e.connect, e.read, e.write,
    e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def log_offset(server: Server) -> int:
    if server.access_log is None:
        return 0
    try:
        return server.access_log.stat().st_size
    except OSError:
        return 0


def served_as(server: Server, offset: int) -> Counter[str]:
    """Per cache outcome, the requests the proxy logged since ``offset``."""
    counts: Counter[str] = Counter()
    if server.access_log is None:
        return counts
    with server.access_log.open("rb") as f:
        f.seek(offset)
        data = f.read()
    for raw in data.splitlines():
        line = raw.decode("utf-8", "replace")
        if server.name == "Squid":
            parts = line.split()
            # NONE_NONE/000: a connection closed before a request (wrk's at its end)
            if len(parts) > 3 and "/" in parts[3] and not parts[3].startswith("NONE"):
                # _ABORTED: wrk closed the connection at its end with this answer unread
                counts[parts[3].split("/")[0].removesuffix("_ABORTED")] += 1
        elif '"GET ' in line:  # wwwproxy's access log: ... status bytes seconds X-Cache
            counts[f"X-Cache {line.rsplit(None, 1)[-1]}"] += 1
    return counts


def describe(counts: Counter[str]) -> str:
    total = sum(counts.values())
    if not total:
        return "-"
    kind, n = counts.most_common(1)[0]
    text = f"{kind} {100 * n / total:.0f}%"
    return text if n == total else f"{text} (+{total - n} other)"


@dataclasses.dataclass
class Run:
    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float
    bytes: int = 0  # read by the client, headers included (wrk's count)
    cpu_us: float | None = None  # of the server, per request (cold rows: until it was idle)
    idle_s: float = 0.0  # how long after the run the server kept working (cold rows)
    served: Counter[str] = dataclasses.field(default_factory=Counter)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def done_rps(self) -> float:
        """Requests per second until the server was idle again after the run."""
        seconds = self.seconds + self.idle_s
        return self.requests / seconds if seconds else 0.0

    @property
    def cpu_pct(self) -> float | None:
        """The server's CPU use over the run and its time to idle, in % of one core."""
        return None if self.cpu_us is None else self.cpu_us * self.done_rps / 1e4


async def run_wrk(
    tmp: Path,
    port: int,
    *,
    prefix: str,
    first: int,
    count: int,
    host: str,
    conns: int,
    duration: float,
    threads: int = 2,
) -> Run:
    script = tmp / "urls.lua"
    if not script.exists():
        script.write_text(LUA)
    argv = [
        WRK,
        f"-t{threads}",
        f"-c{conns}",
        f"-d{duration:g}s",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(script),
        f"http://127.0.0.1:{port}/",
        "--",
        prefix,
        str(first),
        str(count),
        host,
        str(threads),
    ]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), duration + 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = out.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("RESULT "):
            n, us, got, status, *socket_errors, p50, p99 = (int(x) for x in line.split()[1:])
            return Run(n, us / 1e6, status + sum(socket_errors), p50 / 1000, p99 / 1000, got)
    raise RuntimeError(f"wrk gave no result (exit {proc.returncode}):\n{text}")


def percentile_ms(latencies: list[float], q: float) -> float:
    if not latencies:
        return float("nan")
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def client_pass(
    urls: list[str], proxy: str, ssl_ctx: ssl.SSLContext | bool, size: int
) -> Counter[str]:
    """Each URL once through ``proxy``; per outcome (X-Cache, or what went wrong), a count."""
    outcomes: Counter[str] = Counter()
    pending = iter(urls)
    connector = aiohttp.TCPConnector(limit=CLIENT_CONCURRENCY, ssl=ssl_ctx)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=30), trust_env=False
    ) as session:

        async def worker() -> None:
            for url in pending:
                try:
                    async with session.get(url, proxy=proxy) as response:
                        body = await response.read()
                    if response.status != 200 or len(body) != size:
                        outcomes[f"status {response.status}, {len(body)} bytes"] += 1
                    else:
                        outcomes[response.headers.get("X-Cache", "no X-Cache").split()[0]] += 1
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    outcomes[f"{type(exc).__name__}: {exc}"[:120]] += 1

        await asyncio.gather(*(worker() for _ in range(CLIENT_CONCURRENCY)))
    return outcomes


async def client_load(
    urls: list[str], proxy: str, ssl_ctx: ssl.SSLContext | bool, size: int, duration: float
) -> Run:
    """Keep-alive GETs cycling over ``urls`` for ``duration`` seconds (X-Cache HIT expected)."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(10**12))
    connector = aiohttp.TCPConnector(limit=CLIENT_CONCURRENCY, ssl=ssl_ctx)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=30), trust_env=False
    ) as session:
        end = time.perf_counter() + duration

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < end:
                url = urls[next(counter) % len(urls)]
                start = time.perf_counter()
                try:
                    async with session.get(url, proxy=proxy) as response:
                        body = await response.read()
                    ok = response.status == 200 and len(body) == size
                    ok = ok and response.headers.get("X-Cache") == "HIT"
                except (aiohttp.ClientError, OSError, TimeoutError):
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - start)
                else:
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CLIENT_CONCURRENCY)))
        seconds = time.perf_counter() - start
    return Run(
        len(latencies) + errors,
        seconds,
        errors,
        percentile_ms(latencies, 0.5),
        percentile_ms(latencies, 0.99),
    )


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def new_connection_costs(
    proxy: Server, tls_port: int, origin_port: int, ca: ssl.SSLContext, n: int
) -> dict[str, list[float]]:
    """Seconds for ``n`` new connections each: CONNECT + TLS handshake (the leaf for 127.0.0.1
    was made while recording, so it is cached), then one GET inside; and a plain connection +
    one GET for comparison.  Every answer must be a 200 HIT."""
    times: dict[str, list[float]] = {"handshake": [], "handshake+GET": [], "plain GET": []}
    for i in range(n):
        start = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        try:
            authority = f"127.0.0.1:{tls_port}"
            writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
                raise RuntimeError(f"CONNECT answered {head[:80]!r}")
            await writer.start_tls(ca, server_hostname="127.0.0.1")
            shaken = time.perf_counter()
            path = f"/1k/{i % URL_COUNTS['1k']}"
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
            status, headers, body = await read_response(reader)
            done = time.perf_counter()
            if status != 200 or headers.get("x-cache") != "HIT" or len(body) != SIZES["1k"]:
                raise RuntimeError(f"https GET {path}: {status} {headers.get('x-cache')}")
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        times["handshake"].append(shaken - start)
        times["handshake+GET"].append(done - start)

        start = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        try:
            url = f"http://127.0.0.1:{origin_port}/1k/{i % URL_COUNTS['1k']}"
            writer.write(f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n\r\n".encode())
            status, headers, body = await read_response(reader)
            done = time.perf_counter()
            if status != 200 or headers.get("x-cache") != "HIT":
                raise RuntimeError(f"GET {url}: {status} {headers.get('x-cache')}")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        times["plain GET"].append(done - start)
    return times
