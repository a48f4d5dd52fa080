"""Which stored GET copies an unsafe request has made stale (RFC 9111 §4.4).

After a POST, PUT, DELETE (or any method not known to be safe) gets a non-error answer, the
copies of its target URI and of the same-origin ``Location``/``Content-Location`` must not be
served without asking the origin again.  Each such URL's archive key is noted here with the
moment; a copy recorded before that moment is not fresh (:func:`wwwproxy.http.policy.decide`,
``invalidated``), one recorded after it (the revalidation's) is.  Offline nothing changes:
every recorded copy is still served.

Kept in memory, up to :data:`KEPT` keys (the oldest forgotten first): a mark lost at a restart
or by overflow only lets a copy be reused until its own freshness runs out, as before the
unsafe request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime

__all__ = ["KEPT", "Invalidations"]

#: keys remembered at most (about 200 bytes each)
KEPT = 10_000


class Invalidations:
    """Archive key -> when an unsafe request last invalidated it (thread-safe)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._marks: OrderedDict[str, datetime] = OrderedDict()
        self._kept = kept
        self._lock = threading.Lock()

    def mark(self, keys: Iterable[str], when: datetime) -> None:
        """Note that the copies of ``keys`` recorded before ``when`` are stale."""
        with self._lock:
            for key in keys:
                self._marks[key] = when
                self._marks.move_to_end(key)
            while len(self._marks) > self._kept:
                self._marks.popitem(last=False)

    def stale(self, key: str, recorded: datetime) -> bool:
        """Was the copy of ``key`` recorded at ``recorded`` invalidated since?"""
        if not self._marks:
            return False  # the common case, without the lock
        with self._lock:
            when = self._marks.get(key)
        return when is not None and recorded <= when
