"""The fetch engine: whole runs against a local site."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from wwwproxy.app import open_services, start
from wwwproxy.archive.outgoing import QueuedRequest
from wwwproxy.archive.store import Store
from wwwproxy.archive.warc import read_records
from wwwproxy.config import Config, FreshnessRule
from wwwproxy.fetch.prefetch import Prefetcher, fetch_queue
from wwwproxy.fetch.progress import Progress, format_summary
from wwwproxy.fetch.tasks import FetchOptions, Outcome, Summary
from wwwproxy.http.policy import Mode
from wwwproxy.url import canonicalize
from wwwproxy.url.requestkey import request_key

from .conftest import MapResolver, Site

# --- runs against the local site --------------------------------------------------------------


def outcomes(summary: Summary, site: Site) -> dict[str, str]:
    """{path (``other:`` for the other host): outcome} of a run."""
    out = {}
    for result in summary.results.values():
        url = result.url
        if url.startswith(site.base):
            key = url[len(site.base) :]
        elif url.startswith(site.other):
            key = "other:" + url[len(site.other) :]
        else:
            key = url
        out[key] = result.outcome.value
    return out


async def crawl(
    cache: Path, seeds: list[str], *, config: Config | None = None, queue: bool = False, **opts
) -> Summary:  # type: ignore[no-untyped-def]
    config = config or Config(cache=cache)
    async with open_services(config) as services:
        return await Prefetcher(services, FetchOptions(**opts)).run(seeds, queue=queue)


F, R, X, B = "fetched", "fresh", "failed", "robots"
DEPTH1 = {
    "/": F,
    "/robots.txt": F,
    "/a.html": F,
    "/search?q=1&page=2": F,  # &amp; in the href decoded
    "/private/secret.html": B,
    "/missing.html": X,
    "/loop1": F,
    "/loop2": X,  # the redirect loop
    "/redirect": F,  # to /a.html, already there
    "/frames.html": F,
    "/iframe.html": F,  # without --requisites an iframe is a link
}
REQUISITES0 = {
    "/": F,
    "/robots.txt": F,
    "/css/site.css": F,
    "/css/base.css": F,  # @import
    "/img/bg.png": F,  # url() in site.css
    "/img/h1.png": F,  # url() in the imported sheet
    "/js/app.js": F,
    "/favicon.ico": F,
    "/img/logo.png": F,
    "/img/logo-2x.png": F,  # srcset
    "/iframe.html": F,
    "/img/iframe.png": F,  # the iframe's own requisite
    "other:/img/cdn.png": F,  # requisites come from any host
    "other:/robots.txt": F,  # a 404, which allows everything
}
FULL = {
    **DEPTH1,
    **REQUISITES0,
    "/img/a.png": F,  # a.html is gzip-encoded: decoded before its links are read
    "/deep/c.html": F,  # level 2
    "/frame1.html": F,
    "/frame2.html": F,
    "/img/frame.png": F,
}


@pytest.mark.parametrize(
    ("opts", "expected"),
    [
        ({}, {"/": F}),
        ({"depth": 1}, DEPTH1),
        ({"requisites": True}, REQUISITES0),
        ({"depth": 2, "requisites": True}, FULL),
        ({"depth": 1, "robots": False}, {**DEPTH1, "/private/secret.html": F, "/robots.txt": None}),
        (
            {"depth": 1, "scope": "any"},
            {**DEPTH1, "other:/offhost.html": F, "other:/robots.txt": F},
        ),
    ],
    ids=["depth0", "depth1", "requisites", "depth2-requisites", "ignore-robots", "any-host"],
)
async def test_depth_and_scope_fetch_exactly_the_expected_set(
    tmp_path: Path, site: Site, opts: dict[str, object], expected: dict[str, str | None]
) -> None:
    want = {k: v for k, v in expected.items() if v is not None}
    summary = await crawl(tmp_path / "cache", [site.url("/")], **opts)
    assert outcomes(summary, site) == want
    fetched = {k for k, v in want.items() if v in (F, X)}
    assert set(site.take_hits()) == fetched  # and each of them once


async def test_pages_read_in_the_link_helper_lead_to_the_same_set(
    tmp_path: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past a run's first pages, pages are read for links in a helper process: the very
    same URLs are fetched, and the helper is gone when the run is."""
    from wwwproxy.fetch import prefetch

    monkeypatch.setattr(prefetch, "LINK_HELPER_AFTER", 0)  # every page in the helper
    async with open_services(Config(cache=tmp_path / "cache")) as services:
        prefetcher = Prefetcher(services, FetchOptions(depth=2, requisites=True))
        summary = await prefetcher.run([site.url("/")])
        helper = prefetcher._link_helper
        assert helper.started == 1 and helper.failures == 0 and helper.pid is None
    assert outcomes(summary, site) == FULL
    assert set(site.take_hits()) == {k for k, v in FULL.items() if v in (F, X)}


