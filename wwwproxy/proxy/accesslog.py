"""The proxy front's logging: one access-log line per request, malformed requests as one INFO
line (the wiring that listens and handles signals is :mod:`wwwproxy.app`)."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TextIO

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError

__all__ = [
    "ACCESS_LOGGER",
    "LOGGED_URL",
    "AccessLog",
    "SHUTDOWN_TIMEOUT",
    "AccessLogger",
    "quiet_bad_requests",
    "setup_logging",
]

#: the request's key for the URL to log when its target is not the whole URL (inside an
#: intercepted HTTPS tunnel the request line holds only the path)
LOGGED_URL = web.RequestKey("wwwproxy.url", str)

log = logging.getLogger("wwwproxy")

#: the logger whose level turns the access log on (INFO) or off, as aiohttp's own
ACCESS_LOGGER = "aiohttp.access"
FLUSH_EVERY = 1.0  # seconds a line may wait in the buffer
MAX_BUFFERED_LINES = 512  # or this many lines: then they are written at once
#: the milliseconds of a line's time as written ("000" to "999"): looked up, not formatted
_MILLIS = tuple(f"{ms:03d}" for ms in range(1000))


class AccessLog:
    """The access log, written in batches: one line per request, in the format of the other
    log lines (``<time> aiohttp.access INFO <client> "<method> <URL>" <status> <bytes>
    <seconds>s <X-Cache>``), buffered and written at least once a second and at exit.

    A ``logging`` call per request costs as much as the rest of a cached answer, many times a
    buffered line, so the lines bypass ``logging`` on their way to the
    stream; the ``aiohttp.access`` logger's level still says whether they are written."""

    def __init__(self, stream: TextIO | None = None) -> None:
        #: where lines go; None: ``sys.stderr`` at the moment of writing (the journal, under
        #: systemd), as for the other log lines
        self.stream = stream
        #: the lines not written yet, as their parts: made into text when written (a batch
        #: at a time, the time stamp once per second of it)
        self._lines: list[tuple[float, str | None, str, str, int, int | None, float, str]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._logger = logging.getLogger(ACCESS_LOGGER)
        self._second = -1
        self._stamp = ""

    def add(
        self,
        peer: str | None,
        method: str,
        url: str,
        status: int,
        size: int | None,
        seconds: float,
        cache: str,
        now: float | None = None,
    ) -> None:
        """One request's line (``now``: when it was answered, if the caller read the clock
        already); written within a second."""
        if not self._logger.isEnabledFor(logging.INFO):
            return
        lines = self._lines
        lines.append(
            (time.time() if now is None else now, peer, method, url, status, size, seconds, cache)
        )
        if len(lines) >= MAX_BUFFERED_LINES:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()  # no loop to flush later (a thread): now
            else:
                self._timer = loop.call_later(FLUSH_EVERY, self.flush)

    def _text(
        self, lines: list[tuple[float, str | None, str, str, int, int | None, float, str]]
    ) -> str:
        out = []
        for now, peer, method, url, status, size, seconds, cache in lines:
            second = int(now)
            if second != self._second:
                self._second = second
                self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            # (formatting floats costs more than the rest of the line: a memory hit takes
            # under half a millisecond, written as it would be formatted)
            taken = "0.000" if seconds < 0.0004 else f"{seconds:.3f}"
            out.append(
                f"{self._stamp},{_MILLIS[int((now - second) * 1000)]} {ACCESS_LOGGER} INFO "
                f'{peer or "-"} "{method} {url}" {status} {size} {taken}s {cache}\n'
            )
        return "".join(out)

    def flush(self) -> None:
        """Write the buffered lines (also at exit: :meth:`close`)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._lines:
            return
        lines, self._lines = self._lines, []
        text = self._text(lines)
        stream = self.stream if self.stream is not None else sys.stderr
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError) as exc:  # a closed or broken stderr: say so once per batch
            log.warning("access log lines lost: %s", exc)

    def close(self) -> None:
        self.flush()


class AccessLogger(AbstractAccessLogger):
    """aiohttp's side of the access log: each request it answered, as a line of the
    :class:`AccessLog` of the proxy (:meth:`bound_to`)."""

    access_log: AccessLog

    @classmethod
    def bound_to(cls, access_log: AccessLog) -> type[AccessLogger]:
        """The class aiohttp is given (it wants a class, and makes one per connection)."""
        return type("BoundAccessLogger", (cls,), {"access_log": access_log})

    @property
    def enabled(self) -> bool:
        return True  # the AccessLog checks its logger's level itself

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.access_log.add(
            request.remote,
            request.method,
            request.get(LOGGED_URL, request.raw_path),
            response.status,
            response.body_length,
            time,
            response.headers.get("X-Cache", "-"),
        )


SHUTDOWN_TIMEOUT = 30.0


class BadRequestFilter(logging.Filter):
    """A malformed request is the client's problem: one INFO line saying who sent what, not an
    ERROR with a traceback (a port scan would otherwise flood the journal)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            peer = "-"
            if isinstance(record.args, tuple) and record.args:
                peer = str(record.args[0])
            reason = " ".join(str(exc.message).split())[:200]
            record.msg, record.args = "bad request from %s: %s", (peer, reason)
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_bad_requests() -> None:
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, BadRequestFilter) for f in server_log.filters):
        server_log.addFilter(BadRequestFilter())


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
