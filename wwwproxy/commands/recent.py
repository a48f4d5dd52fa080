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
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from ..archive.cdxj import CDXJError, CDXJRecord
from ..archive.store import Store
from .listing import following

__all__ = ["MAX_RECENT", "Capture", "Recent", "captures_between"]

MAX_RECENT = 100_000
_TYPES = ("response", "revisit")


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


def _capture(record: CDXJRecord) -> Capture:
    fields = record.fields
    status = fields.get("hsc", 200)
    ple = fields.get("ple")
    revisit = record.record_type == "revisit"
    return Capture(
        record.timestamp,
        fields["uri"],
        status if type(status) is int else None,
        fields.get("mct"),
        record.record_type,
        ple if type(ple) is int and not revisit else None,
    )


def _order_key(capture: Capture) -> tuple[str, str, str]:
    return capture.time, capture.uri, capture.kind


def _time(capture: Capture) -> str:
    return capture.time


class Recent:
    """The captures from a moment on (a :class:`~.listing.Follower` of one cache)."""

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
                self._take(_capture(record))

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

    def ensure(self, since: str) -> None:
        """Have every capture from ``since`` on (made from the index files if need be)."""
        if self.asked is not None and since >= self.asked:
            if since > self.since:  # the oldest session left: let its captures go
                self._trim(since)
            self.asked = since
            return
        self.drop()
        self.asked = self.since = since
        day = since[:10].encode()
        for raw in self._lines():
            parts = raw.split(b" ", 2)
            # a cheap first look: a timestamp (of any precision) whose date is earlier is out
            if len(parts) < 3 or parts[1][:10] < day or raw.startswith(b"!"):
                continue
            try:
                record = CDXJRecord.parse_line(raw)
            except CDXJError:
                continue
            if record.record_type in _TYPES and record.timestamp >= since:
                self._take(_capture(record))

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
    store: Store, since: str, start: str, end: str | None
) -> tuple[list[Capture], bool]:
    """The captures of every host from ``start`` up to ``end``, oldest first, and whether that
    is all of them; all from ``since`` (the oldest kept session's start) are kept for the next
    ask."""
    with following(store, "recent", lambda: Recent(store)) as recent:
        recent.ensure(since)
        return recent.between(start, end)
