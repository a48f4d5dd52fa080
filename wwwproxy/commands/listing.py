"""What ``/``, ``/index/`` and ``/index/<proto>/<host>/`` show, read from the catalog
(:mod:`wwwproxy.archive.catalog`): the totals in one query, a page of hosts or of one host's
pages with ORDER BY and LIMIT on an index, so that a page costs what it shows.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..archive.catalog import HOST_SORTS, PAGE_SORTS, Catalog, HostRow, PageRow, Totals
from ..archive.store import WARC_SUFFIX, Store

__all__ = [
    "HOSTPORT_PATTERN",
    "HOST_SORTS",
    "PROTO_PATTERN",
    "SORTS",
    "HostInfo",
    "HostWindow",
    "HostsWindow",
    "PageInfo",
    "host_pages",
    "host_totals",
    "host_window",
    "hosts_window",
    "list_hosts",
    "split_hostport",
]

SORTS = PAGE_SORTS
PROTO_PATTERN = re.compile(r"[a-z][a-z0-9+.\-]*")
HOSTPORT_PATTERN = re.compile(r"[A-Za-z0-9+.\-_:\[\]]+")


def _when(ts: str | None) -> datetime | None:
    return datetime.fromisoformat(ts) if ts else None


@dataclass(frozen=True)
class HostInfo:
    proto: str
    hostport: str
    pages: int
    size: int
    last: datetime | None

    @classmethod
    def of(cls, row: HostRow) -> HostInfo:
        return cls(row.proto, row.hostport, row.pages, row.bytes, _when(row.last))

    @property
    def url(self) -> str:
        return f"{self.proto}://{self.hostport}/"

    @property
    def path(self) -> str:
        """Its ``/index/<proto>/<host>/`` page."""
        return f"/index/{self.proto}/{self.hostport}/"

    def as_json(self) -> dict[str, object]:
        return {
            "proto": self.proto,
            "host": self.hostport,
            "pages": self.pages,
            "size": self.size,
            "last": self.last.isoformat() if self.last else None,
            "index": self.path,
        }


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

    @classmethod
    def of(cls, row: PageRow, keep_good: bool) -> PageInfo:
        summary = row.summary
        newest = summary.newest
        served = summary.served(keep_good)
        return cls(
            key=row.key,
            time=datetime.fromisoformat(newest.ts),
            status=served.status if served is not None else None,
            mime=(served or newest).mime,
            captures=summary.captures,
            size=summary.size,
            payload=served.payload if served is not None else None,
            newest_status=(
                newest.status if served is None or served.status != newest.status else None
            ),
        )

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


@dataclass(frozen=True)
class HostWindow:
    """One page of a host's listing: ``pages`` are entries ``start`` to ``start + len - 1``
    (from 0) of ``total`` in the order asked for."""

    total: int  # archive keys in the catalog
    files: int  # cache files in the host's folder
    number: int  # the page shown (the last one when the one asked for is past the end)
    last: int  # the number of the last page
    start: int
    pages: list[PageInfo]


@dataclass(frozen=True)
class HostsWindow:
    """One page of the host list, and the totals over all hosts."""

    totals: Totals
    number: int
    last: int
    start: int
    hosts: list[HostInfo]


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


def _catalog(root: Path | Store) -> Catalog:
    """The cache's catalog, made from its index first if it has none."""
    store = root if isinstance(root, Store) else Store(root)
    return store.open_catalog()


