"""The fast front: memory hits answered without aiohttp, the same answer aiohttp's path gives;
everything else handed to aiohttp on the same connection, from the first byte it did not take."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from multidict import CIMultiDict

from wwwproxy.proxy.replay import ToAiohttp
from wwwproxy.proxy.request_head import HeadReader
from wwwproxy.recording.engine import PSEUDONYM

from .conftest import LARGE_BODY, offline_with_copy, read_response


async def test_a_memory_hit_is_answered_by_the_fast_front_as_aiohttp_would(make_proxy, origin):
    proxy, url = await offline_with_copy(make_proxy, origin)
    front = proxy.running.front
    # a header the fast front leaves to aiohttp: this one is answered by aiohttp's path
    before = front.answered
    slow = await proxy.get(url, headers={"Proxy-Authorization": "Basic eDp5"})
    assert front.answered == before
    fast = await proxy.get(url)
    assert front.answered == before + 1
    assert (fast.status, fast.body) == (slow.status, slow.body) == (200, origin.HTML)
    ignore = {"date", "server", "age"}
    assert [(n, v) for n, v in fast.headers if n.lower() not in ignore] == [
        (n, v) for n, v in slow.headers if n.lower() not in ignore
    ]
    assert fast.header("X-Cache") == "HIT" and fast.header("Date")


async def test_pipelined_fast_slow_fast_on_one_connection(make_proxy, origin):
    proxy, url = await offline_with_copy(make_proxy, origin, queue_methods=("GET", "HEAD", "POST"))
    await proxy.get(url)  # into memory
    reader, writer = await proxy.connect_raw()
    try:
        get = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        post = (
            f"POST {origin.url('/form')} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        ).encode()
        writer.write(get + post + get)
        await writer.drain()
        first = await read_response(reader)
        second = await read_response(reader)  # aiohttp: offline, not cached: queued
        third = await read_response(reader)
    finally:
        writer.close()
    assert (first.status, first.body) == (200, origin.HTML)
    assert second.status == 503
    assert (third.status, third.body) == (200, origin.HTML)
    assert len(proxy.outgoing()) == 1


async def test_smuggling_attempts_after_a_fast_answer_are_refused(make_proxy, origin):
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)
    for attack in (
        f"GET {url} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        f"GET {url} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        f"GET {url} HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n",
        f"GET {url} HTTP/1.1\r\nHo st: x\r\n\r\n",
    ):
        fast = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n"
        reader, writer = await proxy.connect_raw()
        try:
            writer.write((fast + attack).encode())
            await writer.drain()
            first = await read_response(reader)
            second = await read_response(reader)
        finally:
            writer.close()
        assert (first.status, first.body) == (200, origin.HTML)
        assert second.status == 400, (attack, second)
    assert origin.hits["/page.html"] == 1  # offline: nothing reached the origin


async def test_http10_without_keep_alive_is_closed_after_the_answer(make_proxy, origin):
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(f"GET {url} HTTP/1.0\r\n\r\n".encode())
        answer = await asyncio.wait_for(reader.read(), 5)  # to the end: the proxy closes
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(origin.HTML)
    # HTTP/1.0 closes unless asked to keep alive: no Connection header, as aiohttp's path
    assert b"\r\nConnection:" not in answer


async def test_online_only_fresh_copies_are_answered_fast(make_proxy, origin):
    proxy = await make_proxy(request_changed=600)
    url = origin.url("/no-cache")  # the origin says no-cache: always asked
    await proxy.get(url)
    await proxy.recorded(url)
    before = proxy.running.front.answered
    again = await proxy.get(url)
    assert again.header("X-Cache") == "MISS" and proxy.running.front.answered == before
    fresh = origin.url("/max-age")
    await proxy.get(fresh)
    await proxy.recorded(fresh)
    await proxy.get(fresh)  # from disk into memory
    assert (await proxy.get(fresh)).header("X-Cache") == "HIT"
    assert proxy.running.front.answered > before


async def test_fast_answers_are_in_the_access_log(make_proxy, origin):
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)
    before = proxy.running.front.answered
    logged = len(proxy.access_lines())
    await proxy.get(url)
    await asyncio.sleep(0)
    assert proxy.running.front.answered == before + 1
    lines = proxy.access_lines()[logged:]
    assert len(lines) == 1, lines
    assert f'aiohttp.access INFO 127.0.0.1 "GET {url}" 200 ' in lines[0], lines
    assert lines[0].endswith(" HIT"), lines


async def test_a_copy_on_disk_is_read_in_and_answered_fast_on_the_same_connection(
    make_proxy, origin
):
    proxy, url = await offline_with_copy(make_proxy, origin)
    proxy.store.memory.clear()
    front = proxy.running.front
    before = front.answered
    reader, writer = await proxy.connect_raw()
    try:
        for _ in range(3):
            writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await writer.drain()
            reply = await read_response(reader)
            assert (reply.status, reply.body) == (200, origin.HTML)
        # a miss on the same connection goes to aiohttp (offline: queued)
        writer.write(f"GET {origin.url('/never')} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        assert (await read_response(reader)).status == 503
    finally:
        writer.close()
    assert front.answered == before + 3
    assert len(proxy.store.memory) == 1


async def test_with_the_memory_cache_off_copies_are_read_from_disk_and_answered_fast(
    make_proxy, origin
):
    proxy = await make_proxy(memory_cache_mb=0)
    url, large = origin.url("/page.html"), origin.url("/large")
    for page in (url, large):
        await proxy.get(page)
        await proxy.recorded(page)
    await proxy.control(mode="offline")
    front = proxy.running.front
    before = front.answered
    for _ in range(3):
        reply = await proxy.get(url)
        assert (reply.status, reply.body, reply.header("X-Cache")) == (200, origin.HTML, "HIT")
    assert front.answered == before + 3 and len(proxy.store.memory) == 0
    # over the size read whole (8 MiB): streamed by aiohttp's path, the same bytes
    reply = await proxy.get(large)
    assert (reply.status, reply.body) == (200, LARGE_BODY)
    assert front.answered == before + 3


async def test_bare_line_feeds_are_judged_by_aiohttp_at_once(make_proxy, origin):
    proxy, url = await offline_with_copy(make_proxy, origin)
    answer = await proxy.raw(f"GET {url} HTTP/1.1\nHost: x\n\n".encode(), timeout=5)
    # answered (served or refused) at once, not held until the idle timeout
    assert answer.startswith((b"HTTP/1.1 ", b"HTTP/1.0 400")), answer


async def test_an_idle_connection_is_closed(make_proxy, origin, monkeypatch):
    from wwwproxy.proxy import front

    monkeypatch.setattr(front, "IDLE_TIMEOUT", 0.3)
    proxy, url = await offline_with_copy(make_proxy, origin)
    reader, writer = await proxy.connect_raw()
    try:
        writer.write(b"GET http://example.com/ HTT")  # and nothing more
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the proxy
    finally:
        writer.close()


async def test_mutated_request_heads_never_crash_either_front(make_proxy, origin):
    """A seeded fuzz: heads of a cached GET with bytes flipped, cut or repeated.  Each gets an
    answer or a close, the log has no crash (make_proxy checks), and the page is still served
    afterwards."""
    import random

    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)
    good = f"GET {url} HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n".encode()
    rng = random.Random(20261123)
    specials = [b"\x00", b"\r", b"\n", b" ", b":", b"\t", b"\xff", b"%", b"\r\n\r\n", b"GET "]
    for _ in range(200):
        head = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(head))
            action = rng.random()
            if action < 0.4:
                head[at : at + 1] = rng.choice(specials)
            elif action < 0.7:
                del head[at : at + rng.randint(1, 8)]
            else:
                head[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        await proxy.raw(bytes(head), timeout=0.05)  # incomplete heads wait: do not
    again = await proxy.get(url)
    assert (again.status, again.body) == (200, origin.HTML)


# --- the request head as the fast front reads it -------------------------------------------

HEAD_CASES = [
    # (the header lines, what the case is about)
    ("Host: x", "one header"),
    ("Host: x\r\nCache-Control: max-age=0\r\ncache-control: no-cache", "the first of a name"),
    ("Host: x\r\nPRAGMA: no-cache", "any case"),
    ("Host: x\r\nAccept-Encoding: gzip\r\nAccept-Encoding: br", "first of a repeated one"),
    ('Host: x\r\nRange: bytes=0-1\r\nIf-None-Match: "a"', "conditional"),
    ("Host: x\r\nVia: 1.1 other\r\nVia: 1.1 wwwproxy", "our Via in a second header"),
    ("Host: x\r\nvia: 1.1 wwwproxy, 1.0 other", "our Via first"),
    ("Host: x\r\nVia: 1.1 other", "someone else's Via"),
    ("Host: x\r\nX-Empty:", "an empty value"),
]


@pytest.mark.parametrize(("lines", "about"), HEAD_CASES, ids=[c[1] for c in HEAD_CASES])
def test_the_parsed_head_notes_conditions_and_loops_in_any_header(lines: str, about: str) -> None:
    """The fast front's parser callbacks note the browser's own conditions and our own
    pseudonym in any Via header (a request come back through us): both keep the request
    off the plain fast answer."""
    parsed = HeadReader()
    read = parsed.read(f"GET http://example.com/ HTTP/1.1\r\n{lines}\r\n\r\n".encode())
    assert parsed.complete
    full = CIMultiDict(parsed.headers)
    assert parsed.conditional == any(n.lower() in ("range", "if-none-match") for n in full)
    looped = any("wwwproxy" in v for n, v in full.items() if n.lower() == "via")
    assert (read is ToAiohttp.LOOP) == looped


async def test_a_request_that_came_through_this_proxy_is_left_to_aiohttp(make_proxy, origin):
    """Our pseudonym in any Via header (a loop): the fast front does not answer it."""
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)  # into memory
    front = proxy.running.front
    before = front.answered
    await proxy.get(url, headers=[("Via", "1.1 other"), ("Via", f"1.1 {PSEUDONYM}")])
    assert front.answered == before
    assert (await proxy.get(url)).status == 200
    assert front.answered == before + 1


async def test_a_reload_that_stops_caching_a_url_stops_its_fast_answers(make_proxy, origin):
    """Which targets the fast front may answer is remembered per configuration: a reload
    that puts the URL under dont_cache is obeyed at once."""
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)  # into memory
    front = proxy.running.front
    before = front.answered
    assert (await proxy.get(url)).header("X-Cache") == "HIT"
    assert front.answered == before + 1
    services = proxy.running.services
    services.reload(dataclasses.replace(services.config, dont_cache=(url,)))
    await proxy.get(url)
    assert front.answered == before + 1


async def test_answers_within_one_second_share_a_head_and_age_counts_on(make_proxy, origin):
    """The usual head (HTTP/1.1, keep-alive) is made once per second of Date and of time in
    the cache: two answers in a row carry the same Date and Age as a fresh rendering would,
    and an answer a second later an Age one higher or more."""
    proxy, url = await offline_with_copy(make_proxy, origin)
    await proxy.get(url)  # into memory
    first = await proxy.get(url)
    second = await proxy.get(url)
    assert first.status == second.status == 200
    if first.header("Date") == second.header("Date"):
        assert int(second.header("Age")) - int(first.header("Age")) in (0, 1)
    await asyncio.sleep(1.1)
    later = await proxy.get(url)
    assert int(later.header("Age")) >= int(first.header("Age")) + 1
