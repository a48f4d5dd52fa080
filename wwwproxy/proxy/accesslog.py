"""The proxy front's logging: one access-log line per request, malformed requests as one INFO
line (the wiring that listens and handles signals is :mod:`wwwproxy.app`)."""

from __future__ import annotations

import logging
import sys

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError

__all__ = [
    "LOGGED_URL",
    "SHUTDOWN_TIMEOUT",
    "AccessLogger",
    "quiet_bad_requests",
    "setup_logging",
]

#: the request's key for the URL to log when its target is not the whole URL (inside an
#: intercepted HTTPS tunnel the request line holds only the path)
LOGGED_URL = "wwwproxy.url"

log = logging.getLogger("wwwproxy")


class AccessLogger(AbstractAccessLogger):
    """One line per request: client, method, the full URL asked for, status, bytes, seconds,
    and whether it came from the cache (X-Cache)."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        peer = request.remote or "-"
        cache = response.headers.get("X-Cache", "-")
        self.logger.info(
            '%s "%s %s" %s %s %.3fs %s',
            peer,
            request.method,
            request.get(LOGGED_URL, request.raw_path),
            response.status,
            response.body_length,
            time,
            cache,
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
