"""Offline reading end to end: HTML served from the cache has its links marked cached / not
cached (and scripts, meta refresh, new-window targets made inert when asked), on both fronts,
offline and online; the answer is what it says (decoded, its length, its charset, no ETag); the
WARC keeps the origin's bytes."""

from __future__ import annotations

import gzip
import re
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from wwwproxy.config import ModifyHTMLRule
from wwwproxy.http.modify_html import MAX_HTML, MAX_MARKED_LINKS, STYLE

from .conftest import TIMEOUT

PAGE = (
    b"<!DOCTYPE html><html><head><title>Index</title>"
    b'<meta http-equiv="refresh" content="30;url=/next.html">'
    b'<script src="/app.js"></script></head><body>'
    b'<a href="cached.html">cached</a> <a href="/missing.html" target="_blank">missing</a> '
    b'<a href="mailto:me@example.org">mail</a> <a href="#top">top</a>'
    b"<p>Caf\xc3\xa9</p></body></html>"
)
LATIN1 = b'<html><body><p>Caf\xe9</p><a href="cached.html">c</a></body></html>'
XHTML = (
    b'<html xmlns="http://www.w3.org/1999/xhtml"><body><a href="cached.html">c</a></body></html>'
)


def rules(**flags: bool) -> tuple[ModifyHTMLRule, ...]:
    return (ModifyHTMLRule("/site/", re.compile("/site/"), **flags),)


