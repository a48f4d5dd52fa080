"""The URL filters end to end: a real origin, the real proxy, real WARC files and queue.

dont_get is answered at once and the origin never sees it (on both fronts, over CONNECT, in
the prefetcher); dont_cache and local_net are fetched but leave no record; dont_queue misses
are not queued; a changed blocklist is picked up by a reload; the access log shows blocks."""

from __future__ import annotations

import dataclasses
import logging

import aiohttp

from wwwproxy.app import open_services
from wwwproxy.config import Config, parse_config
from wwwproxy.fetch.prefetch import Prefetcher
from wwwproxy.fetch.tasks import FetchOptions, Outcome
from wwwproxy.http.filters import EMPTY_GIF

from .conftest import TIMEOUT, networks

IMAGE_ACCEPT = {"Accept": "image/avif,image/webp,*/*;q=0.8"}


def _here(origin) -> str:  # noqa: ANN001 (the conftest's Origin)
    return f"127.0.0.1:{origin.port}"


async def test_dont_get_answers_at_once_and_never_asks_the_origin(make_proxy, origin):
    here = _here(origin)
    proxy = await make_proxy(dont_get=(f"{here}/image.png", f"{here}/ads/*", "*/lib.js"))
    image = await proxy.get(origin.url("/image.png"), headers=IMAGE_ACCEPT)
    assert image.status == 200 and image.body == EMPTY_GIF
    assert image.header("Content-Type") == "image/gif"
    assert image.header("X-Cache") == "BLOCKED"
    script = await proxy.get(origin.url("/lib.js"))
    assert script.status == 200 and script.body == b""
    assert script.header("Content-Type").startswith("text/javascript")
    page = await proxy.get(origin.url("/ads/<b>x</b>.html"))
    assert page.status == 200 and page.header("Content-Type").startswith("text/html")
    assert f"{here}/ads/*" in page.text and "dont_get" in page.text
    assert "<b>x</b>" not in page.text  # everything shown is escaped
    assert origin.hits == {}  # the origin saw none of them
    assert proxy.records(origin.url("/image.png")) == []
    # the page next to them is fetched as ever
    assert (await proxy.get(origin.url("/page.html"))).body == origin.HTML
    lines = proxy.access_lines()
    blocked = [line for line in lines if "/image.png" in line]
    assert len(blocked) == 1 and '" 200 ' in blocked[0] and blocked[0].endswith("BLOCKED")
    assert [line for line in lines if "/page.html" in line][0].endswith("MISS")


async def test_dont_get_status_and_offline(make_proxy, origin):
    proxy = await make_proxy("offline", dont_get=(f"{_here(origin)}/x/*",), dont_get_status=404)
    reply = await proxy.get(origin.url("/x/pixel.gif"))
    assert reply.status == 404 and reply.body == EMPTY_GIF
    page = await proxy.get(origin.url("/x/page"))
    assert page.status == 404 and "Not fetched" in page.text
    assert proxy.outgoing() == []  # offline, a blocked URL is not queued either
    assert origin.hits == {}


async def test_a_cached_copy_of_a_blocked_url_is_never_served(make_proxy, origin):
    """Recorded before the filter: neither front answers it from the cache (or memory)."""
    proxy = await make_proxy(request_changed=3600)
    url = origin.url("/page.html")
    assert (await proxy.get(url)).header("X-Cache") == "MISS"
    await proxy.recorded(url)
    assert (await proxy.get(url)).header("X-Cache") == "HIT"  # the fast front's memory hit
    services = proxy.running.services
    services.reload(dataclasses.replace(services.config, dont_get=(f"{_here(origin)}/page.*",)))
    for _ in range(2):
        reply = await proxy.get(url)
        assert reply.header("X-Cache") == "BLOCKED" and reply.body != origin.HTML
    assert origin.hits["/page.html"] == 1


