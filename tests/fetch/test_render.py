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
from typing import Any

import pytest

from wwwproxy import app
from wwwproxy.cli import main
from wwwproxy.config import load_config
from wwwproxy.fetch.render import RenderOptions, RenderUnavailable, browser_args, find_browser
from wwwproxy.http.policy import Mode

from .conftest import MapResolver
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


def write_config(
    tmp_path: Path,
    name: str,
    *,
    timeout: float = 30,
    memory: int = 512,
    extra: str = "",
    direct: str = '["127.0.0.1"]',
) -> Path:
    cache = tmp_path / name
    conf = tmp_path / f"{name}.yaml"
    conf.write_text(
        extra + f"cache: {cache}\n"
        "upstream_proxy: http://127.0.0.1:9\n"
        f"no_proxy: {direct}\n"
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
    asked = scripted_site.take_hits()
    hits = set(asked)
    for path in SCRIPTED:
        assert path in hits, f"{path} was not fetched\n{err}"
    assert "/scripted-link.html" in hits  # a link only the rendered DOM has
    # each page was asked of the site once, by the crawl: its browser took the copy just
    # recorded, though the site says to ask every time (must-revalidate, max-age=0)
    assert [asked.count(path) for path in PAGES] == [1, 1, 1], asked
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


def test_render_fetch_of_a_url_database_renders_its_pages(
    tmp_path: Path,
    scripted_site: ScriptedSite,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A URL database holds default-port URLs only: example.com reaches the site through the
    engine's resolver (the browser resolves nothing: its requests go to the recorder)."""
    from wwwproxy.recording import wiring

    original = wiring.open_services

    def open_services(config: Any, **kwargs: Any) -> Any:
        return original(config, **{"resolver": MapResolver(scripted_site.port), **kwargs})

    monkeypatch.setattr(wiring, "open_services", open_services)
    db = tmp_path / "urldb"
    db.mkdir()
    (db / "example.com.yaml").write_text("---\n---\n_path: /\ncontent-type: text/html\n")
    conf = write_config(tmp_path, "db", direct='["127.0.0.1", "example.com"]')
    code, err = fetch(capsys, conf, "--render", str(db))
    assert code == 0, err
    assert (
        "render  http://example.com/: 10 requests" in err
    )  # loader, modules, bundle, fonts.css, API, 2+2 images, font
    hits = set(scripted_site.take_hits())
    assert {f"/static/app.{HASH}.js?version={HASH}", "/img/lazy-index-2.png"} <= hits


def test_render_over_https_records_what_the_scripts_load(
    tmp_path: Path, chromium: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The crawl's browser goes through the recorder's HTTPS interception whatever
    ``https_intercept`` says; offline, a proxy that intercepts serves it all."""
    with serve_scripted_site(tmp_path) as site:
        assert site.ca_pem is not None
        tls = f"upstream_ca: {site.ca_pem}\nconnect_ports: [443, {site.port}]\n"
        conf = write_config(tmp_path, "https", extra=tls)
        code, err = fetch(capsys, conf, "--render", site.url("/second.html"))
        assert code == 0, err
        hits = set(site.take_hits())
        assert {f"/static/app.{HASH}.js?version={HASH}", "/img/lazy-second-2.png"} <= hits, err
        offline_conf = write_config(tmp_path, "https", extra=tls + 'https_intercept: ["*"]\n')
        offline = visit(offline_conf, Mode.OFFLINE, [site.url("/second.html")], chromium)
        assert misses(offline) == {}
        assert queued(conf) == []
        assert site.take_hits() == []


def test_a_page_that_never_settles_ends_at_the_cap_and_the_crawl_goes_on(
    tmp_path: Path, scripted_site: ScriptedSite, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = write_config(tmp_path, "forever")
    code, err = fetch(
        capsys, conf, "--render", "--render-timeout", "10", "--depth", "1",
        scripted_site.url("/forever.html"),
    )  # fmt: skip
    assert code == 0, err  # what it loaded by then is recorded: not a failure
    lines = {line.split(": ", 1)[0]: line for line in err.splitlines() if line.startswith("render")}
    assert lines[f"render  {scripted_site.url('/forever.html')}"].endswith("time cap"), err
    assert not lines[f"render  {scripted_site.url('/second.html')}"].endswith("time cap"), err
    hits = scripted_site.take_hits()
    ticks = [hit for hit in hits if hit.startswith("/api/tick")]
    assert len(ticks) >= 5  # the timer ran until the cap ...
    assert "/img/lazy-second-1.png" in hits  # ... and the crawl went on to its link
    assert "1 stopped at the time cap" in err


def test_a_page_that_crashes_its_tab_is_reported_and_the_crawl_goes_on(
    tmp_path: Path, scripted_site: ScriptedSite, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = write_config(tmp_path, "crash", memory=16)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{scripted_site.url('/crash.html')}\n{scripted_site.url('/')}\n")
    code, err = fetch(capsys, conf, "--render", str(listing))
    assert code == 1, err
    crash = scripted_site.url("/crash.html")
    assert f"{crash}: not rendered (twice): its tab crashed" in err
    assert err.count(f"render  {crash}: not rendered") == 1
    assert scripted_site.take_hits().count("/crash.html") >= 1
    assert "1 failed" in err
    # the other page was rendered whole
    assert (
        f"render  {scripted_site.url('/')}: 10 requests" in err
    )  # loader, modules, bundle, fonts.css, API, 2+2 images, font


def test_a_page_whose_script_never_ends_is_reported_and_the_crawl_goes_on(
    tmp_path: Path, scripted_site: ScriptedSite, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = write_config(tmp_path, "hang", timeout=4)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{scripted_site.url('/hang.html')}\n{scripted_site.url('/second.html')}\n")
    code, err = fetch(capsys, conf, "--render", str(listing))
    assert code == 1, err
    assert f"{scripted_site.url('/hang.html')}: not rendered (twice): its tab stopped" in err
    second = f"render  {scripted_site.url('/second.html')}: "
    assert second in err and f"{second}not rendered" not in err  # rendered, if perhaps capped


def test_without_chromium_render_says_how_to_install_it_and_fetches_nothing(
    tmp_path: Path, scripted_site: ScriptedSite, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = write_config(tmp_path, "nobrowser")
    with conf.open("a") as out:
        out.write(f"render_browser: {tmp_path / 'no-such-chromium'}\n")
    code, err = fetch(capsys, conf, "--render", scripted_site.url("/"))
    assert code == 2
    assert "apt-get install chromium" in err and "no-such-chromium" in err
    assert scripted_site.take_hits() == []
    # everything else works without it
    code, err = fetch(capsys, conf, scripted_site.url("/"))
    assert code == 0, err


# --- the pure parts ----------------------------------------------------------------------------


def test_browser_args_send_everything_through_the_proxy_with_a_bounded_heap() -> None:
    args = browser_args("127.0.0.1:3128", RenderOptions(tab_memory=64, extra_args=("--lang=de",)))
    assert args[:2] == ["--proxy-server=http://127.0.0.1:3128", "--proxy-bypass-list=<-loopback>"]
    assert "--js-flags=--max-old-space-size=64" in args
    assert "--disable-background-networking" in args
    assert args[-1] == "--lang=de"
    assert not any("max-old-space" in a for a in browser_args("h:1", RenderOptions(tab_memory=0)))


def test_find_browser(tmp_path: Path) -> None:
    assert find_browser("sh") == shutil.which("sh")
    with pytest.raises(RenderUnavailable, match="apt-get install chromium"):
        find_browser(str(tmp_path / "none"))


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"timeout": 0}, "more than 0 seconds"),
        ({"tabs": -1}, "0 \\(from the cores\\) or more"),
    ],
)
def test_render_options_refuse_nonsense(options: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RenderOptions(**options)  # type: ignore[arg-type]
