"""``/``: the welcome page: mode, cache size and counts, and the way to every other page."""

from __future__ import annotations

from datetime import datetime

from aiohttp import web

from .context import Context
from .control import status
from .listing import host_totals
from .template import esc, fmt_size, fmt_time
from .worker import in_worker

__all__ = ["page"]

_PAGES = (
    ("/index/", "Index", "the hosts in the cache and their pages"),
    ("/index/lasttime/", "Last time", "what was fetched in the last online session (and before)"),
    ("/index/lastout/", "Last out", "what the last fetch of the queue got"),
    ("/search/", "Search", "cached pages by words in their title, text or URL"),
    ("/history/", "History", "every capture of a URL, each viewable as it was"),
    ("/outgoing/", "Outgoing", "requests queued while offline"),
    ("/refresh/", "Refresh", "fetch a page again, with its links and requisites"),
    ("/monitor/", "Monitor", "pages fetched again on a schedule"),
    ("/delete/", "Delete", "remove a page or a host from the cache"),
    ("/control/", "Control", "online / offline / autodial, fetch the queue, purge"),
    ("/config/", "Config", "the configuration, editable"),
)


async def page(ctx: Context) -> web.StreamResponse:
    totals = await in_worker(host_totals, ctx.services.store)
    search = ctx.services.search
    indexed, with_text = await in_worker(search.count) if search else (None, None)
    size = totals.bytes
    last_fetch = datetime.fromisoformat(totals.last) if totals.last else None
    data = {
        **status(ctx),
        "hosts": totals.hosts,
        "pages": totals.pages,
        "size": size,
        "last_fetch": last_fetch,
        "search_indexed": indexed,
        "search_with_text": with_text,
        "pages_here": [{"path": p, "what": what} for p, _, what in _PAGES],
    }

    def render() -> str:
        stats = "".join(
            f'<div class="stat"><b{" class=small" if len(str(value)) > 10 else ""}>'
            f"{esc(value)}</b><span>{esc(label)}</span></div>"
            for value, label in (
                (data["mode"], "mode"),
                (data["pages"], "pages cached"),
                (data["hosts"], "hosts"),
                (fmt_size(size), "on disk"),
                (data["queued"], "queued requests"),
                (fmt_time(last_fetch, seconds=False) or "never", "last fetch (UTC)"),
            )
        )
        links = "".join(
            f'<tr><td><a href="{esc(path)}">{esc(label)}</a></td><td>{esc(what)}</td></tr>'
            for path, label, what in _PAGES
        )
        return (
            f'<div class="cards">{stats}</div>'
            f"<table><tbody>{links}</tbody></table>"
            f'<p class="muted">Cache: <code>{esc(data["cache"])}</code> · listening on '
            f"<code>{esc(data['listen'])}</code>"
            + (f" · {indexed} URLs in the search index" if indexed is not None else "")
            + ".</p>"
        )

    return ctx.respond(data, "wwwproxy", render, active="/")
