"""Side-by-side speed benchmark: wwwproxy against Squid, with nginx as the origin (not run by CI).

example output (this machine, 2026-11-23: 2 CPUs, Debian's squid 5.7, nginx 1.22.1, wrk 4.1.0;
wwwproxy at 5e19635 plus the work in progress of that moment; 3 min 14 s)::

    2026-11-23 22:28 UTC, vm, 2 CPUs, Python 3.11.7; runs 3 x 5 s
    nginx 127.0.0.1:53109 + TLS :40197 (worker pid 20272), Squid :35059 (pid 20275),
    wwwproxy :44571 (pid 20277)
    record 1k through wwwproxy (online): {'MISS': 1000}
    warm 1k through Squid: {'MISS': 1000}
    record 100k through wwwproxy (online): {'MISS': 500}
    warm 100k through Squid: {'MISS': 500}
    record 1k over https through wwwproxy (online): {'MISS': 1000}
    wwwproxy switched offline: mode: offline; queued: 0
    check 1k through wwwproxy (offline): {'HIT': 1000}
    check 1k through Squid: {'HIT': 1000}
    check 100k through wwwproxy (offline): {'HIT': 500}
    check 100k through Squid: {'HIT': 500}
    check 1k over https through wwwproxy (offline): {'HIT': 1000}
      hits-1k   1/3 Squid           24981/s p50  0.56 p99   1.52 err 0 cpu   36us TCP_MEM_HIT 100%
      hits-1k   1/3 wwwproxy         3152/s p50  4.83 p99   9.65 err 0 cpu  302us X-Cache HIT 100%
      hits-1k   1/3 direct          44762/s p50  0.33 p99   3.48 err 0 cpu   15us -
      hits-1k   2/3 Squid           25960/s p50  0.57 p99   2.98 err 0 cpu   37us TCP_MEM_HIT 100%
      hits-1k   2/3 wwwproxy         3151/s p50  4.89 p99   8.84 err 0 cpu  306us X-Cache HIT 100%
      hits-1k   2/3 direct          71549/s p50  0.20 p99   1.91 err 0 cpu   13us -
      hits-1k   3/3 Squid           22918/s p50  0.69 p99   3.72 err 0 cpu   38us TCP_MEM_HIT 100%
      hits-1k   3/3 wwwproxy         3258/s p50  4.72 p99   7.47 err 0 cpu  300us X-Cache HIT 100%
      hits-1k   3/3 direct          40270/s p50  0.40 p99   2.26 err 0 cpu   15us -
      hits-100k 1/3 Squid            5101/s p50  2.93 p99   6.24 err 0 cpu  188us TCP_MEM_HIT 100%
      hits-100k 1/3 wwwproxy         3101/s p50  5.06 p99   6.06 err 0 cpu  323us X-Cache HIT 100%
      hits-100k 1/3 direct          37626/s p50  0.24 p99  41.27 err 0 cpu   19us -
      hits-100k 2/3 Squid            4649/s p50  3.42 p99   3.67 err 0 cpu  215us TCP_MEM_HIT 100%
      hits-100k 2/3 wwwproxy         3133/s p50  5.04 p99   5.63 err 0 cpu  319us X-Cache HIT 100%
      hits-100k 2/3 direct          28902/s p50  0.50 p99  38.32 err 0 cpu   18us -
      hits-100k 3/3 Squid            3906/s p50  3.81 p99   8.08 err 0 cpu  196us TCP_MEM_HIT 100%
      hits-100k 3/3 wwwproxy         2778/s p50  5.46 p99  11.76 err 0 cpu  334us X-Cache HIT 100%
      hits-100k 3/3 direct          27404/s p50  0.45 p99  40.72 err 0 cpu   19us -
      https-1k  1/3 wwwproxy http    1947/s p50  8.41 p99  14.12 err 0 cpu  331us X-Cache HIT 100%
      https-1k  1/3 wwwproxy https   1551/s p50 10.07 p99  26.37 err 0 cpu  375us X-Cache HIT 100%
      https-1k  2/3 wwwproxy http    1981/s p50  8.17 p99  15.17 err 0 cpu  329us X-Cache HIT 100%
      https-1k  2/3 wwwproxy https   2529/s p50  5.30 p99  12.96 err 0 cpu  336us X-Cache HIT 100%
      https-1k  3/3 wwwproxy http    2441/s p50  6.60 p99  12.80 err 0 cpu  313us X-Cache HIT 100%
      https-1k  3/3 wwwproxy https   1961/s p50  8.14 p99  14.67 err 0 cpu  347us X-Cache HIT 100%
    wwwproxy switched online: mode: online; queued: 0
      misses-1k 1/3 Squid            4591/s p50  1.41 p99 732.38 err 0 cpu  142us TCP_MISS 100%
      misses-1k 1/3 wwwproxy          324/s p50 23.50 p99  54.31 err 0 cpu 3092us X-Cache MISS 100%
      misses-1k 1/3 direct          48222/s p50  0.12 p99   2.99 err 0 cpu   14us -
      misses-1k 2/3 Squid            6573/s p50  1.09 p99 186.08 err 0 cpu  126us TCP_MISS 100%
      misses-1k 2/3 wwwproxy          369/s p50 20.76 p99  40.35 err 0 cpu 2944us X-Cache MISS 100%
      misses-1k 2/3 direct          41880/s p50  0.17 p99   3.21 err 0 cpu   15us -
      misses-1k 3/3 Squid            6608/s p50  0.98 p99  88.36 err 0 cpu  128us TCP_MISS 100%
      misses-1k 3/3 wwwproxy          307/s p50 24.60 p99  45.52 err 0 cpu 2974us X-Cache MISS 100%
      misses-1k 3/3 direct          48374/s p50  0.12 p99   3.00 err 0 cpu   15us -

      server            rps p50 ms  p99 ms errors cpu us/req cpu % peak RSS  served as
    ----------------------------------------------------------------------------------------------
    offline hits 1 KB, 16 conns
      Squid           24981   0.57    2.98      0         37    89   89 MiB  TCP_MEM_HIT 100%
      wwwproxy         3152   4.83    8.84      0        302    96  156 MiB  X-Cache HIT 100%
      direct          44762   0.33    2.26      0         15    66    9 MiB  -
    offline hits 100 KB, 16 conns
      Squid            4649   3.42    6.24      0        196    96   89 MiB  TCP_MEM_HIT 100%
      wwwproxy         3101   5.06    6.06      0        323   100  156 MiB  X-Cache HIT 100%
      direct          28902   0.45   40.72      0         19    53    9 MiB  -
    HTTPS offline hits 1 KB, 16 conns
      wwwproxy http    1981   8.17   14.12      0        329    65  156 MiB  X-Cache HIT 100%
      wwwproxy https   1961   8.14   14.67      0        347    68  156 MiB  X-Cache HIT 100%
    online cold misses 1 KB, 8 conns
      Squid            6573   1.09  186.08      0        128    83  515 MiB  TCP_MISS 100%
      wwwproxy          324  23.50   45.52      0       2974   100  164 MiB  X-Cache MISS 100%
      direct          48222   0.12    3.00      0         15    70    9 MiB  -

    row                               baseline         rps wwwproxy  ratio  target met /direct
    ------------------------------------------------------------------------------------------
    offline hits 1 KB, 16 conns       Squid          24981     3152  0.13x  >= 1.0  NO   0.07x
    offline hits 100 KB, 16 conns     Squid           4649     3101  0.67x  >= 3.0  NO   0.11x
    HTTPS offline hits 1 KB, 16 conns wwwproxy http   1981     1961  0.99x  >= 0.5 yes       -
    online cold misses 1 KB, 8 conns  Squid           6573      324  0.05x  >= 1.0  NO   0.01x
    HTTPS row: a Python aiohttp client in this process (wrk cannot CONNECT), the
      same for both legs; it shares the CPUs with wwwproxy (whose cpu % shows which
      of the two is the limit)
    new connection to wwwproxy, median of 50 (cached leaf):
      handshake 2.46 ms, handshake+GET 3.28 ms, plain GET 0.89 ms
    wwwproxy archive at the end: 7537 WARC file(s), 27 MiB
    wwwproxy: exit 0; Squid: exit 0; nginx: exit 0

What one run does, all on 127.0.0.1, in a temporary directory that is removed afterwards:

* **nginx** (Debian's ``/usr/sbin/nginx``, ``daemon off``, ``worker_processes 1``, access log
  off) is the origin: ``/1k/N`` and ``/100k/N`` for any N are one 1 KiB and one 100 KiB file
  (``try_files``), with ``Cache-Control: max-age=3600`` and nginx's own Last-Modified and ETag,
  on a plain-HTTP port and on a TLS port whose certificate comes from ``trustme``.
* **Squid** (Debian's ``/usr/sbin/squid -N``, one process) with ``cache_mem 256 MB``,
  ``maximum_object_size_in_memory 1 MB``, a 100 MB ``cache_dir ufs``, its access log in the
  temporary directory (wwwproxy always writes an access-log line per request, so both do),
  ``shutdown_lifetime 1 second``, its own service name (``-n``) so that its shared-memory
  segments in /dev/shm cannot clash with another Squid's.  Squid refuses to run as root ("Don't
  run Squid as root, set 'cache_effective_user'!", also with ``cache_effective_user root``):
  when this script runs as root, Squid's directory is chowned to the ``proxy`` user and the
  configuration says ``cache_effective_user proxy`` (the temporary directory is made 0755 so
  that Squid, and nginx's ``nobody`` worker, can reach their files); as any other user Squid
  simply runs as that user.
* **wwwproxy** (``python -m wwwproxy serve`` from this checkout's interpreter) on a fresh cache,
  with ``https_intercept: ["*"]``, the origin's CA as ``upstream_ca`` and the TLS port in
  ``connect_ports``; switched with ``python -m wwwproxy offline|online --proxy`` (should that
  CLI fail to import while the tree is being edited, the same POST /control/ it makes).

Then (every figure is the median of ``--runs`` runs, interleaved Squid, wwwproxy, direct, Squid,
wwwproxy, direct, ...; the load is **wrk** ``-t2 -cC -dDs --latency`` with a Lua script whose
``request()`` writes the proxy's absolute-form request line, ``GET http://127.0.0.1:ORIGIN/1k/N
HTTP/1.1``, cycling over the URLs; wrk sends the path as given, which Squid's access log, full
of absolute URLs, and wwwproxy's X-Cache answers confirm):

1. the URLs (1000 of 1 KiB, 500 of 100 KiB, and the 1000 1 KiB ones over https) are fetched once
   through each proxy (wwwproxy online records them; Squid keeps them), then wwwproxy is switched
   offline, and a second pass checks that each proxy answers every one from its cache;
2. **offline hits 1 KB, 16 conns** and **offline hits 100 KB, 16 conns**: Squid memory hits
   (Squid stays an ordinary online cache: the copies are fresh, max-age=3600, so it serves them
   without asking nginx) against wwwproxy offline hits against nginx direct;
3. **HTTPS offline hits 1 KB**: wrk cannot CONNECT through a proxy, so a Python aiohttp client
   (16 keep-alive connections, in this process) asks wwwproxy for the same 1 KiB URLs over plain
   HTTP and over https (CONNECT, then TLS with the leaf certificate wwwproxy made, verified
   against its CA), interleaved; then the cost of a new connection: CONNECT + TLS handshake with
   the already-made (cached) leaf, and, for comparison, a new plain connection + one GET;
4. wwwproxy switched online again: **online cold misses 1 KB, 8 conns**: URLs never asked before
   (each run its own range of N), so Squid fetches and stores each one and wwwproxy fetches and
   records each one into its WARC; nginx direct for reference.

For each row and server: requests per second, p50 and p99 latency (wrk's), errors (status >= 400
and socket errors), CPU microseconds per request of the server process (utime + stime from
/proc/PID/stat around the run, median over the runs; nginx: its worker) and that as a share of
one core (cpu %: near 100, the server is the limit; well below, the load generator or the
machine is), the server's peak RSS after the row (VmHWM from /proc/PID/status: a high-water
mark, so it only grows from row to row), and how the proxy says it served the requests (counted
from its access log over the run: Squid's TCP_MEM_HIT/TCP_MISS..., wwwproxy's X-Cache).  The
summary puts wwwproxy's rps over Squid's and over direct next to the targets (1 KB hits >= 1.0 x
Squid, 100 KB hits >= 3.0 x Squid, cold misses >= 1.0 x Squid, HTTPS hits >= 0.5 x plain-HTTP
hits).

The machine's CPUs are shared by everything: wrk's two threads, the proxy, nginx (and, for the
HTTPS row, the Python client); on a small machine that caps every figure, direct included.
Squid, nginx and wwwproxy each run one process, so the comparison is per core (wwwproxy has I/O
threads besides its event loop: on misses it goes a little over 100 %).  Other work on the
machine shows as noise: the runs are interleaved so that it hits every server alike.

Everything stops by itself: each child process is stopped in ``finally`` by its PID (SIGTERM,
then SIGKILL after a timeout); the whole run has a deadline (``--budget``) and SIGTERM ends it
the same way.  Should this process be killed outright, the servers get SIGTERM from the kernel
(PR_SET_PDEATHSIG; not Squid as root, which changes user and so loses it), and a watchdog (this
file with ``--watchdog``, in its own session, reading the servers' PIDs on a pipe) sees the pipe
close, stops whichever of those PIDs still run the same command line, and removes Squid's
/dev/shm segments and the temporary directory.

Run:  .venv/bin/python bench/side_by_side.py                      (3 to 4 minutes)
      .venv/bin/python bench/side_by_side.py --rows misses-1k     (the cold misses alone)
      .venv/bin/python bench/side_by_side.py --duration 10 --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import dataclasses
import datetime
import os
import platform
import pwd
import random
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import aiohttp
from procs import free_port, nginx_preamble, wait_for_port  # bench/procs.py (run from bench/)

REPO = Path(__file__).resolve().parent.parent
NGINX = "/usr/sbin/nginx"
SQUID = "/usr/sbin/squid"
WRK = "wrk"

SIZES = {"1k": 1024, "100k": 100 * 1024}
URL_COUNTS = {"1k": 1000, "100k": 500}  # distinct URLs cycled over in the hit rows
MISS_STRIDE = 10_000_000  # each cold-miss run starts its URL numbers this far from the last
HANDSHAKES = 50  # new connections timed for the handshake cost
CLIENT_CONCURRENCY = 16  # the Python client's connections (recording passes, HTTPS row)
STOP_TIMEOUT = 10.0  # seconds between SIGTERM and SIGKILL
START_TIMEOUT = 20.0

TARGETS = {
    "hits-1k": 1.0,
    "hits-100k": 3.0,
    "disk-100k": 0.5,
    "misses-1k": 1.0,
    "https-1k": 0.5,
}

LUA = r"""
-- wrk script: request() cycles over URL numbers; every thread takes every nthreads-th one.
-- args: prefix first count host nthreads   (count 0: never repeat a number)
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
  local k = n * nthreads + id
  n = n + 1
  if count > 0 then
    k = k % count
  end
  return wrk.format("GET", prefix .. string.format("%d", first + k), headers)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d %d %d %d\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


