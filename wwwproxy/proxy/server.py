"""The aiohttp proxy front: routing, answering from the archive, relaying what the engine fetches.

One handler sees every request.  A request addressed to the proxy itself goes to the command
URLs; anything else is canonicalized, given its archive key, and then fetched (through the
recording engine), served from the archive or queued, as :func:`wwwproxy.http.policy.decide`
says.  This module decides nothing of its own: it carries out the policy over aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import html
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import BinaryIO

import aiohttp
from aiohttp import web

from ..archive.errors import StoreError
from ..archive.outgoing import QueuedRequest
from ..archive.store import CachedEntry
from ..fsutil import read_chunks
from ..http.background import Refusal, queue_refusal
from ..http.filters import EMPTY_GIF, Replacement, Treatment, replacement_for
from ..http.headers import end_to_end
from ..http.modify_html import SCRIPTS_OFF_POLICY, modified_headers
from ..http.policy import (
    CONDITIONAL_HEADERS,
    Action,
    Mode,
    after_upstream_error,
    credential_check,
    is_good,
    request_directives,
)
from ..http.ranges import upstream_range
from ..recording.engine import PSEUDONYM, Exchange
from ..recording.services import Services
from ..recording.upstream import UpstreamError
from ..recording.upstream_protocol import reporting_interim
from ..url import URL, InvalidURL, canonicalize, wire_target
from ..url.requestkey import request_key
from .accesslog import LOGGED_URL, AccessLog
from .heads import closing_answer
from .intercept import Interceptor
from .pages import background_answer, page_response, upstream_error_page
from .ranged import write_pieces
from .relay import BrowserSink, ForwardedResponse, send_continue
from .replay import (
    allowed_address,
    cached_keys,
    modified_page,
    page_rule,
    plan_range,
    plan_replay,
    sendable_headers,
    url_rule,
)
from .request_body import MAX_REQUEST_BODY, BodyBudget, read_body
from .tunnel import parse_connect_target, tunnel
from .websocket import is_websocket, relay_websocket

__all__ = ["PSEUDONYM", "ProxyServer"]

log = logging.getLogger("wwwproxy.proxy")

CHUNK = 64 * 1024
_FETCHABLE = ("http", "https")
# Request headers made anew for the upstream request: aiohttp writes Host and Content-Length,
# and the body is already read whole, so a 100-continue expectation has been met (by aiohttp
# answering the browser) and must not make the upstream request wait for a 100.
_NOT_FORWARDED = frozenset({"host", "content-length", "expect"})

#: the path and query as the browser sent them (:func:`~wwwproxy.url.wire.wire_target`): what
#: goes upstream, while the canonical URL names the cache entry
WIRE_TARGET = web.RequestKey("wwwproxy.target", str)

CommandHandler = Callable[[web.Request, Services, URL | None], Awaitable[web.StreamResponse]]


class ProxyServer:
    """The HTTP front over the shared :class:`Services`."""

    def __init__(self, services: Services, *, commands: CommandHandler | None = None) -> None:
        self.services = services
        self.commands = commands
        #: set when the server shuts down: open CONNECT tunnels end instead of holding it up
        self.closing = asyncio.Event()
        #: HTTPS interception (the local CA is made on first use)
        self.interceptor = Interceptor(services.store.root / "certificates")
        #: one line per request, from both fronts
        self.access_log = AccessLog()
        #: room for request bodies in memory, shared by all requests
        self.bodies = BodyBudget()
        #: archive key -> its background revalidation (stale-while-revalidate), one at a time
        self._revalidating: dict[str, asyncio.Task[None]] = {}

    @property
    def config(self):  # noqa: ANN201 (a Config; kept short for the handler and tests)
        return self.services.config

    def make_app(self, *, owns_services: bool = True) -> web.Application:
        """The aiohttp application; its cleanup closes the services unless someone else owns
        them (``owns_services`` False: a crawl's recorder for its browser)."""

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
        app.router.add_route(  # (reached through the middleware)
            "*", "/{tail:.*}", self.handle, expect_handler=send_continue
        )

        async def on_shutdown(_: web.Application) -> None:
            self.closing.set()

        async def on_cleanup(_: web.Application) -> None:
            await self.services.close()

        app.on_shutdown.append(on_shutdown)
        if owns_services:
            app.on_cleanup.append(on_cleanup)
        return app

    # --- the handler ---------------------------------------------------------------------

    def client_allowed(self, request: web.Request) -> bool:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if not peer:
            return False
        return allowed_address(peer[0], self.config.allowed_clients)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        refusal = _framing_refusal(request)
        if refusal is not None:
            refusal.force_close()  # what follows on the connection cannot be trusted
            return refusal
        if not self.client_allowed(request):
            return page_response(403, "Forbidden", "This proxy does not serve your address.")
        inside = self.interceptor.target_of(request)
        if request.method == "CONNECT":
            response: web.StreamResponse
            if inside is not None:
                response = page_response(405, "Not allowed", "CONNECT inside a CONNECT tunnel.")
            else:
                response = self.blocked_connect(request) or await tunnel(
                    request, self.services, self.interceptor, self.closing
                )
            # a refused CONNECT ends the connection: the bytes a browser sent after it were
            # meant for the tunnel and must never be read as a request of their own
            response.force_close()
            return response
        target = request.raw_path
        if is_websocket(request) and target.startswith(("ws://", "wss://")):
            # some clients (aiohttp, websocket libraries) send a ws:// URL in absolute form
            target = "http" + target[2:]
        if inside is not None and target.startswith("/"):
            # inside an intercepted tunnel: origin-form, for the host of the CONNECT
            target = inside.origin() + target
            request[LOGGED_URL] = target  # the access log shows the whole https:// URL
        elif target.startswith("/"):
            if not self._host_is_own(request):
                # a page reached through DNS rebinding (``Host: evil.example:8080``) must not
                # read the browsing history, take a form token or change the configuration
                return page_response(
                    421,
                    "Misdirected request",
                    "This is wwwproxy; its pages answer only requests addressed to it.",
                )
            return await self.command(request, None)
        try:
            url = canonicalize(target, local_host=self.services.local_host)
        except InvalidURL as exc:
            return page_response(
                400,
                "Invalid URL",
                f"The URL <code>{html.escape(exc.url)}</code> is not valid: "
                f"{html.escape(exc.reason)}.",
            )
        request[WIRE_TARGET] = wire_target(target)
        local = request.transport.get_extra_info("sockname") if request.transport else None
        if self.services.is_own(url, local if isinstance(local, tuple) else None):
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
        verdict = self.services.filters.verdict(url)
        if verdict.treatment is Treatment.BLOCK:
            assert verdict.pattern is not None
            return self.blocked(request, url, verdict.pattern)
        if is_websocket(request):
            if self.services.mode is Mode.OFFLINE and verdict.treatment is not Treatment.DIRECT:
                return page_response(
                    503,
                    "Offline",
                    f"wwwproxy is offline: the WebSocket <code>{html.escape(url.canonical)}"
                    "</code> needs a live connection, and conversations are not cached.",
                )
            return await relay_websocket(request, url, self.services, request[WIRE_TARGET])
        announced = request.content_length
        if announced is not None and announced > MAX_REQUEST_BODY:
            if announced >= 2**63:  # not a length any body can have: a smuggling probe
                return page_response(400, "Bad request", "The Content-Length is not valid.")
            return page_response(
                413,
                "Request body too large",
                f"Request bodies are limited to {MAX_REQUEST_BODY // 2**20} MiB.",
            )
        async with self.bodies.holding() as held:
            try:
                body = await read_body(request, held)
            except web.HTTPRequestEntityTooLarge:
                return page_response(
                    413,
                    "Request body too large",
                    f"Request bodies are limited to {MAX_REQUEST_BODY // 2**20} MiB.",
                )
            except TimeoutError:
                log.info("request body of %s stalled: closed", url.canonical)
                response = page_response(408, "Request timeout", "The request body stopped coming.")
                response.force_close()
                with contextlib.suppress(ConnectionError):
                    await response.prepare(request)
                    await response.write_eof()
                # closed now, not after aiohttp's lingering wait for the rest of the body
                request.protocol.force_close()
                return response
            except (ConnectionError, aiohttp.ClientPayloadError) as exc:
                # the browser left (or broke the framing) before its body was complete: there
                # is nobody to answer and nothing to forward, queue or record
                log.info("request body of %s not received: %s", url.canonical, exc)
                return page_response(
                    400, "Incomplete request body", "The request body was cut off."
                )
            return await self.proxy(request, url, body)

    def _host_is_own(self, request: web.Request) -> bool:
        """Does an origin-form request's ``Host`` name this proxy?  (None: an HTTP/1.0 client
        that sent none, which no browser page can make.)"""
        host = request.headers.get("Host")
        if host is None:
            return True
        try:
            url = canonicalize(f"http://{host}/", local_host=self.services.local_host)
        except InvalidURL:
            return False
        local = request.transport.get_extra_info("sockname") if request.transport else None
        return self.services.is_own(url, local if isinstance(local, tuple) else None)

    async def command(self, request: web.Request, url: URL | None) -> web.StreamResponse:
        if self.commands is not None:
            return await self.commands(request, self.services, url)
        return page_response(
            200,
            "wwwproxy",
            f"Mode: <b>{html.escape(self.services.mode.value)}</b>.",
        )

    async def proxy(self, request: web.Request, url: URL, body: bytes) -> web.StreamResponse:
        services = self.services
        method = request.method
        mode = services.mode
        key = request_key(url.file, method, request.headers.get("Content-Type"), body)
        headers = list(request.headers.items())
        prefer_good = services.prefers_good()
        store = services.store
        verdict = services.filters.verdict(url)
        if not verdict.cache:
            # local_net (offline too) and dont_cache: fetched, never looked up nor recorded
            if verdict.treatment is Treatment.UNCACHED and mode is Mode.OFFLINE:
                return self.not_queued(url, verdict.pattern)
            return await self.fetch(request, url, key, body, None, Action.FETCH, record=False)
        cached = None
        if method == "GET":  # a hot copy is answered inline: no thread hop, no disk read
            cached = store.lookup_hot(url, key, headers, prefer_good=prefer_good)
        if cached is None and not store.absent(url, key):  # a cold miss: no thread hop
            cached = await asyncio.to_thread(
                store.lookup, url, key, method, body, headers, prefer_good=prefer_good
            )
        if cached is None and method == "HEAD" and mode is not Mode.ONLINE:
            # a HEAD can be answered from the GET capture's head (RFC 9111 §4) when we are
            # not going to ask the origin anyway; online, the HEAD is forwarded as such
            cached = await asyncio.to_thread(
                services.store.lookup, url, url.file, "GET", b"", headers, prefer_good=prefer_good
            )
        if cached is not None and not self.may_serve(cached, headers):
            cached = None  # a copy for other credentials: as if there were none
        action = self.action_for(url, method, request.headers, cached)
        if action is Action.SERVE:
            assert cached is not None
            return await self.serve_cached(request, cached)
        if action is Action.SERVE_STALE:
            assert cached is not None
            self.revalidate_later(url, key, cached, headers)
            return await self.serve_cached(request, cached)
        if action is Action.SERVE_AND_QUEUE:
            assert cached is not None
            if self.queue_refusal(request, url) is None:
                await asyncio.to_thread(services.queue.add, self._queued(request, url, key, body))
            return await self.serve_cached(request, cached)
        if action is Action.QUEUE:
            return await self.queue_request(request, url, key, body)
        if action is Action.UNAVAILABLE:
            return page_response(
                504,
                "Not cached",
                f"<code>{html.escape(url.canonical)}</code> is not in the cache, and the "
                "request asked for a cached answer only.",
            )
        return await self.fetch(request, url, key, body, cached, action)

    async def fetch(
        self,
        request: web.Request,
        url: URL,
        key: str,
        body: bytes,
        cached: CachedEntry | None,
        action: Action,
        *,
        record: bool = True,
    ) -> web.StreamResponse:
        """Fetch (or revalidate) upstream through the engine, relaying to the browser; what
        an unreachable server leaves is the policy's fallback."""
        services, mode = self.services, self.services.mode
        exchange = Exchange(
            url,
            key,
            request.method,
            upstream_range(
                (k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED
            ),
            body,
            request.version[:2],
            record=record,
            target=request.get(WIRE_TARGET),
        )
        sink = BrowserSink(request)
        try:
            with reporting_interim(sink.interim):
                outcome = await services.engine.fetch(
                    exchange,
                    revalidate=cached if action is Action.REVALIDATE else None,
                    sink=sink,
                )
        except UpstreamError as exc:
            if exc.untrusted:  # never answered with a copy: the user must see why
                return upstream_error_page(exc)
            stale = await self._stale_copy(request, url, key, body, cached)
            fallback = after_upstream_error(
                mode,
                stale is not None,
                stale.stored if stale else None,
                datetime.now(UTC),
                shared=services.config.shared,
            )
            if fallback is Action.SERVE:
                assert stale is not None
                return await self.serve_cached(request, stale, stale=exc.reason)
            if fallback is Action.QUEUE:
                return await self.queue_request(request, url, key, body, reason=exc.reason)
            return upstream_error_page(exc)
        if outcome.not_modified is not None:
            return await self.serve_cached(request, outcome.not_modified)
        return sink.response or page_response(502, "Bad gateway", "No answer was relayed.")

    async def _stale_copy(
        self, request: web.Request, url: URL, key: str, body: bytes, cached: CachedEntry | None
    ) -> CachedEntry | None:
        """The copy to serve when the origin cannot be reached: online the lookup took the
        newest answer, and where that is an error ``keep_good_copy`` brings back the good copy
        (as offline), if there is one this request may have."""
        if cached is None or is_good(cached.status) or not self.services.config.keep_good_copy:
            return cached
        headers = list(request.headers.items())
        good = await asyncio.to_thread(
            self.services.store.lookup, url, key, request.method, body, headers, prefer_good=True
        )
        if good is None or not is_good(good.status) or not self.may_serve(good, headers):
            return cached
        return good

    def revalidate_later(
        self, url: URL, key: str, cached: CachedEntry, headers: Iterable[tuple[str, str]]
    ) -> None:
        """Revalidate a copy served stale within its stale-while-revalidate window, in the
        background (RFC 5861 §3), once per key at a time."""
        if key in self._revalidating:
            return
        exchange = Exchange(
            url,
            key,
            "GET",
            [(k, v) for k, v in headers if k.lower() not in _NOT_FORWARDED],
            b"",
            (1, 1),
        )
        revalidate = cached if cached.stored.has_validators else None

        async def run() -> None:
            try:
                await self.services.engine.fetch(exchange, revalidate=revalidate)
            except (UpstreamError, StoreError, OSError) as exc:
                log.info("background revalidation of %s failed: %s", url.canonical, exc)
            finally:
                self._revalidating.pop(key, None)

        self._revalidating[key] = self.services.spawn(run())

    def may_serve(self, cached: CachedEntry, headers: Iterable[tuple[str, str]]) -> bool:
        """May this request have this copy (both fronts ask)?  Not a copy fetched with
        Authorization, nor a ``private`` one, for a request without the same credentials
        (:func:`~wwwproxy.http.policy.credential_check`, made once per copy)."""
        check = cached.memo.get("credentials")
        key = self.services.engine.credential_key
        if check is None:
            check = cached.memo["credentials"] = credential_check(
                cached.headers, cached.request_headers, key
            )
        return check.admits(headers, key)

    def action_for(
        self, url: URL, method: str, headers: Mapping[str, str], cached: CachedEntry | None
    ) -> Action:
        """What the policy says for this request and this copy (both fronts ask here).

        Offline, the fast front keeps the answer per memory copy and request head, for as long
        as the mode and the config object stay the same (``front._action``): offline
        :func:`~wwwproxy.http.policy.decide` reads nothing but the request's headers, the
        mode, the config and the copy (:func:`~wwwproxy.http.policy.timeless`)."""
        return self.services.decide(
            url,
            cached.stored if cached else None,
            method=method,
            directives=request_directives(headers.get("Cache-Control"), headers.get("Pragma")),
        )

    # --- answers -------------------------------------------------------------------------

    def _queued(self, request: web.Request, url: URL, key: str, body: bytes) -> QueuedRequest:
        return QueuedRequest(
            url=url.file,
            key=key,
            method=request.method,
            # not the browser's conditions or range: fetching the queue must give the whole
            # resource to serve offline, not a 304 about the browser's copy or a part of it
            headers=tuple(
                end_to_end(
                    (k, v)
                    for k, v in request.headers.items()
                    if k.lower() not in _NOT_FORWARDED and k.lower() not in CONDITIONAL_HEADERS
                )
            ),
            body=body,
            target=request.get(WIRE_TARGET),
        )

    def queue_refusal(self, request: web.Request, url: URL) -> Refusal | None:
        """Why a miss of this request is not queued (``dont_queue``, a browser's background
        request, a method ``queue_methods`` leaves out), or None."""
        config = self.config
        return queue_refusal(
            url,
            request.method,
            self.services.filters.verdict(url),
            methods=config.queue_methods,
            background=config.queue_background,
        )

    async def queue_request(
        self, request: web.Request, url: URL, key: str, body: bytes, reason: str | None = None
    ) -> web.Response:
        refusal = self.queue_refusal(request, url)
        if refusal is not None:
            endpoint = refusal.endpoint
            if endpoint is not None and endpoint.answer is not None and reason is None:
                return background_answer(endpoint.answer)
            return self.not_queued(url, refusal.pattern, reason, listed_in=refusal.listed_in)
        try:
            await asyncio.to_thread(self.services.queue.add, self._queued(request, url, key, body))
        except OSError as exc:  # a full disk: say so, once per request, without a traceback
            log.error("could not queue %s: %s", url.canonical, exc)
            return page_response(
                507,
                "Could not queue",
                f"<code>{html.escape(url.canonical)}</code> is not in the cache, and it could "
                f"not be queued for fetching: {html.escape(str(exc))}.",
                "Free some space on the cache's disk, then ask again.",
                links=[("/outgoing/", "The outgoing queue"), ("/control/", "The control page")],
            )
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

    def not_queued(
        self,
        url: URL,
        pattern: str | None,
        reason: str | None = None,
        *,
        listed_in: str | None = None,
    ) -> web.Response:
        """A miss kept out of the queue: by the filters (``dont_queue``; ``dont_cache`` and
        ``local_net``, whose fetch would record nothing to serve), as a browser's or system's
        background request (``queue_background``), or by its method (``queue_methods``)."""
        why = (
            f"The server could not be reached ({html.escape(reason)})"
            if reason
            else "wwwproxy is offline"
        )
        shown = f"<code>{html.escape(pattern or '')}</code>"
        if listed_in == "queue_methods":
            because = f"{shown} requests are not queued (<code>queue_methods</code>)"
        elif listed_in == "queue_background":
            because = (
                f"it is a browser's or system's own background request (it matches {shown} in "
                "the built-in list; <code>queue_background</code>)"
            )
        else:
            because = f"it matches {shown} in the proxy's filters"
        return page_response(
            503,
            "Not cached, not queued",
            f"<code>{html.escape(url.canonical)}</code> is not in the cache.",
            f"{why}, and it is not queued for fetching: {because}.",
            links=[("/control/", "The control page")],
            headers={"X-Cache": "BACKGROUND"} if listed_in == "queue_background" else None,
        )

    def blocked(self, request: web.Request, url: URL, pattern: str) -> web.Response:
        """A ``dont_get`` URL, answered at once and never fetched: an empty image, script or
        stylesheet for what a page embeds, else a short page saying why (``X-Cache: BLOCKED``
        in the answer and the access log)."""
        status = self.services.filters.status
        headers = {"Cache-Control": "no-store", "X-Cache": "BLOCKED"}
        kind = replacement_for(url, request.headers.get("Accept"))
        if kind is Replacement.PAGE and status != 204:
            return page_response(
                status,
                "Not fetched",
                f"<code>{html.escape(url.canonical)}</code> is not fetched: it matches "
                f"<code>{html.escape(pattern)}</code> in the proxy's <code>dont_get</code> "
                "list or blocklist.",
                headers=headers,
            )
        body = EMPTY_GIF if kind is Replacement.IMAGE else b""
        if status == 204:
            return web.Response(status=204, headers=headers)
        return web.Response(status=status, body=body, content_type=kind.value, headers=headers)

    def blocked_connect(self, request: web.Request) -> web.Response | None:
        """A CONNECT to a host ``dont_get`` takes whole is refused (403) before any tunnel or
        interception; None for the others (and for a bad target: the tunnel says why)."""
        try:
            host, port = parse_connect_target(request.raw_path)
        except ValueError:
            return None
        pattern = self.services.filters.blocks_connect(host, port)
        if pattern is None:
            return None
        return page_response(
            403,
            "Not fetched",
            f"The secure connection to <code>{html.escape(request.raw_path)}</code> is not made:"
            f" the host matches <code>{html.escape(pattern)}</code> in the proxy's "
            "<code>dont_get</code> list or blocklist.",
            headers={"X-Cache": "BLOCKED"},
        )

    async def serve_cached(
        self, request: web.Request, cached: CachedEntry, stale: str | None = None
    ) -> web.StreamResponse:
        replay = plan_replay(
            cached,
            request.method,
            request.headers,
            stale=stale,
            set_cookie=self.config.replay_set_cookie,
            max_decoded_size=self.config.max_decoded_size,
        )
        status, reason, headers = replay.status, replay.reason, replay.headers
        send_body, decoder = replay.send_body, replay.decoder
        modified = None  # offline reading: the page as changed by its modify_html rule
        rule = page_rule(self.config.modify_html, cached) if status != 304 else None
        if rule is not None:
            in_cache = functools.partial(cached_keys, self.services.store)
            modified = await asyncio.to_thread(modified_page, cached, rule, in_cache)
            if modified is not None:
                headers = modified_headers(headers, rule, "utf-8", len(modified))
                decoder = None
        covering = url_rule(self.config.modify_html, cached) if status != 304 else None
        if modified is None and covering is not None and covering.disable_scripts:
            # served as recorded (too large, not HTML, XHTML, SVG...): scripts stay off
            headers = [*headers, ("Content-Security-Policy", SCRIPTS_OFF_POLICY)]
        ranges = plan_range(
            replay, cached, request.method, request.headers, transformed=modified is not None
        )
        if ranges is not None:
            headers = ranges.apply(headers)
            if ranges.ranged:  # a 206 or 416 cut from the copy
                status, reason = ranges.status, ranges.reason
        response = ForwardedResponse(status=status, reason=reason)
        for name, value in sendable_headers(headers):
            response.headers.add(name, value)
        try:
            await response.prepare(request)
        except ConnectionError:
            return response  # the browser left while the copy was looked up
        if send_body and modified is not None:
            with contextlib.suppress(ConnectionError):
                await response.write(modified)
        elif send_body and ranges is not None and ranges.ranged:
            try:
                await write_pieces(response, cached, ranges.body, CHUNK)
            except ConnectionError:
                pass
            except (ValueError, OSError) as exc:  # as below: cut off, and seen to be
                log.warning("cached copy of %s cut off: %s", cached.target_uri, exc)
                if request.transport is not None:
                    request.transport.close()
                return response
        elif send_body:
            # from memory: all of it at once; from disk: one thread hop opens the copy and
            # reads its start (for most pages, all of it), then aiofiles reads the rest
            stream, chunk, rest = None, cached.body or b"", None
            try:
                if cached.body is None:
                    stream, chunk = await asyncio.to_thread(_open_and_read, cached)
                    rest = None if stream is None else read_chunks(stream, CHUNK)
                while chunk:
                    # decoded: a piece at a time, each written (as the browser reads) before
                    # the next is decoded, so a small bomb never fills memory
                    for piece in decoder.pieces(chunk) if decoder else (chunk,):
                        await response.write(piece)
                    chunk = b"" if rest is None else await anext(rest, b"")
                if decoder is not None:
                    decoder.end()
            except ConnectionError:
                pass
            except (ValueError, OSError) as exc:
                # a coded copy that does not decode or decodes past max_decoded_size, or a file
                # removed (purged) meanwhile: the answer is cut off, so the browser sees it
                # incomplete (its Content-Length, or no last chunk)
                log.warning("cached copy of %s cut off: %s", cached.target_uri, exc)
                if request.transport is not None:
                    request.transport.close()
                return response
            finally:
                if rest is not None:
                    await rest.aclose()
                if stream is not None:
                    stream.close()
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response


def _framing_refusal(request: web.BaseRequest) -> web.Response | None:
    """A request whose framing cannot be trusted, refused before anything else: an HTTP
    version other than 1.0 and 1.1 (505; none at all: 400), or a Transfer-Encoding (even an
    empty one) beside a Content-Length (400: one reader would see two requests where another
    sees one)."""
    if request.version not in ((1, 0), (1, 1)):
        # answered in HTTP/1.1 (aiohttp would echo the request's version in the status line,
        # which the client does not speak), then closed
        if request.version == (0, 9):  # no version at all: a malformed request line
            status, reason = 400, "Bad Request"
            body = b"The request line is not valid HTTP/1.x.\n"
        else:
            status, reason = 505, "HTTP Version Not Supported"
            body = b"This proxy speaks HTTP/1.0 and HTTP/1.1.\n"
        transport = request.transport
        if transport is not None and not transport.is_closing():
            transport.write(
                closing_answer(
                    status, reason, [("Content-Type", "text/plain"), ("X-Cache", "MISS")], body
                )
            )
        request.protocol.force_close()
        return web.Response(status=status)  # not sent: the connection is closed
    if "Transfer-Encoding" in request.headers and "Content-Length" in request.headers:
        return page_response(
            400, "Bad request", "Both Transfer-Encoding and Content-Length: refused."
        )
    return None


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
