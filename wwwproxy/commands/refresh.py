"""``/refresh/?url=U``: fetch a URL again now (online, autodial) or queue it (offline), with
WWWOFFLE's refresh options: follow links ``depth`` levels (0-3) and fetch page requisites
(``req=images``, ``stylesheets``, ``scripts``, ``frames``, repeated, or ``req=all``); links are
followed on the same host (``scope=host``, the default) or anywhere (``scope=any``), requisites
come from any host (a page's images on another server are part of the page).  ``render=1``
also loads each page in headless Chromium through the recording proxy
(:mod:`wwwproxy.fetch.render`), so what its scripts load is recorded and its links come from
the rendered DOM; the job lists what each rendered page loaded (no browser: the job says how
to install one).

GET shows the form and the recent refresh jobs; POST starts one.  A job is a run of the one
crawler (:class:`wwwproxy.fetch.prefetch.Prefetcher`), as ``wwwproxy fetch`` is: the URL itself
is reloaded (revalidated or fetched, never taken as fresh), links and requisites are fetched
when the cache policy says they are stale, robots.txt is honoured for what is followed, and a
job takes on at most 200 URLs.  A plain refresh is done before the answer; one with links,
requisites or rendering runs in the background, and the jobs list shows its progress.  Offline
nothing is fetched (nor rendered): the URL (and the links and requisites of its cached copy) is
queued for the next time online.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from aiohttp import web

from .. import __version__
from ..archive.outgoing import QueuedRequest
from ..fetch.bodies import page_links
from ..fetch.prefetch import Prefetcher
from ..fetch.progress import Progress, render_line
from ..fetch.render import RenderUnavailable, render_options, rendering
from ..fetch.tasks import FetchOptions, Outcome, RenderReport, Result, Role, Task, next_tasks
from ..http.policy import Mode
from ..url import canonicalize
from .context import Context, PageError
from .template import esc, fmt_time, hidden, link, table
from .worker import in_worker

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..fetch.links import Link
    from ..fetch.render import Renderer
    from ..recording.services import Services

__all__ = ["FOLLOW", "GROUPS", "MAX_URLS", "RefreshJob", "page"]

log = logging.getLogger("wwwproxy.refresh")

MAX_URLS = 200
MAX_DEPTH = 3
KEEP_JOBS = 20
MAX_ERRORS = 20
#: Requisite groups of the refresh form -> link kinds of :mod:`wwwproxy.fetch.links`.
GROUPS: dict[str, frozenset[str]] = {
    "images": frozenset({"img", "srcset", "poster", "media", "icon"}),
    "stylesheets": frozenset({"css", "import", "css-url"}),
    "scripts": frozenset({"script", "preload", "manifest"}),
    "frames": frozenset({"frame", "iframe", "embed", "object"}),
}
#: The hyperlinks a refresh follows (not ``<link rel=next>`` and the like).
FOLLOW = frozenset({"a", "area", "meta-refresh"})
USER_AGENT = f"wwwproxy/{__version__} (refresh)"
_ids = itertools.count(1)


class _JobProgress(Progress):
    """The crawler's events, counted for the jobs list (and failures kept as errors)."""

    def __init__(self, job: RefreshJob) -> None:
        super().__init__(None)
        self.job = job

    def result(self, result: Result) -> None:
        super().result(result)
        if result.outcome is Outcome.FAILED:
            self.job.error(f"{result.label}: {result.problem}")

    def rendered(self, label: str, report: RenderReport) -> None:
        self.job.rendered[label] = report


