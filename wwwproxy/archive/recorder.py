"""Recording one exchange into the store: :class:`Recorder` spools a response body as it
streams and hands the response to a :data:`PutResponse` (:meth:`.Store.put` of its exchange), and
:func:`compress_level_for` chooses the gzip level its members get.  Apart from :mod:`.store`
because streaming a body in (spooling, a full disk, a torn response) is its own job beside
the store's lookups."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from .cdxj import CDXJRecord
from .errors import StoreError
from .warc import COMPRESS_LEVEL, HTTPResponse, sanitize_headers

__all__ = ["PutResponse", "Recorder", "compress_level_for"]

#: where a recorded response goes: :meth:`.Store.put` with the URL, key, request and date
#: of its exchange bound (appended and indexed; its index lines)
PutResponse = Callable[[HTTPResponse], list[CDXJRecord]]

_SPOOL_MEMORY = 1024 * 1024  # response bodies above this spool to a file in <root>/tmp


_COMPRESSED_TYPES = (
    "image/",
    "video/",
    "audio/",
    "font/woff",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/x-xz",
    "application/x-bzip2",
    "application/zstd",
    "application/x-7z-compressed",
)


def compress_level_for(response: HTTPResponse) -> int:
    """gzip level for the exchange's members: 0 (stored) when the payload is compressed
    already, where deflating again costs seconds per 100 MB and saves nothing."""
    encoding = mime = ""
    for name, value in response.headers:
        lname = (name.decode("latin-1") if isinstance(name, bytes) else name).lower()
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if lname == "content-encoding":
            encoding = text.strip().lower()
        elif lname == "content-type":
            mime = text.strip().lower()
    if encoding not in ("", "identity") or mime.startswith(_COMPRESSED_TYPES):
        return 0
    return COMPRESS_LEVEL


class Recorder:
    """Collects one response body as it streams (its chunks kept as they came up to
    :data:`_SPOOL_MEMORY`, past that spooled to a file in ``spool_dir``: never whole in
    memory) and hands the response to ``put`` when the body is complete.  ``finish`` blocks:
    call it in a thread.

    The chunks are kept, not copied into a memory file: a page's bytes are then joined once,
    where a memory file copied them in, grew, and copied them out again (a tenth of the
    proxy's time on a cold miss of a few hundred KB)."""

    def __init__(self, put: PutResponse, spool_dir: Path) -> None:
        self._put = put
        self._spool_dir = spool_dir
        self._chunks: list[bytes] | None = []  # the body so far, while it is small
        self._spool: IO[bytes] | None = None  # ... and once it is not
        self._done = False
        self.size = 0
        #: why the body could not be kept (a full disk while spooling): the exchange is then
        #: not recorded, but the caller goes on relaying it
        self.failed: OSError | None = None

    def write(self, chunk: bytes) -> None:
        """Keep a part of the body; a spool that cannot be written (disk full) is noted in
        :attr:`failed`, never raised: the browser's answer must not depend on the archive."""
        if self._done:
            raise StoreError("recorder already finished")
        if self.failed is not None:
            return
        chunks = self._chunks
        if chunks is not None and self.size + len(chunk) <= _SPOOL_MEMORY:
            chunks.append(bytes(chunk))  # (a memoryview or bytearray may change under us)
            self.size += len(chunk)
            return
        try:
            if self._spool is None:
                self._spool = tempfile.TemporaryFile(dir=str(self._spool_dir))  # noqa: SIM115
                self._chunks = None
                self._spool.writelines(chunks or ())
            self._spool.write(chunk)
        except OSError as exc:
            self.failed = exc
            self._drop()  # frees what was spooled on disk at once
            return
        self.size += len(chunk)

    def finish(
        self,
        status: int,
        reason: str,
        headers: Sequence[tuple[str, str]],
        version: str = "HTTP/1.1",
    ) -> list[CDXJRecord]:
        if self._done:
            raise StoreError("recorder already finished")
        self._done = True
        if self.failed is not None:
            raise self.failed
        chunks, spool = self._chunks, self._spool
        self._chunks = self._spool = None
        if spool is None:
            body = b"".join(chunks or ())
            return self._put(
                HTTPResponse(status, reason, sanitize_headers(headers), body, version=version)
            )
        try:
            spool.seek(0)
            return self._put(
                HTTPResponse(status, reason, sanitize_headers(headers), spool, version=version)
            )
        finally:
            spool.close()

    def _drop(self) -> None:
        self._chunks = None
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def abort(self) -> None:
        """Drop a body that did not complete: a torn response is never stored."""
        self._done = True
        self._drop()
