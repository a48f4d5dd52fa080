"""The benchmark's child processes: started so that they die with it, watched by a watchdog
that outlives it, stopped by PID; their CPU time and peak RSS from /proc."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_TIMEOUT = 10.0  # seconds between SIGTERM and SIGKILL
START_TIMEOUT = 20.0

#: the watchdog's stdin: each server's PID is written to it (see run_watchdog)
_watchdog: subprocess.Popen[bytes] | None = None


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when this process dies (Linux; best effort)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def spawn(argv: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """``argv`` with its output into ``log``, dying with this process, told to the watchdog."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
    if _watchdog is not None and _watchdog.stdin is not None:
        with contextlib.suppress(OSError):
            _watchdog.stdin.write(f"{proc.pid}\n".encode())
            _watchdog.stdin.flush()
    return proc


def start_watchdog(entry: Path, tmp: Path, service: str, keep: bool) -> subprocess.Popen[bytes]:
    """``entry`` (the benchmark's script) run with --watchdog: it outlives this process if that
    is killed outright; every process spawn() starts from now on is told to it."""
    global _watchdog
    argv = [sys.executable, str(entry), "--watchdog", str(tmp), service, "keep" if keep else "-"]
    _watchdog = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)
    return _watchdog


def end_watchdog(watchdog: subprocess.Popen[bytes]) -> None:
    """Close its pipe (it then stops whatever still runs) and wait for it, bounded."""
    if watchdog.stdin is not None:
        watchdog.stdin.close()
    try:
        watchdog.wait(timeout=STOP_TIMEOUT + 10)
    except subprocess.TimeoutExpired:
        watchdog.kill()


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
    remove_shm(service)
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def remove_shm(service: str) -> None:
    """Squid's /dev/shm segments, by this run's unique service name."""
    for leftover in Path("/dev/shm").glob(f"{service}-*"):
        with contextlib.suppress(OSError):
            leftover.unlink()


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
    """(utime + stime seconds of all its threads, VmHWM KiB) of a process; None if gone."""
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
    """The children of ``pid``, whichever of its threads started them."""
    kids: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return kids
    for task in tasks:
        try:
            kids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return kids


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared: they say how busy)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


@dataclasses.dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path  # its stdout/stderr
    access_log: Path | None = None  # where the proxy logs each request (None: not read)
    stat_pid: int = 0  # the process whose CPU and RSS are reported

    def stats(self) -> tuple[float, int] | None:
        """(CPU seconds of the process and of its helper processes, alive now, so a proxy
        that records in a helper is charged for it; the process's own peak RSS)."""
        pid = self.stat_pid or self.proc.pid
        own = proc_stat(pid)
        if own is None:
            return None
        cpu = own[0]
        todo = child_pids(pid)
        while todo:
            kid = todo.pop()
            kid_stat = proc_stat(kid)
            if kid_stat is not None:
                cpu += kid_stat[0]
                todo += child_pids(kid)
        return cpu, own[1]
