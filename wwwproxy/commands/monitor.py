"""``/monitor/``: the URLs the proxy refetches on a schedule (WWWOFFLE's monitor), the same
list ``wwwproxy monitor add|list|remove`` manages (``<cache>/monitor.yaml``).

GET lists them (schedule, last fetch, next fetch, last error) with a form to add one.  A POST
adds ``url`` with ``every=HOURS``, or ``weekdays`` (repeatable or comma-separated) and/or
``hours=6,18``, and ``render=1`` to load it in headless Chromium too when it is fetched
(adding a monitored URL again changes its schedule and render); ``remove=URL`` stops
monitoring one; ``fetch=URL`` fetches one with its requisites now, due or not.  The running
server fetches each URL when it is due and the proxy is online or autodial.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from aiohttp import web

from ..fetch import monitor
from ..http.policy import Mode
from .context import Context, PageError
from .template import button_form, esc, fmt_time, hidden, link, table
from .worker import in_worker

__all__ = ["page"]


def _path(ctx: Context) -> Path:
    return monitor.monitor_path(ctx.services.store.root)


def _when(text: str | None) -> str:
    if not text:
        return ""
    try:
        return fmt_time(datetime.fromisoformat(text.replace("Z", "+00:00")), seconds=False)
    except ValueError:
        return text


def _schedule(ctx: Context) -> monitor.Schedule:
    weekdays = ",".join(ctx.args.getall("weekdays"))
    return monitor.parse_schedule(ctx.text("every"), weekdays or None, ctx.text("hours"))


async def _post(ctx: Context, path: Path) -> str:
    if ctx.args.get("remove") is not None:
        url = ctx.url("remove")
        assert url is not None
        removed = await in_worker(monitor.remove, path, url.file)
        return f"No longer monitoring {url.file}." if removed else f"{url.file} was not monitored."
    if ctx.args.get("fetch") is not None:
        url = ctx.url("fetch")
        assert url is not None
        entries = await in_worker(monitor.load, path)
        if url.file not in {e.url for e in entries}:
            raise PageError(404, f"{url.file} is not monitored.")
        if ctx.services.mode is Mode.OFFLINE:
            raise PageError(
                409, "The proxy is offline: switch it online to fetch.", title="Offline"
            )
        [(_, error)] = await monitor.fetch_now(ctx.services, path, [url.file])
        return f"Could not fetch {url.file}: {error}" if error else f"Fetched {url.file}."
    url = ctx.url("url")
    assert url is not None
    if url.proto not in ("http", "https"):
        raise PageError(400, f"Only http and https URLs can be monitored, not {url.proto}.")
    if ctx.services.is_own(url):
        raise PageError(400, "That is one of this proxy's own pages.")
    render = ctx.flag("render")
    entry = await in_worker(monitor.add, path, url.file, _schedule(ctx), render=render)
    rendered = ", rendered in a browser" if entry.render else ""
    return (
        f"Monitoring {entry.url} {monitor.describe(entry.schedule)}{rendered}; it is fetched "
        "when due while the proxy is online or autodial."
    )


async def page(ctx: Context) -> web.StreamResponse:
    path = _path(ctx)
    message = ""
    if ctx.post:
        try:
            message = await _post(ctx, path)
        except monitor.MonitorError as exc:
            raise PageError(400, str(exc)) from None
    now = datetime.now().astimezone()
    problem = ""
    try:
        rows = await in_worker(monitor.page_rows, path, now)
    except monitor.MonitorError as exc:
        rows, problem = [], str(exc)
    data: dict[str, object] = {
        "file": str(path),
        "mode": ctx.services.mode.value,
        "monitored": rows,
    }
    if message:
        data["message"] = message
    if problem:
        data["error"] = problem

    def render() -> str:
        note = f'<div class="msg">{esc(message)}</div>' if message else ""
        if problem:
            note += f'<div class="msg error">{esc(problem)}</div>'
        mode = ctx.services.mode
        if mode is Mode.OFFLINE and rows:
            note += (
                '<div class="msg error">The proxy is offline: monitored URLs are fetched when '
                "it is online or autodial.</div>"
            )
        body = []
        for row in rows:
            actions = button_form(
                "/monitor/", ctx.token, "fetch now", {"fetch": row["url"]}
            ) + button_form("/monitor/", ctx.token, "remove", {"remove": row["url"]}, cls="danger")
            body.append(
                (
                    f'<a class="url" href="{esc(row["url"])}">{esc(row["url"])}</a> '
                    + link("/history/", "history", {"url": row["url"]}),
                    esc(row["schedule"] + (", rendered" if row["render"] else "")),
                    (esc(_when(row["last"]) or "never"), "when"),
                    (esc("due now" if row["due"] else _when(row["next"])), "when"),
                    esc(row["error"] or ""),
                    (actions, "actions"),
                )
            )
        days = "".join(
            f'<label><input type="checkbox" name="weekdays" value="{d}"> {d}</label>'
            for d in monitor.WEEKDAYS
        )
        form = (
            '<form method="post" action="/monitor/" class="card"><h2>Monitor a URL</h2>'
            + hidden("token", ctx.token)
            + '<div class="row"><label>URL <input type="text" name="url" size="60" '
            'placeholder="http://example.com/news"></label></div>'
            '<div class="row"><label>every <input type="number" name="every" min="0.1" '
            'step="any" style="width:6em"> hours</label></div>'
            f'<div class="row">or on {days} (none: every day)</div>'
            '<div class="row"><label>at hours <input type="text" name="hours" size="10" '
            'placeholder="6,18"></label><span class="muted">0-23, the proxy\'s local time; '
            "none: midnight</span></div>"
            '<div class="row"><label><input type="checkbox" name="render" value="1"> render '
            "it in a browser (headless Chromium), to also fetch what its scripts load"
            "</label></div>"
            '<div class="row"><button class="primary">Monitor</button><span class="muted">'
            "A new URL is fetched at once (with its images, style sheets, scripts and "
            "frames), then when due.</span></div></form>"
        )
        listing = table(
            ["URL", "Schedule", "Last fetched (UTC)", "Next (UTC)", "Last error", ""],
            body,
            empty="No URL is monitored.",
        )
        about = (
            f'<p class="muted">Kept in <code>{esc(path)}</code> (also '
            "<code>wwwproxy monitor add|list|remove</code>). The proxy fetches each URL when "
            "it is due and the proxy is online or autodial.</p>"
        )
        return note + listing + about + form

    return ctx.respond(data, "Monitored URLs", render, active="/monitor/")
