"""Rendering a page in headless Chromium through the recording proxy, for ``fetch --render``.

A parser sees only the URLs written in a page; a script-built page composes its bundles, data
and images in the browser.  So each page is loaded by a real browser whose proxy is wwwproxy's
own recorder: every request its scripts make is recorded exactly as when a person browses, and
the links of the crawl are read from the DOM the scripts left behind.

The browser is Debian's Chromium (``chromium``), driven by Playwright for Python with that
browser as its executable: a maintained driver, no browser download (Playwright's own browsers
are never installed or used).  One browser process; a page at a time in each of ``tabs`` tabs,
each page in a fresh browser context (no cookies, storage or cache of the pages before: what a
first visit needs, whatever the crawl's order).

What a page gets (:meth:`Renderer.render`), all within ``timeout`` seconds:

1. loaded until its ``load`` event;
2. scrolled down a viewport at a time to its end (lazy images, infinite lists: at most
   ``scrolls`` steps), two frames a step; a step that brought requests lets the network go
   idle (``scroll_idle``) before the next; then back to the top;
3. its web fonts loaded (``document.fonts.ready``) and the network idle: no request started
   or finished for ``idle`` seconds;
4. its DOM serialized.

A page whose scripts never let the network settle is stopped at ``timeout`` with what it
loaded by then (``capped``); its DOM is still read.  A tab that crashes (a script out of
memory: the JavaScript heap of a tab is bounded by ``tab_memory``) or stops answering is closed
and the page tried once more in a new tab; then it is reported and the crawl goes on.  A browser
that dies is started again for the next page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .render_network import Loaded, NetworkLog, Tally, browsers_own

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, CDPSession, Page, Playwright

    from ..config import Config
    from ..recording.services import Services

__all__ = [
    "BROWSER_NAMES",
    "INSTALL_HINT",
    "RenderOptions",
    "RenderUnavailable",
    "Rendered",
    "Renderer",
    "browser_args",
    "check_available",
    "default_tabs",
    "find_browser",
    "open_renderer",
    "render_options",
    "rendering",
]

log = logging.getLogger("wwwproxy.fetch.render")

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "install Debian's Chromium (sudo apt-get install chromium) and the driver library "
    "(pip install 'wwwproxy[render]', or pip install playwright; no browser download is "
    "needed), or name the browser in render_browser"
)
#: flags that keep the browser's own services off the network: it asks for pages only
QUIET_FLAGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--no-pings",
    "--no-first-run",
    "--disable-quic",  # QUIC cannot go through an HTTP proxy
    "--disable-dev-shm-usage",
    # (one flag: Chromium reads only the last --disable-features.)  HttpsUpgrades: Chromium
    # would try an http:// page over HTTPS first and show the proxy's error for a site that
    # has no HTTPS instead of the page
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter,"
    "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable",
)
#: how long the DOM of a page that did not settle may take to read, and a tab to close
GRACE = 5.0
#: one viewport down, and two frames later (what came into view has been seen: lazy loaders
#: have started their requests) true if the end of the page is in view
SCROLL_STEP = """() => new Promise((done) => {
    window.scrollBy(0, window.innerHeight);
    requestAnimationFrame(() => requestAnimationFrame(() => {
        const end = document.scrollingElement || document.documentElement;
        done(window.scrollY + window.innerHeight >= end.scrollHeight - 2);
    }));
})"""
SCROLL_TOP = """() => new Promise((done) => {
    window.scrollTo(0, 0);
    requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
})"""
#: the web fonts loaded and every image with a source loaded (or failed); an image the page
#: left to the browser's own lazy loading is not waited for (it may never come into view)
LOADED = """() => document.fonts.ready.then(() => Array.from(document.images).every(
    (img) => img.complete || !img.getAttribute("src") || img.loading === "lazy"))"""


class RenderUnavailable(Exception):
    """The browser or its driver library is not installed (a usage error: exit status 2)."""


def default_tabs() -> int:
    """Tabs at once when not configured: one a core, at least 2, at most 4."""
    return max(2, min(4, os.cpu_count() or 2))


def find_browser(configured: str = "") -> str:
    """The Chromium to run: ``configured`` (a path or a command name), else the first of
    :data:`BROWSER_NAMES` on PATH; :class:`RenderUnavailable` saying how to install one."""
    names = (configured,) if configured else BROWSER_NAMES
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    if configured:
        raise RenderUnavailable(
            f"render_browser {configured!r} is not a program: correct it, or leave "
            "render_browser empty for the chromium on PATH (sudo apt-get install chromium)"
        )
    raise RenderUnavailable(
        f"no Chromium found (looked for {', '.join(BROWSER_NAMES)}): {INSTALL_HINT}"
    )


def _playwright_module() -> Any:
    try:
        from playwright import async_api
    except ImportError:
        raise RenderUnavailable(
            f"the Playwright library is not installed: {INSTALL_HINT}"
        ) from None
    return async_api


@dataclass(frozen=True)
class RenderOptions:
    """How pages are rendered (``render_*`` keys of the config, ``--render-*`` options)."""

    timeout: float = 30.0
    tabs: int = 0  # 0: default_tabs()
    browser: str = ""  # a path or command; "": found on PATH
    #: the JavaScript heap of one tab, MiB: a page that allocates without end crashes its tab
    tab_memory: int = 512
    #: more Chromium flags (e.g. ``--host-resolver-rules=...``, ``--lang=de``)
    extra_args: tuple[str, ...] = ()
    scrolls: int = 30
    idle: float = 0.5
    #: quiet after a scroll step (its lazy loads have started by then: two frames passed)
    scroll_idle: float = 0.25
    viewport: tuple[int, int] = (1280, 800)

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"the render timeout must be more than 0 seconds, not {self.timeout}")
        if self.tabs < 0:
            raise ValueError(f"render tabs must be 0 (from the cores) or more, not {self.tabs}")

    @property
    def tab_count(self) -> int:
        return self.tabs or default_tabs()


def render_options(
    config: Config, *, timeout: float | None = None, tabs: int | None = None
) -> RenderOptions:
    """The config's ``render_*`` keys, ``timeout`` and ``tabs`` (options of a command)
    instead of its own where given."""
    return RenderOptions(
        timeout=config.render_timeout if timeout is None else timeout,
        tabs=config.render_tabs if tabs is None else tabs,
        browser=config.render_browser,
        tab_memory=config.render_tab_memory,
        extra_args=config.render_browser_args,
    )


def browser_args(proxy: str, options: RenderOptions) -> list[str]:
    """Chromium's flags: every URL through ``proxy`` (``host:port``; loopback URLs too, which
    Chromium would otherwise send directly), none of its own traffic, a bounded heap."""
    return [
        f"--proxy-server=http://{proxy}",
        "--proxy-bypass-list=<-loopback>",
        *QUIET_FLAGS,
        *([f"--js-flags=--max-old-space-size={options.tab_memory}"] if options.tab_memory else []),
        *options.extra_args,
    ]


# --- what a page loaded ------------------------------------------------------------------------


@dataclass
class Rendered:
    """What rendering one page gave: the DOM after its scripts (None if it could not be read),
    the requests it made beside its own document (``tally``; the first :data:`MAX_LISTED` of
    them in ``loaded``), whether it was stopped at the time cap, and ``problem`` if it could not
    be rendered at all."""

    url: str
    dom: str | None = None
    loaded: list[Loaded] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    capped: bool = False
    problem: str | None = None
    attempts: int = 1


# --- the renderer -------------------------------------------------------------------------------


class Renderer:
    """One headless Chromium through the proxy at ``proxy``; :meth:`render` a page at a time
    in each of up to ``options.tabs`` tabs.  Made by :func:`open_renderer`."""

    def __init__(self, proxy: str, options: RenderOptions, executable: str) -> None:
        self.proxy = proxy
        self.options = options
        self.executable = executable
        self.tabs = asyncio.Semaphore(options.tab_count)
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._starting = asyncio.Lock()
        self._errors: tuple[type[BaseException], ...] = (Exception,)

    async def start(self) -> None:
        api = _playwright_module()
        self._errors = (api.Error,)
        self._playwright = await api.async_playwright().start()
        await self._browser_ready()

    async def _browser_ready(self) -> Browser:
        """The browser, (re)started if it is not running."""
        async with self._starting:
            if self._browser is not None:
                if self._browser.is_connected():
                    return self._browser
                log.warning("the browser stopped: starting it again")
                with contextlib.suppress(Exception):
                    await self._browser.close()
            assert self._playwright is not None, "start() first"
            try:
                self._browser = await self._playwright.chromium.launch(
                    executable_path=self.executable,
                    args=browser_args(self.proxy, self.options),
                    headless=True,
                    chromium_sandbox=False,
                    handle_sigint=False,
                    handle_sigterm=False,
                    handle_sighup=False,
                )
            except self._errors as exc:
                raise RenderUnavailable(
                    f"{self.executable} did not start: {_first_line(exc)}"
                ) from None
            return self._browser

    async def _fresh_context(self) -> BrowserContext:
        """A browser context of its own for one page: no cookies, storage or cache from the
        pages before it, so what it loads is what a browser on its first visit needs (a site
        that keeps its scripts in localStorage would otherwise ask for less, in URLs that
        depend on the crawl's order, and a cookie one page set would follow the others)."""
        width, height = self.options.viewport
        for attempt in (1, 2):
            browser = await self._browser_ready()
            try:
                # the proxy's own certificates (HTTPS interception) are made by the local CA
                # that the browser does not know; the origin's certificate is checked by the
                # proxy
                return await browser.new_context(
                    ignore_https_errors=True,
                    service_workers="block",
                    viewport={"width": width, "height": height},
                )
            except self._errors:
                if attempt == 2 or browser.is_connected():
                    raise  # (a browser that died meanwhile is started again once)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._browser is not None:
                await self._browser.close()
        with contextlib.suppress(Exception):
            if self._playwright is not None:
                await self._playwright.stop()
        self._browser = self._playwright = None

    async def render(self, url: str) -> Rendered:
        """Render ``url`` in a tab of its own (waiting for one), once more in a new tab if the
        first crashed or hung."""
        async with self.tabs:
            rendered = await self._render_once(url)
            if rendered.problem is not None:
                log.info("%s: %s; trying once more", url, rendered.problem)
                again = await self._render_once(url)
                again.attempts = 2
                return again
            return rendered

    async def _render_once(self, url: str) -> Rendered:
        try:
            context = await self._fresh_context()
        except self._errors as exc:
            return Rendered(url, problem=f"no browser context could be made: {_first_line(exc)}")
        try:
            page = await context.new_page()
            network = NetworkLog()
            await _listen(await context.new_cdp_session(page), network)
        except self._errors as exc:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), GRACE)
            return Rendered(url, problem=f"no tab could be opened: {_first_line(exc)}")
        crashed = asyncio.Event()
        page.on("crash", lambda _page: crashed.set())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        steps = asyncio.ensure_future(self._steps(page, url, network, deadline))
        crash = asyncio.ensure_future(crashed.wait())
        try:
            await asyncio.wait(
                {steps, crash},
                timeout=max(0.0, deadline - loop.time()) + GRACE,
                return_when=asyncio.FIRST_COMPLETED,
            )
            problem: str | None = None
            hung = f"its tab stopped answering within {self.options.timeout:g} s"
            dom, capped = None, False
            if crashed.is_set():
                problem = "its tab crashed"
            elif not steps.done():
                problem = f"{hung} (a script that never ends?)"
            else:
                try:
                    dom, capped = steps.result()
                except TimeoutError:  # the DOM could not be read within the grace time
                    problem = f"{hung} (a script that never ends?)"
                except self._errors as exc:
                    problem = _first_line(exc)
            status = network.document_status
            if problem is None and (status is None or status >= 400):
                # the crawl got the page: the browser must too, or what it shows is an error
                problem = f"the browser got {'no answer' if status is None else f'HTTP {status}'}"
                problem += " for the page"
            if problem is not None:
                dom, capped = None, False
            return Rendered(url, dom, network.requests(), network.tally(), capped, problem)
        finally:
            for task in (steps, crash):
                task.cancel()
            await asyncio.gather(steps, crash, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(page.close(run_before_unload=False), GRACE)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), GRACE)

    async def _steps(
        self, page: Page, url: str, network: NetworkLog, deadline: float
    ) -> tuple[str, bool]:
        """Load, scroll, fonts, idle; the DOM and whether the time cap stopped it."""
        loop = asyncio.get_running_loop()

        def left_ms() -> float:
            return max(1.0, (deadline - loop.time()) * 1000)

        capped = False
        try:
            await page.goto(url, wait_until="load", timeout=left_ms())
        except self._errors as exc:
            if "Timeout" not in type(exc).__name__:
                raise
            capped = True
        if not capped:
            capped = not await self._settle(page, network, deadline)
        if not capped:
            for _ in range(self.options.scrolls):  # (a longer page: its first screens only)
                began = network.starts
                at_end = await _within(page.evaluate(SCROLL_STEP), deadline)
                if at_end is None:
                    capped = True
                    break
                if at_end or network.starts != began or network.inflight:
                    # what came into view asked for something (or, at the end, may still:
                    # an observer's callback can come later than two frames): let it load
                    network.touch()
                    if not await self._settle(page, network, deadline, self.options.scroll_idle):
                        capped = True
                        break
                if at_end:
                    break
            top = await _within(page.evaluate(SCROLL_TOP), deadline)
            network.touch()
            capped = capped or top is None or not await self._settle(page, network, deadline)
        # a page stopped at the cap is read as it stands (within the grace time)
        dom = await asyncio.wait_for(page.content(), max(deadline - loop.time(), 0) + GRACE)
        return dom, capped

    async def _settle(
        self, page: Page, network: NetworkLog, deadline: float, quiet: float | None = None
    ) -> bool:
        """Before ``deadline``, the page's fonts and images loaded and the network idle
        (``quiet`` seconds, default ``idle``): what the page said it loads, and what the
        browser was seen to ask for (a request can start some time after a script asked for
        it); False if not."""
        quiet = self.options.idle if quiet is None else quiet
        loop = asyncio.get_running_loop()
        while True:
            loaded = await _within(page.evaluate(LOADED), deadline)
            if loaded is None or not await self._idle(network, deadline, quiet):
                return False
            if loaded:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    @staticmethod
    async def _idle(network: NetworkLog, deadline: float, quiet: float) -> bool:
        """The network idle for ``quiet`` seconds before ``deadline``; False if not."""
        loop = asyncio.get_running_loop()
        while not network.idle(quiet):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True


