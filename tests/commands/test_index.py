"""``/index/`` (hosts) and ``/index/<proto>/<host>/`` (pages: sorting, paging), over HTTP."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

from wwwproxy.commands.index import host_pages, list_hosts, split_hostport
from wwwproxy.url import canonicalize


def record(
    store, url: str, body: bytes, when: datetime, ctype: str = "text/html", status: int = 200
) -> None:
    """Put one capture straight into the store (no origin needed)."""
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"", date=when)
    rec.write(body)
    rec.finish(status, "OK", [("Content-Type", ctype), ("Content-Length", str(len(body)))])


def served_statuses(store) -> None:
    """Two pages whose newest capture is not the one served: a 200 then a 304 (the answer to a
    browser's own conditional request), and a 206 (a browser's range request) then a 404;
    and a 200 then a 404 (keep-the-good-copy)."""
    t = datetime(2024, 3, 1, tzinfo=UTC)
    record(store, "http://st.example/ok", b"page", t)
    record(store, "http://st.example/ok", b"", t + timedelta(hours=1), status=304)
    record(store, "http://st.example/part", b"pa", t, ctype="image/png", status=206)
    record(store, "http://st.example/part", b"gone", t + timedelta(hours=1), "text/plain", 404)
    record(store, "http://st.example/was", b"good", t)
    record(store, "http://st.example/was", b"gone", t + timedelta(hours=1), "text/plain", 404)


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


def test_last_fetch_is_the_newest_capture_time(tmp_path):
    """A host's last fetch is the time of its newest capture (as recorded), whatever the
    files' modification times say."""
    from wwwproxy.archive.store import Store

    store = Store(tmp_path / "cache")
    when = datetime(2024, 1, 1, tzinfo=UTC)
    record(store, "http://t.example/1", b"1", when + timedelta(hours=2))
    record(store, "http://t.example/2", b"2", when)
    old = time.time() - 86400 * 10
    for path in store.list_host("http", "t.example"):
        os.utime(path, (old, old))
    (host,) = list_hosts(store.root)
    assert host.last == when + timedelta(hours=2)


def test_split_hostport():
    assert split_hostport("example.com") == ("example.com", None)
    assert split_hostport("example.com:8080") == ("example.com", "8080")
    assert split_hostport("[::1]:8080") == ("[::1]", "8080")
    assert split_hostport("[::1]") == ("[::1]", None)


async def test_a_pages_status_is_that_of_the_capture_served(client, proxy):
    served_statuses(proxy.services.store)
    status, data = await client.get_json("/index/http/st.example/")
    assert status == 200
    pages = {p["url"].rsplit("/", 1)[1]: p for p in data["pages"]}
    assert pages["ok"]["status"] == 200 and pages["ok"]["mime"] == "text/html"
    assert pages["ok"]["captures"] == 2
    assert pages["part"]["status"] == 404 and pages["part"]["mime"] == "text/plain"
    assert pages["was"]["status"] == 200  # the good copy is kept and served
    # the time is still that of the newest capture (when it was last fetched)
    assert pages["ok"]["time"].startswith("2024-03-01T01:00")
    # beside the served copy's status, the newest capture's when it differs
    assert pages["ok"]["newest_status"] == 304 and pages["was"]["newest_status"] == 404
    assert pages["part"]["newest_status"] is None
    _, text, _ = await client.get("/index/http/st.example/")
    assert "<td>304" not in text and "<td>206" not in text
    assert text.count("<td>200 ") == 2 and text.count("<td>404</td>") == 1
    assert text.count("(newest 304)") == 1 and text.count("(newest 404)") == 1


def test_without_keep_good_copy_the_newest_servable_capture_counts(tmp_path):
    from wwwproxy.archive.store import Store

    store = Store(tmp_path / "cache")
    served_statuses(store)
    record(store, "http://st.example/only304", b"", datetime(2024, 1, 1, tzinfo=UTC), status=304)
    keep = {p.key.rsplit("/", 1)[1]: p.status for p in host_pages(store, "http", "st.example")}
    assert keep == {"ok": 200, "part": 404, "was": 200, "only304": None}
    newest = {
        p.key.rsplit("/", 1)[1]: p.status
        for p in host_pages(store, "http", "st.example", keep_good=False)
    }
    assert newest == {"ok": 200, "part": 404, "was": 404, "only304": None}


async def test_the_size_shown_is_the_served_payload(client, proxy):
    """With payload lengths in the index (the store writes them) the Size column is the
    served copy's payload, not its cache file's size (all captures, gzip, WARC headers); a
    revisit's is its response's; with the good copy kept it is the good copy's.  Sorting by
    size follows it."""
    store = proxy.services.store
    t = datetime(2024, 5, 1, tzinfo=UTC)
    record(store, "http://pl.example/big", b"x" * 5000, t)
    record(store, "http://pl.example/big", b"x" * 5000, t + timedelta(hours=1))  # a revisit
    record(store, "http://pl.example/small", b"tiny", t)
    record(store, "http://pl.example/kept", b"g" * 300, t)
    record(store, "http://pl.example/kept", b"e" * 9000, t + timedelta(hours=1), status=500)
    # the store writes each response's payload length (ple) into its index line
    before = {p.key.rsplit("/", 1)[1]: p for p in host_pages(store, "http", "pl.example")}
    assert (before["big"].payload, before["small"].payload) == (5000, 4)
    status, data = await client.get_json("/index/http/pl.example/?sort=size&order=asc")
    assert status == 200
    pages = {p["url"].rsplit("/", 1)[1]: p for p in data["pages"]}
    assert pages["big"]["payload"] == 5000 and pages["big"]["captures"] == 2
    assert pages["small"]["payload"] == 4
    assert pages["kept"]["payload"] == 300 and pages["kept"]["status"] == 200
    for name in ("big", "small", "kept"):
        file_size = store.path_for(canonicalize(f"http://pl.example/{name}")).stat().st_size
        assert pages[name]["size"] == file_size != pages[name]["payload"]
    assert [p["url"].rsplit("/", 1)[1] for p in data["pages"]] == ["small", "kept", "big"]
    _, text, _ = await client.get("/index/http/pl.example/")
    assert ">4.9 KiB<" in text and ">4 B<" in text and ">300 B<" in text