# --- processes -------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when this process dies (Linux; best effort)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


#: the watchdog's stdin: each server's PID is written to it (see run_watchdog)
WATCHDOG: subprocess.Popen[bytes] | None = None


def spawn(argv: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
    if WATCHDOG is not None and WATCHDOG.stdin is not None:
        with contextlib.suppress(OSError):
            WATCHDOG.stdin.write(f"{proc.pid}\n".encode())
            WATCHDOG.stdin.flush()
    return proc


def start_watchdog(tmp: Path, service: str, keep: bool) -> subprocess.Popen[bytes]:
    """This file run with --watchdog: it outlives this process if that is killed outright."""
    argv = [sys.executable, __file__, "--watchdog", str(tmp), service, "keep" if keep else "-"]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)


def run_watchdog(tmp: str, service: str, keep: bool) -> int:
    """Read the servers' PIDs from stdin until it closes, i.e. until the benchmark ends however
    it ends (even by SIGKILL, which no ``finally`` sees: Squid, having changed user, does not
    get PR_SET_PDEATHSIG either); then stop those still running, each only while its
    /proc/PID/cmdline is still the one it had (no other process that reused the PID), remove
    Squid's shared-memory segments (by this run's service name) and the temporary directory."""
    watched: dict[int, bytes] = {}
    for line in sys.stdin.buffer:
        with contextlib.suppress(ValueError, OSError):
            pid = int(line)
            watched[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()

    def alive() -> list[int]:
        running = []
        for pid, cmdline in watched.items():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes() == cmdline:  # a zombie's is b""
                    running.append(pid)
        return running

    for pid in alive():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in alive():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    for leftover in Path("/dev/shm").glob(f"{service}-*"):
        with contextlib.suppress(OSError):
            leftover.unlink()
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def stop(proc: subprocess.Popen[bytes] | None, what: str) -> str:
    """SIGTERM by PID, SIGKILL if it lingers; how it ended."""
    if proc is None:
        return f"{what}: not started"
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
            return f"{what}: killed after {STOP_TIMEOUT:.0f} s"
    return f"{what}: exit {proc.returncode}"


def tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"  (cannot read {path}: {exc})"
    return "\n".join("  " + line for line in text.splitlines()[-lines:])


def proc_stat(pid: int) -> tuple[float, int] | None:
    """(utime + stime seconds, VmHWM KiB) of a process, from /proc; None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return cpu, hwm


def child_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@dataclasses.dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path  # its stdout/stderr
    access_log: Path | None = None  # where the proxy logs each request (None: not read)
    stat_pid: int = 0  # the process whose CPU and RSS are reported

    def stats(self) -> tuple[float, int] | None:
        return proc_stat(self.stat_pid or self.proc.pid)


# --- the three servers -----------------------------------------------------------------------


def make_body(size: int, seed: int) -> bytes:
    """Text-like bytes (random words, about as compressible as HTML: gzip takes it to ~60%)."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(400)
    ]
    out = bytearray(b"<html><body><p>")
    while len(out) < size:
        out += rng.choice(words).encode() + (b"</p>\n<p>" if rng.random() < 0.05 else b" ")
    return bytes(out[:size])


