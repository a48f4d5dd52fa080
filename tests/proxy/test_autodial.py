"""Autodial end to end, and switching modes while the proxy runs."""

from __future__ import annotations

import aiohttp


async def test_autodial_serves_cached_fetches_uncached_queues_unreachable(make_proxy, origin):
    proxy = await make_proxy("autodial")
    page, image = origin.url("/page.html"), origin.url("/image.png")

    first = await proxy.get(page)  # not cached: fetched
    assert first.status == 200 and first.header("X-Cache") == "MISS"
    assert origin.hits["/page.html"] == 1
    await proxy.recorded(page)

    second = await proxy.get(page)  # cached: served, origin not asked
    assert second.status == 200 and second.header("X-Cache") == "HIT"
    assert second.body == first.body
    assert origin.hits["/page.html"] == 1

    await origin.stop()
    third = await proxy.get(image)  # not cached and unreachable: queued
    assert third.status == 503
    assert image in third.text
    assert "could not be reached" in third.text
    assert len(proxy.outgoing()) == 1
    assert (await proxy.get(page)).status == 200  # cached ones still served


async def test_mode_switch_at_run_time(proxy, origin):
    url = origin.url("/counted")
    assert proxy.mode.value == "online"
    assert (await proxy.get(url)).body == b"hit 1"
    await proxy.recorded(url)
    status = await proxy.control(mode="offline")
    assert status["mode"] == "offline" and proxy.mode.value == "offline"
    assert (await proxy.get(url)).body == b"hit 1"
    assert origin.hits["/counted"] == 1
    await proxy.control(mode="online")
    assert (await proxy.get(url)).body == b"hit 2"


async def test_control_refuses_bad_mode_and_missing_header(proxy):
    async with proxy.session() as s:
        async with s.post(
            f"{proxy.url}/control/", data={"mode": "sideways"}, headers={"X-Wwwproxy-Request": "1"}
        ) as resp:
            assert resp.status == 400
        async with s.post(f"{proxy.url}/control/", data={"mode": "offline"}) as resp:
            assert resp.status == 403  # no API header, no form token: a cross-site POST
    assert proxy.mode.value == "online"


async def test_status_json_through_proxy_form(proxy):
    """The command page reached as a proxied absolute URL is the same page."""
    async with proxy.session() as s:
        async with s.get(
            f"http://127.0.0.1:{proxy.port}/control/?format=json", proxy=proxy.url
        ) as resp:
            assert resp.status == 200
            data = await resp.json()
    assert data["mode"] == "online"
    assert data["queued"] == 0


async def test_proxy_stops_promptly_with_idle_keepalive_clients(make_proxy, origin):
    proxy = await make_proxy()
    async with aiohttp.ClientSession() as s:
        async with s.get(origin.url("/page.html"), proxy=proxy.url) as resp:
            await resp.read()
        # the client's connection to the proxy stays open (keep-alive) while it stops
        await proxy.running.stop()
    assert origin.hits["/page.html"] == 1
