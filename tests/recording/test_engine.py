"""The engine's tee with real parts: a local aiohttp origin (``tests/proxy/conftest.py``) or a
hand-written one, the real :class:`Engine` writing real WARC files (read back with warcio), and
a browser that keeps what it is sent and may leave.  What reaches the browser and the archive
when the body is whole, when the browser leaves (with and without ``finish_on_disconnect`` and
its limits) and when the origin dies midway."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive.store import Store
from wwwproxy.config import Config
from wwwproxy.http.headers import Headers
from wwwproxy.recording.engine import Engine, Exchange, Outcome
from wwwproxy.recording.tee import WHOLE_AT_ONCE
from wwwproxy.recording.upstream import UpstreamError, UpstreamTimeouts
from wwwproxy.url import canonicalize
from wwwproxy.url.requestkey import request_key

from ..proxy.conftest import Origin, RawOrigin

KIB = 1024


@dataclass
class Browser:
    """A :class:`~wwwproxy.recording.engine.Sink` that keeps what it is sent; it leaves at
    the head (``stay=0``) or at its ``stay``-th write of the body.  At every write it notes
    whether the answer is in the archive already (``in_archive``)."""

    in_archive: Callable[[], bool]
    stay: int | None = None
    status: int | None = None
    parts: list[bytes] = field(default_factory=list)
    #: (bytes received so far, the answer was in the archive) after each write
    seen: list[tuple[int, bool]] = field(default_factory=list)
    #: end(complete) was called with
    ended: bool | None = None
    recorded_at_end: bool | None = None

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)

    async def start(
        self,
        status: int,
        reason: str,
        headers: Headers,
        version: tuple[int, int],
        *,
        body_ready: bool = False,
    ) -> bool:
        self.status = status
        return self.stay != 0

    async def write(self, chunk: bytes) -> bool:
        if self.stay is not None and len(self.seen) + 1 >= self.stay:
            self.seen.append((len(self.body), self.in_archive()))
            return False
        self.parts.append(chunk)
        self.seen.append((len(self.body), self.in_archive()))
        return True

    async def end(self, complete: bool) -> None:
        self.ended = complete
        self.recorded_at_end = self.in_archive()


@dataclass
class Fetcher:
    """The engine over a fresh cache, and how a test reads what it recorded."""

    engine: Engine
    store: Store

    def exchange(self, url: str, keep_body: int = 0) -> Exchange:
        canonical = canonicalize(url)
        return Exchange(
            canonical, request_key(canonical.file, "GET", None, b""), keep_body=keep_body
        )

    def browser(self, url: str, stay: int | None = None) -> Browser:
        return Browser(lambda: self.response(url) is not None, stay)

    async def fetch(self, url: str, browser: Browser | None = None, **kwargs: object) -> Outcome:
        return await self.engine.fetch(self.exchange(url, **kwargs), sink=browser)  # type: ignore[arg-type]

    def limits(self, finish: bool, max_kb: int | None = None, percent: int | None = None) -> None:
        self.engine.configure(finish_on_disconnect=finish)
        config = Config(finish_on_disconnect_max_kb=max_kb, finish_on_disconnect_percent=percent)
        self.engine.follow(lambda: config)

    def path(self, url: str) -> Path:
        exchange = self.exchange(url)
        return self.store.path_for(exchange.url, exchange.key)

    def response(self, url: str) -> tuple[int, bytes] | None:
        """The status and payload of the URL's response record in its WARC file, if any."""
        path = self.path(url)
        if not path.exists():
            return None
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    return int(record.http_headers.get_statuscode()), record.content_stream().read()
        return None

    def served(self, url: str) -> bool:
        exchange = self.exchange(url)
        return self.store.get(exchange.url, exchange.key) is not None


