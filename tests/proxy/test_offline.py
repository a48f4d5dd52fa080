"""Offline end to end: what was fetched online replays byte for byte with the origin stopped;
what was not is queued, and fetching the queue makes it servable."""

from __future__ import annotations

import asyncio
import json
import re

from wwwproxy.url import url_hash

PATHS = [
    "/page.html",
    "/image.png",
    "/gzip",
    "/gzip-chunked",
    "/chunked",
    "/redirect",
    "/missing",
    "/error",
    "/etag",
]
# Headers that legitimately differ between the live answer and its replay.
VARYING = {"age", "x-cache", "content-length", "transfer-encoding", "connection", "keep-alive"}


def comparable(headers):
    return [(k.lower(), v) for k, v in headers if k.lower() not in VARYING]


async def record_online(proxy, origin, paths):
    replies = {}
    for path in paths:
        url = origin.url(path)
        replies[path] = await proxy.get(url)
        await proxy.recorded(url)
    return replies


async def test_offline_replays_same_status_headers_bytes(proxy, origin):
    online = await record_online(proxy, origin, PATHS)
    status = await proxy.control(mode="offline")
    assert status["mode"] == "offline"
    await origin.stop()
    for path in PATHS:
        live = online[path]
        replay = await proxy.get(origin.url(path))
        assert replay.status == live.status, path
        assert replay.reason == live.reason, path
        assert replay.body == live.body, path
        # the replay says it takes ranges where it does: a complete 200 (RFC 9110 §14.3)
        replayed = [(k, v) for k, v in replay.headers if k.lower() != "accept-ranges"]
        assert comparable(replayed) == comparable(live.headers), path
        assert replay.header("Accept-Ranges") == ("bytes" if live.status == 200 else None), path
        assert replay.header("X-Cache") == "HIT"
        assert live.header("X-Cache") == "MISS"
        assert replay.header("Content-Length") == str(len(live.body)), path
        assert replay.header("Transfer-Encoding") is None
        assert replay.header("Age") is not None and replay.header("Age").isdigit()
        if live.header("Content-Length") is not None:
            assert replay.header("Content-Length") == live.header("Content-Length")


async def test_gzip_replayed_byte_identical_with_content_encoding(proxy, origin):
    await record_online(proxy, origin, ["/gzip"])
    await proxy.control(mode="offline")
    await origin.stop()
    replay = await proxy.get(origin.url("/gzip"))
    assert replay.header("Content-Encoding") == "gzip"
    assert replay.body == origin.GZIP_BODY
    # and a client that decompresses sees the text
    async with proxy.session(auto_decompress=True) as s:
        async with s.get(origin.url("/gzip"), proxy=proxy.url) as resp:
            assert await resp.read() == origin.GZIP_PLAIN


async def test_chunked_replayed_with_content_length(proxy, origin):
    await record_online(proxy, origin, ["/chunked"])
    await proxy.control(mode="offline")
    await origin.stop()
    replay = await proxy.get(origin.url("/chunked"))
    assert replay.body == b"".join(origin.CHUNKS)
    assert replay.header("Content-Length") == str(len(replay.body))
    assert replay.header("Transfer-Encoding") is None
    assert all("transfer-encoding" not in k.lower() for k, _ in replay.headers)


async def test_head_replayed_offline_with_original_length(proxy, origin):
    url = origin.url("/page.html")
    live = await proxy.get(url, method="HEAD")
    await proxy.recorded(url, method="HEAD")
    await proxy.control(mode="offline")
    await origin.stop()
    replay = await proxy.get(url, method="HEAD")
    assert replay.status == 200
    assert replay.body == b""
    assert replay.header("X-Cache") == "HIT"
    assert replay.header("Content-Length") == live.header("Content-Length") == str(len(origin.HTML))


async def test_head_offline_served_from_get_capture(proxy, origin):
    url = origin.url("/page.html")
    live = await proxy.get(url)
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    await origin.stop()
    replay = await proxy.get(url, method="HEAD")
    assert replay.status == 200
    assert replay.body == b""
    assert replay.header("Content-Length") == live.header("Content-Length")


async def test_replay_to_browser_that_goes_away_is_no_crash(proxy, origin, caplog):
    # the browser stops reading a large cached copy and then leaves: the proxy is waiting
    # for it to drain, which aiohttp reports as a plain ConnectionError
    url = origin.url("/large")
    await proxy.get(url)
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    writer = await proxy.stalled_get(url)
    caplog.clear()
    writer.transport.abort()
    await asyncio.sleep(0.3)
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert (await proxy.get(url)).body == origin.LARGE_BODY


async def test_browser_gone_before_the_cached_answer_starts_is_no_crash(proxy, origin, caplog):
    # the browser cancels (a click elsewhere) while the proxy looks the copy up
    url = origin.url("/large")
    await proxy.get(url)
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    caplog.clear()
    for _ in range(3):
        reader, writer = await proxy.connect_raw()
        writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        writer.transport.abort()
    await asyncio.sleep(0.5)
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert (await proxy.get(url)).header("X-Cache") == "HIT"


