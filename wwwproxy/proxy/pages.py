"""The proxy's own small HTML answers (errors, queued, refused); every value is escaped."""

from __future__ import annotations

import html

from aiohttp import web

__all__ = ["page", "page_response"]

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em;"
    "color:#222}h1{font-size:1.4em}code{background:#f3f3f3;padding:.1em .3em;"
    "word-break:break-all}.note{color:#555}"
)


def page(title: str, *paragraphs: str, links: list[tuple[str, str]] | None = None) -> str:
    """A complete HTML page; ``paragraphs`` are HTML already escaped by the caller (use
    :func:`html.escape` on every value you put in them)."""
    parts = [
        "<!DOCTYPE html>",
        # no icon: a browser would ask the site for /favicon.ico, queued offline beside the
        # page the person asked for
        '<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">',
        f"<title>{html.escape(title)} - wwwproxy</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    parts += [f"<p>{p}</p>" for p in paragraphs]
    if links:
        items = "".join(
            f'<li><a href="{html.escape(href)}">{html.escape(text)}</a></li>'
            for href, text in links
        )
        parts.append(f"<ul>{items}</ul>")
    parts.append('<p class="note">wwwproxy</p></body></html>\n')
    return "\n".join(parts)


def page_response(
    status: int,
    title: str,
    *paragraphs: str,
    links: list[tuple[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """An HTML answer that no cache keeps (it describes the proxy's state, not the resource)."""
    hdrs = {"Cache-Control": "no-store", "X-Cache": "MISS"}
    hdrs.update(headers or {})
    return web.Response(
        status=status,
        text=page(title, *paragraphs, links=links),
        content_type="text/html",
        charset="utf-8",
        headers=hdrs,
    )
