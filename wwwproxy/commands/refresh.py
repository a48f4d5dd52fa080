"""``/refresh/?url=U``: fetch a URL again now (online, autodial) or queue it (offline), with
WWWOFFLE's refresh options: follow links ``depth`` levels (0-3) and fetch page requisites
(``req=images``, ``stylesheets``, ``scripts``, ``frames``, repeated, or ``req=all``), on the
same host (``scope=host``, the default) or anywhere (``scope=any``).

GET shows the form and the recent refresh jobs; POST starts one.  A plain refresh is done before
the answer; one with links or requisites runs in the background (at most 200 URLs), and the jobs
list shows its progress.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from aiohttp import web

from .. import __version__
from ..archive.outgoing import QueuedRequest
from ..archive.search import MAX_PAYLOAD
from ..fetch.links import Link, extract_css_links, extract_html_links, is_css, is_html, same_host
from ..http.content import charset_param, decode_content
from ..http.policy import Mode
from ..recording.upstream import UpstreamError
from ..url import URL, InvalidURL, canonicalize
from .context import Context, PageError
from .template import esc, fmt_time, hidden, link, table

if TYPE_CHECKING:
    from ..proxy.server import ProxyServer

__all__ = ["GROUPS", "RefreshJob", "page", "select_links"]

log = logging.getLogger("wwwproxy.refresh")

MAX_URLS = 200
MAX_DEPTH = 3
KEEP_JOBS = 20
#: Requisite groups of the refresh form -> link kinds of :mod:`wwwproxy.fetch.links`.
GROUPS: dict[str, frozenset[str]] = {
    "images": frozenset({"img", "srcset", "poster", "media", "icon"}),
    "stylesheets": frozenset({"css", "import", "css-url"}),
    "scripts": frozenset({"script", "preload", "manifest"}),
    "frames": frozenset({"frame", "iframe", "embed", "object"}),
}
FOLLOW = frozenset({"a", "area", "meta-refresh"})
_HEADERS = [("User-Agent", f"wwwproxy/{__version__} (refresh)"), ("Accept", "*/*")]
_ids = itertools.count(1)


def select_links(
    links: list[Link], kinds: frozenset[str], follow: bool, start: str, scope: str
) -> tuple[list[str], list[str]]:
    """(requisites to fetch, links to follow) of one page, in page order, unique."""
    requisites: list[str] = []
    follows: list[str] = []
    for item in links:
        if scope == "host" and not same_host(item.url, start):
            continue
        if item.requisite and item.kind in kinds:
            if item.url not in requisites:
                requisites.append(item.url)
        elif follow and item.kind in FOLLOW and item.url not in follows:
            follows.append(item.url)
    return requisites, follows


@dataclass
class RefreshJob:
    url: str
    depth: int
    groups: tuple[str, ...]
    scope: str
    offline: bool
    id: int = field(default_factory=lambda: next(_ids))
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    fetched: int = 0
    failed: int = 0
    queued: int = 0
    done: bool = False
    status: int | None = None  # of the URL itself
    errors: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset().union(*(GROUPS[g] for g in self.groups))

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "url": self.url,
            "depth": self.depth,
            "requisites": list(self.groups),
            "scope": self.scope,
            "offline": self.offline,
            "started": self.started.isoformat(),
            "status": self.status,
            "fetched": self.fetched,
            "failed": self.failed,
            "queued": self.queued,
            "done": self.done,
            "errors": self.errors,
        }

    def _error(self, message: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(message)

    async def run(self, server: ProxyServer) -> None:
        try:
            if self.offline:
                await self._queue_all(server)
            else:
                await self._crawl(server)
        except Exception as exc:  # noqa: BLE001 (a background job must report, never vanish)
            log.exception("refresh of %s failed", self.url)
            self._error(f"stopped: {exc}")
        finally:
            self.done = True

    async def _fetch(self, server: ProxyServer, url: URL) -> int | None:
        try:
            status = await server.fetch_to_archive(url, url.file, "GET", list(_HEADERS), b"")
        except UpstreamError as exc:
            self.failed += 1
            self._error(f"{url.canonical}: {exc.reason}")
            return None
        self.fetched += 1
        return status

    async def _links(self, server: ProxyServer, url: URL, html_ok: bool) -> list[Link]:
        """The links of the cached copy of ``url`` (HTML, or CSS for its requisites)."""
        entry = await asyncio.to_thread(server.store.get, url)
        if entry is None:
            return []
        headers = {n.lower(): v for n, v in entry.headers}
        ctype = headers.get("content-type")
        if not (html_ok and is_html(ctype)) and not is_css(ctype):
            return []

        def read() -> bytes:
            with entry.open_body() as stream:
                raw = stream.read(MAX_PAYLOAD)
            return decode_content(raw, headers.get("content-encoding"), MAX_PAYLOAD)

        try:
            data = await asyncio.to_thread(read)
        except ValueError as exc:
            self._error(f"{url.canonical}: links not read: {exc}")
            return []
        if is_css(ctype):
            return extract_css_links(data, url.canonical, encoding=charset_param(ctype))
        return extract_html_links(data, url.canonical, encoding=charset_param(ctype))

    async def _crawl(self, server: ProxyServer) -> None:
        start = canonicalize(self.url)
        kinds = self.kinds
        seen = {start.file}
        frontier: list[tuple[str, int, bool]] = [(start.file, 0, False)]  # url, depth, requisite
        while frontier and self.fetched + self.failed < MAX_URLS:
            target, depth, requisite = frontier.pop(0)
            try:
                url = canonicalize(target)
            except InvalidURL:
                continue
            if url.proto not in ("http", "https"):
                continue
            status = await self._fetch(server, url)
            if target == start.file:
                self.status = status
            if status is None or (depth >= self.depth and not kinds):
                continue
            if requisite and "import" not in kinds:
                continue
            links = await self._links(server, url, html_ok=not requisite)
            requisites, follows = select_links(
                links, kinds, depth < self.depth and not requisite, start.file, self.scope
            )
            for found in requisites:
                if found not in seen:
                    seen.add(found)
                    frontier.append((found, depth, True))
            for found in follows:
                if found not in seen:
                    seen.add(found)
                    frontier.append((found, depth + 1, False))

    async def _queue_all(self, server: ProxyServer) -> None:
        start = canonicalize(self.url)
        targets = [start.file]
        if self.depth or self.groups:
            links = await self._links(server, start, html_ok=True)
            requisites, follows = select_links(
                links, self.kinds, self.depth > 0, start.file, self.scope
            )
            targets += requisites + follows
        for target in targets[:MAX_URLS]:
            item = QueuedRequest(url=target, key=target, headers=tuple(_HEADERS))
            if await asyncio.to_thread(server.queue.add, item):
                self.queued += 1


_JOBS: weakref.WeakKeyDictionary[ProxyServer, list[RefreshJob]] = weakref.WeakKeyDictionary()


def jobs_of(server: ProxyServer) -> list[RefreshJob]:
    return _JOBS.setdefault(server, [])


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
    server = ctx.server
    jobs = jobs_of(server)
    message = ""
    job: RefreshJob | None = None
    if ctx.post:
        url = ctx.url("url")
        assert url is not None
        if url.proto not in ("http", "https"):
            raise PageError(400, f"Only http and https URLs can be fetched, not {url.proto}.")
        if server.is_own(url):
            raise PageError(400, "That is one of this proxy's own pages.")
        depth = ctx.integer("depth", 0, 0, MAX_DEPTH)
        scope = ctx.text("scope", "host")
        if scope not in ("host", "any"):
            raise PageError(400, "The 'scope' argument must be host or any.")
        offline = server.state.mode is Mode.OFFLINE
        job = RefreshJob(url.file, depth, _groups(ctx), scope, offline)
        jobs.insert(0, job)
        del jobs[KEEP_JOBS:]
        if offline or (depth == 0 and not job.groups):
            await job.run(server)
            if offline:
                message = f"Offline: queued {job.queued} request(s) for the next time online."
            elif job.status is not None:
                message = f"Fetched {url.canonical}: status {job.status}."
            else:
                message = f"Could not fetch {url.canonical}: {'; '.join(job.errors)}"
        else:
            job.task = server.spawn(job.run(server))
            message = f"Refreshing {url.canonical} and up to {MAX_URLS - 1} more in the background."
    data: dict[str, object] = {"jobs": [j.as_json() for j in jobs], "mode": server.state.mode}
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
                esc(f"{j.depth} / {', '.join(j.groups) or '-'} / {j.scope}"),
                (esc(fmt_time(j.started)), "when"),
                esc(
                    f"{j.fetched} fetched, {j.failed} failed"
                    if not j.offline
                    else f"{j.queued} queued"
                ),
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
