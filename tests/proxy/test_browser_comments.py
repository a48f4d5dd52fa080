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

import asyncio
import contextlib
import html
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from .chromium import devtools_endpoint, hermetic_chromium
from .conftest import serving

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


class Browser:
    """One headless Chromium page driven over the DevTools protocol (a WebSocket that
    aiohttp opens): navigated, typed into and clicked as a user would."""

    def __init__(self, process: asyncio.subprocess.Process, http: aiohttp.ClientSession) -> None:
        self.process = process
        self.http = http
        self.socket: aiohttp.ClientWebSocketResponse | None = None
        self.session_id: str | None = None
        self.ids = itertools.count(1)
        self.replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.waiting: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self.reader: asyncio.Task[None] | None = None

    async def connect(self, profile: Path) -> None:
        """Attach to the page Chromium opened (its DevTools port is in the profile)."""
        port, path = await devtools_endpoint(profile, self.process, STEP_TIMEOUT)
        self.socket = await self.http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self.reader = asyncio.create_task(self._read())
        targets = await self.send("Target.getTargets", browser=True)
        page = next(t for t in targets["targetInfos"] if t["type"] == "page")
        attached = await self.send(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, browser=True
        )
        self.session_id = attached["sessionId"]
        await self.send("Page.enable")

    async def _read(self) -> None:
        assert self.socket is not None
        async for message in self.socket:
            data = json.loads(message.data)
            if "id" in data:
                reply = self.replies.pop(data["id"])
                if "error" in data:
                    reply.set_exception(RuntimeError(f"DevTools: {data['error']}"))
                else:
                    reply.set_result(data.get("result", {}))
            for waiter in self.waiting.pop(data.get("method", ""), []):
                waiter.set_result(data.get("params", {}))

    async def send(
        self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False
    ) -> dict[str, Any]:
        """One DevTools command, to the page (or the ``browser``); its result."""
        assert self.socket is not None
        number = next(self.ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if not browser:
            message["sessionId"] = self.session_id
        reply = self.replies[number] = asyncio.get_running_loop().create_future()
        await self.socket.send_json(message)
        return await asyncio.wait_for(reply, STEP_TIMEOUT)

    def event(self, method: str) -> asyncio.Future[dict[str, Any]]:
        """The next ``method`` event (asked for before what causes it)."""
        waiter = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(method, []).append(waiter)
        return waiter

    async def loaded(self, action: Any) -> None:
        """Await ``action`` and then the load of the page it navigated to."""
        load = self.event("Page.loadEventFired")
        await action
        await asyncio.wait_for(load, STEP_TIMEOUT)

    async def goto(self, url: str) -> None:
        """A plain navigation, as typing the URL: no reload, no cache-control of its own."""
        await self.loaded(self.send("Page.navigate", {"url": url, "transitionType": "typed"}))

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}
        )
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def type_into(self, selector: str, text: str) -> None:
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        await self.send("Input.insertText", {"text": text})

    async def click(self, selector: str) -> None:
        """A mouse click in the middle of the element, and the page load it leads to."""
        box = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        x, y = box
        common = {"x": x, "y": y, "button": "left", "clickCount": 1}

        async def press_and_release() -> None:
            await self.send("Input.dispatchMouseEvent", {"type": "mousePressed", **common})
            await self.send("Input.dispatchMouseEvent", {"type": "mouseReleased", **common})

        await self.loaded(press_and_release())

    async def comments(self) -> list[str]:
        return await self.evaluate(
            "[...document.querySelectorAll('#comments li')].map(li => li.textContent)"
        )

    async def forget_cache(self) -> None:
        """Empty Chromium's own HTTP cache, so that the next navigation reaches the proxy."""
        await self.send("Network.clearBrowserCache")


@contextlib.asynccontextmanager
async def browser(tmp_path: Path, proxy_port: int) -> AsyncIterator[Browser]:
    profile = tmp_path / "chromium-profile"
    async with hermetic_chromium(profile, proxy_port) as process:
        async with aiohttp.ClientSession() as http:
            driver = Browser(process, http)
            await driver.connect(profile)
            try:
                yield driver
            finally:
                if driver.reader is not None:
                    driver.reader.cancel()
                if driver.socket is not None:
                    await driver.socket.close()


@pytest.mark.parametrize("answer", ["thread", "thanks", "page"])
async def test_a_posted_comment_shows_on_the_next_plain_navigation(make_proxy, tmp_path, answer):
    async with thread_origin(answer) as thread:
        proxy = await make_proxy(upstream_proxy="http://127.0.0.1:9", no_proxy=("127.0.0.1",))
        async with browser(tmp_path, proxy.port) as page:
            await page.goto(thread.url())  # the first visit: fetched and recorded
            assert await page.comments() == [FIRST]
            await proxy.recorded(thread.url())
            old_etag = thread.etag

            await page.forget_cache()
            await page.goto(thread.url())  # served by the proxy's cache: the page is fresh
            assert await page.comments() == [FIRST]
            assert thread.gets() == [None]
            assert sum(THREAD in line for line in proxy.access_lines()) == 2

            await page.type_into("textarea", NEW)
            await page.click("#send")  # the POST, and the GET its 303 leads to
            if answer == "page":
                assert await page.comments() == [FIRST, NEW]  # the POST's own answer
            if answer == "thanks":
                assert await page.evaluate("document.title") == "Thank you"
            if answer != "thread":
                await page.click("#back")  # a plain link to the thread, not a reload
            assert await page.comments() == [FIRST, NEW]
            assert [method for method, _ in thread.seen] == ["GET", "POST", "GET"]
            assert thread.gets() == [None, old_etag]  # the proxy revalidated its stale copy

            await proxy.recorded(thread.url(), count=4)
            await page.forget_cache()
            await page.goto(thread.url())  # the new copy, from the proxy's cache again
            assert await page.comments() == [FIRST, NEW]
            assert thread.gets() == [None, old_etag]
