"""The one crawler: the outgoing queue, URL lists, links and requisites, for ``wwwproxy fetch``,
``/refresh/``, monitored URLs and the control page's "fetch the queue" (:func:`fetch_queue`).

Every fetch goes through :meth:`wwwproxy.recording.engine.Engine.fetch`, the proxy's own
recording path, whether to fetch is decided by :func:`wwwproxy.http.policy.decide`, the proxy's
own cache policy, and what is followed is what was recorded (the bytes the engine hands back
with the response it just recorded, or a cached copy read from the archive), so the cache holds
exactly what a browser going through the proxy would have got.

Rules (decisions where the issue was silent are marked *):

* **Levels.**  Listed URLs are level 0.  ``depth`` N follows hyperlinks (``<a>``, ``<area>``,
  ``<link>``, meta refresh; and frames/iframes when ``requisites`` is off; or only the link
  kinds in ``follow``) from pages at level < N to level + 1.  With ``requisites``, everything a
  fetched page needs (images, style sheets with their ``@import`` and ``url()``, scripts,
  frames, iframes, ``srcset``, icons, media; or only the kinds in ``requisite_kinds``) is
  fetched at the page's level; a frame is part of its page, so its own links are followed from
  that level too.  A URL is fetched once per run, at the lowest level it is reached at
  (reached again lower, its links are followed again from the cache), so the set fetched does
  not depend on timing.  ``max_urls`` caps the URLs one run takes on (``/refresh/``: 200).
  The config's ``max_links_per_page`` bounds the links taken from one page (in document
  order); the references past it are counted in the summary and shown by the progress.
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
* **Fresh** (what a second run skips) is what the proxy would serve online without asking:
  :func:`wwwproxy.http.policy.decide` on the cached copy (``keep_good_copy`` picks which), with
  the first matching ``freshness`` rule and ``request_changed``.  A stale copy with validators
  is revalidated (a 304 records a revisit and counts as fetched, status 304); one without is
  fetched again.  A cached 4xx/5xx is never fresh, so a rerun tries it again.  ``force``
  fetches everything unconditionally.  What the user asked for again is reloaded as a browser's
  forced reload would be (revalidated or fetched, never skipped as fresh): the queued requests
  (the queue is what was asked for while offline) and, with ``refresh_seeds``, the listed URLs
  (monitors, ``/refresh/``).  Links of a fresh page are still followed, from the cached copy,
  so an interrupted run resumes where it stopped.
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
  serve`` (or two fetches) may write the same cache at once.  What is fetched goes into the
  cache's full-text search index through the services' index if they have one (the proxy's
  ``/refresh/`` and queue fetches); ``wwwproxy fetch`` keeps none (its run ends when its pages
  are recorded) and touches a mark instead, from which the search index of the running proxy,
  or of the next process to start with one, catches up in the background
  (:mod:`wwwproxy.archive.search.unindexed`).
* **Rendering** (``renderer`` given: ``--render``, ``render=1``).  Every HTML page reached as
  a listed URL or a hyperlink (2xx, fetched or fresh) is also loaded in headless Chromium
  through the recording proxy (:mod:`wwwproxy.fetch.render`), so what its scripts load is
  recorded as when a person browses; its links (hyperlinks, and requisites with
  ``requisites``) are then read from the DOM the scripts left, with the same rules as above.
  What the browser loads is not subject to robots.txt or the scope (a person's browser would
  load it).  A page that cannot be rendered (its tab crashed or hung twice) fails, with the
  reason; its links are read from the markup as without rendering.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol
from urllib.parse import urljoin

from ..archive.outgoing import QueuedRequest
from ..archive.search.unindexed import UnindexedMark
from ..archive.sessions import OutEntry, write_lastout
from ..archive.store import CachedEntry, StoreError
from ..http.headers import get_header
from ..http.policy import Action, Mode, RequestDirectives, Stored, is_servable
from ..recording.engine import Exchange
from ..recording.engine import Outcome as Fetched
from ..recording.services import Services
from ..recording.upstream import UpstreamError
from ..url import URL, InvalidURL, canonicalize, wire_target
from .bodies import Recorded, Response, page_links, read_decoded
from .linkproc import LinkHelper
from .links import PageLinks, is_css, is_html
from .progress import Progress
from .render import Rendered
from .robots import RobotsRules, parse_robots, robots_url
from .tasks import (
    REDIRECT_STATUSES,
    FetchOptions,
    Outcome,
    RenderReport,
    Result,
    Role,
    Summary,
    Task,
    fetch_problem,
    next_tasks,
    redirect_task,
)

__all__ = ["OWN_PAGE", "PageRenderer", "Prefetcher", "fetch_queue"]

log = logging.getLogger("wwwproxy.fetch")

ROBOTS_MAX_AGE = 24 * 3600  # RFC 9309 §2.4: a cached robots.txt is used for a day at most
ROBOTS_REDIRECTS = 5
#: a body up to this size comes back from the engine with the response just recorded, and its
#: links are read from there (larger ones: read again from the archive)
KEEP_BODY = 4 * 1024 * 1024
OWN_PAGE = "one of this proxy's own pages: not fetched"
#: pages and style sheets a run reads for links itself before it starts a link helper
LINK_HELPER_AFTER = 16


# --- the crawler -------------------------------------------------------------------------------


class PageRenderer(Protocol):
    """Loads a page in a browser through the recording proxy (:class:`~.render.Renderer`)."""

    async def render(self, url: str) -> Rendered: ...


@dataclass
class _Host:
    slots: asyncio.Semaphore
    next_start: float = 0.0


class Prefetcher:
    """One fetch run.  ``services`` supply the recording engine, the cache, the queue, the
    config (freshness rules, ``request_changed``, ``keep_good_copy``) and what the proxy's own
    address is; nothing need be listening.  The mode is not looked at: whoever starts a run
    has decided to go online (:func:`fetch_queue` refuses offline)."""

    def __init__(
        self,
        services: Services,
        options: FetchOptions,
        progress: Progress | None = None,
        renderer: PageRenderer | None = None,
    ) -> None:
        self.services = services
        self.renderer = renderer
        self.store = services.store
        self.options = options
        self.progress = progress or Progress(None)
        self.summary = Summary()
        self._headers = [
            ("User-Agent", options.user_agent),
            ("Accept", "*/*"),
            ("Accept-Encoding", "gzip, deflate, br"),
        ]
        self._best: dict[str, int] = {}
        self._handled: dict[str, asyncio.Event] = {}
        self._unusable: set[str] = set()
        self._redirects: dict[str, str] = {}
        self._queued: dict[str, QueuedRequest] = {}
        self._hosts: dict[str, _Host] = {}
        self._robots: dict[str, asyncio.Future[RobotsRules]] = {}
        self._work: asyncio.Queue[Task] = asyncio.Queue()
        self._max_links = services.config.max_links_per_page or None
        self._link_helper = LinkHelper(max_links=self._max_links)
        self._pages_read = 0
        #: without a search index (``wwwproxy fetch``): what has the next one index the pages
        self._unindexed = UnindexedMark(self.store.root) if services.search is None else None

    # -- running --

    async def run(self, seeds: Iterable[str] = (), *, queue: bool = False) -> Summary:
        """Fetch the outgoing queue (``queue``) and the ``seeds`` with what they lead to."""
        started, began = time.monotonic(), datetime.now(UTC)
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
            self._discover(Task(url.file, 0, Role.SEED, url.file, target=wire_target(seed)))
        self._recorded()
        # the upstream session (its TLS context: tens of milliseconds) is made now, not inside
        # the first request's turn, where it would eat into the delay between requests
        _ = self.services.engine.session
        workers = [asyncio.create_task(self._worker()) for _ in range(self.options.concurrency)]
        try:
            if others:
                await asyncio.gather(*(self._fetch_other(item) for item in others))
            await self._work.join()
        finally:
            pending: list[asyncio.Future[None] | asyncio.Future[RobotsRules]] = [
                *workers,
                *(f for f in self._robots.values() if not f.done()),
            ]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await asyncio.to_thread(self._link_helper.stop)
            if self._unindexed is not None:
                self._unindexed.done()
            self.progress.close()
            self.summary.elapsed = time.monotonic() - started
        if queue and self.summary.results:  # the lastout page: what this queue fetch got
            results = self.summary.results.values()
            got = [
                OutEntry(r.url, r.method, r.outcome.value, r.status, r.problem, r.dropped)
                for r in results
            ]
            try:
                await asyncio.to_thread(
                    write_lastout, self.store.root, began, datetime.now(UTC), got
                )
            except OSError as exc:
                log.warning("lastout was not written: %s", exc)
        return self.summary

    def _recorded(self) -> None:
        """Pages are being recorded: without a search index, the mark that has the next one
        index them is touched (at most once a second: :mod:`wwwproxy.archive.search.unindexed`)."""
        if self._unindexed is not None:
            self._unindexed.touch()

    async def _load_queue(self) -> list[QueuedRequest]:
        others = []
        entries = await asyncio.to_thread(lambda: list(self.services.queue.entries()))
        for path, item in entries:
            if isinstance(item, ValueError):
                self._report(Result(str(path), Outcome.FAILED, problem=str(item)))
                continue
            try:
                url = canonicalize(item.url, local_host=self.services.local_host)
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
        cap = self.options.max_urls
        if best is None and cap is not None and len(self._best) >= cap:
            self.summary.capped += 1
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
            result = dataclasses.replace(result, status=old.status, size=old.size)
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
        if self.services.is_own(url):
            # the proxy would answer with a command page, recorded as if it were a site
            if task.role is Role.SEED:
                self._report(Result(url.file, Outcome.FAILED, problem=OWN_PAGE))
            else:
                log.info("%s: %s", url.file, OWN_PAGE)
            return
        verdict = self.services.filters.verdict(url)
        if not verdict.cache:  # dont_get: never fetched; dont_cache, local_net: never kept
            skipped = f"matches {verdict.pattern!r} in {verdict.listed_in}: not fetched"
            if task.role is Role.SEED:
                self._report(Result(url.file, Outcome.FAILED, problem=skipped))
            else:
                log.info("%s: %s", url.file, skipped)
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
        entry: CachedEntry | Recorded | None
        handled = self._handled.get(url.file)
        if handled is not None:
            await handled.wait()  # fetched already (or being fetched): follow it again
            if url.file in self._unusable:
                return
            entry = await asyncio.to_thread(self._cached, url)
        else:
            handled = self._handled[url.file] = asyncio.Event()
            try:
                reload = self.options.refresh_seeds and task.role is Role.SEED and task.hops == 0
                entry, result, _ = await self._get(
                    url, force=self.options.force, reload=reload, target=task.target
                )
                if result.outcome is not Outcome.FETCHED and result.outcome is not Outcome.FRESH:
                    self._unusable.add(url.file)
                self._report(result)
            finally:
                handled.set()
            if url.file in self._unusable:
                return
        if entry is not None:
            await self._follow(task, url, entry)

    def _cached(self, url: URL) -> CachedEntry | None:
        """The copy the proxy would serve for a GET of ``url`` (blocking; a crawl's reads do
        not push the copies browsers are served out of the memory cache)."""
        return self.store.get(url, prefer_good=self.services.prefers_good(), keep=False)

    def _action(
        self,
        url: URL,
        cached: CachedEntry | None,
        *,
        force: bool,
        reload: bool,
        rule_max_age: int | None,
    ) -> Action:
        """FETCH, REVALIDATE or SERVE (fresh: skipped), by the proxy's own cache policy."""
        if cached is None or force:
            return Action.FETCH
        return self.services.decide(
            url,
            Stored(cached.date, cached.status, cached.headers),
            directives=RequestDirectives(force=reload),
            mode=Mode.ONLINE,
            rule_max_age=rule_max_age,
        )

    async def _get(
        self,
        url: URL,
        *,
        force: bool = False,
        reload: bool = False,
        rule_max_age: int | None = None,
        target: str | None = None,
    ) -> tuple[CachedEntry | Recorded | None, Result, bool]:
        """The URL's response: the cached copy if it is fresh, else revalidated or fetched
        (and recorded: the response as the engine recorded it); and whether upstream was
        asked.  ``force`` fetches whatever is cached;
        ``reload`` (and a queued request) never takes the copy as fresh, as a browser's forced
        reload.  ``rule_max_age`` stands in for the config's freshness rules (robots.txt).
        ``target``: the path and query to send as written (a queued request's own wins)."""
        cached = await asyncio.to_thread(self._cached, url)
        queued = self._queued.get(url.file)
        action = self._action(
            url,
            cached,
            force=force,
            reload=reload or queued is not None,
            rule_max_age=rule_max_age,
        )
        if action is Action.SERVE and cached is not None:
            return cached, self._result(url, cached, fetched=False), False
        headers = list(queued.headers) if queued is not None else list(self._headers)
        if queued is not None:  # a queued request goes as the browser sent it
            target = queued.target
        revalidate = cached if action is Action.REVALIDATE else None
        async with self._slot(url):
            self.progress.started(url.file)
            try:
                fetched = await self.services.engine.fetch(
                    Exchange(url, url.file, "GET", headers, keep_body=KEEP_BODY, target=target),
                    revalidate=revalidate,
                )
            except (UpstreamError, StoreError) as exc:
                result = Result(url.file, Outcome.FAILED, problem=fetch_problem(exc))
                if queued is not None and isinstance(exc, UpstreamError):
                    result = await self._queue_failed(queued, result)
                return None, result, True
            finally:
                self.progress.stopped()
        self._recorded()
        if queued is not None:
            await asyncio.to_thread(self.services.queue.remove, queued.key)
        if fetched.not_modified is not None:  # a revisit: the copy stands, recorded again
            return fetched.not_modified, Result(url.file, Outcome.FETCHED, 304), True
        if not is_servable(fetched.status):
            # a 304 or 206 to an unconditional request: recorded, nothing to serve
            problem = f"HTTP {fetched.status}: no servable response"
            return None, Result(url.file, Outcome.FAILED, fetched.status, problem=problem), True
        # the answer just recorded, even an error beside a kept good copy: it is what happened
        # (handed back by the engine: reading it again from the archive cost a tenth of a run)
        entry = Recorded(
            fetched.status, fetched.reason, tuple(fetched.headers), fetched.received, fetched.body
        )
        return entry, self._result(url, entry, fetched=True), True

    def _readable(self, url: URL, entry: Response) -> Response | None:
        """``entry`` with a body to read: a recorded response whose body was too large to
        keep is read from the archive (blocking)."""
        if isinstance(entry, Recorded) and entry.body is None:
            return self.store.get(url, prefer_good=False, keep=False)
        return entry

    def _robots_text(self, url: URL, entry: Response) -> bytes:
        """A robots.txt's first 512 KiB (blocking); ValueError if it is not there any more."""
        readable = self._readable(url, entry)
        if readable is None:
            raise ValueError("it is not in the cache")
        return read_decoded(readable, 512 * 1024)

    def _links(self, url: URL, entry: Response, hyperlinks: bool) -> PageLinks:
        """The links of a page or style sheet (blocking), at most ``max_links_per_page``;
        ``hyperlinks`` False: its requisites only.  Past the run's first pages, a page just
        recorded is read in the link helper, on another core (a short run does not start
        one)."""
        readable = self._readable(url, entry)
        if readable is None:
            return PageLinks()
        self._pages_read += 1
        if (
            isinstance(readable, Recorded)
            and readable.body is not None
            and self._pages_read > LINK_HELPER_AFTER
        ):
            page = (readable.body, readable.headers, url.file, hyperlinks)
            return self._link_helper.links(page)
        return page_links(readable, url.file, hyperlinks=hyperlinks, max_links=self._max_links)

    @staticmethod
    def _result(url: URL, entry: CachedEntry | Recorded, *, fetched: bool) -> Result:
        size = entry.payload_length if fetched else 0
        if entry.status >= 400:
            where = "" if fetched else " (cached)"
            problem = f"HTTP {entry.status} {entry.reason}".rstrip() + where
            return Result(url.file, Outcome.FAILED, entry.status, size, problem)
        outcome = Outcome.FETCHED if fetched else Outcome.FRESH
        return Result(url.file, outcome, entry.status, size)

    async def _follow(self, task: Task, url: URL, entry: CachedEntry | Recorded) -> None:
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
        if self.renderer is not None and is_html(content_type) and task.role is not Role.REQUISITE:
            entry = await self._render(url, entry)
        html = is_html(content_type) and (
            self.options.requisites or task.level < self.options.depth
        )
        css = is_css(content_type) and self.options.requisites
        if not (html or css):
            return
        # a page at the last level leads only to its requisites: its hyperlinks are not read
        follow = task.level < self.options.depth
        try:
            links = await asyncio.to_thread(self._links, url, entry, follow)
        except (ValueError, OSError) as exc:
            log.warning("%s: links not followed: %s", url.file, exc)
            return
        if links.left_out:
            self.summary.links_left_out[url.file] = links.left_out
            self.progress.links_left_out(url.file, links.left_out, self._max_links or 0)
        # a URL already taken on at this level or lower gains nothing (_discover drops it):
        # left out before the scope rules, which parse every URL; most of a site's links are
        # to pages it has taken on already
        best = self._best
        fresh = [link for link in links if best.get(link.url, task.level + 1) > task.level]
        for t in next_tasks(task, fresh, self.options):
            self._discover(t)

    async def _render(self, url: URL, entry: CachedEntry | Recorded) -> CachedEntry | Recorded:
        """Load the page in the browser (recording what it loads); the DOM its scripts left,
        as a page to read links from, or ``entry`` itself if it could not be rendered."""
        assert self.renderer is not None
        self.progress.started(f"render {url.file}")
        try:
            rendered = await self.renderer.render(url.file)
        finally:
            self.progress.stopped()
        tally = rendered.tally
        report = RenderReport(
            tally.requests,
            tally.fetched,
            tally.from_cache,
            tally.failed,
            rendered.capped,
            rendered.problem,
        )
        self.summary.rendered[url.file] = report
        self.progress.rendered(url.file, report)
        if rendered.problem is not None:
            tries = "twice" if rendered.attempts > 1 else "once"
            problem = f"not rendered ({tries}): {rendered.problem}"
            self._report(Result(url.file, Outcome.FAILED, entry.status, problem=problem))
        if rendered.dom is None:
            return entry
        body = rendered.dom.encode("utf-8", "surrogatepass")
        headers = (("Content-Type", "text/html; charset=utf-8"),)
        return Recorded(entry.status, entry.reason, headers, len(body), body)

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
            url = canonicalize(item.url, local_host=self.services.local_host)
        except InvalidURL as exc:  # checked in _load_queue; kept for safety
            self._report(Result(item.url, Outcome.FAILED, problem=exc.reason, method=method))
            return
        if self.services.is_own(url):
            self._report(Result(url.file, Outcome.FAILED, problem=OWN_PAGE, method=method))
            return
        exchange = Exchange(
            url, item.key, method, list(item.headers), item.body, target=item.target
        )
        async with self._slot(url):
            self.progress.started(f"{method} {url.file}")
            try:
                fetched: Fetched = await self.services.engine.fetch(exchange)
            except (UpstreamError, StoreError) as exc:
                problem = fetch_problem(exc)
                result = Result(url.file, Outcome.FAILED, problem=problem, method=method)
                if isinstance(exc, UpstreamError):
                    result = await self._queue_failed(item, result)
                self._report(result)
                return
            finally:
                self.progress.stopped()
        self._recorded()
        await asyncio.to_thread(self.services.queue.remove, item.key)
        status, size = fetched.status, fetched.received
        if status >= 400:
            self._report(Result(url.file, Outcome.FAILED, status, size, f"HTTP {status}", method))
        else:
            self._report(Result(url.file, Outcome.FETCHED, status, size, method=method))

    async def _queue_failed(self, item: QueuedRequest, result: Result) -> Result:
        """Count a queued request's failure to reach its server; the ``queue_failures``-th
        takes it out of the queue, and its result says so (once: it is not queued again)."""
        limit = self.services.config.queue_failures
        try:
            failures = await asyncio.to_thread(self.services.queue.failed, item.key, limit)
        except OSError as exc:
            log.warning("the failure of queued %s was not counted: %s", item.url, exc)
            return result
        if failures is None:
            return result
        problem = f"{result.problem}; failed {failures} times: removed from the queue"
        return dataclasses.replace(result, problem=problem, dropped=True)

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
            entry: CachedEntry | Recorded | None
            handled = self._handled.get(target.file)
            if handled is not None:
                await handled.wait()
                entry = await asyncio.to_thread(self._cached, target)
                if entry is None:
                    return parse_robots(None, error="it could not be fetched")
            else:
                handled = self._handled[target.file] = asyncio.Event()
                try:
                    rule = self.services.rule_max_age(target.canonical)
                    max_age = ROBOTS_MAX_AGE if rule is None else min(rule, ROBOTS_MAX_AGE)
                    entry, result, fetched = await self._get(
                        target, force=self.options.force, rule_max_age=max_age
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
                    data = await asyncio.to_thread(self._robots_text, target, entry)
                except (ValueError, OSError) as exc:
                    return parse_robots(None, error=f"it cannot be read: {exc}")
                return parse_robots(entry.status, data)
            return parse_robots(entry.status)
        return parse_robots(400)  # too many redirects: RFC 9309 says treat as unavailable


# --- the queue, for the control page -----------------------------------------------------------


async def fetch_queue(
    services: Services, options: FetchOptions | None = None, progress: Progress | None = None
) -> Summary:
    """Fetch the outgoing queue now (the control page's "Fetch the queue", going online): every
    queued request, fresh copy or not; each fetched one leaves the queue.  Offline it fetches
    nothing and returns an empty summary: offline means no network traffic at all."""
    if services.mode is Mode.OFFLINE:
        return Summary()
    return await Prefetcher(services, options or FetchOptions(), progress).run([], queue=True)
