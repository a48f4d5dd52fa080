"""What the fast front keeps between requests (request heads as parsed, decisions per copy
and head, the joined answer per second) gives what working it out anew gives."""

from __future__ import annotations

import dataclasses

import pytest

from wwwproxy.http.policy import Action
from wwwproxy.proxy.front import KEPT_HEAD, FastFront, _action
from wwwproxy.proxy.replay import RenderedHead, ToAiohttp
from wwwproxy.proxy.request_head import ParsedHead
from wwwproxy.recording.engine import PSEUDONYM

from .conftest import offline_with_copy, read_response


async def offline_in_memory(make_proxy, origin, path: str = "/page.html"):  # noqa: ANN001, ANN201
    proxy, url = await offline_with_copy(make_proxy, origin, path)
    await proxy.get(url)  # from disk into memory
    return proxy, url


def connection(proxy) -> FastFront:  # noqa: ANN001
    """A fast-front connection object, as a browser at 127.0.0.1 would get (its parsing
    needs no socket)."""
    conn = FastFront(proxy.running.front)
    conn.peer = "127.0.0.1"
    return conn


def heads(url: str) -> list[tuple[bytes, bool]]:
    """(request head, one the fast path may take)."""
    return [
        (f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), True),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(), True),
        (f"GET {url} HTTP/1.0\r\n\r\n".encode(), True),
        (f"GET {url} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".encode(), True),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nCache-Control: no-cache\r\n\r\n".encode(), True),
        (f'GET {url} HTTP/1.1\r\nHost: x\r\nIf-None-Match: "a"\r\n\r\n'.encode(), True),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n".encode(), True),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nX-Pad: {'p' * KEPT_HEAD}\r\n\r\n".encode(), True),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode(), False),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode(), False),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n".encode(), False),
        (f"GET {url} HTTP/1.1\r\nHost: x\r\nVia: 1.1 {PSEUDONYM}\r\n\r\n".encode(), False),
        (f"GET {url} HTTP/1.1\r\nHo st: x\r\n\r\n".encode(), False),
        (f"GET {url} HTTP/2.0\r\nHost: x\r\n\r\n".encode(), False),
        (f"POST {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), False),
    ]


async def test_a_kept_head_is_what_parsing_it_anew_gives(make_proxy, origin):
    """The same object comes back for the same bytes, equal to a fresh connection's parse
    with nothing kept; heads the fast path does not take, and long ones, are never kept."""
    proxy, url = await offline_in_memory(make_proxy, origin)
    front = proxy.running.front
    for head, fast in heads(url):
        # a connection each (one that asked with Connection: close asks no more)
        first = connection(proxy)._parse(head)
        again = connection(proxy)._parse(head)
        front.heads.clear()
        fresh = connection(proxy)._parse(head)
        front.heads.clear()
        assert [isinstance(p, ParsedHead) for p in (first, again, fresh)] == [fast] * 3, head
        if not fast:
            continue
        if len(head) <= KEPT_HEAD:
            assert again is first
            # what is kept about a head elsewhere is kept by its serial: never another's
            assert first.serial and fresh.serial and fresh.serial != first.serial
        else:
            assert first.serial == again.serial == 0
        fields = ("target", "header_list", "version", "keep_alive", "conditional")
        for parsed in (again, fresh):
            assert [getattr(parsed, f) for f in fields] == [getattr(first, f) for f in fields]
            assert list(parsed.headers.items()) == list(first.headers.items())
    for head, _ in heads(url):  # each once more, as they come: only short fast ones kept
        connection(proxy)._parse(head)
    assert set(front.heads) == {h for h, fast in heads(url) if fast and len(h) <= KEPT_HEAD}


async def test_the_kept_heads_stay_within_their_bytes(make_proxy, origin, monkeypatch):
    """Heads are kept up to HEAD_BYTES_KEPT bytes in all, then forgotten at once; each is
    still parsed, kept or not."""
    from wwwproxy.proxy import front as front_module

    monkeypatch.setattr(front_module, "HEAD_BYTES_KEPT", 400)
    proxy, url = await offline_in_memory(make_proxy, origin)
    front = proxy.running.front
    front.heads.clear()
    front.head_bytes = 0
    sizes = []
    for i in range(40):
        head = f"GET {url}?q={i} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        request = connection(proxy)._parse(head)
        assert isinstance(request, ParsedHead) and request.target == f"{url}?q={i}"
        assert head in front.heads
        assert front.head_bytes == sum(len(h) for h in front.heads) <= 400
        sizes.append(len(front.heads))
    assert max(sizes) > 1 and sizes.count(1) >= 2  # kept several, forgotten more than once


