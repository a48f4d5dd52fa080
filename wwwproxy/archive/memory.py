"""A hot-object memory cache in front of the store, like Squid's ``cache_mem``.

Serving a cached page from disk means reading and parsing its WARC file and gunzipping its
body on every hit; a page asked for again is answered from here instead: the entry the store
chose and its body bytes, least recently used first out, bounded by bytes.

It never serves what the archive would not: every hit is checked against the cache file's
size and modification time (one ``stat``), so anything that changed the file since (a new
capture or revisit, by this process or a ``wwwproxy fetch`` beside it, a delete or a purge)
makes it a miss and the store reads the file again.  Only GET keys are kept; non-GET captures
are matched on their request bodies, which stay on disk.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .served import CachedEntry

__all__ = ["FileStamp", "MemoryCache", "stamp"]

#: bodies larger than this stay on disk (streamed), as Squid's maximum_object_size_in_memory
MAX_OBJECT = 1024 * 1024
#: bytes counted per entry besides its body: its headers and the entry itself, about 3.5 KB
#: with a dozen response headers (tests/archive/test_memory.py measures it)
OVERHEAD = 4096

FileStamp = tuple[int, int]  # (st_size, st_mtime_ns)


def stamp(path: str | os.PathLike[str]) -> FileStamp | None:
    """What identifies the file's current content, or None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@dataclass(frozen=True)
class _Hot:
    entry: CachedEntry
    path: str  # its cache file, checked on every hit
    stamp: FileStamp
    size: int


class MemoryCache:
    """Thread-safe LRU of (archive key, prefer_good) -> the chosen entry with its body."""

    def __init__(
        self, max_bytes: int, *, max_object: int = MAX_OBJECT, bodies: bool = True
    ) -> None:
        self._items: OrderedDict[tuple[str, bool], _Hot] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._max_object = max_object
        #: False: entries are kept without their bodies (where a copy is in its file, which
        #: spares scanning the file for it; the body is read at its offset)
        self._bodies = bodies
        self.hits = 0
        self.misses = 0
        self.resize(max_bytes)

    def resize(self, max_bytes: int) -> None:
        """A new bound (a config reload): the least recently used go until it fits."""
        with self._lock:
            self.max_bytes = max(0, max_bytes)
            self.max_object = min(self._max_object, self.max_bytes)
            self._evict()

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._items:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.size

    @property
    def size(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def keeps(self, payload_length: int) -> bool:
        return self.max_bytes > 0 and payload_length <= self.max_object

    def get(self, key: str, prefer_good: bool) -> CachedEntry | None:
        """The entry if it is here and its file has not changed since it was read."""
        if self.max_bytes <= 0:
            return None
        slot = (key, prefer_good)
        # no lock to read or reorder: each is one step of the dictionary under the GIL (the
        # lock keeps the byte count and the items together, which only put and drop change)
        hot = self._items.get(slot)
        if hot is None:
            self.misses += 1
            return None
        try:  # stamp(), inline: this runs on every hit
            st = os.stat(hot.path)
            changed = (st.st_size, st.st_mtime_ns) != hot.stamp
        except OSError:
            changed = True
        if changed:
            self._drop(slot, hot)
            self.misses += 1
            return None
        try:  # noqa: SIM105 (contextlib.suppress costs more than the rest of this)
            self._items.move_to_end(slot)  # another copy put meanwhile is as recent
        except KeyError:
            pass  # dropped or evicted meanwhile: this one is still what the file held
        self.hits += 1
        return hot.entry

    def put(
        self,
        key: str,
        prefer_good: bool,
        entry: CachedEntry,
        path: str | os.PathLike[str],
        file_stamp: FileStamp,
    ) -> None:
        """Keep ``entry`` (whose ``body`` is set), read from ``path`` as ``file_stamp`` found
        it (taken before reading: a change while reading only makes the next hit a miss)."""
        if self._bodies:
            body = entry.body
            if body is None or not self.keeps(len(body)):
                return
            size = len(body) + OVERHEAD
        elif self.max_bytes > 0:
            if entry.body is not None:
                entry = dataclasses.replace(entry, body=None)
            size = OVERHEAD
        else:
            return
        slot = (key, prefer_good)
        with self._lock:
            old = self._items.pop(slot, None)
            if old is not None:
                self._bytes -= old.size
            self._items[slot] = _Hot(entry, os.fspath(path), file_stamp, size)
            self._bytes += size
            self._evict()

    def _drop(self, slot: tuple[str, bool], hot: _Hot) -> None:
        with self._lock:
            if self._items.get(slot) is hot:
                del self._items[slot]
                self._bytes -= hot.size

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
