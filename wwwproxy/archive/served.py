"""What the store serves: :class:`CachedEntry` (a stored response ready to replay) and
:func:`served_record` (which of a key's captures stands for the page).  Apart from
:mod:`.store` because the memory cache, the proxy and the index pages use these without the
store's writing, deleting and index upkeep."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from ..http.policy import Stored, is_good, is_servable, request_headers_for_reuse, vary_names
from .cdxj import CDXJRecord
from .warc import CachedResponse, StoredRecord

__all__ = ["CachedEntry", "CapturePlace", "NotPlaced", "place_served", "served_record"]


def _line_status(record: CDXJRecord) -> int:
    status = record.fields.get("hsc")
    return status if isinstance(status, int) and not isinstance(status, bool) else 200


def _status_tests(prefer_good: bool) -> tuple[Callable[[int], bool], ...]:
    """What a served capture's status must pass, tried in turn: keep-the-good-copy first."""
    return (is_good, is_servable) if prefer_good else (is_servable,)


def served_record(records: Iterable[CDXJRecord], *, prefer_good: bool = True) -> CDXJRecord | None:
    """Of one key's index lines, the capture :meth:`Store.get` serves: the newest 2xx/3xx one
    with ``prefer_good`` (keep-the-good-copy), else (or when there is none) the newest of any
    status, never a 304 or 206 (recorded for a browser's own conditional or range request, not
    the resource).  None when no capture can be served.  What the index and history pages show
    as a page's status."""
    lines = sorted(records, key=lambda r: r.timestamp)
    for test in _status_tests(prefer_good):
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
    #: where its records are in their file (:meth:`for_location` drops their heads); None in
    #: a copy kept in memory (:meth:`for_memory`)
    _cached: CachedResponse | None
    #: the payload itself when the entry comes from (or goes into) the memory cache
    body: bytes | None = None
    #: what callers derive from the entry and keep with it (a rendered answer head): it
    #: lives and dies with the entry, and a changed copy is a new entry with an empty memo
    memo: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    #: the recorded request's headers that decide whether it may serve a request
    #: (:func:`request_headers_for_reuse`); set by :meth:`from_cached`
    _request_kept: tuple[tuple[str, str], ...] = ()

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

    def for_memory(self, body: bytes) -> CachedEntry:
        """This entry with its body, to keep in memory, without the records it was read
        from: their WARC headers, HTTP heads and the whole request (about 6.4 KB of small
        objects an entry, which a hit never reads) held for thousands of copies coming and
        going had spread over the allocator's pools."""
        return dataclasses.replace(self, body=body, _cached=None)

    def for_location(self) -> CachedEntry:
        """This entry to keep without its body (the store's ``located``: where a copy too big
        for memory is in its file): its records keep their places and lose their heads, which
        a read of the payload does not need (about 5.1 KB an entry, 4,096 entries)."""
        cached = self._records()
        request = cached.request
        bare = CachedResponse(
            response=_bare(cached.response),
            payload_record=_bare(cached.payload_record),
            request=_bare(request) if request is not None else None,
        )
        return dataclasses.replace(self, body=None, _cached=bare)

    def _records(self) -> CachedResponse:
        if self._cached is None:  # only a copy in memory has none, and it has its body
            raise ValueError(f"{self.key}: a copy kept in memory has no records to read")
        return self._cached

    def open_body(self) -> BinaryIO:
        """The payload as stored (still Content-Encoded as the origin sent it)."""
        if self.body is not None:
            return io.BytesIO(self.body)
        return self._records().open_body()

    def read_body(self) -> bytes:
        """The whole payload at once (for a body small enough to hold, as a hit's is): one
        read and one inflate, not a stream's per-chunk ones."""
        if self.body is not None:
            return self.body
        return self._records().read_body()

    @property
    def request_headers(self) -> tuple[tuple[str, str], ...]:
        """Of the recorded request's headers, those ``Vary`` and the credential check
        compare (empty if it was not recorded)."""
        return self._request_kept

    def request_body(self) -> bytes:
        """The recorded request's body (to tell apart non-GET requests sharing a key)."""
        request = self._records().request
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
        headers = tuple(response.http_headers)
        recorded = request.http_headers if request is not None else ()
        return cls(
            key=key,
            target_uri=response.target_uri or "",
            status=response.status or 200,
            reason=reason,
            headers=headers,
            date=cached.date,
            payload_length=cached.payload_record.payload_length,
            record_id=response.record_id,
            request_method=request.method if request is not None else None,
            _cached=cached,
            _request_kept=request_headers_for_reuse(headers, recorded),
        )


