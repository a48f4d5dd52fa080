"""``/history/?url=U``: every capture of a URL; ``/cache/?url=U[&t=TIME]``: one capture.

Time travel goes through the CDXJ index: ``t`` picks the capture closest in time (``t`` as
``YYYYMMDDhhmmss`` or any prefix of it, or a W3C-DTF timestamp such as the index's own
``2026-11-22T05:04:30.123456Z``), and the archive resolves it (a revisit's body is the earlier
response it stands for).

A capture is served with its original status, its content headers and ``X-Cache: HIT``, but
from the proxy's own address, so it is sandboxed (``Content-Security-Policy: sandbox``: no
script runs, and the page gets an opaque origin that cannot reach the command pages) and its
cookies and other state-setting headers are dropped.  An HTML capture gets a ``<base href>``
(so its relative links and images load from the original URL, through the proxy) and a
one-line banner; ``raw=1`` serves the payload exactly as stored.
"""

from __future__ import annotations

import contextlib
import logging
import re
from datetime import UTC, datetime
from typing import BinaryIO, NamedTuple

import aiohttp
from aiohttp import web

from ..archive.cdxj import CDXJError, CDXJRecord, normalize_timestamp
from ..archive.served import CachedEntry, served_record
from ..fsutil import read_chunks
from ..http.content import ContentDecoder, DecodedTooLarge
from ..url import URL, surt
from .context import Context, PageError
from .template import esc, fmt_time, href, link, table
from .worker import in_worker, page_executor

__all__ = ["annotate_html", "cached", "page", "parse_when"]

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
MAX_ANNOTATE = 8 * 1024 * 1024  # larger HTML captures are served as stored
#: decoded bytes of a page that :func:`annotate_html` looks at (its ``<head>`` in the first
#: 64 KiB, its ``<body>`` in the first MiB): annotating them alone gives the same page
ANNOTATED_START = 1024 * 1024
_WAYBACK_DEFAULT = "00000101000000"
_KEEP_HEADERS = frozenset(
    {"content-type", "content-encoding", "content-language", "last-modified", "etag", "date"}
)
_HEAD = re.compile(rb"<head\b[^>]*>", re.IGNORECASE)
_BODY = re.compile(rb"<body\b[^>]*>", re.IGNORECASE)
_CAPTURE_TYPES = ("response", "revisit")
_SANDBOX = "sandbox allow-popups allow-popups-to-escape-sandbox"


def parse_when(text: str) -> datetime:
    """``YYYYMMDDhhmmss`` (or a prefix of at least the year) or a W3C-DTF timestamp, as UTC.
    Raises ValueError saying what is accepted."""
    t = text.strip()
    try:
        if t.isascii() and t.isdigit() and 4 <= len(t) <= 14:
            full = t + _WAYBACK_DEFAULT[len(t) :]
            t = f"{full[:4]}-{full[4:6]}-{full[6:8]}T{full[8:10]}:{full[10:12]}:{full[12:14]}Z"
        return datetime.fromisoformat(normalize_timestamp(t))
    except (CDXJError, ValueError):
        raise ValueError(
            f"the time {text!r} is not YYYYMMDDhhmmss (or a prefix of it) nor a UTC timestamp "
            "such as 2026-11-22T05:04:30Z"
        ) from None


def annotate_html(body: bytes, url: str, when: datetime, history: str) -> bytes:
    """Put ``<base href=url>`` first in the head and a banner at the top of the body.  Only
    ASCII is inserted, so any ASCII-compatible charset is kept."""
    base = f'<base href="{esc(url)}">'.encode("ascii")
    banner = (
        '<div style="all:initial;display:block;font:13px/1.6 system-ui,sans-serif;'
        'background:#1d2330;color:#fff;padding:4px 10px">wwwproxy: archived copy of '
        f'<a style="color:#fff" href="{esc(url)}">{esc(url)}</a> from {esc(fmt_time(when))} '
        f'&middot; <a style="color:#fff" href="{esc(history)}">all captures</a></div>'
    ).encode("ascii", "xmlcharrefreplace")
    m = _HEAD.search(body, 0, 65536)
    at = m.end() if m else 0
    body = body[:at] + base + body[at:]
    m = _BODY.search(body, 0, 1024 * 1024)
    if m:
        body = body[: m.end()] + banner + body[m.end() :]
    return body


