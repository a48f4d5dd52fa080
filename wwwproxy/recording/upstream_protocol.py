"""How responses are read off a connection to an origin: aiohttp's client protocol, with two
things it does not do by itself.

- Interim (1xx) responses: aiohttp reads and drops them.  A proxy must forward them (RFC 9110
  §15.2), so each one but ``100 Continue`` (wwwproxy never asks for it: it answers the
  browser's Expect itself) is handed to the callback set with :func:`reporting_interim`, if
  any.  Only the proxy's own fetches set one; they are never recorded.
- A response followed by bytes beyond its end (a Content-Length smaller than what the origin
  wrote): aiohttp's C parser completes the message, then fails on the extra bytes and drops
  the message with them, so the page would be a 502.  As Squid does, the response is kept as
  its framing says and the rest dropped, with the connection (its next bytes cannot be trusted).

The C parser stays in use: the bytes of a response are kept only until its final head has
been parsed (its interim heads and its final head, with what came in the same reads), and
only when the C parser fails on them are they read again with aiohttp's Python parser, which
can stop after the final response.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp.client_exceptions import ClientPayloadError
from aiohttp.client_proto import ResponseHandler
from aiohttp.http import RawResponseMessage
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.http_parser import HttpResponseParserPy
from aiohttp.streams import StreamReader

__all__ = ["InterimReport", "RawHeaders", "UpstreamConnector", "reporting_interim"]

RawHeaders = tuple[tuple[bytes, bytes], ...]
#: an interim response's status, reason phrase, HTTP version and header bytes
InterimReport = Callable[[int, str, tuple[int, int], RawHeaders], None]

_interim_report: ContextVar[InterimReport | None] = ContextVar("interim_report", default=None)

_Parsed = tuple[list[tuple[RawResponseMessage, StreamReader]], bool, bytes]

#: bytes of a response kept until its final head (an origin that sends interim heads without
#: end is read on as aiohttp reads it, without keeping them)
KEEP_AT_MOST = 1 << 20


@contextlib.contextmanager
def reporting_interim(report: InterimReport) -> Iterator[None]:
    """Within this block (in this task), the interim responses of the upstream requests go to
    ``report``, in the order they came, before the request returns its final response."""
    token = _interim_report.set(report)
    try:
        yield
    finally:
        _interim_report.reset(token)


def is_final(message: RawResponseMessage) -> bool:
    """The response a request returns (aiohttp's rule: anything but 1xx, and 101)."""
    return not 100 <= message.code < 200 or message.code == 101


def is_forwarded_interim(message: RawResponseMessage) -> bool:
    """An interim response the browser is told of: not 100 Continue (aiohttp's and ours to
    answer) nor 101 (a final answer)."""
    return not is_final(message) and message.code != 100


class _KeepingParser:
    """aiohttp's response parser, but a response followed by extra bytes in the reads that
    bring its end is kept (read again with the Python parser), and the connection closed."""

    def __init__(
        self, parser: Any, protocol: ResponseHandler, python_parser: Callable[[], Any]
    ) -> None:
        self._parser = parser
        self._protocol = protocol
        self._python_parser = python_parser
        #: what came since the request went out, until the final head is parsed
        self._unanswered: bytes | None = b""
        #: interim heads already handed on
        self._interim = 0
        self._dropping = False

    def feed_data(self, data: bytes) -> _Parsed:
        if self._dropping:
            return [], False, b""
        if self._unanswered is not None:
            self._unanswered += data
            if len(self._unanswered) > KEEP_AT_MOST:
                self._unanswered = None
        if self._unanswered is None:  # past the final head: a failure is aiohttp's to report
            return self._parser.feed_data(data)
        try:
            parsed: _Parsed = self._parser.feed_data(data)
        except HttpProcessingError:
            kept = self._reread(self._unanswered)
            if kept is None:
                raise
            self._dropping = True
            self._protocol.force_close()
            return kept[self._interim :], False, b""
        for message, _ in parsed[0]:
            if is_final(message):
                self._unanswered = None
                break
            self._interim += 1
        return parsed

    def _reread(self, data: bytes) -> list[tuple[RawResponseMessage, StreamReader]] | None:
        """The messages in ``data`` up to a final response whose body is complete (None if
        there is none: the failure was not extra bytes after a response)."""
        parser = self._python_parser()
        found: list[tuple[RawResponseMessage, StreamReader]] = []
        try:
            messages, _, _ = parser.feed_data(data)
            # the parser stops before each next message (max_msg_queue_size=1), so nothing
            # after the final response is read as a message
            while messages:
                found += messages
                if is_final(messages[-1][0]):
                    break
                parser.message_consumed()
                messages, _, _ = parser.feed_data(b"")
        except HttpProcessingError:
            return None
        if not found or not is_final(found[-1][0]) or not found[-1][1].is_eof():
            return None
        return found

    def feed_eof(self) -> RawResponseMessage | None:
        if self._dropping:
            return None
        return self._parser.feed_eof()

    def pause_reading(self) -> None:
        self._parser.pause_reading()


class UpstreamProtocol(ResponseHandler):
    """aiohttp's client protocol, reporting interim responses and keeping a response that
    extra bytes follow (see the module's docstring)."""

    def set_response_params(self, **params: Any) -> None:
        super().set_response_params(**params)
        # a stand-in for aiohttp's parser, with the methods the protocol calls on it
        self._parser = _KeepingParser(  # type: ignore[assignment]
            self._parser, self, functools.partial(self._python_parser, params)
        )

    def _python_parser(self, params: dict[str, Any]) -> HttpResponseParserPy:
        """The parser ``set_response_params`` makes, in Python, stopping after each message."""
        return HttpResponseParserPy(
            self,
            self._loop,
            params.get("read_bufsize", 2**16),
            timer=params.get("timer"),
            payload_exception=ClientPayloadError,
            response_with_body=not params.get("skip_payload", False),
            read_until_eof=params.get("read_until_eof", False),
            auto_decompress=params.get("auto_decompress", True),
            max_line_size=params.get("max_line_size", 8190),
            max_field_size=params.get("max_field_size", 8190),
            max_headers=params.get("max_headers", 128),
            max_msg_queue_size=1,
        )

    async def read(self) -> tuple[RawResponseMessage, StreamReader]:
        """The next response head (aiohttp's ``ClientResponse.start`` reads them until a final
        one); an interim one is reported first."""
        message, payload = await super().read()
        report = _interim_report.get()
        if report is not None and is_forwarded_interim(message):
            version = (message.version.major, message.version.minor)
            report(message.code, message.reason or "", version, tuple(message.raw_headers))
        return message, payload


class UpstreamConnector(aiohttp.TCPConnector):
    """aiohttp's TCP connector, its connections read by :class:`UpstreamProtocol` (aiohttp
    keeps the protocol's factory in ``_factory``, with no argument to set it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factory = functools.partial(UpstreamProtocol, loop=self._loop)  # type: ignore[assignment]
