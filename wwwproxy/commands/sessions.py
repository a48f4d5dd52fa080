"""``/index/lasttime/``, ``/index/prevtime1/`` ... and ``/index/lastout/``: what was fetched
in the last online sessions, and what the last fetch of the queue got, as in WWWOFFLE.

A session's pages are the index's captures (of every host) between its start and end
(:mod:`wwwproxy.archive.sessions` logs them, :mod:`.recent` keeps the captures in time order),
newest first and paged like a host's index; lastout is the record the queue fetch leaves in
the cache.  Both answer JSON as every page does.
"""

from __future__ import annotations

import re

from aiohttp import web

from ..archive.cdxj.line import format_timestamp
from ..archive.sessions import (
    KEEP_SESSIONS,
    LastOut,
    OutEntry,
    Session,
    SessionLog,
    read_lastout,
)
from .context import Context, PageError
from .index import MAX_PER_PAGE, PER_PAGE, pager, past_the_end
from .recent import Capture, captures_between
from .template import Cell, esc, fmt_size, fmt_time, href, link, table
from .worker import in_worker

__all__ = ["SESSION_PAGES", "lastout", "page", "session_name"]

_PREVTIME = re.compile(r"prevtime([1-9][0-9]?)")


def session_name(n: int) -> str:
    """``lasttime`` for the newest session (0), ``prevtime<n>`` for the ones before."""
    return "lasttime" if n == 0 else f"prevtime{n}"


#: the paths of the session pages, newest first
SESSION_PAGES = tuple(f"/index/{session_name(n)}/" for n in range(KEEP_SESSIONS))


def _number(path: str) -> int:
    name = path.strip("/").rsplit("/", 1)[-1]
    if name == "lasttime":
        return 0
    m = _PREVTIME.fullmatch(name)
    if m is None or int(m.group(1)) >= KEEP_SESSIONS:
        raise PageError(404, f"There is no page {path!r}.")
    return int(m.group(1))


