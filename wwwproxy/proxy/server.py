"""The aiohttp proxy server: routing, forwarding + recording, offline serving, queueing.

One handler sees every request.  A request addressed to the proxy itself goes to the command
URLs; anything else is canonicalized, given its archive key, and then fetched, served from the
archive or queued as :func:`wwwproxy.proxy.modes.decide` says.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime

import aiohttp
from aiohttp import web

from ..archive.outgoing import OutgoingQueue, QueuedRequest
from ..archive.store import CachedEntry, Store
from ..config import Config
from ..url import URL, InvalidURL, canonicalize
from ..url.requestkey import request_key
from .headers import add_via, end_to_end, get_header, set_header
from .modes import Action, CacheState, Mode, age_seconds, decide, max_age_for
from .pages import page_response
from .tunnel import tunnel
from .upstream import UpstreamError, UpstreamTimeouts, describe_error, new_session, open_upstream

__all__ = ["PSEUDONYM", "ProxyServer", "ProxyState"]

log = logging.getLogger("wwwproxy.proxy")

PSEUDONYM = "wwwproxy"
CHUNK = 64 * 1024
MAX_REQUEST_BODY = 64 * 1024 * 1024  # a request body is read whole: its archive key needs it
_FETCHABLE = ("http", "https")
_NO_BODY_METHODS = ("GET", "HEAD")


@dataclass
class ProxyState:
    """What can change while the server runs (mode switch, config reload)."""

    config: Config
    mode: Mode
    started: datetime = field(default_factory=lambda: datetime.now(UTC))


CommandHandler = Callable[[web.Request, "ProxyServer", URL | None], Awaitable[web.StreamResponse]]


class ProxyServer:
    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        mode: Mode | None = None,
        commands: CommandHandler | None = None,
    ) -> None:
        self.state = ProxyState(config, mode or Mode(config.mode))
        self.store = store
        self.queue = OutgoingQueue(store.root / "outgoing")
        self.commands = commands
        self.session: aiohttp.ClientSession | None = None
        self._own_names: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._apply_config(config)

    # --- configuration -------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self.state.config

    @property
    def local_host(self) -> str:
        """``host:port`` that path-only URLs name (the address browsers reach us at)."""
        host = self.config.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = "localhost"
        return (
            f"[{host}]:{self.config.listen_port}"
            if ":" in host
            else (f"{host}:{self.config.listen_port}")
        )

    def _apply_config(self, config: Config) -> None:
        self.state.config = config
        port = config.listen_port
        names = {"localhost", "127.0.0.1", "[::1]", *config.names}
        host = config.listen_host
        names.add(f"[{host}]" if ":" in host else host)
        self._own_names = {f"{n}:{port}" for n in names} | set(config.names)
        self._freshness = [(r.regex, r.max_age) for r in config.freshness]

    def reload(self, config: Config) -> None:
        """SIGHUP: take the new config; the listening address needs a restart to change."""
        self._apply_config(config)
        self.state.mode = Mode(config.mode)

    def is_own(self, url: URL) -> bool:
        return url.local or url.hostport in self._own_names

    # --- lifecycle -----------------------------------------------------------------------

    async def start_session(self) -> None:
        if self.session is None:
            timeouts = UpstreamTimeouts(self.config.connect_timeout, self.config.read_timeout)
            self.session = new_session(timeouts)

    async def close(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
            self.session = None

    def make_app(self) -> web.Application:
        app = web.Application(handler_args={"max_field_size": 16384, "max_line_size": 16384})
        app.router.add_route("*", "/{tail:.*}", self.handle)

        async def on_startup(_: web.Application) -> None:
            await self.start_session()

        async def on_cleanup(_: web.Application) -> None:
            await self.close()

        app.on_startup.append(on_startup)
        app.on_cleanup.append(on_cleanup)
        return app

    # --- the handler ---------------------------------------------------------------------

    def client_allowed(self, request: web.Request) -> bool:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if not peer:
            return False
        try:
            addr = ipaddress.ip_address(peer[0].split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
            addr = addr.ipv4_mapped
        return any(addr in net for net in self.config.allowed_clients)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not self.client_allowed(request):
            return page_response(403, "Forbidden", "This proxy does not serve your address.")
        if request.method == "CONNECT":
            return await tunnel(request, self)
        target = request.raw_path
        if target.startswith("/"):
            return await self.command(request, None)
        try:
            url = canonicalize(target, local_host=self.local_host)
        except InvalidURL as exc:
            return page_response(
                400,
                "Invalid URL",
                f"The URL <code>{html.escape(exc.url)}</code> is not valid: "
                f"{html.escape(exc.reason)}.",
            )
        if self.is_own(url):
            return await self.command(request, url)
        if PSEUDONYM in (request.headers.get("Via") or ""):
            return page_response(
                508,
                "Loop detected",
                f"The request for <code>{html.escape(url.canonical)}</code> "
                "has already passed through this proxy.",
            )
        if url.proto not in _FETCHABLE:
            return page_response(
                501,
                "Unsupported protocol",
                f"wwwproxy fetches only http and https URLs, not <code>{html.escape(url.proto)}"
                "</code>.",
            )
        try:
            body = await self._read_body(request)
        except web.HTTPRequestEntityTooLarge:
            return page_response(
                413,
                "Request body too large",
                f"Request bodies are limited to {MAX_REQUEST_BODY // 2**20} MiB.",
            )
        return await self.proxy(request, url, body)

    async def command(self, request: web.Request, url: URL | None) -> web.StreamResponse:
        if self.commands is not None:
            return await self.commands(request, self, url)
        return page_response(
            200,
            "wwwproxy",
            f"Mode: <b>{html.escape(self.state.mode.value)}</b>. The command pages are coming.",
        )

    async def _read_body(self, request: web.Request) -> bytes:
        if not request.body_exists:
            return b""
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(CHUNK):
            size += len(chunk)
            if size > MAX_REQUEST_BODY:
                raise web.HTTPRequestEntityTooLarge(max_size=MAX_REQUEST_BODY, actual_size=size)
            chunks.append(chunk)
        return b"".join(chunks)

    async def proxy(self, request: web.Request, url: URL, body: bytes) -> web.StreamResponse:
        method = request.method
        key = request_key(url.file, method, request.headers.get("Content-Type"), body)
        cached = await asyncio.to_thread(self.store.lookup, url, key, method, body)
        now = datetime.now(UTC)
        state = CacheState(cached.date, cached.has_validators) if cached is not None else None
        force = "no-cache" in (request.headers.get("Cache-Control") or "") or (
            "no-cache" in (request.headers.get("Pragma") or "")
        )
        action = decide(
            self.state.mode,
            state,
            now,
            max_age=max_age_for(url.canonical, self._freshness),
            force=force,
        )
        if action is Action.SERVE:
            assert cached is not None
            return await self.serve_cached(request, cached)
        if action is Action.QUEUE:
            return await self.queue_request(request, url, key, body)
        try:
            return await self.fetch(
                request, url, key, body, cached if action is Action.REVALIDATE else None
            )
        except UpstreamError as exc:
            if cached is not None:
                return await self.serve_cached(request, cached, stale=exc.reason)
            if self.state.mode is Mode.AUTODIAL:
                return await self.queue_request(request, url, key, body, reason=exc.reason)
            return self.upstream_error_page(exc)

    # --- the queue -----------------------------------------------------------------------

    async def fetch_to_archive(
        self, url: URL, key: str, method: str, headers: list[tuple[str, str]], body: bytes
    ) -> int:
        """Fetch without a browser (the queue, prefetching) through the same recording path;
        returns the status.  Raises :class:`UpstreamError`."""
        await self.start_session()
        assert self.session is not None
        fwd = add_via(end_to_end(headers), (1, 1), PSEUDONYM)
        upstream = await open_upstream(self.session, method, url, fwd, body)
        try:
            raw_headers = [
                (n.decode("latin-1"), v.decode("latin-1")) for n, v in upstream.raw_headers
            ]
            recorder = self.store.recorder(
                url,
                key,
                method=method,
                request_headers=[("Host", url.hostport), *fwd],
                request_body=body,
            )
            try:
                async for chunk in upstream.content.iter_chunked(CHUNK):
                    recorder.write(chunk)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                recorder.abort()
                reason, status = describe_error(exc)
                raise UpstreamError(url.canonical, reason, status) from exc
            await asyncio.to_thread(
                recorder.finish, upstream.status, upstream.reason or "", raw_headers
            )
            return upstream.status
        finally:
            upstream.release()

    async def fetch_queue(self) -> tuple[int, int]:
        """Fetch every queued request; a fetched one leaves the queue.  (fetched, failed)"""
        fetched = failed = 0
        for _path, item in await asyncio.to_thread(lambda: list(self.queue.entries())):
            if isinstance(item, ValueError):
                log.warning("%s", item)
                failed += 1
                continue
            try:
                url = canonicalize(item.url, local_host=self.local_host)
                await self.fetch_to_archive(
                    url, item.key, item.method, list(item.headers), item.body
                )
            except (InvalidURL, UpstreamError) as exc:
                log.warning("queued %s not fetched: %s", item.url, exc)
                failed += 1
                continue
            self.queue.remove(item.key)
            fetched += 1
        return fetched, failed

    # --- answers -------------------------------------------------------------------------

    def upstream_error_page(self, exc: UpstreamError) -> web.Response:
        title = "Gateway timeout" if exc.status == 504 else "Bad gateway"
        return page_response(
            exc.status,
            title,
            f"Could not fetch <code>{html.escape(exc.url)}</code>: {html.escape(exc.reason)}.",
            links=[("/control/", "Control page"), ("/outgoing/", "Outgoing queue")],
        )

    async def queue_request(
        self, request: web.Request, url: URL, key: str, body: bytes, reason: str | None = None
    ) -> web.Response:
        queued = QueuedRequest(
            url=url.file,
            key=key,
            method=request.method,
            headers=tuple(
                end_to_end(
                    (k, v)
                    for k, v in request.headers.items()
                    if k.lower() not in ("host", "content-length")
                )
            ),
            body=body,
        )
        await asyncio.to_thread(self.queue.add, queued)
        why = (
            f"The server could not be reached ({html.escape(reason)}), so"
            if reason
            else "wwwproxy is offline and has no copy of it, so"
        )
        return page_response(
            503,
            "Queued for fetching",
            f"<code>{html.escape(url.canonical)}</code> is not in the cache.",
            f"{why} the request has been queued and will be fetched when next online.",
            links=[("/outgoing/", "The outgoing queue"), ("/control/", "The control page")],
            headers={"Retry-After": "3600"},
        )

    async def serve_cached(
        self, request: web.Request, cached: CachedEntry, stale: str | None = None
    ) -> web.StreamResponse:
        now = datetime.now(UTC)
        headers = end_to_end(cached.headers)
        headers = [(n, v) for n, v in headers if n.lower() not in ("content-length", "age")]
        headers.append(("Content-Length", str(cached.payload_length)))
        age = age_seconds(cached.date, now, get_header(cached.headers, "Age"))
        headers.append(("Age", str(age)))
        headers.append(("X-Cache", "HIT"))
        if stale is not None:
            headers.append(("Warning", f'111 {PSEUDONYM} "Revalidation Failed"'))
            headers.append(("X-Cache-Stale", stale))
        headers = add_via(headers, (1, 1), PSEUDONYM)
        response = web.StreamResponse(status=cached.status, reason=cached.reason)
        for name, value in headers:
            response.headers.add(name, value)
        await response.prepare(request)
        if request.method != "HEAD":
            stream = await asyncio.to_thread(cached.open_body)
            try:
                while True:
                    chunk = await asyncio.to_thread(stream.read, CHUNK)
                    if not chunk:
                        break
                    await response.write(chunk)
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                pass
            finally:
                stream.close()
        with contextlib.suppress(ConnectionResetError, aiohttp.ClientConnectionResetError):
            await response.write_eof()
        return response

    def _upstream_headers(
        self, request: web.Request, cached: CachedEntry | None
    ) -> list[tuple[str, str]]:
        headers = end_to_end(
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length")
        )
        headers = add_via(headers, request.version[:2], PSEUDONYM)
        if cached is not None:
            etag = get_header(cached.headers, "ETag")
            modified = get_header(cached.headers, "Last-Modified")
            if etag:
                headers = set_header(headers, "If-None-Match", etag)
            if modified:
                headers = set_header(headers, "If-Modified-Since", modified)
        return headers

    async def fetch(
        self,
        request: web.Request,
        url: URL,
        key: str,
        body: bytes,
        cached: CachedEntry | None,
    ) -> web.StreamResponse:
        """Forward to the origin, streaming to the browser and into the archive at once."""
        assert self.session is not None
        method = request.method
        if _conditional(request):
            cached = None  # the browser's own validators go upstream, its 304 comes back
        fwd_headers = self._upstream_headers(request, cached)
        upstream = await open_upstream(self.session, method, url, fwd_headers, body)
        try:
            if upstream.status == 304 and cached is not None:
                return await self._not_modified(
                    request, url, key, body, fwd_headers, cached, upstream
                )
            return await self._relay(request, url, key, body, fwd_headers, upstream)
        finally:
            upstream.release()

    async def _relay(
        self,
        request: web.Request,
        url: URL,
        key: str,
        body: bytes,
        fwd_headers: list[tuple[str, str]],
        upstream: aiohttp.ClientResponse,
    ) -> web.StreamResponse:
        raw_headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in upstream.raw_headers]
        recorder = self.store.recorder(
            url,
            key,
            method=request.method,
            request_headers=_request_record_headers(request, url, fwd_headers),
            request_body=body,
        )
        headers = end_to_end(raw_headers)
        headers = add_via(headers, upstream.version[:2] if upstream.version else (1, 1), PSEUDONYM)
        headers.append(("X-Cache", "MISS"))
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for name, value in headers:
            response.headers.add(name, value)
        has_length = get_header(raw_headers, "Content-Length") is not None
        if not has_length and request.version < aiohttp.HttpVersion11:
            response.force_close()
        client_ok = True
        try:
            await response.prepare(request)
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            client_ok = False
        complete = False
        try:
            async for chunk in upstream.content.iter_chunked(CHUNK):
                recorder.write(chunk)
                if client_ok:
                    try:
                        await response.write(chunk)
                    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                        client_ok = False
                        if not self.config.finish_on_disconnect:
                            break
            else:
                complete = True
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            reason, _ = describe_error(exc)
            log.warning("upstream body of %s failed: %s", url.canonical, reason)
        if complete:
            # record in a thread, so a large body's digest + gzip never stalls the loop
            await asyncio.to_thread(
                recorder.finish, upstream.status, upstream.reason or "", raw_headers
            )
        else:
            recorder.abort()
            if client_ok:
                # a cut-off body must look cut off to the browser, never complete
                if request.transport is not None:
                    request.transport.close()
                return response
        if client_ok:
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientConnectionResetError):
                await response.write_eof()
        return response

    async def _not_modified(
        self,
        request: web.Request,
        url: URL,
        key: str,
        body: bytes,
        fwd_headers: list[tuple[str, str]],
        cached: CachedEntry,
        upstream: aiohttp.ClientResponse,
    ) -> web.StreamResponse:
        """304 to our revalidation: serve the cached copy and record it again as a revisit."""
        updated = list(cached.headers)
        for name, value in upstream.headers.items():
            if name.lower() in ("date", "etag", "expires", "cache-control", "last-modified"):
                updated = set_header(updated, name, value)

        def record() -> None:
            recorder = self.store.recorder(
                url,
                key,
                method=request.method,
                request_headers=_request_record_headers(request, url, fwd_headers),
                request_body=body,
            )
            with cached.open_body() as stream:
                while chunk := stream.read(CHUNK):
                    recorder.write(chunk)
            recorder.finish(cached.status, cached.reason, updated)

        await asyncio.to_thread(record)
        fresh = await asyncio.to_thread(self.store.lookup, url, key, request.method, body)
        return await self.serve_cached(request, fresh or cached)


def _conditional(request: web.Request) -> bool:
    """The browser asked conditionally itself: its 304 is its own to receive."""
    return "If-None-Match" in request.headers or "If-Modified-Since" in request.headers


def _request_record_headers(
    request: web.Request, url: URL, fwd_headers: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The request as sent upstream, for the WARC request record."""
    return [("Host", url.hostport), *fwd_headers]


def http_date(dt: datetime) -> str:
    return format_datetime(dt.astimezone(UTC), usegmt=True)