@dataclass
class RefreshJob:
    url: str
    depth: int
    groups: tuple[str, ...]
    scope: str
    offline: bool
    render: bool = False
    id: int = field(default_factory=lambda: next(_ids))
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    queued: int = 0
    done: bool = False
    status: int | None = None  # of the URL itself
    errors: list[str] = field(default_factory=list)
    #: what each page rendered in the browser loaded (``render``)
    rendered: dict[str, RenderReport] = field(default_factory=dict)
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    progress: Progress = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.progress = _JobProgress(self)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset().union(*(GROUPS[g] for g in self.groups))

    @property
    def fetched(self) -> int:
        return self.progress.counts.fetched

    @property
    def fresh(self) -> int:
        return self.progress.counts.fresh

    @property
    def failed(self) -> int:
        return self.progress.counts.failed

    @property
    def robots(self) -> int:
        return self.progress.counts.robots

    def options(self) -> FetchOptions:
        """The crawl this job is: the refresh form's choices as the crawler's options."""
        kinds = self.kinds
        return FetchOptions(
            depth=self.depth,
            requisites=bool(kinds),
            requisite_kinds=kinds,
            follow=FOLLOW,
            scope=self.scope,
            refresh_seeds=True,
            max_urls=MAX_URLS,
            user_agent=USER_AGENT,
        )

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "url": self.url,
            "depth": self.depth,
            "requisites": list(self.groups),
            "scope": self.scope,
            "offline": self.offline,
            "render": self.render,
            "started": self.started.isoformat(),
            "status": self.status,
            "fetched": self.fetched,
            "fresh": self.fresh,
            "failed": self.failed,
            "robots": self.robots,
            "queued": self.queued,
            "done": self.done,
            "errors": self.errors,
            "rendered": {url: asdict(report) for url, report in self.rendered.items()},
        }

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)

    async def run(self, services: Services) -> None:
        try:
            if self.offline:
                await self._queue_all(services)
            elif self.render:
                async with rendering(services, render_options(services.config)) as renderer:
                    await self._crawl(services, renderer)
            else:
                await self._crawl(services)
        except RenderUnavailable as exc:
            log.warning("refresh of %s: not rendered: %s", self.url, exc)
            self.error(f"not rendered: {exc}")
        except Exception as exc:  # noqa: BLE001 (a background job must report, never vanish)
            log.exception("refresh of %s failed", self.url)
            self.error(f"stopped: {exc}")
        finally:
            self.done = True

    async def _crawl(self, services: Services, renderer: Renderer | None = None) -> None:
        prefetcher = Prefetcher(services, self.options(), self.progress, renderer)
        summary = await prefetcher.run([self.url])
        result = summary.results.get(self.url)
        self.status = result.status if result is not None else None
        if summary.capped:
            self.error(f"{summary.capped} more URL(s) left out: at most {MAX_URLS} a refresh")

    async def _queue_all(self, services: Services) -> None:
        """Offline: queue the URL, and the links and requisites of its cached copy that the
        crawl would take on; nothing goes out on the network."""
        start = canonicalize(self.url)
        targets = [start.file]
        if self.depth or self.groups:
            entry = await in_worker(services.store.get, start, prefer_good=services.prefers_good())
            if entry is not None and 200 <= entry.status < 300:
                links: Sequence[Link] = []
                try:
                    bound = services.config.max_links_per_page or None
                    links = await in_worker(page_links, entry, start.file, max_links=bound)
                except (ValueError, OSError) as exc:
                    self.error(f"{start.file}: links not read: {exc}")
                seed = Task(start.file, 0, Role.SEED, start.file)
                targets += [t.url for t in next_tasks(seed, links, self.options())]
        headers = (("User-Agent", USER_AGENT), ("Accept", "*/*"))
        for target in list(dict.fromkeys(targets))[:MAX_URLS]:
            if services.is_own(canonicalize(target)):
                continue
            item = QueuedRequest(url=target, key=target, headers=headers)
            if await in_worker(services.queue.add, item):
                self.queued += 1


def _groups(ctx: Context) -> tuple[str, ...]:
    chosen: list[str] = []
    for value in ctx.args.getall("req"):
        for name in value.replace(",", " ").split():
            name = name.strip().lower()
            names = list(GROUPS) if name == "all" else [name]
            for n in names:
                if n not in GROUPS:
                    raise PageError(
                        400, f"Unknown requisite group {n!r} (one of {', '.join(GROUPS)}, all)."
                    )
                if n not in chosen:
                    chosen.append(n)
    return tuple(chosen)