def _page_of(total: int, per: int, asked: int) -> tuple[int, int, int]:
    """(the page shown, the last page, its first item) of ``total`` items ``per`` a page
    when page ``asked`` is asked for (past the end: the last)."""
    last = max(1, -(-total // per))
    number = min(asked, last)
    return number, last, (number - 1) * per


def _when(session: Session) -> str:
    end = fmt_time(session.end) if session.end else "now (still connected)"
    return f"{fmt_time(session.start)} – {end} UTC, {session.mode}"


def _sessions_bar(sessions: list[Session], current: str) -> str:
    """Links to every kept session's page and to lastout (the one shown is not a link)."""
    items = []
    for n, session in enumerate(sessions):
        name = session_name(n)
        label = f"{name} ({fmt_time(session.start, seconds=False)})"
        items.append(f"<b>{esc(label)}</b>" if name == current else link(f"/index/{name}/", label))
    items.append("<b>lastout</b>" if current == "lastout" else link("/index/lastout/", "lastout"))
    return '<p class="muted">' + " · ".join(items) + "</p>"


def _cache_time(capture: Capture) -> str:
    """The capture's time as ``/cache/``'s ``t`` argument takes it (to the second)."""
    return re.sub(r"[^0-9]", "", capture.time)[:14]


def _capture_row(capture: Capture) -> tuple[str | tuple[str, str], ...]:
    payload = esc(fmt_size(capture.payload))
    if capture.kind == "revisit":
        payload = '<span class="muted" title="the same payload as the capture before">same</span>'
    at = {"url": capture.uri, "t": _cache_time(capture)}
    return (
        (esc(fmt_time(capture.when)), "when"),
        f'<a class="url" href="{esc(href("/cache/", at))}" title="{esc(capture.uri)}">'
        f"{esc(capture.uri)}</a>",
        esc(capture.status if capture.status is not None else ""),
        esc(capture.mime or ""),
        (payload, "num"),
        (link("/history/", "history", {"url": capture.uri}), "actions"),
    )


async def page(ctx: Context) -> web.StreamResponse:
    """One session's captures: ``order=desc|asc`` (by time), ``per=N``, ``page=N``."""
    number = _number(ctx.path)
    name = session_name(number)
    order = ctx.text("order", "desc")
    if order not in ("asc", "desc"):
        raise PageError(400, "The 'order' argument must be asc or desc.")
    per = ctx.integer("per", PER_PAGE, 1, MAX_PER_PAGE)
    asked = ctx.integer("page", 1, 1, 10**9)
    store = ctx.services.store
    sessions = await in_worker(SessionLog(store.root).sessions)
    if number >= max(1, len(sessions)):
        raise PageError(404, f"There is no {name}: {len(sessions)} online session(s) are recorded.")
    session = sessions[number] if sessions else None
    found: list[Capture] = []
    complete = True
    if session is not None:
        start = format_timestamp(session.start)
        end = format_timestamp(session.end) if session.end else None
        oldest = format_timestamp(sessions[-1].start)
        found, complete = await in_worker(captures_between, store, start, end, oldest)
    total = len(found)
    shown_number, last, first = _page_of(total, per, asked)
    if order == "desc":
        shown = found[max(0, total - first - per) : total - first][::-1]
    else:
        shown = found[first : first + per]
    title = "Fetched in the last online session" if number == 0 else f"Fetched in {name}"
    data = {
        "name": name,
        "session": session.as_json() if session else None,
        "sessions": [
            {"name": session_name(n), "path": SESSION_PAGES[n], **s.as_json()}
            for n, s in enumerate(sessions)
        ],
        "complete": complete,
        "total": total,
        "page": shown_number,
        "pages_total": last,
        "per": per,
        "order": order,
        "captures": [c.as_json() for c in shown],
    }

    def to(n: int, label: str) -> str:
        return link(ctx.path, label, {"order": order, "per": per, "page": n})

    def render() -> str:
        bar = _sessions_bar(sessions, name)
        if session is None:
            return bar + (
                '<div class="msg">No online session is recorded yet: one starts when the '
                "proxy starts, or is switched, online or autodial.</div>"
            )
        new_order = "asc" if order == "desc" else "desc"
        arrow = " ▼" if order == "desc" else " ▲"
        notes = f"<p>{esc(_when(session))}: {total} capture(s).</p>"
        if not complete:
            notes += (
                '<div class="msg">Only the newest captures are kept for these pages: the '
                "start of this session is not listed.</div>"
            )
        notes += past_the_end(asked, shown_number, last)
        paging = pager(to, shown_number, last, first, len(shown), total, "captures")
        head: list[Cell] = [
            (link(ctx.path, "Fetched (UTC)" + arrow, {"order": new_order, "per": per}), "when"),
            "URL",
            "Status",
            "Type",
            ("Size", "num"),
            "",
        ]
        rows = [_capture_row(c) for c in shown]
        empty = "Nothing was fetched in this session."
        return bar + notes + paging + table(head, rows, empty=empty) + paging

    return ctx.respond(data, title, render, active="/index/")


#: the lastout page's Result column, by outcome (wwwproxy.fetch.tasks.Outcome)
_RESULTS = {
    "fetched": "fetched",
    "fresh": "fresh copy kept",
    "failed": "failed",
    "robots": "refused by robots.txt",
}


def _result_text(entry: OutEntry) -> str:
    if entry.dropped:
        return "failed, left the queue"
    return _RESULTS.get(entry.outcome, entry.outcome)


async def lastout(ctx: Context) -> web.StreamResponse:
    """What the last fetch of the outgoing queue got: ``per=N``, ``page=N``."""
    per = ctx.integer("per", PER_PAGE, 1, MAX_PER_PAGE)
    asked = ctx.integer("page", 1, 1, 10**9)
    root = ctx.services.store.root
    got: LastOut | None = await in_worker(read_lastout, root)
    sessions = await in_worker(SessionLog(root).sessions)
    entries = got.entries if got else []
    total = len(entries)
    number, last, first = _page_of(total, per, asked)
    shown = entries[first : first + per]
    failed = sum(not e.ok for e in entries)
    dropped = sum(e.dropped for e in entries)
    data = {
        "started": got.started.isoformat() if got else None,
        "finished": got.finished.isoformat() if got else None,
        "total": got.total if got else 0,
        "kept": total,
        "failed": failed,
        "dropped": dropped,
        "page": number,
        "pages_total": last,
        "per": per,
        "urls": [e.as_json() for e in shown],
    }

    def to(n: int, label: str) -> str:
        return link(ctx.path, label, {"per": per, "page": n})

    def render() -> str:
        bar = _sessions_bar(sessions, "lastout")
        if got is None:
            return bar + '<div class="msg">The queue has not been fetched yet.</div>'
        notes = (
            f"<p>Fetched {esc(fmt_time(got.started))} – {esc(fmt_time(got.finished))}: "
            f"{got.total} URL(s), {total - failed} got, {failed} failed.</p>"
        )
        if dropped:
            notes += (
                f"<p>{dropped} queued request(s) failed <code>queue_failures</code> times and "
                "left the queue: ask for them again to queue them again.</p>"
            )
        if got.total > total:
            notes += f'<div class="msg">Only the first {total} are kept.</div>'
        notes += past_the_end(asked, number, last)
        rows = []
        for e in shown:
            cls = "url" if e.ok else "url bad"
            url = (
                link("/cache/", e.url, {"url": e.url}, class_=cls)
                if e.ok and e.method == "GET"
                else f'<span class="{cls}">{esc(e.url)}</span>'
            )
            rows.append(
                (
                    url,
                    esc(e.method),
                    esc(_result_text(e)),
                    esc(e.status if e.status is not None else ""),
                    esc(e.problem or ""),
                    (link("/history/", "history", {"url": e.url}), "actions"),
                )
            )
        paging = pager(to, number, last, first, len(shown), total, "URLs")
        head = ["URL", "Method", "Result", "Status", "Problem", ""]
        return bar + notes + paging + table(head, rows) + paging

    return ctx.respond(data, "Last fetch of the queue", render, active="/index/")