def _capture_json(record: CDXJRecord) -> dict[str, object]:
    return {
        "time": record.timestamp,
        "type": record.record_type,
        "status": record.fields.get("hsc"),
        "mime": record.fields.get("mct"),
        "digest": record.fields.get("sha"),
        "view": href("/cache/", {"url": record.uri, "t": record.timestamp}),
    }


async def page(ctx: Context) -> web.StreamResponse:
    url = ctx.url("url", required=False)
    if url is None:

        def ask() -> str:
            return (
                '<form method="get" action="/history/" class="card"><div class="row">'
                '<label>URL <input type="text" name="url" size="60"></label>'
                "<button class=primary>Show captures</button></div></form>"
            )

        if ctx.wants_json:
            raise PageError(400, "The 'url' argument (a URL) is missing.")
        return ctx.html_response("History of a URL", ask(), active="/history/")
    key = url.file
    store = ctx.services.store
    captures = await in_worker(store.captures, key)
    served = served_record(captures, prefer_good=ctx.services.config.keep_good_copy)
    data = {
        "url": key,
        "captures": [{**_capture_json(c), "served": c is served} for c in captures],
        # the capture the proxy serves (offline, or while fresh): the page's status
        "served": _capture_json(served) if served is not None else None,
    }

    def render() -> str:
        actions = " · ".join(
            [
                f'<a class="url" href="{esc(key)}">{esc(key)}</a>',
                link("/refresh/", "refresh", {"url": key}),
                link("/delete/", "delete", {"url": key}),
                link(f"/index/{url.proto}/{url.hostport}/", f"all of {url.hostport}"),
            ]
        )
        if not captures:
            return (
                f'<p>{actions}</p><div class="msg error">This URL is not in the cache.</div>'
                f"<p>{link('/refresh/', 'Fetch it', {'url': key})} (or queue it when offline).</p>"
            )
        kinds = []
        previous = None
        for c in captures:  # oldest first: is each one's content new?
            sha = c.fields.get("sha")
            same = c.record_type == "revisit" or (previous is not None and sha == previous)
            kinds.append("same content" if same else "new content")
            previous = sha
        rows = []
        for n in range(len(captures) - 1, -1, -1):  # newest first
            c = captures[n]
            rows.append(
                (
                    esc(n + 1),
                    link("/cache/", fmt_time(c.as_datetime()), {"url": key, "t": c.timestamp}),
                    esc(f"{c.fields.get('hsc', '')}{' (served)' if c is served else ''}"),
                    esc(c.fields.get("mct") or ""),
                    esc(kinds[n]),
                    link(
                        "/cache/", "raw", {"url": key, "t": c.timestamp, "raw": "1"}, rel="nofollow"
                    ),
                )
            )
        if served is not None:
            number = captures.index(served) + 1
            now = (
                f"Served from the cache: capture {number} of {len(captures)}, status "
                f"{served.fields.get('hsc', 200)}."
            )
        else:
            now = (
                "No capture can be served: only answers to a browser's own conditional or "
                "range requests (304, 206) are recorded."
            )
        return f"<p>{actions}</p><p>{esc(now)}</p>" + table(
            ["#", "Captured (view it as it was)", "Status", "Type", "Content", ""], rows
        )

    status = 200 if captures else 404
    return ctx.respond(data, f"History of {key}", render, status, active="/history/")


def _capture_for(ctx: Context, url: URL, when: datetime | None) -> CachedEntry | None:
    store = ctx.services.store
    key = url.file
    if when is None:
        return store.get(url, key)
    record = store.index.closest(surt(key), when, record_types=_CAPTURE_TYPES)
    if record is None:
        return None
    return store.get(url, key, at=record.as_datetime())