def make_origin_files(tmp: Path) -> tuple[Path, Path]:
    """The web root and the origin's certificate (chain + key) and CA, made with trustme."""
    import trustme

    www = tmp / "www"
    www.mkdir()
    for name, size in SIZES.items():
        (www / f"{name}.html").write_bytes(make_body(size, seed=size))
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(tmp / "origin-ca.pem"))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp / "origin.pem"))
    return tmp / "origin.pem", tmp / "origin-ca.pem"


def nginx_conf(tmp: Path, port: int, tls_port: int, cert: Path) -> str:
    ngx = tmp / "nginx"
    locations = "\n".join(
        f"""        location /{name}/ {{
            add_header Cache-Control "max-age=3600";
            try_files /{name}.html =404;
        }}"""
        for name in SIZES
    )
    return (
        nginx_preamble(ngx, 4096)
        + f"""    types {{
        text/html html;
    }}
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        listen 127.0.0.1:{tls_port} ssl;
        server_name bench;
        ssl_certificate {cert};
        ssl_certificate_key {cert};
        root {tmp / "www"};
{locations}
    }}
}}
"""
    )


async def start_nginx(tmp: Path, cert: Path) -> tuple[Server, int]:
    ngx = tmp / "nginx"
    ngx.mkdir()
    port, tls_port = free_port(), free_port()
    conf = ngx / "nginx.conf"
    conf.write_text(nginx_conf(tmp, port, tls_port, cert))
    log = ngx / "stderr.log"
    # -e: the error log before the configuration is read (else /var/log/nginx/error.log)
    proc = spawn([NGINX, "-p", f"{ngx}/", "-e", str(ngx / "error.log"), "-c", str(conf)], log, ngx)
    server = Server("nginx", proc, port, log)
    await wait_for_port(port, proc, "nginx", START_TIMEOUT, lambda: tail(ngx / "error.log"))
    await wait_for_port(
        tls_port, proc, "nginx (TLS)", START_TIMEOUT, lambda: tail(ngx / "error.log")
    )
    workers = child_pids(proc.pid)
    server.stat_pid = workers[0] if workers else proc.pid
    return server, tls_port


