"""The connection caps' bookkeeping (proxy/limits.py) on real transports of a loopback server:
admission by address and in all, release, closing transports dropped at the cap, and the room
the open-files limit leaves."""

from __future__ import annotations

import asyncio
import logging

import pytest

from wwwproxy.proxy.limits import (
    RESERVED_FDS,
    ConnectionCaps,
    Refused,
    refusal,
    room_for_connections,
)


@pytest.mark.parametrize(
    ("soft", "room"),
    [
        (1024, (1024 - RESERVED_FDS) // 2),
        (65536, (65536 - RESERVED_FDS) // 2),
        (64, 16),  # never less than a few
        (10, 16),
    ],
)
def test_room_for_connections(soft, room):
    assert room_for_connections(soft) == room


def test_the_refusal_names_the_cap():
    for key, cap in (("max_connections", 30), ("max_client_connections", 7)):
        answer = refusal(Refused(key, cap, "127.0.0.1"))
        head, body = answer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert f"Content-Length: {len(body)}".encode() in head
        assert b"Connection: close" in head and b"Retry-After: 5" in head
        assert f"{key}: {cap}".encode() in body


@pytest.fixture
async def transports():
    """Server-side transports of real loopback connections."""
    accepted: list[asyncio.Transport] = []
    writers: list[asyncio.StreamWriter] = []

    async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer.transport)
        writers.append(writer)

    server = await asyncio.start_server(keep, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clients: list[asyncio.StreamWriter] = []

    async def make(n: int) -> list[asyncio.Transport]:
        start = len(accepted)
        for _ in range(n):
            clients.append((await asyncio.open_connection("127.0.0.1", port))[1])
        while len(accepted) < start + n:
            await asyncio.sleep(0.01)
        return accepted[start : start + n]

    yield make
    for w in clients + writers:
        w.transport.abort()
    server.close()


async def test_admission_by_address_and_in_all(transports, caplog):
    caplog.set_level(logging.WARNING, logger="wwwproxy.proxy")
    caps = ConnectionCaps(room=100)
    ts = await transports(6)
    assert caps.admit(ts[0], "a", 4, 2) is None
    assert caps.admit(ts[1], "a", 4, 2) is None
    assert caps.admit(ts[2], "a", 4, 2) == Refused("max_client_connections", 2, "a")
    assert caps.admit(ts[2], "b", 4, 2) is None
    assert caps.admit(ts[3], "c", 4, 2) is None
    assert caps.admit(ts[4], "d", 4, 2) == Refused("max_connections", 4, "d")
    # a release makes room; a closing transport is dropped when a cap is reached
    caps.release(ts[0], "a")
    assert caps.admit(ts[4], "a", 4, 2) is None
    ts[1].close()
    assert caps.admit(ts[5], "a", 4, 2) is None
    assert len(caps.all) == 4 and caps.refused_total == 2
    # one warning line for the burst
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1


async def test_the_room_lowers_the_cap_and_zero_means_none(transports):
    caps = ConnectionCaps(room=3)
    ts = await transports(5)
    assert [caps.admit(t, "a", 2048, 0) for t in ts[:3]] == [None, None, None]
    assert caps.admit(ts[3], "a", 2048, 0) == Refused("max_connections", 3, "a")
    assert caps.total_cap(2048) == 3 and caps.total_cap(2) == 2
    # 0: no cap at all (the open-files limit alone bounds them: tests/reliability/test_fd_limits)
    assert caps.total_cap(0) == 0
    assert caps.admit(ts[3], "a", 0, 0) is None and caps.admit(ts[4], "a", 0, 0) is None