async def page(ctx: Context) -> web.StreamResponse:
    services = ctx.services
    jobs = services.refresh_jobs
    message = ""
    job: RefreshJob | None = None
    if ctx.post:
        url = ctx.url("url")
        assert url is not None
        if url.proto not in ("http", "https"):
            raise PageError(400, f"Only http and https URLs can be fetched, not {url.proto}.")
        if services.is_own(url):
            raise PageError(400, "That is one of this proxy's own pages.")
        depth = ctx.integer("depth", 0, 0, MAX_DEPTH)
        scope = ctx.text("scope", "host")
        if scope not in ("host", "any"):
            raise PageError(400, "The 'scope' argument must be host or any.")
        offline = services.mode is Mode.OFFLINE
        job = RefreshJob(url.file, depth, _groups(ctx), scope, offline, ctx.flag("render"))
        jobs.insert(0, job)
        del jobs[KEEP_JOBS:]
        if offline or (depth == 0 and not job.groups and not job.render):
            await job.run(services)
            if offline:
                message = f"Offline: queued {job.queued} request(s) for the next time online."
            elif job.status is not None:
                message = f"Fetched {url.canonical}: status {job.status}."
            else:
                message = f"Could not fetch {url.canonical}: {'; '.join(job.errors)}"
        else:
            job.task = services.spawn(job.run(services))
            message = f"Refreshing {url.canonical} and up to {MAX_URLS - 1} more in the background."
    data: dict[str, object] = {"jobs": [j.as_json() for j in jobs], "mode": services.mode}
    if job is not None:
        data["job"] = job.as_json()
        data["message"] = message

    def render() -> str:
        given = ctx.text("url", "") or ""
        depth_options = "".join(
            f'<option value="{d}"{" selected" if str(d) == (ctx.text("depth") or "0") else ""}>'
            f"{d}</option>"
            for d in range(MAX_DEPTH + 1)
        )
        chosen = set(ctx.args.getall("req"))
        boxes = "".join(
            f'<label><input type="checkbox" name="req" value="{esc(g)}"'
            f"{' checked' if g in chosen else ''}> {esc(g)}</label>"
            for g in GROUPS
        )
        form = (
            '<form method="post" action="/refresh/" class="card">'
            + hidden("token", ctx.token)
            + '<div class="row"><label>URL <input type="text" name="url" size="60" '
            f'value="{esc(given)}"></label></div>'
            f'<div class="row"><label>follow links <select name="depth">{depth_options}</select>'
            " levels deep</label></div>"
            f'<div class="row">with page requisites: {boxes}</div>'
            '<div class="row"><label><input type="checkbox" name="render" value="1"'
            f"{' checked' if ctx.flag('render') else ''}> render pages in a browser "
            "(headless Chromium), to also fetch what their scripts load</label></div>"
            '<div class="row"><label><input type="radio" name="scope" value="host" checked> '
            'same host only</label><label><input type="radio" name="scope" value="any"> '
            "any host</label></div>"
            f'<div class="row"><button class="primary">Refresh</button> <span class="muted">'
            f"online: fetched now; offline: queued. At most {MAX_URLS} URLs.</span></div></form>"
        )
        note = f'<div class="msg">{esc(message)}</div>' if message else ""
        rows = [
            (
                f'<span class="url">{esc(j.url)}</span>'
                + (" " + link("/history/", "history", {"url": j.url})),
                esc(
                    f"{j.depth} / {', '.join(j.groups) or '-'} / {j.scope}"
                    + (" / rendered" if j.render else "")
                ),
                (esc(fmt_time(j.started)), "when"),
                esc(_progress(j)) + _render_lines(j),
                esc("done" if j.done else "running"),
                esc("; ".join(j.errors[:3])),
            )
            for j in jobs
        ]
        return (
            note
            + form
            + "<h2>Recent refreshes</h2>"
            + table(
                ["URL", "Depth / requisites / scope", "Started", "Progress", "", "Errors"],
                rows,
                empty="None yet.",
            )
        )

    return ctx.respond(data, "Refresh", render, active="/refresh/")


def _progress(job: RefreshJob) -> str:
    if job.offline:
        return f"{job.queued} queued"
    text = f"{job.fetched} fetched, {job.failed} failed"
    if job.fresh:
        text += f", {job.fresh} fresh"
    if job.robots:
        text += f", {job.robots} disallowed by robots.txt"
    return text


def _render_lines(job: RefreshJob) -> str:
    """What each page rendered in the browser loaded, one line a page (HTML)."""
    if not job.rendered:
        return ""
    count = len(job.rendered)
    lines = "".join(
        f"<li>{esc(render_line(url, report))}</li>" for url, report in job.rendered.items()
    )
    return (
        f"<details><summary>{count} page{'s' if count != 1 else ''} rendered</summary>"
        f"<ul>{lines}</ul></details>"
    )
