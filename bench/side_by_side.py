"""Side-by-side speed benchmark: wwwproxy against Squid and warcprox, with nginx as the origin
(not run by CI).

example output (this machine, 2026-11-28 16:45 UTC, while other sessions ran their tests: load
average 5.3 at the start, 4.8 at the end; 2 CPUs, Debian's squid 5.7, nginx 1.22.1, wrk 4.1.0,
warcprox 2.13.1; wwwproxy at ad42e69; ``--rows misses-1k --rows misses-mixed --runs 3
--duration 5``, about 6 minutes with warcprox's installation)::

    installing warcprox>=2.13,<2.14 into /tmp/wwwproxy-sbs-463p78_j/warcprox-venv ...
    warcprox 2.13.1 installed
    warcprox 2.13.1: warcprox options: --gzip; 'warcprox' --dedup-db-file=/dev/null (no deduplication),
      'warcprox+dedup' its default sqlite dedup db; all else default: --max-threads 100,
      --queue-size 500, rollover at 1 GB and none when idle, its sqlite stats db on (2.13 has
      no --writer-threads: one WARC writer thread); it answers each request with
      'Connection: close', so wrk opens a connection per request; the bodies of a row repeat
      (one file per size), so with dedup on most records are revisits
    2026-11-28 16:45 UTC, vm, 2 CPUs, Python 3.11.7; runs 3 x 5 s; load average 5.27 6.86 5.10
    nginx 127.0.0.1:34007 + TLS :45391 (worker pid 29664), Squid :58051 (pid 29667),
    wwwproxy :36311 (pid 29669),
    warcprox :38635 (pid 29777),
    warcprox+dedup :50657 (pid 29784)
      misses-1k    1/3 Squid                  976/s p50   7.36 p99   16.89 err 0 cpu   883us TCP_MISS 100%
      misses-1k    1/3 wwwproxy               148/s p50  50.54 p99  114.53 err 0 cpu  5689us X-Cache MISS 100% +0.3s to idle
      misses-1k    1/3 warcprox               401/s p50  17.86 p99   70.79 err 0 cpu  2956us - +1.5s to idle
      misses-1k    1/3 warcprox+dedup         411/s p50  18.43 p99   45.91 err 0 cpu  3017us - +1.8s to idle
      misses-1k    1/3 direct               14975/s p50   0.47 p99    4.03 err 0 cpu    41us -
      misses-1k    2/3 Squid                 2328/s p50   3.33 p99    7.12 err 0 cpu   318us TCP_MISS 100%
      misses-1k    2/3 wwwproxy               131/s p50  57.20 p99  136.18 err 0 cpu  6337us X-Cache MISS 100% +0.3s to idle
      misses-1k    2/3 warcprox               426/s p50  16.79 p99   67.87 err 0 cpu  2542us - +1.3s to idle
      misses-1k    2/3 warcprox+dedup         465/s p50  16.06 p99   40.40 err 0 cpu  2940us - +2.0s to idle
      misses-1k    2/3 direct               14840/s p50   0.45 p99    8.09 err 0 cpu    37us -
      misses-1k    3/3 Squid                 2998/s p50   2.39 p99   15.90 err 0 cpu   272us TCP_MISS 100%
      misses-1k    3/3 wwwproxy               167/s p50  45.50 p99   92.94 err 0 cpu  5832us X-Cache MISS 100% +0.5s to idle
      misses-1k    3/3 warcprox               385/s p50  18.29 p99   68.35 err 0 cpu  3074us - +1.0s to idle
      misses-1k    3/3 warcprox+dedup         405/s p50  18.30 p99   46.93 err 0 cpu  3569us - +2.0s to idle
      misses-1k    3/3 direct               18987/s p50   0.34 p99    6.19 err 0 cpu    39us -
      misses-mixed 1/3 Squid                  230/s p50  29.98 p99  163.64 err 0 cpu  3276us TCP_MISS 100%
      misses-mixed 1/3 wwwproxy                48/s p50 147.04 p99  346.79 err 0 cpu 13469us X-Cache MISS 100% +0.3s to idle
      misses-mixed 1/3 warcprox               158/s p50  43.66 p99  239.22 err 0 cpu 20586us - +17.9s to idle
      misses-mixed 1/3 warcprox+dedup         175/s p50  39.57 p99  150.62 err 0 cpu  9785us - +4.8s to idle
      misses-mixed 1/3 direct                3749/s p50   1.45 p99   13.76 err 0 cpu   120us -
      misses-mixed 2/3 Squid                  186/s p50  42.97 p99  223.69 err 0 cpu  3636us TCP_MISS 100%
      misses-mixed 2/3 wwwproxy                51/s p50 144.78 p99  331.85 err 0 cpu 13089us X-Cache MISS 100% +0.3s to idle
      misses-mixed 2/3 warcprox               163/s p50  44.32 p99  151.58 err 0 cpu 19549us - +18.7s to idle
      misses-mixed 2/3 warcprox+dedup         181/s p50  34.21 p99  161.94 err 0 cpu  7230us - +1.3s to idle
      misses-mixed 2/3 direct                3379/s p50   1.83 p99   21.40 err 0 cpu   117us -
      misses-mixed 3/3 Squid                  215/s p50  34.98 p99  178.87 err 0 cpu  3305us TCP_MISS 100%
      misses-mixed 3/3 wwwproxy                52/s p50 140.71 p99  340.66 err 0 cpu 13270us X-Cache MISS 100% +0.5s to idle
      misses-mixed 3/3 warcprox               188/s p50  39.34 p99  115.66 err 0 cpu 18865us - +18.7s to idle
      misses-mixed 3/3 warcprox+dedup         192/s p50  37.93 p99  110.44 err 0 cpu  4908us - +0.5s to idle
      misses-mixed 3/3 direct                3985/s p50   1.65 p99   13.28 err 0 cpu   101us -

      server                 rps done/s p50 ms   +p50  p99 ms errors cpu us/req cpu % peak RSS  served as
    -----------------------------------------------------------------------------------------------------------------
    online cold misses 1 KB, 8 conns
      Squid                 2328   2328   3.33   2.88   15.90      0        318    82  265 MiB  TCP_MISS 100%
      wwwproxy               148    140  50.54  50.09  114.53      0       5832    80   71 MiB  X-Cache MISS 100%
      warcprox               401    321  17.86  17.41   68.35      0       2956    91   71 MiB  -
      warcprox+dedup         411    305  18.30  17.85   45.91      0       3017    98   73 MiB  -
      direct               14975  14974   0.45      -    6.19      0         39    61    6 MiB  -
    online cold misses 1 KB-1 MB, 8 conns
      Squid                  215    215  34.98  33.33  178.87      0       3305    71  404 MiB  TCP_MISS 100%
      wwwproxy                51     47 144.78 143.13  340.66      0      13270    63  122 MiB  X-Cache MISS 100%
      warcprox               163     35  43.66  42.01  151.58      0      19549    72  127 MiB  -
      warcprox+dedup         181    145  37.93  36.28  150.62      0       7230    88  123 MiB  -
      direct                3749   3749   1.65      -   13.76      0        117    40    6 MiB  -

    row                                   compared                                                  ratio  target met
    -----------------------------------------------------------------------------------------------------------------
    online cold misses 1 KB, 8 conns      wwwproxy / warcprox rps                     148      401  0.37x  >= 1.5  NO
                                          wwwproxy / warcprox done/s                  140      321  0.44x       -   -
                                          wwwproxy / warcprox+dedup rps               148      411  0.36x       -   -
                                          wwwproxy / Squid rps                        148     2328  0.06x  >= 0.3  NO
                                          wwwproxy / Squid +p50 ms                  50.09     2.88 17.39x       -   -
                                          wwwproxy / direct rps                       148    14975  0.01x       -   -
    online cold misses 1 KB-1 MB, 8 conns wwwproxy / warcprox rps                      51      163  0.31x  >= 1.5  NO
                                          wwwproxy / warcprox done/s                   47       35  1.35x       -   -
                                          wwwproxy / warcprox+dedup rps                51      181  0.28x       -   -
                                          wwwproxy / Squid rps                         51      215  0.24x  >= 0.8  NO
                                          wwwproxy / Squid +p50 ms                 143.13    33.33  4.29x  <= 2.0  NO
                                          wwwproxy / direct rps                        51     3749  0.01x       -   -
    misses-mixed: /mixed/N is the body of N's last digit, 1, 2, 8, 16, 64, 128, 256, 512, 896, 1024 KiB:
      average 290.7 KiB; read per response (KiB, headers included):
      Squid 289, wwwproxy 292, warcprox 289, warcprox+dedup 289, direct 291
    wwwproxy archive at the end: 3048 WARC file(s), 74 MiB
    warcprox archive at the end: 1 WARC file(s), 238 MiB; records {'request': 8727, 'response': 8727, 'warcinfo': 1} for 8687 requests answered
    warcprox+dedup archive at the end: 1 WARC file(s), 25 MiB; records {'request': 9295, 'response': 90, 'revisit': 9205, 'warcinfo': 1} for 9249 requests answered
    load average at the end: 4.84 5.95 5.17
    warcprox+dedup: exit 0; warcprox: exit 0; wwwproxy: exit 0; Squid: exit 0; nginx: exit 0

What one run does, all on 127.0.0.1, in a temporary directory that is removed afterwards (the
parts are in ``bench/sbs/``: processes, servers, warcprox_leg, load, rows, report):

* **nginx** (Debian's ``/usr/sbin/nginx``, ``daemon off``, ``worker_processes 1``, access log
  off) is the origin: ``/1k/N`` and ``/100k/N`` for any N are one 1 KiB and one 100 KiB file
  (``try_files``), and ``/mixed/N`` is one of ten files chosen by N's last digit, 1, 2, 8, 16,
  64, 128, 256, 512, 896 and 1024 KiB (average 290.7 KiB): each URL's size is fixed, every N a
  new URL; all with ``Cache-Control: max-age=3600`` and nginx's own Last-Modified and ETag, on
  a plain-HTTP port and on a TLS port whose certificate comes from ``trustme``.
* **Squid** (Debian's ``/usr/sbin/squid -N``, one process) with ``cache_mem 256 MB``,
  ``maximum_object_size_in_memory 1 MB``, a 4000 MB ``cache_dir ufs`` (room for every cold
  miss of a run: it stores, it does not evict), its access log in the temporary directory
  (wwwproxy always writes an access-log line per request, so both do), ``shutdown_lifetime 1
  second``, its own service name (``-n``) so that its shared-memory segments in /dev/shm cannot
  clash with another Squid's.  Squid refuses to run as root ("Don't run Squid as root, set
  'cache_effective_user'!", also with ``cache_effective_user root``): when this script runs as
  root, Squid's directory is chowned to the ``proxy`` user and the configuration says
  ``cache_effective_user proxy`` (the temporary directory is made 0755 so that Squid, and
  nginx's ``nobody`` worker, can reach their files); as any other user Squid simply runs as
  that user.
* **wwwproxy** (``python -m wwwproxy serve`` from this checkout's interpreter) on a fresh cache,
  with ``https_intercept: ["*"]``, the origin's CA as ``upstream_ca`` and the TLS port in
  ``connect_ports``, plus each ``--wwwproxy-config`` line; switched with ``python -m wwwproxy
  offline|online --proxy`` (should that CLI fail to import while the tree is being edited, the
  same POST /control/ it makes).  With ``--sync-modes write,flush``, one more wwwproxy per
  mode, each on its own cache with the line ``sync: MODE`` added, as the cold rows' legs
  "wwwproxy sync=MODE" (one that does not start, e.g. on a wwwproxy that does not know the key,
  is said and left out).
* **warcprox** (for the cold rows only): ``warcprox>=2.13,<2.14`` pip-installed into a virtual
  environment made in the temporary directory (about 30 s), or the one in ``--warcprox-venv
  DIR`` (made there if missing, and kept: later runs reuse it); two instances, each in its own
  directory writing gzipped WARC files (``--gzip``): "warcprox" without deduplication
  (``--dedup-db-file=/dev/null``) and "warcprox+dedup" with its default sqlite dedup database.
  Every other option is its default (``--max-threads 100``, ``--queue-size 500``, no idle
  rollover, its sqlite stats database; 2.13 has no ``--writer-threads``): none cripples it.
  warcprox refuses origins on 127.0.0.1 and has no option for it, so it is started through
  ``python -c`` with ``warcprox.warcproxy.WarcProxyHandler.allow_localhost = True``, then its
  own ``warcprox.main.main``.  Should pip or warcprox fail, the run says why and measures the
  other legs all the same.

Then (every figure is the median of ``--runs`` runs, interleaved leg after leg, then again; the
load is **wrk** ``-t2 -cC -dDs --latency`` with a Lua script whose ``request()`` writes the
proxy's absolute-form request line, ``GET http://127.0.0.1:ORIGIN/1k/N HTTP/1.1``, cycling over
the URLs or, for the cold rows, never repeating one; wrk sends the path as given, which Squid's
access log, full of absolute URLs, and wwwproxy's X-Cache answers confirm):

1. the URLs (1000 of 1 KiB, 500 of 100 KiB, and the 1000 1 KiB ones over https) are fetched once
   through each proxy (wwwproxy online records them; Squid keeps them), then wwwproxy is switched
   offline, and a second pass checks that each proxy answers every one from its cache (only
   when a hit row is asked for);
2. **offline hits 1 KB, 16 conns** and **offline hits 100 KB, 16 conns**: Squid memory hits
   (Squid stays an ordinary online cache: the copies are fresh, max-age=3600, so it serves them
   without asking nginx) against wwwproxy offline hits against nginx direct; **offline hits
   100 KB, from disk**: a second wwwproxy on the same cache with ``memory_cache_mb: 0``;
3. **HTTPS offline hits 1 KB**: wrk cannot CONNECT through a proxy, so a Python aiohttp client
   (16 keep-alive connections, in this process) asks wwwproxy for the same 1 KiB URLs over plain
   HTTP and over https (CONNECT, then TLS with the leaf certificate wwwproxy made, verified
   against its CA), interleaved; then the cost of a new connection: CONNECT + TLS handshake with
   the already-made (cached) leaf, and, for comparison, a new plain connection + one GET;
4. wwwproxy switched online again: **online cold misses 1 KB, 8 conns** (misses-1k) and
   **online cold misses 1 KB-1 MB, 8 conns** (misses-mixed): each run of each leg asks URLs
   never asked before (its own range of N), so Squid fetches and stores each one, wwwproxy and
   warcprox fetch and record each one into their WARC files; nginx direct for reference.  After
   each such run the leg waits until its server is idle again (below 5 % of a core for 0.75 s,
   at most 60 s: warcprox answers first and writes its records later, from queues of up to
   500), and the CPU counted is until then.

For each row and server: requests per second (rps, as wrk saw them answered) and done/s (the
same requests over the run plus the time its server took to be idle again: what it recorded
per second), p50 latency and how much it adds over direct's p50 (+p50), p99 latency (wrk's),
errors (status >= 400 and socket errors), CPU microseconds per request of the server process
and its helper processes (utime + stime of all their threads from /proc/PID/stat around the
run and its time to idle, median over the runs; nginx: its worker; wwwproxy: with the
recording and search-text helpers) and that as a share of one core over that time (cpu
%: near 100, the server is the limit; well below, the load generator or the machine is; over
100, its threads), the server's peak RSS after the row (VmHWM from /proc/PID/status: a
high-water mark, so it only grows from row to row), and how the proxy says it served the
requests (counted from its access log over the run: Squid's TCP_MEM_HIT/TCP_MISS...,
wwwproxy's X-Cache; warcprox logs no line per request: its records are counted from its WARC
files at the end).  The summary compares each wwwproxy leg with the others next to the targets
(issue 32): 1 KB hits >= 2.1 x Squid, 100 KB hits >= 6.8 x Squid, disk hits >= 0.5 x Squid,
HTTPS hits >= 0.5 x plain-HTTP hits; cold misses 1 KB >= 1.5 x warcprox (without dedup) and
>= 0.3 x Squid; mixed cold misses >= 1.5 x warcprox, >= 0.8 x Squid and a p50 added over direct
at most 2 x Squid's.  The rps ratios are the targets; done/s shows how far warcprox's rps runs
ahead of its writer in runs this short.

The machine's CPUs are shared by everything: wrk's two threads, the proxy, nginx (and, for the
HTTPS row, the Python client); on a small machine that caps every figure, direct included.
Squid, nginx and wwwproxy each run one process, so the comparison is per core (wwwproxy has I/O
threads besides its event loop, warcprox a thread per connection and its writer threads: on
misses they go over 100 %).  Other work on the machine shows as noise: the runs are interleaved
so that it hits every server alike, and the load average is printed at the start and the end.

Everything stops by itself: each child process is stopped in ``finally`` by its PID (SIGTERM,
then SIGKILL after a timeout); the whole run has a deadline (``--budget``) and SIGTERM ends it
the same way.  Should this process be killed outright, the servers get SIGTERM from the kernel
(PR_SET_PDEATHSIG; not Squid as root, which changes user and so loses it), and a watchdog (this
file with ``--watchdog``, in its own session, reading the servers' PIDs on a pipe) sees the pipe
close, stops whichever of those PIDs still run the same command line, and removes Squid's
/dev/shm segments and the temporary directory.

Run:  .venv/bin/python bench/side_by_side.py                      (about 10 minutes)
      .venv/bin/python bench/side_by_side.py --rows misses-1k --rows misses-mixed \\
          --warcprox-venv /tmp/warcprox-venv                       (the cold misses alone)
      .venv/bin/python bench/side_by_side.py --rows misses-mixed --sync-modes write,flush
      .venv/bin/python bench/side_by_side.py --duration 10 --runs 5
"""  # noqa: E501 (the example output is as wide as the program prints it)

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shutil
import signal
import ssl
import sys
import tempfile
from collections.abc import Awaitable
from pathlib import Path