@pytest.fixture
async def fetcher(tmp_path: Path) -> AsyncIterator[Fetcher]:
    store = Store(tmp_path / "cache")
    engine = Engine(store, UpstreamTimeouts(2.0, 3.0))
    try:
        yield Fetcher(engine, store)
    finally:
        await engine.close()


RawOriginFactory = Callable[[bytes], Awaitable[RawOrigin]]


def answer(body: bytes, *, length: int | None = -1) -> bytes:
    """A 200 with ``body``: with its Content-Length (-1), another, or none (None: the body
    ends with the connection)."""
    length = len(body) if length == -1 else length
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
    if length is not None:
        head += b"Content-Length: %d\r\n" % length
    else:
        head += b"Connection: close\r\n"
    return head + b"\r\n" + body


# --- the whole body ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/page.html", Origin.HTML),
        ("/chunked", b"".join(Origin.CHUNKS)),
        ("/large", Origin.LARGE_BODY),
    ],
)
async def test_a_whole_body_reaches_the_browser_and_the_archive(fetcher, origin, path, body):
    url = origin.url(path)
    browser = fetcher.browser(url)
    outcome = await fetcher.fetch(url, browser)
    assert (browser.status, browser.body, browser.ended) == (200, body, True)
    assert fetcher.response(url) == (200, body)
    assert (outcome.status, outcome.recorded, outcome.received) == (200, True, len(body))


async def test_a_small_page_reaches_the_browser_whole_in_one_write_once_recorded(fetcher, origin):
    url = origin.url("/page.html")
    browser = fetcher.browser(url)
    await fetcher.fetch(url, browser)
    assert browser.seen == [(len(Origin.HTML), True)]


async def test_the_last_byte_of_a_length_reaches_the_browser_once_recorded(fetcher, raw_origin):
    body = b"x" * (WHOLE_AT_ONCE + 1)  # larger than a body held whole
    site = await raw_origin(answer(body, length=-1))
    url = site.url("/large")
    browser = fetcher.browser(url)
    await fetcher.fetch(url, browser)
    *before, last = browser.seen
    assert sum(n for n, _ in before) == len(body) - 1
    assert not any(recorded for _, recorded in before)
    assert last == (len(body), True)


async def test_the_end_of_a_chunked_body_reaches_the_browser_once_recorded(fetcher, origin):
    url = origin.url("/chunked")
    browser = fetcher.browser(url)
    await fetcher.fetch(url, browser)
    assert len(browser.seen) == len(Origin.CHUNKS)  # each part at once
    assert not any(recorded for _, recorded in browser.seen)
    assert (browser.ended, browser.recorded_at_end) == (True, True)


async def test_a_body_ended_by_the_close_is_recorded(fetcher, raw_origin):
    body = b"until the close " * 100
    site = await raw_origin(answer(body, length=None))
    url = site.url("/closed")
    browser = fetcher.browser(url)
    await fetcher.fetch(url, browser)
    assert (browser.body, browser.ended, browser.recorded_at_end) == (body, True, True)
    assert fetcher.response(url) == (200, body)


async def test_without_a_browser_the_body_is_recorded_and_kept(fetcher, origin):
    url = origin.url("/page.html")
    outcome = await fetcher.fetch(url, keep_body=len(Origin.HTML))
    assert (outcome.recorded, outcome.body) == (True, Origin.HTML)
    assert fetcher.response(url) == (200, Origin.HTML)


# --- a browser that leaves --------------------------------------------------------------------


@pytest.mark.parametrize("stay", [0, 1], ids=["at the head", "at the first write"])
async def test_a_browser_that_leaves_early_does_not_stop_the_recording(fetcher, origin, stay):
    url = origin.url("/slow")
    browser = fetcher.browser(url, stay)
    outcome = await fetcher.fetch(url, browser)
    assert browser.body == b""
    assert browser.ended is None  # nothing more is sent to it
    assert fetcher.response(url) == (200, Origin.SLOW_BODY)
    assert (outcome.recorded, outcome.received) == (True, len(Origin.SLOW_BODY))


