"""``/search/``: full-text search of recorded pages (kept up to date as they are recorded)."""

from __future__ import annotations

from urllib.parse import quote


async def test_pages_are_searchable_as_soon_as_recorded(client, origin, fetch, visible):
    for path in ("/", "/a.html", "/gz.html", "/latin1.html", "/img.png"):
        await fetch(origin.url(path))
    status, data = await client.get_json("/search/?q=fox")
    assert status == 200 and [r["url"] for r in data["results"]] == [origin.url("/")]
    assert data["results"][0]["title"] == "Origin home"
    assert "fox" in data["results"][0]["snippet"]
    _, data = await client.get_json("/search/?q=zebracorn")  # a gzip-encoded page
    assert [r["url"] for r in data["results"]] == [origin.url("/gz.html")]
    _, data = await client.get_json("/search/?q=" + quote("crème"))  # latin-1 page
    assert [r["title"] for r in data["results"]] == ["Café"]
    _, data = await client.get_json("/search/?q=creme")  # diacritics folded
    assert data["total"] == 1
    _, data = await client.get_json("/search/?q=img.png")  # by URL
    assert [r["url"] for r in data["results"]] == [origin.url("/img.png")]
    status, text, _ = await client.get("/search/?q=quick+fox")
    assert "<mark>fox</mark>" in text and "Origin home" in visible(text)
    assert 'value="quick fox"' in text


async def test_queries_with_syntax_characters_never_fail(client, origin, fetch):
    await fetch(origin.url("/a.html"))
    for q in ['"', "AND OR NOT", "a:b", "(", "*", "NEAR(", "page*", "'; DROP TABLE pages; --", "%"]:
        status, data = await client.get_json("/search/?q=" + quote(q))
        assert status == 200, q
    _, data = await client.get_json("/search/?q=" + quote("pag*"))
    assert data["total"] >= 1


async def test_paging_results(client, proxy):
    index = proxy.services.search
    for i in range(45):
        index.add(
            f"http://many.example/{i}", f"http://many.example/{i}", title=f"T{i}", text="common"
        )
    _, data = await client.get_json("/search/?q=common&page=3")
    assert data["total"] == 45 and len(data["results"]) == 5
    status, text, _ = await client.get("/search/?q=common&page=2")
    assert (
        'href="/search/?q=common&amp;page=3"' in text
        and 'href="/search/?q=common&amp;page=1"' in text
    )


async def test_a_word_on_more_pages_than_are_ranked_says_so(client, proxy, visible):
    from wwwproxy.archive.search.searching import RANK_CANDIDATES

    index = proxy.services.search
    with index.batch():
        for i in range(RANK_CANDIDATES + 1):
            url = f"http://many.example/{i}"
            index.add(url, url, title=f"T{i}", text="common common")
    _, data = await client.get_json("/search/?q=common")
    assert data["total"] == 1000 and data["ranked"] == RANK_CANDIDATES
    _, text, _ = await client.get("/search/?q=common")
    assert f"more than {RANK_CANDIDATES:,} results, the newest {RANK_CANDIDATES:,} ranked" in (
        visible(text)
    )
    _, data = await client.get_json("/search/?q=T7")  # a title: found and ranked as before
    assert data["ranked"] is None and data["results"][0]["url"] == "http://many.example/7"


async def test_rebuild_from_the_cache(client, proxy, origin, fetch):
    await fetch(origin.url("/a.html"))
    index = proxy.services.search
    index.remove(origin.url("/a.html"))
    _, data = await client.get_json("/search/?q=page")
    assert data["total"] == 0
    status, text, _ = await client.post("/search/", {"action": "rebuild"})
    assert status == 200 and "rebuilt: 1 page(s)" in text
    _, data = await client.get_json("/search/?q=page")
    assert data["total"] == 1


async def test_empty_query_shows_the_form(client):
    status, text, _ = await client.get("/search/")
    assert status == 200 and 'name="q"' in text and "Rebuild the search index" in text
    status, data = await client.get_json("/search/?q=" + "x" * 600)
    assert status == 400


async def test_nothing_found_says_what_is_indexed_and_offers_a_rebuild(client, proxy, visible):
    """Pages recorded before the index existed (or by hand) are only found after a rebuild:
    a search that finds nothing says how much is indexed and offers one."""
    status, text, _ = await client.get("/search/?q=nowhere")
    assert status == 200
    shown = visible(text)
    assert "Nothing in the cache matches nowhere." in shown and "0 URLs indexed" in shown
    assert 'value="rebuild"' in text and "Rebuild the search index" in shown


async def test_without_a_search_index_the_page_says_so(tmp_path, origin, visible):
    """A search database that cannot be opened: the proxy runs and records without it, the
    search page says the index is unavailable, the welcome page shows no count."""
    import aiohttp

    from wwwproxy.app import start
    from wwwproxy.archive.search import SEARCH_DB

    from .conftest import TIMEOUT, Client, browse, make_config

    config = make_config(tmp_path)
    config.cache.mkdir(parents=True)
    (config.cache / SEARCH_DB).write_bytes(b"this is not sqlite" * 100)
    running = await start(config)
    try:
        assert running.services.search is None
        async with aiohttp.ClientSession(
            cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=TIMEOUT
        ) as session:
            client = Client(running.port, "direct", session)
            status, body, _ = await browse(running, origin.url("/a.html"))
            assert status == 200 and len(running.services.store.captures(origin.url("/a.html")))
            status, data = await client.get_json("/search/?q=page")
            assert status == 503 and "search index is unavailable" in data["error"]
            status, text, _ = await client.get("/search/?q=page")
            assert status == 503 and "search index is unavailable" in visible(text)
            status, data = await client.post_api("/search/", {"action": "rebuild"})
            assert status == 503
            status, data = await client.get_json("/")
            assert status == 200 and data["pages"] == 1
            assert data["search_indexed"] is None and data["search_with_text"] is None
            _, text, _ = await client.get("/")
            assert "search index" not in visible(text)
    finally:
        await running.stop()