ROUTES: dict[str, tuple[bytes, dict[str, str]]] = {
    "/site/index.html": (
        PAGE,
        {
            "Content-Type": "text/html; charset=utf-8",
            "ETag": '"page-v1"',
            "Last-Modified": "Tue, 01 Oct 2024 10:00:00 GMT",
            "Refresh": "60",
        },
    ),
    "/site/cached.html": (b"<p>here</p>", {"Content-Type": "text/html"}),
    "/site/gzip.html": (
        gzip.compress(PAGE, mtime=0),
        {"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"},
    ),
    "/site/latin1.html": (LATIN1, {"Content-Type": "text/html; charset=iso-8859-1"}),
    "/site/page.xhtml": (XHTML, {"Content-Type": "application/xhtml+xml"}),
    "/site/plain.txt": (b'<a href="cached.html">not html</a>', {"Content-Type": "text/plain"}),
    "/other/index.html": (PAGE, {"Content-Type": "text/html; charset=utf-8"}),
    "/site/big.html": (
        b"<html><body><script>alert(1)</script>" + b"<p>x</p>" * (MAX_HTML // 8) + b"</body>",
        {"Content-Type": "text/html"},
    ),
    "/site/many.html": (
        b"<html><body>" + b'<a href="p.html">p</a>' * (MAX_MARKED_LINKS + 1) + b"</body>",
        {"Content-Type": "text/html"},
    ),
}


class Site:
    """A local origin serving ROUTES as they are (bytes and headers)."""

    def __init__(self) -> None:
        self.port = 0
        self.runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.Response:
        body, headers = ROUTES[request.path]
        return web.Response(body=body, headers=headers)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    s = Site()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def record(proxy, site: Site, *paths: str) -> None:
    for path in paths:
        reply = await proxy.get(site.url(path))
        assert reply.status == 200 and reply.header("X-Cache") == "MISS", path
        await proxy.recorded(site.url(path))


async def offline(proxy, site: Site) -> None:
    await proxy.control(mode="offline")
    await site.stop()


def link(body: str, text: str) -> str:
    """The start tag of the link whose text is ``text``."""
    m = re.search(r"<a [^>]*>" + re.escape(text) + "</a>", body)
    assert m is not None, body
    return m.group(0)


async def test_offline_links_are_marked_and_the_warc_keeps_the_origin_bytes(make_proxy, site):
    proxy = await make_proxy(modify_html=rules())
    await record(proxy, site, "/site/index.html", "/site/cached.html")
    await offline(proxy, site)
    reply = await proxy.get(site.url("/site/index.html"))
    assert reply.status == 200 and reply.header("X-Cache") == "HIT"
    body = reply.body.decode("utf-8")
    assert link(body, "cached") == '<a class="wwwproxy-cached" href="cached.html">cached</a>'
    assert link(body, "missing") == (
        '<a class="wwwproxy-uncached" title="not in the cache" '
        'href="/missing.html" target="_blank">missing</a>'
    )
    # not web links, or this very page: not marked
    assert '<a href="mailto:me@example.org">mail</a> <a href="#top">top</a>' in body
    assert body.count(STYLE) == 1 and body.index(STYLE) < body.index("<a ")
    # only links were asked for: scripts, refresh and targets are as the origin sent them
    assert '<script src="/app.js">' in body and 'http-equiv="refresh"' in body
    assert reply.header("Refresh") == "60"
    assert reply.header("Content-Length") == str(len(reply.body))
    assert reply.header("Content-Type") == "text/html; charset=utf-8"
    assert reply.header("ETag") is None and reply.header("Last-Modified") is None
    assert reply.header("Content-Security-Policy") is None
    # with the marks taken out, the page is the origin's, byte for byte
    unmarked = body.replace(STYLE, "").replace(' class="wwwproxy-cached"', "")
    unmarked = unmarked.replace(' class="wwwproxy-uncached" title="not in the cache"', "")
    assert unmarked.encode() == PAGE
    # and the archive has what the origin sent, not what was served
    records = proxy.records(site.url("/site/index.html"))
    assert [r.payload for r in records if r.rec_type == "response"] == [PAGE]


async def test_scripts_refresh_and_popups_disabled_when_asked(make_proxy, site):
    proxy = await make_proxy(
        modify_html=rules(
            mark_links=False, disable_scripts=True, disable_meta_refresh=True, disable_popups=True
        )
    )
    await record(proxy, site, "/site/index.html")
    await offline(proxy, site)
    reply = await proxy.get(site.url("/site/index.html"))
    body = reply.body.decode("utf-8")
    assert '<script type="text/x-wwwproxy-disabled" src="/app.js">' in body
    assert '<meta http-equiv="x-wwwproxy-disabled-refresh" http-equiv="refresh"' in body
    assert (
        link(body, "missing")
        == '<a target="_self" href="/missing.html" target="_blank">missing</a>'
    )
    assert "wwwproxy-cached" not in body and STYLE not in body
    assert reply.header("Content-Security-Policy") == "script-src 'none'"
    assert reply.header("Refresh") is None
    assert reply.header("Content-Length") == str(len(reply.body))


async def test_online_cache_hits_are_changed_and_fetches_are_not(make_proxy, site):
    proxy = await make_proxy(modify_html=rules(), request_changed=3600)
    first = await proxy.get(site.url("/site/index.html"))  # fetched: as the origin sent it
    assert first.header("X-Cache") == "MISS" and first.body == PAGE
    assert first.header("ETag") == '"page-v1"'
    await proxy.recorded(site.url("/site/index.html"))
    hit = await proxy.get(site.url("/site/index.html"))  # fresh: from the cache, changed
    assert hit.header("X-Cache") == "HIT"
    assert 'class="wwwproxy-uncached"' in hit.body.decode()
    # a URL no rule matches, and what is not text/html, are served as they are
    for path, body in (("/other/index.html", PAGE), ("/site/page.xhtml", XHTML)):
        await record(proxy, site, path)
        again = await proxy.get(site.url(path))
        assert again.header("X-Cache") == "HIT" and again.body == body, path
    await record(proxy, site, "/site/plain.txt")
    again = await proxy.get(site.url("/site/plain.txt"))
    assert again.body == ROUTES["/site/plain.txt"][0]


async def test_a_gzip_page_is_sent_decoded_and_changed(make_proxy, site):
    proxy = await make_proxy(modify_html=rules())
    await record(proxy, site, "/site/gzip.html", "/site/cached.html")
    await offline(proxy, site)
    reply = await proxy.get(site.url("/site/gzip.html"), headers={"Accept-Encoding": "gzip"})
    assert reply.header("Content-Encoding") is None
    assert reply.header("Content-Length") == str(len(reply.body))
    body = reply.body.decode("utf-8")
    assert '<a class="wwwproxy-cached" href="cached.html">' in body
    assert "<p>Caf\u00e9</p>" in body
    records = proxy.records(site.url("/site/gzip.html"))
    assert [r.payload for r in records if r.rec_type == "response"] == [
        gzip.compress(PAGE, mtime=0)
    ]


async def test_another_charset_is_sent_as_utf8_saying_so(make_proxy, site):
    proxy = await make_proxy(modify_html=rules())
    await record(proxy, site, "/site/latin1.html")
    await offline(proxy, site)
    reply = await proxy.get(site.url("/site/latin1.html"))
    assert reply.header("Content-Type") == "text/html; charset=utf-8"
    body = reply.body.decode("utf-8")  # strict: it is UTF-8
    assert "<p>Caf\u00e9</p>" in body
    assert '<a class="wwwproxy-uncached" title="not in the cache" href="cached.html">' in body


async def test_range_and_head_and_conditional_requests(make_proxy, site):
    proxy = await make_proxy(modify_html=rules())
    await record(proxy, site, "/site/index.html")
    await offline(proxy, site)
    whole = await proxy.get(site.url("/site/index.html"))
    ranged = await proxy.get(site.url("/site/index.html"), headers={"Range": "bytes=0-9"})
    assert ranged.status == 200 and ranged.body == whole.body
    assert ranged.header("Accept-Ranges") is None
    head = await proxy.get(site.url("/site/index.html"), method="HEAD")
    assert head.status == 200 and head.body == b""
    assert head.header("Content-Length") == str(len(whole.body))
    # a browser holding the copy it fetched (the recorded validators) is told 304: it has the page
    cond = await proxy.get(site.url("/site/index.html"), headers={"If-None-Match": '"page-v1"'})
    assert cond.status == 304 and cond.body == b""


async def test_the_fast_front_leaves_changed_pages_to_the_rewrite(make_proxy, site):
    proxy = await make_proxy(modify_html=rules())
    await record(proxy, site, "/site/index.html", "/other/index.html")
    await offline(proxy, site)
    front = proxy.running.front
    for path in ("/site/index.html", "/other/index.html"):
        await proxy.get(site.url(path))  # into memory
    before = front.answered
    marked = await proxy.get(site.url("/site/index.html"))
    assert front.answered == before  # not the fast front's memory copy ...
    assert 'class="wwwproxy-uncached"' in marked.body.decode()  # ... but the changed page
    plain = await proxy.get(site.url("/other/index.html"))
    assert front.answered == before + 1 and plain.body == PAGE  # a page no rule matches


async def test_a_new_capture_of_a_linked_page_changes_its_mark(make_proxy, site):
    proxy = await make_proxy(modify_html=rules())
    await record(proxy, site, "/site/index.html")
    await proxy.control(mode="offline")
    before = (await proxy.get(site.url("/site/index.html"))).body.decode()
    assert '<a class="wwwproxy-uncached" title="not in the cache" href="cached.html">' in before
    await proxy.control(mode="online")
    await record(proxy, site, "/site/cached.html")
    await offline(proxy, site)
    after = (await proxy.get(site.url("/site/index.html"))).body.decode()
    assert '<a class="wwwproxy-cached" href="cached.html">' in after


async def test_a_stored_page_that_does_not_decode_is_served_as_it_is(make_proxy, site, caplog):
    """A gzip body that is not gzip: the rewrite gives up (a warning), the copy goes out as
    the archive has it, to a browser that takes gzip."""
    ROUTES["/site/broken.html"] = (
        b"not gzip at all",
        {"Content-Type": "text/html", "Content-Encoding": "gzip"},
    )
    try:
        proxy = await make_proxy(modify_html=rules())
        await record(proxy, site, "/site/broken.html")
        await offline(proxy, site)
        async with proxy.session(timeout=TIMEOUT) as s:
            reply = await proxy.request(
                s, "GET", site.url("/site/broken.html"), headers={"Accept-Encoding": "gzip"}
            )
        assert reply.status == 200 and reply.body == b"not gzip at all"
        assert reply.header("Content-Encoding") == "gzip"
        assert any(
            "served" in r.getMessage() and "unmodified" in r.getMessage() for r in caplog.records
        )
    finally:
        del ROUTES["/site/broken.html"]


async def test_scripts_stay_off_on_copies_served_unchanged(make_proxy, site):
    """With disable_scripts, a copy the rewrite does not change (too large, XHTML, not HTML)
    still carries the Content-Security-Policy, on both fronts (found by a review: the policy
    went only with changed pages)."""
    proxy = await make_proxy(modify_html=rules(mark_links=False, disable_scripts=True))
    paths = ("/site/big.html", "/site/page.xhtml", "/site/plain.txt", "/site/index.html")
    await record(proxy, site, *paths)
    await offline(proxy, site)
    for _ in range(2):  # the second time from memory: the fast front hands them on
        for path in paths:
            reply = await proxy.get(site.url(path))
            assert reply.status == 200, path
            assert reply.header("Content-Security-Policy") == "script-src 'none'", path
    big = await proxy.get(site.url("/site/big.html"))
    assert big.body == ROUTES["/site/big.html"][0]  # too large to change: as recorded


async def test_a_page_with_too_many_links_is_not_marked(make_proxy, site):
    proxy = await make_proxy(modify_html=rules(disable_popups=True))
    await record(proxy, site, "/site/many.html")
    await offline(proxy, site)
    reply = await proxy.get(site.url("/site/many.html"))
    assert reply.status == 200 and b"wwwproxy-cached" not in reply.body
    assert b"wwwproxy-uncached" not in reply.body