async def test_dont_cache_is_fetched_but_never_recorded_nor_served(make_proxy, origin):
    here = _here(origin)
    proxy = await make_proxy(request_changed=3600)
    url = origin.url("/counted")
    first = await proxy.get(url)
    await proxy.recorded(url)
    services = proxy.running.services
    services.reload(dataclasses.replace(services.config, dont_cache=(f"{here}/counted",)))
    # a fresh copy is in the cache, but a dont_cache URL is asked for every time
    second, third = await proxy.get(url), await proxy.get(url)
    assert origin.hits["/counted"] == 3
    assert second.header("X-Cache") == third.header("X-Cache") == "MISS"
    assert second.body != first.body and third.body != second.body
    assert len(proxy.records(url)) == 2  # only what was recorded before the filter
    other = origin.url("/page.html")
    services.reload(dataclasses.replace(services.config, dont_cache=(f"{here}/page.html",)))
    assert (await proxy.get(other)).body == origin.HTML
    assert proxy.records(other) == []
    # offline, a dont_cache miss is not queued: fetching it would keep nothing to serve
    await proxy.control(mode="offline")
    reply = await proxy.get(other)
    assert reply.status == 503 and "not queued" in reply.text and f"{here}/page.html" in reply.text
    assert proxy.outgoing() == []
    assert origin.hits["/page.html"] == 1


async def test_local_net_is_fetched_directly_offline_too_and_never_recorded(make_proxy, origin):
    proxy = await make_proxy("offline", local_net=("127.0.0.1",))
    for _ in range(2):
        reply = await proxy.get(origin.url("/page.html"))
        assert reply.status == 200 and reply.body == origin.HTML
        assert reply.header("X-Cache") == "MISS"
    assert origin.hits["/page.html"] == 2
    assert proxy.records(origin.url("/page.html")) == []
    assert proxy.outgoing() == []
    assert list(proxy.cache.rglob("*.warc.gz")) == []


async def test_dont_queue_misses_are_not_queued_offline(make_proxy, origin):
    here = _here(origin)
    proxy = await make_proxy("offline", dont_queue=(f"{here}/big/*",))
    reply = await proxy.get(origin.url("/big/file.iso"))
    assert reply.status == 503 and "not queued" in reply.text
    assert f"{here}/big/*" in reply.text
    assert proxy.outgoing() == []
    queued = await proxy.get(origin.url("/small.html"))
    assert queued.status == 503 and "queued" in queued.text.lower()
    assert len(proxy.outgoing()) == 1 and "/small.html" in proxy.outgoing()[0].read_text()
    assert origin.hits == {}


async def test_a_changed_blocklist_is_read_again_on_reload(make_proxy, origin, tmp_path, caplog):
    blocklist = tmp_path / "hosts.txt"
    blocklist.write_text("# ads\n0.0.0.0 ads.example\nnot a hosts line\n")
    with caplog.at_level(logging.WARNING, logger="wwwproxy.filters"):
        proxy = await make_proxy(blocklist=(blocklist,))
    assert any(f"{blocklist}:3:" in r.getMessage() for r in caplog.records)
    blocked = await proxy.get("http://ads.example/banner.gif")
    assert blocked.header("X-Cache") == "BLOCKED" and blocked.body == EMPTY_GIF
    assert (await proxy.get(origin.url("/page.html"))).body == origin.HTML
    # the file changes; the reload (SIGHUP, /config/) reads it again
    blocklist.write_text("||127.0.0.1^\n0.0.0.0 ads.example\n")
    services = proxy.running.services
    services.reload(dataclasses.replace(services.config))
    reply = await proxy.get(origin.url("/page.html"))
    assert reply.header("X-Cache") == "BLOCKED"
    assert origin.hits["/page.html"] == 1
    # a blocklist that cannot be read is refused and changes nothing
    blocklist.unlink()
    try:
        services.reload(dataclasses.replace(services.config))
    except ValueError as exc:
        assert "hosts.txt" in str(exc)
    else:
        raise AssertionError("a missing blocklist was taken")
    assert (await proxy.get(origin.url("/page.html"))).header("X-Cache") == "BLOCKED"