async def _within(awaitable: Any, deadline: float) -> Any:
    """The awaitable's result, or None if ``deadline`` (the loop's clock) passes first."""
    left = deadline - asyncio.get_running_loop().time()
    if left <= 0:
        with contextlib.suppress(Exception):
            awaitable.close()
        return None
    try:
        return await asyncio.wait_for(awaitable, left)
    except TimeoutError:
        return None


async def _listen(devtools: CDPSession, network: NetworkLog) -> None:
    """Feed the tab's network events (DevTools' Network domain, on ``devtools``) into
    ``network``.  A response from the browser's own cache or the recorder's (``X-Cache:
    HIT``) counts as from the cache."""
    tree = await devtools.send("Page.getFrameTree")
    main_frame = tree["frameTree"]["frame"]["id"]

    def answer(key: str, response: dict[str, Any], cached: bool = False) -> None:
        headers = {name.lower(): value for name, value in response.get("headers", {}).items()}
        cached = cached or bool(response.get("fromDiskCache") or response.get("fromPrefetchCache"))
        cached = cached or str(headers.get("x-cache", "")).upper().startswith("HIT")
        network.answered(key, int(response.get("status", 0)), cached)

    def started(event: dict[str, Any]) -> None:
        key, request = event["requestId"], event["request"]
        redirect = event.get("redirectResponse")
        if redirect is not None and network.watches(key):  # the hop before ends here
            answer(key, redirect)
            network.ended(key)
        url = request["url"]
        if not url.startswith(("http://", "https://")) or browsers_own(event):
            return
        document = event.get("type") == "Document" and event.get("frameId") == main_frame
        network.started(key, url, request["method"], document=document)

    def answered(event: dict[str, Any]) -> None:
        if network.watches(event["requestId"]):
            answer(event["requestId"], event["response"], network.served_from_cache(event))

    def finished(event: dict[str, Any]) -> None:
        if network.watches(event["requestId"]):
            network.ended(event["requestId"])

    def failed(event: dict[str, Any]) -> None:
        if network.watches(event["requestId"]):
            network.ended(event["requestId"], event.get("errorText") or "failed")

    def from_cache(event: dict[str, Any]) -> None:
        network.cached.add(event["requestId"])

    devtools.on("Network.requestWillBeSent", started)
    devtools.on("Network.requestServedFromCache", from_cache)
    devtools.on("Network.responseReceived", answered)
    devtools.on("Network.loadingFinished", finished)
    devtools.on("Network.loadingFailed", failed)
    await devtools.send("Network.enable")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@contextlib.asynccontextmanager
async def open_renderer(proxy: str, options: RenderOptions) -> AsyncIterator[Renderer]:
    """A started :class:`Renderer` through ``proxy`` (``host:port``), closed at the end;
    :class:`RenderUnavailable` if Chromium or Playwright is missing or will not start."""
    executable = find_browser(options.browser)
    renderer = Renderer(proxy, options, executable)
    try:
        await renderer.start()
        yield renderer
    finally:
        await renderer.close()


@contextlib.asynccontextmanager
async def rendering(services: Services, options: RenderOptions) -> AsyncIterator[Renderer]:
    """A started :class:`Renderer` whose browser goes through ``services``' browser recorder
    (:func:`wwwproxy.app.browser_recorder`), both closed at the end."""
    if services.browser_recorder is None:
        raise RenderUnavailable("no recording proxy for the browser (not serving)")
    async with services.browser_recorder() as proxy, open_renderer(proxy, options) as renderer:
        yield renderer


def check_available(options: RenderOptions) -> str:
    """The browser's path, if it and the driver library are installed (before a run starts:
    a usage error at once, not after the first page); :class:`RenderUnavailable` if not."""
    path = find_browser(options.browser)
    _playwright_module()
    return str(Path(path))
