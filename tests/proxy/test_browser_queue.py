"""A real browser offline for a minute queues only the pages it was asked for (issue 29).

Headless Chromium runs with its own background services on (update and time checks, hints,
safe browsing: none of the flags that turn them off) and browses three pages through the proxy
in offline mode, a navigation every twenty seconds.  Its background requests reach the proxy
too, and are answered there without being queued; the outgoing queue then holds the three pages
and nothing else.

Hermetic: Chromium resolves no name (``--host-resolver-rules``) and sends every URL to the
proxy, which is offline and would reach nothing but the test origin anyway (any other host goes
to an upstream proxy on the discard port, which refuses).  Debian's ``firefox-esr`` is not
installed here, so only Chromium is run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from .chromium import hermetic_chromium
from .devtools import DevTools, devtools

PAGES = ("/page.html", "/etag", "/chunked")
#: seconds between navigations: three of them make about a minute
BETWEEN = 18
STEP_TIMEOUT = 20


@contextlib.asynccontextmanager
async def chromium(tmp_path: Path, proxy_port: int) -> AsyncIterator[DevTools]:
    """Headless Chromium with its background networking on, driven over DevTools."""
    profile = tmp_path / "chromium-profile"
    async with hermetic_chromium(profile, proxy_port, background=True) as process:
        async with devtools(profile, process, STEP_TIMEOUT) as browser:
            yield browser


def queued_urls(proxy) -> list[str]:  # noqa: ANN001 (the conftest's Proxy)
    return sorted(json.loads(p.read_text())["url"] for p in proxy.outgoing())


async def test_a_minute_offline_queues_only_the_pages_asked_for(make_proxy, origin, tmp_path):
    proxy = await make_proxy(
        "offline", upstream_proxy="http://127.0.0.1:9", no_proxy=("127.0.0.1",)
    )
    pages = [origin.url(path) for path in PAGES]
    async with chromium(tmp_path, proxy.port) as browser:
        for number, page in enumerate(pages, 1):
            await browser.open_tab(page)  # as a person typing it would
            await proxy.wait_until(lambda n=number: len(proxy.outgoing()) >= n, STEP_TIMEOUT)
            await asyncio.sleep(BETWEEN)
    lines = proxy.access_lines()
    log = "\n".join(lines)
    assert queued_urls(proxy) == sorted(pages), log
    site = origin.url("/")
    own = [line for line in lines if "CONNECT" not in line and site not in line]
    assert own, "Chromium sent no request of its own: the test shows nothing\n" + log
    assert sum(origin.hits.values()) == 0  # offline: nothing reached the origin
