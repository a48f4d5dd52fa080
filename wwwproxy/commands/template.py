"""HTML for the command pages: one layout, escaping, links and forms.

Every value that reaches HTML goes through :func:`esc` (text and attributes alike), and every
link is built by :func:`href`, which form-encodes each argument (``quote(..., safe="")``), so a
URL passed as an argument is decoded exactly once by :class:`~wwwproxy.url.form.FormArgs` at the
other end.  The pages use no JavaScript at all: sorting and paging are links, actions are forms.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeAlias
from urllib.parse import quote

__all__ = [
    "NAV",
    "Cell",
    "button_form",
    "clean",
    "esc",
    "fmt_size",
    "fmt_time",
    "hidden",
    "href",
    "layout",
    "link",
    "table",
]

#: A table cell: its text or HTML alone, or ``(html, css class)``.
Cell: TypeAlias = str | tuple[str, str]

#: The pages in the navigation bar: (path, label).
NAV = (
    ("/", "Home"),
    ("/index/", "Index"),
    ("/search/", "Search"),
    ("/outgoing/", "Outgoing"),
    ("/refresh/", "Refresh"),
    ("/monitor/", "Monitor"),
    ("/control/", "Control"),
    ("/config/", "Config"),
    ("/certificates/", "HTTPS"),
)

_STYLE = """
:root{--fg:#1d2330;--muted:#5d6675;--line:#e2e5ea;--bg:#f6f7f9;--accent:#2457c5;
--ok:#1f7a3d;--warn:#9a5b00;--off:#5d6675;--bad:#b42318}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
header{background:#1d2330;color:#fff}
header .bar{max-width:76em;margin:0 auto;padding:.55em 1em;display:flex;gap:1.2em;
align-items:center;flex-wrap:wrap}
header a{color:#d7def0;text-decoration:none}
header a:hover,header a.here{color:#fff;text-decoration:underline}
header .brand{font-weight:700;color:#fff;font-size:1.1em;letter-spacing:.02em}
header nav{display:flex;gap:1em;flex-wrap:wrap}
header form{margin-left:auto;display:flex;gap:.3em}
header input[type=search]{border:0;border-radius:4px;padding:.3em .5em;width:14em}
main{max-width:76em;margin:1.2em auto;padding:0 1em}
h1{font-size:1.45em;margin:.2em 0 .6em}
h2{font-size:1.15em;margin:1.4em 0 .5em}
a{color:var(--accent)}
code,.url{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.92em;
overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.9em}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:1em 1.2em;
margin:0 0 1em}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(11em,1fr));gap:.8em;
margin-bottom:1em}
.stat{background:#fff;border:1px solid var(--line);border-radius:8px;padding:.7em 1em}
.stat b{display:block;font-size:1.5em;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.stat b.small{font-size:1.1em;white-space:normal}.card h2{margin-top:0}
.stat span{color:var(--muted);font-size:.9em}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}
th,td{text-align:left;padding:.4em .6em;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#eef0f4;font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;white-space:nowrap}
td.when{white-space:nowrap;color:var(--muted)}
tr:hover td{background:#fafbff}
td.actions{white-space:nowrap;width:1%}.actions a{margin-right:.6em}
.muted,.note{color:var(--muted)}
.badge{display:inline-block;padding:.05em .55em;border-radius:1em;font-size:.85em;
font-weight:600;color:#fff;background:var(--off)}
.badge.online{background:var(--ok)}.badge.autodial{background:var(--warn)}
.msg{padding:.6em 1em;border-radius:6px;background:#e8f3ec;border:1px solid #b7dcc4;
margin:0 0 1em}
.msg.error{background:#fdecea;border-color:#f3b8b2}
button,.button{font:inherit;padding:.35em .9em;border-radius:5px;border:1px solid #b9c0cc;
background:#fff;cursor:pointer;color:var(--fg);text-decoration:none}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
button.danger{border-color:var(--bad);color:var(--bad)}
button:disabled{opacity:.5;cursor:default}
form.inline{display:inline}
.row{display:flex;gap:.6em;flex-wrap:wrap;align-items:center;margin:.4em 0}
input[type=text],input[type=number],input[type=search],input[type=password],textarea,select{
font:inherit;padding:.3em .45em;border:1px solid #b9c0cc;border-radius:4px}
td input[type=password]{width:100%}
textarea{width:100%;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em}
.pager{margin:.8em 0;display:flex;gap:.8em;align-items:center}
mark{background:#ffe58a;padding:0 .1em}
.hit{margin:0 0 1em}.hit .title{font-size:1.05em}.hit .snippet{margin:.2em 0}
footer{max-width:76em;margin:2em auto;padding:0 1em;color:var(--muted)}footer p{font-size:.85em}
"""


def clean(value: object) -> str:
    """Text that can be written as UTF-8: bytes that were not UTF-8 (kept as surrogate escapes
    by the argument parser) become U+FFFD."""
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def esc(value: object) -> str:
    """HTML-escape any value for text or a quoted attribute."""
    return html.escape(clean(value), quote=True)


def _quote(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    return quote(text.encode("utf-8", "surrogateescape"), safe="")


def href(
    path: str, params: Mapping[str, object] | Sequence[tuple[str, object]] | None = None
) -> str:
    """``path?k=v&...`` with every key and value form-encoded once (not HTML-escaped: pass the
    result through :func:`esc` or use :func:`link`).  ``None`` values are left out."""
    items = params.items() if isinstance(params, Mapping) else (params or ())
    query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in items if v is not None)
    return f"{path}?{query}" if query else path


def link(path: str, text: str, params: Mapping[str, object] | None = None, **attrs: str) -> str:
    extra = "".join(f' {k.rstrip("_")}="{esc(v)}"' for k, v in attrs.items())
    return f'<a href="{esc(href(path, params))}"{extra}>{esc(text)}</a>'


def hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">'


def button_form(
    action: str,
    token: str,
    label: str,
    fields: Mapping[str, object] | None = None,
    *,
    cls: str = "",
    inline: bool = True,
) -> str:
    """A POST form of hidden fields and one button (every state change is one of these)."""
    inputs = hidden("token", token) + "".join(
        hidden(k, v) for k, v in (fields or {}).items() if v is not None
    )
    klass = ' class="inline"' if inline else ""
    bcls = f' class="{esc(cls)}"' if cls else ""
    return (
        f'<form method="post" action="{esc(action)}"{klass}>{inputs}'
        f"<button{bcls}>{esc(label)}</button></form>"
    )


def table(headers: Sequence[Cell], rows: Iterable[Sequence[Cell]], *, empty: str = "") -> str:
    """A table; header cells are text (escaped here, or ``(html, css class)``), row cells
    are HTML already escaped by the caller (``(html, css class)`` pairs allowed too)."""

    def cell(tag: str, item: Cell, escape: bool) -> str:
        content, cls = (item, "") if isinstance(item, str) else item
        body = esc(content) if escape else content
        return f'<{tag} class="{cls}">{body}</{tag}>' if cls else f"<{tag}>{body}</{tag}>"

    head = "".join(cell("th", h, isinstance(h, str)) for h in headers)
    body = "".join("<tr>" + "".join(cell("td", c, False) for c in row) + "</tr>" for row in rows)
    if not body and empty:
        body = f'<tr><td colspan="{len(headers)}" class="muted">{esc(empty)}</td></tr>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def fmt_size(n: int | None) -> str:
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def fmt_time(when: datetime | None, *, seconds: bool = True) -> str:
    """UTC (the archive's own clock), to the second, or to the minute in tables that say UTC
    in their heading."""
    if when is None:
        return ""
    if not seconds:
        return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _tab_title(title: str) -> str:
    """``Title - wwwproxy`` in the browser tab; the welcome page is plain ``wwwproxy``."""
    return title if title == "wwwproxy" else f"{title} - wwwproxy"


def layout(title: str, body: str, *, mode: str, active: str = "", query: str = "") -> str:
    """A whole page: navigation (with the mode and a search box), the title, ``body`` (HTML
    escaped by the caller)."""
    nav = "".join(
        f'<a href="{esc(path)}"{" class=here" if path == active else ""}>{esc(label)}</a>'
        for path, label in NAV
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(_tab_title(title))}</title><style>{_STYLE}</style></head><body>"
        '<header><div class="bar"><a class="brand" href="/">wwwproxy</a>'
        f'<span class="badge {esc(mode)}" title="mode">{esc(mode)}</span>'
        f"<nav>{nav}</nav>"
        '<form method="get" action="/search/" role="search">'
        f'<input type="search" name="q" value="{esc(query)}" placeholder="Search the cache"'
        ' aria-label="Search the cache"><button>Search</button></form>'
        "</div></header>"
        f"<main><h1>{esc(title)}</h1>\n{body}\n</main>"
        "<footer><p>wwwproxy, an offline caching proxy recording into WARC files "
        "with an OpenWayback CDXJ index.</p></footer>"
        "</body></html>\n"
    )
