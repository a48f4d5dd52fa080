"""The fast front's request heads, without sockets: the bytes of a connection cut into whole
heads (:class:`HeadStream`, a state machine fed bytes and the end of input), and each head
read by httptools into what the fast answer needs, or the reason aiohttp's path reads it
instead (:class:`HeadReader`)."""

from __future__ import annotations

import enum

import httptools
from multidict import CIMultiDict

from ..http.policy import CONDITIONAL_HEADERS
from ..recording.engine import PSEUDONYM
from .heads import closing_answer
from .replay import ToAiohttp

__all__ = ["MAX_HEAD", "HeadReader", "HeadStream", "ParsedHead", "Step"]

MAX_HEAD = 16 * 1024  # as aiohttp's max_line_size/max_field_size: longer heads go to aiohttp
_FAST_START = b"GET http://"  # how every request the fast path answers begins
#: request headers that make a request one the fast path does not take, and why
_SLOW_HEADERS = {
    "content-length": ToAiohttp.BODY,
    "transfer-encoding": ToAiohttp.BODY,
    "upgrade": ToAiohttp.UPGRADE,
    "expect": ToAiohttp.EXPECT,
    "proxy-authorization": ToAiohttp.PROXY_AUTHORIZATION,
}
#: the answer to a head that did not complete in time
LATE = closing_answer(408, "Request Timeout")


class Step(enum.Enum):
    """What a connection's reader does next (:meth:`HeadStream.next`)."""

    HEAD = "a whole head is ready (HeadStream.head): answer it, then HeadStream.taken()"
    WAIT = "nothing is buffered: wait for bytes"
    PARTIAL = "part of a head is buffered: wait for the rest (within the head time)"
    HAND_OFF = "aiohttp takes the connection and all that is buffered (HeadStream.why)"
    CLOSE = "the browser ended its input, and no whole head is left: close"


class HeadStream:
    """The bytes a browser sent and the fast front has not answered yet, cut into heads.

    Fed with :meth:`receive` and :meth:`receive_eof`; :meth:`next` says what to do.  A head
    sent byte by byte is not searched from its start on every byte; bytes that can never
    begin a request the fast front answers are handed to aiohttp at once (it judges garbage
    at once, and a head sent slowly within its keep-alive time)."""

    __slots__ = ("buffer", "scanned", "ended", "head", "why")

    def __init__(self) -> None:
        self.buffer = bytearray()
        #: where the search for the end of the head resumes
        self.scanned = 0
        self.ended = False  # the browser has sent all it will
        self.head = b""  # the head of the last Step.HEAD
        self.why: ToAiohttp | None = None  # the reason of the last Step.HAND_OFF

    def sole_head(self, data: bytes) -> bool:
        """Is ``data`` one whole head and nothing after it, with nothing buffered before it
        (the usual request, answered without buffering)?"""
        return not self.buffer and 0 <= data.find(b"\r\n\r\n") == len(data) - 4

    def receive(self, data: bytes) -> None:
        self.buffer += data

    def receive_eof(self) -> None:
        self.ended = True

    def next(self) -> Step:
        """What to do with what is buffered."""
        buffer = self.buffer
        if not buffer:
            return Step.CLOSE if self.ended else Step.WAIT
        end = buffer.find(b"\r\n\r\n", self.scanned)
        if end < 0:
            if len(buffer) > MAX_HEAD:
                return self._hand_off(ToAiohttp.HEAD_TOO_LONG)
            if buffer.find(b"\n\n", self.scanned) >= 0:
                return self._hand_off(ToAiohttp.BARE_LINE_FEEDS)
            if not _FAST_START.startswith(buffer[:11]):
                return self._hand_off(ToAiohttp.NOT_PLAIN_GET)
            if self.ended:
                return Step.CLOSE  # it can never be answered (aiohttp closes too)
            self.scanned = len(buffer) - 3 if len(buffer) > 3 else 0
            return Step.PARTIAL
        self.scanned = 0
        self.head = bytes(buffer[: end + 4])
        return Step.HEAD

    def _hand_off(self, why: ToAiohttp) -> Step:
        self.why = why
        return Step.HAND_OFF

    def taken(self) -> None:
        """The head of the last Step.HEAD is answered: drop it."""
        del self.buffer[: len(self.head)]

    def late(self) -> bytes | None:
        """The head time is over: the answer to write before closing, when part of a head
        is still waiting (else None: the connection is between requests)."""
        return LATE if self.buffer else None

    def drain(self) -> bytes:
        """Everything buffered, taken out (for aiohttp)."""
        data, self.buffer = bytes(self.buffer), bytearray()
        return data


