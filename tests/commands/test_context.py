"""Security of the command pages: the form token against cross-site requests, the password,
allowed clients, escaping of hostile input, and no state change by GET."""

from __future__ import annotations

import base64
from urllib.parse import quote

import aiohttp

from wwwproxy.commands.context import TOKEN_COOKIE
from wwwproxy.http.policy import Mode

from .conftest import EVIL_TITLE, TIMEOUT, make_config, start_proxy, stop_proxy


async def test_token_cookie_is_strict_and_httponly(client):
    _, _, headers = await client.get("/control/")
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(TOKEN_COOKIE + "=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie


async def test_cross_site_post_without_token_is_refused(client, proxy):
    # what a hostile page's auto-submitting form sends: no token, no custom header
    status, text, _ = await client.post(
        "/control/", {"mode": "offline"}, token=False, headers={"Origin": "http://evil.example"}
    )
    assert status == 403 and "token" in text
    assert proxy.services.mode is Mode.ONLINE


async def test_post_with_a_wrong_token_is_refused(client, proxy):
    await client.token()  # the browser has a cookie, the attacker guesses the field
    status, _, _ = await client.post(
        "/control/", {"mode": "offline", "token": "x" * 43}, token=False
    )
    assert status == 403 and proxy.services.mode is Mode.ONLINE


async def test_token_of_another_session_is_refused(proxy, client):
    stolen = await client.token()
    async with aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=TIMEOUT
    ) as other:
        url = f"http://127.0.0.1:{proxy.port}/control/"
        async with other.get(url) as resp:  # its own session cookie
            assert resp.status == 200
        async with other.post(url, data={"mode": "offline", "token": stolen}) as resp:
            assert resp.status == 403
    assert proxy.services.mode is Mode.ONLINE


async def test_a_cookie_planted_by_another_port_cannot_forge_the_token(proxy):
    """Issue 12, finding 2: a page on http://127.0.0.1:18001/ sets wwwproxy_token=AAAA... (cookies
    do not keep ports apart) and submits the same value as the form's token."""
    planted = "A" * 43
    jar = aiohttp.CookieJar(unsafe=True)
    jar.update_cookies(
        {TOKEN_COOKIE: planted}, aiohttp.client.URL(f"http://127.0.0.1:{proxy.port}")
    )
    async with aiohttp.ClientSession(cookie_jar=jar, timeout=TIMEOUT) as browser:
        url = f"http://127.0.0.1:{proxy.port}/control/"
        for origin in (f"http://127.0.0.1:{proxy.port}", "http://127.0.0.1:18001"):
            async with browser.post(
                url, data={"mode": "offline", "token": planted}, headers={"Origin": origin}
            ) as resp:
                assert resp.status == 403
    assert proxy.services.mode is Mode.ONLINE


async def test_state_changes_need_the_proxy_as_origin_or_referer(client, proxy):
    token = await client.token()
    other_port = f"http://127.0.0.1:{proxy.port + 1 if proxy.port < 65535 else 1}"
    for headers in (
        {"Origin": other_port},
        {"Origin": "null"},
        {"Origin": "", "Referer": other_port},
    ):
        status, _, _ = await client.post(
            "/control/", {"mode": "offline", "token": token}, token=False, headers=headers
        )
        assert status == 403, headers
    assert proxy.services.mode is Mode.ONLINE
    # a browser that sends only a Referer of the proxy's own page is fine
    async with client.session.post(
        client.url("/control/"),
        data={"mode": "offline", "token": token},
        headers={"Referer": client.base + "/control/"},
        **client._kw({}),
    ) as resp:
        assert resp.status == 200
    assert proxy.services.mode is Mode.OFFLINE


async def test_post_with_the_page_token_works(client, proxy):
    status, text, _ = await client.post("/control/", {"mode": "offline"})
    assert status == 200 and "Mode is now offline" in text
    assert proxy.services.mode is Mode.OFFLINE


async def test_api_header_is_enough_for_programs(client, proxy):
    status, data = await client.post_api("/control/?format=json", {"mode": "autodial"})
    assert status == 200 and data["mode"] == "autodial"
    assert proxy.services.mode is Mode.AUTODIAL


async def test_get_never_changes_state(client, proxy):
    status, _, _ = await client.get("/control/?mode=offline&action=fetch")
    assert status == 200 and proxy.services.mode is Mode.ONLINE


