"""``/search/?q=WORDS[&page=N]``: search the cached pages by title, text and URL.

The full-text index (:mod:`wwwproxy.archive.search`) is kept up to date as pages are recorded;
POST ``action=rebuild`` makes it again from the whole cache (for a cache recorded before it
existed).
"""

from __future__ import annotations

from aiohttp import web

from ..archive.search import SEARCH_DB
from ..url import InvalidURL, canonicalize
from .context import Context, PageError
from .template import button_form, esc, fmt_time, link
from .worker import in_worker

__all__ = ["page"]

PER_PAGE = 20
#: in place of the title and text of a page fetched with credentials (or private)
WITHHELD = "(fetched with credentials: its title and text are not shown)"
MAX_QUERY = 500


def _withheld(ctx: Context, urls: list[str]) -> set[str]:
    """Those of ``urls`` whose cached copy was fetched with credentials (or is private)."""
    store = ctx.services.store
    out = set()
    for text in urls:
        try:
            url = canonicalize(text)
        except InvalidURL:
            continue
        entry = store.get(url, keep=False)
        if entry is not None and ctx.withheld(entry):
            out.add(text)
    return out


async def page(ctx: Context) -> web.StreamResponse:
    store = ctx.services.store
    index = ctx.services.search
    if index is None:
        raise PageError(
            503,
            f"The search index is unavailable: its database ({store.root / SEARCH_DB}) could "
            "not be opened when the proxy started (the proxy's log says why). Pages are still "
            "recorded; restart the proxy once the database can be used, then rebuild the index.",
            title="Search unavailable",
        )
    message = ""
    if ctx.post:
        if ctx.text("action") != "rebuild":
            raise PageError(400, "The only action here is action=rebuild.")
        count = await in_worker(index.rebuild, store)
        message = f"Search index rebuilt: {count} page(s)."
    query = (ctx.text("q", "") or "").strip()
    if len(query) > MAX_QUERY:
        raise PageError(400, f"The query is too long (at most {MAX_QUERY} characters).")
    number = ctx.integer("page", 1, 1, 1000)
    results = None
    withheld: set[str] = set()
    if query:
        results = await in_worker(index.search, query, PER_PAGE, (number - 1) * PER_PAGE)
        withheld = await in_worker(_withheld, ctx, [h.url for h in results.hits])
    known, with_text = await in_worker(index.count)
    data: dict[str, object] = {"query": query, "indexed": known, "with_text": with_text}
    if message:
        data["message"] = message
    if results is not None:
        data.update(
            total=results.total,
            ranked=results.ranked,
            page=number,
            results=[
                {
                    "url": h.url,
                    "title": None if h.url in withheld else h.title,
                    "snippet": WITHHELD if h.url in withheld else h.snippet_text,
                    "fetched": h.fetched,
                    "mime": h.mime,
                }
                for h in results.hits
            ],
        )

    def render() -> str:
        note = f'<div class="msg">{esc(message)}</div>' if message else ""
        form = (
            '<form method="get" action="/search/" class="row">'
            f'<input type="search" name="q" value="{esc(query)}" size="50" autofocus '
            'aria-label="words to search for"><button class="primary">Search</button></form>'
        )
        about = (
            f'<p class="muted">{known} URLs indexed, {with_text} of them with text. All words '
            "must match (a word ending in * matches as a prefix); titles count most. URLs "
            "containing the words are listed after the text matches.</p>"
        )
        rebuild = button_form(
            "/search/", ctx.token, "Rebuild the search index", {"action": "rebuild"}
        )
        if results is None:
            return note + form + about + f"<p>{rebuild}</p>"
        hits = []
        for h in results.hits:
            private = h.url in withheld
            snippet = (
                esc(WITHHELD)
                if private
                else "".join(
                    f"<mark>{esc(text)}</mark>" if hit else esc(text) for text, hit in h.snippet
                )
            )
            title = h.url if private else (h.title or h.url)
            hits.append(
                '<div class="hit">'
                f'<div class="title"><a href="{esc(h.url)}">{esc(title)}</a></div>'
                f'<div class="url muted">{esc(h.url)}</div>'
                f'<div class="snippet">{snippet}</div>'
                '<div class="actions muted">'
                + link("/cache/", "cached copy", {"url": h.url})
                + " "
                + link("/history/", "history", {"url": h.url})
                + (f" fetched {esc(fmt_time_text(h.fetched))}" if h.fetched else "")
                + "</div></div>"
            )
        pages = max(1, -(-results.total // PER_PAGE))
        prev = (
            link("/search/", "← previous", {"q": query, "page": number - 1}) if number > 1 else ""
        )
        nxt = link("/search/", "next →", {"q": query, "page": number + 1}) if number < pages else ""
        count = f"{results.total}{'+' if results.total >= 1000 else ''} result(s)"
        if results.ranked is not None:  # see wwwproxy.archive.search.searching
            count = f"more than {results.ranked:,} results, the newest {results.ranked:,} ranked"
        pager = f'<div class="pager">{prev}<span class="muted">{count}</span>{nxt}</div>'
        body = "".join(hits) or (
            f"<p>Nothing in the cache matches {esc(query)}.</p>{about}"
            f'<p>{rebuild} <span class="muted">(for pages recorded before the index '
            "existed)</span></p>"
        )
        return note + form + pager + body + (pager if hits else "")

    title = f"Search: {query}" if query else "Search the cache"
    return ctx.respond(data, title, render, active="/search/", query=query)


def fmt_time_text(timestamp: str) -> str:
    from datetime import datetime

    try:
        return fmt_time(datetime.fromisoformat(timestamp))
    except ValueError:
        return timestamp
