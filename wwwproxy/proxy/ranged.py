"""A ranged answer's body written from a stored copy (:mod:`wwwproxy.http.ranges` plans it):
the spans of a body in memory as views of it, of a body on disk read a chunk at a time in
worker threads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, BinaryIO

from ..http.ranges import Piece, body_parts, file_reads

if TYPE_CHECKING:
    from aiohttp import web

    from ..archive.store import CachedEntry

__all__ = ["PayloadReader", "write_pieces"]


async def write_pieces(
    response: web.StreamResponse, cached: CachedEntry, pieces: Iterable[Piece], chunk: int
) -> None:
    """Write a ranged answer's body: its own bytes, and spans of the stored body, from memory
    as views of it, from disk a chunk at a time (:class:`PayloadReader`)."""
    if cached.body is not None:
        for part in body_parts(pieces, cached.body):
            await response.write(part)
        return
    reader = PayloadReader(cached, chunk)
    try:
        for item in file_reads(pieces, chunk):
            if isinstance(item, bytes):
                await response.write(item)
            else:
                await response.write(await asyncio.to_thread(reader.read_at, *item))
    finally:
        reader.close()


class PayloadReader:
    """Reads spans of a stored body from disk.  Its stream inflates a WARC gzip member and
    only goes forward: a span further on is reached by reading (and dropping) what is before
    it, one before the place read so far by opening the body again."""

    def __init__(self, cached: CachedEntry, chunk: int) -> None:
        self.cached = cached
        self.chunk = chunk
        self.stream: BinaryIO | None = None
        self.position = 0

    def read_at(self, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` of the body (blocks: call it in a worker thread)."""
        if self.stream is None or offset < self.position:
            self.close()
            self.stream = self.cached.open_body()
        while self.position < offset:
            self._take(min(self.chunk, offset - self.position))
        return self._take(size)

    def _take(self, size: int) -> bytes:
        assert self.stream is not None
        data = self.stream.read(size)
        while len(data) < size and (more := self.stream.read(size - len(data))):
            data += more
        if len(data) < size:  # a body shorter than its record said
            raise ValueError(f"the stored body ends at {self.position + len(data)}")
        self.position += size
        return data

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        self.stream, self.position = None, 0
