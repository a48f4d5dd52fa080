"""Pages recorded by a process that keeps no search index of its own (``wwwproxy fetch``: its
crawl ends when its pages are recorded, not when their text is indexed).

Such a process touches ``<cache>/search.unindexed`` (:class:`UnindexedMark`) when it starts
recording, at most once a second while it records, and when it is done.  The search index of
whichever process keeps one (the proxy running meanwhile, or the next one to start) compares
the mark's time with the one it last caught up with (kept in its database): when they differ,
its indexing thread catches up from the CDXJ index (:meth:`~.index.SearchIndex.catch_up`), as
it does when its queue overflowed.  It looks when it is attached to the store and before each
search and count, so a search right after a crawl finds the crawl's pages once indexed.  The
mark's time is read before the CDXJ index, so pages recorded during a catch-up touch it again
and are caught up the next time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["MARK", "UnindexedMark", "mark_time"]

MARK = "search.unindexed"
TOUCH_EVERY = 1.0  # seconds between two touches of the mark while pages are recorded


def mark_time(root: str | os.PathLike[str]) -> int | None:
    """The time (ns) the mark of the cache at ``root`` was last touched; None if never."""
    try:
        return os.stat(Path(root) / MARK).st_mtime_ns
    except OSError:
        return None


class UnindexedMark:
    """The mark a process recording into the cache at ``root`` without a search index
    touches (:meth:`touch`: before its first page, then at most once a second; and
    :meth:`done`, after its last)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.path = Path(root) / MARK
        self._last = float("-inf")

    def touch(self) -> None:
        """Pages are (about to be) recorded: touch the mark unless it was a moment ago."""
        now = time.monotonic()
        if now - self._last >= TOUCH_EVERY:
            self._last = now
            self._touch()

    def done(self) -> None:
        """The last page is recorded: touch the mark (a time no search index caught up with)."""
        self._last = time.monotonic()
        self._touch()

    def _touch(self) -> None:
        """A time the mark never had: set to the nanosecond (the file system's own clock
        ticks every few milliseconds, and a search index may have caught up within one)."""
        before = mark_time(self.path.parent)
        now = time.time_ns() if before is None else max(time.time_ns(), before + 1)
        try:
            self.path.touch()
            os.utime(self.path, ns=(now, now))
        except OSError:
            pass  # the cache is unwritable: the recording says so; a rebuild finds the pages
