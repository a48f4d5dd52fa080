"""The fast front: cache hits answered in microseconds, everything else handed to aiohttp.

aiohttp's server spends about 100 µs on a request before any of ours runs, which caps a cached
1 KB page far below Squid.  This :class:`asyncio.Protocol` reads each request head itself (with
``httptools``, the parser uvicorn uses) and answers at once, with one write, a request that is
a plain GET (no body, no upgrade, not for the proxy itself) whose copy is in the memory cache
and that the policy says to serve (a copy not yet in memory is read into it by a worker thread
first, as aiohttp's path would).  Anything else, from the first byte of that request on, is
handed to aiohttp's request handler on the same connection, so every rule of the aiohttp path
(malformed and smuggled requests refused, CONNECT, command pages, misses, revalidation,
non-GET, ranges, WebSockets) holds unchanged: the fast path only ever answers what the aiohttp
path would have answered the same way.

What a memory hit repeats is kept (it costs about 29 µs of CPU where Squid spends about 39):
request heads as parsed, by their bytes; offline, the policy's decision per copy and head;
the answer head and a small body joined, once a second.  Each is tested equal to making it
anew.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

import httptools
from multidict import CIMultiDict

from ..archive.memory import MAX_OBJECT
from ..http.headers import get_header
from ..http.policy import Action, timeless
from ..url import URL, InvalidURL, canonicalize
from .fast_heads import (
    JOINED_BODY,
    HeadReader,
    ParsedHead,
    RenderedHead,
    accepts,
    connection_line,
    http_now,
)
from .limits import ConnectionCaps, refusal
from .replay import allowed_address, plan_replay, sendable_headers, url_rule

if TYPE_CHECKING:
    from aiohttp import web

    from ..archive.store import CachedEntry, Store
    from ..recording.services import Services
    from .server import ProxyServer

__all__ = ["FastFront", "FrontListener"]

log = logging.getLogger("wwwproxy.proxy")

#: seconds a connection may stay without completing a request (aiohttp's keep-alive timeout)
IDLE_TIMEOUT = 75.0
#: seconds to complete a request head once part of it came: a connection that sends its head
#: byte by byte, or stops in the middle of it (slowloris), is answered 408 and closed.  The
#: same bound is aiohttp's keep-alive timeout for the connections handed to it (app.py)
HEAD_TIMEOUT = 20.0
#: seconds a connection refused by a cap is kept to let the browser read the 503 (its input is
#: dropped meanwhile, and it no longer counts against the caps)
REFUSED_LINGER = 1.0
MAX_BUFFERED = 4 * 1024 * 1024  # answers waiting for a slow browser before aiohttp takes over
MAX_HEAD = 16 * 1024  # as aiohttp's max_line_size/max_field_size: longer heads go to aiohttp
_FAST_START = b"GET http://"  # how every request the fast path answers begins


#: targets whose route (:meth:`FrontListener.route`) is remembered, per configuration
ROUTES_KEPT = 4096
#: request heads remembered as parsed (:meth:`FastFront._parse`), each up to KEPT_HEAD bytes,
#: all together up to HEAD_BYTES_KEPT (then forgotten at once): a browser asks for the same
#: page with the same head, and parsing it costs more than hashing it.  Parsed, a head takes
#: about 7 times its size (1 MiB of 2 KiB heads of 40 headers each: 7 MiB)
HEAD_BYTES_KEPT = 1024 * 1024
KEPT_HEAD = 2048
#: decisions kept per memory copy (one per kept request head asking for it), when the
#: mode's decisions do not depend on the moment (:func:`~wwwproxy.http.policy.timeless`)
ACTIONS_KEPT = 16
_SERIALS = itertools.count(1)  # ParsedHead.serial of the heads kept
#: what :meth:`FastFront._take` did with a request head
_ANSWERED, _PENDING, _NOT_OURS = 0, 1, 2


def _route(target: str, services: Services) -> URL | None:
    """The canonical URL of an absolute-form target the fast path may answer from the cache:
    an http:// URL, not naming the proxy itself, that no ``dont_get``/``dont_cache``/
    ``local_net`` pattern covers (those are never cache hits: aiohttp's path); else None."""
    try:
        url = canonicalize(target, local_host=services.local_host)
    except InvalidURL:
        return None
    if url.proto != "http" or services.is_own(url):
        return None
    if not services.filters.verdict(url).cache:
        return None
    return url


def _read_copy(
    store: Store, request: ParsedHead, url: URL, prefer_good: bool
) -> CachedEntry | None:
    """The copy for ``request`` from disk, with its body when that is at most
    :data:`~wwwproxy.archive.memory.MAX_OBJECT` (what memory would hold): read here, in
    the worker thread, and sent with one write, it spares the aiohttp path's thread hops
    per chunk (the memory cache keeps it too, when it is on and has room)."""
    entry = store.lookup(url, url.file, "GET", b"", request.header_list, prefer_good=prefer_good)
    if entry is not None and entry.body is None and entry.payload_length <= MAX_OBJECT:
        # one read and one inflate of the member (streaming it cost a read, an inflate and
        # a copy per 64 KiB chunk); a member not what the record said raises, and aiohttp's
        # path reports it
        entry = dataclasses.replace(entry, body=entry.read_body())
    return entry


def _action(server: ProxyServer, request: ParsedHead, url: URL, cached: CachedEntry) -> Action:
    """:meth:`ProxyServer.action_for` this request and this memory copy, kept with the copy
    per request head while the mode's decisions do not depend on the moment (offline: every
    hit asks, and the same heads come again); asked anew in another mode or configuration."""
    services = server.services
    mode = services.mode
    serial = request.serial
    if not serial or not timeless(mode):  # a head not kept never comes again as itself
        return server.action_for(url, "GET", request.headers, cached)
    config = services.config
    kept = cached.memo.get("front.actions")
    if kept is None or kept[0] is not mode or kept[1] is not config:
        kept = cached.memo["front.actions"] = (mode, config, {})
    actions: dict[int, Action] = kept[2]
    action = actions.get(serial)
    if action is None:
        if len(actions) >= ACTIONS_KEPT:
            actions.clear()
        action = actions[serial] = server.action_for(url, "GET", request.headers, cached)
    return action


class FastFront(asyncio.Protocol):
    """One browser connection, until its first request the fast path does not take."""

    def __init__(self, listener: FrontListener) -> None:
        self.listener = listener
        server, handler_factory, open_set = (
            listener.server,
            listener.handler_factory,
            listener.connections,
        )
        self.server = server
        self.handler_factory = handler_factory
        self.open_set = open_set
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        #: the transport as counted by the connection caps, until it ends or is handed on
        self.counted: asyncio.BaseTransport | None = None
        self.buffer = bytearray()
        self.peer: str | None = None
        self.busy = False  # a copy is being looked up on disk for the first request
        self.eof = False
        self.pending: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.active = 0.0  # loop time of the last request answered (or of the connection)
        self.allowed = False  # is the client allowed (by allowed_for, the config's networks)
        self.allowed_for: object = None
        self.parser: httptools.HttpRequestParser | None = None
        self.parsed = HeadReader()
        #: fires HEAD_TIMEOUT after a partial head was first seen, unless it completed
        self.head_timer: asyncio.TimerHandle | None = None
        self.paused = False  # reading paused: too much pipelined while a copy is looked up
        self.refusing = False  # over a connection cap: answered 503, input dropped until closed
        #: where the search for the end of the head resumes (a head sent byte by byte is not
        #: searched from its start on every byte)
        self.scanned = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else None
        config = self.server.services.config
        refused = self.listener.caps.admit(
            transport,  # type: ignore[arg-type]
            self.peer,
            config.max_connections,
            config.max_client_connections,
        )
        if refused is not None:
            self._refuse(transport, refusal(refused))  # type: ignore[arg-type]
            return
        self.counted = transport
        self.open_set.add(self)
        self._arm()

    def _refuse(self, transport: asyncio.Transport, answer: bytes) -> None:
        """Answer a connection over a cap, and close it once the browser has read that: what
        it sent meanwhile is read and dropped (closing with unread input would reset the
        connection, and the browser might never see the answer), for at most REFUSED_LINGER."""
        self.refusing = True
        try:
            transport.write(answer)
            if transport.can_write_eof():
                transport.write_eof()
        except (OSError, RuntimeError):  # gone already (reset): nothing to answer
            transport.abort()
            return
        self.timer = asyncio.get_running_loop().call_later(REFUSED_LINGER, transport.abort)

    def _arm(self) -> None:
        """Note activity for the idle timer: a connection that completes no request in time is
        closed (one that sends a head byte by byte does not hold a socket for ever).  The timer
        is not moved on every request (that costs more than the rest of a hit's bookkeeping):
        when it fires early it sleeps again for what is left."""
        loop = self.loop
        self.active = loop.time()
        if self.timer is None:
            self.timer = loop.call_later(IDLE_TIMEOUT, self._idle)

    def _idle(self) -> None:
        self.timer = None
        if self.transport is None or self.busy:
            return
        loop = asyncio.get_running_loop()
        left = self.active + IDLE_TIMEOUT - loop.time()
        if left > 0:
            self.timer = loop.call_later(left, self._idle)
            return
        self.transport.close()
        self.transport = None

    def close(self) -> None:
        """Shutdown: a connection still here is idle between requests (answers are whole)."""
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.refusing:
            return
        if (
            not self.buffer
            and not self.busy
            and self.transport is not None
            and 0 <= data.find(b"\r\n\r\n") == len(data) - 4
        ):
            # the usual: one whole head and nothing after it, answered without buffering
            try:
                taken = self._take(data)
            except Exception:  # noqa: BLE001 (never lose the request: aiohttp answers it)
                log.exception("fast front: handing the request to aiohttp")
                taken = _NOT_OURS
            if taken == _ANSWERED:
                return
            self.buffer += data  # what aiohttp is handed, or the disk lookup takes off
            if taken == _NOT_OURS:
                self._hand_off()
            return
        self.buffer += data
        if not self.busy:
            try:
                self._process()
            except Exception:  # noqa: BLE001 (never lose the request: aiohttp answers it)
                log.exception("fast front: handing the request to aiohttp")
                self._hand_off()
        elif len(self.buffer) > MAX_HEAD and not self.paused and self.transport is not None:
            # a browser pipelining while a copy is read from disk: hold the rest in the
            # socket, not in memory, until the lookup is done
            self.paused = True
            self.transport.pause_reading()

    def _head_started(self) -> None:
        """A head is in the buffer but not whole yet: it has HEAD_TIMEOUT to complete."""
        if self.head_timer is None:
            loop = asyncio.get_running_loop()
            self.head_timer = loop.call_later(HEAD_TIMEOUT, self._head_late)

    def _head_done(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_late(self) -> None:
        """The partial head did not complete in time: 408 (no answer is being written: the
        fast front writes each answer whole), and close."""
        self.head_timer = None
        if self.transport is None or self.busy or not self.buffer:
            return
        transport, self.transport = self.transport, None
        transport.write(
            b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        transport.close()

    def _process(self) -> None:
        """Answer the complete request heads in the buffer, in order, until one is not ours."""
        while self.transport is not None and not self.busy:
            if not self.buffer:  # all answered (the usual way out)
                if self.eof:
                    self._finish_eof()
                return
            end = self.buffer.find(b"\r\n\r\n", self.scanned)
            if end < 0:
                if (
                    len(self.buffer) > MAX_HEAD
                    or self.buffer.find(b"\n\n", self.scanned) >= 0
                    or not _FAST_START.startswith(self.buffer[:11])
                ):
                    # too long, bare line feeds, or never a fast request: aiohttp judges it
                    # as it comes (garbage at once; a head sent slowly in its keep-alive time)
                    self._hand_off()
                elif self.eof:
                    self._finish_eof()
                elif self.buffer:
                    self.scanned = len(self.buffer) - 3 if len(self.buffer) > 3 else 0
                    self._head_started()
                return
            self.scanned = 0
            if self.head_timer is not None:
                self._head_done()  # this head is whole; a partial one after it starts anew
            taken = self._take(bytes(self.buffer[: end + 4]))
            if taken == _NOT_OURS:
                self._hand_off()
                return
            if taken == _PENDING:
                return
            del self.buffer[: end + 4]

    def _take(self, head: bytes) -> int:
        """Answer one whole request head from memory (_ANSWERED); or start looking for its
        copy on disk (_PENDING: the head stays in the buffer until that is done); or leave
        it to aiohttp (_NOT_OURS)."""
        request = self._parse(head)
        if request is None:
            return _NOT_OURS
        url = self.listener.route(request.target)
        if url is None:
            return _NOT_OURS
        services = self.server.services
        cached = services.store.lookup_hot(
            url, url.file, request.header_list, prefer_good=services.config.keep_good_copy
        )
        if cached is None:
            # not in memory: look on disk in a worker thread (what aiohttp's path would
            # do), and go on with this connection when that is done
            self.busy = True
            self.pending = asyncio.ensure_future(self._from_disk(request, url, len(head)))
            return _PENDING
        return _ANSWERED if self._answer(request, url, cached) else _NOT_OURS

    async def _from_disk(self, request: ParsedHead, url: URL, length: int) -> None:
        store = self.server.services.store
        try:
            cached = await asyncio.to_thread(_read_copy, store, request, url, self._good())
        except Exception:  # noqa: BLE001 (aiohttp's path reports what is wrong with the copy)
            cached = None
        self.busy = False
        if self.transport is None:
            return
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        try:
            if cached is None or not self._answer(request, url, cached):
                self._hand_off()
                return
            del self.buffer[:length]
            self._process()
        except Exception:  # noqa: BLE001 (as in data_received)
            log.exception("fast front: handing the request to aiohttp")
            self._hand_off()

    def _good(self) -> bool:
        return self.server.services.config.keep_good_copy

    def eof_received(self) -> bool | None:
        if self.refusing:
            return None  # the refused browser is done: close
        self.eof = True
        if self.busy:
            return True  # the answer being looked up is still sent
        # nothing, or part of a head, that can never be answered: closed, as aiohttp closes
        # at an end of input (handed to it, the connection would wait for the rest)
        return None

    def _finish_eof(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted is not None:
            self.listener.caps.release(self.counted, self.peer)
            self.counted = None
        self.transport = None
        self.open_set.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        self._head_done()
        if self.pending is not None:
            self.pending.cancel()

    # --- the fast answer -------------------------------------------------------------------

    def _parse(self, head: bytes) -> ParsedHead | None:
        """A request the fast path may answer: a plain GET of an http:// URL, no body, no
        upgrade, from an allowed client, not looping; else None.  (Whether the URL is one
        the fast path answers is :meth:`FrontListener.route`'s.)"""
        networks = self.server.services.config.allowed_clients
        if self.allowed_for is not networks:  # once per connection (and config)
            self.allowed = self.peer is not None and allowed_address(self.peer, networks)
            self.allowed_for = networks
        if not self.allowed:
            return None
        heads = self.listener.heads
        request = heads.get(head)
        if request is not None:
            return request
        request = self._parse_new(head)
        if request is not None and len(head) <= KEPT_HEAD:
            listener = self.listener
            if listener.head_bytes + len(head) > HEAD_BYTES_KEPT:
                heads.clear()
                listener.head_bytes = 0
            request.serial = next(_SERIALS)
            heads[head] = request
            listener.head_bytes += len(head)
        return request

    def _parse_new(self, head: bytes) -> ParsedHead | None:
        """:meth:`_parse` of a head not seen yet: httptools reads it."""
        if not head.startswith(b"GET http://") or len(head) > MAX_HEAD:
            return None
        # one parser per connection, each head fed from its start: a head that fails, or
        # one that ends the connection (Connection: close, HTTP/1.0), is its last one here
        if self.parser is None:
            self.parsed = HeadReader()
            self.parser = httptools.HttpRequestParser(self.parsed)
        parsed, parser = self.parsed, self.parser
        try:
            parser.feed_data(head)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            # malformed, or an upgrade (httptools raises for that, and it is not one of its
            # errors): aiohttp judges it, and a hostile head is no traceback in the log
            return None
        if not parsed.complete or parsed.slow or parsed.looped or parser.should_upgrade():
            return None
        version = parser.get_http_version()
        if version != "1.1" and version != "1.0":
            return None  # "HTTP/2.0" in a text head: not an answer this path gives
        return ParsedHead(
            parsed.url.decode("latin-1"),
            CIMultiDict(parsed.headers),
            parsed.headers,
            version,
            parser.should_keep_alive(),
            parsed.conditional,
        )

    def _answer(self, request: ParsedHead, url: URL, cached: CachedEntry) -> bool:
        """Answer from ``cached`` (in memory) if the policy serves it; False hands it on."""
        if cached.body is None:
            return False  # too large for memory: aiohttp's path streams it from disk
        server = self.server
        services = server.services
        config = services.config
        if config.modify_html and url_rule(config.modify_html, cached) is not None:
            return False  # a URL modify_html covers (changed, or its scripts off): aiohttp's
        transport = self.transport
        assert transport is not None
        if transport.get_write_buffer_size() > MAX_BUFFERED:
            return False  # a browser that does not read: aiohttp's flow control takes over
        if not server.may_serve(cached, request.header_list):
            return False  # a copy for other credentials: aiohttp's path fetches or queues
        if config.replay_set_cookie and get_header(cached.headers, "Set-Cookie"):
            return False  # the heads made here leave Set-Cookie out: aiohttp's path sends it
        if _action(server, request, url, cached) is not Action.SERVE:
            return False
        now = time.time()  # the one clock read of the answer (Date, Age, the access log)
        if request.conditional:
            head, status, send_body = self._planned_head(request, cached)
            if head is None:
                return False
            data: bytes | None = None
        else:
            rendered = RenderedHead.of(cached)
            if rendered.coding is not None and not accepts(
                request.headers.get("Accept-Encoding"), rendered.coding
            ):
                return False  # decoding on the way out streams: the aiohttp path does it
            status, send_body = rendered.status, True
            if request.keep_alive and request.version == "1.1":
                data = rendered.usual(now)
                head = rendered.kept_alive
            else:
                data, head = None, rendered.head(request.version, request.keep_alive, now)
        body = cached.body if send_body else b""
        if data is not None:
            transport.write(data)
        elif len(body) > JOINED_BODY:
            transport.writelines((head, body))  # one writev, the body not copied
        else:
            transport.write(head + body)
        server.access_log.add(  # the line aiohttp's path writes (accesslog.AccessLogger)
            self.peer, "GET", request.target, status, len(body), time.time() - now, "HIT", now
        )
        self.listener.answered += 1
        self.active = self.loop.time()  # what _arm notes (its timer is set already)
        if self.timer is None:
            self._arm()
        if not request.keep_alive:
            transport.close()
            self.transport = None
        return True

    @staticmethod
    def _planned_head(request: ParsedHead, cached: CachedEntry) -> tuple[bytes | None, int, bool]:
        """The head for a request with the browser's own conditions (maybe a 304), planned
        in full as the aiohttp path does; None when the answer must be decoded on the way."""
        replay = plan_replay(cached, "GET", request.headers)
        if replay.decoder is not None:
            return None, 0, False
        version = request.version
        out = [f"HTTP/{version} {replay.status} {replay.reason}".encode("latin-1")]
        for name, value in sendable_headers(replay.headers):
            out.append(f"{name}: {value}".encode())
        if not any(name.lower() == "date" for name, _ in replay.headers):
            out.append(b"Date: " + http_now())
        head = b"".join(line + b"\r\n" for line in out)
        return (
            head + connection_line(version, request.keep_alive) + b"\r\n",
            replay.status,
            replay.send_body,
        )

    # --- everything else ------------------------------------------------------------------

    def _hand_off(self) -> None:
        """The connection goes to aiohttp from this request on: a new request handler, as for
        a new connection, fed what was read and not answered."""
        transport, self.transport = self.transport, None
        self.open_set.discard(self)
        self.counted = None  # still counted by the caps, until aiohttp closes it
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self._head_done()  # aiohttp's keep-alive timeout bounds its heads (app.py)
        if transport is None or transport.is_closing():
            return
        if self.paused:
            self.paused = False
            transport.resume_reading()
        handler: Any = self.handler_factory()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        if self.buffer:
            data, self.buffer = bytes(self.buffer), bytearray()
            handler.data_received(data)
        if self.eof:
            # the browser has sent all it will: aiohttp answers what came whole and then
            # closes (it never saw the end of input, and would wait for more)
            handler.close()


class FrontListener:
    """The listening socket of the fast front, and its connections (for shutdown)."""

    def __init__(self, server: ProxyServer, handler_factory: web.Server) -> None:
        self.server = server
        self.handler_factory = handler_factory
        self.connections: set[FastFront] = set()
        #: open connections by client and in all (those handed to aiohttp too)
        self.caps = ConnectionCaps()
        self.listener: asyncio.Server | None = None
        #: requests the fast path answered (the rest went to aiohttp)
        self.answered = 0
        #: request head -> how it was parsed, for the heads the fast path may answer
        #: (:meth:`FastFront._parse`; a function of the head's bytes alone)
        self.heads: dict[bytes, ParsedHead] = {}
        self.head_bytes = 0  # the bytes of the heads in ``heads``
        #: target -> its canonical URL if the fast path may answer it (:func:`_route`),
        #: for the configuration in ``_routes_for`` (a reload, a new port: asked again)
        self._routes: dict[str, URL | None] = {}
        self._routes_for: tuple[object, object, str] | None = None

    def route(self, target: str) -> URL | None:
        """:func:`_route`, remembered per target: the same pages are asked again, and
        canonicalizing, the proxy's own names and the filters cost more than the rest of
        a memory hit's checks together."""
        services = self.server.services
        config, filters, local_host = services.config, services.filters, services.local_host
        routes, was = self._routes, self._routes_for
        if was is None or was[0] is not config or was[1] is not filters or was[2] != local_host:
            routes.clear()
            self._routes_for = (config, filters, local_host)
        try:
            return routes[target]
        except KeyError:
            pass
        if len(routes) >= ROUTES_KEPT:
            routes.clear()
        url = routes[target] = _route(target, services)
        return url

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (``port`` 0: any free one)."""
        loop = asyncio.get_running_loop()
        self.listener = await loop.create_server(
            lambda: FastFront(self),
            host,
            port,
            reuse_address=True,
        )
        return self.listener.sockets[0].getsockname()[1]

    @property
    def addresses(self) -> list[Any]:
        return [s.getsockname() for s in self.listener.sockets] if self.listener else []

    def close(self) -> None:
        """Stop listening and close the idle fast connections (those handed to aiohttp are
        its to drain)."""
        if self.listener is not None:
            self.listener.close()
        for connection in list(self.connections):
            connection.close()
