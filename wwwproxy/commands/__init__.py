"""Command URLs: the proxy's own pages (``http://localhost:8080/...``).

For now the welcome page and ``/control/`` (mode switching, fetching the queue); the full set
of pages (index, history, search, config, ...) builds on this dispatcher.
"""

from __future__ import annotations

import base64
import hmac
import html
import secrets
from typing import TYPE_CHECKING

from aiohttp import web

from ..proxy.modes import Mode
from ..proxy.pages import page
from ..url import URL
from ..url.form import FormArgs

if TYPE_CHECKING:
    from ..proxy.server import ProxyServer

__all__ = ["API_HEADER", "handle_command"]

#: Non-browser clients (the ``wwwproxy`` CLI) send this header on state-changing requests; a
#: cross-site page cannot (a custom header needs a CORS preflight that we never grant).
API_HEADER = "X-Wwwproxy-Request"
_TOKEN_COOKIE = "wwwproxy_token"


def _wants_json(request: web.Request, args: FormArgs) -> bool:
    return args.get("format") == "json" or "application/json" in request.headers.get("Accept", "")


def _password_ok(request: web.Request, server: ProxyServer) -> bool:
    password = server.config.password
    if not password:
        return True
    auth = request.headers.get("Authorization", "")
    if not auth.lower().startswith("basic "):
        return False
    try:
        _, _, given = base64.b64decode(auth[6:].strip()).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError):
        return False
    return hmac.compare_digest(given.encode(), password.encode())


def _csrf_ok(request: web.Request, args: FormArgs) -> bool:
    if request.headers.get(API_HEADER):
        return True
    cookie = request.cookies.get(_TOKEN_COOKIE, "")
    token = args.get("token") or ""
    return bool(cookie) and hmac.compare_digest(cookie.encode(), token.encode())


def _status(server: ProxyServer) -> dict[str, object]:
    return {
        "mode": server.state.mode.value,
        "queued": len(server.queue),
        "cache": str(server.store.root),
        "listen": server.config.listen,
    }


async def handle_command(
    request: web.Request, server: ProxyServer, url: URL | None
) -> web.StreamResponse:
    path = url.path if url is not None else request.path
    query = url.args if url is not None else request.query_string
    body = await request.read() if request.method == "POST" else b""
    args = FormArgs.parse(query, body)
    if path in ("/", "/control", "/control/"):
        return await _control(request, server, args)
    return web.Response(
        status=404,
        text=page("Not found", f"There is no page <code>{html.escape(path)}</code> here."),
        content_type="text/html",
        headers={"Cache-Control": "no-store"},
    )


async def _control(request: web.Request, server: ProxyServer, args: FormArgs) -> web.Response:
    message = ""
    if request.method == "POST":
        if not _password_ok(request, server):
            return web.Response(
                status=401,
                text="A password is needed to control this proxy.\n",
                headers={"WWW-Authenticate": 'Basic realm="wwwproxy", charset="UTF-8"'},
            )
        if not _csrf_ok(request, args):
            return web.Response(status=403, text="Refused: missing or wrong form token.\n")
        mode = args.get("mode")
        if mode is not None:
            try:
                server.state.mode = Mode(mode)
            except ValueError:
                return web.Response(status=400, text=f"Unknown mode {mode!r}.\n")
            message = f"Mode is now {server.state.mode.value}."
        if args.get("action") == "fetch":
            fetched, failed = await server.fetch_queue()
            message += f" Fetched {fetched} queued request(s), {failed} failed."
    status = _status(server)
    if message:
        status["message"] = message.strip()
    if _wants_json(request, args):
        return web.json_response(status, headers={"Cache-Control": "no-store"})
    token = request.cookies.get(_TOKEN_COOKIE) or secrets.token_urlsafe(24)
    buttons = "".join(
        f'<form method="post" action="/control/" style="display:inline">'
        f'<input type="hidden" name="token" value="{html.escape(token)}">'
        f'<button name="mode" value="{m.value}">{m.value}</button></form> '
        for m in Mode
    )
    fetch_button = (
        f'<form method="post" action="/control/"><input type="hidden" name="token" '
        f'value="{html.escape(token)}"><button name="action" value="fetch">Fetch the queue '
        f"({status['queued']} requests)</button></form>"
    )
    text = page(
        "wwwproxy control",
        html.escape(message.strip()) if message else "",
        f"Mode: <b>{html.escape(str(status['mode']))}</b>",
        buttons,
        fetch_button,
    )
    response = web.Response(
        text=text, content_type="text/html", headers={"Cache-Control": "no-store"}
    )
    response.set_cookie(_TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/")
    return response
