"""The origin and the proxies under test: nginx (plain HTTP and TLS), Squid and wwwproxy, each
on a free loopback port under the run's temporary directory."""

from __future__ import annotations

import asyncio
import os
import pwd
import random
import subprocess
import sys
from pathlib import Path

import aiohttp
from procs import free_port, nginx_preamble, wait_for_port  # bench/procs.py (run from bench/)

from .processes import START_TIMEOUT, Server, child_pids, spawn, tail

NGINX = "/usr/sbin/nginx"
SQUID = "/usr/sbin/squid"

SIZES = {"1k": 1024, "100k": 100 * 1024}  # /1k/N and /100k/N: one file each
URL_COUNTS = {"1k": 1000, "100k": 500}  # distinct URLs cycled over in the hit rows
#: /mixed/N is the file of N's last digit: every URL new, its size fixed by N (KiB)
MIXED_KIB = (1, 2, 8, 16, 64, 128, 256, 512, 896, 1024)


def mixed_size(n: int) -> int:
    """The body size of /mixed/``n``, in bytes."""
    return MIXED_KIB[n % len(MIXED_KIB)] * 1024


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
    for digit in range(len(MIXED_KIB)):
        size = mixed_size(digit)
        (www / f"mixed-{digit}.html").write_bytes(make_body(size, seed=size))
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
        location ~ "^/mixed/[0-9]*([0-9])$" {{
            add_header Cache-Control "max-age=3600";
            try_files /mixed-$1.html =404;
        }}
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
        f"cache_dir ufs {sq}/cache 4000 16 256",
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
    cache: str = "cache",
) -> Server:
    """``python -m wwwproxy serve`` on ``tmp / cache``, its configuration the interception
    settings the HTTPS row needs plus ``extra_config``."""
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
            str(tmp / cache),
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


def archive_size(root: Path) -> str:
    """How many WARC files under ``root``, and their bytes."""
    warcs = [p for p in root.rglob("*.warc*") if p.is_file()]
    return f"{len(warcs)} WARC file(s), {sum(p.stat().st_size for p in warcs) / 2**20:.0f} MiB"