async def test_x_cache_is_ours_alone_when_the_origin_sends_one(proxy, origin):
    # a CDN's "X-Cache: Hit" must not pass for ours (curl | grep X-Cache, the access log)
    url = origin.url("/cdn")
    live = await proxy.get(url)
    assert live.all("X-Cache") == ["MISS"]
    records = await proxy.recorded(url)
    assert ("X-Cache", "Hit from cdn") in records[1].http_headers  # the archive keeps it
    await proxy.control(mode="offline")
    replay = await proxy.get(url)
    assert replay.all("X-Cache") == ["HIT"]

    def logged() -> list[str]:  # aiohttp logs a request just after the browser has it all
        lines = [line for line in proxy.access_lines() if f'"GET {url}"' in line]
        return [line.rsplit(" ", 1)[1] for line in lines]

    await proxy.wait_until(lambda: len(logged()) >= 2)
    assert logged() == ["MISS", "HIT"]


async def test_post_form_replayed_only_for_same_body(make_proxy, origin):
    proxy = await make_proxy(queue_methods=("GET", "HEAD", "POST"))  # POSTs queued too
    url = origin.url("/form")
    form = {"name": "alice", "q": "a b&c"}
    ctype = "application/x-www-form-urlencoded"
    body = b"name=alice&q=a+b%26c"
    live = await proxy.get(url, method="POST", data=form)
    assert live.status == 200
    assert origin.last("/form").body == body
    key = proxy.key_for(url, "POST", body, ctype)
    assert "__wb_method=POST" in key and "name=alice" in key
    await proxy.recorded(url, method="POST", body=body, ctype=ctype)
    request, response = proxy.records(url, "POST", body, ctype)
    assert request.payload == body
    assert response.archive_key == key
    assert proxy.records(url) == []  # not under the GET key

    await proxy.control(mode="offline")
    await origin.stop()
    replay = await proxy.get(url, method="POST", data=form)
    assert replay.status == 200
    assert replay.body == live.body
    assert replay.header("X-Cache") == "HIT"
    other = await proxy.get(url, method="POST", data={"name": "bob"})
    assert other.status == 503
    assert len(proxy.outgoing()) == 1
    get = await proxy.get(url)
    assert get.status == 503  # a GET of the same URL is another request
    assert len(proxy.outgoing()) == 2


async def test_offline_miss_is_queued_with_links(make_proxy, origin):
    proxy = await make_proxy("offline")
    url = origin.url("/page.html")
    reply = await proxy.get(url)
    assert reply.status == 503
    assert origin.hits["/page.html"] == 0  # offline never touches the network
    assert url in reply.text
    assert "fetched when next online" in reply.text
    hrefs = re.findall(r'href="([^"]+)"', reply.text)
    assert "/outgoing/" in hrefs and "/control/" in hrefs
    files = proxy.outgoing()
    assert [p.name for p in files] == [url_hash(proxy.key_for(url)) + ".json"]
    queued = json.loads(files[0].read_text())
    assert queued["url"] == url and queued["method"] == "GET"
    again = await proxy.get(url)
    assert again.status == 503
    assert len(proxy.outgoing()) == 1  # asking twice queues once
    status = await proxy.control()
    assert status["queued"] == 1


async def test_fetching_the_queue_clears_it_and_serves_offline(make_proxy, origin):
    proxy = await make_proxy("offline", queue_methods=("GET", "HEAD", "POST"))
    page, image = origin.url("/page.html"), origin.url("/image.png")
    post_url, post_body = origin.url("/form"), b"name=carol"
    ctype = "application/x-www-form-urlencoded"
    assert (await proxy.get(page)).status == 503
    assert (await proxy.get(image)).status == 503
    posted = await proxy.get(
        post_url, method="POST", data=post_body, headers={"Content-Type": ctype}
    )
    assert posted.status == 503
    assert len(proxy.outgoing()) == 3
    assert sum(origin.hits.values()) == 0

    status = await proxy.control(mode="online", action="fetch")
    assert status["mode"] == "online"
    assert "Fetched 3" in status["message"]
    assert status["queued"] == 0
    assert proxy.outgoing() == []
    assert origin.hits["/page.html"] == origin.hits["/image.png"] == origin.hits["/form"] == 1
    assert origin.last("/form").method == "POST"
    assert origin.last("/form").body == post_body
    assert [r.rec_type for r in proxy.records(page)] == ["request", "response"]

    await proxy.control(mode="offline")
    await origin.stop()
    reply = await proxy.get(page)
    assert reply.status == 200 and reply.body == origin.HTML
    assert reply.header("X-Cache") == "HIT"
    assert (await proxy.get(image)).body == origin.IMAGE
    again = await proxy.get(
        post_url, method="POST", data=post_body, headers={"Content-Type": ctype}
    )
    assert again.status == 200
    assert again.body == b"<p>you sent name=carol</p>"


