"""``/outgoing/``: the requests queued while offline; POST ``cancel=KEY`` (or ``all=1``)
removes them."""

from __future__ import annotations

import contextlib

from aiohttp import web

from ..archive.outgoing import OutgoingQueue, QueuedRequest
from .context import Context, PageError
from .template import Cell, button_form, esc, table
from .worker import in_worker

__all__ = ["page"]


def _entries(queue: OutgoingQueue) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for path, item in queue.entries():
        if isinstance(item, QueuedRequest):
            out.append(
                {
                    "url": item.url,
                    "key": item.key,
                    "method": item.method,
                    "queued": item.queued,
                    "body_size": len(item.body),
                    "failures": item.failures,
                }
            )
        else:
            out.append({"file": path.name, "error": str(item)})
    out.sort(key=lambda e: str(e.get("queued", "")))
    return out


def _cancel_all(queue: OutgoingQueue) -> int:
    removed = 0
    for path, _ in list(queue.entries()):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    return removed


async def page(ctx: Context) -> web.StreamResponse:
    queue = ctx.services.queue
    message = ""
    result: dict[str, object] = {}
    if ctx.post:
        key = ctx.text("cancel")
        if ctx.flag("all"):
            removed = await in_worker(_cancel_all, queue)
            message = f"Cancelled {removed} queued request(s)."
        elif key:
            removed = int(await in_worker(queue.remove, key))
            message = "Cancelled." if removed else f"{key} was not queued."
        else:
            raise PageError(400, "Give cancel=KEY (the queued request's key) or all=1.")
        result["cancelled"] = removed
    entries = await in_worker(_entries, queue)
    data: dict[str, object] = {"queued": len(entries), "requests": entries, **result}
    if message:
        data["message"] = message

    def render() -> str:
        rows: list[tuple[Cell, ...]] = []
        for e in entries:
            if "error" in e:
                rows.append(
                    (f'<span class="url">{esc(e["file"])}</span>', "", "", "", esc(e["error"]))
                )
                continue
            rows.append(
                (
                    f'<span class="url">{esc(e["url"])}</span>',
                    esc(e["method"]),
                    (esc(str(e["queued"])[:19].replace("T", " ")), "when"),
                    (esc(e["failures"] or ""), "num"),
                    button_form("/outgoing/", ctx.token, "cancel", {"cancel": e["key"]}),
                )
            )
        note = f'<div class="msg">{esc(message)}</div>' if message else ""
        buttons = ""
        if entries:
            buttons = (
                '<div class="row">'
                + button_form("/control/", ctx.token, "Fetch them now", {"action": "fetch"})
                + button_form("/outgoing/", ctx.token, "Cancel all", {"all": "1"}, cls="danger")
                + "</div>"
            )
        return (
            note
            + f"<p>{len(entries)} request(s) wait for the next time the proxy is online.</p>"
            + buttons
            + table(
                ["URL", "Method", "Queued (UTC)", ("Failed fetches", "num"), ""],
                rows,
                empty="Nothing is queued.",
            )
        )

    return ctx.respond(data, "Outgoing queue", render, active="/outgoing/")
