"""Kept state made from the index (:class:`Follower`: the captures of ``/index/lasttime/``),
brought up to date from the index journal's new lines instead of reading the index again.

Each cache has one view: the journal followed from a held descriptor (:class:`.tail.JournalTail`:
a compaction that renames the journal loses none of its lines), and the identity of
``index.cdxj``.  A new ``index.cdxj`` that is not just the old one plus the journals it took
in (a delete, a rebuild, two compactions unseen) makes every follower start again.

Everything here is called from worker threads; one lock per cache serializes it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

from ..archive.cdxj import INDEX_NAME, JOURNAL_NAME, CDXJError, CDXJRecord
from ..archive.store import Store
from .tail import JournalTail

__all__ = ["Follower", "following"]

_MAX_VIEWS = 8  # caches followed at once (a process has one; tests open many)

_Ident = tuple[int, int, int, int]


class Follower(Protocol):
    """Kept state made from the index, brought up to date with its new lines."""

    def add(self, records: list[CDXJRecord]) -> None:
        """Index lines written since the last look (some may be known already)."""

    def drop(self) -> None:
        """The index was replaced by more than a merge (a delete, a rebuild): start again."""


class _CacheView:
    """The followers of one cache directory and the journal they follow."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index_path = root / "index" / INDEX_NAME
        self.lock = threading.RLock()
        self.tail = JournalTail(root / "index" / JOURNAL_NAME)
        self.index: _Ident | None = None  # index.cdxj as the followers know it
        self.followers: dict[str, Follower] = {}

    def close(self) -> None:
        """Let go of the journal; a late user starts afresh."""
        self.tail.close()
        self.tail.started = False
        self.followers.clear()

    def index_ident(self) -> _Ident | None:
        try:
            st = os.stat(self.index_path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def poll(self) -> None:
        """Take in what changed since the last poll: the journal lines written since go to
        the followers; a new ``index.cdxj`` that is not just the old one plus the journals
        left behind (a delete, a rebuild, or a change missed) makes them start again."""
        lines = self.tail.read()
        index = self.index_ident()
        if lines is None:  # lost track: everything is made again
            self._drop(index)
            return
        if index != self.index:
            old = self.index
            if old is None or index is None or index[2] != old[2] + self.tail.sealed:
                self._drop(index)
            self.index = index
            self.tail.sealed = 0
        records = []
        for raw in lines:
            with contextlib.suppress(CDXJError):
                records.append(CDXJRecord.parse_line(raw))
        if records:
            for follower in self.followers.values():
                follower.add(records)

    def _drop(self, index: _Ident | None) -> None:
        self.index = index
        self.tail.sealed = 0
        for follower in self.followers.values():
            follower.drop()


_views: OrderedDict[str, _CacheView] = OrderedDict()
_views_lock = threading.Lock()


def _view(root: Path | Store) -> _CacheView:
    """The followed state of a cache (made on first use; the least recently used let go)."""
    path = root.root if isinstance(root, Store) else Path(root)
    key = os.path.abspath(path)
    with _views_lock:
        view = _views.get(key)
        if view is None:
            view = _views[key] = _CacheView(path)
            while len(_views) > _MAX_VIEWS:
                _, old = _views.popitem(last=False)
                with old.lock:
                    old.close()
        else:
            _views.move_to_end(key)
    return view


_F = TypeVar("_F", bound=Follower)


@contextlib.contextmanager
def following(root: Path | Store, name: str, make: Callable[[], _F]) -> Iterator[_F]:
    """The cache's follower called ``name`` (made by ``make`` on first use), up to date with
    the index, used under the cache's lock (no other thread changes it meanwhile)."""
    view = _view(root)
    with view.lock:
        follower = view.followers.get(name)
        if follower is None:
            follower = view.followers[name] = make()
        view.poll()
        yield follower  # type: ignore[misc]