async def test_a_kept_head_is_not_for_a_client_that_is_not_allowed(make_proxy, origin):
    """The client check is made per connection, before the kept heads are looked at."""
    proxy, url = await offline_in_memory(make_proxy, origin)
    head = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    assert isinstance(connection(proxy)._parse(head), ParsedHead)
    stranger = FastFront(proxy.running.front)
    stranger.peer = "192.0.2.7"
    assert stranger._parse(head) is ToAiohttp.CLIENT


async def test_kept_decisions_are_the_policys_in_every_mode(make_proxy, origin):
    """Offline, a decision is kept with the copy per head; it equals what the policy says
    asked anew, and in the other modes it is asked every time (they depend on the time)."""
    proxy, url = await offline_in_memory(make_proxy, origin)
    running = proxy.running
    server, store = running.server, running.services.store
    for mode in ("offline", "online", "autodial", "offline"):
        await proxy.control(mode=mode)
        for head, fast in heads(url):
            request = connection(proxy)._parse(head)
            if not fast or not isinstance(request, ParsedHead):
                continue
            url_of = running.front.route(request.target)
            cached = store.lookup_hot(url_of, url_of.file, request.header_list)
            assert cached is not None
            asked = server.action_for(url_of, "GET", request.headers, cached)
            assert _action(server, request, url_of, cached) is asked  # maybe kept now
            assert _action(server, request, url_of, cached) is asked  # maybe from the kept
            kept = cached.memo.get("front.actions")
            now_kept = kept is not None and kept[0] == mode and request.serial in kept[2]
            assert now_kept == (mode == "offline" and len(head) <= KEPT_HEAD)
            if b"no-cache" in head:
                assert asked is (Action.SERVE_AND_QUEUE if mode == "offline" else asked)


async def test_a_forced_reload_offline_is_queued_after_fast_answers_of_the_same_copy(
    make_proxy, origin
):
    """On one connection: a plain hit (fast, its decision kept), a forced reload (queued,
    by aiohttp's path, which keeps the connection), a plain hit (aiohttp's); then a plain
    hit on a new connection is fast again, until a reload of the configuration."""
    proxy, url = await offline_in_memory(make_proxy, origin)
    front = proxy.running.front
    plain = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    reload = f"GET {url} HTTP/1.1\r\nHost: x\r\nCache-Control: no-cache\r\n\r\n".encode()
    before, queued = front.answered, len(proxy.outgoing())
    reader, writer = await proxy.connect_raw()
    try:
        answers = []
        for head in (plain, reload, plain):
            writer.write(head)
            await writer.drain()
            answers.append(await read_response(reader))
    finally:
        writer.close()
    assert [a.status for a in answers] == [200, 200, 200]
    assert all(a.body == origin.HTML for a in answers)
    assert front.answered == before + 1
    assert len(proxy.outgoing()) == queued + 1  # the forced reload queued a refresh
    assert (await proxy.get(url)).body == origin.HTML
    assert front.answered == before + 2
    services = proxy.running.services
    services.reload(dataclasses.replace(services.config, dont_cache=(url,)))
    await proxy.get(url)
    assert front.answered == before + 2


@pytest.mark.parametrize("later", [0.0, 0.4, 0.999, 1.0, 1.5, 61.2, 3600.7])
async def test_the_joined_answer_is_the_head_and_body_made_anew(make_proxy, origin, later):
    """The HTTP/1.1 keep-alive answer kept per second equals the head rendered anew for
    that moment with the body after it, as a copy never answered before would have it."""
    proxy, url = await offline_in_memory(make_proxy, origin)
    request = connection(proxy)._parse(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert isinstance(request, ParsedHead)
    url_of = proxy.running.front.route(request.target)
    cached = proxy.running.services.store.lookup_hot(url_of, url_of.file, request.header_list)
    rendered = RenderedHead.of(cached)
    start = cached.date.timestamp() + 5.25
    for now in (start, start + later, start + later, start + 2 * later):
        joined = rendered.usual(now)
        anew = RenderedHead(cached)
        assert joined == anew.head("1.1", True, now) + cached.body
        assert joined == rendered.head("1.1", True, now) + cached.body
        for version, keep_alive in (("1.1", False), ("1.0", False), ("1.0", True)):
            assert rendered.head(version, keep_alive, now) == anew.head(version, keep_alive, now)
