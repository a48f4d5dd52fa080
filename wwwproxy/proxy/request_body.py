"""Request bodies, read whole (a request's archive key and a replay's match need all of its
body) within a budget of memory that all requests share (:class:`BodyBudget`)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from . import front

__all__ = [
    "MAX_REQUEST_BODY",
    "REQUEST_BODIES_IN_MEMORY",
    "UNKNOWN_LENGTH_ROOM",
    "BodyBudget",
    "read_body",
]

MAX_REQUEST_BODY = 64 * 1024 * 1024  # a request body is read whole: its archive key needs it
REQUEST_BODIES_IN_MEMORY = 96 * 1024 * 1024  # all requests' bodies together (BodyBudget)
UNKNOWN_LENGTH_ROOM = 1024 * 1024  # reserved for a chunked body, and each step it grows by


async def read_body(request: web.Request, held: BodyBudget.Held) -> bytes:
    """The request's body, read whole within the room ``held`` takes for it in the budget:
    TimeoutError if it stops coming, HTTPRequestEntityTooLarge past MAX_REQUEST_BODY."""
    if not request.body_exists:
        return b""
    # the whole body's room first, waiting (reading none of it) while others use it: a
    # request never waits holding part of the room, so uploads cannot starve each other
    announced = request.content_length
    await held.reserve(announced if announced is not None else UNKNOWN_LENGTH_ROOM)
    chunks, size = [], 0
    while True:
        # a body that stops coming is given up (TimeoutError) after the header-read time,
        # as a head is: a stalled upload must not hold a connection and its descriptor
        chunk = await asyncio.wait_for(request.content.readany(), front.HEAD_TIMEOUT)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_REQUEST_BODY:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_REQUEST_BODY, actual_size=size)
        if size > held.bytes:  # a chunked body past its room: it waits its turn to grow
            await held.grow_to(size)
        chunks.append(chunk)
    await held.read_whole()
    return b"".join(chunks)


class BodyBudget:
    """Room for request bodies in memory, shared by all requests (a body is read whole: its
    archive key and a replay's match need all of it).

    A request reserves its Content-Length (a chunked one :data:`UNKNOWN_LENGTH_ROOM`) before
    reading any of it, and waits (TCP holds the sender back) until there is room; one alone
    may use more than the room, up to :data:`MAX_REQUEST_BODY`.  A chunked body longer than
    its reservation grows one body at a time, by that much at a time, each step waiting for
    room; the one growing waits for no body that waits for its turn (else the room could be
    full of them), so past the room there is only ever that one body.  Ten 60 MB uploads at
    once so take turns instead of holding 1.5 GB, whatever their framing."""

    class Held:
        """What one request holds; given back when its exchange is done."""

        def __init__(self, budget: BodyBudget) -> None:
            self.budget = budget
            self.bytes = 0

        async def reserve(self, size: int) -> None:
            """Wait for room for ``size`` bytes (or until nothing else is held)."""
            await self.budget._take(size)
            self.bytes += size

        async def grow_to(self, size: int) -> None:
            """Wait for room for ``size`` bytes in all, this body's turn to grow first."""
            if size > self.bytes:
                await self.budget._grow(self, max(size - self.bytes, UNKNOWN_LENGTH_ROOM))

        async def read_whole(self) -> None:
            """The body is read: the next one may grow."""
            await self.budget._grown(self)

        async def __aenter__(self) -> BodyBudget.Held:
            return self

        async def __aexit__(self, *exc: object) -> None:
            await self.budget._give(self)

    def __init__(self, limit: int = REQUEST_BODIES_IN_MEMORY) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0  # the most held at once (tests, benchmarks)
        self.growing: BodyBudget.Held | None = None  # the chunked body growing now
        self.waiting = 0  # bytes held by bodies waiting for their turn to grow
        self._changed = asyncio.Condition()

    def holding(self) -> BodyBudget.Held:
        return BodyBudget.Held(self)

    async def _take(self, size: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.used == 0 or self.used + size <= self.limit)
            self._add(size)

    async def _grow(self, held: BodyBudget.Held, size: int) -> None:
        async with self._changed:
            if self.growing is not held:
                self.waiting += held.bytes
                self._changed.notify_all()  # the body growing may wait for this one no more
                try:
                    await self._changed.wait_for(lambda: self.growing is None)
                finally:
                    self.waiting -= held.bytes
                self.growing = held
            await self._changed.wait_for(
                lambda: self.used + size <= self.limit or self.used - held.bytes <= self.waiting
            )
            self._add(size)
            held.bytes += size

    def _add(self, size: int) -> None:
        self.used += size
        self.peak = max(self.peak, self.used)

    async def _grown(self, held: BodyBudget.Held) -> None:
        if self.growing is held:
            async with self._changed:
                self.growing = None
                self._changed.notify_all()

    async def _give(self, held: BodyBudget.Held) -> None:
        if held.bytes or self.growing is held:
            async with self._changed:
                self.used -= held.bytes
                held.bytes = 0
                if self.growing is held:
                    self.growing = None
                self._changed.notify_all()
