"""A real browser posts a comment and then sees it (issue 26): headless Chromium, driven over
its DevTools protocol as a user would drive it (typing, clicking), browses a comment thread
through the proxy with the shipped caching (RFC 9111).  The thread page is fresh for an hour,
so the proxy serves it from its cache; only because the POST invalidates the stored copy
(RFC 9111 §4.4) does the next plain navigation to it ask the origin again and show the new
comment.

Chromium sends ``Cache-Control: max-age=0`` with a form's POST and keeps it on the GET a
``303`` leads to, so when the redirect goes back to the thread itself that GET revalidates
whether or not the proxy invalidated anything: that case checks the proxy honours it.  When
the POST answers with the page itself, or redirects to a thank-you page, the user then follows
a plain link to the thread, and only the invalidation makes the proxy ask the origin.

Hermetic: Chromium resolves no name (``--host-resolver-rules``) and the proxy reaches nothing
but the test origin (any other host goes to an upstream proxy on the discard port, which
refuses).  Chromium's own HTTP cache is emptied before the navigations that must reach the
proxy; across the POST it is left alone, as a user's would be (Chromium drops its own copy of
a URL a POST to it succeeded on).
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from .chromium import hermetic_chromium
from .conftest import serving
from .devtools import DevTools, devtools

STEP_TIMEOUT = 20
THREAD = "/thread"
THANKS = "/thanks"
THANKS_PAGE = (
    '<!DOCTYPE html><html><head><title>Thank you</title><link rel="icon" href="data:,"></head>'
    '<body><p id="thanks">Thank you for your comment.</p>'
    '<p><a id="back" href="/thread">Back to the thread</a></p></body></html>'
)
FIRST = "Hello, first comment."
NEW = "A comment posted from the browser <b>with markup</b>."


@dataclass
class Thread:
    """An origin with one comment thread: ``GET /thread`` lists the comments (fresh for an
    hour, with an ETag that changes with them), ``POST /thread`` adds one and answers as
    ``answer`` says: ``303 See Other`` back to the thread (``"thread"``) or to a thank-you page
    that links to it (``"thanks"``), or ``200`` with the updated page itself (``"page"``)."""

    answer: str
    comments: list[str] = field(default_factory=lambda: [FIRST])
    #: (method, If-None-Match) of every request for the thread, in order
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    port: int = 0

    def url(self, path: str = THREAD) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def etag(self) -> str:
        return f'"comments-{len(self.comments)}"'

    def gets(self) -> list[str | None]:
        """The If-None-Match of each GET the origin answered (None: an unconditional one)."""
        return [validator for method, validator in self.seen if method == "GET"]

    def page(self) -> str:
        items = "".join(f"<li>{html.escape(c)}</li>" for c in self.comments)
        return (
            '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Thread</title>'
            '<link rel="icon" href="data:,"></head><body><h1>Thread</h1>'
            f'<ul id="comments">{items}</ul>'
            '<form method="post" action="/thread"><textarea name="comment"></textarea>'
            '<button id="send" type="submit">Post comment</button></form>'
            '<p><a id="back" href="/thread">Back to the thread</a></p></body></html>'
        )

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.headers.get("If-None-Match")))
        if request.method == "POST":
            form = await request.post()
            self.comments.append(str(form["comment"]))
            if self.answer == "page":
                return web.Response(text=self.page(), content_type="text/html")
            where = THREAD if self.answer == "thread" else THANKS
            return web.Response(status=303, headers={"Location": where}, text="see other")
        cache = {"Cache-Control": "max-age=3600", "ETag": self.etag}
        if request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=304, headers=cache)
        return web.Response(text=self.page(), content_type="text/html", headers=cache)


async def thanks(request: web.Request) -> web.Response:
    return web.Response(text=THANKS_PAGE, content_type="text/html")


@contextlib.asynccontextmanager
async def thread_origin(answer: str) -> AsyncIterator[Thread]:
    thread = Thread(answer)
    app = web.Application()
    app.router.add_route("*", THREAD, thread.handle)
    app.router.add_get(THANKS, thanks)
    async with serving(app) as thread.port:
        yield thread


async def goto(page: DevTools, url: str) -> None:
    """A plain navigation, as typing the URL: no reload, no cache-control of its own."""
    await page.navigate(url, transitionType="typed")


async def click(page: DevTools, selector: str) -> None:
    """A mouse click on the element, and the page load it leads to."""
    await page.until_loaded(page.click(selector))


async def comments(page: DevTools) -> list[str]:
    return await page.evaluate(
        "[...document.querySelectorAll('#comments li')].map(li => li.textContent)"
    )


async def forget_cache(page: DevTools) -> None:
    """Empty Chromium's own HTTP cache, so that the next navigation reaches the proxy."""
    await page.send("Network.clearBrowserCache")


@contextlib.asynccontextmanager
async def browser(tmp_path: Path, proxy_port: int) -> AsyncIterator[DevTools]:
    """One headless Chromium page, navigated, typed into and clicked as a user would."""
    profile = tmp_path / "chromium-profile"
    async with hermetic_chromium(profile, proxy_port) as process:
        async with devtools(profile, process, STEP_TIMEOUT) as page:
            await page.send("Page.enable")
            yield page


@pytest.mark.parametrize("answer", ["thread", "thanks", "page"])
async def test_a_posted_comment_shows_on_the_next_plain_navigation(make_proxy, tmp_path, answer):
    async with thread_origin(answer) as thread:
        proxy = await make_proxy(upstream_proxy="http://127.0.0.1:9", no_proxy=("127.0.0.1",))
        async with browser(tmp_path, proxy.port) as page:
            await goto(page, thread.url())  # the first visit: fetched and recorded
            assert await comments(page) == [FIRST]
            await proxy.recorded(thread.url())
            old_etag = thread.etag

            await forget_cache(page)
            await goto(page, thread.url())  # served by the proxy's cache: the page is fresh
            assert await comments(page) == [FIRST]
            assert thread.gets() == [None]
            assert sum(THREAD in line for line in proxy.access_lines()) == 2

            await page.insert_text("textarea", NEW)
            await click(page, "#send")  # the POST, and the GET its 303 leads to
            if answer == "page":
                assert await comments(page) == [FIRST, NEW]  # the POST's own answer
            if answer == "thanks":
                assert await page.evaluate("document.title") == "Thank you"
            if answer != "thread":
                await click(page, "#back")  # a plain link to the thread, not a reload
            assert await comments(page) == [FIRST, NEW]
            assert [method for method, _ in thread.seen] == ["GET", "POST", "GET"]
            assert thread.gets() == [None, old_etag]  # the proxy revalidated its stale copy

            await proxy.recorded(thread.url(), count=4)
            await forget_cache(page)
            await goto(page, thread.url())  # the new copy, from the proxy's cache again
            assert await comments(page) == [FIRST, NEW]
            assert thread.gets() == [None, old_etag]
