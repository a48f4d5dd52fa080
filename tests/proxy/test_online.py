"""Online forwarding end to end: a real origin, the real proxy, a real client, the real archive."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import re
import socket

import aiohttp
import pytest

from wwwproxy.url import canonicalize

CONTENT = [
    # path, status, expected body (a name: that attribute of the origin)
    ("/page.html", 200, "HTML"),
    ("/image.png", 200, "IMAGE"),
    ("/gzip", 200, "GZIP_BODY"),
    ("/chunked", 200, "CHUNKED"),
    ("/redirect", 302, b"moved"),
    ("/missing", 404, b"not here"),
    ("/error", 500, b"origin broke"),
]


def expected(origin, body):
    if body == "CHUNKED":
        return b"".join(origin.CHUNKS)
    return getattr(origin, body) if isinstance(body, str) else body


def no_header(headers, name):
    return all(k.lower() != name.lower() for k, _ in headers)


@pytest.mark.parametrize(("path", "status", "body"), CONTENT)
async def test_each_kind_is_forwarded_and_recorded(proxy, origin, path, status, body):
    url = origin.url(path)
    reply = await proxy.get(url)
    want = expected(origin, body)
    assert reply.status == status
    assert reply.body == want
    assert reply.header("X-Cache") == "MISS"
    assert reply.header("Via") == "1.1 wwwproxy"
    assert origin.hits[path] == 1
    assert origin.last(path).method == "GET"

    await proxy.recorded(url)
    request, response = proxy.records(url)
    assert request.rec_type == "request"
    assert response.rec_type == "response"
    assert response.target_uri == url
    assert response.status == str(status)
    assert response.payload == want
    assert no_header(response.http_headers, "Transfer-Encoding")
    assert proxy.store.captures(proxy.key_for(url))


async def test_upstream_request_goes_as_spelled_and_is_stored_as_canonical(proxy, origin):
    """Every spelling of a URL is fetched as the browser wrote it, and stored as its one
    canonical form."""
    spelled = f"http://127.0.0.1:{origin.port}/%65cho?q=%7e&r=a%20b"
    raw = await proxy.raw(f"GET {spelled} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.1 200")
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["raw_path"] == "/%65cho?q=%7e&r=a%20b"
    canonical = origin.url("/echo?q=~&r=a+b")
    response = (await proxy.recorded(canonical))[1]
    assert response.target_uri == canonical


async def test_gzip_body_kept_encoded(proxy, origin):
    url = origin.url("/gzip")
    reply = await proxy.get(url, headers={"Accept-Encoding": "gzip"})
    assert reply.header("Content-Encoding") == "gzip"
    assert reply.header("Content-Length") == str(len(origin.GZIP_BODY))
    assert reply.body == origin.GZIP_BODY
    assert origin.last("/gzip").header("Accept-Encoding") == "gzip"
    await proxy.recorded(url)
    response = proxy.records(url)[1]
    assert response.payload == origin.GZIP_BODY  # stored compressed, as sent
    assert ("Content-Encoding", "gzip") in response.http_headers


async def test_chunked_gzip_recorded_dechunked_still_compressed(proxy, origin):
    url = origin.url("/gzip-chunked")
    reply = await proxy.get(url)
    assert reply.body == origin.GZIP_BODY
    assert reply.header("Content-Encoding") == "gzip"
    await proxy.recorded(url)
    response = proxy.records(url)[1]
    assert response.payload == origin.GZIP_BODY
    assert no_header(response.http_headers, "Transfer-Encoding")


async def test_redirect_is_passed_through_not_followed(proxy, origin):
    reply = await proxy.get(origin.url("/redirect"), allow_redirects=False)
    assert reply.status == 302
    assert reply.header("Location") == "/page.html"
    assert origin.hits["/page.html"] == 0


async def test_head_forwarded_without_body(proxy, origin):
    url = origin.url("/page.html")
    reply = await proxy.get(url, method="HEAD")
    assert reply.status == 200
    assert reply.body == b""
    assert reply.header("Content-Length") == str(len(origin.HTML))
    assert origin.last("/page.html").method == "HEAD"
    await proxy.recorded(url, method="HEAD")
    response = proxy.records(url, "HEAD")[1]
    assert response.archive_key == proxy.key_for(url, "HEAD")
    assert "__wb_method=HEAD" in response.archive_key


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "OPTIONS", "POST"])
async def test_other_methods_forwarded_with_body(proxy, origin, method):
    url = origin.url("/echo?x=1")
    body = b'{"name": "value", "n": 2}'
    ctype = "application/json"
    reply = await proxy.get(url, method=method, data=body, headers={"Content-Type": ctype})
    assert reply.status == 200
    echo = json.loads(reply.body)
    assert echo["method"] == method
    assert echo["body"] == body.decode()
    assert echo["path_qs"] == "/echo?x=1"
    key = proxy.key_for(url, method, body, ctype)
    assert f"__wb_method={method}" in key
    await proxy.recorded(url, method=method, body=body, ctype=ctype)
    request, response = proxy.records(url, method, body, ctype)
    assert request.payload == body
    assert response.archive_key == key


async def test_large_request_and_response_bodies_stream(proxy, origin):
    url = origin.url("/echo")
    body = bytes(range(256)) * 4096  # 1 MiB, crosses every buffer size
    reply = await proxy.get(url, method="PUT", data=body)
    echo = json.loads(reply.body)
    assert echo["body"].encode("latin-1") == body


async def test_hop_by_hop_request_headers_dropped(proxy, origin):
    url = origin.url("/echo")
    request = (
        f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n"
        "Connection: close, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\n"
        "Proxy-Authorization: Basic dXNlcjpwYXNz\r\nTE: trailers\r\n"
        "Via: 1.0 upstream-cache\r\nX-End-To-End: kept\r\n\r\n"
    ).encode()
    raw = await proxy.raw(request)
    assert raw.startswith(b"HTTP/1.1 200 ")
    seen = origin.last("/echo")
    names = {k.lower() for k, _ in seen.headers}
    assert "x-hop" not in names
    assert "proxy-authorization" not in names
    assert "keep-alive" not in names
    assert "te" not in names
    assert seen.header("X-End-To-End") == "kept"
    assert seen.header("Via") == "1.0 upstream-cache, 1.1 wwwproxy"
    assert seen.header("Host") == f"127.0.0.1:{origin.port}"


async def test_hop_by_hop_response_headers_dropped(proxy, raw_origin):
    body = b"hello"
    upstream = await raw_origin(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: X-Secret\r\n"
        b"X-Secret: internal\r\nKeep-Alive: timeout=9\r\nProxy-Authenticate: Basic\r\n"
        b"Upgrade: h2c\r\nX-Public: yes\r\n\r\n" + body
    )
    url = upstream.url("/x")
    reply = await proxy.get(url)
    assert reply.body == body
    names = {k.lower() for k, _ in reply.headers}
    assert {"x-secret", "keep-alive", "proxy-authenticate", "upgrade"}.isdisjoint(names)
    assert reply.header("X-Public") == "yes"
    # the archive keeps what the origin sent; the replay drops the same headers
    stored = {k.lower() for k, _ in (await proxy.recorded(url))[1].http_headers}
    assert {"x-secret", "connection", "keep-alive"} <= stored
    await proxy.control(mode="offline")
    replay = await proxy.get(url)
    assert replay.header("X-Cache") == "HIT"
    names = {k.lower() for k, _ in replay.headers}
    assert {"x-secret", "keep-alive", "proxy-authenticate", "upgrade"}.isdisjoint(names)
    assert replay.header("X-Public") == "yes"


async def test_keep_alive_client_and_upstream(proxy, origin):
    reader, writer = await proxy.connect_raw()
    try:
        for path in ("/page.html", "/chunked", "/image.png"):
            writer.write(
                f"GET {origin.url(path)} HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n\r\n".encode()
            )
            await writer.drain()
            reply = await proxy.read_response(reader)
            assert reply.status == 200, path
        assert reply.body == origin.IMAGE
    finally:
        writer.close()
    peers = {s.peer for s in origin.seen}
    assert len(origin.seen) == 3
    assert len(peers) == 1  # one upstream connection, reused


async def test_conditional_revalidation_records_revisit(proxy, origin):
    url = origin.url("/etag")
    first = await proxy.get(url)
    assert first.status == 200
    await proxy.recorded(url)
    assert origin.last("/etag").header("If-None-Match") is None

    second = await proxy.get(url)
    assert origin.hits["/etag"] == 2
    seen = origin.last("/etag")
    assert seen.header("If-None-Match") == origin.ETAG
    assert seen.header("If-Modified-Since") is not None
    assert second.status == 200
    assert second.body == b"validated body"
    assert second.header("ETag") == origin.ETAG
    await proxy.recorded(url, 4)
    types = [r.rec_type for r in proxy.records(url)]
    assert types == ["request", "response", "request", "revisit"]
    revisit = proxy.records(url)[3]
    assert revisit.status == "200"
    assert revisit.payload_digest == proxy.records(url)[1].payload_digest


async def test_browser_conditional_request_gets_its_own_304(proxy, origin):
    url = origin.url("/etag")
    await proxy.get(url)
    await proxy.recorded(url)
    reply = await proxy.get(url, headers={"If-None-Match": origin.ETAG})
    assert reply.status == 304
    assert reply.body == b""
    # the 304 never replaces the stored body
    cached = proxy.store.get(canonicalize(url))
    assert cached is not None and cached.status == 200


async def test_freshness_rule_serves_without_contacting_origin(make_proxy, origin):
    proxy = await make_proxy(freshness=[(r"/counted$", 3600)])
    url = origin.url("/counted")
    first = await proxy.get(url)
    assert first.body == b"hit 1"
    await proxy.recorded(url)
    second = await proxy.get(url)
    assert second.body == b"hit 1"
    assert second.header("X-Cache") == "HIT"
    assert second.header("Age") is not None
    assert origin.hits["/counted"] == 1
    # a reload (no-cache) goes to the origin anyway
    third = await proxy.get(url, headers={"Cache-Control": "no-cache"})
    assert third.body == b"hit 2"
    assert origin.hits["/counted"] == 2
    await proxy.recorded(url, 4)
    # so does a normal reload (max-age=0), and an HTTP/1.0 one (Pragma)
    assert (await proxy.get(url, headers={"Cache-Control": "max-age=0"})).body == b"hit 3"
    await proxy.recorded(url, 6)
    assert (await proxy.get(url, headers={"Pragma": "no-cache"})).body == b"hit 4"
    await proxy.recorded(url, 8)
    # and a copy younger than the browser's max-age is served
    assert (await proxy.get(url, headers={"Cache-Control": "max-age=60"})).body == b"hit 4"
    # a URL no rule matches is fetched every time
    other = origin.url("/counted-other")
    await proxy.get(other)
    await proxy.recorded(other)
    await proxy.get(other)
    assert origin.hits["/counted-other"] == 2


async def test_freshness_rule_expires(make_proxy, origin):
    proxy = await make_proxy(freshness=[(r"/counted$", 1)])
    url = origin.url("/counted")
    await proxy.get(url)
    await proxy.recorded(url)
    assert (await proxy.get(url)).body == b"hit 1"  # younger than a second: served
    await asyncio.sleep(1.05)
    assert (await proxy.get(url)).body == b"hit 2"  # older: fetched again


async def test_freshness_rule_max_age_zero_is_never_fresh(make_proxy, origin):
    proxy = await make_proxy(freshness=[(r"/counted$", 0)])
    url = origin.url("/counted")
    await proxy.get(url)
    await proxy.recorded(url)
    assert (await proxy.get(url)).body == b"hit 2"


async def test_client_disconnect_still_records_whole_body(proxy, origin):
    url = origin.url("/slow")
    reader, writer = await proxy.connect_raw()
    writer.write(f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    writer.transport.abort()  # the browser goes away mid-body
    records = await proxy.recorded(url)
    assert records[1].payload == origin.SLOW_BODY


async def test_client_disconnect_while_writes_wait_still_records_whole_body(proxy, origin):
    # A browser cancelling a download has usually stopped reading first: the proxy is waiting
    # for it to drain when it goes, which aiohttp reports as a plain ConnectionError.
    url = origin.url("/large")
    writer = await proxy.stalled_get(url)
    writer.transport.abort()
    records = await proxy.recorded(url)
    assert records[1].payload == origin.LARGE_BODY


async def test_client_disconnect_abandons_download_when_configured(make_proxy, origin):
    proxy = await make_proxy(finish_on_disconnect=False)
    url = origin.url("/slow")
    reader, writer = await proxy.connect_raw()
    writer.write(f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n\r\n".encode())
    await writer.drain()
    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    writer.transport.abort()
    await asyncio.sleep(1.0)  # longer than the whole slow body takes
    assert proxy.records(url) == []  # nothing partial is stored


async def test_unreachable_origin_gives_502_page(proxy, origin):
    url = origin.url("/page.html")
    await origin.stop()
    reply = await proxy.get(url)
    assert reply.status == 502
    assert (reply.header("Content-Type") or "").startswith("text/html")
    assert url in reply.text
    assert "refused" in reply.text
    assert proxy.records(url) == []


async def test_unknown_host_gives_502_naming_reason(proxy):
    reply = await proxy.get("http://no-such-host.invalid/")
    assert reply.status == 502
    assert "http://no-such-host.invalid/" in reply.text
    assert "could not be resolved" in reply.text


async def test_read_timeout_gives_504(make_proxy, origin):
    proxy = await make_proxy(read_timeout=0.3)
    url = origin.url("/hang")
    reply = await proxy.get(url)
    assert reply.status == 504
    assert url in reply.text
    assert "did not answer in time" in reply.text


async def test_malformed_upstream_response_gives_502(proxy, raw_origin):
    upstream = await raw_origin(b"NONSENSE\r\n\r\n")
    reply = await proxy.get(upstream.url("/x"))
    assert reply.status == 502
    assert upstream.url("/x") in reply.text


async def test_cut_off_upstream_body_is_not_recorded(proxy, raw_origin):
    upstream = await raw_origin(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 40)
    url = upstream.url("/cut")
    raw = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.1 200")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert len(body) < 100  # the browser sees a cut-off body, never a complete one
    await asyncio.sleep(0.2)
    assert proxy.records(url) == []


async def test_online_unreachable_serves_stale_copy(proxy, origin):
    url = origin.url("/page.html")
    first = await proxy.get(url)
    await proxy.recorded(url)
    await origin.stop()
    reply = await proxy.get(url)
    assert reply.status == 200
    assert reply.body == first.body
    assert reply.header("X-Cache") == "HIT"
    assert (reply.header("Warning") or "").startswith("111 ")
    assert reply.header("Age") is not None


async def test_utf8_header_values_pass_byte_for_byte(proxy, raw_origin):
    upstream = await raw_origin(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
        b'Content-Disposition: attachment; filename="caf\xc3\xa9.txt"\r\n'
        b"X-Latin1: caf\xe9\r\n\r\nok"
    )
    url = upstream.url("/h")
    raw = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert b'filename="caf\xc3\xa9.txt"' in raw  # UTF-8 bytes unchanged
    assert re.search(rb"(?m)^X-Latin1: caf\S+\r$", raw)  # not UTF-8: still a header, no crash
    response = (await proxy.recorded(url))[1]
    stored = dict(response.http_headers)
    assert stored["Content-Disposition"] == 'attachment; filename="café.txt"'  # warcio: UTF-8
    # the archive holds the bytes the origin sent
    path = proxy.store.path_for(canonicalize(url), proxy.key_for(url))
    with gzip.open(path) as f:
        warc = f.read()
    assert b'Content-Disposition: attachment; filename="caf\xc3\xa9.txt"\r\n' in warc
    assert b"X-Latin1: caf\xe9\r\n" in warc
    await proxy.control(mode="offline")
    replay = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert b'filename="caf\xc3\xa9.txt"' in replay
    assert b"X-Cache: HIT" in replay


async def test_control_characters_in_upstream_headers_become_spaces(proxy, raw_origin):
    # aiohttp's client lets them through, its server refuses to send them (a 500 before)
    upstream = await raw_origin(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Ctl: a\x01b\x1bc\x7fd\r\n\r\nok"
    )
    url = upstream.url("/ctl")
    live = await proxy.get(url)
    assert (live.status, live.body) == (200, b"ok")
    assert live.header("X-Ctl") == "a b c d"
    assert ("X-Ctl", "a b c d") in (await proxy.recorded(url))[1].http_headers
    await proxy.control(mode="offline")
    replay = await proxy.get(url)
    assert (replay.header("X-Cache"), replay.header("X-Ctl")) == ("HIT", "a b c d")


async def test_switching_protocols_from_origin_is_502(proxy, raw_origin):
    # Upgrade is hop-by-hop and never forwarded: a 101 would leave the browser hanging
    upstream = await raw_origin(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        close=False,
    )
    url = upstream.url("/ws")
    raw = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), timeout=3)
    assert raw.startswith(b"HTTP/1.1 502 "), raw[:100]
    assert b"switched protocols" in raw
    assert proxy.records(url) == []


async def test_browser_authorization_wins_over_url_credentials(proxy, origin):
    url = origin.url("/echo").replace("http://", "http://user:pw@")
    raw = await proxy.raw(
        f"GET {url} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n\r\n".encode()
    )
    assert raw.startswith(b"HTTP/1.1 200 "), raw[:200]
    assert origin.last("/echo").header("Authorization") == "Bearer tok"
    # without a header of its own, the URL's credentials are sent as Basic
    raw = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.1 200 "), raw[:200]
    assert origin.last("/echo").header("Authorization") == "Basic dXNlcjpwdw=="


async def test_non_latin1_url_credentials_are_sent_as_utf8(proxy, origin):
    # aiohttp.BasicAuth encodes Latin-1 only: a euro sign in the user name was a 500
    url = origin.url("/echo").replace("http://", "http://%E2%82%AC:x@")
    raw = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.1 200 "), raw[:200]
    sent = origin.last("/echo").header("Authorization") or ""
    assert base64.b64decode(sent.removeprefix("Basic ")) == "€:x".encode()


async def test_no_content_type_or_server_added(proxy, raw_origin):
    """aiohttp would add Content-Type: application/octet-stream (stopping browser sniffing)
    and its own Server header; a proxy passes the origin's headers only."""
    upstream = await raw_origin(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n<p>hi!")
    url = upstream.url("/untyped")
    live = await proxy.get(url)
    assert live.body == b"<p>hi!"
    assert live.header("Content-Type") is None
    assert live.header("Server") is None
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    replay = await proxy.get(url)
    assert replay.header("X-Cache") == "HIT"
    assert replay.header("Content-Type") is None
    assert replay.header("Server") is None


async def test_connect_timeout_gives_504(make_proxy):
    """A listening socket whose accept queue is full never completes the handshake."""
    server = socket.socket()
    fillers = []
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect(("127.0.0.1", port))
            fillers.append(s)
        proxy = await make_proxy(connect_timeout=0.3)
        url = f"http://127.0.0.1:{port}/never"
        reply = await proxy.get(url)
        assert reply.status == 504
        assert url in reply.text
        assert "timed out" in reply.text
    finally:
        for s in fillers:
            s.close()
        server.close()


async def test_read_timeout_mid_body_cuts_off_and_records_nothing(make_proxy, origin):
    proxy = await make_proxy(read_timeout=0.02)  # the slow body pauses 0.05 s between chunks
    url = origin.url("/slow")
    raw = await proxy.raw(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert 0 < len(body) < len(origin.SLOW_BODY)
    await asyncio.sleep(0.2)
    assert proxy.records(url) == []


async def test_http10_client_gets_unchunked_body_then_close(proxy, origin):
    url = origin.url("/chunked")
    raw = await proxy.raw(f"GET {url} HTTP/1.0\r\n\r\n".encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200")
    assert b"Transfer-Encoding" not in head
    assert body == b"".join(origin.CHUNKS)


async def test_upstream_body_delimited_by_close_is_relayed_and_recorded(proxy, raw_origin):
    upstream = await raw_origin(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
    url = upstream.url("/old")
    reply = await proxy.get(url)
    assert reply.status == 200 and reply.body == b"until close"
    response = (await proxy.recorded(url))[1]
    assert response.payload == b"until close"


async def test_recorded_status_line_keeps_origin_http_version(proxy, raw_origin):
    upstream = await raw_origin(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
    url = upstream.url("/v10")
    await proxy.get(url)
    response = (await proxy.recorded(url))[1]
    assert response.protocol == "HTTP/1.0"


async def test_chunked_request_body_forwarded_with_length(proxy, origin):
    url = origin.url("/echo")
    raw = await proxy.raw(
        f"POST {url} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        "Content-Type: text/plain\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".encode()
    )
    assert raw.startswith(b"HTTP/1.1 200")
    seen = origin.last("/echo")
    assert seen.body == b"hello world"
    assert seen.header("Content-Length") == "11"
    assert seen.header("Transfer-Encoding") is None


async def test_online_post_always_reaches_origin_unconditionally(make_proxy, origin):
    proxy = await make_proxy(freshness=[(r"/etag", 3600)])
    url = origin.url("/etag")
    for n in (1, 2):
        reply = await proxy.get(url, method="POST", data=b"a=1")
        assert reply.status == 200
        assert reply.header("X-Cache") == "MISS"
        assert origin.hits["/etag"] == n
        assert origin.last("/etag").header("If-None-Match") is None
        await proxy.recorded(url, 2 * n, method="POST", body=b"a=1")


@pytest.mark.parametrize("path", ["/trickle", "/trickle-length"])
async def test_body_parts_reach_the_browser_as_they_arrive(proxy, origin, path):
    """What the origin has sent is passed on at once, not held until more comes: a page that
    renders progressively, or server-sent events, must not lag one part behind."""
    url = origin.url(path)
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        early = b""
        with contextlib.suppress(TimeoutError):
            while origin.TRICKLE[0] not in early:
                early += await asyncio.wait_for(reader.read(4096), 1.0)
        assert origin.TRICKLE[0] in early, early  # while the origin still holds the rest
        origin.trickle.set()
        records = await proxy.recorded(url)
        assert records[1].payload == b"".join(origin.TRICKLE)
    finally:
        writer.close()


async def test_the_head_goes_ahead_of_a_body_that_has_not_begun(proxy, origin):
    """The head of an answer whose body is not there yet reaches the browser at once (a
    head sent together with the body's first part is only for a body already at hand)."""
    url = origin.url("/late-body")
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200") and b"X-Cache: MISS" in head
        origin.trickle.set()  # only now does the origin send the body
        body = await asyncio.wait_for(reader.readexactly(len(origin.TRICKLE[1])), 5)
        assert body == origin.TRICKLE[1]
        records = await proxy.recorded(url)
        assert records[1].payload == origin.TRICKLE[1]
    finally:
        writer.close()


async def test_long_responses_do_not_block_other_requests_to_the_host(proxy, origin):
    """Downloads, server-sent events and long polls from several tabs (or downloads finishing
    after their browser left) must not hold up every other request to that host."""
    url = origin.url("/trickle")
    streams = []
    try:
        for _ in range(12):
            reader, writer = await proxy.connect_raw()
            streams.append(writer)
            writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await writer.drain()
            # (well within read_timeout, which would free a waiting connection slot)
            assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 1)).startswith(
                b"HTTP/1.1 200"
            )
        async with proxy.session(timeout=aiohttp.ClientTimeout(total=1)) as s:
            reply = await proxy.request(s, "GET", origin.url("/page.html"))
        assert reply.body == origin.HTML
    finally:
        origin.trickle.set()
        for writer in streams:
            writer.close()


@pytest.mark.parametrize("path", ["/page.html", "/chunked", "/image.png", "/missing"])
async def test_recorded_by_the_time_the_browser_has_the_body(proxy, origin, path):
    """No waiting: a page the browser has fully received is already archived and indexed, so
    switching offline right after it loaded finds it."""
    url = origin.url(path)
    reply = await proxy.get(url)
    assert len(reply.body) > 0
    records = proxy.records(url)
    assert [r.rec_type for r in records] == ["request", "response"]
    assert records[1].payload == reply.body
    assert proxy.store.captures(proxy.key_for(url))
