"""Connection caps: how many connections one client address, and all clients together, may hold.

The header-read time (``front.HEAD_TIMEOUT``) closes a stalled connection after a while; the caps
bound what a flood can hold meanwhile, so that one client opening thousands of half-sent
requests (slowloris) cannot take the file descriptors every other client needs.  A connection
over a cap is answered ``503`` with ``Retry-After`` and closed at once, before anything of it is
read.

Connections are counted by their transports in weak sets: the fast front removes its own when
they end; one handed to aiohttp (or to a CONNECT tunnel) leaves the set when it is closed and
collected, and a set at its cap first drops the transports that are already closing, so the
count is exact where it matters.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
import weakref
from dataclasses import dataclass

from .heads import closing_answer

__all__ = ["ConnectionCaps", "refusal", "room_for_connections"]

log = logging.getLogger("wwwproxy.proxy")

#: seconds between two warnings about refused connections (a flood is one line a minute)
WARN_EVERY = 60.0
#: descriptors kept for everything that is not a client connection (WARC files, the index,
#: the search database, listening sockets, logs)
RESERVED_FDS = 64


def room_for_connections(soft_limit: int | None = None) -> int:
    """How many client connections the open-files limit leaves room for: each may need a
    second descriptor for its upstream connection (or tunnel) besides its own."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY:
        return 1 << 30
    return max(16, (soft_limit - RESERVED_FDS) // 2)


@dataclass(frozen=True)
class Refused:
    """Why a connection was refused: which cap, and its value."""

    key: str
    cap: int
    peer: str | None


def refusal(reason: Refused) -> bytes:
    """The whole answer to a refused connection (written before anything is read)."""
    if reason.key == "max_client_connections":
        text = f"too many connections from your address ({reason.key}: {reason.cap})\n"
    else:
        text = f"the proxy has too many connections ({reason.key}: {reason.cap})\n"
    return closing_answer(
        503,
        "Service Unavailable",
        [("Content-Type", "text/plain; charset=utf-8"), ("Retry-After", "5")],
        text.encode(),
    )


class ConnectionCaps:
    """The open connections, by client address and in all."""

    def __init__(self, room: int | None = None) -> None:
        self.room = room_for_connections() if room is None else room
        self.all: weakref.WeakSet[asyncio.BaseTransport] = weakref.WeakSet()
        self.by_client: dict[str, weakref.WeakSet[asyncio.BaseTransport]] = {}
        self.refused = 0  # since the last warning
        self.refused_total = 0
        self.warned = float("-inf")

    def total_cap(self, configured: int) -> int:
        """The configured cap, or less if the open-files limit has no room for it; 0 (no cap)
        stays 0: the open-files limit alone bounds the connections then."""
        return min(configured, self.room) if configured else 0

    def admit(
        self, transport: asyncio.BaseTransport, peer: str | None, total: int, per_client: int
    ) -> Refused | None:
        """Count ``transport`` in, or say which cap refuses it (0 means no cap)."""
        total = self.total_cap(total)
        if total and len(self.all) >= total:
            _drop_closing(self.all)
            if len(self.all) >= total:
                return self._refuse(Refused("max_connections", total, peer))
        key = peer or ""
        mine = self.by_client.get(key)
        if mine is None:
            if len(self.by_client) > 4 * max(len(self.all), 64):
                self._forget_gone()
            mine = self.by_client[key] = weakref.WeakSet()
        if per_client and len(mine) >= per_client:
            _drop_closing(mine)
            if len(mine) >= per_client:
                return self._refuse(Refused("max_client_connections", per_client, peer))
        self.all.add(transport)
        mine.add(transport)
        return None

    def release(self, transport: asyncio.BaseTransport, peer: str | None) -> None:
        """A connection ended (the fast front's own; others leave when collected)."""
        self.all.discard(transport)
        mine = self.by_client.get(peer or "")
        if mine is not None:
            mine.discard(transport)
            if not mine:
                del self.by_client[peer or ""]

    def _forget_gone(self) -> None:
        for key in [k for k, v in self.by_client.items() if not v]:
            del self.by_client[key]

    def _refuse(self, reason: Refused) -> Refused:
        self.refused += 1
        self.refused_total += 1
        now = time.monotonic()
        if now - self.warned >= WARN_EVERY:
            log.warning(
                "refused %d connection(s): %s is %d (the last from %s)",
                self.refused,
                reason.key,
                reason.cap,
                reason.peer,
            )
            self.refused = 0
            self.warned = now
        return reason


def _drop_closing(transports: weakref.WeakSet[asyncio.BaseTransport]) -> None:
    for transport in list(transports):
        if transport.is_closing():
            transports.discard(transport)