def _window(total: int, number: int, per: int) -> tuple[int, int, int]:
    """(the page shown, the last page, its first entry) of ``total`` entries ``per`` a page:
    past the end, the last page."""
    last = max(1, -(-total // per))
    number = min(max(1, number), last)
    return number, last, (number - 1) * per


def host_totals(root: Path | Store) -> Totals:
    """Hosts, pages, bytes and the newest capture's time over the whole cache."""
    return _catalog(root).totals()


def list_hosts(root: Path | Store) -> list[HostInfo]:
    """Every host of the cache with its page count, bytes and last fetch, sorted by protocol
    and host."""
    catalog = _catalog(root)
    with catalog.snapshot():  # (the count and the rows of one moment)
        return [HostInfo.of(row) for row in catalog.hosts(count=catalog.totals().hosts)]


def hosts_window(
    root: Path | Store,
    *,
    sort: str = "name",
    descending: bool = False,
    number: int = 1,
    per: int = 100,
) -> HostsWindow:
    """Page ``number`` (from 1; past the end: the last) of ``per`` hosts in ``sort`` order
    (:data:`HOST_SORTS`)."""
    if sort not in HOST_SORTS:
        raise ValueError(f"sort must be one of {tuple(HOST_SORTS)}, not {sort!r}")
    catalog = _catalog(root)
    with catalog.snapshot():  # the totals and the page of hosts agree
        totals = catalog.totals()
        number, last, start = _window(totals.hosts, number, per)
        rows = catalog.hosts(sort, descending=descending, start=start, count=per)
    return HostsWindow(totals, number, last, start, [HostInfo.of(row) for row in rows])


#: host folder -> (its (dev, inode, mtime_ns) when counted, its cache files); a count is
#: kept while the folder's mtime (it changes when a file is made or removed) is unchanged and
#: was a second old when counted (coarse timestamps), at most _FOLDERS_KEPT of them
_counted: dict[str, tuple[tuple[int, int, int], int]] = {}
_counted_lock = threading.Lock()
_FOLDERS_KEPT = 64
_SETTLED_NS = 1_000_000_000


def _files(store: Store, proto: str, hostport: str) -> int:
    """The cache files in one host's folder (names only: no file is looked at), counted
    again only when the folder changed."""
    folder = os.path.join(store.root, proto, hostport)
    try:
        st = os.stat(folder)
        ident = (st.st_dev, st.st_ino, st.st_mtime_ns)
        with _counted_lock:
            known = _counted.get(folder)
        if known is not None and known[0] == ident:
            return known[1]
        with os.scandir(folder) as entries:
            count = sum(1 for entry in entries if entry.name.endswith(WARC_SUFFIX))
    except OSError:  # no such folder, or a name no file system holds
        return 0
    if time.time_ns() - st.st_mtime_ns > _SETTLED_NS:
        with _counted_lock:
            _counted[folder] = (ident, count)
            while len(_counted) > _FOLDERS_KEPT:
                del _counted[next(iter(_counted))]
    return count


def host_window(
    store: Store,
    proto: str,
    hostport: str,
    *,
    sort: str = "name",
    descending: bool = False,
    number: int = 1,
    per: int = 100,
    keep_good: bool = True,
) -> HostWindow:
    """Page ``number`` (from 1; past the end: the last) of ``per`` entries of one host's
    pages in ``sort`` order."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {SORTS}, not {sort!r}")
    catalog = _catalog(store)
    with catalog.snapshot():  # the pager and the page of entries agree
        found = catalog.host(proto, hostport)
        total = found.pages if found is not None else 0
        number, last, start = _window(total, number, per)
        total, rows = catalog.pages(
            proto,
            hostport,
            sort,
            descending=descending,
            keep_good=keep_good,
            start=start,
            count=per,
        )
    shown = [PageInfo.of(row, keep_good) for row in rows]
    return HostWindow(total, _files(store, proto, hostport), number, last, start, shown)


def host_pages(
    store: Store, proto: str, hostport: str, *, keep_good: bool = True
) -> list[PageInfo]:
    """All pages of one host, sorted by URL: for each key, the time of its newest capture and
    the status and type of the capture the proxy would serve (with ``keep_good``, the newest
    2xx/3xx one; never a 304 or 206 recorded for a browser's own conditional or range
    request)."""
    catalog = _catalog(store)
    with catalog.snapshot():
        found = catalog.host(proto, hostport)
        if found is None:
            return []
        _, rows = catalog.pages(proto, hostport, keep_good=keep_good, count=found.pages)
    return [PageInfo.of(row, keep_good) for row in rows]
