"""One host's pages, as the host index page lists them: a row per archive key, summed up from
its index lines as they arrive (the capture that would be served, capture count, newest time,
size), held in flat columns so that a 100,000-page host costs about 12 MB, not 40.

:mod:`.listing` keeps these between requests and brings them up to date; this module only
holds the rows and answers what a page shows (:class:`PageInfo`) and in which order.
"""

from __future__ import annotations

import bisect
import os
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..archive.cdxj import CDXJRecord
from ..archive.index_lines import INDEXED_TYPES
from ..archive.store import WARC_SUFFIX
from ..http.policy import is_good, is_servable
from ..url import url_hash
from ..url.surt import host_surt

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

__all__ = ["HostRows", "PageInfo", "host_of", "split_hostport"]


@dataclass(frozen=True)
class PageInfo:
    """One archive key of a host: when it was last fetched, the capture that would be served
    (its status and type), and how many captures there are."""

    key: str
    time: datetime  # the newest capture's
    status: int | None  # the served capture's (None: none can be served)
    mime: str | None
    captures: int
    size: int | None  # bytes on disk of its cache file (all captures)
    payload: int | None = None  # the served capture's payload bytes (None: the index lacks it)
    newest_status: int | None = None  # the newest capture's, when the served one's differs

    @property
    def shown_size(self) -> int | None:
        """What the Size column shows and sorts by: the payload, else the size on disk."""
        return self.payload if self.payload is not None else self.size

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.key,
            "time": self.time.isoformat(),
            "status": self.status,
            "newest_status": self.newest_status,
            "mime": self.mime,
            "captures": self.captures,
            "size": self.size,
            "payload": self.payload,
        }


