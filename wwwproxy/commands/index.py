"""``/index/``: the hosts in the cache; ``/index/<proto>/<host>/``: one host's pages.

Both come from the catalog (:mod:`wwwproxy.archive.catalog`, read through :mod:`.listing`),
kept up to date as pages are recorded and removed.  The host list is sortable by name, pages,
size and last fetch; a host's pages (newest capture per archive key) by name, time and size.
Both are paged: a page shows at most ``per`` entries (100 unless asked), with links to the
pages before and after, as WWWOFFLE's index does; a page costs what it shows, not what the
cache holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web

from .context import Context, PageError
from .listing import (
    HOST_SORTS,
    HOSTPORT_PATTERN,
    PROTO_PATTERN,
    SORTS,
    HostInfo,
    PageInfo,
    host_pages,
    host_window,
    hosts_window,
    list_hosts,
    split_hostport,
)
from .template import esc, fmt_size, fmt_time, href, link, table
from .worker import in_worker

__all__ = [
    "HostInfo",
    "PageInfo",
    "host_pages",
    "list_hosts",
    "page",
    "pager",
    "split_hostport",
]

PER_PAGE = 100
MAX_PER_PAGE = 1000


def pager(
    to: Callable[[int, str], str],
    number: int,
    last: int,
    start: int,
    shown: int,
    total: int,
    noun: str,
) -> str:
    """The first / previous / next / last links of a paged list (``to(n, label)`` links to
    page ``n``), with "page n of m (x–y of N)"; nothing when there is one page."""
    if last == 1:
        return ""
    first = to(1, "« first") if number > 2 else ""
    prev = to(number - 1, "← previous") if number > 1 else ""
    nxt = to(number + 1, "next →") if number < last else ""
    end = to(last, "last »") if number < last - 1 else ""
    return (
        f'<div class="pager">{first} {prev} <span class="muted">page {number} of '
        f"{last} ({start + 1}–{start + shown} of {total} {esc(noun)})</span> {nxt} {end}</div>"
    )


def past_the_end(asked: int, number: int, last: int) -> str:
    """The note on a page asked for past the end (the last one is shown)."""
    if asked <= number:
        return ""
    return (
        f'<div class="msg">There is no page {asked}: this is the last one, {number} of '
        f"{last}.</div>"
    )


def _status_cell(p: PageInfo) -> str:
    """The served copy's status, and the newest capture's when it differs (an error kept
    beside the good copy, a 304 or 206 recorded for a browser's own request)."""
    cell = esc(p.status if p.status is not None else "")
    if p.newest_status is not None:
        cell += f' <span class="muted" title="the newest capture">(newest {p.newest_status})</span>'
    return cell


def _size_cell(p: PageInfo) -> str:
    """The served copy's payload; the cache file's size when the index lacks it."""
    if p.payload is not None:
        return esc(fmt_size(p.payload))
    return f'<span class="muted" title="on disk">{esc(fmt_size(p.size))}</span>'


def _local_part(key: str) -> str:
    """``/path?query`` of an archive key (the host is in the page's title)."""
    rest = key.split("://", 1)[-1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


async def page(ctx: Context) -> web.StreamResponse:
    rest = ctx.path[len("/index/") :] if ctx.path.startswith("/index/") else ""
    parts = [p for p in rest.split("/") if p]
    if not parts:
        return await hosts_page(ctx)
    if (
        len(parts) != 2
        or not PROTO_PATTERN.fullmatch(parts[0])
        or not HOSTPORT_PATTERN.fullmatch(parts[1])
        or parts[1] in (".", "..")
    ):
        raise PageError(404, f"There is no index page {ctx.path!r}: use /index/<proto>/<host>/.")
    return await host_page(ctx, parts[0], parts[1].lower())


def _list_args(ctx: Context, sorts: Iterable[str]) -> tuple[str, str, int, int]:
    """The ``sort``, ``order``, ``per`` and ``page`` arguments of a sortable paged list (by
    name ascending unless asked, the other orders newest or largest first)."""
    sort = ctx.text("sort", "name") or "name"
    if sort not in sorts:
        raise PageError(400, f"The 'sort' argument must be one of {', '.join(sorts)}.")
    order = ctx.text("order", "asc" if sort == "name" else "desc")
    if order not in ("asc", "desc"):
        raise PageError(400, "The 'order' argument must be asc or desc.")
    per = ctx.integer("per", PER_PAGE, 1, MAX_PER_PAGE)
    return sort, order, per, ctx.integer("page", 1, 1, 10**9)


def _sort_link(
    base: str, name: str, label: str, sort: str, order: str, per: int, numeric: bool = False
) -> tuple[str, str]:
    """A column head that sorts by ``name`` (again: the other way round)."""
    new_order = "asc" if name == "name" else "desc"
    arrow = ""
    if name == sort:
        new_order = "desc" if order == "asc" else "asc"
        arrow = " ▲" if order == "asc" else " ▼"
    cell = link(base, label + arrow, {"sort": name, "order": new_order, "per": per})
    return cell, "num" if numeric else ""


async def hosts_page(ctx: Context) -> web.StreamResponse:
    sort, order, per, asked = _list_args(ctx, HOST_SORTS)
    window = await in_worker(
        hosts_window,
        ctx.services.store,
        sort=sort,
        descending=order == "desc",
        number=asked,
        per=per,
    )
    totals, hosts, number, last_page = window.totals, window.hosts, window.number, window.last
    data = {
        "hosts": [h.as_json() for h in hosts],
        "total_hosts": totals.hosts,
        "total_pages": totals.pages,
        "total_size": totals.bytes,
        "page": number,
        "pages_total": last_page,
        "per": per,
        "sort": sort,
        "order": order,
    }

    def to(n: int, label: str) -> str:
        return link("/index/", label, {"sort": sort, "order": order, "per": per, "page": n})

    def paging() -> str:
        return pager(to, number, last_page, window.start, len(hosts), totals.hosts, "hosts")

    def head(name: str, label: str, numeric: bool = False) -> tuple[str, str]:
        return _sort_link("/index/", name, label, sort, order, per, numeric)

    def render() -> str:
        rows = [
            (
                link(h.path, h.hostport),
                esc(h.proto),
                (esc(h.pages), "num"),
                (esc(fmt_size(h.size)), "num"),
                (esc(fmt_time(h.last)), "when"),
                link("/delete/", "delete host", {"url": h.url, "all": "1"}),
            )
            for h in hosts
        ]
        summary = (
            f'<p class="muted">{totals.hosts} hosts, {totals.pages} pages, '
            f"{esc(fmt_size(totals.bytes))}. What was fetched: "
            + link("/index/lasttime/", "in the last online session")
            + " · "
            + link("/index/prevtime1/", "in the one before")
            + " · "
            + link("/index/lastout/", "by the last fetch of the queue")
            + ".</p>"
        )
        return (
            summary
            + past_the_end(asked, number, last_page)
            + paging()
            + table(
                [
                    head("name", "Host"),
                    "Protocol",
                    head("pages", "Pages", True),
                    head("size", "Size", True),
                    head("time", "Last fetched"),
                    "",
                ],
                rows,
                empty="The cache is empty: browse through the proxy to fill it.",
            )
            + (paging() if hosts else "")
        )

    return ctx.respond(data, "Cached hosts", render, active="/index/")


async def host_page(ctx: Context, proto: str, hostport: str) -> web.StreamResponse:
    sort, order, per, asked = _list_args(ctx, SORTS)
    window = await in_worker(
        host_window,
        ctx.services.store,
        proto,
        hostport,
        sort=sort,
        descending=order == "desc",
        number=asked,
        per=per,
        keep_good=ctx.services.config.keep_good_copy,
    )
    if not window.total and not window.files:
        raise PageError(404, f"Nothing from {proto}://{hostport}/ is in the cache.")
    number, last_page, shown = window.number, window.last, window.pages
    base = f"/index/{proto}/{hostport}/"
    data = {
        "proto": proto,
        "host": hostport,
        "total": window.total,
        "files": window.files,
        "page": number,
        "pages_total": last_page,
        "per": per,
        "sort": sort,
        "order": order,
        "pages": [p.as_json() for p in shown],
    }

    def sort_link(name: str, label: str) -> tuple[str, str]:
        return _sort_link(base, name, label, sort, order, per, name == "size")

    def to(n: int, label: str) -> str:
        return link(base, label, {"sort": sort, "order": order, "per": per, "page": n})

    def paging() -> str:
        return pager(to, number, last_page, window.start, len(shown), window.total, "pages")

    def render() -> str:
        rows = []
        for p in shown:
            arg = href("", {"url": p.key})  # "?url=…", encoded once for the four links
            actions = " ".join(
                f'<a href="{esc(page + arg)}">{esc(label)}</a>'
                for page, label in (
                    ("/cache/", "cached"),
                    ("/history/", f"history ({p.captures})"),
                    ("/refresh/", "refresh"),
                    ("/delete/", "delete"),
                )
            )
            rows.append(
                (
                    f'<a class="url" href="{esc(p.key)}" title="{esc(p.key)}">'
                    f"{esc(_local_part(p.key))}</a>",
                    (esc(fmt_time(p.time, seconds=False)), "when"),
                    _status_cell(p),
                    esc(p.mime or ""),
                    (_size_cell(p), "num"),
                    (actions, "actions"),
                )
            )
        notes = ""
        if window.files > window.total:
            notes += (
                f'<div class="msg error">{window.files - window.total} cache file(s) of this '
                "host are not in the index: run <code>wwwproxy index rebuild</code>.</div>"
            )
        notes += past_the_end(asked, number, last_page)
        head = (
            f'<p><a class="url" href="{esc(f"{proto}://{hostport}/")}">'
            f"{esc(f'{proto}://{hostport}/')}</a> · "
            + link("/delete/", "delete this host", {"url": f"{proto}://{hostport}/", "all": "1"})
            + " · "
            + link("/index/", "all hosts")
            + " · "
            + link("/index/lasttime/", "fetched last time")
            + "</p>"
        )
        return (
            head
            + notes
            + paging()
            + table(
                [
                    sort_link("name", "Page"),
                    sort_link("time", "Fetched (UTC)"),
                    "Status",
                    "Type",
                    sort_link("size", "Size"),
                    "",
                ],
                rows,
            )
            + paging()
        )

    return ctx.respond(data, f"Cached pages of {hostport}", render, active="/index/")
