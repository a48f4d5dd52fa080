"""Command pages work in threads of their own (commands/worker.py): pages stuck behind a lock
(here the listing's, held by the test) never take the threads recording and disk hits use."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import aiohttp

from wwwproxy.commands.worker import PAGE_THREADS

from .conftest import TIMEOUT, browse


class HeldLock:
    """The lock of a cache's catalog reads, held by a thread of the test until ``release()``:
    command pages that need it wait in the pages' threads meanwhile."""

    def __init__(self, store) -> None:
        self._lock = store.catalog._read_lock  # noqa: SLF001
        self._release = threading.Event()
        held = threading.Event()
        self._holder = threading.Thread(target=self._hold, args=(held,))
        self._holder.start()
        held.wait(5)

    def _hold(self, held: threading.Event) -> None:
        with self._lock:
            held.set()
            self._release.wait(30)

    def release(self) -> None:
        self._release.set()
        self._holder.join(10)


async def test_stuck_pages_leave_the_proxy_serving(proxy, origin):
    store = proxy.services.store
    # the copy is served without asking its origin (which gives it no lifetime) for ten minutes
    proxy.services.reload(dataclasses.replace(proxy.services.config, request_changed=600))
    url = origin.url("/a.html")
    await browse(proxy, url)  # recorded
    store.memory.clear()  # the next hit is read from disk, in a worker thread
    held = HeldLock(store)
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:

            async def welcome() -> int:
                async with session.get(f"http://127.0.0.1:{proxy.port}/") as resp:
                    await resp.read()
                    return resp.status

            # many more waiting pages than the pages' threads (and than asyncio's default
            # executor would have had free, had they used it)
            pages = [asyncio.ensure_future(welcome()) for _ in range(PAGE_THREADS * 10)]
            await asyncio.sleep(0.5)
            assert not any(p.done() for p in pages)
            # meanwhile a disk hit and a miss are served
            status, _, headers = await browse(proxy, url)
            assert (status, headers.get("X-Cache")) == (200, "HIT")
            status, _, _ = await browse(proxy, origin.url("/b.html"))
            assert status == 200
            held.release()
            assert await asyncio.wait_for(asyncio.gather(*pages), 30) == [200] * len(pages)
    finally:
        held.release()


async def test_pages_whose_browser_left_while_queued_are_not_made(proxy, origin, monkeypatch):
    """Pages queue for the pages' threads; one whose browser closed its connection meanwhile
    is dropped when its turn comes (on an overloaded machine they piled up into minutes of
    backlog), while a page somebody still waits for is made."""
    from wwwproxy.commands import welcome, worker

    made = []

    def counted(*args, **kwargs):
        made.append(1)
        return host_totals(*args, **kwargs)

    host_totals = welcome.host_totals
    monkeypatch.setattr(welcome, "host_totals", counted)
    await browse(proxy, origin.url("/a.html"))
    held = HeldLock(proxy.services.store)
    request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n\r\n".encode()
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:

            async def welcome_page() -> int:
                async with session.get(f"http://127.0.0.1:{proxy.port}/") as resp:
                    await resp.read()
                    return resp.status

            busy = [asyncio.ensure_future(welcome_page()) for _ in range(PAGE_THREADS)]
            for _ in range(500):  # the threads all wait for the lock
                if len(made) == PAGE_THREADS:
                    break
                await asyncio.sleep(0.01)
            assert len(made) == PAGE_THREADS
            left = []
            for _ in range(10):
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(request)
                await writer.drain()
                left.append(writer)
            queue = worker._executor._work_queue  # noqa: SLF001 (how many pages wait)
            for _ in range(500):
                if queue.qsize() >= len(left):
                    break
                await asyncio.sleep(0.01)
            assert queue.qsize() == len(left)
            for writer in left:  # their browsers give up
                writer.close()
                await writer.wait_closed()
            await asyncio.sleep(0.2)  # the proxy sees them close
            held.release()
            assert await asyncio.wait_for(asyncio.gather(*busy), 30) == [200] * PAGE_THREADS
            # a page asked now queues behind the dropped ones, and is made
            assert await asyncio.wait_for(welcome_page(), 30) == 200
    finally:
        held.release()
    assert len(made) == PAGE_THREADS + 1  # the 10 left behind were not made