async def test_connect_to_a_blocked_host_is_refused(make_proxy, origin):
    proxy = await make_proxy(dont_get=("*.ads.example", "https://pay.example:8443"))
    answer = await proxy.raw(b"CONNECT x.ads.example:443 HTTP/1.1\r\nHost: x.ads.example\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"X-Cache: BLOCKED" in answer
    assert b"*.ads.example" in answer
    answer = await proxy.raw(b"CONNECT pay.example:8443 HTTP/1.1\r\nHost: pay.example\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403")
    # another host is not refused by the filters (its port is: 8443 is not a CONNECT port)
    answer = await proxy.raw(b"CONNECT pay.example:9443 HTTP/1.1\r\nHost: pay.example\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"BLOCKED" not in answer
    assert "CONNECT x.ads.example:443" in "\n".join(proxy.access_lines())


async def test_dont_get_path_inside_an_intercepted_tunnel(make_proxy, tls_origin):
    from .test_intercept import _trust_after_first, fetch

    proxy = await make_proxy(
        https_intercept=("*",),
        upstream_ca=tls_origin.ca_pem,
        connect_ports=(tls_origin.port,),
        dont_get=(f"https://localhost:{tls_origin.port}/ads/*",),
    )
    context = _trust_after_first(proxy)
    status, headers, body = await fetch(proxy, tls_origin.url("/ads/x.png"), context)
    assert (status, headers["X-Cache"], body) == (200, "BLOCKED", EMPTY_GIF)
    status, headers, body = await fetch(proxy, tls_origin.url("/page"), context)
    assert status == 200 and body == b"secret GET /page "
    assert tls_origin.hits == {"/page": 1}


async def test_prefetch_skips_filtered_urls(origin, tmp_path):
    here = _here(origin)
    config = Config(
        cache=tmp_path / "cache",
        dont_get=(f"{here}/image.png",),
        dont_cache=(f"{here}/counted",),
    )
    async with open_services(config) as services:
        options = FetchOptions(requisites=True, robots=False)
        summary = await Prefetcher(services, options).run(
            [origin.url("/page.html"), origin.url("/counted")]
        )
    results = {r.url: r for r in summary.results.values()}
    assert results[origin.url("/page.html")].outcome is Outcome.FETCHED
    assert results[origin.url("/counted")].outcome is Outcome.FAILED
    assert "dont_cache" in (results[origin.url("/counted")].problem or "")
    # the page's image (a requisite) was not fetched: dont_get
    assert origin.hits["/image.png"] == 0 and origin.hits["/counted"] == 0
    assert origin.hits["/page.html"] == 1


async def test_allowed_clients_by_host_name(make_proxy, origin):
    named = parse_config("allowed_clients: [localhost]\n").allowed_clients
    assert any(net.network_address.is_loopback for net in named)
    proxy = await make_proxy(allowed_clients=named)
    assert (await proxy.get(origin.url("/page.html"))).status == 200
    elsewhere = await make_proxy(
        allowed_clients=networks("10.0.0.5/32"), cache=proxy.cache.parent / "c2"
    )
    assert (await elsewhere.get(origin.url("/page.html"))).status == 403


async def test_local_net_connect_is_tunnelled_offline_too(make_proxy, tls_origin):
    from .test_connect import https_get

    proxy = await make_proxy("offline", connect_ports=(tls_origin.port,), local_net=("localhost",))
    assert await https_get(proxy, tls_origin) == (200, b"secret GET /secret ")
    # another host is still refused offline
    raw = await proxy.raw(
        f"CONNECT 127.0.0.1:{tls_origin.port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    )
    assert raw.startswith(b"HTTP/1.1 503") and b"offline" in raw
    assert tls_origin.hits == {"/secret": 1}


async def test_local_net_websocket_offline(make_proxy, origin):
    proxy = await make_proxy("offline", local_net=(_here(origin),))
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.ws_connect(
            origin.url("/ws").replace("http://", "ws://"), proxy=proxy.url, protocols=("chat",)
        ) as ws:
            await ws.send_str("hello")
            assert (await ws.receive(timeout=5)).data == "echo hello"
    assert origin.hits["/ws"] == 1
    # not on the local network: refused offline, as ever
    other = await make_proxy("offline", cache=proxy.cache.parent / "other")
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        try:
            await session.ws_connect(origin.url("/ws").replace("http://", "ws://"), proxy=other.url)
        except aiohttp.WSServerHandshakeError as exc:
            assert exc.status == 503
        else:
            raise AssertionError("an offline WebSocket was relayed")
    assert origin.hits["/ws"] == 1
