"""The proxy's own small HTML answers (errors, queued, refused); every value is escaped."""

from __future__ import annotations

import html

from aiohttp import web

from ..http.background import Answer
from ..recording.upstream import UpstreamError

__all__ = ["UNTRUSTED_HINT", "background_answer", "page", "page_response", "upstream_error_page"]

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


#: what the page for a server whose certificate does not verify adds: how to trust it
UNTRUSTED_HINT = (
    "If you trust this server (a test server with its own certificate, a company's "
    "certificate authority), name a PEM file of its certificate or of the authority that "
    "signed it in the configuration's <code>upstream_ca</code> (on the "
    '<a href="/config/">configuration page</a>, or in the file and then '
    "<code>wwwproxy reload</code>). <code>wwwproxy ca --test-cert HOST</code> makes such "
    "a certificate for a local test server."
)


def background_answer(answer: Answer) -> web.Response:
    """A connectivity check answered offline as "online, no portal"
    (:mod:`wwwproxy.http.background`); never stored by the client (``X-Cache: BACKGROUND``)."""
    headers = {"Cache-Control": "no-store", "X-Cache": "BACKGROUND"}
    if answer.status == 204:
        return web.Response(status=204, headers=headers)
    return web.Response(
        status=answer.status, body=answer.body, content_type=answer.content_type, headers=headers
    )


def upstream_error_page(exc: UpstreamError) -> web.Response:
    title = "Gateway timeout" if exc.status == 504 else "Bad gateway"
    return page_response(
        exc.status,
        title,
        f"Could not fetch <code>{html.escape(exc.url)}</code>: {html.escape(exc.reason)}.",
        *([UNTRUSTED_HINT] if exc.untrusted else []),
        links=[("/control/", "Control page"), ("/outgoing/", "Outgoing queue")],
    )