async def test_non_form_post_is_refused(client, proxy):
    async with client.session.post(
        client.url("/control/"),
        data=b'{"mode": "offline"}',
        headers={"Content-Type": "application/json", "X-Wwwproxy-Request": "1"},
        **client._kw({}),
    ) as resp:
        assert resp.status == 415
    assert proxy.services.mode is Mode.ONLINE


async def test_password_is_needed_for_actions(tmp_path):
    running = await start_proxy(make_config(tmp_path, password="s3cret"))
    url = f"http://127.0.0.1:{running.port}/control/?format=json"
    headers = {"X-Wwwproxy-Request": "1"}
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.get(url) as resp:  # reading needs no password
                assert resp.status == 200
            async with session.post(url, data={"mode": "offline"}, headers=headers) as resp:
                assert resp.status == 401
                assert resp.headers["WWW-Authenticate"].startswith("Basic")
            wrong = base64.b64encode(b"wwwproxy:guess").decode()
            async with session.post(
                url,
                data={"mode": "offline"},
                headers={**headers, "Authorization": f"Basic {wrong}"},
            ) as resp:
                assert resp.status == 401
            assert running.services.mode is Mode.ONLINE
            good = base64.b64encode(b"anyone:s3cret").decode()
            async with session.post(
                url,
                data={"mode": "offline"},
                headers={**headers, "Authorization": f"Basic {good}"},
            ) as resp:
                assert resp.status == 200
            assert running.services.mode is Mode.OFFLINE
    finally:
        await stop_proxy(running)


async def test_pages_only_for_allowed_clients(tmp_path):
    import ipaddress

    config = make_config(tmp_path, allowed_clients=(ipaddress.ip_network("10.0.0.0/8"),))
    running = await start_proxy(config)
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.get(f"http://127.0.0.1:{running.port}/index/") as resp:
                assert resp.status == 403
                assert "Cached hosts" not in await resp.text()
    finally:
        await stop_proxy(running)


async def test_hostile_arguments_are_escaped_everywhere(client, origin, fetch):
    evil = "<script>alert(1)</script>"
    await fetch(origin.url("/a.html"))
    for path in [
        "/search/?q=" + quote(evil),
        "/history/?url=" + quote(evil),
        "/history/?url=" + quote(origin.url("/" + evil), safe=""),
        "/refresh/?url=" + quote(evil) + "&depth=" + quote(evil),
        "/delete/?url=" + quote(evil),
        f"/index/http/127.0.0.1:{origin.port}/?sort=" + quote(evil),
        "/cache/?url=" + quote(origin.url("/a.html"), safe="") + "&t=" + quote(evil),
        "/" + quote(evil),
    ]:
        status, text, _ = await client.get(path)
        assert "<script>alert(1)" not in text, path
        assert status in (200, 400, 404), path


async def test_hostile_title_and_url_from_a_page_are_escaped(client, origin, fetch, visible):
    await fetch(origin.url("/evil"))
    await fetch(origin.url("/<script>alert('url')</script>"))
    pages = [
        f"/index/http/127.0.0.1:{origin.port}/",
        "/search/?q=harmless",
        "/search/?q=script",
        "/history/?url=" + quote(origin.url("/evil"), safe=""),
    ]
    for path in pages:
        status, text, _ = await client.get(path)
        assert status == 200, path
        assert "<script>alert(" not in text, path
    _, text, _ = await client.get("/search/?q=harmless")
    assert "&lt;script&gt;alert(&#x27;title&#x27;)&lt;/script&gt; Evil &amp; co" in text
    assert EVIL_TITLE in visible(text)  # shown as text, exactly


async def test_cached_copy_is_sandboxed_and_sets_no_cookie(client, origin, fetch):
    await fetch(origin.url("/evil"))
    status, text, headers = await client.get("/cache/?url=" + quote(origin.url("/evil"), safe=""))
    assert status == 200 and "harmless words" in text
    assert headers["Content-Security-Policy"].startswith("sandbox")
    assert "allow-scripts" not in headers["Content-Security-Policy"]
    assert "allow-same-origin" not in headers["Content-Security-Policy"]
    assert "Set-Cookie" not in headers  # the page's cookie would land on the proxy's origin
    assert headers["X-Cache"] == "HIT"


async def test_a_huge_number_is_out_of_range_not_a_non_number(client):
    status, data = await client.get_json("/search/?q=x&page=99999999999999")
    assert status == 400
    assert data["error"] == "The 'page' argument must be from 1 to 1000, not 99999999999999."
    status, data = await client.get_json("/search/?q=x&page=-99999999999999")
    assert status == 400 and "from 1 to 1000" in data["error"]