from sbs.load import WRK, client_pass
from sbs.processes import (
    Server,
    end_watchdog,
    load_average,
    remove_shm,
    run_watchdog,
    start_watchdog,
    stop,
    tail,
)
from sbs.report import TARGETS, print_report
from sbs.rows import COLD_ROWS, Row, Setup, cold_row, disk_row, hit_row, https_row
from sbs.servers import (
    NGINX,
    SIZES,
    SQUID,
    URL_COUNTS,
    archive_size,
    make_origin_files,
    start_nginx,
    start_squid,
    start_wwwproxy,
    switch_mode,
)
from sbs.warcprox_leg import DEFAULTS_NOTE, OPTIONS, count_records, ensure_venv, start_warcprox

#: measured legs per row (the cold rows: besides one per --sync-modes mode)
LEGS = {"hits-1k": 3, "hits-100k": 3, "disk-100k": 2, "https-1k": 2}
COLD_LEGS = 5  # Squid, wwwproxy, warcprox, warcprox+dedup, direct


async def started(what: str, start: Awaitable[Server], servers: list[Server]) -> Server | None:
    """The server ``start`` starts, kept in ``servers``; None (and why, said) if it did not."""
    try:
        server = await start
    except RuntimeError as exc:
        print(f"{what} did not start, its legs are left out: {exc}", flush=True)
        return None
    servers.append(server)
    return server


