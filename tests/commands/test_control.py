"""``/control/``: modes, fetching the queue and purging, by the page's own forms."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from datetime import UTC, datetime

from wwwproxy.http.policy import Mode
from wwwproxy.url import canonicalize

from .test_index import record


async def queue_one(proxy, origin, fetch, path: str = "/a.html") -> str:
    """Offline, browse ``path``: it is queued, not fetched."""
    proxy.services.state.mode = Mode.OFFLINE
    status, _, _ = await fetch(origin.url(path))
    assert status == 503 and origin.hits[path] == 0
    assert len(proxy.services.queue) == 1
    return origin.url(path)


async def eventually(check, seconds: float = 10.0) -> bool:
    """Poll ``check()`` until it is true (at most ``seconds``)."""
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


async def test_mode_buttons_switch_the_mode(client, proxy, visible):
    status, text, _ = await client.get("/control/")
    for mode in ("online", "offline", "autodial"):
        assert f'name="mode" value="{mode}"' in text
    for mode in (Mode.OFFLINE, Mode.AUTODIAL, Mode.ONLINE):
        status, text, _ = await client.post("/control/", {"mode": mode.value})
        assert status == 200 and proxy.services.mode is mode
        assert f"Mode is now {mode.value}." in visible(text)


async def test_json_status_for_the_cli(client, proxy):
    status, data = await client.get_json("/control/?format=json")
    assert status == 200 and data["mode"] == "online" and data["queued"] == 0
    status, data = await client.post_api(
        "/control/?format=json",
        "mode=offline",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 200 and data["mode"] == "offline" and "message" in data


async def test_the_wwwproxy_cli_switches_and_reads_the_mode(proxy, tmp_path, capsys):
    import asyncio

    from wwwproxy.cli import main

    where = ["--proxy", f"127.0.0.1:{proxy.port}", "-c", str(tmp_path / "none.yaml")]
    (tmp_path / "none.yaml").write_text("")
    assert await asyncio.to_thread(main, ["offline", *where]) == 0
    assert proxy.services.mode is Mode.OFFLINE
    assert await asyncio.to_thread(main, ["status", *where]) == 0
    assert "mode: offline" in capsys.readouterr().out


async def test_bad_mode_and_action(client, proxy):
    status, data = await client.post_api("/control/", {"mode": "sideways"})
    assert status == 400 and "sideways" in data["error"]
    status, data = await client.post_api("/control/", {"action": "explode"})
    assert status == 400 and "explode" in data["error"]
    status, data = await client.post_api("/control/", {})
    assert status == 400
    assert proxy.services.mode is Mode.ONLINE


async def test_reload_rereads_the_configuration_as_serve_set_it_up(client, proxy):
    """``action=reload`` calls what ``wwwproxy serve`` registered (its SIGHUP reload; the
    whole path runs in tests/cli/test_running_proxy.py); a proxy not started by serve has
    nothing to re-read."""
    status, data = await client.post_api("/control/", {"action": "reload"})
    assert status == 409 and "nothing to reload" in data["error"]
    answers = iter([None, "not reloaded, the old configuration stays: bad"])
    proxy.services.reread_config = lambda: next(answers)
    status, data = await client.post_api("/control/", {"action": "reload"})
    assert status == 200 and data["reloaded"] is True
    assert data["message"].startswith("Configuration reloaded from ")
    status, data = await client.post_api("/control/", {"action": "reload"})
    assert status == 409 and data["error"] == (
        "Configuration not reloaded, the old configuration stays: bad"
    )


async def test_fetch_the_queue_now(client, proxy, origin, fetch):
    url = await queue_one(proxy, origin, fetch)
    _, data = await client.get_json("/control/")
    assert data["queued"] == 1
    proxy.services.state.mode = Mode.ONLINE  # not by the page: nothing is fetched yet
    assert origin.hits["/a.html"] == 0
    status, text, _ = await client.post("/control/", {"action": "fetch"})
    assert status == 200 and "Fetched 1 queued request(s), 0 failed." in text
    assert origin.hits["/a.html"] == 1
    assert len(proxy.services.store.captures(url)) == 1
    assert len(proxy.services.queue) == 0


async def test_fetch_the_queue_while_offline_fetches_nothing(client, proxy, origin, fetch, visible):
    url = await queue_one(proxy, origin, fetch)
    status, text, _ = await client.post("/control/", {"action": "fetch"})
    assert status == 200
    assert "will be fetched when next online" in visible(text)
    status, data = await client.post_api("/control/", {"action": "fetch"})
    assert status == 200 and data["fetching"] is False and data["queued"] == 1
    assert "next online" in data["message"]
    await asyncio.sleep(0.2)  # nothing started in the background either
    assert origin.hits["/a.html"] == 0
    assert len(proxy.services.queue) == 1 and proxy.services.store.captures(url) == []
    assert proxy.services.mode is Mode.OFFLINE


async def test_switching_online_fetches_the_queue(client, proxy, origin, fetch, visible):
    assert proxy.services.config.fetch_on_online
    url = await queue_one(proxy, origin, fetch)
    status, data = await client.post_api("/control/", {"mode": "online"})
    assert status == 200 and data["mode"] == "online" and data["fetching"] is True
    assert "in the background" in data["message"]
    store = proxy.services.store
    assert await eventually(lambda: len(store.captures(url)) == 1), "the queue was not fetched"
    assert await eventually(lambda: len(proxy.services.queue) == 0)
    assert origin.hits["/a.html"] == 1
    # the HTML page says so too
    await queue_one(proxy, origin, fetch, "/b.html")
    status, text, _ = await client.post("/control/", {"mode": "online"})
    assert "Fetching the 1 queued request(s) in the background." in visible(text)
    assert await eventually(lambda: len(store.captures(origin.url("/b.html"))) == 1)


async def test_switching_online_without_fetch_on_online_fetches_nothing(
    client, proxy, origin, fetch
):
    services = proxy.services
    services.reload(dataclasses.replace(services.config, fetch_on_online=False))
    url = await queue_one(proxy, origin, fetch)
    status, data = await client.post_api("/control/", {"mode": "online"})
    assert status == 200 and data["mode"] == "online" and not data.get("fetching")
    await asyncio.sleep(0.5)
    assert origin.hits["/a.html"] == 0
    assert len(services.queue) == 1 and services.store.captures(url) == []


async def test_switching_between_other_modes_fetches_nothing(client, proxy, origin, fetch):
    await queue_one(proxy, origin, fetch)
    for mode in ("autodial", "offline"):
        status, data = await client.post_api("/control/", {"mode": mode})
        assert status == 200 and not data.get("fetching")
    await asyncio.sleep(0.3)
    assert origin.hits["/a.html"] == 0 and len(proxy.services.queue) == 1


async def test_purge_old_pages_of_one_host_or_all(client, proxy):
    store = proxy.services.store
    search = proxy.services.search
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for url in ("http://p.example/old", "http://p.example/new", "http://q.example/old"):
        record(store, url, b"<title>t</title>persimmon", when)
    assert search.search("persimmon").total == 3
    old = time.time() - 40 * 86400
    for path in [
        store.path_for(canonicalize(u)) for u in ("http://p.example/old", "http://q.example/old")
    ]:
        os.utime(path, (old, old))
    status, data = await client.post_api(
        "/control/", {"action": "purge", "days": "30", "host": "http://p.example/"}
    )
    assert status == 200 and data["purged"] == 1
    assert store.captures("http://p.example/old") == []
    assert len(store.captures("http://p.example/new")) == 1
    assert len(store.captures("http://q.example/old")) == 1  # another host
    # the store told the search index: the page is no longer found
    assert sorted(h.url for h in search.search("persimmon").hits) == [
        "http://p.example/new",
        "http://q.example/old",
    ]
    status, text, _ = await client.post("/control/", {"action": "purge", "days": "30"})
    assert status == 200 and "Purged 1 page(s) of all hosts" in text
    assert store.captures("http://q.example/old") == []
    assert [h.url for h in search.search("persimmon").hits] == ["http://p.example/new"]
    status, data = await client.post_api("/control/", {"action": "purge"})
    assert status == 400 and "days" in data["error"]
    assert len(store.captures("http://p.example/new")) == 1


async def test_purge_a_whole_host_removes_its_folder(client, proxy):
    store = proxy.services.store
    when = datetime(2024, 1, 1, tzinfo=UTC)
    record(store, "http://gone.example/1", b"1", when)
    record(store, "http://gone.example/2", b"2", when)
    record(store, "http://kept.example/1", b"1", when)
    status, data = await client.post_api(
        "/control/", {"action": "purge", "host": "http://gone.example/"}
    )
    assert status == 200 and data["purged"] == 2
    assert not (store.root / "http" / "gone.example").exists()
    assert [r.uri for r in store.list_prefix("")] == ["http://kept.example/1"]
    assert store.check_index() == []
