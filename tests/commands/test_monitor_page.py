"""``/monitor/``: add, list, fetch now and remove monitored URLs."""

from __future__ import annotations

from wwwproxy.fetch.monitor import load, monitor_path


async def test_add_list_fetch_and_remove(client, proxy, origin, visible):
    path = monitor_path(proxy.services.store.root)
    url = origin.url("/a.html")
    status, text, _ = await client.post("/monitor/", {"url": url, "every": "6"})
    assert status == 200 and f"Monitoring {url}" in visible(text)
    assert [e.url for e in load(path)] == [url]
    status, data = await client.get_json("/monitor/")
    (row,) = data["monitored"]
    assert row["url"] == url and row["schedule"] == "every 6 hours" and row["due"] is True
    status, text, _ = await client.post("/monitor/", {"fetch": url})
    assert status == 200 and f"Fetched {url}" in visible(text)
    assert proxy.services.store.captures(url)
    (entry,) = load(path)
    assert entry.last is not None and entry.error is None
    status, data = await client.post_api("/monitor/", {"remove": url})
    assert status == 200 and data["monitored"] == []
    assert load(path) == []


async def test_weekday_schedule_from_checkboxes(client, proxy, origin):
    url = origin.url("/b.html")
    fields = [("url", url), ("weekdays", "mon"), ("weekdays", "thu"), ("hours", "6,18")]
    status, data = await client.post_api("/monitor/", fields)
    assert status == 200
    (row,) = data["monitored"]
    assert row["weekdays"] == ["mon", "thu"] and row["hours"] == [6, 18]


async def test_bad_schedule_and_missing_token_are_refused(client, proxy, origin):
    path = monitor_path(proxy.services.store.root)
    status, text, _ = await client.post("/monitor/", {"url": origin.url("/a.html")})
    assert status == 400 and "schedule" in text
    status, _, _ = await client.post(
        "/monitor/", {"url": origin.url("/a.html"), "every": "1"}, token=False
    )
    assert status == 403
    assert not path.exists() or load(path) == []


async def test_hostile_url_is_escaped(client, proxy, origin):
    url = origin.url("/x?<script>alert(1)</script>")
    status, _ = await client.post_api("/monitor/", {"url": url, "every": "1"})
    assert status == 200
    status, text, _ = await client.get("/monitor/")
    assert "<script>alert(1)" not in text
