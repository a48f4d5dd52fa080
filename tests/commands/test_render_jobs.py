"""``render=1`` on ``/refresh/`` and ``render: true`` monitors: the running proxy loads the page
in headless Chromium, so what only its scripts ask for is fetched and recorded.

Real parts: the scripted site (:mod:`tests.fetch.scripted`) on 127.0.0.1, the proxy as
``wwwproxy serve`` starts it, its command pages over HTTP, Debian's Chromium driven by
Playwright (without them, the jobs' errors say how to install them).  Hermetic: the browser
resolves no name (``--host-resolver-rules`` through ``render_browser_args``), and the proxy
sends any host but 127.0.0.1 to an upstream proxy on the discard port, which refuses.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from wwwproxy.app import Running
from wwwproxy.fetch.monitor import load, monitor_path

from ..fetch.scripted import HASH, ScriptedSite, serve_scripted_site
from .conftest import TIMEOUT, Client, make_config, start_proxy, stop_proxy, text_of
from .test_refresh import wait_jobs

HERMETIC = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
#: what only the front page's scripts ask for: a composed bundle URL, a JSON API's images, a
#: lazy image scrolled into view, a web font from an injected style sheet
SCRIPT_ONLY = (
    f"/static/app.{HASH}.js?version={HASH}",
    "/api/images.json",
    "/img/lazy-index-1.png",
    "/fonts/galaxy.ttf",
)
NO_BROWSER = "/nonexistent/chromium"


@pytest.fixture
def scripted_site() -> Iterator[ScriptedSite]:
    with serve_scripted_site() as site:
        yield site


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, **keys: Any) -> AsyncIterator[tuple[Running, Client]]:
    """The proxy online on a hermetic config (and ``keys``), and a client of its pages."""
    config = make_config(
        tmp_path,
        upstream_proxy="http://127.0.0.1:9",
        no_proxy=("127.0.0.1",),
        render_browser_args=(HERMETIC,),
        **keys,
    )
    running = await start_proxy(config)
    try:
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar, timeout=TIMEOUT) as session:
            yield running, Client(running.port, "direct", session)
    finally:
        await stop_proxy(running)


def missing(hits: list[str]) -> list[str]:
    return [path for path in SCRIPT_ONLY if path not in hits]


async def test_refresh_with_render_fetches_what_only_scripts_load(
    tmp_path: Path, scripted_site: ScriptedSite
) -> None:
    url = scripted_site.url("/")
    async with serving(tmp_path) as (_, client):
        status, _ = await client.post_api("/refresh/", {"url": url})
        assert status == 200
        plain = (await wait_jobs(client))["jobs"][0]
        assert plain["render"] is False and plain["rendered"] == {}
        assert missing(scripted_site.take_hits()) == list(SCRIPT_ONLY)  # a parser finds none

        status, text, _ = await client.post("/refresh/", {"url": url, "render": "1"})
        assert status == 200 and "in the background" in text_of(text)
        job = (await wait_jobs(client))["jobs"][0]
        hits = scripted_site.take_hits()
        assert missing(hits) == [], hits
        assert job["render"] is True and job["errors"] == [], job
        report = job["rendered"][url]
        assert report["problem"] is None and report["fetched"] >= len(SCRIPT_ONLY)
        _, page, _ = await client.get("/refresh/")
        shown = text_of(page)
        assert f"render {url}: {report['requests']} requests ({report['fetched']} fetched" in shown
        assert "1 page rendered" in shown


async def test_refresh_with_render_and_no_browser_says_how_to_install_one(
    tmp_path: Path, scripted_site: ScriptedSite
) -> None:
    async with serving(tmp_path, render_browser=NO_BROWSER) as (_, client):
        status, _ = await client.post_api(
            "/refresh/", {"url": scripted_site.url("/"), "render": "1"}
        )
        assert status == 200
        job = (await wait_jobs(client))["jobs"][0]
        (error,) = job["errors"]
        assert error.startswith(f"not rendered: render_browser {NO_BROWSER!r} is not a program")
        assert "apt-get install chromium" in error
        _, page, _ = await client.get("/refresh/")
        assert "not rendered: render_browser" in text_of(page)
        assert "Traceback" not in page
    assert scripted_site.take_hits() == []


async def test_a_rendered_monitor_fetches_what_only_scripts_load(
    tmp_path: Path, scripted_site: ScriptedSite
) -> None:
    url = scripted_site.url("/")
    async with serving(tmp_path) as (running, client):
        path = monitor_path(running.services.store.root)
        status, _ = await client.post_api("/monitor/", {"url": url, "every": "6"})
        assert status == 200
        status, text, _ = await client.post("/monitor/", {"fetch": url})
        assert status == 200 and f"Fetched {url}" in text_of(text)
        assert missing(scripted_site.take_hits()) == list(SCRIPT_ONLY)

        status, data = await client.post_api("/monitor/", {"url": url, "every": "6", "render": "1"})
        assert status == 200 and data["monitored"][0]["render"] is True
        assert "every 6 hours, rendered" in text_of((await client.get("/monitor/"))[1])
        status, text, _ = await client.post("/monitor/", {"fetch": url})
        assert status == 200 and f"Fetched {url}" in text_of(text)
        hits = scripted_site.take_hits()
        assert missing(hits) == [], hits
        (entry,) = load(path)
        assert entry.render and entry.error is None and entry.last is not None


async def test_a_rendered_monitor_without_a_browser_notes_the_error(
    tmp_path: Path, scripted_site: ScriptedSite
) -> None:
    url = scripted_site.url("/")
    async with serving(tmp_path, render_browser=NO_BROWSER) as (running, client):
        path = monitor_path(running.services.store.root)
        await client.post_api("/monitor/", {"url": url, "every": "6", "render": "1"})
        status, text, _ = await client.post("/monitor/", {"fetch": url})
        assert status == 200
        assert f"Could not fetch {url}: not rendered: render_browser" in text_of(text)
        (entry,) = load(path)
        assert entry.error is not None and "is not a program" in entry.error
        assert entry.last is None and entry.tried is not None