async def cached(ctx: Context) -> web.StreamResponse:
    """The cached copy, as stored (newest, or the one closest to ``t``)."""
    url = ctx.url("url")
    assert url is not None
    when_text = ctx.text("t")
    try:
        when = parse_when(when_text) if when_text else None
    except ValueError as exc:
        message = str(exc)
        raise PageError(400, message[:1].upper() + message[1:] + ".") from None
    entry = await in_worker(_capture_for, ctx, url, when)
    if entry is None:
        raise PageError(404, f"{url.file} is not in the cache.", title="Not cached")
    if ctx.withheld(entry):
        raise PageError(
            403,
            f"The copy of {url.file} was fetched with credentials (or is private): the proxy "
            "serves it only to a browser sending the same credentials, through the proxy.",
            title="Private copy",
        )
    request = ctx.request
    headers = {n: v for n, v in entry.headers if n.lower() in _KEEP_HEADERS}
    content_type = next((v for n, v in entry.headers if n.lower() == "content-type"), "")
    encoding = next((v for n, v in entry.headers if n.lower() == "content-encoding"), None)
    stream = await in_worker(entry.open_body)
    decoded: _Annotated | None = None
    try:
        if (
            not ctx.flag("raw")
            and content_type.split(";", 1)[0].strip().lower()
            in ("text/html", "application/xhtml+xml")
            and entry.payload_length <= MAX_ANNOTATE
            and "utf-16" not in content_type.lower()
        ):
            decoded = await in_worker(_annotated_start, ctx, entry, url, encoding, stream)
            if decoded is not None:
                headers = {n: v for n, v in headers.items() if n.lower() != "content-encoding"}
            else:  # served as stored after all: from its start
                stream.close()
                stream = await in_worker(entry.open_body)
        headers.update(
            {
                "X-Cache": "HIT",
                "X-Wwwproxy-Capture": entry.date.astimezone(UTC).isoformat(),
                "Content-Security-Policy": _SANDBOX,
                "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-store",
            }
        )
        response = web.StreamResponse(status=entry.status, reason=entry.reason, headers=headers)
        if decoded is None:
            response.content_length = entry.payload_length
        await response.prepare(request)
        if request.method != "HEAD":
            try:
                await _write_body(response, stream, decoded)
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                return response
            except ValueError as exc:  # not what it says, or past max_decoded_size: cut off
                log.warning("cached copy of %s cut off: %s", url.file, exc)
                if request.transport is not None:
                    request.transport.close()
                return response
    finally:
        stream.close()
    await response.write_eof()
    return response


class _Annotated(NamedTuple):
    """An HTML capture served decoded: its start with the ``<base>`` and the banner in, and
    the decoder the rest of it goes through."""

    start: bytes
    decoder: ContentDecoder


async def _write_body(
    response: web.StreamResponse, stream: BinaryIO, decoded: _Annotated | None
) -> None:
    """The rest of ``stream`` to the browser as stored, or decoded a piece at a time (each
    written, as the browser reads, before the next is decoded); ValueError if it does not
    decode or decodes to more than ``max_decoded_size``."""
    if decoded is not None:
        await response.write(decoded.start)
        for piece in decoded.decoder.pieces(b""):  # the rest of what the start's input gives
            await response.write(piece)
    async with contextlib.aclosing(read_chunks(stream, CHUNK, page_executor())) as chunks:
        async for chunk in chunks:
            for piece in decoded.decoder.pieces(chunk) if decoded else (chunk,):
                await response.write(piece)
    if decoded is not None:
        decoded.decoder.end()


def _own_origin(ctx: Context) -> str:
    """``http://host:port`` of this proxy as the browser reached it.  Not ``request.host``:
    for an absolute-form request (through the proxy) aiohttp gives the host without its port."""
    try:
        origin = ctx.request.url.origin()
    except ValueError:
        origin = None
    if origin is None or not origin.host:
        return f"http://{ctx.services.local_host}"
    return str(origin)


def _annotated_start(
    ctx: Context, entry: CachedEntry, url: URL, encoding: str | None, stream: BinaryIO
) -> _Annotated | None:
    """Decode the start of an HTML capture from ``stream`` (all that :func:`annotate_html`
    looks at) and annotate it; None if it cannot be decoded (then it is served as stored)."""
    max_size = ctx.services.config.max_decoded_size or None
    start = bytearray()
    try:
        decoder = ContentDecoder(encoding, max_size=max_size)
        with contextlib.suppress(DecodedTooLarge):  # the rest raises it again: cut off there
            while len(start) < ANNOTATED_START:
                if piece := decoder.read():
                    start += piece
                elif chunk := stream.read(CHUNK):
                    decoder.put(chunk)
                else:
                    break
    except ValueError:
        return None  # an encoding we cannot undo, or not what it says: serve it as stored
    history = _own_origin(ctx) + href("/history/", {"url": url.file})
    return _Annotated(annotate_html(bytes(start), url.canonical, entry.date, history), decoder)