async def test_fetching_the_queue_with_origin_down_keeps_it(make_proxy, origin):
    proxy = await make_proxy("offline")
    url = origin.url("/page.html")
    await proxy.get(url)
    await origin.stop()
    status = await proxy.control(mode="online", action="fetch")
    assert "1 failed" in status["message"]
    assert len(proxy.outgoing()) == 1


async def test_offline_age_grows(proxy, origin):
    url = origin.url("/page.html")
    await record_online(proxy, origin, ["/page.html"])
    await proxy.control(mode="offline")
    first = int((await proxy.get(url)).header("Age"))
    await asyncio.sleep(1.05)
    second = int((await proxy.get(url)).header("Age"))
    assert second >= first + 1


async def test_offline_serves_newest_copy(proxy, origin):
    url = origin.url("/counted")
    assert (await proxy.get(url)).body == b"hit 1"
    await proxy.recorded(url)
    assert (await proxy.get(url)).body == b"hit 2"
    await proxy.recorded(url, 4)
    await proxy.control(mode="offline")
    assert (await proxy.get(url)).body == b"hit 2"


async def test_deduplicated_capture_still_replays(proxy, origin):
    """A second identical fetch is stored as a revisit; offline it replays the full body."""
    url = origin.url("/image.png")
    await proxy.get(url)
    await proxy.recorded(url)
    await proxy.get(url)
    records = await proxy.recorded(url, 4)
    assert [r.rec_type for r in records] == ["request", "response", "request", "revisit"]
    assert records[3].payload == b""
    await proxy.control(mode="offline")
    await origin.stop()
    replay = await proxy.get(url)
    assert replay.status == 200
    assert replay.body == origin.IMAGE
    assert replay.header("Content-Length") == str(len(origin.IMAGE))


async def test_range_answer_never_replaces_the_whole_copy(proxy, origin):
    url = origin.url("/ranged")
    whole = await proxy.get(url)
    assert whole.status == 200 and whole.body == origin.IMAGE
    await proxy.recorded(url)
    part = await proxy.get(url, headers={"Range": "bytes=0-9"})
    assert part.status == 206 and part.body == origin.IMAGE[:10]  # relayed as it came
    await proxy.recorded(url, 4)
    # online revalidation of the whole copy is not answered with the part
    again = await proxy.get(url)
    assert again.status == 200 and again.body == origin.IMAGE
    await proxy.control(mode="offline")
    replay = await proxy.get(url)
    assert replay.status == 200
    assert replay.body == origin.IMAGE


async def test_queued_request_drops_browser_conditions_and_range(make_proxy, origin):
    """A browser revalidating its own copy (or asking for a range) while we are offline:
    fetching the queue must give a whole, servable answer, not a 304 or a part."""
    proxy = await make_proxy("offline")
    url = origin.url("/ranged")
    conditional = {"If-None-Match": origin.ETAG, "Range": "bytes=0-9", "If-Range": origin.ETAG}
    assert (await proxy.get(url, headers=conditional)).status == 503
    queued = json.loads(proxy.outgoing()[0].read_text())
    names = {name.lower() for name, _ in queued["headers"]}
    assert names.isdisjoint({"if-none-match", "range", "if-range"})
    await proxy.control(mode="online", action="fetch")
    await proxy.control(mode="offline")
    replay = await proxy.get(url)
    assert replay.status == 200
    assert replay.body == origin.IMAGE


async def test_unreadable_queue_file_is_reported_not_fatal(make_proxy, origin):
    proxy = await make_proxy("offline")
    url = origin.url("/page.html")
    assert (await proxy.get(url)).status == 503
    (proxy.cache / "outgoing" / "broken.json").write_text("{not json", encoding="utf-8")
    status = await proxy.control(mode="online", action="fetch")
    assert "Fetched 1" in status["message"] and "1 failed" in status["message"]
    assert [p.name for p in proxy.outgoing()] == ["broken.json"]
    assert origin.hits["/page.html"] == 1


async def test_replay_is_exact_around_read_chunk_sizes(proxy):
    """Bodies of every size around the server's read chunk replay byte for byte."""
    from wwwproxy.http.policy import Mode
    from wwwproxy.proxy.server import CHUNK
    from wwwproxy.url import canonicalize

    await proxy.control(mode="offline")
    assert proxy.running.services.mode is Mode.OFFLINE
    sizes = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 5]
    for size in sizes:
        body = bytes((i * 7 + size) % 256 for i in range(size))
        url = canonicalize(f"http://chunks.example/{size}")
        rec = proxy.store.recorder(
            url, url.file, method="GET", request_headers=[], request_body=b""
        )
        rec.write(body)
        rec.finish(200, "OK", [("Content-Type", "application/octet-stream")])
        replay = await proxy.get(url.canonical)
        assert replay.status == 200 and replay.header("X-Cache") == "HIT", size
        assert replay.body == body, size
        assert replay.header("Content-Length") == str(size), size
