"""``/index/``: the hosts in the cache; ``/index/<proto>/<host>/``: one host's pages.

The host list comes from the cache directories (``<proto>/<host>/*.warc.gz``: one file per
page, its size, and its modification time, which is the time of its last capture), so it needs
no index scan.  A host's pages come from the CDXJ index (one prefix range), newest capture per
archive key, sortable by name, time and size and paged.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web

from ..archive.cdxj import CDXJRecord
from ..archive.store import WARC_SUFFIX, Store, StoreError, served_record
from ..url.surt import host_surt
from .context import Context, PageError
from .template import esc, fmt_size, fmt_time, link, table

__all__ = ["HostInfo", "PageInfo", "host_pages", "list_hosts", "page", "split_hostport"]

PER_PAGE = 100
MAX_PER_PAGE = 1000
SORTS = ("name", "time", "size")
_PROTO = re.compile(r"[a-z][a-z0-9+.\-]*")
_HOSTPORT = re.compile(r"[A-Za-z0-9+.\-_:\[\]]+")
_NOT_HOSTS = ("index", "outgoing", "tmp")


@dataclass(frozen=True)
class HostInfo:
    proto: str
    hostport: str
    pages: int
    size: int
    last: datetime | None

    @property
    def url(self) -> str:
        return f"{self.proto}://{self.hostport}/"

    @property
    def path(self) -> str:
        """Its ``/index/<proto>/<host>/`` page."""
        return f"/index/{self.proto}/{self.hostport}/"

    def as_json(self) -> dict[str, object]:
        return {
            "proto": self.proto,
            "host": self.hostport,
            "pages": self.pages,
            "size": self.size,
            "last": self.last.isoformat() if self.last else None,
            "index": self.path,
        }


def list_hosts(root: Path) -> list[HostInfo]:
    """Every host directory of the cache, sorted by protocol and host."""
    hosts = []
    try:
        protos = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    for proto in protos:
        if proto.name in _NOT_HOSTS or not _PROTO.fullmatch(proto.name) or not proto.is_dir():
            continue
        for host in sorted(os.scandir(proto.path), key=lambda e: e.name):
            if not host.is_dir() or not _HOSTPORT.fullmatch(host.name):
                continue
            pages = size = 0
            last = 0.0
            for entry in os.scandir(host.path):
                if not entry.name.endswith(WARC_SUFFIX):
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                pages += 1
                size += st.st_size
                last = max(last, st.st_mtime)
            if pages:
                when = datetime.fromtimestamp(last, UTC) if last else None
                hosts.append(HostInfo(proto.name, host.name, pages, size, when))
    return hosts


def split_hostport(hostport: str) -> tuple[str, str | None]:
    """``example.com:8080`` -> (``example.com``, ``8080``); ``[::1]:8080`` -> (``[::1]``, ...)."""
    if hostport.startswith("["):
        end = hostport.find("]")
        host, rest = hostport[: end + 1], hostport[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, colon, port = hostport.rpartition(":")
    if colon and port.isdigit():
        return host, port
    return hostport, None


@dataclass(frozen=True)
class PageInfo:
    """One archive key of a host: when it was last fetched, the capture that would be served
    (its status and type), and how many captures there are."""

    key: str
    time: datetime  # the newest capture's
    status: int | None  # the served capture's (None: none can be served)
    mime: str | None
    captures: int
    size: int | None  # bytes on disk of its cache file (all captures)

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.key,
            "time": self.time.isoformat(),
            "status": self.status,
            "mime": self.mime,
            "captures": self.captures,
            "size": self.size,
        }


def host_pages(
    store: Store, proto: str, hostport: str, *, keep_good: bool = True
) -> list[PageInfo]:
    """The pages of one host from the index, sorted by URL: for each key, the time of its
    newest capture and the status and type of the capture the proxy would serve (with
    ``keep_good``, the newest 2xx/3xx one; never a 304 or 206 recorded for a browser's own
    conditional or range request)."""
    host, port = split_hostport(hostport)
    prefix = host_surt(host, port) + "/"
    scheme = f"{proto}://"
    lines: dict[str, list[CDXJRecord]] = {}
    for record in store.list_prefix(prefix):
        if record.warcfile is None or not record.uri.startswith(scheme):
            continue  # the same host under another protocol shares the SURT key
        lines.setdefault(record.uri, []).append(record)
    sizes: dict[str, int | None] = {}
    out = []
    for uri, records in lines.items():
        newest = max(records, key=lambda r: r.timestamp)
        served = served_record(records, prefer_good=keep_good)
        name = newest.warcfile[0] if newest.warcfile else uri
        if name not in sizes:
            try:
                sizes[name] = store.path_of(newest).stat().st_size
            except (OSError, ValueError, StoreError):
                sizes[name] = None
        status = served.fields.get("hsc", 200) if served is not None else None
        out.append(
            PageInfo(
                key=uri,
                time=newest.as_datetime(),
                status=status if isinstance(status, int) else None,
                mime=(served or newest).fields.get("mct"),
                captures=len(records),
                size=sizes[name],
            )
        )
    out.sort(key=lambda p: p.key)
    return out


def _local_part(key: str) -> str:
    """``/path?query`` of an archive key (the host is in the page's title)."""
    rest = key.split("://", 1)[-1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


def sort_pages(pages: list[PageInfo], sort: str, descending: bool) -> list[PageInfo]:
    if sort == "time":
        key = lambda p: (p.time, p.key)  # noqa: E731
    elif sort == "size":
        key = lambda p: (p.size or 0, p.key)  # noqa: E731
    else:
        key = lambda p: p.key  # noqa: E731
    return sorted(pages, key=key, reverse=descending)


async def page(ctx: Context) -> web.StreamResponse:
    rest = ctx.path[len("/index/") :] if ctx.path.startswith("/index/") else ""
    parts = [p for p in rest.split("/") if p]
    if not parts:
        return await hosts_page(ctx)
    if len(parts) != 2 or not _PROTO.fullmatch(parts[0]) or not _HOSTPORT.fullmatch(parts[1]):
        raise PageError(404, f"There is no index page {ctx.path!r}: use /index/<proto>/<host>/.")
    return await host_page(ctx, parts[0], parts[1].lower())


async def hosts_page(ctx: Context) -> web.StreamResponse:
    hosts = await asyncio.to_thread(list_hosts, ctx.services.store.root)
    data = {
        "hosts": [h.as_json() for h in hosts],
        "total_pages": sum(h.pages for h in hosts),
        "total_size": sum(h.size for h in hosts),
    }

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
            f'<p class="muted">{len(hosts)} hosts, {data["total_pages"]} pages, '
            f"{esc(fmt_size(data['total_size']))}.</p>"
        )
        return summary + table(
            [
                "Host",
                "Protocol",
                ("Pages", "num"),
                ("Size", "num"),
                "Last fetched",
                "",
            ],
            rows,
            empty="The cache is empty: browse through the proxy to fill it.",
        )

    return ctx.respond(data, "Cached hosts", render, active="/index/")


async def host_page(ctx: Context, proto: str, hostport: str) -> web.StreamResponse:
    sort = ctx.text("sort", "name") or "name"
    if sort not in SORTS:
        raise PageError(400, f"The 'sort' argument must be one of {', '.join(SORTS)}.")
    order = ctx.text("order", "desc" if sort in ("time", "size") else "asc")
    if order not in ("asc", "desc"):
        raise PageError(400, "The 'order' argument must be asc or desc.")
    per = ctx.integer("per", PER_PAGE, 1, MAX_PER_PAGE)
    number = ctx.integer("page", 1, 1, 10**9)
    store = ctx.services.store
    keep_good = ctx.services.config.keep_good_copy
    pages = await asyncio.to_thread(host_pages, store, proto, hostport, keep_good=keep_good)
    files = sum(1 for _ in store.list_host(proto, hostport))
    if not pages and not files:
        raise PageError(404, f"Nothing from {proto}://{hostport}/ is in the cache.")
    pages = sort_pages(pages, sort, order == "desc")
    last_page = max(1, -(-len(pages) // per))
    number = min(number, last_page)
    shown = pages[(number - 1) * per : number * per]
    base = f"/index/{proto}/{hostport}/"
    data = {
        "proto": proto,
        "host": hostport,
        "total": len(pages),
        "files": files,
        "page": number,
        "pages_total": last_page,
        "per": per,
        "sort": sort,
        "order": order,
        "pages": [p.as_json() for p in shown],
    }

    def sort_link(name: str, label: str) -> tuple[str, str]:
        new_order = "asc" if name == "name" else "desc"
        arrow = ""
        if name == sort:
            new_order = "desc" if order == "asc" else "asc"
            arrow = " ▲" if order == "asc" else " ▼"
        cell = link(base, label + arrow, {"sort": name, "order": new_order, "per": per})
        return cell, "num" if name == "size" else ""

    def pager() -> str:
        def to(n: int, label: str) -> str:
            return link(base, label, {"sort": sort, "order": order, "per": per, "page": n})

        prev = to(number - 1, "← previous") if number > 1 else ""
        nxt = to(number + 1, "next →") if number < last_page else ""
        return (
            f'<div class="pager">{prev}<span class="muted">page {number} of {last_page} '
            f"({len(pages)} pages)</span>{nxt}</div>"
        )

    def render() -> str:
        rows = []
        for p in shown:
            actions = " ".join(
                [
                    link("/cache/", "cached", {"url": p.key}),
                    link("/history/", f"history ({p.captures})", {"url": p.key}),
                    link("/refresh/", "refresh", {"url": p.key}),
                    link("/delete/", "delete", {"url": p.key}),
                ]
            )
            rows.append(
                (
                    f'<a class="url" href="{esc(p.key)}" title="{esc(p.key)}">'
                    f"{esc(_local_part(p.key))}</a>",
                    (esc(fmt_time(p.time, seconds=False)), "when"),
                    esc(p.status if p.status is not None else ""),
                    esc(p.mime or ""),
                    (esc(fmt_size(p.size)), "num"),
                    (actions, "actions"),
                )
            )
        missing = ""
        if files > len(pages):
            missing = (
                f'<div class="msg error">{files - len(pages)} cache file(s) of this host are '
                "not in the index: run <code>wwwproxy index rebuild</code>.</div>"
            )
        head = (
            f'<p><a class="url" href="{esc(f"{proto}://{hostport}/")}">'
            f"{esc(f'{proto}://{hostport}/')}</a> · "
            + link("/delete/", "delete this host", {"url": f"{proto}://{hostport}/", "all": "1"})
            + " · "
            + link("/index/", "all hosts")
            + "</p>"
        )
        return (
            head
            + missing
            + pager()
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
            + pager()
        )

    return ctx.respond(data, f"Cached pages of {hostport}", render, active="/index/")
