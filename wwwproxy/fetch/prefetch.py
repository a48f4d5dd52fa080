"""The fetch engine of ``wwwproxy fetch``: the outgoing queue, URL lists, links and requisites.

Every fetch goes through :meth:`wwwproxy.proxy.server.ProxyServer.fetch_to_archive`, the proxy's
own recording path, and what is followed is read back from the archive, so the cache holds
exactly what a browser going through the proxy would have got.

Rules (decisions where the issue was silent are marked *):

* **Levels.**  Listed URLs are level 0.  ``depth`` N follows hyperlinks (``<a>``, ``<area>``,
  ``<link>``, meta refresh; and frames/iframes when ``requisites`` is off) from pages at level
  < N to level + 1.  With ``requisites``, everything a fetched page needs (images, style
  sheets with their ``@import`` and ``url()``, scripts, frames, iframes, ``srcset``, icons,
  media) is fetched at the page's level; a frame is part of its page, so its own links are
  followed from that level too.  A URL is fetched once per run, at the lowest level it is
  reached at (reached again lower, its links are followed again from the cache), so the set
  fetched does not depend on timing.
* **Scope** (hyperlinks only): ``host`` (same host name as the listed URL the link was reached
  from), ``domain`` (same registrable domain), ``any``, or ``prefix``: under one of the URL
  prefixes in ``limits`` (which names the host itself).  *Requisites are fetched from any
  host: a page's images on another server are part of the page (WWWOFFLE's default too).
* **Redirects.**  A 3xx is recorded as it is; its ``Location`` is followed (at most
  ``max_redirects`` hops, loops reported as failures).  *A listed URL's redirect is followed
  wherever it goes, and the target becomes the root of the scope (``http://example.com/`` →
  ``https://www.example.com/`` keeps the crawl on www.example.com); a hyperlink's redirect is
  followed within the scope; a requisite's anywhere.
* **robots.txt** (RFC 9309, user agent ``wwwproxy``) is honoured for URLs reached by following
  (links and requisites), never for listed ones, unless ``robots`` is off.  It is fetched
  through the recording path too, and a cached copy is reused for at most a day.  A
  ``Crawl-delay`` (capped at 30 s) raises the per-host delay.
* **Fresh** (what a second run skips): the cache holds a servable response (any status) that
  is younger than the ``max_age`` of the first config ``freshness`` rule matching the URL.
  *With no matching rule, anything cached is fresh for ``fetch`` (the proxy itself revalidates
  such pages when browsing online).  ``force`` refetches everything.  Links of a fresh page are
  still followed, from the cached copy, so an interrupted run resumes where it stopped.
* **Failures** (exit status 1): the server could not be reached or the body was cut off, an
  error status (4xx/5xx; recorded all the same), a redirect loop or too many redirects.
  *A cached error response counts as failed in later runs too: the page is not available
  offline.  robots.txt blocks are reported separately and are not failures.
* **The proxy's own address** (its command pages) is never fetched: a listed URL there fails,
  a link or requisite to it is left alone.
* **Concurrency:** ``concurrency`` fetches at once, at most ``per_host`` to one host, and
  ``delay`` seconds between the starts of two requests to one host.
* **Writers.**  The WARC appends hold an exclusive ``flock`` per cache file and the CDXJ
  journal appends a ``flock`` on the journal, so ``wwwproxy fetch`` and a running ``wwwproxy
  serve`` (or two fetches) may write the same cache at once.  What is fetched also goes into
  the cache's full-text search index (:func:`fetching_server` attaches it; SQLite in WAL mode
  takes writers from both processes), so the proxy's ``/search/`` finds it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import BinaryIO
from urllib.parse import urljoin

import aiohttp
import aiohttp.abc

from .. import __version__
from ..archive.outgoing import QueuedRequest
from ..archive.search import SearchIndex
from ..archive.store import CachedEntry, Store
from ..config import Config
from ..http.content import ContentDecoder, charset_param
from ..http.headers import get_header
from ..proxy.modes import age_seconds, max_age_for
from ..proxy.server import ProxyServer
from ..proxy.upstream import UpstreamError, UpstreamTimeouts, new_session
from ..url import URL, InvalidURL, canonicalize
from .links import (
    Link,
    extract_css_links,
    extract_html_links,
    is_css,
    is_html,
    same_domain,
    same_host,
    under_prefix,
)
from .progress import Progress
from .robots import RobotsRules, parse_robots, robots_url

__all__ = [
    "REDIRECT_STATUSES",
    "SCOPES",
    "USER_AGENT",
    "FetchOptions",
    "Outcome",
    "Prefetcher",
    "Probe",
    "Redirect",
    "Result",
    "Role",
    "Summary",
    "Task",
    "in_scope",
    "is_fresh",
    "next_tasks",
    "probe",
    "read_decoded",
    "redirect_task",
]

log = logging.getLogger("wwwproxy.fetch")

USER_AGENT = f"wwwproxy/{__version__} (prefetch)"
SCOPES = ("host", "domain", "any", "prefix")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
FRAME_KINDS = frozenset({"frame", "iframe"})
MAX_PARSE = 16 * 1024 * 1024  # bytes of a page or style sheet read for links (decoded)
ROBOTS_MAX_AGE = 24 * 3600  # RFC 9309 §2.4: a cached robots.txt is used for a day at most
ROBOTS_REDIRECTS = 5
_READ = 64 * 1024
OWN_PAGE = "one of this proxy's own pages: not fetched"
SEARCH_FLUSH = 120.0  # seconds to wait at the end for the search index to catch up


# --- options and tasks ------------------------------------------------------------------------


@dataclass(frozen=True)
class FetchOptions:
    depth: int = 0
    requisites: bool = False
    scope: str = "host"
    limits: tuple[str, ...] = ()
    concurrency: int = 4
    per_host: int = 2
    delay: float = 0.0
    force: bool = False
    refresh_seeds: bool = False  # refetch the listed URLs only (the monitor)
    robots: bool = True
    max_redirects: int = 10
    user_agent: str = USER_AGENT

    def __post_init__(self) -> None:
        if self.depth < 0:
            raise ValueError(f"depth must be 0 or more, not {self.depth}")
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {self.scope!r}")
        if self.concurrency < 1 or self.per_host < 1:
            raise ValueError("concurrency and the per-host limit must be at least 1")
        if not self.delay >= 0:
            raise ValueError(f"delay must be 0 or more seconds, not {self.delay}")
        if self.max_redirects < 0:
            raise ValueError("max_redirects must be 0 or more")
        limits = []
        for prefix in self.limits:
            try:
                url = canonicalize(prefix)
            except InvalidURL as exc:
                raise ValueError(f"limit {prefix!r}: {exc.reason}") from None
            if url.local or url.proto not in ("http", "https"):
                raise ValueError(f"limit {prefix!r} is not an http or https URL")
            limits.append(url.file)
        if (self.scope == "prefix") != bool(limits):
            raise ValueError("the prefix scope goes with limits (--limit PREFIX), and only it")
        object.__setattr__(self, "limits", tuple(limits))


class Role(Enum):
    SEED = "seed"  # listed by the user (or queued, or monitored): no robots.txt, no scope
    LINK = "link"  # a hyperlink followed for depth: scope and robots.txt
    REQUISITE = "requisite"  # something a page needs: robots.txt, any host


@dataclass(frozen=True)
class Task:
    url: str  # canonical, the GET archive key
    level: int
    role: Role
    root: str  # the URL whose host/domain the scope is measured from
    hops: int = 0  # redirects followed to get here


class Outcome(Enum):
    FETCHED = "fetched"
    FRESH = "fresh"
    FAILED = "failed"
    ROBOTS = "robots"


@dataclass(frozen=True)
class Result:
    url: str
    outcome: Outcome
    status: int | None = None
    size: int = 0  # payload bytes fetched
    problem: str | None = None  # why it failed / was skipped
    method: str = "GET"

    @property
    def label(self) -> str:
        return self.url if self.method == "GET" else f"{self.method} {self.url}"

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.FETCHED, Outcome.FRESH)


@dataclass
class Summary:
    results: dict[str, Result] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def bytes(self) -> int:
        return sum(r.size for r in self.results.values())

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results.values() if r.outcome is Outcome.FAILED]

    def counts(self) -> dict[str, int]:
        out = {o.value: 0 for o in Outcome}
        for r in self.results.values():
            out[r.outcome.value] += 1
        out["total"] = len(self.results)
        return out

    def urls(self, *outcomes: Outcome) -> set[str]:
        """The URLs (archive keys) with these outcomes (all, if none given)."""
        return {r.url for r in self.results.values() if not outcomes or r.outcome in outcomes}


# --- the rules (pure) -------------------------------------------------------------------------


def in_scope(url: str, root: str, options: FetchOptions) -> bool:
    """Whether a hyperlink to ``url``, reached from the listed URL ``root``, is followed."""
    if options.scope == "prefix":
        return any(under_prefix(url, p) for p in options.limits)
    if options.scope == "host":
        return same_host(url, root)
    if options.scope == "domain":
        return same_domain(url, root)
    return True


def next_tasks(task: Task, links: Iterable[Link], options: FetchOptions) -> list[Task]:
    """What a page (fetched for ``task``) leads to."""
    out = []
    follow = task.level < options.depth
    for link in links:
        if link.url == task.url:
            continue
        if link.requisite and options.requisites:
            out.append(Task(link.url, task.level, Role.REQUISITE, task.root))
        elif (
            follow
            and (not link.requisite or link.kind in FRAME_KINDS)
            and in_scope(link.url, task.root, options)
        ):
            out.append(Task(link.url, task.level + 1, Role.LINK, task.root))
    return out


@dataclass(frozen=True)
class Redirect:
    """Where a 3xx leads: ``task`` to follow, or ``problem`` (a failure if ``failed``)."""

    task: Task | None = None
    problem: str | None = None
    failed: bool = False


def redirect_task(
    task: Task, status: int, location: str | None, options: FetchOptions
) -> Redirect | None:
    """The next hop of a redirect response for ``task``; None if ``status`` is no redirect."""
    if status not in REDIRECT_STATUSES:
        return None
    if not location or not location.strip():
        return Redirect(problem=f"{status} without a Location header", failed=True)
    try:
        target = canonicalize(urljoin(task.url, location.strip())).file
    except (InvalidURL, ValueError):
        return Redirect(problem=f"{status} to an invalid Location {location!r}", failed=True)
    if not target.startswith(("http://", "https://")):
        return Redirect(problem=f"redirect to {target} (not http or https)", failed=True)
    if task.hops + 1 > options.max_redirects:
        return Redirect(
            problem=f"too many redirects (more than {options.max_redirects})", failed=True
        )
    if task.role is Role.SEED:
        return Redirect(Task(target, task.level, Role.SEED, target, task.hops + 1))
    if task.role is Role.LINK and not in_scope(target, task.root, options):
        return Redirect(problem=f"redirect to {target} not followed (out of scope)")
    return Redirect(Task(target, task.level, task.role, task.root, task.hops + 1))


def is_fresh(recorded: datetime, now: datetime, max_age: int | None) -> bool:
    """A cached copy needs no refetch: no freshness rule, or younger than its max_age."""
    return max_age is None or age_seconds(recorded, now) <= max_age


# --- bodies -----------------------------------------------------------------------------------


def read_decoded(entry: CachedEntry, limit: int = MAX_PARSE) -> bytes:
    """The cached payload without its Content-Encoding, at most ``limit`` bytes (blocking:
    call in a thread).  ValueError if it cannot be decoded."""
    decoder = ContentDecoder(get_header(entry.headers, "Content-Encoding"), limit)
    out = bytearray()
    with entry.open_body() as stream:
        while not decoder.full and (chunk := stream.read(_READ)):
            out += decoder.feed(chunk)
    out += decoder.flush()
    return bytes(out)


def _digest(stream: BinaryIO, content_encoding: str | None) -> tuple[int, str]:
    """Length and SHA-256 of the decoded payload, streaming."""
    decoder = ContentDecoder(content_encoding)
    sha = hashlib.sha256()
    n = 0
    while chunk := stream.read(_READ):
        data = decoder.feed(chunk)
        sha.update(data)
        n += len(data)
    data = decoder.flush()
    sha.update(data)
    return n + len(data), sha.hexdigest()


# --- the engine -------------------------------------------------------------------------------


@dataclass
class _Host:
    slots: asyncio.Semaphore
    next_start: float = 0.0


class Prefetcher:
    """One fetch run.  ``server`` supplies the recording path (and the config's freshness
    rules); it need not be listening."""

    def __init__(
        self, server: ProxyServer, options: FetchOptions, progress: Progress | None = None
    ) -> None:
        self.server = server
        self.store = server.store
        self.options = options
        self.progress = progress or Progress(None)
        self.summary = Summary()
        self._rules = [(r.regex, r.max_age) for r in server.config.freshness]
        self._headers = [
            ("User-Agent", options.user_agent),
            ("Accept", "*/*"),
            ("Accept-Encoding", "gzip, deflate"),
        ]
        self._best: dict[str, int] = {}
        self._handled: dict[str, asyncio.Event] = {}
        self._unusable: set[str] = set()
        self._redirects: dict[str, str] = {}
        self._queued: dict[str, QueuedRequest] = {}
        self._hosts: dict[str, _Host] = {}
        self._robots: dict[str, asyncio.Future[RobotsRules]] = {}
        self._work: asyncio.Queue[Task] = asyncio.Queue()

    # -- running --

    async def run(self, seeds: Iterable[str] = (), *, queue: bool = False) -> Summary:
        """Fetch the outgoing queue (``queue``) and the ``seeds`` with what they lead to."""
        started = time.monotonic()
        others: list[QueuedRequest] = []
        if queue:
            others = await self._load_queue()
        for seed in seeds:
            try:
                url = canonicalize(seed)
            except InvalidURL as exc:
                self._report(Result(str(seed), Outcome.FAILED, problem=exc.reason))
                continue
            if url.local or url.proto not in ("http", "https"):
                self._report(Result(url.file, Outcome.FAILED, problem="not an http or https URL"))
                continue
            self._discover(Task(url.file, 0, Role.SEED, url.file))
        workers = [asyncio.create_task(self._worker()) for _ in range(self.options.concurrency)]
        try:
            if others:
                await asyncio.gather(*(self._fetch_other(item) for item in others))
            await self._work.join()
        finally:
            pending = [*workers, *(f for f in self._robots.values() if not f.done())]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            self.progress.close()
            self.summary.elapsed = time.monotonic() - started
        return self.summary

    async def _load_queue(self) -> list[QueuedRequest]:
        others = []
        entries = await asyncio.to_thread(lambda: list(self.server.queue.entries()))
        for path, item in entries:
            if isinstance(item, ValueError):
                self._report(Result(str(path), Outcome.FAILED, problem=str(item)))
                continue
            try:
                url = canonicalize(item.url)
            except InvalidURL as exc:
                self._report(Result(item.url, Outcome.FAILED, problem=exc.reason))
                continue
            if item.method.upper() == "GET" and item.key == url.file and not item.body:
                self._queued[url.file] = item
                self._discover(Task(url.file, 0, Role.SEED, url.file))
            else:
                others.append(item)
        return others

    def _discover(self, task: Task) -> None:
        best = self._best.get(task.url)
        if best is not None and best <= task.level:
            return
        self._best[task.url] = task.level
        self._work.put_nowait(task)
        self.progress.queued()

    def _report(self, result: Result) -> None:
        old = self.summary.results.get(result.label)
        if old is not None and old.outcome is Outcome.FAILED:
            return  # keep the first failure
        if old is not None and result.outcome is not Outcome.FAILED:
            return
        if old is not None:
            result = Result(
                result.url, result.outcome, old.status, old.size, result.problem, result.method
            )
        self.summary.results[result.label] = result
        self.progress.result(result)

    async def _worker(self) -> None:
        while True:
            task = await self._work.get()
            self.progress.taken()
            try:
                if self._best.get(task.url, task.level) >= task.level:
                    await self._process(task)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - one URL must not end the run
                log.exception("fetching %s failed", task.url)
                self._report(
                    Result(task.url, Outcome.FAILED, problem=f"{type(exc).__name__}: {exc}")
                )
            finally:
                self._work.task_done()

    # -- one URL --

    async def _process(self, task: Task) -> None:
        url = canonicalize(task.url)
        if self.server.is_own(url):
            # the proxy would answer with a command page, recorded as if it were a site
            if task.role is Role.SEED:
                self._report(Result(url.file, Outcome.FAILED, problem=OWN_PAGE))
            else:
                log.info("%s: %s", url.file, OWN_PAGE)
            return
        if task.role is not Role.SEED and self.options.robots:
            rules = await self._robots_for(url)
            if not rules.allowed(url):
                if rules.unavailable:
                    self._report(Result(url.file, Outcome.FAILED, problem=rules.unavailable))
                else:
                    self._report(
                        Result(url.file, Outcome.ROBOTS, problem="disallowed by robots.txt")
                    )
                return
        handled = self._handled.get(url.file)
        if handled is not None:
            await handled.wait()  # fetched already (or being fetched): follow it again
            if url.file in self._unusable:
                return
            entry = await asyncio.to_thread(self.store.get, url)
        else:
            handled = self._handled[url.file] = asyncio.Event()
            try:
                force = self.options.force or (
                    self.options.refresh_seeds and task.role is Role.SEED and task.hops == 0
                )
                entry, result, _ = await self._get(url, force=force)
                if result.outcome is not Outcome.FETCHED and result.outcome is not Outcome.FRESH:
                    self._unusable.add(url.file)
                self._report(result)
            finally:
                handled.set()
            if url.file in self._unusable:
                return
        if entry is not None:
            await self._follow(task, url, entry)

    async def _get(
        self, url: URL, *, force: bool, max_age: int | None = None
    ) -> tuple[CachedEntry | None, Result, bool]:
        """The URL's response, from the cache if fresh, else fetched and recorded; and whether
        it was fetched."""
        cached = await asyncio.to_thread(self.store.get, url)
        queued = self._queued.get(url.file)
        if max_age is None:
            max_age = max_age_for(url.canonical, self._rules)
        if cached is not None and not force and is_fresh(cached.date, datetime.now(UTC), max_age):
            if queued is not None:
                await asyncio.to_thread(self.server.queue.remove, queued.key)
            return cached, self._result(url, cached, fetched=False), False
        headers = list(queued.headers) if queued is not None else self._headers
        async with self._slot(url):
            self.progress.started(url.file)
            try:
                await self.server.fetch_to_archive(url, url.file, "GET", headers, b"")
            except UpstreamError as exc:
                return None, Result(url.file, Outcome.FAILED, problem=exc.reason), True
            finally:
                self.progress.stopped()
        if queued is not None:
            await asyncio.to_thread(self.server.queue.remove, queued.key)
        entry = await asyncio.to_thread(self.store.get, url)
        if entry is None:  # a 304 to an unconditional request: recorded, nothing to serve
            return None, Result(url.file, Outcome.FAILED, problem="no servable response"), True
        return entry, self._result(url, entry, fetched=True), True

    @staticmethod
    def _result(url: URL, entry: CachedEntry, *, fetched: bool) -> Result:
        size = entry.payload_length if fetched else 0
        if entry.status >= 400:
            where = "" if fetched else " (cached)"
            problem = f"HTTP {entry.status} {entry.reason}".rstrip() + where
            return Result(url.file, Outcome.FAILED, entry.status, size, problem)
        outcome = Outcome.FETCHED if fetched else Outcome.FRESH
        return Result(url.file, outcome, entry.status, size)

    async def _follow(self, task: Task, url: URL, entry: CachedEntry) -> None:
        redirect = redirect_task(
            task, entry.status, get_header(entry.headers, "Location"), self.options
        )
        if redirect is not None:
            if redirect.task is not None:
                loop = self._redirect_loop(url.file, redirect.task.url)
                if loop:
                    self._report(Result(url.file, Outcome.FAILED, problem=loop))
                    return
                self._discover(redirect.task)
            elif redirect.failed:
                self._report(Result(url.file, Outcome.FAILED, problem=redirect.problem))
            else:
                log.info("%s: %s", url.file, redirect.problem)
            return
        if not 200 <= entry.status < 300:
            return
        content_type = get_header(entry.headers, "Content-Type")
        html = is_html(content_type) and (
            self.options.requisites or task.level < self.options.depth
        )
        css = is_css(content_type) and self.options.requisites
        if not (html or css):
            return
        try:
            data = await asyncio.to_thread(read_decoded, entry)
        except (ValueError, OSError) as exc:
            log.warning("%s: links not followed: %s", url.file, exc)
            return
        charset = charset_param(content_type)
        if html:
            links = extract_html_links(data, url.file, encoding=charset)
        else:
            links = extract_css_links(data, url.file, encoding=charset)
        for t in next_tasks(task, links, self.options):
            self._discover(t)

    def _redirect_loop(self, source: str, target: str) -> str | None:
        """Record the redirect; if it closes a cycle, describe the cycle."""
        self._redirects[source] = target
        chain = [source]
        hop = target
        while hop not in chain:
            chain.append(hop)
            if hop not in self._redirects:
                return None
            hop = self._redirects[hop]
        chain.append(hop)
        return "redirect loop: " + " -> ".join(chain[chain.index(hop) :])

    # -- the outgoing queue's other requests --

    async def _fetch_other(self, item: QueuedRequest) -> None:
        method = item.method.upper()
        try:
            url = canonicalize(item.url)
        except InvalidURL as exc:  # checked in _load_queue; kept for safety
            self._report(Result(item.url, Outcome.FAILED, problem=exc.reason, method=method))
            return
        async with self._slot(url):
            label = f"{method} {url.file}"
            self.progress.started(label)
            try:
                status = await self.server.fetch_to_archive(
                    url, item.key, method, list(item.headers), item.body
                )
            except UpstreamError as exc:
                self._report(Result(url.file, Outcome.FAILED, problem=exc.reason, method=method))
                return
            finally:
                self.progress.stopped()
        await asyncio.to_thread(self.server.queue.remove, item.key)
        entry = await asyncio.to_thread(self.store.lookup, url, item.key, method, item.body)
        size = entry.payload_length if entry is not None else 0
        if status >= 400:
            self._report(Result(url.file, Outcome.FAILED, status, size, f"HTTP {status}", method))
        else:
            self._report(Result(url.file, Outcome.FETCHED, status, size, method=method))

    # -- hosts and robots.txt --

    @contextlib.asynccontextmanager
    async def _slot(self, url: URL) -> AsyncIterator[None]:
        origin = f"{url.proto}://{url.hostport}"
        host = self._hosts.get(origin)
        if host is None:
            host = self._hosts[origin] = _Host(asyncio.Semaphore(self.options.per_host))
        async with host.slots:
            delay = self.options.delay
            rules = self._robots.get(origin)
            if rules is not None and rules.done() and not rules.cancelled():
                crawl = rules.result().crawl_delay()
                delay = max(delay, crawl or 0.0)
            if delay > 0:
                loop = asyncio.get_running_loop()
                start = max(loop.time(), host.next_start)
                host.next_start = start + delay
                await asyncio.sleep(start - loop.time())
            yield

    async def _robots_for(self, url: URL) -> RobotsRules:
        origin = f"{url.proto}://{url.hostport}"
        future = self._robots.get(origin)
        if future is None:
            future = self._robots[origin] = asyncio.ensure_future(self._load_robots(url))
        return await asyncio.shield(future)

    async def _load_robots(self, url: URL) -> RobotsRules:
        target = canonicalize(robots_url(url))
        for _ in range(ROBOTS_REDIRECTS + 1):
            handled = self._handled.get(target.file)
            if handled is not None:
                await handled.wait()
                entry = await asyncio.to_thread(self.store.get, target)
                if entry is None:
                    return parse_robots(None, error="it could not be fetched")
            else:
                handled = self._handled[target.file] = asyncio.Event()
                try:
                    rule = max_age_for(target.canonical, self._rules)
                    max_age = ROBOTS_MAX_AGE if rule is None else min(rule, ROBOTS_MAX_AGE)
                    entry, result, fetched = await self._get(
                        target, force=self.options.force, max_age=max_age
                    )
                    if entry is None:
                        self._unusable.add(target.file)
                        self._report(result)
                        return parse_robots(None, error=result.problem)
                    # an error status for robots.txt is an answer, not a failure
                    outcome = Outcome.FETCHED if fetched else Outcome.FRESH
                    self._report(Result(target.file, outcome, result.status, result.size))
                finally:
                    handled.set()
            location = get_header(entry.headers, "Location")
            if entry.status in REDIRECT_STATUSES and location:
                try:
                    target = canonicalize(urljoin(target.file, location.strip()))
                except (InvalidURL, ValueError):
                    return parse_robots(entry.status)
                continue
            if 200 <= entry.status < 300:
                try:
                    data = await asyncio.to_thread(read_decoded, entry, 512 * 1024)
                except (ValueError, OSError) as exc:
                    return parse_robots(None, error=f"it cannot be read: {exc}")
                return parse_robots(entry.status, data)
            return parse_robots(entry.status)
        return parse_robots(400)  # too many redirects: RFC 9309 says treat as unavailable


# --- one URL, for the URL database ------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """What a URL returned, redirects followed: for ``wwwproxy urldb add`` and ``check``."""

    url: str
    final_url: str
    status: int | None = None
    reason: str = ""
    content_type: str | None = None
    length: int | None = None
    sha256: str | None = None
    error: str | None = None
    redirects: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 400


async def probe(
    server: ProxyServer, url: str, *, digest: bool = False, max_redirects: int = 10
) -> Probe:
    """Fetch ``url`` (recorded like any fetch), following redirects, and describe the final
    response.  The request asks for no Content-Encoding, and any that comes anyway is removed
    before ``length`` and ``sha256`` are taken: they describe the content itself."""
    headers = [("User-Agent", USER_AGENT), ("Accept", "*/*"), ("Accept-Encoding", "identity")]
    try:
        target = canonicalize(url)
    except InvalidURL as exc:
        return Probe(url, url, error=exc.reason)
    chain: list[str] = []
    while True:
        try:
            await server.fetch_to_archive(target, target.file, "GET", headers, b"")
        except UpstreamError as exc:
            return Probe(url, target.file, error=exc.reason, redirects=tuple(chain))
        entry = await asyncio.to_thread(server.store.get, target)
        if entry is None:
            return Probe(url, target.file, error="no servable response", redirects=tuple(chain))
        location = get_header(entry.headers, "Location")
        if entry.status in REDIRECT_STATUSES and location:
            chain.append(target.file)
            try:
                nxt = canonicalize(urljoin(target.file, location.strip()))
            except (InvalidURL, ValueError):
                return Probe(
                    url,
                    target.file,
                    entry.status,
                    entry.reason,
                    error=f"redirect to an invalid Location {location!r}",
                    redirects=tuple(chain),
                )
            if nxt.file in chain:
                return Probe(
                    url,
                    nxt.file,
                    entry.status,
                    entry.reason,
                    error="redirect loop: " + " -> ".join([*chain, nxt.file]),
                    redirects=tuple(chain),
                )
            if len(chain) > max_redirects:
                return Probe(
                    url,
                    nxt.file,
                    entry.status,
                    entry.reason,
                    error=f"too many redirects (more than {max_redirects})",
                    redirects=tuple(chain),
                )
            target = nxt
            continue
        length = sha = None
        if digest:
            encoding = get_header(entry.headers, "Content-Encoding")

            def measure(
                entry: CachedEntry = entry, encoding: str | None = encoding
            ) -> tuple[int, str]:
                with entry.open_body() as stream:
                    return _digest(stream, encoding)

            try:
                length, sha = await asyncio.to_thread(measure)
            except ValueError as exc:
                return Probe(
                    url,
                    target.file,
                    entry.status,
                    entry.reason,
                    get_header(entry.headers, "Content-Type"),
                    error=str(exc),
                    redirects=tuple(chain),
                )
        return Probe(
            url,
            target.file,
            entry.status,
            entry.reason,
            get_header(entry.headers, "Content-Type"),
            length,
            sha,
            redirects=tuple(chain),
        )


# --- the server object used outside ``wwwproxy serve`` ----------------------------------------


@contextlib.asynccontextmanager
async def fetching_server(
    config: Config,
    store: Store,
    *,
    per_host: int = 2,
    resolver: aiohttp.abc.AbstractResolver | None = None,
) -> AsyncIterator[ProxyServer]:
    """A :class:`ProxyServer` that is not listening, only recording fetches, with at most
    ``per_host`` connections to one host.  ``resolver`` replaces DNS (the tests use it to send
    ``example.com`` to a local server)."""
    server = ProxyServer(config, store)
    try:
        # what is fetched is searchable at once, as what the proxy records itself is
        search: SearchIndex | None = await asyncio.to_thread(SearchIndex.for_store, store)
    except (ValueError, sqlite3.Error) as exc:
        log.warning("the search index is not kept up to date: %s", exc)
        search = None
    timeouts = UpstreamTimeouts(config.connect_timeout, config.read_timeout)
    session = new_session(timeouts, limit_per_host=per_host, resolver=resolver)
    server.session = session
    try:
        yield server
    finally:
        await server.close()
        if search is not None and not await asyncio.to_thread(search.flush, SEARCH_FLUSH):
            log.warning("the search index was not brought up to date: run a rebuild on /search/")
