"""warcprox (Internet Archive's recording proxy) as a leg of the cold-miss rows: installed from
PyPI into a virtual environment of its own, started on a free loopback port writing gzipped
WARC files under the run's temporary directory, with or without its deduplication."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import subprocess
from collections import Counter
from pathlib import Path

from procs import free_port, wait_for_port  # bench/procs.py (run from bench/)

from .processes import Server, die_with_parent, spawn, tail

REQUIREMENT = "warcprox>=2.13,<2.14"
INSTALL_TIMEOUT = 600.0
START_TIMEOUT = 60.0  # it makes its CA's key on a first start

#: warcprox refuses origins on 127.0.0.1 (``WarcProxyHandler.allow_localhost``, no option
#: for it); the same entry point as its ``warcprox`` command, with that class attribute set
LAUNCH = (
    "import sys, warcprox.main, warcprox.warcproxy; "
    "warcprox.warcproxy.WarcProxyHandler.allow_localhost = True; "
    "sys.exit(warcprox.main.main(['warcprox'] + sys.argv[1:]))"
)

#: what the legs pass besides address, port and directory; everything else is its default
OPTIONS = {
    "warcprox": ["--gzip", "--dedup-db-file=/dev/null"],
    "warcprox+dedup": ["--gzip"],  # its default sqlite deduplication (./warcprox.sqlite)
}
DEFAULTS_NOTE = (
    "warcprox options: --gzip; 'warcprox' --dedup-db-file=/dev/null (no deduplication),\n"
    "  'warcprox+dedup' its default sqlite dedup db; all else default: --max-threads 100,\n"
    "  --queue-size 500, rollover at 1 GB and none when idle, its sqlite stats db on (2.13 has\n"
    "  no --writer-threads: one WARC writer thread); it answers each request with\n"
    "  'Connection: close', so wrk opens a connection per request; the bodies of a row repeat\n"
    "  (one file per size), so with dedup on most records are revisits"
)


async def _run(argv: list[str], timeout: float) -> tuple[int, str]:
    """``argv`` to its end (killed by PID past ``timeout``): exit status and output."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        preexec_fn=die_with_parent,  # noqa: PLW1509
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode("utf-8", "replace")


async def warcprox_version(venv: Path) -> str | None:
    """The version of warcprox installed in ``venv``; None if there is none."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    status, out = await _run([str(python), "-m", "warcprox.main", "--version"], 60)
    words = out.split()
    return words[-1] if status == 0 and words and words[0] == "warcprox" else None


async def ensure_venv(venv: Path) -> str:
    """warcprox 2.13.x in ``venv``, made (python3 -m venv, pip install) unless it is there;
    its version.  RuntimeError saying why if that fails."""
    version = await warcprox_version(venv)
    if version is not None and version.startswith("2.13."):
        print(f"warcprox {version} from {venv}", flush=True)
        return version
    print(f"installing {REQUIREMENT} into {venv} ...", flush=True)
    status, out = await _run(["python3", "-m", "venv", str(venv)], 120)
    if status != 0:
        raise RuntimeError(f"python3 -m venv {venv} failed ({status}):\n{out[-2000:]}")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", REQUIREMENT]
    status, out = await _run(pip, INSTALL_TIMEOUT)
    if status != 0:
        raise RuntimeError(f"pip install {REQUIREMENT} failed ({status}):\n{out[-2000:]}")
    version = await warcprox_version(venv)
    if version is None:
        raise RuntimeError(f"warcprox does not run from {venv} after pip install:\n{out[-2000:]}")
    print(f"warcprox {version} installed", flush=True)
    return version


async def start_warcprox(tmp: Path, venv: Path, name: str) -> Server:
    """Leg ``name`` (a key of OPTIONS) in ``tmp / name``: its WARC files in ``warcs`` there,
    its CA, certificates and sqlite files (its defaults, relative) there too."""
    home = tmp / name
    home.mkdir()
    port = free_port()
    argv = [str(venv / "bin" / "python"), "-c", LAUNCH, "--address", "127.0.0.1"]
    argv += ["--port", str(port), "--dir", str(home / "warcs"), *OPTIONS[name]]
    log = home / "warcprox.log"
    proc = spawn(argv, log, home)
    server = Server(name, proc, port, log)
    await wait_for_port(port, proc, name, START_TIMEOUT, lambda: tail(log))
    return server


def count_records(warcs: Path) -> Counter[str]:
    """Per WARC-Type, the records in the gzipped WARC files under ``warcs`` (finished or still
    open): every record's header names its type on a line of its own."""
    counts: Counter[str] = Counter()
    for path in sorted(warcs.glob("*.warc.gz*")):
        tail_bytes = b""
        with contextlib.suppress(OSError, EOFError), gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                data = tail_bytes + chunk
                cut = data.rfind(b"\n")
                lines, tail_bytes = data[: cut + 1], data[cut + 1 :]
                for line in lines.split(b"\n"):
                    if line.startswith(b"WARC-Type: "):
                        counts[line[11:].strip().decode("ascii", "replace")] += 1
    return counts
