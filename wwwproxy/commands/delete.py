"""``/delete/?url=U[&all=1]``: remove a URL (or its whole host) from the cache.

GET shows what would go and a button; only the POST (with the form token) deletes.  The store
does the removing (:meth:`~wwwproxy.archive.store.Store.delete`,
:meth:`~wwwproxy.archive.store.Store.delete_host`: the files, their index lines in one
compaction) and tells its listeners, so the search index follows by itself.
"""

from __future__ import annotations

from aiohttp import web

from .context import Context, PageError
from .template import button_form, esc, link
from .worker import in_worker

__all__ = ["page"]


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
    store = ctx.services.store
    host_url = f"{url.proto}://{url.hostport}/"
    what = f"every page of {host_url}" if whole_host else url.file
    if ctx.post:
        if whole_host:
            deleted = await in_worker(store.delete_host, url.proto, url.hostport)
            removed = deleted.pages
        else:
            removed = int(await in_worker(store.delete, url))
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
        count = await in_worker(lambda: sum(1 for _ in store.list_host(url.proto, url.hostport)))
    else:
        count = len(await in_worker(store.captures, url.file))
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