def squid_conf(sq: Path, port: int, user: str | None) -> str:
    lines = [
        f"http_port 127.0.0.1:{port}",
        "cache_mem 256 MB",
        "maximum_object_size_in_memory 1 MB",
        f"cache_dir ufs {sq}/cache 100 16 256",
        f"access_log stdio:{sq}/access.log",
        f"cache_log {sq}/cache.log",
        "cache_store_log none",
        f"pid_filename {sq}/squid.pid",
        f"coredump_dir {sq}",
        "http_access allow localhost",
        "http_access deny all",
        "visible_hostname bench",
        "shutdown_lifetime 1 second",
        "pinger_enable off",
        "icp_port 0",
        "htcp_port 0",
    ]
    if user:
        lines.append(f"cache_effective_user {user}")
    return "\n".join(lines) + "\n"


async def start_squid(tmp: Path, service: str) -> Server:
    sq = tmp / "squid"
    sq.mkdir()
    user = None
    if os.geteuid() == 0:  # Squid will not run as root: give its directory to "proxy"
        user = "proxy"
        entry = pwd.getpwnam(user)
        os.chown(sq, entry.pw_uid, entry.pw_gid)
    port = free_port()
    conf = sq / "squid.conf"
    conf.write_text(squid_conf(sq, port, user))
    log = tmp / "squid-stderr.log"
    made = await asyncio.to_thread(
        subprocess.run,
        [SQUID, "-n", service, "-z", "-N", "-f", str(conf)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    if made.returncode != 0:
        raise RuntimeError(f"squid -z failed ({made.returncode}):\n{tail(sq / 'cache.log')}")
    proc = spawn([SQUID, "-n", service, "-N", "-f", str(conf)], log, sq)
    server = Server("Squid", proc, port, log, access_log=sq / "access.log")
    await wait_for_port(port, proc, "squid", START_TIMEOUT, lambda: tail(sq / "cache.log"))
    return server


async def start_wwwproxy(
    tmp: Path,
    tls_port: int,
    origin_ca: Path,
    extra_config: str = "",
    *,
    name: str = "wwwproxy",
    mode: str = "online",
) -> Server:
    port = free_port()
    conf = tmp / f"{name}.yaml"
    conf.write_text(
        f'https_intercept: ["*"]\nupstream_ca: {origin_ca}\nconnect_ports: [{tls_port}]\n'
        + extra_config
    )
    log = tmp / f"{name}.log"
    proc = spawn(
        [
            sys.executable,
            "-m",
            "wwwproxy",
            "serve",
            "-c",
            str(conf),
            "--listen",
            f"127.0.0.1:{port}",
            "--cache",
            str(tmp / "cache"),
            "--mode",
            mode,
        ],
        log,
        tmp,
    )
    server = Server(name, proc, port, log, access_log=log)
    await wait_for_port(port, proc, name, START_TIMEOUT, lambda: tail(log))
    return server


async def switch_mode(proxy: Server, mode: str) -> None:
    """``python -m wwwproxy MODE --proxy``; should the CLI itself fail (the tree is being
    edited), the same POST /control/ it makes, with its X-Wwwproxy-Request header."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "wwwproxy", mode, "--proxy", f"127.0.0.1:{proxy.port}"],
        capture_output=True,
        text=True,
        cwd=proxy.log.parent,
        timeout=30,
    )
    said = (done.stdout + done.stderr).strip().replace("\n", "; ")
    if done.returncode == 0 and f"mode: {mode}" in done.stdout:
        print(f"wwwproxy switched {mode}: {said}", flush=True)
        return
    cli_error = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    async with (
        aiohttp.ClientSession(trust_env=False) as session,
        session.post(
            f"http://127.0.0.1:{proxy.port}/control/?format=json",
            data={"mode": mode},
            headers={"X-Wwwproxy-Request": "bench", "Accept": "application/json"},
        ) as response,
    ):
        status = await response.json(content_type=None) if response.status == 200 else {}
    if status.get("mode") != mode:
        raise RuntimeError(f"wwwproxy {mode}: the CLI failed ({cli_error}), POST too: {status}")
    print(f"wwwproxy switched {mode} by POST /control/ (the CLI failed: {cli_error})", flush=True)


# --- how the proxies say they served a run ---------------------------------------------------


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


# --- load: wrk and the Python client ---------------------------------------------------------


@dataclasses.dataclass
class Run:
    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float
    cpu_us: float | None = None  # of the server, per request
    served: Counter[str] = dataclasses.field(default_factory=Counter)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_pct(self) -> float | None:
        """The server's CPU use over the run, in % of one core."""
        return None if self.cpu_us is None else self.cpu_us * self.rps / 1e4


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
            n, us, status, *socket_errors, p50, p99 = (int(x) for x in line.split()[1:])
            return Run(n, us / 1e6, status + sum(socket_errors), p50 / 1000, p99 / 1000)
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


# --- the rows --------------------------------------------------------------------------------


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
    baseline: str  # label of the leg wwwproxy is compared with for the target
    subject: str = "wwwproxy"
    notes: list[str] = dataclasses.field(default_factory=list)

    def leg(self, label: str) -> Leg | None:
        return next((leg for leg in self.legs if leg.label == label), None)


async def measured(leg: Leg, run: Callable[[], object]) -> Run:
    """One run of ``run()`` (a coroutine function giving a Run) with the server's CPU time and
    access-log outcomes around it."""
    before = leg.server.stats()
    offset = log_offset(leg.server)
    result: Run = await run()  # type: ignore[misc]
    after = leg.server.stats()
    if before and after and result.requests:
        result.cpu_us = (after[0] - before[0]) / result.requests * 1e6
    result.served = served_as(leg.server, offset)
    leg.runs.append(result)
    return result


def progress(row: Row, leg: Leg, i: int, runs: int, r: Run) -> None:
    print(
        f"  {row.key:<9} {i + 1}/{runs} {leg.label:<14} {r.rps:>6.0f}/s p50 {r.p50_ms:5.2f} "
        f"p99 {r.p99_ms:6.2f} err {r.errors} cpu {fmt(r.cpu_us, '.0f'):>4}us {describe(r.served)}",
        flush=True,
    )


def finish_row(row: Row) -> None:
    for leg in row.legs:
        stats = leg.server.stats()
        leg.rss_kib = stats[1] if stats else None


# --- report ----------------------------------------------------------------------------------


def fmt(value: float | None, spec: str) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return format(value, spec)


def print_report(rows: list[Row], extra: list[str]) -> None:
    """Per row and server the medians; then wwwproxy against its baseline, and the targets."""
    print()
    header = (
        f"  {'server':<14} {'rps':>6} {'p50 ms':>6} {'p99 ms':>7} {'errors':>6} "
        f"{'cpu us/req':>10} {'cpu %':>5} {'peak RSS':>8}  served as"
    )
    print(header)
    print("-" * (len(header) + 12))
    for row in rows:
        print(row.title)
        for leg in row.legs:
            rss = f"{leg.rss_kib / 1024:.0f} MiB" if leg.rss_kib else "-"
            print(
                f"  {leg.label:<14} {fmt(leg.median('rps'), '.0f'):>6} "
                f"{fmt(leg.median('p50_ms'), '.2f'):>6} {fmt(leg.median('p99_ms'), '.2f'):>7} "
                f"{leg.errors:>6} {fmt(leg.median('cpu_us'), '.0f'):>10} "
                f"{fmt(leg.median('cpu_pct'), '.0f'):>5} {rss:>8}  {describe(leg.served)}"
            )
    print()
    header = (
        f"{'row':<33} {'baseline':<13} {'rps':>6} {'wwwproxy':>8} {'ratio':>6} "
        f"{'target':>7} {'met':>3} {'/direct':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        base, subject, direct = row.leg(row.baseline), row.leg(row.subject), row.leg("direct")
        if base is None or subject is None or not base.runs or not subject.runs:
            continue
        ratio = subject.median("rps") / base.median("rps")
        target = TARGETS[row.key]
        vs_direct = "-"
        if direct is not None and direct.runs:
            vs_direct = f"{subject.median('rps') / direct.median('rps'):.2f}x"
        print(
            f"{row.title:<33} {base.label:<13} {base.median('rps'):>6.0f} "
            f"{subject.median('rps'):>8.0f} {ratio:>5.2f}x {'>= ' + format(target, '.1f'):>7} "
            f"{'yes' if ratio >= target else 'NO':>3} {vs_direct:>7}"
        )
    for row in rows:
        for note in row.notes:
            print(note)
    for line in extra:
        print(line)


# --- main ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, tmp: Path) -> int:
    servers: list[Server] = []
    rows: list[Row] = []
    extra: list[str] = []
    service = squid_service()
    status = 0
    try:
        cert, origin_ca = make_origin_files(tmp)
        nginx, tls_port = await start_nginx(tmp, cert)
        servers.append(nginx)
        squid = await start_squid(tmp, service)
        servers.append(squid)
        www: Server | None = None
        try:
            extra_config = "".join(line + "\n" for line in args.wwwproxy_config)
            www = await start_wwwproxy(tmp, tls_port, origin_ca, extra_config)
            servers.append(www)
        except RuntimeError as exc:  # measure the others all the same
            print(f"wwwproxy did not start, its rows are left out: {exc}")
            status = 1
        o = nginx.port
        origin = f"127.0.0.1:{o}"
        print(
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, {platform.node()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"runs {args.runs} x {args.duration:g} s\n"
            f"nginx 127.0.0.1:{o} + TLS :{tls_port} (worker pid {nginx.stat_pid}), "
            f"Squid :{squid.port} (pid {squid.proc.pid})"
            + (f",\nwwwproxy :{www.port} (pid {www.proc.pid})" if www else ""),
            flush=True,
        )
        squid_url = f"http://127.0.0.1:{squid.port}"
        www_url = f"http://127.0.0.1:{www.port}" if www else ""
        urls = {s: [f"http://{origin}/{s}/{i}" for i in range(URL_COUNTS[s])] for s in SIZES}
        https_urls = [f"https://127.0.0.1:{tls_port}/1k/{i}" for i in range(URL_COUNTS["1k"])]
        proxy_ca: ssl.SSLContext | None = None

        rows_wanted = set(args.rows or TARGETS)
        hit_rows = rows_wanted - {"misses-1k"}
        # 1. record / warm, then check every URL is a hit (for the hit rows only)
        for s in SIZES if hit_rows else ():
            if www:
                got = await client_pass(urls[s], www_url, False, SIZES[s])
                print(f"record {s} through wwwproxy (online): {dict(got)}")
            got = await client_pass(urls[s], squid_url, False, SIZES[s])
            print(f"warm {s} through Squid: {dict(got)}")
        if www and hit_rows:
            # the first CONNECT makes wwwproxy's CA; later ones are verified against it
            got = await client_pass(https_urls[:1], www_url, False, SIZES["1k"])
            proxy_ca = ssl.create_default_context(
                cafile=str(tmp / "cache" / "certificates" / "ca.cert.pem")
            )
            got += await client_pass(https_urls[1:], www_url, proxy_ca, SIZES["1k"])
            print(f"record 1k over https through wwwproxy (online): {dict(got)}")
            await switch_mode(www, "offline")
        for s in SIZES if hit_rows else ():
            if www:
                got = await client_pass(urls[s], www_url, False, SIZES[s])
                print(f"check {s} through wwwproxy (offline): {dict(got)}")
            got = await client_pass(urls[s], squid_url, False, SIZES[s])
            print(f"check {s} through Squid: {dict(got)}")
        if www and proxy_ca:
            got = await client_pass(https_urls, www_url, proxy_ca, SIZES["1k"])
            print(f"check 1k over https through wwwproxy (offline): {dict(got)}", flush=True)

        def wrk_legs() -> list[Leg]:
            legs = [Leg("Squid", squid)] + ([Leg("wwwproxy", www)] if www else [])
            return [*legs, Leg("direct", nginx)]

        # 2. offline hits, wrk
        for s, label in (("1k", "1 KB"), ("100k", "100 KB")):
            if f"hits-{s}" not in rows_wanted:
                continue
            row = Row(f"hits-{s}", f"offline hits {label}, 16 conns", wrk_legs(), "Squid")
            rows.append(row)
            for i in range(args.runs):
                for leg in row.legs:
                    direct = leg.label == "direct"
                    r = await measured(
                        leg,
                        lambda leg=leg, direct=direct, s=s: run_wrk(
                            tmp,
                            leg.server.port,
                            prefix=f"/{s}/" if direct else f"http://{origin}/{s}/",
                            first=0,
                            count=URL_COUNTS[s],
                            host=origin,
                            conns=16,
                            duration=args.duration,
                        ),
                    )
                    progress(row, leg, i, args.runs, r)
            finish_row(row)

        # 2b. 100 KB hits not in the memory cache: a second wwwproxy on the same cache with
        # the memory cache off (offline, so it only reads)
        if www and "disk-100k" in rows_wanted:
            disk = await start_wwwproxy(
                tmp,
                tls_port,
                origin_ca,
                extra_config + "memory_cache_mb: 0\n",
                name="wwwproxy-disk",
                mode="offline",
            )
            servers.append(disk)
            got = await client_pass(
                urls["100k"], f"http://127.0.0.1:{disk.port}", False, SIZES["100k"]
            )
            print(f"check 100k through wwwproxy-disk (offline, no memory cache): {dict(got)}")
            row = Row(
                "disk-100k",
                "offline hits 100 KB, from disk",
                [Leg("Squid", squid), Leg("wwwproxy-disk", disk)],
                "Squid",
                subject="wwwproxy-disk",
            )
            rows.append(row)
            for i in range(args.runs):
                for leg in row.legs:
                    r = await measured(
                        leg,
                        lambda leg=leg: run_wrk(
                            tmp,
                            leg.server.port,
                            prefix=f"http://{origin}/100k/",
                            first=0,
                            count=URL_COUNTS["100k"],
                            host=origin,
                            conns=16,
                            duration=args.duration,
                        ),
                    )
                    progress(row, leg, i, args.runs, r)
            finish_row(row)

        # 3. HTTPS offline hits through wwwproxy, the Python client; new-connection costs
        if www and proxy_ca and "https-1k" in rows_wanted:
            row = Row(
                "https-1k",
                "HTTPS offline hits 1 KB, 16 conns",
                [Leg("wwwproxy http", www), Leg("wwwproxy https", www)],
                baseline="wwwproxy http",
                subject="wwwproxy https",
            )
            rows.append(row)
            for i in range(args.runs):
                for leg, these, ctx in (
                    (row.legs[0], urls["1k"], False),
                    (row.legs[1], https_urls, proxy_ca),
                ):
                    r = await measured(
                        leg,
                        lambda these=these, ctx=ctx: client_load(
                            these, www_url, ctx, SIZES["1k"], args.duration
                        ),
                    )
                    progress(row, leg, i, args.runs, r)
            finish_row(row)
            row.notes.append(
                "HTTPS row: a Python aiohttp client in this process (wrk cannot CONNECT), the\n"
                "  same for both legs; it shares the CPUs with wwwproxy (whose cpu % shows which\n"
                "  of the two is the limit)"
            )
            costs = await new_connection_costs(www, tls_port, o, proxy_ca, HANDSHAKES)
            extra.append(
                f"new connection to wwwproxy, median of {HANDSHAKES} (cached leaf):\n  "
                + ", ".join(f"{k} {statistics.median(t) * 1000:.2f} ms" for k, t in costs.items())
            )
        if www and hit_rows:  # 4. wants wwwproxy online
            await switch_mode(www, "online")

        # 4. online cold misses, wrk, each run its own never-seen URL numbers
        row = Row("misses-1k", "online cold misses 1 KB, 8 conns", wrk_legs(), "Squid")
        rows.append(row)
        first = MISS_STRIDE
        for i in range(args.runs if "misses-1k" in rows_wanted else 0):
            for leg in row.legs:
                direct = leg.label == "direct"
                r = await measured(
                    leg,
                    lambda leg=leg, direct=direct, first=first: run_wrk(
                        tmp,
                        leg.server.port,
                        prefix="/1k/" if direct else f"http://{origin}/1k/",
                        first=first,
                        count=0,
                        host=origin,
                        conns=8,
                        duration=args.duration,
                    ),
                )
                progress(row, leg, i, args.runs, r)
                if r.requests >= MISS_STRIDE:
                    raise RuntimeError("a cold-miss run went past its URL range")
                first += MISS_STRIDE
        if "misses-1k" in rows_wanted:
            finish_row(row)
        else:
            rows.remove(row)
        if www:
            warcs = sorted((tmp / "cache").rglob("*.warc*"))
            extra.append(
                f"wwwproxy archive at the end: {len(warcs)} WARC file(s), "
                f"{sum(p.stat().st_size for p in warcs) / 2**20:.0f} MiB"
            )
        return status
    finally:
        print_report(rows, extra)
        ends = [stop(s.proc, s.name) for s in reversed(servers)]
        for leftover in Path("/dev/shm").glob(f"{service}-*"):  # Squid's, by its unique name
            with contextlib.suppress(OSError):
                leftover.unlink()
        print("; ".join(ends))
        for s in servers:
            if s.proc.returncode not in (0, None, -signal.SIGTERM):
                print(f"{s.name} log ({s.log}):\n{tail(s.log)}")


def squid_service() -> str:
    """Squid's service name for this run (-n): it names Squid's /dev/shm segments."""
    return f"sbs{os.getpid()}"


def check_tools() -> list[str]:
    missing = [t for t in (NGINX, SQUID) if not os.access(t, os.X_OK)]
    if shutil.which(WRK) is None:
        missing.append(WRK)
    return missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per figure")
    parser.add_argument(
        "--budget", type=float, help="deadline for the whole run, seconds (default: from the above)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--wwwproxy-config",
        action="append",
        default=[],
        metavar="KEY: VALUE",
        help="an extra line for wwwproxy's config (e.g. 'memory_cache_mb: 0'; repeatable)",
    )
    parser.add_argument(
        "--rows",
        action="append",
        choices=sorted(TARGETS),
        help="measure only this row (repeatable; default: all); 'misses-1k' alone skips the "
        "recording and checking passes the hit rows need",
    )
    parser.add_argument("--watchdog", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.watchdog:
        tmp_name, service, keep = args.watchdog
        return run_watchdog(tmp_name, service, keep == "keep")
    missing = check_tools()
    if missing:
        print(f"missing: {', '.join(missing)} (apt-get install -y squid nginx wrk)")
        return 2
    # 13 measured runs per round (3 + 3 + 2 + 2 + 3), each with a few seconds of overhead
    budget = args.budget or 150 + args.runs * 13 * (args.duration + 4)
    tmp = Path(tempfile.mkdtemp(prefix="wwwproxy-sbs-"))
    tmp.chmod(0o755)  # Squid (as "proxy") and nginx's worker ("nobody") read under it
    global WATCHDOG
    WATCHDOG = start_watchdog(tmp, squid_service(), args.keep)
    try:

        async def bounded() -> int:
            task = asyncio.current_task()
            assert task is not None
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
            return await asyncio.wait_for(run(args, tmp), budget)

        try:
            return asyncio.run(bounded())
        except TimeoutError:
            print(f"stopped: the run exceeded its {budget:.0f} s deadline", file=sys.stderr)
            return 1
        except asyncio.CancelledError:
            print("stopped by SIGTERM", file=sys.stderr)
            return 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        if WATCHDOG.stdin is not None:
            WATCHDOG.stdin.close()
        try:
            WATCHDOG.wait(timeout=STOP_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            WATCHDOG.kill()


if __name__ == "__main__":
    sys.exit(main())
