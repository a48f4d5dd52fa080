"""``/refresh/``: fetch again now, with links and requisites, or queue when offline."""

from __future__ import annotations

import asyncio

from wwwproxy.commands.refresh import GROUPS, select_links
from wwwproxy.fetch.links import Link
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
    caps = proxy.server.store.captures(origin.url("/changing"))
    assert len(caps) == 2
    entry = proxy.server.store.get(canonicalize(origin.url("/changing")))
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
    # the page, its image, its style sheet and the sheet's background, and the two links
    for path in ("/", "/img.png", "/style.css", "/bg.png", "/a.html", "/b.html"):
        assert origin.hits[path] == 1, path
    assert origin.hits["/app.js"] == 0  # scripts were not asked for
    assert job["fetched"] == 6


async def test_refresh_scripts_only_no_links(client, origin):
    status, data = await client.post_api("/refresh/", {"url": origin.url("/"), "req": "scripts"})
    assert status == 200
    await wait_jobs(client)
    assert origin.hits["/app.js"] == 1 and origin.hits["/img.png"] == 0
    assert origin.hits["/a.html"] == 0


async def test_offline_refresh_queues_the_page_and_its_requisites(client, proxy, origin, fetch):
    await fetch(origin.url("/"))
    proxy.server.state.mode = Mode.OFFLINE
    status, text, _ = await client.post("/refresh/", [("url", origin.url("/")), ("req", "all")])
    assert status == 200 and "Offline: queued" in text
    queued = {r.url for r in proxy.server.queue.requests()}
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


def test_select_links_by_group_and_scope():
    links = [
        Link("http://h.example/a.png", "img", True),
        Link("http://h.example/s.css", "css", True),
        Link("http://h.example/next", "a", False),
        Link("http://other.example/b.png", "img", True),
        Link("http://h.example/a.png", "srcset", True),
    ]
    req, follow = select_links(links, GROUPS["images"], True, "http://h.example/", "host")
    assert req == ["http://h.example/a.png"] and follow == ["http://h.example/next"]
    req, follow = select_links(links, GROUPS["images"], False, "http://h.example/", "any")
    assert req == ["http://h.example/a.png", "http://other.example/b.png"] and follow == []
