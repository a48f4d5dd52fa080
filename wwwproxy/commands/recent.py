"""The captures of every host since a moment, in time order: what the lasttime and prevtime
pages list.

The index is sorted by URL, not time, so the captures since the oldest kept session's start are
collected once from the index files (only lines whose date can be that late are parsed) and then
kept up to date from the journal lines :mod:`.listing` follows, like the host listings: a page
then costs a binary search and what it shows.  A delete or rebuild of the index drops them (made
again when next asked for).  At most :data:`MAX_RECENT` captures are kept: past that, the oldest
are let go and the pages of sessions that reach back before what is kept say so.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from ..archive.cdxj import CDXJError, CDXJRecord
from ..archive.index_lines import INDEXED_TYPES
from ..archive.store import Store
from .following import following

__all__ = ["MAX_RECENT", "Capture", "Recent", "captures_between"]

MAX_RECENT = 100_000
_TYPES = INDEXED_TYPES
_TYPES_B = (b"response", b"revisit")


class Capture(NamedTuple):
    time: str  # the index's timestamp (UTC, microseconds): byte order is time order
    uri: str  # the archive key
    status: int | None
    mime: str | None
    kind: str  # response or revisit (the same payload as the capture before)
    payload: int | None  # payload bytes of a response (None: the index line lacks them)

    @property
    def when(self) -> datetime:
        return datetime.fromisoformat(self.time)

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.uri,
            "time": self.when.isoformat(),
            "status": self.status,
            "mime": self.mime,
            "type": self.kind,
            "payload": self.payload,
        }


def _from_fields(timestamp: str, kind: str, fields: dict[str, Any]) -> Capture | None:
    uri, status, mime, ple = (
        fields.get("uri"),
        fields.get("hsc", 200),
        fields.get("mct"),
        fields.get("ple"),
    )
    if not isinstance(uri, str):
        return None
    return Capture(
        timestamp,
        uri,
        status if type(status) is int else None,
        mime if isinstance(mime, str) else None,
        kind,
        ple if type(ple) is int and kind != "revisit" else None,
    )


def _capture(record: CDXJRecord) -> Capture | None:
    return _from_fields(record.timestamp, record.record_type, record.fields)


#: a timestamp as the index writes it (others are normalized by the full parser first)
_CANONICAL_TS = re.compile(rb"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


def _line_capture(raw: bytes, since: str, until: str | None = None) -> Capture | None:
    """The capture of an index line from ``since`` on, before ``until`` (None: earlier or
    later, another type, not a line).  A line as the index writes it costs a JSON parse; any
    other goes the full way."""
    parts = raw.split(b" ", 3)
    if len(parts) < 4 or raw.startswith(b"!"):
        return None
    if parts[1][:10] < since[:10].encode():  # any precision: its date is earlier
        return None
    kind = parts[2]
    if _CANONICAL_TS.fullmatch(parts[1]):
        if kind not in _TYPES_B:
            return None
        timestamp = parts[1].decode()
        if timestamp < since or (until is not None and timestamp >= until):
            return None
        try:
            fields = json.loads(parts[3])
        except ValueError:
            return None
        return _from_fields(timestamp, kind.decode(), fields) if isinstance(fields, dict) else None
    try:
        record = CDXJRecord.parse_line(raw)
    except CDXJError:
        return None
    if record.record_type not in _TYPES or record.timestamp < since:
        return None
    if until is not None and record.timestamp >= until:
        return None
    return _capture(record)


def _order_key(capture: Capture) -> tuple[str, str, str]:
    return capture.time, capture.uri, capture.kind


def _time(capture: Capture) -> str:
    return capture.time


class Recent:
    """The captures from a moment on (a :class:`~.following.Follower` of one cache)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.asked: str | None = None  # collected for this moment on (None: nothing collected)
        self.since = ""  # every capture from here on is kept (later than asked past MAX_RECENT)
        self.items: list[Capture] = []
        self._seen: set[tuple[str, str, str]] = set()
        self._sorted = True

    # -- Follower --

    def add(self, records: list[CDXJRecord]) -> None:
        if self.asked is None:
            return
        for record in records:
            if record.record_type in _TYPES and record.timestamp >= self.since:
                capture = _capture(record)
                if capture is not None:
                    self._take(capture)

    def drop(self) -> None:
        self.asked = None
        self.since = ""
        self.items = []
        self._seen = set()
        self._sorted = True

    # -- collecting --

    def _take(self, capture: Capture) -> None:
        ident = _order_key(capture)
        if ident in self._seen:
            return
        self._seen.add(ident)
        if self.items and ident < _order_key(self.items[-1]):
            self._sorted = False
        self.items.append(capture)

    def _lines(self) -> Iterable[bytes]:
        for path in self.store.index.files():
            with contextlib.suppress(OSError), open(path, "rb", buffering=1 << 20) as f:
                yield from f

    def ensure(self, since: str, oldest: str = "") -> None:
        """Have every capture from ``since`` on (made from the index files if need be), and
        none from before ``oldest`` (the oldest session kept) any more."""
        if self.asked is not None and since >= self.asked:
            if oldest > self.since:  # the oldest session left: let its captures go
                self._trim(oldest)
                self.asked = max(self.asked, oldest)
            return
        if self.asked is None:
            self.drop()
            until = None
        else:  # further back than collected: only the captures before it are added
            until = self.since
        self.asked = self.since = since
        for raw in self._lines():
            capture = _line_capture(raw, since, until)
            if capture is not None:
                self._take(capture)

    def _trim(self, since: str) -> None:
        self._order()
        cut = bisect.bisect_left(self.items, since, key=_time)
        for capture in self.items[:cut]:
            self._seen.discard(_order_key(capture))
        del self.items[:cut]
        self.since = since

    def _order(self) -> None:
        if not self._sorted:
            self.items.sort(key=_order_key)
            self._sorted = True

    def _bound(self) -> None:
        self._order()
        if len(self.items) > MAX_RECENT:
            self._trim(self.items[len(self.items) - MAX_RECENT].time)

    def between(self, start: str, end: str | None) -> tuple[list[Capture], bool]:
        """The kept captures from ``start`` up to ``end`` (not included; None: on), oldest
        first, and whether that is all of them (False: the oldest were let go)."""
        self._bound()
        lo = bisect.bisect_left(self.items, start, key=_time)
        hi = len(self.items) if end is None else bisect.bisect_left(self.items, end, key=_time)
        return self.items[lo:hi], self.since <= start


def captures_between(
    store: Store, start: str, end: str | None, oldest: str = ""
) -> tuple[list[Capture], bool]:
    """The captures of every host from ``start`` up to ``end``, oldest first, and whether that
    is all of them.  What is collected is kept for the next asks, back to the earliest
    ``start`` asked for but not before ``oldest`` (the oldest kept session's start)."""
    with following(store, "recent", lambda: Recent(store)) as recent:
        recent.ensure(start, oldest)
        return recent.between(start, end)
