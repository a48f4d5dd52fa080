"""The fast front: cache hits answered in microseconds, everything else handed to aiohttp.

aiohttp's server spends more on a request before any of ours runs than answering a cached small
page takes, which caps how many such pages a second it can serve.  This
:class:`asyncio.Protocol` reads each request head itself (with ``httptools``, the parser
uvicorn uses) and answers at once, with one write, a request that is a plain GET (no body, no
upgrade, not for the proxy itself) whose copy is in the memory cache and that the policy says
to serve (a copy not yet in memory is read into it by a worker thread first, as aiohttp's path
would).  Anything else, from the first byte of that request on, is handed to aiohttp's request
handler on the same connection, so every rule of the aiohttp path (malformed and smuggled
requests refused, CONNECT, command pages, misses, revalidation, non-GET, multipart ranges,
WebSockets) holds unchanged: the fast path only ever answers what the aiohttp path would have
answered the same way (a single range and a 416 too).  The heads are cut and read without
sockets (:mod:`.request_head`); whether a request is answered here, with what bytes, or why
aiohttp answers it (:class:`~.replay.ToAiohttp`) is :func:`~.replay.plan_fast_answer`'s.  This
module carries that out on the connection.

What a memory hit repeats is kept, so that a hit costs little more than its write:
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
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..archive.memory import MAX_OBJECT
from ..http.policy import Action, timeless
from ..url import URL, InvalidURL, canonicalize
from .limits import ConnectionCaps, refusal
from .replay import ToAiohttp, allowed_address, plan_fast_answer
from .request_head import MAX_HEAD, HeadReader, HeadStream, ParsedHead, Step

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
        self.server = listener.server
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        #: the transport as counted by the connection caps, until it ends or is handed on
        self.counted: asyncio.BaseTransport | None = None
        #: what the browser sent and was not answered yet, cut into heads
        self.stream = HeadStream()
        #: reads the heads not kept by their bytes (made for the first of them)
        self.reader: HeadReader | None = None
        self.peer: str | None = None
        self.busy = False  # a copy is being looked up on disk for the first request
        self.pending: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.active = 0.0  # loop time of the last request answered (or of the connection)
        self.allowed = False  # is the client allowed (by allowed_for, the config's networks)
        self.allowed_for: object = None
        #: fires HEAD_TIMEOUT after a partial head was first seen, unless it completed
        self.head_timer: asyncio.TimerHandle | None = None
        self.paused = False  # reading paused: too much pipelined while a copy is looked up
        self.refusing = False  # over a connection cap: answered 503, input dropped until closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else None
        config = self.server.services.config
        refused = self.listener.caps.admit(
            transport,
            self.peer,
            config.max_connections,
            config.max_client_connections,
        )
        if refused is not None:
            self._refuse(transport, refusal(refused))  # type: ignore[arg-type]
            return
        self.counted = transport
        self.listener.connections.add(self)
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
        stream = self.stream
        if not self.busy and self.transport is not None and stream.sole_head(data):
            # the usual: one whole head and nothing after it, answered without buffering
            try:
                why = self._take(data)
            except Exception:  # noqa: BLE001 (never lose the request: aiohttp answers it)
                log.exception("fast front: handing the request to aiohttp")
                why = ToAiohttp.FAILED
            if why is None and not self.busy:
                return  # answered
            stream.receive(data)  # what aiohttp is handed, or the disk lookup takes off
            stream.head = data
            if why is not None:
                self._hand_off(why)
            return
        stream.receive(data)
        if not self.busy:
            try:
                self._process()
            except Exception:  # noqa: BLE001 (never lose the request: aiohttp answers it)
                log.exception("fast front: handing the request to aiohttp")
                self._hand_off(ToAiohttp.FAILED)
        elif len(stream.buffer) > MAX_HEAD and not self.paused and self.transport is not None:
            # a browser pipelining while a copy is read from disk: hold the rest in the
            # socket, not in memory, until the lookup is done
            self.paused = True
            self.transport.pause_reading()

    def _head_done(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_late(self) -> None:
        """The partial head did not complete in time: 408 (no answer is being written: the
        fast front writes each answer whole), and close."""
        self.head_timer = None
        if self.transport is None or self.busy:
            return
        answer = self.stream.late()
        if answer is None:
            return
        transport, self.transport = self.transport, None
        transport.write(answer)
        transport.close()

    def _process(self) -> None:
        """Answer the complete request heads in the buffer, in order, until one is not ours."""
        stream = self.stream
        while self.transport is not None and not self.busy:
            step = stream.next()
            if step is Step.HEAD:
                if self.head_timer is not None:
                    self._head_done()  # this head is whole; a partial one after it starts anew
                why = self._take(stream.head)
                if why is not None:
                    self._hand_off(why)
                    return
                if not self.busy:
                    stream.taken()
                continue
            if step is Step.PARTIAL:
                if self.head_timer is None:
                    self.head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_late)
            elif step is Step.HAND_OFF:
                assert stream.why is not None
                self._hand_off(stream.why)
            elif step is Step.CLOSE:
                self._finish_eof()
            return  # Step.WAIT: all answered (the usual way out)

    def _take(self, head: bytes) -> ToAiohttp | None:
        """Answer one whole request head from memory; or start looking for its copy on disk
        (``busy``: the head stays in the buffer until that is done); or say why aiohttp's
        path answers it."""
        request = self._parse(head)
        if not isinstance(request, ParsedHead):
            return request
        url = self.listener.route(request.target)
        if url is None:
            return ToAiohttp.TARGET
        services = self.server.services
        cached = services.store.lookup_hot(
            url, url.file, request.header_list, prefer_good=services.prefers_good()
        )
        if cached is None:
            # not in memory: look on disk in a worker thread (what aiohttp's path would
            # do), and go on with this connection when that is done
            self.busy = True
            self.pending = asyncio.ensure_future(self._from_disk(request, url))
            return None
        return self._answer(request, url, cached)

    async def _from_disk(self, request: ParsedHead, url: URL) -> None:
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
            why = ToAiohttp.NOT_CACHED if cached is None else self._answer(request, url, cached)
            if why is not None:
                self._hand_off(why)
                return
            self.stream.taken()
            self._process()
        except Exception:  # noqa: BLE001 (as in data_received)
            log.exception("fast front: handing the request to aiohttp")
            self._hand_off(ToAiohttp.FAILED)

    def _good(self) -> bool:
        return self.server.services.prefers_good()

    def eof_received(self) -> bool | None:
        if self.refusing:
            return None  # the refused browser is done: close
        self.stream.receive_eof()
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
        self.listener.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        self._head_done()
        if self.pending is not None:
            self.pending.cancel()

    # --- the fast answer -------------------------------------------------------------------

    def _parse(self, head: bytes) -> ParsedHead | ToAiohttp:
        """The head as the fast path reads it (:meth:`HeadReader.read`), from an allowed
        client; kept by its bytes.  (Whether the URL is one the fast path answers is
        :meth:`FrontListener.route`'s.)"""
        networks = self.server.services.config.allowed_clients
        if self.allowed_for is not networks:  # once per connection (and config)
            self.allowed = self.peer is not None and allowed_address(self.peer, networks)
            self.allowed_for = networks
        if not self.allowed:
            return ToAiohttp.CLIENT
        heads = self.listener.heads
        kept = heads.get(head)
        if kept is not None:
            return kept
        if self.reader is None:
            self.reader = HeadReader()
        request = self.reader.read(head)
        if isinstance(request, ParsedHead) and len(head) <= KEPT_HEAD:
            listener = self.listener
            if listener.head_bytes + len(head) > HEAD_BYTES_KEPT:
                heads.clear()
                listener.head_bytes = 0
            request.serial = next(_SERIALS)
            heads[head] = request
            listener.head_bytes += len(head)
        return request

    def _answer(self, request: ParsedHead, url: URL, cached: CachedEntry) -> ToAiohttp | None:
        """Answer from ``cached`` as :func:`~.replay.plan_fast_answer` plans; or say why
        aiohttp's path answers instead."""
        server = self.server
        transport = self.transport
        assert transport is not None
        now = time.time()  # the one clock read of the answer (Date, Age, the access log)
        answer = plan_fast_answer(
            request,
            cached,
            server.services.config,
            admitted=server.may_serve(cached, request.header_list),
            action=_action(server, request, url, cached),
            backlog=transport.get_write_buffer_size(),
            pipelined=len(self.stream.buffer) > len(self.stream.head),
            now=now,
        )
        if isinstance(answer, ToAiohttp):
            return answer
        if answer.body:
            transport.writelines((answer.head, answer.body))  # one writev, the body not copied
        else:
            transport.write(answer.head)
        server.access_log.add(  # the line aiohttp's path writes (accesslog.AccessLogger)
            self.peer,
            "GET",
            request.target,
            answer.status,
            answer.length,
            time.time() - now,
            "HIT",
            now,
        )
        self.listener.answered += 1
        self.active = self.loop.time()  # what _arm notes (its timer is set already)
        if self.timer is None:
            self._arm()
        if answer.close:
            transport.close()
            self.transport = None
        return None

    # --- everything else ------------------------------------------------------------------

    def _hand_off(self, why: ToAiohttp) -> None:
        """The connection goes to aiohttp from this request on: a new request handler, as for
        a new connection, fed what was read and not answered."""
        listener = self.listener
        listener.handed[why] += 1
        transport, self.transport = self.transport, None
        listener.connections.discard(self)
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
        handler: Any = listener.handler_factory()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        data = self.stream.drain()
        if data:
            handler.data_received(data)
        if self.stream.ended:
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
        #: connections handed to aiohttp, by why
        self.handed: Counter[ToAiohttp] = Counter()
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
