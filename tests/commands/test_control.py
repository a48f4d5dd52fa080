"""``/control/``: modes, fetching the queue and purging, by the page's own forms."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from wwwproxy.commands.delete import purge
from wwwproxy.http.policy import Mode
from wwwproxy.url import canonicalize

from .test_index import record


async def test_mode_buttons_switch_the_mode(client, proxy, visible):
    status, text, _ = await client.get("/control/")
    for mode in ("online", "offline", "autodial"):
        assert f'name="mode" value="{mode}"' in text
    for mode in (Mode.OFFLINE, Mode.AUTODIAL, Mode.ONLINE):
        status, text, _ = await client.post("/control/", {"mode": mode.value})
        assert status == 200 and proxy.server.state.mode is mode
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
    assert proxy.server.state.mode is Mode.OFFLINE
    assert await asyncio.to_thread(main, ["status", *where]) == 0
    assert "mode: offline" in capsys.readouterr().out


async def test_bad_mode_and_action(client, proxy):
    status, data = await client.post_api("/control/", {"mode": "sideways"})
    assert status == 400 and "sideways" in data["error"]
    status, data = await client.post_api("/control/", {"action": "explode"})
    assert status == 400 and "explode" in data["error"]
    status, data = await client.post_api("/control/", {})
    assert status == 400
    assert proxy.server.state.mode is Mode.ONLINE


async def test_fetch_the_queue_now(client, proxy, origin, fetch):
    proxy.server.state.mode = Mode.OFFLINE
    status, _, _ = await fetch(origin.url("/a.html"))
    assert status == 503 and origin.hits["/a.html"] == 0
    _, data = await client.get_json("/control/")
    assert data["queued"] == 1
    proxy.server.state.mode = Mode.ONLINE
    status, text, _ = await client.post("/control/", {"action": "fetch"})
    assert status == 200 and "Fetched 1 queued request(s), 0 failed." in text
    assert origin.hits["/a.html"] == 1
    assert len(proxy.server.store.captures(origin.url("/a.html"))) == 1


async def test_purge_old_pages_of_one_host_or_all(client, proxy):
    store = proxy.server.store
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for url in ("http://p.example/old", "http://p.example/new", "http://q.example/old"):
        record(store, url, b"x", when)
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
    status, text, _ = await client.post("/control/", {"action": "purge", "days": "30"})
    assert status == 200 and "Purged 1 page(s) of all hosts" in text
    assert store.captures("http://q.example/old") == []
    status, data = await client.post_api("/control/", {"action": "purge"})
    assert status == 400 and "days" in data["error"]
    assert len(store.captures("http://p.example/new")) == 1


def test_purge_a_whole_host_removes_its_folder(tmp_path):
    from wwwproxy.archive.store import Store

    store = Store(tmp_path / "cache")
    when = datetime(2024, 1, 1, tzinfo=UTC)
    record(store, "http://gone.example/1", b"1", when)
    record(store, "http://gone.example/2", b"2", when)
    record(store, "http://kept.example/1", b"1", when)
    assert purge(store, None, canonicalize("http://gone.example/")) == 2
    assert not (store.root / "http" / "gone.example").exists()
    assert [r.uri for r in store.list_prefix("")] == ["http://kept.example/1"]
    assert store.check_index() == []
