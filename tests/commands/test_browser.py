"""A real browser: headless Chromium, configured to use the proxy, loads the index and a
history page, and the test reads what it rendered (its DOM).  It also takes a screenshot of
a host's index (``WWWPROXY_SCREENSHOT=docs/index.png`` saves it there for the README).

Chromium comes from the Debian package ``chromium`` (``.ci/run`` installs it).  Without it this
test fails, saying so (:mod:`tests.proxy.chromium`): it is part of the acceptance of the
command pages.
"""

from __future__ import annotations

import html
import os
import random
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from wwwproxy.http.policy import Mode

from ..proxy.chromium import chromium_args, run
from .conftest import EVIL_TITLE
from .test_index import record


async def chromium(tmp_path: Path, proxy_port: int, url: str, *extra: str) -> str:
    """Run headless Chromium through the proxy on ``url``; its stdout (the DOM with
    ``--dump-dom``)."""
    return await run(*chromium_args(tmp_path / "chromium-profile", proxy_port), *extra, url)


def dom_text(dom: str) -> str:
    body = dom.split("<main>", 1)[-1].split("</main>", 1)[0]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))).strip()


_WORDS = [
    "archive",
    "offline",
    "proxy",
    "cache",
    "page",
    "browser",
    "record",
    "replay",
    "index",
    "capture",
    "fetch",
    "queue",
    "host",
    "history",
    "search",
    "refresh",
    "time",
    "travel",
    "network",
    "train",
    "reading",
    "web",
    "warc",
    "cdxj",
    "request",
    "response",
]


def seed_demo_host(store) -> None:
    """Pages of a made-up host, for a screenshot that shows what a real index looks like."""
    now = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
    pages = [
        ("/", 18_412, "text/html"),
        ("/about/", 9_120, "text/html"),
        ("/blog/", 22_730, "text/html"),
        ("/blog/2026/offline-first.html", 41_502, "text/html"),
        ("/blog/2026/warc-for-everyone.html", 37_880, "text/html"),
        ("/css/site.css", 6_240, "text/css"),
        ("/docs/", 15_002, "text/html"),
        ("/docs/install.html", 12_775, "text/html"),
        ("/docs/proxy-setup.html", 14_096, "text/html"),
        ("/feed.xml", 8_230, "application/rss+xml"),
        ("/img/logo.png", 4_511, "image/png"),
        ("/img/screenshot.png", 88_120, "image/png"),
        ("/js/search.js", 3_372, "application/javascript"),
    ]
    for i, (path, size, ctype) in enumerate(pages):
        when = now - timedelta(hours=7 * i, minutes=13 * i)
        words = random.Random(i).choices(_WORDS, k=size // 3)  # compresses as text does
        body = f"<title>{path}</title><p>{' '.join(words)}</p>".encode()
        record(store, "http://www.example.org" + path, body, when, ctype)
        if i % 4 == 0:
            later = when + timedelta(days=1)
            record(store, "http://www.example.org" + path, body + b" ", later, ctype)


async def test_index_and_history_in_a_real_browser(proxy, origin, fetch, tmp_path):
    for path in ("/", "/a.html", "/evil", "/img.png"):
        await fetch(origin.url(path))
    await fetch(origin.url("/a.html"), headers={"Cache-Control": "no-cache"})
    host = f"127.0.0.1:{origin.port}"
    base = f"http://127.0.0.1:{proxy.port}"
    # offline: whatever else the browser asks for is queued, never fetched from the network
    proxy.services.state.mode = Mode.OFFLINE

    dom = await chromium(tmp_path, proxy.port, f"{base}/index/", "--dump-dom")
    text = dom_text(dom)
    assert "Cached hosts" in text and host in text
    assert re.search(rf"{re.escape(host)} http 4 ", text), text

    dom = await chromium(tmp_path, proxy.port, f"{base}/index/http/{host}/", "--dump-dom")
    text = dom_text(dom)
    assert f"Cached pages of {host}" in text
    for path in ("/", "/a.html", "/evil", "/img.png"):
        assert f" {path} " in f" {text} ", path
    assert "history (2)" in text  # /a.html was fetched twice

    history = f"{base}/history/?url={quote(origin.url('/a.html'), safe='')}"
    dom = await chromium(tmp_path, proxy.port, history, "--dump-dom")
    text = dom_text(dom)
    assert f"History of http://{host}/a.html" in text
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text)) == 2
    assert "new content" in text

    # a hostile title is text in the browser, not a script that ran
    dom = await chromium(tmp_path, proxy.port, f"{base}/search/?q=harmless", "--dump-dom")
    assert EVIL_TITLE in dom_text(dom)
    assert "<script>alert(" not in dom
    # Chromium's own update checks arrive too (the flags cannot stop them all): being
    # offline, the proxy queued them instead of reaching the network
    assert all(origin.url("") not in r.url for r in proxy.services.queue.requests())


async def test_screenshot_of_the_index(proxy, tmp_path):
    seed_demo_host(proxy.services.store)
    proxy.services.state.mode = Mode.OFFLINE  # the browser's own requests never leave the machine
    shot = tmp_path / "index.png"
    url = f"http://127.0.0.1:{proxy.port}/index/http/www.example.org/?sort=time"
    await chromium(
        tmp_path,
        proxy.port,
        url,
        f"--screenshot={shot}",
        "--window-size=1200,800",
        "--hide-scrollbars",
    )
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 800)
    target = os.environ.get("WWWPROXY_SCREENSHOT")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target)