@pytest.mark.parametrize("stay", [0, 1, 2], ids=["at the head", "at once", "later"])
async def test_without_finish_on_disconnect_the_download_stops(fetcher, origin, caplog, stay):
    caplog.set_level(logging.INFO, logger="wwwproxy.recording")
    fetcher.limits(finish=False)
    url = origin.url("/slow")
    browser = fetcher.browser(url, stay)
    outcome = await fetcher.fetch(url, browser)
    assert outcome.recorded is False
    assert outcome.received < len(Origin.SLOW_BODY)
    assert not fetcher.path(url).exists()
    assert not fetcher.served(url)
    assert "the browser left" in caplog.text
    assert browser.ended is None


@pytest.mark.parametrize(
    ("length", "size", "max_kb", "finished"),
    [
        # larger than a body held whole (which the browser cannot leave before it is recorded)
        ("known", 20 * KIB, 20, True),  # at the bound
        ("known", 20 * KIB + 1, 20, False),  # one byte past it
        ("unknown", 20 * KIB, 20, True),
        ("unknown", 20 * KIB + 1, 20, False),
        ("known", 20 * KIB + 1, None, True),  # no bound
    ],
)
async def test_max_kb_bounds_an_abandoned_download(
    fetcher, raw_origin, length, size, max_kb, finished
):
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    site = await raw_origin(answer(body, length=-1 if length == "known" else None))
    url = site.url("/download")
    fetcher.limits(finish=True, max_kb=max_kb)
    outcome = await fetcher.fetch(url, fetcher.browser(url, stay=1))
    assert outcome.recorded is finished
    assert fetcher.response(url) == ((200, body) if finished else None)


@pytest.mark.parametrize(("percent", "finished"), [(5, True), (90, False)])
async def test_percent_finishes_a_download_far_enough_along(fetcher, origin, percent, finished):
    # the origin's first part is 16 KiB of 192: 8%
    url = origin.url("/slow")
    fetcher.limits(finish=True, percent=percent)
    outcome = await fetcher.fetch(url, fetcher.browser(url, stay=1))
    assert outcome.recorded is finished
    assert fetcher.response(url) == ((200, Origin.SLOW_BODY) if finished else None)


async def test_limits_do_not_stop_a_browser_that_stays(fetcher, origin):
    url = origin.url("/slow")
    fetcher.limits(finish=True, max_kb=1, percent=100)
    browser = fetcher.browser(url)
    await fetcher.fetch(url, browser)
    assert (browser.body, browser.ended) == (Origin.SLOW_BODY, True)
    assert fetcher.response(url) == (200, Origin.SLOW_BODY)


# --- an origin that dies midway ---------------------------------------------------------------

CUT_OFF = {
    "short of its length": answer(b"x" * 500, length=1000),
    "chunked without its end": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
    ),
}


@pytest.mark.parametrize("reply", CUT_OFF.values(), ids=CUT_OFF.keys())
async def test_a_body_cut_off_upstream_is_cut_off_for_the_browser(fetcher, raw_origin, reply):
    site = await raw_origin(reply)
    url = site.url("/dies")
    browser = fetcher.browser(url)
    outcome = await fetcher.fetch(url, browser)
    assert browser.ended is False  # the browser sees it cut off
    assert len(browser.body) < 1000
    assert outcome.recorded is False
    assert not fetcher.path(url).exists()
    assert not fetcher.served(url)


@pytest.mark.parametrize("reply", CUT_OFF.values(), ids=CUT_OFF.keys())
async def test_a_body_cut_off_upstream_without_a_browser_raises(fetcher, raw_origin, reply):
    site = await raw_origin(reply)
    url = site.url("/dies")
    with pytest.raises(UpstreamError):
        await fetcher.fetch(url)
    assert not fetcher.path(url).exists()
    assert not fetcher.served(url)