def split_hostport(hostport: str) -> tuple[str, str | None]:
    """``example.com:8080`` -> (``example.com``, ``8080``); ``[::1]:8080`` -> (``[::1]``, ...)."""
    if hostport.startswith("["):
        end = hostport.find("]")
        host, rest = hostport[: end + 1], hostport[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, colon, port = hostport.rpartition(":")
    if colon and port.isdigit():
        return host, port
    return hostport, None


def host_of(uri: str) -> tuple[str, str] | None:
    """(proto, host folder) of an archive key, as the store names its folders."""
    proto, sep, rest = uri.partition("://")
    if not sep:
        return None
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    return proto, authority[authority.rfind("@") + 1 :]


# One host's pages


#: one capture as shown: (timestamp, status or None when the line has no integer one, type,
#: payload bytes or None when the line has no ``ple``; a revisit's are its original's)
_Capture = tuple[str, "int | None", "str | None", "int | None"]
_NO_SIZE = -1  # a line without its record length: the size comes from the file
_TS_WIDTH = 27  # the index's one timestamp form: 2026-11-22T05:04:30.123456Z
_INT64 = 1 << 63
#: an order with at most this many rows changed since it was made (or one in 32 of the rows,
#: whichever is more) has them put back in place one by one; with more it is made again
_FIX_AT_MOST = 256


def _stored(value: object) -> int:
    """An optional non-negative integer as a column holds it (-1: none)."""
    return value if type(value) is int and 0 <= value < _INT64 else -1


class HostRows:
    """The pages of one host (one protocol): a row per archive key, summed up as its index
    lines arrive.

    The rows live in flat columns, not an object per key: about 100 bytes a page instead of
    400, so a 100,000-page host costs about 10 MB.  The keys (without the ``proto://`` all
    share) are one byte string, found through an open-addressing table of row numbers.  Only
    the newest capture of a key is held in the columns; the capture that would be served is
    kept apart only when it is another one (a newer 404 or 304 than the good copy: rare).
    """

    def __init__(self, root: Path, proto: str, hostport: str) -> None:
        host, port = split_hostport(hostport)
        self.root = root
        self.prefix = host_surt(host, port) + "/"
        self.scheme = f"{proto}://"
        self.used = time.monotonic()  # when a page last asked for it
        self._names = bytearray()  # the keys' UTF-8 after the scheme, one after another
        self._starts = array("Q", [0])  # row r's key is _names[_starts[r]:_starts[r + 1]]
        self._table = array("i", [-1]) * 8  # slot -> row (-1: free); a power of two long
        self._ts = bytearray()  # the newest capture's timestamp, _TS_WIDTH bytes a row
        self._status = array("h")  # its status, three digits (-1: none)
        self._mime = array("I")  # its type, as an index into _mimes
        self._cap_payload = array("q")  # its payload bytes (-1: not known)
        self._payload = array("q")  # the newest response record's payload bytes (-1)
        self._captures = array("I")
        self._size = array("q")  # the end of the key's last record: its file's size
        self._mimes: list[str | None] = [None]
        self._mime_ids: dict[str, int] = {}
        #: rows whose newest 2xx/3xx capture (good) or newest capture that is not a 304/206
        #: (servable) is not their newest capture; None: there is none
        self._good: dict[int, _Capture | None] = {}
        self._servable: dict[int, _Capture | None] = {}
        self._orders: dict[str, array[int]] = {}
        #: per order made: the rows added or changed since (put in place when it is asked for)
        self._stale: dict[str, set[int]] = {}

    def __len__(self) -> int:
        return len(self._status)

    def wants(self, record: CDXJRecord) -> bool:
        """Whether a record belongs here (the prefix holds other protocols and types)."""
        return record.key.startswith(self.prefix) and record.record_type in INDEXED_TYPES

    # -- rows --

    def _name(self, row: int) -> bytearray:
        return self._names[self._starts[row] : self._starts[row + 1]]

    def key(self, row: int) -> str:
        return self.scheme + self._name(row).decode("utf-8", "surrogatepass")

    def _find(self, name: bytes) -> tuple[int, int]:
        """(the row of ``name`` or -1, the table slot it is in or would go in)."""
        table = self._table
        mask = len(table) - 1
        slot = hash(name) & mask
        names, starts = self._names, self._starts
        while True:
            row = table[slot]
            if row < 0 or names[starts[row] : starts[row + 1]] == name:
                return row, slot
            slot = (slot + 1) & mask

    def _grow(self) -> None:
        """Twice the table (kept at most half full, so that probes stay short)."""
        table = self._table = array("i", [-1]) * (2 * len(self._table))
        mask = len(table) - 1
        for row in range(len(self)):
            slot = hash(bytes(self._name(row))) & mask
            while table[slot] >= 0:
                slot = (slot + 1) & mask
            table[slot] = row

    def _capture(self, row: int) -> _Capture:
        at = row * _TS_WIDTH
        status, payload = self._status[row], self._cap_payload[row]
        return (
            self._ts[at : at + _TS_WIDTH].decode("ascii"),
            None if status < 0 else status,
            self._mimes[self._mime[row]],
            None if payload < 0 else payload,
        )

    def _mime_id(self, mime: str | None) -> int:
        if mime is None:
            return 0
        found = self._mime_ids.get(mime)
        if found is None:
            found = self._mime_ids[mime] = len(self._mimes)
            self._mimes.append(mime)
        return found

    def _set_newest(self, row: int, capture: _Capture) -> None:
        ts, status, mime, payload = capture
        at = row * _TS_WIDTH
        self._ts[at : at + _TS_WIDTH] = ts.encode("ascii")
        self._status[row] = status if type(status) is int and 0 <= status < 1000 else -1
        self._mime[row] = self._mime_id(mime)
        self._cap_payload[row] = _stored(payload)

    def _new_row(self, name: bytes, slot: int) -> int:
        row = len(self)
        self._names += name
        self._starts.append(len(self._names))
        self._table[slot] = row
        self._ts += bytes(_TS_WIDTH)
        for column in (self._status, self._mime, self._cap_payload, self._payload):
            column.append(0)
        self._captures.append(0)
        self._size.append(0)
        if 2 * len(self) > len(self._table):
            self._grow()
        return row

    def _first(
        self, name: bytes, slot: int, record: CDXJRecord, capture: _Capture, end: int
    ) -> bool:
        """A key's first line (most lines are): its row straight from the capture, as
        :meth:`add` would make it; False (nothing done) for numbers the columns cannot hold."""
        ts, status, mime, payload = capture
        if (status is not None and not 0 <= status < 1000) or (
            payload is not None and not 0 <= payload < _INT64
        ):
            return False
        row = len(self)
        self._names += name
        self._starts.append(len(self._names))
        self._table[slot] = row
        self._ts += ts.encode("ascii")
        self._status.append(-1 if status is None else status)
        self._mime.append(self._mime_id(mime))
        self._cap_payload.append(-1 if payload is None else payload)
        self._payload.append(-1 if payload is None or record.record_type == "revisit" else payload)
        self._captures.append(1)
        if end == _NO_SIZE:
            end = self._file_size(self.key(row))
        self._size.append(_stored(end))
        code = 200 if status is None else status
        if not is_servable(code):
            self._servable[row] = self._good[row] = None
        elif not is_good(code):
            self._good[row] = None
        if 2 * len(self) > len(self._table):
            self._grow()
        if self._stale:
            self._touch(row)
        return True

    def _chosen(
        self, row: int, kept: dict[int, _Capture | None], newest: _Capture
    ) -> _Capture | None:
        return kept.get(row, newest)

    def _keep_chosen(
        self, row: int, kept: dict[int, _Capture | None], capture: _Capture | None, newest: _Capture
    ) -> None:
        if capture == newest:
            kept.pop(row, None)
        else:
            kept[row] = capture

    def add(self, record: CDXJRecord) -> None:
        """Count one index line in (as :func:`~wwwproxy.archive.store.served_record` would
        choose: the newest capture wins, and of equal times the later line)."""
        fields = record.fields
        uri = fields["uri"]
        ref = fields["ref"]
        ts = record.timestamp
        # the same host under another protocol shares the SURT key
        if (
            not uri.startswith(self.scheme)
            or not ref.startswith("warcfile:")
            or len(ts) != _TS_WIDTH
            or not ts.isascii()
        ):
            return
        try:
            end = int(ref[ref.rindex("#") + 1 :])
        except ValueError:
            return
        length = fields.get("rle")
        end = end + length if type(length) is int else _NO_SIZE
        status = fields.get("hsc", 200)
        mime = fields.get("mct")
        name = uri[len(self.scheme) :].encode("utf-8", "surrogatepass")
        row, slot = self._find(name)
        ple = fields.get("ple")
        if record.record_type == "revisit":  # the payload is the response's it repeats
            known = self._payload[row] if row >= 0 else -1
            payload = None if known < 0 else known
        else:
            payload = ple if type(ple) is int else None
        capture = (ts, status if type(status) is int else None, mime, payload)
        if row < 0 and self._first(name, slot, record, capture, end):
            return
        if row < 0:
            row = self._new_row(name, slot)
            newest: _Capture = capture
            good: _Capture | None = None
            servable: _Capture | None = None
        else:
            newest = self._capture(row)
            good = self._chosen(row, self._good, newest)
            servable = self._chosen(row, self._servable, newest)
            if ts > newest[0]:
                newest = capture
        if record.record_type != "revisit":
            self._payload[row] = _stored(payload)
        self._captures[row] += 1
        status = status if type(status) is int else 200
        if is_servable(status):
            if servable is None or ts >= servable[0]:
                servable = capture
            if is_good(status) and (good is None or ts >= good[0]):
                good = capture
        self._set_newest(row, newest)
        newest = self._capture(row)  # as the columns hold it (an absurd number is "none")
        self._keep_chosen(row, self._good, good, newest)
        self._keep_chosen(row, self._servable, servable, newest)
        size = self._size[row]
        if end == _NO_SIZE or size == _NO_SIZE:
            self._size[row] = _stored(self._file_size(uri))
        elif end > size:
            self._size[row] = _stored(end)
        if self._stale:
            self._touch(row)

    def _touch(self, row: int) -> None:
        """``row`` was added or changed: each order made is stale there (and made again from
        scratch when too much of it is: a crawl adding thousands of pages)."""
        limit = max(_FIX_AT_MOST, len(self) // 32)
        for name, stale in list(self._stale.items()):
            stale.add(row)
            if len(stale) > limit:
                del self._stale[name], self._orders[name]

    def _file_size(self, uri: str) -> int:
        host = host_of(uri)
        try:
            assert host is not None
            return os.stat(self.root / host[0] / host[1] / (url_hash(uri) + WARC_SUFFIX)).st_size
        except (AssertionError, OSError, ValueError):
            return _NO_SIZE

    # -- what the pages show --

    def _served(self, row: int, keep_good: bool) -> _Capture | None:
        newest = self._capture(row)
        servable = self._chosen(row, self._servable, newest)
        return (self._chosen(row, self._good, newest) or servable) if keep_good else servable

    def _shown_size(self, row: int, keep_good: bool) -> int:
        """The Size column's value (payload, else bytes on disk) as a sort key."""
        served = self._served(row, keep_good)
        payload = served[3] if served is not None else None
        return payload if payload is not None else max(0, self._size[row])

    def info(self, row: int, keep_good: bool) -> PageInfo:
        newest = self._capture(row)
        served = self._served(row, keep_good)
        newest_status = newest[1]
        size = self._size[row]
        return PageInfo(
            key=self.key(row),
            time=datetime.fromisoformat(newest[0]),
            status=served[1] if served is not None else None,
            mime=(served or newest)[2],
            captures=self._captures[row],
            size=size if size != _NO_SIZE else None,
            payload=served[3] if served is not None else None,
            newest_status=newest_status if served is None or served[1] != newest_status else None,
        )

    def _sort_key(self, sort: str, keep_good: bool) -> Callable[[int], SupportsRichComparison]:
        """What ``sort`` orders rows by: their key (unique), else time or shown size and then
        the key, which is what a stable sort of the name order gives."""
        if sort == "time":
            return lambda r: (self._ts[r * _TS_WIDTH : (r + 1) * _TS_WIDTH], self._name(r))
        if sort == "size":
            return lambda r: (self._shown_size(r, keep_good), self._name(r))
        return self._name

    def order(self, sort: str, keep_good: bool = True) -> array[int]:
        """The rows in ``sort`` order, ascending: made once, then kept in step with the rows
        added or changed since (a host page list asked for while pages are recorded, each
        second, costs a few insertions instead of a sort of all its rows)."""
        name = f"{sort}/{keep_good}" if sort == "size" else sort
        rows = self._orders.get(name)
        if rows is not None:
            stale = self._stale[name]
            if stale:
                _put_in_place(rows, stale, self._sort_key(sort, keep_good))
                stale.clear()
            return rows
        # a stable sort of the name order: equal times or sizes stay in name order
        if sort == "time":
            ts = self._ts
            by = sorted(self.order("name"), key=lambda r: ts[r * _TS_WIDTH : (r + 1) * _TS_WIDTH])
        elif sort == "size":
            by = sorted(self.order("name"), key=lambda r: self._shown_size(r, keep_good))
        else:
            by = sorted(range(len(self)), key=self._name)
        rows = self._orders[name] = array("I", by)
        self._stale[name] = set()
        return rows


def _put_in_place(
    rows: array[int], stale: set[int], key: Callable[[int], SupportsRichComparison]
) -> None:
    """Put the ``stale`` rows of an order (sorted by ``key``, whose values are unique) where
    they belong now: out from where they were, if they were in it, then in by bisection.  The
    order holds the rows numbered below its length (rows are only ever added at the end)."""
    present = len(rows)
    moved = [r for r in stale if r < present]
    if len(moved) <= 8:
        for r in moved:
            del rows[rows.index(r)]
    elif moved:
        gone = set(moved)
        rows[:] = array("I", [r for r in rows if r not in gone])
    for r in sorted(stale):
        rows.insert(bisect.bisect_left(rows, key(r), key=key), r)
