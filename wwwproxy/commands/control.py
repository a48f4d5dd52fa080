"""``/control/``: the mode (online / offline / autodial), fetching the queue, purging.

GET (``?format=json`` for programs such as ``wwwproxy status``) shows the state; a POST with
``mode=online|offline|autodial`` switches, ``action=fetch`` fetches the outgoing queue now, and
``action=purge`` with ``days=N`` and/or ``host=URL`` removes the pages (cache files) not
fetched in the last N days, of one host or of all.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from ..http.policy import Mode
from .context import Context, PageError
from .delete import purge
from .template import button_form, esc, hidden

__all__ = ["page", "status"]


def status(ctx: Context) -> dict[str, object]:
    server = ctx.server
    return {
        "mode": server.state.mode.value,
        "queued": len(server.queue),
        "cache": str(server.store.root),
        "listen": server.config.listen,
        "started": server.state.started.isoformat(),
        "password": bool(server.config.password),
    }


async def page(ctx: Context) -> web.StreamResponse:
    messages: list[str] = []
    result: dict[str, object] = {}
    if ctx.post:
        mode = ctx.text("mode")
        action = ctx.text("action")
        if mode is None and action is None:
            raise PageError(400, "Nothing to do: give mode=online|offline|autodial or action=.")
        if mode is not None:
            try:
                ctx.server.state.mode = Mode(mode)
            except ValueError:
                modes = ", ".join(m.value for m in Mode)
                raise PageError(400, f"Unknown mode {mode!r} (one of {modes}).") from None
            messages.append(f"Mode is now {ctx.server.state.mode.value}.")
        if action == "fetch":
            fetched, failed = await ctx.server.fetch_queue()
            result.update(fetched=fetched, failed=failed)
            messages.append(f"Fetched {fetched} queued request(s), {failed} failed.")
        elif action == "purge":
            days = ctx.integer("days", -1, 0, 100000)
            host = ctx.url("host", required=False)
            if days < 0 and host is None:
                raise PageError(
                    400, "Purge needs days=N (pages older than N days), host=URL, or both."
                )
            removed = await asyncio.to_thread(
                purge, ctx.server.store, None if days < 0 else days, host
            )
            result["purged"] = removed
            scope = f"of {host.proto}://{host.hostport}/" if host else "of all hosts"
            age = f" not fetched in the last {days} day(s)" if days >= 0 else ""
            messages.append(f"Purged {removed} page(s) {scope}{age}.")
        elif action is not None:
            raise PageError(400, f"Unknown action {action!r} (fetch or purge).")
    data = {**status(ctx), **result}
    if messages:
        data["message"] = " ".join(messages)

    def render() -> str:
        mode_now = ctx.server.state.mode.value
        buttons = " ".join(
            button_form(
                "/control/",
                ctx.token,
                m.value,
                {"mode": m.value},
                cls="primary" if m.value == mode_now else "",
            )
            for m in Mode
        )
        note = f'<div class="msg">{esc(data["message"])}</div>' if messages else ""
        fetch = button_form(
            "/control/",
            ctx.token,
            f"Fetch the queue now ({data['queued']} requests)",
            {"action": "fetch"},
        )
        purge_form = (
            '<form method="post" action="/control/" class="row">'
            + hidden("token", ctx.token)
            + hidden("action", "purge")
            + '<label>not fetched for <input type="number" name="days" min="0" value="30" '
            'style="width:6em"> days</label>'
            '<label>host (optional) <input type="text" name="host" placeholder="http://example.com/"'
            ' size="30"></label><button class="danger">Purge</button></form>'
        )
        return (
            note + f'<div class="card"><h2>Mode</h2><p>The proxy is <b>{esc(mode_now)}</b>: '
            "online fetches and records everything, offline serves only the cache and "
            "queues the rest, autodial serves the cache and fetches what is missing.</p>"
            f'<div class="row">{buttons}</div></div>'
            f'<div class="card"><h2>Outgoing queue</h2><p>{esc(data["queued"])} request(s) '
            f'waiting (<a href="/outgoing/">see them</a>).</p>{fetch}</div>'
            '<div class="card"><h2>Purge</h2><p>Remove the pages not fetched for a number of '
            "days, of one host or of the whole cache (their WARC files and index lines).</p>"
            f"{purge_form}</div>"
        )

    return ctx.respond(data, "Control", render, active="/control/")
