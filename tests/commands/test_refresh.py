"""``/refresh/``: fetch again now, with links and requisites, or queue when offline."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from aiohttp import web

from wwwproxy.cli import main as cli_main
from wwwproxy.commands.refresh import GROUPS, MAX_URLS, RefreshJob
from wwwproxy.fetch.links import Link
from wwwproxy.fetch.tasks import Role, Task, next_tasks
from wwwproxy.http.policy import Mode
from wwwproxy.url import canonicalize


async def wait_jobs(client) -> dict:
    for _ in range(500):
        _, data = await client.get_json("/refresh/")
        if all(j["done"] for j in data["jobs"]):
            return data
        await asyncio.sleep(0.02)
    raise AssertionError("refresh job did not finish")


async def test_get_shows_the_form_with_the_url(client, origin):
    status, text, _ = await client.get("/refresh/?url=" + origin.url("/a.html"))
    assert status == 200 and f'value="{origin.url("/a.html")}"' in text
    for group in GROUPS:
        assert f'name="req" value="{group}"' in text


async def test_plain_refresh_fetches_again_now(client, proxy, origin, fetch):
    await fetch(origin.url("/changing"))
    status, text, _ = await client.post("/refresh/", {"url": origin.url("/changing")})
    assert status == 200 and "status 200" in text
    assert origin.hits["/changing"] == 2
    caps = proxy.services.store.captures(origin.url("/changing"))
    assert len(caps) == 2
    entry = proxy.services.store.get(canonicalize(origin.url("/changing")))
    with entry.open_body() as f:
        assert b"version 2" in f.read()


async def test_refresh_with_requisites_and_depth(client, proxy, origin):
    status, data = await client.post_api(
        "/refresh/",
        [("url", origin.url("/")), ("depth", "1"), ("req", "images"), ("req", "stylesheets")],
    )
    assert status == 200 and data["job"]["requisites"] == ["images", "stylesheets"]
    data = await wait_jobs(client)
    job = data["jobs"][0]
    assert job["failed"] == 0, job["errors"]
    # the page, its image, its style sheet and the sheet's background, and the two links;
    # and robots.txt, read before following links (the origin has none: a 404 allows all)
    for path in ("/", "/img.png", "/style.css", "/bg.png", "/a.html", "/b.html", "/robots.txt"):
        assert origin.hits[path] == 1, path
    assert origin.hits["/app.js"] == 0  # scripts were not asked for
    assert job["fetched"] == 7 and job["robots"] == 0
    assert job["done"] and job in data["jobs"]


async def test_refresh_scripts_only_no_links(client, origin):
    status, data = await client.post_api("/refresh/", {"url": origin.url("/"), "req": "scripts"})
    assert status == 200
    await wait_jobs(client)
    assert origin.hits["/app.js"] == 1 and origin.hits["/img.png"] == 0
    assert origin.hits["/a.html"] == 0


async def test_offline_refresh_queues_the_page_and_its_requisites(client, proxy, origin, fetch):
    await fetch(origin.url("/"))
    proxy.services.state.mode = Mode.OFFLINE
    status, text, _ = await client.post("/refresh/", [("url", origin.url("/")), ("req", "all")])
    assert status == 200 and "Offline: queued" in text
    queued = {r.url for r in proxy.services.queue.requests()}
    assert {origin.url("/"), origin.url("/img.png"), origin.url("/app.js")} <= queued
    assert origin.url("/a.html") not in queued  # depth 0: no links
    assert origin.hits["/"] == 1  # nothing fetched


async def test_bad_refresh_arguments(client, proxy):
    for args, word in [
        ({"url": "http://x.example/", "depth": "9"}, "depth"),
        ({"url": "http://x.example/", "req": "videos"}, "videos"),
        ({"url": "http://x.example/", "scope": "planet"}, "scope"),
        ({"url": f"http://127.0.0.1:{proxy.port}/index/"}, "own"),
        ({}, "url"),
    ]:
        status, data = await client.post_api("/refresh/", args)
        assert status == 400 and word in data["error"], args


async def test_unreachable_server_is_reported(client, proxy):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    status, data = await client.post_api("/refresh/", {"url": f"http://127.0.0.1:{port}/"})
    assert status == 200 and data["job"]["failed"] == 1 and data["job"]["status"] is None
    assert "Could not fetch" in data["message"]


def test_a_jobs_options_select_links_by_group_and_scope():
    """The refresh form's choices as the one crawler's options: the chosen requisite groups
    (from any host, as for ``wwwproxy fetch``), hyperlinks on the host or anywhere."""
    links = [
        Link("http://h.example/a.png", "img", True),
        Link("http://h.example/s.css", "css", True),
        Link("http://h.example/next", "a", False),
        Link("http://other.example/b.png", "img", True),
        Link("http://h.example/a.png", "srcset", True),
        Link("http://other.example/page", "a", False),
        Link("http://h.example/feed", "link", False),  # not a link a refresh follows
    ]
    start = "http://h.example/"
    seed = Task(start, 0, Role.SEED, start)

    def select(job: RefreshJob) -> tuple[list[str], list[str]]:
        tasks = next_tasks(seed, links, job.options())
        requisites = [t.url for t in tasks if t.role is Role.REQUISITE]
        follows = [t.url for t in tasks if t.role is Role.LINK]
        return list(dict.fromkeys(requisites)), follows

    req, follow = select(RefreshJob(start, 1, ("images",), "host", False))
    assert req == ["http://h.example/a.png", "http://other.example/b.png"]
    assert follow == ["http://h.example/next"]
    req, follow = select(RefreshJob(start, 0, ("images",), "any", False))
    assert req == ["http://h.example/a.png", "http://other.example/b.png"] and follow == []
    req, follow = select(RefreshJob(start, 1, (), "any", False))
    assert req == [] and follow == ["http://h.example/next", "http://other.example/page"]
    options = RefreshJob(start, 3, tuple(GROUPS), "host", False).options()
    assert options.max_urls == MAX_URLS and options.robots and options.refresh_seeds


@pytest.fixture
async def guarded():
    """An origin with a robots.txt: /private/ is not for crawlers."""
    hits: Counter[str] = Counter()

    async def handle(request: web.Request) -> web.Response:
        hits[request.path] += 1
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        if request.path == "/":
            body = '<a href="/public.html">public</a> <a href="/private/x.html">private</a>'
            return web.Response(text=body, content_type="text/html")
        return web.Response(text=f"page {request.path}", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    yield f"http://127.0.0.1:{port}", hits
    await runner.cleanup()


async def test_refresh_honours_robots_txt_for_followed_links(client, guarded):
    base, hits = guarded
    status, data = await client.post_api("/refresh/", {"url": base + "/", "depth": "1"})
    assert status == 200
    job = (await wait_jobs(client))["jobs"][0]
    assert hits["/"] == 1 and hits["/robots.txt"] == 1 and hits["/public.html"] == 1
    assert hits["/private/x.html"] == 0
    assert job["robots"] == 1 and job["failed"] == 0
    assert "disallowed by robots.txt" in (await client.get("/refresh/"))[1]


async def test_offline_refresh_queues_and_never_fetches(client, proxy, origin):
    proxy.services.state.mode = Mode.OFFLINE
    url = origin.url("/b.html")
    status, data = await client.post_api("/refresh/", {"url": url, "depth": "2", "req": "all"})
    assert status == 200 and data["job"]["offline"] and data["job"]["queued"] == 1
    await wait_jobs(client)
    assert [r.url for r in proxy.services.queue.requests()] == [url]
    assert sum(origin.hits.values()) == 0  # offline: no network traffic at all
    assert proxy.services.store.get(canonicalize(url)) is None


async def test_offline_refresh_then_wwwproxy_fetch_fetches_it_again(
    client, proxy, origin, fetch, tmp_path
):
    """A page refreshed while offline is fetched by the next ``wwwproxy fetch``, although its
    copy is young: the queue is what the user asked for, not a cache lookup."""
    url = origin.url("/changing")
    await fetch(url)
    store = proxy.services.store
    assert len(store.captures(url)) == 1
    proxy.services.state.mode = Mode.OFFLINE
    status, text, _ = await client.post("/refresh/", {"url": url})
    assert status == 200 and "Offline: queued 1" in text
    assert origin.hits["/changing"] == 1
    conf = tmp_path / "fetch.yaml"
    conf.write_text(f"cache: {store.root}\n")
    code = await asyncio.to_thread(cli_main, ["fetch", "-c", str(conf)])
    assert code == 0
    assert origin.hits["/changing"] == 2
    assert len(store.captures(url)) == 2
    assert len(proxy.services.queue) == 0
    entry = store.get(canonicalize(url))
    with entry.open_body() as f:
        assert b"version 2" in f.read()
