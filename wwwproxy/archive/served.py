"""What the store serves: :class:`CachedEntry` (a stored response ready to replay) and
:func:`served_record` (which of a key's captures stands for the page).  Apart from
:mod:`.store` because the memory cache, the proxy and the index pages use these without the
store's writing, deleting and index upkeep."""

from __future__ import annotations

import dataclasses
import functools
import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from ..http.policy import Stored, is_good, is_servable, vary_names
from .cdxj import CDXJRecord
from .warc import CachedResponse

__all__ = ["CachedEntry", "served_record"]


def _line_status(record: CDXJRecord) -> int:
    status = record.fields.get("hsc")
    return status if isinstance(status, int) and not isinstance(status, bool) else 200


def served_record(records: Iterable[CDXJRecord], *, prefer_good: bool = True) -> CDXJRecord | None:
    """Of one key's index lines, the capture :meth:`Store.get` serves: the newest 2xx/3xx one
    with ``prefer_good`` (keep-the-good-copy), else (or when there is none) the newest of any
    status, never a 304 or 206 (recorded for a browser's own conditional or range request, not
    the resource).  None when no capture can be served.  What the index and history pages show
    as a page's status."""
    lines = sorted(records, key=lambda r: r.timestamp)
    tests = (is_good, is_servable) if prefer_good else (is_servable,)
    for test in tests:
        for record in reversed(lines):
            if test(_line_status(record)):
                return record
    return None


@dataclass(frozen=True)
class CachedEntry:
    """A stored response ready to replay: status line, headers and a body read from disk."""

    key: str
    target_uri: str
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    date: datetime
    payload_length: int
    record_id: str
    request_method: str | None
    _cached: CachedResponse
    #: the payload itself when the entry comes from (or goes into) the memory cache
    body: bytes | None = None
    #: what callers derive from the entry and keep with it (a rendered answer head): it
    #: lives and dies with the entry, and a changed copy is a new entry with an empty memo
    memo: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def has_validators(self) -> bool:
        names = {n.lower() for n, _ in self.headers}
        return "etag" in names or "last-modified" in names

    @functools.cached_property
    def vary(self) -> tuple[str, ...]:
        """The request headers its ``Vary`` names (kept: a memory entry is matched per hit)."""
        return vary_names(self.headers)

    @functools.cached_property
    def stored(self) -> Stored:
        """What the cache policy judges (made once: a memory entry is judged on every hit)."""
        return Stored(self.date, self.status, self.headers)

    def open_body(self) -> BinaryIO:
        """The payload as stored (still Content-Encoded as the origin sent it)."""
        if self.body is not None:
            return io.BytesIO(self.body)
        return self._cached.open_body()

    def read_body(self) -> bytes:
        """The whole payload at once (for a body small enough to hold, as a hit's is): one
        read and one inflate, not a stream's per-chunk ones."""
        if self.body is not None:
            return self.body
        return self._cached.read_body()

    @property
    def request_headers(self) -> tuple[tuple[str, str], ...]:
        """The recorded request's headers (for ``Vary``), empty if it was not recorded."""
        request = self._cached.request
        return tuple(request.http_headers) if request is not None else ()

    def request_body(self) -> bytes:
        """The recorded request's body (to tell apart non-GET requests sharing a key)."""
        request = self._cached.request
        if request is None:
            return b""
        from .warc import open_payload

        with open_payload(request) as f:
            return f.read()

    @classmethod
    def from_cached(cls, key: str, cached: CachedResponse) -> CachedEntry:
        response = cached.response
        start = response.http_start_line or ""
        parts = start.split(" ", 2)
        reason = parts[2] if len(parts) == 3 else ""
        request = cached.request
        return cls(
            key=key,
            target_uri=response.target_uri or "",
            status=response.status or 200,
            reason=reason,
            headers=tuple(response.http_headers),
            date=cached.date,
            payload_length=cached.payload_record.payload_length,
            record_id=response.record_id,
            request_method=request.method if request is not None else None,
            _cached=cached,
        )