async def start_warcprox_legs(
    tmp: Path, venv: Path | None, servers: list[Server]
) -> list[tuple[str, Server]]:
    """Both warcprox legs, after making (or finding) its virtual environment."""
    venv_dir = venv or tmp / "warcprox-venv"
    try:
        version = await ensure_venv(venv_dir)
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"warcprox is not installed, its legs are left out: {exc}", flush=True)
        return []
    legs = []
    for name in OPTIONS:
        server = await started(name, start_warcprox(tmp, venv_dir, name), servers)
        if server is not None:
            legs.append((name, server))
    print(f"warcprox {version}: " + DEFAULTS_NOTE, flush=True)
    return legs


async def run(args: argparse.Namespace, tmp: Path) -> int:
    servers: list[Server] = []
    rows: list[Row] = []
    extra: list[str] = []
    service = squid_service()
    wanted = set(args.rows or TARGETS)
    hit_rows = wanted - set(COLD_ROWS)
    cold_rows = [key for key in COLD_ROWS if key in wanted]
    status = 0
    try:
        cert, origin_ca = make_origin_files(tmp)
        nginx, tls_port = await start_nginx(tmp, cert)
        servers.append(nginx)
        squid = await start_squid(tmp, service)
        servers.append(squid)
        extra_config = "".join(line + "\n" for line in args.wwwproxy_config)
        www = await started(
            "wwwproxy", start_wwwproxy(tmp, tls_port, origin_ca, extra_config), servers
        )
        status = 0 if www else 1
        caches = {"wwwproxy": tmp / "cache"}  # each wwwproxy's, by its server's name
        sync_legs: list[tuple[str, Server]] = []
        warcprox_legs: list[tuple[str, Server]] = []
        if cold_rows:
            for mode in args.sync_modes:
                label = f"wwwproxy sync={mode}"
                server = await started(
                    label,
                    start_wwwproxy(
                        tmp,
                        tls_port,
                        origin_ca,
                        extra_config + f"sync: {mode}\n",
                        name=f"wwwproxy-sync-{mode}",
                        cache=f"cache-sync-{mode}",
                    ),
                    servers,
                )
                if server is not None:
                    sync_legs.append((label, server))
                    caches[server.name] = tmp / f"cache-sync-{mode}"
            warcprox_legs = await start_warcprox_legs(tmp, args.warcprox_venv, servers)
            if len(warcprox_legs) < len(OPTIONS):
                status = 1
        o = nginx.port
        origin = f"127.0.0.1:{o}"
        print(
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, {platform.node()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"runs {args.runs} x {args.duration:g} s; load average {load_average()}\n"
            f"nginx 127.0.0.1:{o} + TLS :{tls_port} (worker pid {nginx.stat_pid}), "
            f"Squid :{squid.port} (pid {squid.proc.pid})"
            + "".join(f",\n{p.name} :{p.port} (pid {p.proc.pid})" for p in servers[2:]),
            flush=True,
        )
        setup = Setup(tmp, origin, args.runs, args.duration)
        squid_url = f"http://127.0.0.1:{squid.port}"
        www_url = f"http://127.0.0.1:{www.port}" if www else ""
        urls = {s: [f"http://{origin}/{s}/{i}" for i in range(URL_COUNTS[s])] for s in SIZES}
        https_urls = [f"https://127.0.0.1:{tls_port}/1k/{i}" for i in range(URL_COUNTS["1k"])]
        proxy_ca: ssl.SSLContext | None = None

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

        www_leg = [("wwwproxy", www)] if www else []

        # 2. offline hits, wrk
        for s in SIZES:
            if f"hits-{s}" in wanted:
                legs = [("Squid", squid), *www_leg, ("direct", nginx)]
                rows.append(await hit_row(setup, s, legs))

        # 2b. 100 KB hits not in the memory cache: a second wwwproxy on the same cache with
        # the memory cache off (offline, so it only reads)
        if www and "disk-100k" in wanted:
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
            rows.append(await disk_row(setup, [("Squid", squid), ("wwwproxy-disk", disk)]))

        # 3. HTTPS offline hits through wwwproxy, the Python client; new-connection costs
        if www and proxy_ca and "https-1k" in wanted:
            row, costs = await https_row(setup, www, tls_port, urls["1k"], https_urls, proxy_ca)
            rows.append(row)
            extra.append(costs)
        if www and hit_rows:  # 4. wants wwwproxy online
            await switch_mode(www, "online")

        # 4. online cold misses, wrk, each run its own never-seen URL numbers
        for key in cold_rows:
            legs = [("Squid", squid), *www_leg, *sync_legs, *warcprox_legs, ("direct", nginx)]
            rows.append(await cold_row(setup, key, legs))

        for label, server in [*www_leg, *sync_legs]:
            extra.append(f"{label} archive at the end: {archive_size(caches[server.name])}")
        for name, server in warcprox_legs:
            legs_of = [leg for row in rows for leg in row.legs if leg.server is server]
            answered = sum(r.requests for leg in legs_of for r in leg.runs)
            records = count_records(tmp / name / "warcs")
            extra.append(
                f"{name} archive at the end: {archive_size(tmp / name)}; records "
                f"{dict(sorted(records.items()))} for {answered} requests answered"
            )
        return status
    finally:
        extra.append(f"load average at the end: {load_average()}")
        print_report(rows, extra)
        ends = [stop(p.proc, p.name) for p in reversed(servers)]
        remove_shm(service)
        print("; ".join(ends))
        for p in servers:
            if p.proc.returncode not in (0, None, -signal.SIGTERM):
                print(f"{p.name} log ({p.log}):\n{tail(p.log)}")


def squid_service() -> str:
    """Squid's service name for this run (-n): it names Squid's /dev/shm segments."""
    return f"sbs{os.getpid()}"


def check_tools() -> list[str]:
    missing = [t for t in (NGINX, SQUID) if not os.access(t, os.X_OK)]
    if shutil.which(WRK) is None:
        missing.append(WRK)
    return missing


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


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
        help="measure only this row (repeatable; default: all); the cold-miss rows alone skip "
        "the recording and checking passes the hit rows need",
    )
    parser.add_argument(
        "--sync-modes",
        type=comma_list,
        default=[],
        metavar="MODE,...",
        help="for the cold rows, one more wwwproxy per mode, on its own cache, with the config "
        "line 'sync: MODE' (leg 'wwwproxy sync=MODE'), e.g. write,flush",
    )
    parser.add_argument(
        "--warcprox-venv",
        type=Path,
        metavar="DIR",
        help="a virtual environment with warcprox 2.13.x, made there if missing and kept for "
        "later runs (default: one made in the temporary directory, about 30 s)",
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
    wanted = set(args.rows or TARGETS)
    cold = len(wanted & set(COLD_ROWS))
    cold_legs = cold * (COLD_LEGS + len(args.sync_modes))
    legs = sum(LEGS[key] for key in wanted - set(COLD_ROWS)) + cold_legs
    # each measured run has a few seconds of overhead, a cold one its wait for idle besides;
    # warcprox's installation up to 5 minutes
    budget = args.budget or (
        150 + 300 * bool(cold) + args.runs * (legs * (args.duration + 4) + cold_legs * 30)
    )
    tmp = Path(tempfile.mkdtemp(prefix="wwwproxy-sbs-"))
    tmp.chmod(0o755)  # Squid (as "proxy") and nginx's worker ("nobody") read under it
    watchdog = start_watchdog(Path(__file__), tmp, squid_service(), args.keep)
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
        end_watchdog(watchdog)


if __name__ == "__main__":
    sys.exit(main())
