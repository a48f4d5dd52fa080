"""What waits in the offline queue, end to end: a browser's or system's background request is
answered at once and never queued (a connectivity check as "online, no portal"), a non-GET
request is queued only when ``queue_methods`` says so, and a queued request whose server cannot
be reached ``queue_failures`` times leaves the queue and is listed once on ``/index/lastout/``."""

from __future__ import annotations

import socket
from typing import Any

import pytest

FORM = "application/x-www-form-urlencoded"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def command_json(proxy: Any, path: str) -> Any:
    async with proxy.session() as s:
        async with s.get(f"{proxy.url}{path}", headers={"Accept": "application/json"}) as resp:
            assert resp.status == 200
            return await resp.json(content_type=None)


async def command_text(proxy: Any, path: str) -> str:
    async with proxy.session() as s:
        async with s.get(f"{proxy.url}{path}") as resp:
            assert resp.status == 200
            return await resp.text()


#: a check's URL -> the status and body the client expects when there is no portal
CHECKS = [
    ("http://detectportal.firefox.com/success.txt?ipv4", 200, b"success\n"),
    ("http://connectivitycheck.gstatic.com/generate_204", 204, b""),
    (
        "http://captive.apple.com/hotspot-detect.html",
        200,
        b"<HTML><HEAD><TITLE>Success</TITLE></HEAD><BODY>Success</BODY></HTML>",
    ),
    ("http://network-test.debian.org/nm", 200, b"NetworkManager is online\n"),
]


@pytest.mark.parametrize(("url", "status", "body"), CHECKS)
async def test_offline_a_connectivity_check_is_answered_as_online(make_proxy, url, status, body):
    proxy = await make_proxy("offline")
    reply = await proxy.get(url)
    assert (reply.status, reply.body) == (status, body)
    assert reply.header("X-Cache") == "BACKGROUND"
    assert reply.header("Cache-Control") == "no-store"
    assert proxy.outgoing() == []


async def test_offline_a_background_request_is_refused_not_queued(make_proxy):
    proxy = await make_proxy("offline")
    url = "http://clients2.google.com/time/1/current?cup2key=9:abc&cup2hreq=e3b0c442"
    reply = await proxy.get(url)
    assert reply.status == 503
    assert reply.header("X-Cache") == "BACKGROUND"
    assert "not queued" in reply.text and "queue_background" in reply.text
    update = await proxy.get(
        "http://update.googleapis.com/service/update2/json?cup2key=1",
        method="POST",
        data=b'{"request": {}}',
        headers={"Content-Type": "application/json"},
    )
    assert update.status == 503
    assert proxy.outgoing() == []
    assert (await proxy.control())["queued"] == 0


async def test_queue_background_queues_them_like_any_other(make_proxy):
    proxy = await make_proxy("offline", queue_background=True)
    reply = await proxy.get("http://clients2.google.com/time/1/current")
    assert reply.status == 503 and "queued" in reply.text
    check = await proxy.get("http://connectivitycheck.gstatic.com/generate_204")
    assert check.status == 503
    assert len(proxy.outgoing()) == 2


async def test_dont_queue_still_adds_patterns(make_proxy, origin):
    proxy = await make_proxy("offline", dont_queue=("*/*.iso",))
    reply = await proxy.get(origin.url("/big.iso"))
    assert reply.status == 503 and "*/*.iso" in reply.text
    assert proxy.outgoing() == []


async def test_offline_a_post_is_not_queued_by_default(make_proxy, origin):
    proxy = await make_proxy("offline")
    url = origin.url("/form")
    reply = await proxy.get(url, method="POST", data=b"name=ann", headers={"Content-Type": FORM})
    assert reply.status == 503
    assert "not queued" in reply.text and "queue_methods" in reply.text
    assert proxy.outgoing() == []
    assert (await proxy.get(origin.url("/page.html"))).status == 503
    assert len(proxy.outgoing()) == 1  # a GET is
    assert sum(origin.hits.values()) == 0


async def test_offline_a_post_is_queued_when_configured(make_proxy, origin):
    proxy = await make_proxy("offline", queue_methods=("GET", "HEAD", "POST"))
    url = origin.url("/form")
    reply = await proxy.get(url, method="POST", data=b"name=ann", headers={"Content-Type": FORM})
    assert reply.status == 503 and "fetched when next online" in reply.text
    assert len(proxy.outgoing()) == 1
    status = await proxy.control(mode="online", action="fetch")
    assert "Fetched 1" in status["message"]
    assert origin.last("/form").method == "POST" and origin.last("/form").body == b"name=ann"


async def test_a_request_failing_n_times_leaves_the_queue_listed_once(make_proxy, origin):
    proxy = await make_proxy("offline", queue_failures=2)
    dead = f"http://127.0.0.1:{closed_port()}/gone"
    assert (await proxy.get(dead)).status == 503
    assert len(proxy.outgoing()) == 1

    await proxy.control(mode="online", action="fetch")  # the first failure: it stays
    await proxy.control(mode="offline")
    assert len(proxy.outgoing()) == 1
    (entry,) = (await command_json(proxy, "/index/lastout/"))["urls"]
    assert entry["url"] == dead and entry["dropped"] is False
    (waiting,) = (await command_json(proxy, "/outgoing/"))["requests"]
    assert waiting["url"] == dead and waiting["failures"] == 1

    status = await proxy.control(mode="online", action="fetch")  # the second: it leaves
    assert "1 failed" in status["message"]
    assert proxy.outgoing() == []
    data = await command_json(proxy, "/index/lastout/")
    (entry,) = data["urls"]
    assert entry["url"] == dead and entry["ok"] is False and entry["dropped"] is True
    assert "failed 2 times: removed from the queue" in entry["problem"]
    assert data["dropped"] == 1
    page = await command_text(proxy, "/index/lastout/")
    assert page.count("failed, left the queue") == 1
    assert "UTC UTC" not in page and "failed (failed)" not in page

    # the next fetch of the queue does not try it, nor list it again
    await proxy.control(mode="offline")
    good = origin.url("/page.html")
    assert (await proxy.get(good)).status == 503
    await proxy.control(mode="online", action="fetch")
    urls = [u["url"] for u in (await command_json(proxy, "/index/lastout/"))["urls"]]
    assert urls == [good]
