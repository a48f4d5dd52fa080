"""The dispatcher: routing, HTML/JSON, and the argument rules of wwwoffle-url-handling-2.9
(``&`` and ``;`` alike, decoded exactly once, a URL argument then canonicalized), over real
HTTP both directly and through the proxy."""

from __future__ import annotations

from urllib.parse import quote

from wwwproxy.commands import ROUTES, route


async def test_every_page_answers_html_and_json(client, origin, fetch):
    await fetch(origin.url("/a.html"))
    u = quote(origin.url("/a.html"), safe="")
    for path in [
        "/",
        "/index/",
        f"/index/http/127.0.0.1:{origin.port}/",
        f"/history/?url={u}",
        f"/cache/?url={u}",
        "/control/",
        "/outgoing/",
        f"/refresh/?url={u}",
        f"/delete/?url={u}",
        "/search/?q=page",
        "/config/",
    ]:
        status, text, headers = await client.get(path)
        assert status == 200, (path, text[:300])
        if path.startswith("/cache/"):
            assert "page a text" in text
            continue
        assert headers["Content-Type"].startswith("text/html"), path
        assert "<h1>" in text and "script-src" not in headers["Content-Security-Policy"]
        sep = "&" if "?" in path else "?"
        status, data = await client.get_json(path + sep + "format=json")
        assert status == 200 and isinstance(data, dict), path


async def test_json_by_accept_header_and_by_format_argument(client):
    _, by_accept = await client.get_json("/")
    status, text, headers = await client.get("/?format=json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert by_accept["mode"] == "online" and '"mode": "online"' in text


async def test_unknown_page_is_404_with_the_path_escaped(client):
    status, text, _ = await client.get("/no/such/<script>alert(1)</script>")
    assert status == 404
    assert "<script>alert(1)" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


async def test_paths_without_trailing_slash_and_favicon(client):
    status, text, _ = await client.get("/control")
    assert status == 200 and "<h1>Control</h1>" in text
    status, _, _ = await client.get("/favicon.ico")
    assert status == 204


async def test_other_methods_are_refused(client):
    async with client.session.put(client.base + "/control/", **client._kw({})) as resp:
        assert resp.status == 405
        assert "POST" in resp.headers["Allow"]


async def test_semicolon_and_ampersand_are_interchangeable(client, origin, fetch):
    await fetch(origin.url("/a.html"))
    u = quote(origin.url("/a.html"), safe="")
    _, amp = await client.get_json(f"/history/?format=json&url={u}")
    status, semi = await client.get_json(f"/history/?format=json;url={u}")
    assert status == 200, (amp, semi)
    assert semi == amp and len(semi["captures"]) == 1


async def test_url_argument_is_decoded_exactly_once(client, origin, fetch):
    # the page's own query holds an encoded '&' (data, not a separator)
    target = origin.url("/a.html?q=a%26b")
    await fetch(target)
    status, data = await client.get_json("/history/?url=" + quote(target, safe=""))
    assert status == 200
    assert data["url"] == target  # %26 kept: decoded once, not twice
    assert len(data["captures"]) == 1
    # decoded twice it would have been another URL, which is not cached
    status, data = await client.get_json("/history/?url=" + quote(origin.url("/a.html?q=a&b")))
    assert status == 404 and data["captures"] == []


async def test_double_encoded_url_is_not_decoded_twice(client, origin, fetch):
    await fetch(origin.url("/a.html"))
    twice = quote(quote(origin.url("/a.html"), safe=""), safe="")
    status, data = await client.get_json("/history/?url=" + twice)
    # decoded once it is "http%3A%2F%2F127...": not the page's URL (and not a valid one)
    assert status == 400
    assert "http%3A%2F%2F127.0.0.1" in data["error"]


async def test_a_url_argument_is_canonicalized(client, origin, fetch):
    await fetch(origin.url("/a.html"))
    messy = f"HTTP://127.0.0.1:{origin.port}/x/../a.html#frag"
    status, data = await client.get_json("/history/?url=" + quote(messy, safe=""))
    assert status == 200 and data["url"] == origin.url("/a.html")


async def test_repeated_argument_first_one_counts(client, origin, fetch):
    await fetch(origin.url("/a.html"))
    first, second = quote(origin.url("/a.html"), safe=""), quote(origin.url("/b.html"), safe="")
    status, data = await client.get_json(f"/history/?url={first}&url={second}")
    assert status == 200 and data["url"] == origin.url("/a.html")


async def test_missing_and_empty_arguments(client):
    status, data = await client.get_json("/history/")
    assert status == 400 and "'url'" in data["error"]
    status, data = await client.get_json("/history/?url=")
    assert status == 400
    status, text, _ = await client.get("/history/")
    assert status == 200 and 'name="url"' in text  # a form asking for it
    status, data = await client.get_json("/cache/?;;&&")
    assert status == 400 and "missing" in data["error"]


async def test_plus_is_a_space_and_bad_utf8_survives(client):
    status, data = await client.get_json("/search/?q=quick+fox")
    assert status == 200 and data["query"] == "quick fox"
    status, data = await client.get_json("/search/?q=caf%E9")  # latin-1 byte, not UTF-8
    assert status == 200 and data["query"] == "caf\ufffd"


async def test_bad_numbers_are_clear_errors(client, origin, fetch):
    await fetch(origin.url("/a.html"))
    status, data = await client.get_json(f"/index/http/127.0.0.1:{origin.port}/?page=two")
    assert status == 400 and "'page'" in data["error"] and "two" in data["error"]


def test_routes_cover_the_issue_pages():
    for path in ("/", "/index/", "/history/", "/control/", "/outgoing/", "/refresh/"):
        assert path in ROUTES
    for path in ("/delete/", "/search/", "/config/", "/cache/"):
        assert route(path) is ROUTES[path]
    assert route("/index/http/example.com/") is ROUTES["/index/"]
    assert route("/search") is ROUTES["/search/"]
    assert route("/nothing/") is None


async def test_a_large_form_is_read_whole_and_a_huge_one_refused(client, proxy):
    padding = "x" * 300_000  # arrives in several chunks
    status, data = await client.post_api(
        "/control/", {"pad": padding, "mode": "offline", "format": "json"}
    )
    assert status == 200 and data["mode"] == "offline"
    status, data = await client.post_api("/control/", {"pad": "x" * 1_100_000})
    assert status == 413
