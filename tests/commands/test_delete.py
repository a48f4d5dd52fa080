"""``/delete/``: GET asks, POST removes a URL (or a host) from the cache, index and search."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

from wwwproxy.url import canonicalize

from .test_index import record


async def test_get_asks_and_deletes_nothing(client, proxy, origin, fetch):
    await fetch(origin.url("/a.html"))
    u = quote(origin.url("/a.html"), safe="")
    status, text, _ = await client.get(f"/delete/?url={u}")
    assert status == 200 and "1 capture(s)" in text and 'method="post"' in text
    assert len(proxy.services.store.captures(origin.url("/a.html"))) == 1


async def test_post_deletes_the_url_from_cache_index_and_search(client, proxy, origin, fetch):
    store = proxy.services.store
    await fetch(origin.url("/a.html"))
    await fetch(origin.url("/b.html"))
    search = proxy.services.search
    assert search.search("page").total == 2
    status, text, _ = await client.post("/delete/", {"url": origin.url("/a.html")})
    assert status == 200 and "Deleted 1 page(s)" in text
    assert store.captures(origin.url("/a.html")) == []
    assert not store.path_for(canonicalize(origin.url("/a.html"))).exists()
    assert [h.url for h in search.search("page").hits] == [origin.url("/b.html")]
    status, data = await client.get_json("/history/?url=" + quote(origin.url("/a.html"), safe=""))
    assert status == 404
    status, data = await client.post_api("/delete/", {"url": origin.url("/a.html")})
    assert status == 200 and data["deleted"] == 0
    assert store.check_index() == []


async def test_all_deletes_the_whole_host(client, proxy):
    store = proxy.services.store
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for i in range(3):
        record(store, f"http://host.example/{i}", b"x", when)
    record(store, "http://other.example/", b"x", when)
    status, text, _ = await client.get("/delete/?url=http%3A%2F%2Fhost.example%2F&all=1")
    assert "every page of http://host.example/" in text and "3 page(s)" in text
    status, data = await client.post_api(
        "/delete/", {"url": "http://host.example/anything", "all": "1"}
    )
    assert status == 200 and data["deleted"] == 3
    assert [r.uri for r in store.list_prefix("")] == ["http://other.example/"]
    status, _ = await client.get_json("/index/http/host.example/")
    assert status == 404


async def test_delete_needs_a_url_and_a_token(client, proxy, origin, fetch):
    await fetch(origin.url("/a.html"))
    status, data = await client.post_api("/delete/", {})
    assert status == 400
    status, _, _ = await client.post("/delete/", {"url": origin.url("/a.html")}, token=False)
    assert status == 403
    assert len(proxy.services.store.captures(origin.url("/a.html"))) == 1
    status, text, _ = await client.get("/delete/")
    assert status == 200 and 'name="url"' in text