def _bare(record: StoredRecord) -> StoredRecord:
    """The record's place in its file without its heads: all a read of its payload needs."""
    return dataclasses.replace(record, warc_headers=(), http_head=b"", http_headers=())


class NotPlaced(Exception):
    """The index lines cannot stand for the cache file: it must be read."""


@dataclass(frozen=True)
class CapturePlace:
    """Where a served capture's records are in its cache file."""

    #: the response or revisit
    offset: int
    #: its request: an exchange's two records are written together, request first, so it
    #: starts where the capture before it ends (the file's start, for the first)
    request_offset: int
    #: a revisit's original (its line found by the revisit's ``roi`` and ``rod``), None if it
    #: has none in the file
    original_offset: int | None


class _FileLines:
    """One key's index lines that point into one cache file, newest first, each read (its
    JSON block) only when the walk reaches it."""

    def __init__(self, lines: Sequence[CDXJRecord], key: str, name: str) -> None:
        self.lines, self.key, self.name = lines, key, name
        self._next = len(lines) - 1
        self.walked: list[tuple[int, int, CDXJRecord]] = []  # (offset, end, line), newest first

    def place(self, line: CDXJRecord) -> tuple[int, int] | None:
        """Where ``line``'s record is, if it is this key's in this file."""
        ref = line.warcfile
        if ref is None or ref[0] != self.name or line.uri != self.key:
            return None
        length = line.fields.get("rle")
        if not isinstance(length, int) or isinstance(length, bool):
            raise NotPlaced  # a line from before lengths were indexed
        return ref[1], ref[1] + length

    def at(self, i: int) -> tuple[int, int, CDXJRecord] | None:
        """The ``i``-th newest of them (None: there are not so many)."""
        while len(self.walked) <= i and self._next >= 0:
            line = self.lines[self._next]
            self._next -= 1
            place = self.place(line)
            if place is None:
                continue
            if self.walked and place[1] > self.walked[-1][0]:
                raise NotPlaced  # not in the file's order: appended with an older date
            self.walked.append((*place, line))
        return self.walked[i] if i < len(self.walked) else None


def place_served(
    lines: Sequence[CDXJRecord], *, key: str, name: str, size: int, prefer_good: bool = True
) -> CapturePlace | None:
    """Where the capture :meth:`Store.get` serves is in the cache file ``name`` (``size``
    bytes), found from ``key``'s index ``lines`` (sorted, as the index gives them): the one
    :func:`served_record` chooses among the lines into that file.  None: none can be served.

    Only the lines from the newest back to the chosen one (and one more) are read, and a
    revisit's original is looked up by its date, so the cost does not grow with the captures
    a page has.  Raises :class:`NotPlaced` when the lines cannot stand for the file: its
    newest capture has no line or does not end where the file does (a crash between a record
    and its line, an append whose line is not written yet, a file changed behind the index),
    a line lacks its length, or the lines' time order is not the file's order.  A line
    missing between others (such a crash, then another capture) goes unseen until ``index
    rebuild`` restores it."""
    mine = _FileLines(lines, key, name)
    newest = mine.at(0)
    if newest is None or newest[1] != size:
        raise NotPlaced
    for test in _status_tests(prefer_good):
        i = 0
        while (walked := mine.at(i)) is not None:
            offset, _, chosen = walked
            if test(_line_status(chosen)):
                before = mine.at(i + 1)
                return CapturePlace(
                    offset,
                    before[1] if before is not None else 0,
                    _original(mine, chosen) if chosen.record_type == "revisit" else None,
                )
            i += 1
    return None


def _original(mine: _FileLines, revisit: CDXJRecord) -> int | None:
    """Where the response a revisit line names (``roi``, recorded at ``rod``) is."""
    rid, when = revisit.fields.get("roi"), revisit.fields.get("rod")
    if not rid or not isinstance(when, str):
        return None
    lines = mine.lines
    i = bisect.bisect_left(lines, when, key=lambda line: line.timestamp)
    while i < len(lines) and lines[i].timestamp == when:
        line = lines[i]
        if line.record_type == "response" and line.fields.get("rid") == rid:
            place = mine.place(line)
            return place[0] if place is not None else None
        i += 1
    return None
