"""``/outgoing/``: the queue, cancelling one or all."""

from __future__ import annotations

from wwwproxy.http.policy import Mode


async def test_queued_requests_are_listed_and_cancelled(client, proxy, origin, fetch, visible):
    proxy.services.state.mode = Mode.OFFLINE
    for path in ("/a.html", "/b.html", "/<x>"):
        status, _, _ = await fetch(origin.url(path))
        assert status == 503
    status, data = await client.get_json("/outgoing/")
    assert status == 200 and data["queued"] == 3
    urls = {r["url"] for r in data["requests"]}
    assert origin.url("/a.html") in urls
    status, text, _ = await client.get("/outgoing/")
    assert origin.url("/a.html") in visible(text) and "<x>" not in text
    key = next(r["key"] for r in data["requests"] if r["url"] == origin.url("/a.html"))
    status, text, _ = await client.post("/outgoing/", {"cancel": key})
    assert status == 200 and "Cancelled." in text
    assert len(proxy.services.queue) == 2
    status, text, _ = await client.post("/outgoing/", {"cancel": key})
    assert "was not queued" in text
    status, data = await client.post_api("/outgoing/", {"all": "1"})
    assert status == 200 and data["cancelled"] == 2 and data["queued"] == 0
    assert len(proxy.services.queue) == 0


async def test_unreadable_queue_file_is_shown_and_cancellable(client, proxy):
    directory = proxy.services.queue.directory
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "broken.json").write_text("{not json")
    status, data = await client.get_json("/outgoing/")
    assert status == 200 and "broken.json" in data["requests"][0]["error"]
    status, data = await client.post_api("/outgoing/", {"all": "1"})
    assert data["cancelled"] == 1 and not (directory / "broken.json").exists()


async def test_cancel_needs_an_argument(client):
    status, data = await client.post_api("/outgoing/", {})
    assert status == 400


async def test_queue_times_say_their_time_zone(client, proxy, origin, fetch):
    proxy.services.state.mode = Mode.OFFLINE
    await fetch(origin.url("/a.html"))
    _, text, _ = await client.get("/outgoing/")
    assert "<th>Queued (UTC)</th>" in text
