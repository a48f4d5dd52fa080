"""Abort limits end to end (``finish_on_disconnect_max_kb`` / ``_percent``): a download the
browser leaves early is finished and recorded only when it is small enough or far enough
along; a cut one is never recorded, so never served."""

from __future__ import annotations

import asyncio
import logging

import pytest

from .conftest import SLOW_CHUNK, SLOW_CHUNKS

SLOW_KB = len(SLOW_CHUNK) * SLOW_CHUNKS // 1024  # 192 KiB, sent in 16 KiB parts, slowly


async def leave_after_head(proxy, url, port):
    """A browser that reads the answer's head and goes away."""
    reader, writer = await proxy.connect_raw()
    writer.write(f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    writer.transport.abort()


@pytest.mark.parametrize(
    ("max_kb", "percent", "finished"),
    [
        (SLOW_KB, None, True),  # at most the size: finished
        (SLOW_KB - 1, None, False),  # larger: cut
        (None, 5, True),  # the first 16 KiB part is 8%: far enough along
        (None, 90, False),
        (SLOW_KB - 1, 5, True),  # either rule finishes it
        (64, 90, False),
        (None, None, True),  # no limits: finished, as before
    ],
)
async def test_an_abandoned_download_is_finished_only_within_the_limits(
    make_proxy, origin, caplog, max_kb, percent, finished
):
    caplog.set_level(logging.INFO, logger="wwwproxy.recording")
    proxy = await make_proxy(
        finish_on_disconnect_max_kb=max_kb, finish_on_disconnect_percent=percent
    )
    url = origin.url("/slow")
    await leave_after_head(proxy, url, origin.port)
    if finished:
        records = await proxy.recorded(url)
        assert records[1].payload == origin.SLOW_BODY
        return
    assert await proxy.wait_until(lambda: "the browser left" in caplog.text)
    assert "not finished" in caplog.text
    assert proxy.records(url) == []  # nothing partial is stored
    await proxy.control(mode="offline")
    assert (await proxy.get(url)).status == 503  # so nothing is served: it is queued


async def test_limits_apply_only_to_downloads_the_browser_left(make_proxy, origin):
    proxy = await make_proxy(finish_on_disconnect_max_kb=1, finish_on_disconnect_percent=100)
    url = origin.url("/slow")
    reply = await proxy.get(url)
    assert reply.body == origin.SLOW_BODY
    records = await proxy.recorded(url)
    assert records[1].payload == origin.SLOW_BODY
