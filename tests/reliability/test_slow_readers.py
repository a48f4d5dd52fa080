"""A cached body too large for memory (over 1 MiB, so read from its WARC file a chunk at a
time while it is sent) to browsers that read it slowly: each gets every byte, and the proxy
reads from the archive only as fast as they take it, so stalled downloads hold a bounded
amount of memory each and do not keep other browsers waiting."""

from __future__ import annotations

import asyncio
import io
import re
import socket
from array import array
from pathlib import Path

import pytest

from wwwproxy.archive.memory import MAX_OBJECT
from wwwproxy.archive.served import CachedEntry
from wwwproxy.url import canonicalize

MiB = 1024 * 1024
STALLED = 3  # slow browsers downloading the copy at once
STALL = 0.5  # seconds the slow browsers stop reading


def _send_buffer_max() -> int:
    """The most a TCP send buffer grows to here (Linux's tcp_wmem maximum; 4 MiB if unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, ValueError, IndexError):
        return 4 * MiB


RECEIVE_BUFFER = 128 * 1024  # a slow browser's socket (fixed: the kernel does not grow it)
#: bytes the proxy may read from the archive for a browser beyond what the browser read: the
#: browser's receive buffer (the kernel doubles what is asked), the proxy's send buffer (which
#: the kernel grows) and aiohttp's write buffer and a few chunks
READ_AHEAD = 2 * RECEIVE_BUFFER + _send_buffer_max() + MiB
#: the copy's size: far more than that, and than what memory keeps (so it is streamed from disk)
BODY_SIZE = 3 * READ_AHEAD


class _CountingRaw(io.RawIOBase):
    """A payload stream that adds what is read from it to ``taken[index]``."""

    def __init__(self, inner: io.BufferedIOBase, taken: list[int]) -> None:
        self.inner, self.taken, self.index = inner, taken, len(taken)
        taken.append(0)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # noqa: ANN001 (a writable buffer)
        n = self.inner.readinto(b)
        self.taken[self.index] += n
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes read from the archive for each copy opened (the proxy's read-ahead, seen from
    the file's side)."""
    counts: list[int] = []
    real = CachedEntry.open_body

    def counted(self: CachedEntry):  # noqa: ANN202 (a binary stream)
        return io.BufferedReader(_CountingRaw(real(self), counts))

    monkeypatch.setattr(CachedEntry, "open_body", counted)
    return counts


async def slow_browser(port: int, url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection with a small receive buffer that asks for ``url`` and reads the head only."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), 5)
    reader, writer = await asyncio.open_connection(sock=sock, limit=RECEIVE_BUFFER)
    writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert re.search(rb"(?im)^x-cache: *hit", head), head
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    assert length is not None, head
    return reader, writer


async def read_slowly(reader: asyncio.StreamReader, size: int) -> bytes:
    """``size`` bytes, 256 KiB at a time with a pause after each."""
    got = bytearray()
    while len(got) < size:
        got += await asyncio.wait_for(reader.readexactly(min(256 * 1024, size - len(got))), 10)
        await asyncio.sleep(0.005)
    return bytes(got)


async def test_a_large_cached_body_to_slow_browsers_is_whole_and_read_as_they_take_it(
    make_proxy, taken
):
    # 4-byte counters: a chunk sent twice or out of place does not compare equal
    body = array("I", range(BODY_SIZE // 4)).tobytes()
    assert len(body) > MAX_OBJECT
    proxy = await make_proxy(mode="offline")
    key = canonicalize("http://large.example/download.bin")
    rec = proxy.store.recorder(key, key.file, method="GET", request_headers=[], request_body=b"")
    rec.write(body)
    rec.finish(200, "OK", [("Content-Type", "application/octet-stream")])
    url = key.canonical

    browsers = [await slow_browser(proxy.port, url) for _ in range(STALLED)]
    await asyncio.sleep(STALL)  # every download waits for its browser now
    assert len(taken) == STALLED, taken
    assert all(0 < n <= READ_AHEAD for n in taken), taken
    # meanwhile another browser gets the whole copy at full speed
    assert (await asyncio.wait_for(proxy.get(url), 10)).body == body

    got = await asyncio.gather(*(read_slowly(reader, len(body)) for reader, _ in browsers))
    for _, writer in browsers:
        writer.close()
    assert all(g == body for g in got)
    assert taken == [len(body)] * (STALLED + 1)
