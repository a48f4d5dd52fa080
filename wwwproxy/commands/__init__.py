"""Command URLs: the proxy's own pages (``http://localhost:8080/...``), as in WWWOFFLE.

:func:`handle_command` reads the arguments (query string and/or a POSTed
``application/x-www-form-urlencoded`` form, by :class:`~wwwproxy.url.form.FormArgs`), checks
every POST (password, form token: :mod:`.context`) and hands the request to its page.  Each page
answers HTML, or the same data as JSON with ``Accept: application/json`` or ``?format=json``.

Pages (one module per family): ``/`` (:mod:`.welcome`), ``/index/`` (:mod:`.index`),
``/index/lasttime/``, ``/index/prevtime<n>/`` and ``/index/lastout/`` (:mod:`.sessions`),
``/history/`` and ``/cache/`` (:mod:`.history`), ``/control/`` (:mod:`.control`),
``/outgoing/`` (:mod:`.outgoing`), ``/refresh/`` (:mod:`.refresh`), ``/monitor/``
(:mod:`.monitor`), ``/delete/`` (:mod:`.delete`), ``/search/`` (:mod:`.search`), ``/config/``
(:mod:`.config`), ``/certificates/`` (:mod:`.certificates`), ``/proxy.pac`` (:mod:`.pac`).

A page reaches the proxy only through its :class:`~.context.Context`'s ``services``
(:class:`~wwwproxy.recording.services.Services`: store, queue, search index, engine, mode,
config), never through the server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote

from aiohttp import web

from ..url import URL
from ..url.form import FormArgs
from . import (
    certificates,
    config,
    control,
    delete,
    history,
    index,
    monitor,
    outgoing,
    pac,
    refresh,
    search,
    sessions,
    welcome,
)
from .context import API_HEADER, Context, PageError
from .worker import ClientGone, skipped_if_gone

if TYPE_CHECKING:
    from ..recording.services import Services

__all__ = ["API_HEADER", "ROUTES", "handle_command"]

MAX_FORM_BODY = 1024 * 1024
_FORM_TYPES = ("", "application/x-www-form-urlencoded")

Page = Callable[[Context], Awaitable[web.StreamResponse]]

#: Path -> page.  ``/index/<proto>/<host>/`` is matched by prefix (see :func:`route`).
ROUTES: dict[str, Page] = {
    "/": welcome.page,
    "/index/": index.page,
    "/history/": history.page,
    "/cache/": history.cached,
    "/control/": control.page,
    "/outgoing/": outgoing.page,
    "/refresh/": refresh.page,
    "/monitor/": monitor.page,
    "/delete/": delete.page,
    "/search/": search.page,
    "/config/": config.page,
    "/certificates/": certificates.page,
    "/index/lastout/": sessions.lastout,
    "/proxy.pac": pac.page,
    **dict.fromkeys(sessions.SESSION_PAGES, sessions.page),
}


def route(path: str) -> Page | None:
    """The page for a (decoded) path; ``/index`` and ``/index/`` alike."""
    if path in ROUTES:
        return ROUTES[path]
    if not path.endswith("/") and path + "/" in ROUTES:
        return ROUTES[path + "/"]
    if path.startswith("/index/"):
        return index.page
    return None


async def _read_form(request: web.Request) -> bytes:
    if request.method != "POST" or not request.body_exists:
        return b""
    if request.content_length is not None and request.content_length > MAX_FORM_BODY:
        raise PageError(413, "The form is too large.", title="Request too large")
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_FORM_BODY:
            raise PageError(413, "The form is too large.", title="Request too large")
        chunks.append(chunk)
    return b"".join(chunks)


async def handle_command(
    request: web.Request, services: Services, url: URL | None
) -> web.StreamResponse:
    """Answer a request addressed to the proxy itself.  ``url`` is the canonical URL when the
    request came in absolute form through the proxy, else None (origin form: use the request)."""
    if url is not None:
        raw_path, query = url.path, url.args
    else:
        raw_path, _, query = request.raw_path.partition("?")
    path = unquote(raw_path, errors="replace") or "/"
    args = FormArgs.parse(query)
    ctx = Context.make(request, services, path, args)
    try:
        if request.method not in ("GET", "HEAD", "POST"):
            response = ctx.error_response(
                405, "Method not allowed", f"{request.method} is not used here."
            )
            response.headers["Allow"] = "GET, HEAD, POST"
            return response
        page = route(path)
        if page is None:
            if path == "/favicon.ico":
                return web.Response(status=204, headers={"Cache-Control": "max-age=86400"})
            raise PageError(404, f"There is no page {path!r} here.")
        if request.method == "POST":
            raw_type = request.headers.get("Content-Type", "") if request.body_exists else ""
            ctype = raw_type.split(";", 1)[0].strip().lower()
            if ctype not in _FORM_TYPES:
                raise PageError(
                    415,
                    f"Forms must be sent as application/x-www-form-urlencoded, not {ctype}.",
                    title="Unsupported form",
                )
            ctx.args = FormArgs.parse(query, await _read_form(request))
            ctx.wants_json = ctx.wants_json or ctx.args.get("format") == "json"
            refused = ctx.refuse_post()
            if refused is not None:
                return refused
        if request.method == "POST":
            return await page(ctx)
        transport = request.transport
        if transport is None:  # gone already
            raise ClientGone
        with skipped_if_gone(transport):  # a page that changes nothing
            return await page(ctx)
    except ClientGone:
        # nobody reads it: said for the access log, as nginx's 499 does
        return web.Response(status=499, reason="Client Closed Request")
    except PageError as exc:
        return ctx.error_response(exc.status, exc.title, exc.message)
