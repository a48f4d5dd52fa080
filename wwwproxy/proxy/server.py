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
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any, BinaryIO

import aiohttp
from aiohttp import web

from ..archive.outgoing import OutgoingQueue, QueuedRequest
from ..archive.store import CachedEntry, Recorder, Store, StoreError
from ..archive.warc import ORIG_HEADER_PREFIX, WARCWriteError
from ..config import Config
from ..url import URL, InvalidURL, canonicalize
from ..url.canonical import DEFAULT_PORTS
from ..url.requestkey import request_key
from ..http.headers import (
    HOP_BY_HOP,
    add_via,
    end_to_end,
    get_header,
    set_header,
    without_controls,
)
from .modes import (
    Action,
    CacheState,
    Mode,
    age_seconds,
    client_freshness,
    decide,
    max_age_for,
)
from .pages import page_response
from .tunnel import tunnel
from .upstream import UpstreamError, UpstreamTimeouts, describe_error, new_session, open_upstream

__all__ = ["PSEUDONYM", "ProxyServer", "ProxyState"]

log = logging.getLogger("wwwproxy.proxy")

PSEUDONYM = "wwwproxy"
CHUNK = 64 * 1024
MAX_REQUEST_BODY = 64 * 1024 * 1024  # a request body is read whole: its archive key needs it
_FETCHABLE = ("http", "https")
# Request headers made anew for the upstream request: aiohttp writes Host and Content-Length,
# and the body is already read whole, so a 100-continue expectation has been met (by aiohttp
# answering the browser) and must not make the upstream request wait for a 100.
_NOT_FORWARDED = frozenset({"host", "content-length", "expect"})


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
        self._background: set[asyncio.Task[Any]] = set()
        #: set when the server shuts down: open CONNECT tunnels end instead of holding it up
        self.closing = asyncio.Event()
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
        self._own_hosts = {"localhost", "127.0.0.1", "::1", host.lower()} | {
            n.strip("[]").rstrip(".") for n in config.names if _host_only(n)
        }
        self._freshness = [(r.regex, r.max_age) for r in config.freshness]

    def reload(self, config: Config) -> None:
        """SIGHUP: take the new config; the listening address needs a restart to change."""
        self._apply_config(config)
        self.state.mode = Mode(config.mode)

    def is_own(self, url: URL, local: tuple[str, int] | None = None) -> bool:
        """Does ``url`` name this proxy?  A configured name with our port, or any spelling of an
        address we listen on (``localhost.``, ``[::ffff:127.0.0.1]``, the address the browser
        reached us at: ``local``, the connection's own socket address).  Forwarding such a
        request would send it back to ourselves."""
        if url.local or url.hostport in self._own_names:
            return True
        port = url.port if url.port is not None else DEFAULT_PORTS.get(url.proto)
        if port != self.config.listen_port:
            return False
        host = url.host.rstrip(".")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if host in self._own_hosts:
            return True
        addr = _ip(host)
        if addr is None:
            return False
        if local is not None and addr == _ip(local[0]):
            return True
        listen = _ip(self.config.listen_host)
        if listen is not None and listen.is_unspecified:
            return addr.is_loopback or addr.is_unspecified
        return addr == listen

    # --- lifecycle -----------------------------------------------------------------------

    async def start_session(self) -> None:
        if self.session is None:
            timeouts = UpstreamTimeouts(self.config.connect_timeout, self.config.read_timeout)
            # No bound of our own: each upstream connection serves one browser request, and
            # the browsers bound those per host.  A bound here would make every request to a
            # host wait behind its long downloads, event streams and long polls.
            self.session = new_session(timeouts, limit_per_host=0, limit=0)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run background work (a refresh job ...) that :meth:`close` cancels at shutdown."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
            self.session = None

    def make_app(self) -> web.Application:
        @web.middleware
        async def every_request(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            # Not the router: a CONNECT's authority-form target (``host:443``) has no path, so
            # no route matches it, and an absolute-form target must not be routed by its path.
            return await self.handle(request)

        app = web.Application(
            handler_args={"max_field_size": 16384, "max_line_size": 16384},
            middlewares=[every_request],
        )
        app.router.add_route("*", "/{tail:.*}", self.handle)  # (reached through the middleware)

        async def on_startup(_: web.Application) -> None:
            await self.start_session()

        async def on_shutdown(_: web.Application) -> None:
            self.closing.set()

        async def on_cleanup(_: web.Application) -> None:
            await self.close()

        app.on_startup.append(on_startup)
        app.on_shutdown.append(on_shutdown)
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
        local = request.transport.get_extra_info("sockname") if request.transport else None
        if self.is_own(url, local if isinstance(local, tuple) else None):
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
        except (ConnectionError, aiohttp.ClientPayloadError) as exc:
            # the browser left (or broke the framing) before its body was complete: there is
            # nobody to answer and nothing to forward, queue or record
            log.info("request body of %s not received: %s", url.canonical, exc)
            return page_response(400, "Incomplete request body", "The request body was cut off.")
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
        if cached is None and method == "HEAD" and self.state.mode is not Mode.ONLINE:
            # a HEAD can be answered from the GET capture's head (RFC 9111 §4) when we are
            # not going to ask the origin anyway; online, the HEAD is forwarded as such
            cached = await asyncio.to_thread(self.store.lookup, url, url.file, "GET", b"")
        now = datetime.now(UTC)
        state = CacheState(cached.date, cached.has_validators) if cached is not None else None
        force, client_max_age = client_freshness(
            request.headers.get("Cache-Control"), request.headers.get("Pragma")
        )
        max_age = max_age_for(url.canonical, self._freshness)
        if max_age is not None and client_max_age is not None:
            max_age = min(max_age, client_max_age)
        action = decide(self.state.mode, state, now, max_age=max_age, force=force, method=method)
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
        returns the status.  Raises :class:`UpstreamError`, and the archive's errors
        (StoreError, WARCWriteError, OSError, ValueError for headers it cannot store)."""
        await self.start_session()
        assert self.session is not None
        fwd = add_via(end_to_end(headers), (1, 1), PSEUDONYM)
        upstream = await open_upstream(self.session, method, url, fwd, body)
        try:
            raw_headers = _decode_headers(upstream.raw_headers)
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
            await _finish_record(recorder, upstream, raw_headers)
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
            except (ValueError, UpstreamError, StoreError, WARCWriteError, OSError) as exc:
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
            # not the browser's conditions or range: fetching the queue must give the whole
            # resource to serve offline, not a 304 about the browser's copy or a part of it
            headers=tuple(
                end_to_end(
                    (k, v)
                    for k, v in request.headers.items()
                    if k.lower() not in _NOT_FORWARDED and k.lower() not in _CONDITIONAL
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
        headers = replay_headers(cached.headers)
        recorded_length = get_header(cached.headers, "Content-Length")
        headers = [(n, v) for n, v in headers if n.lower() not in ("content-length", "age")]
        if _bodiless(cached) and recorded_length is not None:
            # a HEAD (or 204/304) answer: its Content-Length describes the GET body it lacks
            headers.append(("Content-Length", recorded_length))
        elif not _bodiless(cached):
            headers.append(("Content-Length", str(cached.payload_length)))
        age = age_seconds(cached.date, now, get_header(cached.headers, "Age"))
        headers.append(("Age", str(age)))
        # ours alone: an X-Cache the origin's CDN sent stays in the archive, not in the answer
        headers = set_header(headers, "X-Cache", "HIT")
        if stale is not None:
            headers.append(("Warning", f'111 {PSEUDONYM} "Revalidation Failed"'))
            headers = set_header(headers, "X-Cache-Stale", stale)
        headers = add_via(headers, (1, 1), PSEUDONYM)
        response = _Forwarded(status=cached.status, reason=cached.reason)
        for name, value in _sendable(headers):
            response.headers.add(name, value)
        try:
            await response.prepare(request)
        except ConnectionError:
            return response  # the browser left while the copy was looked up
        if request.method != "HEAD":
            # one thread hop opens the copy and reads its start: for most pages, all of it
            stream, chunk = await asyncio.to_thread(_open_and_read, cached)
            try:
                while chunk:
                    await response.write(chunk)
                    if stream is None:
                        break
                    chunk = await asyncio.to_thread(stream.read, CHUNK)
            except ConnectionError:
                pass
            finally:
                if stream is not None:
                    stream.close()
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    def _upstream_headers(
        self, request: web.Request, cached: CachedEntry | None
    ) -> list[tuple[str, str]]:
        headers = end_to_end(
            (k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED
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
        raw_headers = _decode_headers(upstream.raw_headers)
        recorder = self.store.recorder(
            url,
            key,
            method=request.method,
            request_headers=_request_record_headers(request, url, fwd_headers),
            request_body=body,
        )
        headers = end_to_end(raw_headers)
        headers = add_via(headers, upstream.version[:2] if upstream.version else (1, 1), PSEUDONYM)
        headers = set_header(headers, "X-Cache", "MISS")  # ours alone (see serve_cached)
        response = _Forwarded(status=upstream.status, reason=upstream.reason)
        for name, value in _sendable(headers):
            response.headers.add(name, value)
        has_length = get_header(raw_headers, "Content-Length") is not None
        if not has_length and request.version < aiohttp.HttpVersion11:
            response.force_close()
        client_ok = True
        try:
            await response.prepare(request)
        except ConnectionError:
            client_ok = False
        # Every part goes to the browser as it arrives (a page that renders progressively,
        # server-sent events), but what completes the body in the browser's eyes is held back
        # until the exchange is recorded: the last byte of a Content-Length body, else the end
        # of the chunked body or the connection's close.  So whatever the browser has received
        # in full is in the archive (switching offline right after a page has loaded finds it).
        expected = _content_length(raw_headers)
        received = 0
        complete = False
        held = b""
        try:
            async for chunk in upstream.content.iter_chunked(CHUNK):
                recorder.write(chunk)
                received += len(chunk)
                if expected is not None and received >= expected:
                    chunk, held = chunk[:-1], held + chunk[-1:]
                if client_ok and chunk:
                    client_ok = await _send(response, chunk)
                    if not client_ok and not self.config.finish_on_disconnect:
                        break
            else:
                complete = True
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            reason, _ = describe_error(exc)
            log.warning("upstream body of %s failed: %s", url.canonical, reason)
        if complete:
            try:
                await _finish_record(recorder, upstream, raw_headers)
            except (StoreError, WARCWriteError, ValueError, OSError) as exc:
                # the browser still gets its answer; the archive problem is the log's
                log.error("%s was not recorded: %s", url.canonical, exc)
        else:
            recorder.abort()
        if client_ok and held:
            client_ok = await _send(response, held)
        if not complete and client_ok:
            # a cut-off body must look cut off to the browser, never complete
            if request.transport is not None:
                request.transport.close()
            return response
        if client_ok:
            with contextlib.suppress(ConnectionError):
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
        for name, value in without_controls(upstream.headers.items()):
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

        try:
            await asyncio.to_thread(record)
        except (StoreError, WARCWriteError, ValueError, OSError) as exc:
            log.error("revisit of %s was not recorded: %s", url.canonical, exc)
        fresh = await asyncio.to_thread(self.store.lookup, url, key, request.method, body)
        return await self.serve_cached(request, fresh or cached)


class _Forwarded(web.StreamResponse):
    """A response relayed or replayed with the origin's headers only: aiohttp's defaults for
    a missing Content-Type (``application/octet-stream``, which would stop a browser from
    sniffing the type as it would without the proxy) and Server are taken out again."""

    async def _prepare_headers(self) -> None:
        absent = [name for name in ("Content-Type", "Server") if name not in self.headers]
        await super()._prepare_headers()
        for name in absent:
            self.headers.popall(name, None)


def _decode_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """Header bytes as text the archive turns back into the same bytes (UTF-8 with
    surrogateescape, as aiohttp decodes request headers and the WARC layer encodes them),
    but for control characters, which neither the browser nor the archive is sent."""
    return without_controls(
        (n.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape")) for n, v in raw
    )


def _sendable(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers aiohttp can write: it writes text as UTF-8 and silently drops the escaped bytes
    of a value that was not UTF-8, so such a value is sent read as ISO-8859-1 instead (the
    archive keeps the exact bytes)."""
    out = []
    for name, value in headers:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "surrogateescape").decode("latin-1")
        out.append((name, value))
    return out


