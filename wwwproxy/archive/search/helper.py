"""A helper process for pure Python work that holds the GIL (:class:`Helper`): a page's search
text (:mod:`.textproc`) and the crawler's link extraction (:mod:`wwwproxy.fetch.linkproc`).

In the process that records and crawls, such work takes turns with everything else on one
core; in a process of its own it runs on another core beside it.  A helper is a plain child
process (``python -m MODULE``, whose ``__main__`` calls :func:`serve`) that reads requests on
its standard input and answers on its standard output (``marshal``, length-prefixed: only
built-in types cross), and exits when its input ends: when its owner stops it, and when the
parent dies, even by ``kill -9``, since nothing else holds the pipe.  Whatever goes wrong with
it (it cannot start, it dies, it answers nonsense), the work is done in this process instead:
the same function, the same result; only slower.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import signal
import struct
import subprocess
import sys
import threading

try:
    import fcntl
except ImportError:  # pragma: no cover (not on Windows)
    fcntl = None  # type: ignore[assignment]
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Generic, NamedTuple, TypeVar

__all__ = ["HELPER_FAILURES", "Helper", "Sent", "lower_priority", "serve"]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("<Q")
#: failures after which a helper is not started again (the work is done in-process)
HELPER_FAILURES = 3
_LOWEST = 19  # the lowest scheduling priority (nice value) there is
_MAX_MESSAGE = 1 << 31  # bytes: more than any request of ours
_STOP_WAIT = 5.0  # seconds a stopped helper is given to exit before it is killed
#: the directory that holds the ``wwwproxy`` package, for the helper's import path
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])

Request = TypeVar("Request")
Result = TypeVar("Result")


def _write(stream: BinaryIO, value: Any) -> None:
    """Send one value (whatever :mod:`marshal` can write: it checks, at run time)."""
    data = marshal.dumps(value)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)  # not joined to the length: a page's bytes are copied once, not twice
    stream.flush()


def _read(stream: BinaryIO) -> object:
    """One message; EOFError at the end of the stream (or in the middle of a message),
    ValueError if it is none of ours."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("the stream ended")
    (size,) = _LENGTH.unpack(head)
    if size > _MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes: not one of ours")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the stream ended in a message")
    try:
        return marshal.loads(data)
    except (ValueError, EOFError, TypeError) as exc:
        raise ValueError(f"an unreadable message: {exc}") from None


def serve(handler: Callable[[object], object], source: BinaryIO, sink: BinaryIO) -> int:
    """A helper's loop: each request in, ``handler``'s answer out, until the input ends.  The
    number of requests answered.  Ctrl-C in a terminal reaches the whole process group: the
    parent decides when its helper stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answered = 0
    while True:
        try:
            request = _read(source)
        except EOFError:
            return answered
        answer = handler(request)
        try:
            _write(sink, answer)
        except BrokenPipeError:  # the parent died while this worked (kill -9): nobody reads
            _quiet(sink)
            return answered
        answered += 1


def lower_priority(by: int) -> int:
    """Lower the calling thread's scheduling priority (its nice value) by ``by``, up to the
    lowest: work that may wait gets the CPU others leave over.  On Linux the value is per
    thread, and threads and processes started from this one inherit it.  The nice value
    now (unchanged where the system does not let it change, and off Linux, where a thread's
    id is no process id to give ``setpriority``)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        me = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, me)
        os.setpriority(os.PRIO_PROCESS, me, min(_LOWEST, now + by))
        return os.getpriority(os.PRIO_PROCESS, me)
    except OSError:
        return 0


def _quiet(sink: BinaryIO) -> None:
    """Point ``sink``'s descriptor at the null device, so that the interpreter's flush at
    exit finds no broken pipe to report."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sink.fileno())
        os.close(null)


def _helper_env() -> dict[str, str]:
    """This process's environment, with the directory of the ``wwwproxy`` package it runs
    first on the helper's import path when this process did not find it there by itself
    (a path added at run time): the helper runs the same code.  Never a site-packages
    directory put before the standard library: one found by ``site`` is found again."""
    env = dict(os.environ)
    root = Path(_PACKAGE_ROOT)
    if not any(Path(entry or ".").resolve() == root for entry in sys.path):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    return env


#: bytes a helper's pipes hold (Linux; at most what /proc/sys/fs/pipe-max-size allows an
#: unprivileged process, 1 MiB by default): a request of a few hundred kilobytes is written
#: in one go, not 64 KiB at a time, each waiting for the helper to have read the last
_PIPE_SIZE = 1 << 20


def _widen_pipes(proc: subprocess.Popen[bytes]) -> None:
    """Make ``proc``'s pipes hold :data:`_PIPE_SIZE` bytes where the system lets them."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if set_size is None:
        return
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                fcntl.fcntl(stream.fileno(), set_size, _PIPE_SIZE)


class _Running:
    """One helper process and the requests on their way through it: it answers them in the
    order they were written, so the n-th answer read is the n-th request's."""

    __slots__ = ("answered", "broken", "proc", "sent")

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.sent = 0  # requests written
        self.answered = 0  # answers read
        self.broken = False  # it failed: requests still on their way are done in-process


