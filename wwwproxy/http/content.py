"""Content-Encoding (RFC 9110 §8.4) and the charset parameter (§8.3.2), as pure functions.

One decoder for everything that reads a stored body: :class:`ContentDecoder` undoes ``gzip``
(``x-gzip``), ``deflate`` (zlib-wrapped, or raw as some servers send it) and ``br``, several in a
row, piece by piece.  With a ``limit`` it stops once that many decoded bytes are out and never
holds much more than that, so a small decompression bomb cannot fill memory.
"""

from __future__ import annotations

import zlib

import brotli

__all__ = ["ContentDecoder", "charset_param", "decode_content", "decodes"]

CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br"})  # what ContentDecoder undoes
_CHUNK = 64 * 1024  # most bytes one stage hands on at a time
# brotli >= 1.2 can bound its output per call; older versions decode each piece in full
_BROTLI_BOUNDED = hasattr(brotli.Decompressor, "can_accept_more_data")


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
    (:attr:`full`), input is ignored."""

    def __init__(self, content_encoding: str | None, limit: int | None = None) -> None:
        self._stages: list[_Stage] = []
        for coding in _codings(content_encoding):
            if coding not in CODINGS:
                raise ValueError(f"unknown content encoding {coding!r}")
            self._stages.append(_Brotli() if coding == "br" else _Zlib(coding))
        self._left = limit
        self._raw = b""
        self._pos = 0

    @property
    def full(self) -> bool:
        """The limit has been reached: nothing more will come out."""
        return self._left is not None and self._left <= 0

    def feed(self, data: bytes) -> bytes:
        if self.full:
            return b""
        self._raw, self._pos = self._raw[self._pos :] + data, 0
        return self._drain()

    def flush(self) -> bytes:
        if self.full:
            return b""
        out = self._drain()
        if not self.full:
            for stage in self._stages:
                stage.end()
        return out

    def _drain(self) -> bytes:
        out = bytearray()
        while not self.full:
            n = _CHUNK if self._left is None else min(_CHUNK, self._left)
            piece = self._pull(len(self._stages) - 1, n)
            if not piece:
                break
            if self._left is not None:
                piece = piece[: self._left]
                self._left -= len(piece)
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
            more = self._pull(i - 1, _CHUNK)
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
            if not _BROTLI_BOUNDED:
                data, self._in = self._in, b""
                return self._d.process(data) if data else b""
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
