"""Command pages work in threads of their own (commands/worker.py): pages stuck behind a lock
(here the listing's, held by the test) never take the threads recording and disk hits use."""

from __future__ import annotations

import asyncio
import threading

import aiohttp

from wwwproxy.commands.listing import _view
from wwwproxy.commands.worker import PAGE_THREADS

from .conftest import TIMEOUT, browse


async def test_stuck_pages_leave_the_proxy_serving(proxy, origin):
    store = proxy.services.store
    url = origin.url("/a.html")
    await browse(proxy, url)  # recorded
    store.memory.clear()  # the next hit is read from disk, in a worker thread
    lock = _view(store).lock
    release = threading.Event()
    held = threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
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
            release.set()
            assert await asyncio.wait_for(asyncio.gather(*pages), 30) == [200] * len(pages)
    finally:
        release.set()
        holder.join(10)