class HeadReader:
    """A connection's httptools parser and its callbacks: each head is read as a whole
    message from the parser's start (:meth:`read`).  A head that fails, or one that ends the
    connection, is the last one read here."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.on_message_begin()

    def read(self, head: bytes) -> ParsedHead | ToAiohttp:
        """A head the fast path may answer (a plain GET of an http:// URL, no body, no
        upgrade, not looping, HTTP/1.0 or 1.1), or why aiohttp's path reads it."""
        if not head.startswith(_FAST_START):
            return ToAiohttp.NOT_PLAIN_GET
        if len(head) > MAX_HEAD:
            return ToAiohttp.HEAD_TOO_LONG
        parser = self.parser
        try:
            parser.feed_data(head)
        except httptools.HttpParserUpgrade:  # (not one of httptools' errors)
            return ToAiohttp.UPGRADE
        except httptools.HttpParserError:  # aiohttp judges it: no traceback in the log
            return ToAiohttp.MALFORMED
        if self.why is not None:
            return self.why
        if not self.complete:
            return ToAiohttp.MALFORMED
        if parser.should_upgrade():
            return ToAiohttp.UPGRADE
        version = parser.get_http_version()
        if version != "1.1" and version != "1.0":
            return ToAiohttp.VERSION  # "HTTP/2.0" in a text head
        return ParsedHead(
            self.url.decode("latin-1"),
            CIMultiDict(self.headers),
            self.headers,
            version,
            self.keep_alive,
            self.conditional,
        )

    # httptools' callbacks

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers: list[tuple[str, str]] = []
        self.complete = self.conditional = self.keep_alive = False
        self.why: ToAiohttp | None = None

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        text, data = name.decode("latin-1"), value.decode("latin-1")
        self.headers.append((text, data))
        lower = text.lower()
        slow = _SLOW_HEADERS.get(lower)
        if slow is not None:
            if self.why is None:
                self.why = slow
        elif lower in CONDITIONAL_HEADERS:
            self.conditional = True
        elif lower == "via" and PSEUDONYM in data and self.why is None:
            self.why = ToAiohttp.LOOP  # our own request come back (any Via header)

    def on_headers_complete(self) -> None:
        # llhttp's rule (aiohttp's parser is llhttp too), read while its flags are this
        # message's: once the message is complete they are reset
        self.keep_alive = self.parser.should_keep_alive()

    def on_message_complete(self) -> None:
        self.complete = True


class ParsedHead:
    """A request head the fast path may answer, as httptools read it: a function of its
    bytes alone (each head is a whole message from the parser's start), so it is kept by
    them (:meth:`~.front.FastFront._parse`) and the same object stands for the same head."""

    __slots__ = (
        "target",
        "headers",
        "header_list",
        "version",
        "keep_alive",
        "conditional",
        "serial",
    )

    def __init__(
        self,
        target: str,
        headers: CIMultiDict[str],
        header_list: list[tuple[str, str]],
        version: str,
        keep_alive: bool,  # the connection stays open after the answer
        conditional: bool,  # the browser's own validators (or a range) are in it
    ) -> None:
        self.target = target
        self.headers = headers
        self.header_list = header_list
        self.version = version
        self.keep_alive = keep_alive
        self.conditional = conditional
        #: a number no other head gets while the process runs, given when it is kept (0:
        #: not kept): what is kept about it elsewhere is kept by this number, not the head
        self.serial = 0
