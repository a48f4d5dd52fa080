"""``/monitor/``: what it refuses, and how it is reached (the add/fetch/remove round trip is in
test_monitor_page.py)."""

from __future__ import annotations

from wwwproxy.fetch.monitor import load, monitor_path
from wwwproxy.http.policy import Mode


async def test_the_page_is_in_the_navigation_and_on_the_welcome_page(client):
    for path in ("/", "/index/", "/monitor/"):
        status, text, _ = await client.get(path)
        assert status == 200 and '<a href="/monitor/"' in text, path
    status, text, _ = await client.get("/monitor/")
    assert "No URL is monitored." in text and 'name="every"' in text


async def test_the_proxys_own_pages_are_not_monitored(client, proxy):
    path = monitor_path(proxy.services.store.root)
    for url in ("/index/", f"http://127.0.0.1:{proxy.port}/control/"):
        status, data = await client.post_api("/monitor/", {"url": url, "every": "1"})
        assert status == 400 and "own pages" in data["error"], url
    assert not path.exists() or load(path) == []


async def test_fetch_now_needs_a_monitored_url_and_the_proxy_online(client, proxy, origin):
    url = origin.url("/a.html")
    status, data = await client.post_api("/monitor/", {"fetch": url})
    assert status == 404 and "not monitored" in data["error"]
    await client.post_api("/monitor/", {"url": url, "every": "1"})
    proxy.services.state.mode = Mode.OFFLINE
    status, data = await client.post_api("/monitor/", {"fetch": url})
    assert status == 409 and "offline" in data["error"]
    assert origin.hits["/a.html"] == 0  # offline means no network at all
    status, text, _ = await client.get("/monitor/")
    assert "The proxy is offline" in text


async def test_a_broken_schedule_file_is_shown_not_a_crash(client, proxy):
    path = monitor_path(proxy.services.store.root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("- url: http://example.com/\n  every: soon\n")
    status, data = await client.get_json("/monitor/")
    assert status == 200 and data["monitored"] == []
    assert "monitor.yaml: line 1" in data["error"]
