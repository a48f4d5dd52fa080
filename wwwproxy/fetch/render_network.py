"""What a rendered page asked the network for, as the browser's events tell it (pure: the
events are fed in, the clock is given), for :mod:`wwwproxy.fetch.render`: the requests, how
they count (fetched, from a cache, failed), and whether the network has gone idle."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["MAX_LISTED", "Loaded", "NetworkLog", "Tally", "browsers_own"]

#: requests of one page listed one by one (the rest are counted)
MAX_LISTED = 2000


@dataclass(frozen=True)
class Loaded:
    """One request a rendered page made: its status (None: it failed) and whether the proxy
    answered it from the cache (``X-Cache: HIT``) or fetched it."""

    url: str
    method: str = "GET"
    status: int | None = None
    from_cache: bool = False
    problem: str | None = None


@dataclass(frozen=True)
class Tally:
    """The requests a page made beside its own document: how many in all, fetched from the
    network, taken from the cache, and failed (no answer, or 4xx/5xx)."""

    requests: int = 0
    fetched: int = 0
    from_cache: int = 0
    failed: int = 0


class NetworkLog:
    """The requests of one tab as they start and end, and whether the network is idle: no
    request in flight and none started or ended for ``idle`` seconds (pure: the browser's
    events are fed in, the clock is given).  Its memory is bounded: requests in flight, the
    first :data:`MAX_LISTED` ended ones, and counts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.inflight = 0
        #: requests started so far, the document's too
        self.starts = 0
        self.last_activity = clock()
        self._open: dict[Hashable, Loaded] = {}
        #: requests the browser answered from its own cache (DevTools tells it apart)
        self.cached: set[Hashable] = set()
        self._ended: list[Loaded] = []
        self._documents: set[Hashable] = set()
        self._counts = {"requests": 0, "fetched": 0, "from_cache": 0, "failed": 0}
        #: the status of the page's own document (its last answer, after redirects)
        self.document_status: int | None = None

    def started(self, key: Hashable, url: str, method: str, *, document: bool = False) -> None:
        """A request started; ``document``: the page's own (counted in flight, not listed)."""
        self.starts += 1
        self.inflight += 1
        self.last_activity = self.clock()
        if document:
            self._documents.add(key)
        else:
            self._counts["requests"] += 1
            self._open[key] = Loaded(url, method)

    def watches(self, key: Hashable) -> bool:
        return key in self._open or key in self._documents

    def answered(self, key: Hashable, status: int, from_cache: bool) -> None:
        if key in self._documents:
            self.document_status = status
        item = self._open.get(key)
        if item is not None:
            self._open[key] = Loaded(item.url, item.method, status, from_cache)
        self.last_activity = self.clock()

    def ended(self, key: Hashable, problem: str | None = None) -> None:
        self.last_activity = self.clock()
        if key in self._documents:
            self._documents.discard(key)
            self.inflight = max(0, self.inflight - 1)
            return
        item = self._open.pop(key, None)
        if item is None:
            return
        self.inflight = max(0, self.inflight - 1)
        if problem is not None:
            item = Loaded(item.url, item.method, item.status, item.from_cache, problem)
        self._counts[_kind(item)] += 1
        if len(self._ended) < MAX_LISTED:
            self._ended.append(item)

    def served_from_cache(self, event: dict[str, Any]) -> bool:
        """Whether the request of a DevTools response event was answered from the browser's
        cache (told before its response; forgotten then)."""
        key = event.get("requestId")
        if key in self.cached:
            self.cached.discard(key)
            return True
        return False

    def touch(self) -> None:
        """Something happened that may start requests (a scroll): idle is counted anew."""
        self.last_activity = self.clock()

    def idle(self, quiet: float) -> bool:
        return self.inflight == 0 and self.clock() - self.last_activity >= quiet

    def requests(self) -> list[Loaded]:
        """The requests but the page's own document: those ended (the first
        :data:`MAX_LISTED`), then those still in flight."""
        return [*self._ended, *self._open.values()]

    def tally(self) -> Tally:
        """The counts, requests still in flight by what they have had so far."""
        counts = dict(self._counts)
        for item in self._open.values():
            if item.status is not None:
                counts[_kind(item)] += 1
        return Tally(**counts)


def _kind(item: Loaded) -> str:
    """How a request counts: failed (no answer, 4xx/5xx), from the cache, or fetched."""
    if item.problem is not None or item.status is None or item.status >= 400:
        return "failed"
    return "from_cache" if item.from_cache else "fetched"


def browsers_own(event: dict[str, Any]) -> bool:
    """Whether a DevTools request event is the browser's own favicon probe, not the page's
    (it is recorded all the same; a site without one answers 404, which is no failure)."""
    initiator = event.get("initiator") or {}
    return initiator.get("type") == "other" and urlsplit(event["request"]["url"]).path == (
        "/favicon.ico"
    )
