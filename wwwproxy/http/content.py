"""Content-Encoding (RFC 9110 §8.4) and the charset parameter (§8.3.2), as pure functions.

One decoder for everything that reads a stored body: :class:`ContentDecoder` undoes ``gzip``
(``x-gzip``), ``deflate`` (zlib-wrapped, or raw as some servers send it) and ``br``, several in a
row, piece by piece.  With a ``limit`` it stops once that many decoded bytes are out and never
holds much more than that, so a small decompression bomb cannot fill memory; a body served
decoded is read out of it in pieces of at most :data:`PIECE` bytes (:meth:`ContentDecoder.read`),
each written before the next is decoded, and ``max_size`` cuts it off with
:class:`DecodedTooLarge`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import brotli

__all__ = [
    "PIECE",
    "ContentDecoder",
    "DecodedTooLarge",
    "charset_param",
    "decode_content",
    "decodes",
]

CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br"})  # what ContentDecoder undoes
PIECE = 64 * 1024  # most bytes one stage hands on at a time (and :meth:`ContentDecoder.read`)


class DecodedTooLarge(ValueError):
    """The decoded body goes on past the ``max_size`` it may have (a decompression bomb, or a
    page larger than the configuration's ``max_decoded_size``, which its message names)."""


def _codings(content_encoding: str | None) -> list[str]:
    """The codings to undo, in the order to undo them (the last applied first)."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    return [c for c in reversed(codings) if c and c != "identity"]


def decodes(content_encoding: str | None) -> bool:
    """Whether :class:`ContentDecoder` can undo this Content-Encoding (none counts)."""
    return all(c in CODINGS for c in _codings(content_encoding))


class ContentDecoder:
    """Undo a Content-Encoding piecewise: ``feed`` the encoded bytes, then ``flush`` once.

    ``identity``, ``gzip``/``x-gzip``, ``deflate`` and ``br``, several in a row.  Any other
    coding (``zstd``, ``compress``) raises ValueError here; data that is not what it says
    raises ValueError from ``feed`` or ``flush``.  A truncated stream gives what it holds;
    bytes after the end of a gzip or deflate stream are ignored (after br, an error).  With
    ``limit``, at most that many decoded bytes come out in all; once they have
    (:attr:`full`), input is ignored.  With ``max_size``, the bytes up to it come out and then
    :meth:`read` (or ``feed``, ``flush``) raises :class:`DecodedTooLarge` if there are more.

    Two ways to use it: ``feed``/``flush`` return all the output the input gives (bounded by
    ``limit``), or ``put`` the input, ``read`` pieces of at most :data:`PIECE` bytes until
    one is empty, and after the last input, ``end``: the output is made only as it is read."""

    def __init__(
        self,
        content_encoding: str | None,
        limit: int | None = None,
        *,
        max_size: int | None = None,
    ) -> None:
        self._stages: list[_Stage] = []
        for coding in _codings(content_encoding):
            if coding not in CODINGS:
                raise ValueError(f"unknown content encoding {coding!r}")
            self._stages.append(_Brotli() if coding == "br" else _Zlib(coding))
        self._left = limit
        self._max_size = max_size
        self._out = 0  # bytes read out so far
        self._over = False  # max_size is reached and there is more
        self._raw = b""
        self._pos = 0
        self._held = b""  # output decoded but not read yet

    @property
    def full(self) -> bool:
        """The limit has been reached: nothing more will come out."""
        return self._left is not None and self._left <= 0

    def put(self, data: bytes) -> None:
        """More of the encoded body, decoded as :meth:`read` asks."""
        if not self.full:
            self._raw, self._pos = self._raw[self._pos :] + data, 0

    def read(self) -> bytes:
        """The next at most :data:`PIECE` decoded bytes; empty when the input put so far gives
        no more (or the limit is reached).  DecodedTooLarge once past ``max_size``."""
        if self._over:
            raise DecodedTooLarge(
                f"the decoded body is larger than {self._max_size} bytes (max_decoded_size)"
            )
        if self.full:
            return b""
        n = PIECE if self._left is None else min(PIECE, self._left)
        piece = self._held or self._pull(len(self._stages) - 1, n)
        piece, self._held = piece[:n], piece[n:]  # a stage may give a little more than asked
        if self._left is not None:
            self._left -= len(piece)
        if self._max_size is not None and self._out + len(piece) > self._max_size:
            self._over = True
            piece = piece[: self._max_size - self._out]
            if not piece:
                return self.read()  # raises
        self._out += len(piece)
        return piece

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """``put`` ``data``, then :meth:`read` its pieces, each decoded only when the one before
        has been taken: a server writes (and drains) one before the next is made."""
        self.put(data)
        while piece := self.read():
            yield piece

    def end(self) -> None:
        """No more input: ValueError if the stream so far cannot be the whole of one (a
        deflate body too short to tell its kind); call after :meth:`read` gave empty."""
        if not self.full:
            for stage in self._stages:
                stage.end()

    def feed(self, data: bytes) -> bytes:
        self.put(data)
        return self._drain()

    def flush(self) -> bytes:
        out = self._drain()
        self.end()
        return out

    def _drain(self) -> bytes:
        out = bytearray()
        while piece := self.read():
            out += piece
        return bytes(out)

    def _pull(self, i: int, n: int) -> bytes:
        """Up to about ``n`` bytes out of stage ``i`` (-1: the raw input); empty when it
        needs input that has not come yet."""
        if i < 0:
            piece = self._raw[self._pos : self._pos + n]
            self._pos += len(piece)
            return piece
        stage = self._stages[i]
        while True:
            out = stage.read(n)
            if out:
                return out
            more = self._pull(i - 1, PIECE)
            if not more:
                return b""
            stage.put(more)


class _Stage:
    """One coding to undo: ``put`` input, ``read`` up to about n bytes of output (empty when it
    needs more input), ``end`` when no more input will come."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._in = b""

    def put(self, data: bytes) -> None:
        self._in += data

    def read(self, n: int) -> bytes:
        raise NotImplementedError

    def end(self) -> None:
        pass

    def _bad(self, exc: Exception) -> ValueError:
        return ValueError(f"bad compressed data: {self.coding}: {exc}")


class _Zlib(_Stage):
    def __init__(self, coding: str) -> None:
        super().__init__(coding)
        self._d: zlib._Decompress | None = (
            zlib.decompressobj(16 + zlib.MAX_WBITS) if coding != "deflate" else None
        )
        self._pending = False

    def read(self, n: int) -> bytes:
        if self._d is None:  # deflate: zlib-wrapped (RFC 9110) or raw (what some servers send)
            if len(self._in) < 2:
                return b""
            head = self._in
            raw = (head[0] & 0x0F) != 8 or int.from_bytes(head[:2], "big") % 31 != 0
            self._d = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
        if self._d.eof:  # anything after the end is ignored
            self._in = b""
            return b""
        if not self._in and not self._pending:
            return b""
        try:
            out = self._d.decompress(self._in, n)
        except zlib.error as exc:
            raise self._bad(exc) from None
        self._in = self._d.unconsumed_tail
        self._pending = len(out) >= n  # a full read may have left output inside zlib
        return out

    def end(self) -> None:
        if self._d is None and self._in:
            raise self._bad(ValueError("too short"))


class _Brotli(_Stage):
    def __init__(self) -> None:
        super().__init__("br")
        self._d = brotli.Decompressor()

    def read(self, n: int) -> bytes:
        if self._d.is_finished():
            self._in = b""
            return b""
        try:
            data = b""
            if self._in and self._d.can_accept_more_data():
                data, self._in = self._in, b""
            out: bytes = self._d.process(data, output_buffer_limit=n)  # brotli is untyped
            return out
        except brotli.error as exc:
            raise self._bad(exc) from None


def decode_content(data: bytes, content_encoding: str | None, limit: int) -> bytes:
    """``data`` without its Content-Encoding, at most ``limit`` bytes of it.  ValueError for a
    coding that cannot be undone or data that is not what it says."""
    decoder = ContentDecoder(content_encoding, limit)
    return decoder.feed(data) + decoder.flush()


def charset_param(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type, unquoted, if any."""
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'").strip() or None
    return None