async def _send(response: web.StreamResponse, chunk: bytes) -> bool:
    """Write to the browser; False once it has gone.  (A write waiting for a slow browser
    that then leaves fails with a plain ConnectionError, not ConnectionResetError.)"""
    try:
        await response.write(chunk)
    except ConnectionError:
        return False
    return True


def _content_length(headers: Iterable[tuple[str, str]]) -> int | None:
    """The Content-Length the origin announced (aiohttp has refused the response if it is
    malformed or repeated with different values), or None for a chunked or
    close-delimited body."""
    value = get_header(headers, "Content-Length")
    value = value.strip() if value is not None else None
    return int(value) if value and value.isascii() and value.isdigit() else None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IP address (v4-mapped v6 as v4), or None for a name."""
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _host_only(name: str) -> bool:
    """A configured name without a port (``names`` may hold ``host`` or ``host:port``)."""
    return ":" not in name or (name.startswith("[") and name.endswith("]"))


def _bodiless(cached: CachedEntry) -> bool:
    """A capture whose recorded Content-Length is not its (empty) payload's length."""
    return (
        (cached.request_method or "").upper() == "HEAD"
        or cached.status in (204, 304)
        or 100 <= cached.status < 200
    )


def replay_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The recorded headers a replay sends: end-to-end ones, without the archive's renamed
    transfer-coding headers (``X-Archive-Orig-Transfer-Encoding`` describes a hop the replay
    does not repeat: it is sent with a Content-Length)."""
    prefix = ORIG_HEADER_PREFIX.lower()
    return [
        (n, v)
        for n, v in end_to_end(headers)
        if not (n.lower().startswith(prefix) and n.lower()[len(prefix) :] in HOP_BY_HOP)
    ]


#: Request headers that make the answer depend on what the browser already has (RFC 9110
#: §13.1, §14.2): a 304, 412 or 206 is the browser's own to receive, not the resource.
_CONDITIONAL = frozenset(
    {"if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range"}
)


def _conditional(request: web.Request) -> bool:
    """The browser asked conditionally (or for a part) itself: the answer is its own."""
    return any(name.lower() in _CONDITIONAL for name in request.headers)


def _request_record_headers(
    request: web.Request, url: URL, fwd_headers: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The request as sent upstream, for the WARC request record."""
    return [("Host", url.hostport), *fwd_headers]


def http_date(dt: datetime) -> str:
    return format_datetime(dt.astimezone(UTC), usegmt=True)


def _open_and_read(cached: CachedEntry) -> tuple[BinaryIO | None, bytes]:
    """The stored body's first chunk, and the open stream if there is more (else None)."""
    stream = cached.open_body()
    try:
        first = stream.read(CHUNK)
        if len(first) < CHUNK and not (more := stream.read(CHUNK)):
            stream.close()
            return None, first
    except BaseException:
        stream.close()
        raise
    if len(first) < CHUNK:
        first += more
    return stream, first


async def _finish_record(
    recorder: Recorder, upstream: aiohttp.ClientResponse, raw_headers: list[tuple[str, str]]
) -> None:
    """Write the exchange in a thread, so a large body's digest + gzip never stalls the loop."""
    await asyncio.to_thread(
        recorder.finish,
        upstream.status,
        upstream.reason or "",
        raw_headers,
        _http_version(upstream),
    )


def _http_version(upstream: aiohttp.ClientResponse) -> str:
    """The origin's HTTP version, for the recorded status line."""
    version = upstream.version or aiohttp.HttpVersion11
    return f"HTTP/{version.major}.{version.minor}"
