"""``/control/``: the mode (online / offline / autodial), fetching the queue, purging.

GET (``?format=json`` for programs such as ``wwwproxy status``) shows the state; a POST with
``mode=online|offline|autodial`` switches, ``action=fetch`` fetches the outgoing queue now, and
``action=purge`` with ``days=N`` and/or ``host=URL`` removes the pages (cache files) not
fetched in the last N days, of one host or of all; ``action=reload`` re-reads the configuration
file as SIGHUP does (``wwwproxy reload``).

The mode is state (:class:`~wwwproxy.recording.services.Services`), not configuration.
Offline, nothing is fetched: "fetch the queue" answers that the queue waits for the next time
online.  Switching online with ``fetch_on_online`` set starts fetching the queue in the
background (the JSON says ``"fetching": true``).
"""

from __future__ import annotations

from aiohttp import web

from ..fetch.prefetch import fetch_queue
from ..http.policy import Mode
from .context import Context, PageError
from .template import button_form, esc, hidden
from .worker import in_worker

__all__ = ["page", "status"]


def status(ctx: Context) -> dict[str, object]:
    services = ctx.services
    return {
        "mode": services.mode.value,
        "queued": len(services.queue),
        "cache": str(services.store.root.absolute()),
        "listen": services.config.listen,
        "started": services.state.started.isoformat(),
        "password": bool(services.config.password),
    }


def _switch(ctx: Context, value: str, result: dict[str, object], *, background: bool) -> str:
    """Set the mode; switching online with ``fetch_on_online`` starts fetching the queue
    (with ``background``: not when the same request fetches it at once)."""
    services = ctx.services
    try:
        mode = Mode(value)
    except ValueError:
        modes = ", ".join(m.value for m in Mode)
        raise PageError(400, f"Unknown mode {value!r} (one of {modes}).") from None
    before = services.set_mode(mode)  # logs an online session's start or end
    message = f"Mode is now {mode.value}."
    if (
        background
        and mode is Mode.ONLINE
        and before is not Mode.ONLINE
        and services.config.fetch_on_online
    ):
        queued = len(services.queue)
        result["fetching"] = queued > 0
        if queued:
            services.spawn(fetch_queue(services))
            message += f" Fetching the {queued} queued request(s) in the background."
    return message


async def _fetch(ctx: Context, result: dict[str, object]) -> str:
    services = ctx.services
    if services.mode is Mode.OFFLINE:
        result["fetching"] = False
        return (
            f"The proxy is offline: nothing is fetched. The queue ({len(services.queue)} "
            "request(s)) will be fetched when next online."
        )
    summary = await fetch_queue(services)
    counts = summary.counts()
    failed = len(summary.failed)
    result.update(fetched=counts.get("fetched", 0), failed=failed, counts=counts)
    return f"Fetched {counts.get('fetched', 0)} queued request(s), {failed} failed."


async def _purge(ctx: Context, result: dict[str, object]) -> str:
    days = ctx.integer("days", -1, 0, 100000)
    host = ctx.url("host", required=False)
    if days < 0 and host is None:
        raise PageError(400, "Purge needs days=N (pages older than N days), host=URL, or both.")
    store = ctx.services.store
    deleted = await in_worker(store.purge, None if days < 0 else days, host)
    result["purged"] = deleted.pages
    scope = f"of {host.proto}://{host.hostport}/" if host else "of all hosts"
    age = f" not fetched in the last {days} day(s)" if days >= 0 else ""
    return f"Purged {deleted.pages} page(s) {scope}{age}."


def _reload(ctx: Context, result: dict[str, object]) -> str:
    reread = ctx.services.reread_config
    if reread is None:
        raise PageError(409, "This proxy was not started by wwwproxy serve: nothing to reload.")
    problem = reread()
    result["reloaded"] = problem is None
    if problem is not None:
        raise PageError(409, f"Configuration {problem}", title="Not reloaded")
    source = ctx.services.config.source
    return f"Configuration reloaded from {source} (the mode stays {ctx.services.mode.value})."


async def page(ctx: Context) -> web.StreamResponse:
    messages: list[str] = []
    result: dict[str, object] = {}
    if ctx.post:
        mode = ctx.text("mode")
        action = ctx.text("action")
        if mode is None and action is None:
            raise PageError(400, "Nothing to do: give mode=online|offline|autodial or action=.")
        if action not in (None, "fetch", "purge", "reload"):
            raise PageError(400, f"Unknown action {action!r} (fetch, purge or reload).")
        if mode is not None:
            messages.append(_switch(ctx, mode, result, background=action != "fetch"))
        if action == "fetch":
            messages.append(await _fetch(ctx, result))
        elif action == "purge":
            messages.append(await _purge(ctx, result))
        elif action == "reload":
            messages.append(_reload(ctx, result))
    data = {**status(ctx), **result}
    if messages:
        data["message"] = " ".join(messages)

    def render() -> str:
        mode_now = ctx.services.mode.value
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
        later = (
            " Offline, the queue waits: it is fetched when the proxy is next online"
            + (" (at once when switched online)." if ctx.services.config.fetch_on_online else ".")
            if mode_now == Mode.OFFLINE.value
            else ""
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
            f'waiting (<a href="/outgoing/">see them</a>).{esc(later)}</p>{fetch}</div>'
            '<div class="card"><h2>Purge</h2><p>Remove the pages not fetched for a number of '
            "days, of one host or of the whole cache (their WARC files, index lines and search "
            f"entries).</p>{purge_form}</div>"
        )

    return ctx.respond(data, "Control", render, active="/control/")
