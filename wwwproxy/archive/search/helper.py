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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

__all__ = ["HELPER_FAILURES", "Helper", "serve"]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("<Q")
#: failures after which a helper is not started again (the work is done in-process)
HELPER_FAILURES = 3
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


class Helper(Generic[Request, Result]):
    """One helper process, started at its first request and kept for the next.  ``module``
    is run in it (``python -m module``); ``encode`` makes a list of requests built-in types
    for it, ``decode`` its answer back into results (ValueError if it is no answer to them),
    and ``local`` makes the results in this process when the helper cannot.  One request at a
    time (a lock); :meth:`call` never fails for the helper's sake.  ``stop_wait``: seconds a
    stopped helper is given to finish before it is killed."""

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
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.failures = 0
        self.started = 0  # helper processes started (for the tests)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def call(self, requests: Sequence[Request]) -> list[Result]:
        """The results of ``requests``, made in the helper if it can."""
        if not requests:
            return []
        with self._lock:
            proc = self._running()
            if proc is not None:
                assert proc.stdin is not None and proc.stdout is not None
                try:
                    _write(proc.stdin, self._encode(requests))  # type: ignore[arg-type]
                    return self._decode(_read(proc.stdout), requests)  # type: ignore[arg-type]
                except (OSError, EOFError, ValueError) as exc:
                    self.failures += 1
                    log.warning("the %s helper failed (%s): done in-process", self.what, exc)
                    self._stop(kill=True)
        return self._local(requests)

    def _running(self) -> subprocess.Popen[bytes] | None:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:  # it died between requests
            self.failures += 1
            self._stop(kill=True)
        if self.failures >= HELPER_FAILURES:
            return None
        try:
            self._proc = subprocess.Popen(
                self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_helper_env()
            )
        except OSError as exc:
            self.failures = HELPER_FAILURES
            log.warning("no %s helper (%s): done in-process", self.what, exc)
            return None
        self.started += 1
        return self._proc

    def stop(self) -> None:
        """End the helper (its input closed, then waited for: its CPU counts as this
        process's, and no zombie is left)."""
        with self._lock:
            self._stop(kill=False)

    def _stop(self, *, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            proc.wait(self._stop_wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
