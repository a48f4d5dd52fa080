"""``/index/`` (hosts) and ``/index/<proto>/<host>/`` (pages: sorting, paging), over HTTP."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

from wwwproxy.commands.index import host_pages, list_hosts, split_hostport
from wwwproxy.url import canonicalize


def record(store, url: str, body: bytes, when: datetime, ctype: str = "text/html") -> None:
    """Put one capture straight into the store (no origin needed)."""
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"", date=when)
    rec.write(body)
    rec.finish(200, "OK", [("Content-Type", ctype), ("Content-Length", str(len(body)))])


async def test_hosts_with_page_counts_and_last_fetch(client, proxy, origin, fetch):
    for path in ("/a.html", "/b.html", "/img.png"):
        await fetch(origin.url(path))
    store = proxy.services.store
    record(store, "http://example.org/x", b"x", datetime(2020, 1, 2, tzinfo=UTC))
    status, data = await client.get_json("/index/")
    assert status == 200
    hosts = {(h["proto"], h["host"]): h for h in data["hosts"]}
    mine = hosts[("http", f"127.0.0.1:{origin.port}")]
    assert mine["pages"] == 3 and mine["size"] > 0
    last = datetime.fromisoformat(mine["last"])
    assert abs((datetime.now(UTC) - last).total_seconds()) < 60
    assert hosts[("http", "example.org")]["pages"] == 1
    assert data["total_pages"] == 4
    status, text, _ = await client.get("/index/")
    assert f'href="/index/http/127.0.0.1:{origin.port}/"' in text
    assert 'href="/index/http/example.org/"' in text


async def test_host_page_lists_each_page_with_its_links(client, origin, fetch, visible):
    await fetch(origin.url("/a.html"))
    await fetch(origin.url("/a.html"), headers={"Cache-Control": "no-cache"})  # a reload
    await fetch(origin.url("/b.html?x=1&y=2"))
    status, text, _ = await client.get(f"/index/http/127.0.0.1:{origin.port}/")
    assert status == 200
    a = origin.url("/a.html")
    enc = "http%3A%2F%2F127.0.0.1%3A" + str(origin.port) + "%2Fa.html"
    for page in ("/cache/", "/history/", "/refresh/", "/delete/"):
        assert f'href="{page}?url={enc}"' in text
    assert f'href="{a}"' in text
    # the & of a URL is escaped in the page and encoded in the argument
    assert f"{origin.url('/b.html?x=1&amp;y=2')}" in text
    assert "%2Fb.html%3Fx%3D1%26y%3D2" in text
    assert "history (2)" in visible(text)


async def test_sorting_by_name_time_and_size(client, proxy):
    store = proxy.services.store
    base = datetime(2024, 5, 1, tzinfo=UTC)
    record(store, "http://sort.example/b", b"bb" * 500, base + timedelta(days=2))
    record(store, "http://sort.example/a", b"a", base + timedelta(days=1))
    record(store, "http://sort.example/c", b"c" * 5000, base)
    path = "/index/http/sort.example/?format=json"

    async def order(args: str) -> list[str]:
        status, data = await client.get_json(path + args)
        assert status == 200
        return [p["url"].rsplit("/", 1)[1] for p in data["pages"]]

    assert await order("") == ["a", "b", "c"]
    assert await order("&sort=name&order=desc") == ["c", "b", "a"]
    assert await order("&sort=time") == ["b", "a", "c"]  # newest first
    assert await order("&sort=time&order=asc") == ["c", "a", "b"]
    assert await order("&sort=size") == ["c", "b", "a"]
    status, data = await client.get_json(path + "&sort=colour")
    assert status == 400 and "sort" in data["error"]


async def test_paging_a_host_with_many_pages(client, proxy):
    store = proxy.services.store
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for i in range(45):
        record(store, f"http://many.example/p{i:03d}", b"x", when)
    status, data = await client.get_json("/index/http/many.example/?per=20&page=2")
    assert status == 200
    assert data["total"] == 45 and data["pages_total"] == 3 and data["page"] == 2
    assert [p["url"] for p in data["pages"]][0] == "http://many.example/p020"
    assert len(data["pages"]) == 20
    _, data = await client.get_json("/index/http/many.example/?per=20&page=99")
    assert data["page"] == 3 and len(data["pages"]) == 5  # past the end: the last page
    _, text, _ = await client.get("/index/http/many.example/?per=20&page=2")
    assert "page 2 of 3" in text
    assert 'href="/index/http/many.example/?sort=name&amp;order=asc&amp;per=20&amp;page=3"' in text


async def test_unknown_host_and_bad_paths(client):
    status, _ = await client.get_json("/index/http/nothing.example/")
    assert status == 404
    status, _ = await client.get_json("/index/http/")
    assert status == 404
    status, _ = await client.get_json("/index/http/a/b/")
    assert status == 404


def test_same_host_under_https_is_listed_separately(tmp_path):
    from wwwproxy.archive.store import Store

    store = Store(tmp_path / "cache")
    when = datetime(2024, 1, 1, tzinfo=UTC)
    record(store, "http://both.example/plain", b"1", when)
    record(store, "https://both.example/secure", b"2", when)
    assert [p.key for p in host_pages(store, "http", "both.example")] == [
        "http://both.example/plain"
    ]
    assert [p.key for p in host_pages(store, "https", "both.example")] == [
        "https://both.example/secure"
    ]
    hosts = list_hosts(store.root)
    assert [(h.proto, h.hostport, h.pages) for h in hosts] == [
        ("http", "both.example", 1),
        ("https", "both.example", 1),
    ]


def test_last_fetch_is_the_newest_file_time(tmp_path):
    from wwwproxy.archive.store import Store

    store = Store(tmp_path / "cache")
    when = datetime(2024, 1, 1, tzinfo=UTC)
    record(store, "http://t.example/1", b"1", when)
    record(store, "http://t.example/2", b"2", when)
    old = time.time() - 86400 * 10
    for path in store.list_host("http", "t.example"):
        os.utime(path, (old, old))
    (host,) = list_hosts(store.root)
    assert host.last is not None and abs(host.last.timestamp() - old) < 1


def test_split_hostport():
    assert split_hostport("example.com") == ("example.com", None)
    assert split_hostport("example.com:8080") == ("example.com", "8080")
    assert split_hostport("[::1]:8080") == ("[::1]", "8080")
    assert split_hostport("[::1]") == ("[::1]", None)
