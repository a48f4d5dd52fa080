"""``/delete/?url=U[&all=1]``: remove a URL (or its whole host) from the cache and its index;
and the purge behind the control page's "Purge" form.

GET shows what would go and a button; only the POST (with the form token) deletes.  Removing
many files compacts the CDXJ index once, not once per file.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from pathlib import Path

from aiohttp import web

from ..archive.cdxj import CDXJRecord
from ..archive.search import SearchIndex
from ..archive.store import Store
from ..url import URL
from .context import Context, PageError
from .template import button_form, esc, link

__all__ = ["delete_files", "delete_host", "delete_url", "page", "purge"]


def delete_files(store: Store, paths: Iterable[Path]) -> int:
    """Remove cache files, their index lines (one compaction) and their search rows."""
    names = set()
    removed = 0
    for path in paths:
        names.add(store.warcfile_name(path))
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    if not names:
        return 0

    def keep(record: CDXJRecord) -> bool:
        ref = record.warcfile
        return ref is None or ref[0] not in names

    store.index.compact(keep=keep)
    SearchIndex.for_store(store).remove_files(names)
    return removed


def delete_url(store: Store, url: URL) -> bool:
    """Remove one archive key (the URL's GET key); False if it was not cached."""
    existed = store.delete(url)
    SearchIndex.for_store(store).remove(url.file)
    return existed


def delete_host(store: Store, proto: str, hostport: str) -> int:
    """Remove every page of one host; the number of pages removed."""
    paths = list(store.list_host(proto, hostport))
    removed = delete_files(store, paths)
    with contextlib.suppress(OSError):
        (store.root / proto / hostport).rmdir()
    return removed


def purge(store: Store, days: int | None, host: URL | None = None, now: float | None = None) -> int:
    """Remove the pages (cache files) of ``host`` (or of every host) that were last fetched
    more than ``days`` days ago (any time, if ``days`` is None).  The age is the cache file's
    modification time: the time of its newest capture."""
    if host is not None:
        paths = list(store.list_host(host.proto, host.hostport))
    else:
        paths = list(store.warc_files())
    if days is not None:
        cutoff = (time.time() if now is None else now) - days * 86400
        old = []
        for path in paths:
            try:
                if path.stat().st_mtime < cutoff:
                    old.append(path)
            except FileNotFoundError:
                continue
        paths = old
    removed = delete_files(store, paths)
    if host is not None and not any(store.list_host(host.proto, host.hostport)):
        with contextlib.suppress(OSError):
            (store.root / host.proto / host.hostport).rmdir()
    return removed


async def page(ctx: Context) -> web.StreamResponse:
    url = ctx.url("url", required=False)
    if url is None:
        if ctx.post or ctx.wants_json:
            raise PageError(400, "The 'url' argument (a URL) is missing.")
        form = (
            '<form method="get" action="/delete/" class="card"><div class="row">'
            '<label>URL <input type="text" name="url" size="60"></label>'
            '<label><input type="checkbox" name="all" value="1"> the whole host</label>'
            "<button>Next</button></div></form>"
        )
        return ctx.html_response("Delete from the cache", form, active="/delete/")
    whole_host = ctx.flag("all")
    store = ctx.server.store
    host_url = f"{url.proto}://{url.hostport}/"
    what = f"every page of {host_url}" if whole_host else url.file
    if ctx.post:
        if whole_host:
            removed = await asyncio.to_thread(delete_host, store, url.proto, url.hostport)
        else:
            removed = int(await asyncio.to_thread(delete_url, store, url))
        data = {"url": url.file, "all": whole_host, "deleted": removed}
        message = f"Deleted {removed} page(s): {what}." if removed else f"Not in the cache: {what}."

        def done() -> str:
            return (
                f'<div class="msg">{esc(message)}</div><p>'
                + link(f"/index/{url.proto}/{url.hostport}/", f"pages of {url.hostport}")
                + " · "
                + link("/index/", "all hosts")
                + "</p>"
            )

        return ctx.respond(data, "Deleted", done, active="/delete/")
    if whole_host:
        count = await asyncio.to_thread(
            lambda: sum(1 for _ in store.list_host(url.proto, url.hostport))
        )
    else:
        count = len(await asyncio.to_thread(store.captures, url.file))
    data = {"url": url.file, "all": whole_host, "pages" if whole_host else "captures": count}

    def confirm() -> str:
        detail = f"{count} page(s)" if whole_host else f"{count} capture(s)"
        return (
            f'<div class="card"><p>Delete <span class="url">{esc(what)}</span> '
            f"({esc(detail)}) from the cache and its index?</p>"
            + button_form(
                "/delete/",
                ctx.token,
                "Delete",
                {"url": url.file, "all": "1" if whole_host else None},
                cls="danger",
            )
            + " "
            + link("/history/", "cancel", {"url": url.file})
            + "</div>"
        )

    return ctx.respond(data, "Delete from the cache", confirm, active="/delete/")
