"""The fast front's heads (:mod:`.front`): a request head as httptools reads it, and a
memory copy's answer head, rendered once and kept with the copy."""

from __future__ import annotations

import functools
import time
from email.utils import formatdate
from typing import TYPE_CHECKING

from multidict import CIMultiDict

from ..http.content import decodes
from ..http.headers import get_header
from ..http.policy import CONDITIONAL_HEADERS, accepts_coding, current_age
from ..recording.engine import PSEUDONYM
from .replay import bodiless, plan_replay, sendable_headers

if TYPE_CHECKING:
    from ..archive.store import CachedEntry

__all__ = [
    "JOINED_BODY",
    "HeadReader",
    "ParsedHead",
    "RenderedHead",
    "accepts",
    "connection_line",
    "http_now",
]

#: bodies up to this are joined to their head for one write; larger ones are not copied
JOINED_BODY = 16 * 1024
#: request headers that make a request one the fast path does not take
_SLOW_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "upgrade", "expect", "proxy-authorization"}
)


@functools.lru_cache(maxsize=256)
def accepts(accept_encoding: str | None, coding: str) -> bool:
    """accepts_coding, cached: browsers send the same few Accept-Encoding values."""
    return accepts_coding(accept_encoding, coding)


_now_second = -1
_now_bytes = b""


def http_now() -> bytes:
    """The Date header's value for now, made once a second."""
    global _now_second, _now_bytes
    second = int(time.time())
    if second != _now_second:
        _now_second, _now_bytes = second, formatdate(second, usegmt=True).encode("latin-1")
    return _now_bytes


def connection_line(version: str, keep_alive: bool) -> bytes:
    """The Connection header line the answer needs, if any."""
    if not keep_alive:
        return b"Connection: close\r\n"
    if version == "1.0":
        return b"Connection: keep-alive\r\n"
    return b""


class RenderedHead:
    """A memory copy's answer head rendered once, for requests without the browser's own
    conditions: everything but ``Age``, ``Date`` (when the recording has none) and
    ``Connection``, which depend on the moment and the request."""

    __slots__ = (
        "status",
        "rest",
        "http11",
        "recorded",
        "initial_age",
        "date",
        "coding",
        "moment",
        "kept_alive",
        "joined",
        "body",
    )

    def __init__(self, entry: CachedEntry) -> None:
        # as for a browser that takes any coding: one that does not is checked per request
        replay = plan_replay(entry, "GET", {"Accept-Encoding": "*"})
        self.status = replay.status
        status_line = f" {replay.status} {replay.reason}\r\n".encode("latin-1")
        kept = [(n, v) for n, v in sendable_headers(replay.headers) if n.lower() != "age"]
        #: the head up to Age, after ``HTTP/<version>``; and with ``HTTP/1.1`` before it
        self.rest = status_line + b"".join(f"{n}: {v}\r\n".encode() for n, v in kept)
        self.http11 = b"HTTP/1.1" + self.rest
        self.recorded = entry.date.timestamp()
        age = get_header(entry.headers, "Age")
        self.initial_age = current_age(entry.date, entry.date, age)
        self.date = not any(n.lower() == "date" for n, _ in replay.headers)
        coding = get_header(entry.headers, "Content-Encoding")
        #: a coding the browser must accept, or the aiohttp path decodes it on the way
        self.coding = coding if coding and not bodiless(entry) and decodes(coding) else None
        #: the HTTP/1.1 keep-alive head (the usual one) as made at ``moment`` (the second
        #: of Date, and of the time in the cache): Age and Date change once a second
        self.moment = (-1, -1)
        self.kept_alive = b""
        #: ``kept_alive`` and the body, for a body small enough to join (else None)
        self.joined: bytes | None = None
        self.body = entry.body if entry.body is not None else b""

    @classmethod
    def of(cls, entry: CachedEntry) -> RenderedHead:
        """The entry's rendered head, made on its first answer and kept with it."""
        rendered = entry.memo.get("front.head")
        if rendered is None:
            rendered = entry.memo["front.head"] = cls(entry)
        return rendered

    def head(self, version: str, keep_alive: bool, now: float) -> bytes:
        """The head for an answer at ``now`` (``time.time()``)."""
        resident = int(now - self.recorded)
        usual = keep_alive and version == "1.1"
        if usual and (int(now), resident) == self.moment:
            return self.kept_alive
        age = self.initial_age + max(0, resident)
        if usual:
            head = self._make(self.http11, age, b"")
            self.moment, self.kept_alive = (int(now), resident), head
            self.joined = head + self.body if len(self.body) <= JOINED_BODY else None
            return head
        start = self.http11 if version == "1.1" else b"HTTP/" + version.encode() + self.rest
        return self._make(start, age, connection_line(version, keep_alive))

    def usual(self, now: float) -> bytes | None:
        """The whole HTTP/1.1 keep-alive answer at ``now``, head and body in one bytes
        (made once per moment, as its head), or None when the body is not joined."""
        if (int(now), int(now - self.recorded)) != self.moment:
            self.head("1.1", True, now)
        return self.joined

    def _make(self, start: bytes, age: int, connection: bytes) -> bytes:
        date = b"Date: " + http_now() + b"\r\n" if self.date else b""
        return b"%sAge: %d\r\n%s%s\r\n" % (start, age, date, connection)


class HeadReader:
    """httptools callbacks: one request head, and whether a header in it keeps the request
    off the fast path (``slow``) or asks the browser's own conditions (``conditional``)."""

    def __init__(self) -> None:
        self.on_message_begin()

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers: list[tuple[str, str]] = []
        self.complete = self.slow = self.conditional = self.looped = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        text, data = name.decode("latin-1"), value.decode("latin-1")
        self.headers.append((text, data))
        lower = text.lower()
        if lower in _SLOW_HEADERS:
            self.slow = True
        elif lower in CONDITIONAL_HEADERS:
            self.conditional = True
        elif lower == "via" and PSEUDONYM in data:
            self.looped = True  # our own request come back (any Via header: aiohttp judges)

    def on_message_complete(self) -> None:
        self.complete = True


class ParsedHead:
    """A request head the fast path may answer, as httptools read it: a function of its
    bytes alone (each head is a whole message from the parser's start), so it is kept by
    them (:meth:`FastFront._parse`) and the same object stands for the same head."""

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
        keep_alive: bool,
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
