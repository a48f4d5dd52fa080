"""aiohttp's request parser, fed so that an ``Upgrade`` the proxy does not take (anything but
a WebSocket) is ignored, as RFC 9110 §7.8 allows: the request is read as a plain one and the
connection goes on.

aiohttp's C parser (llhttp) stops at the end of every request that asks to upgrade (an
``Upgrade`` header named in ``Connection``, e.g. ``h2c``).  When aiohttp does not take the
protocol it goes on with the next bytes it is given, but drops what it was given with that
request after the request's end: a request pipelined behind it is lost, and the browser waits
for its answer until the connection times out.  So the parser is fed in pieces that end where
such a request can end: after each ``CRLF CRLF`` (the end of a head, and of a chunked body),
and after the Content-Length body of a request that asks to upgrade.  aiohttp's pure-Python
parser, fed whole, reads the same bytes the same way (the tests compare them).

Every request aiohttp reads on this proxy goes through a handler made by its
:class:`aiohttp.web.Server` (connections the fast front hands on, intercepted tunnels): that
server makes the handlers with this parser (:func:`ignore_other_upgrades`).  The one case not
covered: more pipelined requests than aiohttp queues (32) ahead of such a request, which
aiohttp's parser keeps and later reads again in one piece.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

__all__ = ["UpgradeIgnoringParser", "head_ends", "ignore_other_upgrades"]

HEAD_END = b"\r\n\r\n"
#: first bytes of data that may end a head begun before it
_MAY_END_A_HEAD = (b"\r", b"\n")


def head_ends(before: bytes, data: bytes) -> Iterator[int]:
    """Each position in ``data`` just after a ``CRLF CRLF`` that ends there, in order, those
    that began in ``before`` (the bytes of the connection before ``data``) included."""
    back = before[-3:]
    joined = back + data[:3]
    i = joined.find(HEAD_END)
    while 0 <= i < len(back):
        yield i + 4 - len(back)
        i = joined.find(HEAD_END, i + 1)
    i = data.find(HEAD_END)
    while i >= 0:
        yield i + 4
        i = data.find(HEAD_END, i + 1)


class UpgradeIgnoringParser:
    """aiohttp's request parser, fed in pieces that end where a request that asks to upgrade
    can end (the rest of it is the parser's own)."""

    __slots__ = ("parser", "before", "body_left")

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.before = b""  # the connection's last bytes (up to 3)
        #: what is left of the Content-Length body of a request that asks to upgrade
        self.body_left = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)

    def feed_data(self, data: bytes) -> tuple[Sequence[Any], bool, bytes]:
        before, self.before = self.before, (self.before + data[-3:])[-3:]
        first = data.find(HEAD_END)
        if self.body_left or -1 != first != len(data) - 4 or data[:1] in _MAY_END_A_HEAD:
            return self._in_pieces(before, data)
        # the usual: no head ends in data but at its end (nothing to cut)
        messages, upgraded, tail = self.parser.feed_data(data)
        self._note(messages)
        return messages, upgraded, tail

    def _in_pieces(self, before: bytes, data: bytes) -> tuple[Sequence[Any], bool, bytes]:
        ends = head_ends(before, data)
        messages: list[Any] = []
        start, size = 0, len(data)
        end_of_head = next(ends, size)
        while True:
            end = min(end_of_head, start + self.body_left) if self.body_left else end_of_head
            self.body_left -= min(self.body_left, end - start)
            got, upgraded, tail = self.parser.feed_data(data[start:end])
            messages.extend(got)
            if upgraded:  # a protocol aiohttp takes (a WebSocket, CONNECT): the rest is its
                return messages, True, tail + data[end:]
            self._note(got)
            if end >= size:
                return messages, False, b""
            start = end
            if end == end_of_head:
                end_of_head = next(ends, size)

    def _note(self, messages: Sequence[Any]) -> None:
        """The body of a request that asks to upgrade is the next piece (its end, one)."""
        for message, _ in messages:
            if message.upgrade and not message.chunked:
                length = message.headers.get("Content-Length", "")
                self.body_left = int(length) if length.isdigit() else 0


class UpgradeIgnoringServer(web.Server):
    """aiohttp's server, whose request handlers read with an :class:`UpgradeIgnoringParser`."""

    def __call__(self) -> RequestHandler:
        handler = super().__call__()
        # (not an HttpParser: one that feeds aiohttp's)
        handler._parser = UpgradeIgnoringParser(handler._parser)  # type: ignore[assignment]
        return handler


def ignore_other_upgrades(server: web.Server) -> None:
    """Make ``server`` (an :class:`aiohttp.web.AppRunner`'s, already set up) one whose
    handlers ignore an Upgrade aiohttp does not take.  (aiohttp has no hook between making a
    request handler and its parser, and the runner makes the server itself.)"""
    server.__class__ = UpgradeIgnoringServer
