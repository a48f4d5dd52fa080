"""What the benchmarks share about the processes they start: a free loopback port, and waiting
until a started server listens (or says why it did not)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def nginx_preamble(ngx: Path, worker_connections: int) -> str:
    """The start of a loopback nginx configuration kept under ``ngx`` (pid, logs and temporary
    folders there, no access log), up to the ``http {`` block's own settings."""
    return f"""daemon off;
worker_processes 1;
pid {ngx}/nginx.pid;
error_log {ngx}/error.log warn;
events {{
    worker_connections {worker_connections};
}}
http {{
    access_log off;
    client_body_temp_path {ngx}/client_body;
    proxy_temp_path {ngx}/proxy;
    fastcgi_temp_path {ngx}/fastcgi;
    uwsgi_temp_path {ngx}/uwsgi;
    scgi_temp_path {ngx}/scgi;
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_for_port(
    port: int,
    proc: subprocess.Popen[bytes],
    what: str,
    limit: float,
    why: Callable[[], str] = lambda: "",
) -> None:
    """Until ``proc`` accepts connections on 127.0.0.1:``port``; RuntimeError (with ``why()``,
    e.g. the end of its log) if it exits first or ``limit`` seconds pass."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}:\n{why()}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {limit:.0f} s:\n{why()}")


def close_and_wait(proc: subprocess.Popen[bytes], seconds: float) -> None:
    """End a child that runs until its stdin closes: close it, wait (bounded), else kill."""
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
