"""Recording one exchange into the store: :class:`Recorder` spools a response body as it
streams and hands the whole exchange to :meth:`.Store.put`, and :func:`compress_level_for`
chooses the gzip level its members get.  Apart from :mod:`.store` because streaming a body
in (spooling, a full disk, a torn response) is its own job beside the store's lookups."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, BinaryIO

from ..url import URL
from .cdxj import CDXJRecord
from .errors import StoreError
from .warc import COMPRESS_LEVEL, HTTPRequest, HTTPResponse, sanitize_headers

if TYPE_CHECKING:
    from .store import Store

__all__ = ["Recorder", "compress_level_for"]

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
    """Collects one response body as it streams (spooled, never whole in memory) and writes
    the exchange when the body is complete.  ``finish`` blocks: call it in a thread."""

    def __init__(
        self,
        store: Store,
        url: URL,
        key: str,
        *,
        method: str,
        request_headers: Sequence[tuple[str, str]],
        request_body: bytes,
        date: datetime | None = None,
        target: str | None = None,
    ) -> None:
        """``target``: the request line's target as it was sent upstream (the browser's
        spelling); the canonical URL's path and query when None.  The records' target URI is
        the canonical URL either way: it names the entry."""
        self.store = store
        self.url = url
        self.key = key
        self.method = method
        self.request_headers = list(request_headers)
        self.request_body = request_body
        self.target = url.path_args if target is None else target
        self.date = date or datetime.now(UTC)
        self._spool: BinaryIO | None = tempfile.SpooledTemporaryFile(  # noqa: SIM115
            max_size=_SPOOL_MEMORY, dir=store.tmp_dir
        )
        self.size = 0
        #: why the body could not be kept (a full disk while spooling): the exchange is then
        #: not recorded, but the caller goes on relaying it
        self.failed: OSError | None = None

    def write(self, chunk: bytes) -> None:
        """Keep a part of the body; a spool that cannot be written (disk full) is noted in
        :attr:`failed`, never raised: the browser's answer must not depend on the archive."""
        if self._spool is None:
            raise StoreError("recorder already finished")
        if self.failed is not None:
            return
        try:
            self._spool.write(chunk)
        except OSError as exc:
            self.failed = exc
            self._spool.close()  # frees what was spooled on disk at once
            return
        self.size += len(chunk)

    def finish(
        self,
        status: int,
        reason: str,
        headers: Sequence[tuple[str, str]],
        version: str = "HTTP/1.1",
    ) -> list[CDXJRecord]:
        if self._spool is None:
            raise StoreError("recorder already finished")
        spool, self._spool = self._spool, None
        if self.failed is not None:
            spool.close()
            raise self.failed
        try:
            spool.seek(0)
            return self.store.put(
                self.url,
                self.key,
                HTTPRequest(
                    self.method,
                    self.request_headers,
                    self.request_body,
                    target=self.target,
                ),
                HTTPResponse(status, reason, sanitize_headers(headers), spool, version=version),
                date=self.date,
            )
        finally:
            spool.close()

    def abort(self) -> None:
        """Drop a body that did not complete: a torn response is never stored."""
        if self._spool is not None:
            self._spool.close()
            self._spool = None
