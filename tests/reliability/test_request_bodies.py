"""Request bodies share a bounded room in memory: many large uploads at once take turns
instead of each holding its whole body (ten 60 MB POSTs once took the proxy to 1.5 GB)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from wwwproxy.proxy import request_body as body_module
from wwwproxy.proxy.request_body import BodyBudget


async def test_concurrent_large_bodies_take_turns_within_the_room(make_proxy, origin):
    proxy = await make_proxy()
    budget = proxy.running.server.bodies
    budget.limit = 8 * 1024 * 1024  # room for two of the bodies below at once
    size = 3 * 1024 * 1024
    bodies = [bytes([65 + i]) * size for i in range(10)]

    async def upload(session: aiohttp.ClientSession, i: int) -> bytes:
        async with session.post(
            origin.url(f"/echo?n={i}"),
            data=bodies[i],
            proxy=proxy.url,
            headers={"Content-Type": "application/octet-stream"},
        ) as reply:
            assert reply.status == 200
            return (json.loads(await reply.read())["body"]).encode("latin-1")

    async with proxy.session() as session:
        echoed = await asyncio.gather(*(upload(session, i) for i in range(10)))
    assert echoed == bodies  # every upload reached the origin whole, none mixed up
    assert size <= budget.peak <= budget.limit  # never more than the room at once
    assert budget.used == 0  # all given back


async def test_a_body_cut_off_gives_its_room_back(make_proxy, origin):
    proxy = await make_proxy()
    budget = proxy.running.server.bodies
    reader, writer = await proxy.connect_raw()
    writer.write(
        f"POST {origin.url('/echo')} HTTP/1.1\r\nHost: x\r\n".encode()
        + b"Content-Length: 1000000\r\n\r\n"
        + b"x" * 300_000
    )
    await writer.drain()
    assert await proxy.wait_until(lambda: budget.used > 0)
    writer.close()
    assert await proxy.wait_until(lambda: budget.used == 0)
    # and a normal upload still goes through
    async with proxy.session() as session:
        async with session.post(origin.url("/echo"), data=b"small", proxy=proxy.url) as reply:
            assert json.loads(await reply.read())["body"] == "small"


async def test_a_body_without_content_type_reaches_the_origin_without_one(make_proxy, origin):
    proxy = await make_proxy()
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(
            f"POST {origin.url('/echo')} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n".encode()
            + b"data"
        )
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        echoed = json.loads(await reader.readexactly(length))
    finally:
        writer.close()
    assert echoed["body"] == "data"
    assert "content-type" not in {k.lower() for k, _ in echoed["headers"]}


async def test_concurrent_chunked_bodies_take_turns_too(make_proxy, origin, monkeypatch):
    """A chunked body reserves a little and grows one body at a time, each step waiting for
    room: past the room there is at most the one body growing (chunked bodies once grew
    without waiting, and twelve 60 MiB ones held 788 MiB)."""
    monkeypatch.setattr(body_module, "UNKNOWN_LENGTH_ROOM", 256 * 1024)
    proxy = await make_proxy()
    budget = proxy.running.server.bodies
    budget.limit = 8 * 1024 * 1024
    size = 3 * 1024 * 1024
    bodies = [bytes([65 + i]) * size for i in range(10)]

    async def upload(session: aiohttp.ClientSession, i: int) -> bytes:
        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, size, 64 * 1024):
                yield bodies[i][start : start + 64 * 1024]

        async with session.post(
            origin.url(f"/echo?n={i}"), data=chunks(), proxy=proxy.url
        ) as reply:
            assert reply.status == 200
            assert reply.request_info.headers.get("Transfer-Encoding") == "chunked"
            return (json.loads(await reply.read())["body"]).encode("latin-1")

    async with proxy.session() as session:
        echoed = await asyncio.gather(*(upload(session, i) for i in range(10)))
    assert echoed == bodies
    assert size <= budget.peak <= budget.limit + size
    assert (budget.used, budget.growing, budget.waiting) == (0, None, 0)


@pytest.mark.parametrize(
    ("bodies", "limit"),
    [
        ([10] * 20, 8),  # the room full of bodies waiting to grow: the one growing goes on
        ([3, 20, 2, 9, 1, 30], 16),
        ([30], 8),  # one alone, past the room
    ],
)
async def test_growing_bodies_never_wait_for_each_other_for_ever(
    bodies: list[int], limit: int, monkeypatch
):
    """BodyBudget alone (units of one step): chunked bodies read a step at a time, each
    growing as it must; all finish, and past the room only the one growing."""
    monkeypatch.setattr(body_module, "UNKNOWN_LENGTH_ROOM", 1)
    budget = BodyBudget(limit)
    over: list[int] = []

    async def read(steps: int) -> None:
        async with budget.holding() as held:
            await held.reserve(1)
            for size in range(1, steps + 1):
                await held.grow_to(size)
                if budget.used > budget.limit:
                    over.append(budget.used - budget.waiting - held.bytes)
                await asyncio.sleep(0)
            await held.read_whole()
            await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(*(read(n) for n in bodies)), 5)
    assert set(over) <= {0}  # past the room: only the one growing, and those waiting
    assert budget.peak <= limit + max(bodies)
    assert (budget.used, budget.growing, budget.waiting) == (0, None, 0)