async def test_limit_prefix(tmp_path: Path, site: Site) -> None:
    summary = await crawl(
        tmp_path / "cache",
        [site.url("/a.html")],
        depth=5,
        scope="prefix",
        limits=(site.url("/deep/"),),
    )
    assert outcomes(summary, site) == {
        "/a.html": F,
        "/robots.txt": F,
        "/deep/c.html": F,
        "/deep/d.html": F,
    }


async def test_listed_urls_ignore_robots_txt_but_their_requisites_do_not(
    tmp_path: Path, site: Site
) -> None:
    summary = await crawl(tmp_path / "cache", [site.url("/private/secret.html")], requisites=True)
    assert outcomes(summary, site) == {
        "/private/secret.html": F,
        "/robots.txt": F,
        "/img/secret.png": F,
    }


async def test_a_listed_urls_redirect_moves_the_scope(tmp_path: Path, site: Site) -> None:
    summary = await crawl(tmp_path / "cache", [site.url("/to-other")], depth=1)
    assert outcomes(summary, site) == {
        "/to-other": F,
        "other:/offhost.html": F,  # level 0, and now the root of the scope
        "other:/robots.txt": F,
        "other:/other-page.html": F,
    }


async def test_second_run_fetches_only_errors_and_browsing_offline_serves_it_all(
    tmp_path: Path, site: Site
) -> None:
    cache = tmp_path / "cache"
    saving = Config(cache=cache, request_changed=600)  # WWWOFFLE's saving rule
    first = await crawl(cache, [site.url("/")], depth=2, requisites=True, config=saving)
    assert outcomes(first, site) == FULL
    site.take_hits()

    # within request_changed (600 s) of the first run every good copy is fresh; the 404s are
    # never fresh (an error page is what the cache wants to replace), so they are asked again
    second = await crawl(cache, [site.url("/")], depth=2, requisites=True, config=saving)
    assert sorted(site.take_hits()) == ["/missing.html", "other:/robots.txt"]
    again = {k: (R if v == F else v) for k, v in FULL.items()}
    again["other:/robots.txt"] = F  # a 404: asked again, and an answer all the same
    assert outcomes(second, site) == again
    assert {r.url for r in second.failed} == {site.url("/missing.html"), site.url("/loop2")}

    # every fetched page and requisite (and the recorded 404 and redirects) replay offline
    running = await start(Config(listen_port=0, cache=cache), mode=Mode.OFFLINE)
    try:
        proxy = f"http://127.0.0.1:{running.port}"
        async with aiohttp.ClientSession(auto_decompress=False) as client:
            for result in first.results.values():
                if result.status is None:
                    continue
                async with client.get(
                    result.url,
                    proxy=proxy,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=10),
                ) as response:
                    body = await response.read()
                    assert response.headers.get("X-Cache") == "HIT", result.url
                    assert response.status == result.status, result.url
                    assert len(body) == result.size, result.url
    finally:
        await running.stop()
    assert site.take_hits() == []  # offline: the origin never heard of it


