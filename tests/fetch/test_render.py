"""``wwwproxy fetch --render``: script-built pages captured by headless Chromium through the
recording proxy, then browsed offline intact (issue 27).

Real parts: the scripted site (:mod:`.scripted`) on 127.0.0.1, the CLI as a person runs it,
Debian's Chromium driven by Playwright, the proxy started offline on the cache the fetch made,
and a second Chromium browsing it.  Hermetic: both browsers resolve no name
(``--host-resolver-rules``) and send every URL to the proxy; the proxies send any host but
127.0.0.1 to an upstream proxy on the discard port, which refuses.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from pathlib import Path

import pytest

from wwwproxy import app
from wwwproxy.cli import main
from wwwproxy.config import load_config
from wwwproxy.fetch.render import (
    NetworkLog,
    RenderOptions,
    RenderUnavailable,
    browser_args,
    find_browser,
)
from wwwproxy.http.policy import Mode

from .scripted import HASH, ScriptedSite, Visit, browse, serve_scripted_site

HERMETIC = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
PAGES = ("/", "/second.html", "/scripted-link.html")
#: what only the pages' scripts ask for
SCRIPTED = (
    f"/static/app.{HASH}.js?version={HASH}",
    f"/static/fonts.css?v={HASH}",
    "/api/images.json",
    "/img/a.png",
    "/img/lazy-index-1.png",
    "/fonts/galaxy.ttf",
)


@pytest.fixture
def scripted_site():
    with serve_scripted_site() as site:
        yield site


@pytest.fixture
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("the render tests need Debian's chromium (apt-get install chromium)")
    return path


def write_config(tmp_path: Path, name: str, *, timeout: float = 30, memory: int = 512) -> Path:
    cache = tmp_path / name
    conf = tmp_path / f"{name}.yaml"
    conf.write_text(
        f"cache: {cache}\n"
        "upstream_proxy: http://127.0.0.1:9\n"
        'no_proxy: ["127.0.0.1"]\n'
        f'render_browser_args: ["{HERMETIC}"]\n'
        f"render_timeout: {timeout}\n"
        f"render_tab_memory: {memory}\n"
    )
    return conf


def fetch(capsys: pytest.CaptureFixture[str], conf: Path, *args: str) -> tuple[int, str]:
    code = main(["fetch", "-c", str(conf), *args])
    return code, capsys.readouterr().err


def visit(conf: Path, mode: Mode, urls: list[str], chromium: str) -> dict[str, Visit]:
    """Browse ``urls`` through a proxy on ``conf``'s cache in ``mode``."""

    async def run() -> dict[str, Visit]:
        config = dataclasses.replace(load_config(str(conf)), listen_port=0)
        running = await app.start(config, mode=mode)
        try:
            return await browse(running.port, urls, chromium)
        finally:
            await running.stop()

    return asyncio.run(run())


def queued(conf: Path) -> list[str]:
    outgoing = load_config(str(conf)).cache / "outgoing"
    return sorted(p.name for p in outgoing.iterdir()) if outgoing.is_dir() else []


def misses(visits: dict[str, Visit]) -> dict[str, list[str]]:
    """Per page, every URL it asked for that did not come back 200."""
    out = {}
    for page, seen in visits.items():
        bad = [f"{url} {status}" for url, status in seen.statuses.items() if status != 200]
        if bad:
            out[page] = bad
    return out


def test_render_fetch_makes_script_built_pages_whole_offline(
    tmp_path: Path, scripted_site: ScriptedSite, chromium: str, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = [scripted_site.url(path) for path in PAGES]
    online = visit(write_config(tmp_path, "person"), Mode.ONLINE, urls, chromium)
    assert misses(online) == {}
    browsed = set(scripted_site.take_hits())
    for path in SCRIPTED:  # the site works, and needs what only its scripts ask for
        assert path in browsed
    conf = write_config(tmp_path, "fetched")

    code, err = fetch(capsys, conf, "--render", "--depth", "1", scripted_site.url("/"))

    assert code == 0, err
    hits = set(scripted_site.take_hits())
    for path in SCRIPTED:
        assert path in hits, f"{path} was not fetched\n{err}"
    assert "/scripted-link.html" in hits  # a link only the rendered DOM has
    assert f"render  {scripted_site.url('/')}: " in err
    assert "pages rendered in the browser" in err
    offline = visit(conf, Mode.OFFLINE, urls, chromium)
    assert misses(offline) == {}
    assert queued(conf) == []
    for url in urls:
        assert offline[url].dom == online[url].dom, url
        assert offline[url].screenshot == online[url].screenshot, url
    assert scripted_site.take_hits() == []  # offline: nothing reached the site


def test_without_render_the_scripts_requisites_are_missing_offline(
    tmp_path: Path, scripted_site: ScriptedSite, chromium: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Why the option exists: a parser reads the markup only."""
    conf = write_config(tmp_path, "parsed")
    code, err = fetch(capsys, conf, "--requisites", "--depth", "1", scripted_site.url("/"))
    assert code == 0, err
    hits = set(scripted_site.take_hits())
    assert "/static/loader.js" in hits and "/second.html" in hits
    for path in (*SCRIPTED, "/scripted-link.html"):
        assert path not in hits
    offline = visit(conf, Mode.OFFLINE, [scripted_site.url("/")], chromium)
    missing = " ".join(misses(offline)[scripted_site.url("/")])
    for path in SCRIPTED[:2]:  # the bundle and the style sheet; what they would load follows
        assert scripted_site.url(path) in missing
    assert len(queued(conf)) >= 2  # offline, the misses are queued for the next fetch
