"""The browser tests' DevTools protocol client: one page of a running headless Chromium,
driven over the browser's DevTools WebSocket (aiohttp's client) with a flat session.

The WebSocket is the browser's own, on loopback: it does not go through the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from .chromium import devtools_endpoint

Params = dict[str, Any]
#: which events of a method a test waits for
EventTest = Callable[[Params], bool]
Result = TypeVar("Result")


def any_event(params: Params) -> bool:
    return True


class DevToolsClosed(ConnectionError):
    """The DevTools WebSocket ended with a command or an event still awaited."""


class DevTools:
    """One page target, attached to over the browser's WebSocket: commands to it (or to the
    browser) answered within ``timeout`` seconds, and its events kept until a test claims them
    (:meth:`event`) or handed to a waiter subscribed before (:meth:`expect`)."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, timeout: float) -> None:
        self.socket = socket
        self.timeout = timeout
        self.session_id: str | None = None
        self.ids = itertools.count(1)
        self.replies: dict[int, asyncio.Future[Params]] = {}
        #: events received that no waiter took, oldest first: (method, params)
        self.events: list[tuple[str, Params]] = []
        self.waiters: list[tuple[str, EventTest, asyncio.Future[Params]]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.socket:
            if message.type is aiohttp.WSMsgType.TEXT:
                self._received(json.loads(message.data))
        for future in [*self.replies.values(), *(w[2] for w in self.waiters)]:
            if not future.done():
                future.set_exception(DevToolsClosed("the DevTools WebSocket ended"))

    def _received(self, data: Params) -> None:
        if "id" in data:
            reply = self.replies.pop(data["id"], None)
            if reply is None or reply.done():  # given up on (timed out)
                return
            if "error" in data:
                reply.set_exception(RuntimeError(f"DevTools: {data['error']}"))
            else:
                reply.set_result(data.get("result", {}))
            return
        method, params = data.get("method", ""), data.get("params", {})
        taken = False
        for wanted, test, waiter in self.waiters:
            if wanted == method and not waiter.done() and test(params):
                waiter.set_result(params)
                taken = True
        self.waiters = [w for w in self.waiters if not w[2].done()]
        if not taken:
            self.events.append((method, params))

    async def within(self, awaitable: Awaitable[Result]) -> Result:
        """``awaitable``'s result, which must come within the client's timeout."""
        return await asyncio.wait_for(awaitable, self.timeout)

    async def send(self, method: str, *, browser: bool = False, **params: Any) -> Params:
        """One DevTools command to the page (or the ``browser``) and its result."""
        number = next(self.ids)
        message: Params = {"id": number, "method": method, "params": params}
        if not browser:
            message["sessionId"] = self.session_id
        reply = self.replies[number] = asyncio.get_running_loop().create_future()
        await self.socket.send_json(message)
        return await self.within(reply)

    def expect(self, method: str, test: EventTest = any_event) -> asyncio.Future[Params]:
        """The next ``method`` event whose params pass ``test``: asked for before the action
        that causes it, awaited (:meth:`within`) after."""
        waiter: asyncio.Future[Params] = asyncio.get_running_loop().create_future()
        self.waiters.append((method, test, waiter))
        return waiter

    async def event(self, method: str, test: EventTest = any_event) -> Params:
        """The first ``method`` event whose params pass ``test``, received already (since
        :meth:`forget_events`) or to come; it is not returned again."""
        for index, (received, params) in enumerate(self.events):
            if received == method and test(params):
                del self.events[index]
                return params
        return await self.within(self.expect(method, test))

    def forget_events(self) -> None:
        """Drop the events received so far: :meth:`event` then sees only those to come."""
        self.events.clear()

    async def attach(self) -> None:
        """Attach to the browser's first page: commands without ``browser`` go to it."""
        page = next(t for t in await self.targets() if t["type"] == "page")
        attached = await self.send(
            "Target.attachToTarget", browser=True, targetId=page["targetId"], flatten=True
        )
        self.session_id = attached["sessionId"]

    async def targets(self) -> list[Params]:
        """What the browser has open: pages, workers, extensions (Target.getTargets)."""
        return (await self.send("Target.getTargets", browser=True))["targetInfos"]

    async def open_tab(self, url: str) -> str:
        """Open ``url`` in a new tab, as a person typing it would; the tab's target id."""
        return (await self.send("Target.createTarget", browser=True, url=url))["targetId"]

    async def until_loaded(self, action: Awaitable[Result]) -> Result:
        """Await ``action`` and then the load of the page it led to; ``action``'s result."""
        load = self.expect("Page.loadEventFired")
        result = await action
        await self.within(load)
        return result

    async def navigate(self, url: str, **params: Any) -> Params:
        """Navigate the page to ``url`` (``params``: Page.navigate's others) and wait for its
        load (Page events must be enabled); Page.navigate's result."""
        return await self.until_loaded(self.send("Page.navigate", url=url, **params))

    async def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise's, once it settles)."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def insert_text(self, selector: str, text: str) -> None:
        """Focus the element ``selector`` finds and enter ``text`` into it, as typing does."""
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        await self.send("Input.insertText", text=text)

    async def click(self, selector: str) -> None:
        """A left mouse click in the middle of the element ``selector`` finds."""
        x, y = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        common = {"x": x, "y": y, "button": "left", "clickCount": 1}
        await self.send("Input.dispatchMouseEvent", type="mousePressed", **common)
        await self.send("Input.dispatchMouseEvent", type="mouseReleased", **common)


@contextlib.asynccontextmanager
async def devtools(
    profile: Path, process: asyncio.subprocess.Process, timeout: float
) -> AsyncIterator[DevTools]:
    """A :class:`DevTools` client attached to the first page of the Chromium ``process`` runs
    with ``profile`` and ``--remote-debugging-port`` (as
    :func:`~tests.proxy.chromium.hermetic_chromium` starts it)."""
    port, path = await devtools_endpoint(profile, process, timeout)
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0) as socket:
            client = DevTools(socket, timeout)
            try:
                await client.attach()
                yield client
            finally:
                client.reader.cancel()