class Sent(NamedTuple):
    """Requests written to a helper: the process, and their place in its order."""

    running: _Running
    turn: int


class Helper(Generic[Request, Result]):
    """One helper process, started at its first request and kept for the next.  ``module``
    is run in it (``python -m module``); ``encode`` makes a list of requests built-in types
    for it, ``decode`` its answer back into results (ValueError if it is no answer to them),
    and ``local`` makes the results in this process when the helper cannot.  Several
    callers may have requests on their way at once (pipelined: the helper reads the next
    while it works on one; each caller reads its own answer in turn); :meth:`call` never
    fails for the helper's sake.  ``stop_wait``: seconds a stopped helper is given to
    finish before it is killed."""

    def __init__(
        self,
        what: str,
        module: str,
        *,
        encode: Callable[[Sequence[Request]], object],
        decode: Callable[[object, Sequence[Request]], list[Result]],
        local: Callable[[Sequence[Request]], list[Result]],
        argv: Sequence[str] | None = None,
        stop_wait: float = _STOP_WAIT,
    ) -> None:
        self.what = what
        self._stop_wait = stop_wait
        self._argv = list(argv) if argv is not None else [sys.executable, "-m", module]
        self._encode, self._decode, self._local = encode, decode, local
        self._running_now: _Running | None = None
        self._send_lock = threading.Lock()  # one request written at a time (and starts)
        self._read_turn = threading.Condition()  # answers read in the order sent
        self.failures = 0
        self.started = 0  # helper processes started (for the tests)

    @property
    def pid(self) -> int | None:
        running = self._running_now
        return running.proc.pid if running is not None and running.proc.poll() is None else None

    def call(self, requests: Sequence[Request]) -> list[Result]:
        """The results of ``requests``, made in the helper if it can."""
        return self.receive(self.send(requests), requests)

    def send(self, requests: Sequence[Request]) -> Sent | None:
        """Write ``requests`` to the helper (in the order of the calls: the helper answers
        in that order); what :meth:`receive` needs for their results, None if the helper
        cannot take them."""
        if not requests:
            return None
        with self._send_lock:
            running = self._running()
            if running is None:
                return None
            assert running.proc.stdin is not None
            try:
                _write(running.proc.stdin, self._encode(requests))  # type: ignore[arg-type]
            except (OSError, ValueError) as exc:
                self._fail(running, exc)
                return None
            running.sent += 1
            return Sent(running, running.sent - 1)

    def receive(self, sent: Sent | None, requests: Sequence[Request]) -> list[Result]:
        """The results of ``requests`` as :meth:`send` sent them (made here if it did not,
        or the helper failed since)."""
        if sent is not None:
            running, turn = sent
            with self._read_turn:
                while running.answered != turn and not running.broken:
                    self._read_turn.wait()
                if not running.broken:
                    assert running.proc.stdout is not None
                    try:
                        answer = _read(running.proc.stdout)  # type: ignore[arg-type]
                        running.answered += 1
                        return self._decode(answer, requests)
                    except (OSError, EOFError, ValueError) as exc:
                        self._fail(running, exc)
                    finally:
                        self._read_turn.notify_all()
        return self._local(requests) if requests else []

    def _fail(self, running: _Running, exc: BaseException) -> None:
        """``running`` failed: it is ended (once), and what is on its way is done here."""
        with self._read_turn:
            first = not running.broken
            running.broken = True
            self._read_turn.notify_all()
        if first:
            self.failures += 1
            log.warning("the %s helper failed (%s): done in-process", self.what, exc)
            if self._running_now is running:
                self._running_now = None
            _end(running.proc, kill=True, wait=self._stop_wait)

    def _running(self) -> _Running | None:
        running = self._running_now
        if running is not None and running.proc.poll() is None and not running.broken:
            return running
        if running is not None:  # it died between requests
            self._fail(running, EOFError("it exited"))
        if self.failures >= HELPER_FAILURES:
            return None
        try:
            proc = subprocess.Popen(
                self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_helper_env()
            )
        except OSError as exc:
            self.failures = HELPER_FAILURES
            log.warning("no %s helper (%s): done in-process", self.what, exc)
            return None
        self.started += 1
        _widen_pipes(proc)
        self._running_now = _Running(proc)
        return self._running_now

    def stop(self) -> None:
        """End the helper once it answered what is on its way (its input closed, then
        waited for: its CPU counts as this process's, and no zombie is left)."""
        with self._send_lock:
            running, self._running_now = self._running_now, None
            if running is None:
                return
            with self._read_turn:
                while running.answered != running.sent and not running.broken:
                    self._read_turn.wait()
            _end(running.proc, kill=running.broken, wait=self._stop_wait)


def _end(proc: subprocess.Popen[bytes], *, kill: bool, wait: float) -> None:
    """End a helper process: killed, or its input closed and ``wait`` seconds given."""
    if kill:
        proc.kill()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