async def test_interrupted_run_resumes_from_the_cache(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    saving = Config(cache=cache, request_changed=600)  # WWWOFFLE's saving rule
    # "interrupted" after two pages
    await crawl(cache, [site.url("/"), site.url("/a.html")], config=saving)
    site.take_hits()
    summary = await crawl(cache, [site.url("/")], depth=1, config=saving)
    got = outcomes(summary, site)
    assert got["/"] == R and got["/a.html"] == R
    # the fresh page's links were still followed
    assert got["/frames.html"] == F and got["/search?q=1&page=2"] == F
    assert "/" not in site.take_hits()


async def test_force_fetches_again(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    await crawl(cache, [site.url("/")], requisites=True)
    site.take_hits()
    summary = await crawl(cache, [site.url("/")], requisites=True, force=True)
    assert outcomes(summary, site) == REQUISITES0
    assert sorted(site.take_hits()) == sorted(k for k, v in REQUISITES0.items() if v == F)


def _put_old(store: Store, url: str, body: bytes, hours: int) -> None:
    u = canonicalize(url)
    recorder = store.recorder(
        u,
        u.file,
        method="GET",
        request_headers=[("Host", u.hostport)],
        request_body=b"",
        date=datetime.now(UTC) - timedelta(hours=hours),
    )
    recorder.write(body)
    recorder.finish(200, "OK", [("Content-Type", "image/png")])


async def test_freshness_rules_decide_what_is_fetched_again(tmp_path: Path, site: Site) -> None:
    """A config ``freshness`` rule overrides the origin; without one, a copy without any
    lifetime from the origin is fresh for ``request_changed`` seconds (the proxy's rule)."""
    cache = tmp_path / "cache"
    store = Store(cache)
    _put_old(store, site.url("/img/logo.png"), b"old logo", hours=2)
    _put_old(store, site.url("/img/bg.png"), b"old bg", hours=2)
    _put_old(store, site.url("/img/h1.png"), b"old h1", hours=2)
    rules = (
        FreshnessRule("logo", 3600, re.compile("logo")),
        FreshnessRule("bg", 3 * 3600, re.compile("bg")),
    )
    config = Config(cache=cache, freshness=rules)
    urls = [site.url(p) for p in ("/img/logo.png", "/img/bg.png", "/img/h1.png")]
    summary = await crawl(cache, urls, config=config)
    # logo.png is older than its rule's hour, bg.png younger than its three; h1.png has no
    # rule and no lifetime from its origin
    assert outcomes(summary, site) == {"/img/logo.png": F, "/img/bg.png": R, "/img/h1.png": F}
    entry = store.get(canonicalize(site.url("/img/logo.png")))
    assert entry is not None
    with entry.open_body() as f:
        assert f.read() == b"\x89PNGlogo"
    site.take_hits()
    longer = Config(cache=cache, request_changed=4 * 3600)
    summary = await crawl(cache, [site.url("/img/bg.png")], config=longer)
    assert outcomes(summary, site) == {"/img/bg.png": R}  # two hours < request_changed
    assert site.take_hits() == []


def _put(
    store: Store, url: str, body: bytes, age: timedelta, headers: list[tuple[str, str]]
) -> None:
    u = canonicalize(url)
    recorder = store.recorder(
        u,
        u.file,
        method="GET",
        request_headers=[("Host", u.hostport)],
        request_body=b"",
        date=datetime.now(UTC) - age,
    )
    recorder.write(body)
    recorder.finish(200, "OK", [("Content-Type", "text/plain"), *headers])


async def test_the_origins_lifetime_is_the_boundary(tmp_path: Path, site: Site) -> None:
    """``Cache-Control: max-age=60``: a copy 30 s old is skipped as fresh, one 61 s old is
    fetched again (with request_changed 0: nothing raises the origin's lifetime)."""
    cache = tmp_path / "cache"
    store = Store(cache)
    young, old = site.url("/max60.txt"), site.url("/img/logo.png")
    _put(store, young, b"young", timedelta(seconds=30), [("Cache-Control", "max-age=60")])
    _put(store, old, b"old", timedelta(seconds=61), [("Cache-Control", "max-age=60")])
    config = Config(cache=cache, request_changed=0)
    summary = await crawl(cache, [young, old], config=config)
    assert outcomes(summary, site) == {"/max60.txt": R, "/img/logo.png": F}
    assert site.take_hits() == ["/img/logo.png"]


async def test_a_no_cache_copy_is_revalidated_and_a_304_is_a_revisit(
    tmp_path: Path, site: Site
) -> None:
    cache = tmp_path / "cache"
    store = Store(cache)
    url = site.url("/etag.txt")
    _put(
        store,
        url,
        b"ask every time\n",
        timedelta(seconds=1),
        [("ETag", '"v1"'), ("Cache-Control", "no-cache")],
    )
    summary = await crawl(cache, [url])
    result = summary.results[url]
    assert (result.outcome, result.status, result.size) == (Outcome.FETCHED, 304, 0)
    assert site.conditional == [("/etag.txt", '"v1"')]  # asked with our copy's validator
    captures = store.captures(canonicalize(url).file)
    assert [c.record_type for c in captures] == ["response", "revisit"]
    entry = store.get(canonicalize(url))
    assert entry is not None and entry.status == 200
    with entry.open_body() as f:
        assert f.read() == b"ask every time\n"
    # --force asks for the whole resource, without validators
    site.conditional.clear()
    summary = await crawl(cache, [url], force=True)
    assert summary.results[url].status == 200 and site.conditional == []


async def test_a_cached_server_error_is_fetched_again_without_force(
    tmp_path: Path, site: Site
) -> None:
    cache = tmp_path / "cache"
    first = await crawl(cache, [site.url("/broken.html")])
    assert outcomes(first, site) == {"/broken.html": X}
    second = await crawl(cache, [site.url("/broken.html")])
    assert outcomes(second, site) == {"/broken.html": X}
    assert second.results[site.url("/broken.html")].problem == "HTTP 500 Internal Server Error"
    assert site.take_hits() == ["/broken.html", "/broken.html"]
    assert len(Store(cache).captures(canonicalize(site.url("/broken.html")).file)) == 2


async def test_a_queued_url_is_fetched_even_if_fresh(tmp_path: Path, site: Site) -> None:
    """The queue is what the user asked for (a reload while offline, /refresh/ offline): it
    is fetched, never dropped as fresh."""
    cache = tmp_path / "cache"
    page = canonicalize(site.url("/frame2.html"))
    await crawl(cache, [page.file])
    assert len(Store(cache).captures(page.file)) == 1
    async with open_services(Config(cache=cache)) as services:
        services.queue.add(QueuedRequest(page.file, page.file))
        summary = await fetch_queue(services)
        assert outcomes(summary, site) == {"/frame2.html": F}
        assert len(services.queue) == 0
    assert len(Store(cache).captures(page.file)) == 2
    assert site.take_hits() == ["/frame2.html", "/frame2.html"]


async def test_fetch_queue_refuses_offline(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    page = canonicalize(site.url("/frame2.html"))
    async with open_services(Config(cache=cache), mode=Mode.OFFLINE) as services:
        services.queue.add(QueuedRequest(page.file, page.file))
        summary = await fetch_queue(services)
        assert summary.results == {} and summary.counts()["total"] == 0
        assert len(services.queue) == 1
    assert site.take_hits() == []


async def test_max_urls_caps_a_run(tmp_path: Path, site: Site) -> None:
    summary = await crawl(tmp_path / "cache", [site.url("/")], depth=2, requisites=True, max_urls=5)
    assert len([r for r in summary.results.values() if not r.url.endswith("/robots.txt")]) == 5
    assert summary.capped > 0


async def test_outgoing_queue(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    store = Store(cache)
    async with open_services(Config(cache=cache), store=store) as server:
        page = canonicalize(site.url("/a.html"))
        form = canonicalize(site.url("/form"))
        post_key = request_key(form.file, "POST", "application/x-www-form-urlencoded", b"a=1")
        server.queue.add(QueuedRequest(page.file, page.file, headers=(("Accept", "*/*"),)))
        server.queue.add(
            QueuedRequest(
                form.file,
                post_key,
                "POST",
                (("Content-Type", "application/x-www-form-urlencoded"),),
                b"a=1",
            )
        )
        (cache / "outgoing" / "junk.json").write_text("{not json")
        summary = await Prefetcher(server, FetchOptions(requisites=True)).run(queue=True)
        got = outcomes(summary, site)
        assert got.pop(str(cache / "outgoing" / "junk.json")) == X  # named, not fatal
        assert got == {
            "/a.html": F,
            "/robots.txt": F,
            "/img/a.png": F,
            "/form": F,
        }
        assert [r for _, r in server.queue.entries() if not isinstance(r, ValueError)] == []
        posted = store.lookup(form, post_key, "POST", b"a=1")
        assert posted is not None
        with posted.open_body() as f:
            assert f.read() == b"posted a=1"


async def test_the_proxys_own_pages_are_never_fetched(tmp_path: Path, site: Site) -> None:
    """A listed URL on the proxy's own address fails (the proxy would answer with a command
    page, recorded as if it were a site); links and requisites to it are left alone.  Here
    the proxy "listens" where the site's other host is."""
    config = Config(cache=tmp_path / "cache", listen_host="127.0.0.2", listen_port=site.other_port)
    own = f"{site.other}/offhost.html"
    summary = await crawl(
        tmp_path / "cache", [own, site.url("/")], config=config, requisites=True, scope="any"
    )
    results = summary.results
    assert results[own].outcome is Outcome.FAILED
    assert results[own].problem == "one of this proxy's own pages: not fetched"
    assert f"{site.other}/img/cdn.png" not in results  # a requisite on the proxy's address
    assert results[site.url("/")].outcome is Outcome.FETCHED
    assert not [h for h in site.take_hits() if h.startswith("other:")]


async def test_unreachable_host_fails_cleanly(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    summary = await crawl(tmp_path / "cache", [f"http://127.0.0.1:{port}/", "not a url::"])
    assert len(summary.failed) == 2
    reasons = " ".join(r.problem or "" for r in summary.failed)
    assert "refused" in reasons


async def test_progress_ends_with_nothing_queued(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    progress = Progress(None)
    async with open_services(Config(cache=cache)) as services:
        options = FetchOptions(depth=2, requisites=True)
        summary = await Prefetcher(services, options, progress).run([site.url("/")])
    c = progress.counts
    assert (c.queued, c.active) == (0, 0)
    assert (c.fetched, c.failed, c.robots, c.done) == (24, 2, 1, len(summary.results))
    assert c.bytes == summary.bytes == sum(r.size for r in summary.results.values()) > 0


async def test_a_failing_robots_txt_stops_the_crawl_and_says_why(
    tmp_path: Path, site: Site
) -> None:
    cache = tmp_path / "cache"
    async with open_services(Config(cache=cache), resolver=MapResolver(site.port)) as services:
        summary = await Prefetcher(services, FetchOptions(depth=1)).run(["http://broken.example/"])
    assert {r.url: r.outcome for r in summary.results.values()} == {
        "http://broken.example/": Outcome.FETCHED,
        "http://broken.example/robots.txt": Outcome.FETCHED,  # an answer, not a failure
        "http://broken.example/about/": Outcome.FAILED,
    }
    about = summary.results["http://broken.example/about/"]
    assert about.problem == "robots.txt answered 503: the server is failing"


async def test_delay_spaces_the_requests_to_a_host(tmp_path: Path, site: Site) -> None:
    summary = await crawl(
        tmp_path / "cache", [site.url("/iframe.html")], requisites=True, delay=0.3
    )
    assert len(summary.results) == 3  # the page, robots.txt, the image
    times = sorted(site.times)
    assert len(times) == 3
    # the delay spaces the starts of the requests; their arrivals here can be nearer by how
    # much later one request took to arrive than the next (a loaded machine: tens of ms), so
    # half the delay is the bound (without a delay they come within a few milliseconds)
    assert all(b - a >= 0.15 for a, b in zip(times, times[1:], strict=False))


def test_two_writers_at_once_leave_a_sound_cache(tmp_path: Path, site: Site) -> None:
    """``wwwproxy fetch`` twice at once (or beside ``wwwproxy serve``) on one cache: the
    flocks on the WARC files and the journal keep every record whole and indexed."""
    cache = tmp_path / "cache"
    # both runs are held at these until both have asked: the writes overlap for certain
    site.gates.update({"/": 2, "/img/logo.png": 2, "/css/base.css": 2, "/deep/c.html": 2})
    cmd = [
        sys.executable,
        "-m",
        "wwwproxy.cli",
        "fetch",
        "--cache",
        str(cache),
        "--force",
        "--depth",
        "2",
        "--requisites",
        "--concurrency",
        "8",
        "--per-host",
        "8",
        site.url("/"),
    ]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err.decode()  # the 404 and the loop
        assert b"24 fetched" in err, err.decode()
    store = Store(cache)
    assert store.check_index() == []
    files = list(store.warc_files())
    assert len(files) == len([v for v in FULL.values() if v in (F, X)])
    for path in files:
        problems: list[object] = []
        records = list(read_records(path, problems))
        assert problems == [], path
        assert sum(r.rec_type in ("response", "revisit") for r in records) == 2, path
    for key, outcome in FULL.items():
        if outcome in (F, X) and not key.startswith("other:"):
            url = site.url(key)
            assert len(store.captures(canonicalize(url).file)) == 2, url


@pytest.mark.parametrize("keep", [None, 16], ids=["kept", "too-large-to-keep"])
async def test_links_come_from_the_response_just_recorded_not_read_again(
    tmp_path: Path, site: Site, monkeypatch: pytest.MonkeyPatch, keep: int | None
) -> None:
    """The engine hands back what it recorded (a gzip-encoded page among them); a body
    larger than KEEP_BODY is read from the archive instead: the same URLs either way."""
    from wwwproxy.fetch import prefetch

    if keep is not None:
        monkeypatch.setattr(prefetch, "KEEP_BODY", keep)
    read_back: list[str] = []
    real_readable = prefetch.Prefetcher._readable

    def readable(self, url, entry):  # type: ignore[no-untyped-def]
        found = real_readable(self, url, entry)
        if found is not entry:  # the recorded answer, read again from the archive
            read_back.append(url.file)
        return found

    monkeypatch.setattr(prefetch.Prefetcher, "_readable", readable)
    summary = await crawl(tmp_path / "cache", [site.url("/")], depth=2, requisites=True)
    assert outcomes(summary, site) == FULL
    if keep is None:
        assert read_back == []
    else:  # every page and style sheet whose links were followed
        assert site.url("/a.html") in read_back and site.url("/css/site.css") in read_back


async def test_listed_and_queued_urls_are_sent_as_written(tmp_path: Path) -> None:
    """A listed URL and a queued request reach the origin as written (``%3A`` stays), and
    are stored under their canonical URL; links and redirects go by canonical URLs."""
    targets: list[str] = []

    async def echo(request: web.Request) -> web.Response:
        targets.append(request.raw_path)
        return web.Response(text=request.raw_path, content_type="text/plain")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # noqa: SLF001
    listed, queued = "/w/index.php?title=Special%3ASearch&search=a+b", "/q?x=%3A%7e"
    cache = tmp_path / "cache"
    try:
        async with open_services(Config(cache=cache)) as services:
            entry = canonicalize(base + queued)
            services.queue.add(QueuedRequest(entry.file, entry.file, target=queued))
            summary = await Prefetcher(services, FetchOptions()).run([base + listed], queue=True)
            assert {r.outcome for r in summary.results.values()} == {Outcome.FETCHED}
            assert sorted(targets) == sorted([listed, queued])
            for path in (listed, queued):
                copy = services.store.get(canonicalize(base + path))
                assert copy is not None
                with copy.open_body() as f:
                    assert f.read() == path.encode()
    finally:
        await runner.cleanup()


async def test_a_page_with_more_links_than_max_links_per_page_leads_to_that_many(
    tmp_path: Path, site: Site
) -> None:
    """The home page's first 7 links are its 6 requisites and a.html: the only hyperlink
    followed; its 9 other references are counted, shown, and named in the summary."""
    config = Config(cache=tmp_path / "cache", max_links_per_page=7)
    stream = io.StringIO()
    async with open_services(config) as services:
        progress = Progress(stream, tty=False)
        summary = await Prefetcher(services, FetchOptions(depth=1), progress).run([site.url("/")])
    assert outcomes(summary, site) == {"/": F, "/robots.txt": F, "/a.html": F}
    assert summary.links_left_out == {site.url("/"): 9}
    line = f"links   {site.url('/')}: 9 references past max_links_per_page (7) unread\n"
    assert line in stream.getvalue()
    assert format_summary(summary).splitlines()[1:] == [
        "9 link references not read on 1 page with more links than max_links_per_page:",
        f"  {site.url('/')}: 9",
    ]
