"""The one fetch-and-record engine: every request that goes upstream goes through here.

The proxy (with a browser waiting), ``wwwproxy fetch``, ``/refresh/``, monitors and the queue
all call :meth:`Engine.fetch`.  It sends the request, and tees the body to the browser (a
:class:`Sink`, when there is one) and into the archive at once; a 304 to a revalidation becomes
a revisit of the stored copy; a browser that leaves does not stop the recording
(``finish_on_disconnect``).  What to do (fetch, revalidate, serve, queue) is decided by
:mod:`wwwproxy.http.policy`, never here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import aiohttp

from ..archive.store import CachedEntry, Recorder, Store, StoreError
from ..archive.warc import WARCWriteError
from ..config import Config
from ..fsutil import fsync_dir
from ..http.headers import Headers, add_via, censor, end_to_end, get_header, without_controls
from ..http.invalidation import invalidated_urls
from ..http.policy import (
    merge_not_modified,
    recorded_request_headers,
    revalidation_headers,
    without_conditionals,
)
from ..url import URL
from .tee import (
    BodyEnded,
    Chunk,
    Client,
    Command,
    Drop,
    End,
    Event,
    Finish,
    GoOn,
    Read,
    Record,
    Recorded,
    Send,
    Started,
    Tee,
    UpstreamFailed,
    Wrote,
)
from .upstream import (
    DIRECT,
    ProxySettings,
    UpstreamError,
    UpstreamTimeouts,
    describe_error,
    new_session,
    open_upstream,
)

__all__ = ["PSEUDONYM", "Engine", "Exchange", "Outcome", "Sink", "credential_key"]

log = logging.getLogger("wwwproxy.recording")

PSEUDONYM = "wwwproxy"
CHUNK = 64 * 1024
#: what the archive cannot hold or write: the answer still reaches the browser
RECORDING_ERRORS = (StoreError, WARCWriteError, ValueError, OSError)
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
REPORT_EVERY = 60.0  # seconds between two log lines about a full disk
#: the cache's secret for the digests of credentials (:func:`credential_key`)
CREDENTIAL_KEY_FILE = "credentials.key"
_DEFAULTS = Config()


def credential_key(root: Path) -> bytes:
    """The cache's secret key for the digests that stand for Cookie and Authorization in the
    archive (:func:`wwwproxy.http.policy.recorded_request_headers`), made on first use (mode
    0600; linked into place, so two processes starting at once agree on one key).  Losing it
    only means copies fetched with credentials are fetched again."""
    path = root / CREDENTIAL_KEY_FILE
    try:
        key = path.read_bytes()
    except OSError:  # none yet (or not readable: making one fails too, below)
        key = b""
    if len(key) >= 32:
        return key
    tmp = root / f".{CREDENTIAL_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
                f.flush()
                os.fsync(f.fileno())
            if key:  # a short (damaged) key is replaced
                os.replace(tmp, path)
            else:
                # another process may have made it first: its key is the one
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(root)
        return path.read_bytes()
    except OSError as exc:
        # a full disk or a read-only cache must not stop the proxy: a key for this run only
        # (what it records with credentials is fetched again after a restart)
        log.warning("cannot keep the credentials key %s (%s): using one for this run", path, exc)
        return secrets.token_bytes(32)


def disk_full(exc: BaseException | None) -> bool:
    """Is ``exc`` (or what caused it) a full disk or an exhausted quota?"""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class NotRecordedLog:
    """The log lines of exchanges that could not be recorded: one each, but for a full disk,
    which would fail every exchange alike: one line per burst (at most one a minute, saying
    how many were not recorded since the last)."""

    def __init__(self, every: float = REPORT_EVERY) -> None:
        self.every = every
        self._quiet_until = float("-inf")
        self._since = 0

    def report(self, what: str, exc: BaseException) -> None:
        if not disk_full(exc):
            log.error("%s was not recorded: %s", what, exc)
            return
        now = time.monotonic()
        if now < self._quiet_until:
            self._since += 1
            return
        since = f"; {self._since} more not recorded since the last line" if self._since else ""
        self._since, self._quiet_until = 0, now + self.every
        log.error(
            "recording stopped: the cache's disk is full (%s); pages are still relayed and "
            "served, and recording resumes once there is space%s",
            exc,
            since,
        )


@dataclass
class Exchange:
    """One request to send upstream, as the archive will record it."""

    url: URL
    key: str  # the archive key (the URL's file string, or a non-GET key)
    method: str = "GET"
    #: end-to-end request headers, without Host and Content-Length (aiohttp writes them)
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    #: the HTTP version the request came with, for ``Via``
    version: tuple[int, int] = (1, 1)
    #: False: relayed but never written to the archive (``dont_cache``, ``local_net``)
    record: bool = True
    #: a body up to this many bytes comes back in the :class:`Outcome`, as recorded (the
    #: crawler follows a page's links without reading it again from the archive)
    keep_body: int = 0
    #: the path and query to send, as the browser (or the page, or the queued request) spelled
    #: them (:func:`~wwwproxy.url.wire.wire_target`): what the origin is sent and the archived
    #: request's line holds; None: the canonical URL's
    target: str | None = None


class Sink(Protocol):
    """Where a relayed answer goes while it is recorded (the browser's connection)."""

    async def start(
        self,
        status: int,
        reason: str,
        headers: Headers,
        version: tuple[int, int],
        *,
        body_ready: bool = False,
    ) -> bool:
        """Send the status line and headers; False if the browser has gone.  With
        ``body_ready`` (the body, or its first part, is here already: it is written next)
        they may go with that first write instead of one of their own."""
        ...

    async def write(self, chunk: bytes) -> bool:
        """Send part of the body; False once the browser has gone."""
        ...

    async def end(self, complete: bool) -> None:
        """The body is over: complete, or cut off (the browser must see it cut off)."""
        ...


@dataclass
class Outcome:
    status: int
    #: the exchange is in the archive
    recorded: bool = False
    #: a revalidation came back 304: the stored copy (recorded again as a revisit) to serve
    not_modified: CachedEntry | None = None
    #: bytes of body received from upstream
    received: int = 0
    #: the answer's reason phrase and headers as received (the archive renames only
    #: Transfer-Encoding: its body is de-chunked)
    reason: str = ""
    headers: Headers = field(default_factory=list)
    #: the body as recorded (still Content-Encoded), if ``Exchange.keep_body`` allowed it
    body: bytes | None = None


class Engine:
    """Holds the upstream client session (keep-alive to origins) and the store it records
    into.  ``finish_on_disconnect`` follows the config (:meth:`configure`)."""

    def __init__(
        self,
        store: Store,
        timeouts: UpstreamTimeouts,
        *,
        finish_on_disconnect: bool = True,
        resolver: aiohttp.abc.AbstractResolver | None = None,
        limit_per_host: int = 0,
        limit: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.timeouts = timeouts
        self.not_recorded = NotRecordedLog()
        self.finish_on_disconnect = finish_on_disconnect
        self._resolver = resolver
        self._limits = (limit_per_host, limit)
        self._session: aiohttp.ClientSession | None = None
        self._ssl_context = ssl_context
        #: sessions replaced by a reload, closed with the engine
        self._retired: list[aiohttp.ClientSession] = []
        #: the upstream proxy, if any (the services set it from the config or environment)
        self.proxies: ProxySettings = DIRECT
        #: the configuration in force (the services' after a reload: :meth:`follow`), for
        #: the header policy and the abort limits
        self.config: Callable[[], Config] = lambda: _DEFAULTS
        #: the key of the credentials' digests in the archive
        self.credential_key = credential_key(store.root)

    def follow(self, config: Callable[[], Config]) -> None:
        """Read the header policy and the abort limits from ``config()`` on every exchange
        (the services' configuration, which a reload replaces)."""
        self.config = config

    def configure(
        self, *, finish_on_disconnect: bool, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        """Take a (re)loaded configuration; a new upstream TLS context starts a new session
        (requests in flight finish on the old one)."""
        self.finish_on_disconnect = finish_on_disconnect
        if ssl_context is not None and ssl_context is not self._ssl_context:
            self._ssl_context = ssl_context
            old, self._session = self._session, None
            if old is not None and not old.closed:
                self._retired.append(old)

    @property
    def session(self) -> aiohttp.ClientSession:
        """The client session, made on first use (it needs the running loop).  No bound by
        default: each upstream connection serves one browser request, and browsers bound
        those per host; a bound here would queue every request to a host behind its long
        downloads and event streams."""
        if self._session is None or self._session.closed:
            limit_per_host, limit = self._limits
            self._session = new_session(
                self.timeouts,
                limit_per_host,
                self._resolver,
                limit=limit,
                ssl_context=self._ssl_context,
            )
        return self._session

    async def close(self) -> None:
        for old in self._retired:
            await old.close()
        self._retired.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- the one path upstream ----------------------------------------------------------------

    def request_headers(self, exchange: Exchange, revalidate: CachedEntry | None) -> Headers:
        """What goes upstream: end-to-end headers, censored (``censor_request_headers``),
        plus ``Via``; for GET and HEAD without the browser's own validators (the archive wants
        the whole resource, and the proxy answers the browser's conditions itself), and with
        our copy's validators when revalidating."""
        headers = censor(end_to_end(exchange.headers), self.config().censor_request_headers)
        if exchange.method.upper() in ("GET", "HEAD"):
            headers = without_conditionals(headers, keep_range=True)
        headers = add_via(headers, exchange.version, PSEUDONYM)
        if revalidate is not None:
            headers += revalidation_headers(revalidate.headers)
        return headers

    async def fetch(
        self,
        exchange: Exchange,
        *,
        revalidate: CachedEntry | None = None,
        sink: Sink | None = None,
    ) -> Outcome:
        """Send ``exchange`` upstream and record the answer.

        Raises :class:`UpstreamError` when the origin cannot be reached (nothing has been sent
        to the sink then), and, without a sink, when the body fails midway.  With a sink, a
        body that fails midway is cut off for the browser and not recorded; a recording that
        fails is logged and the browser still gets its answer.
        """
        headers = self.request_headers(exchange, revalidate)
        upstream = await open_upstream(
            self.session,
            exchange.method,
            exchange.url,
            headers,
            exchange.body,
            self.proxies.for_url(exchange.url),
            exchange.target,
        )
        self._invalidate(exchange, upstream)
        try:
            record_headers = recorded_request_headers(
                [("Host", exchange.url.hostport), *headers],
                self.credential_key,
                keep_credentials=self.config().record_credentials,
            )
            if upstream.status == 304 and revalidate is not None:
                return await self._revisit(exchange, record_headers, revalidate, upstream)
            return await self._tee(exchange, record_headers, upstream, sink)
        finally:
            upstream.release()

    def _invalidate(self, exchange: Exchange, upstream: aiohttp.ClientResponse) -> None:
        """An unsafe request's non-error answer makes the stored copies of its target (and of
        the same-origin Location / Content-Location) stale (RFC 9111 §4.4)."""
        urls = invalidated_urls(
            exchange.method,
            upstream.status,
            exchange.url,
            upstream.headers.get("Location"),
            upstream.headers.get("Content-Location"),
        )
        if urls:
            self.store.invalidations.mark((url.file for url in urls), datetime.now(UTC))

    async def _revisit(
        self,
        exchange: Exchange,
        record_headers: Headers,
        cached: CachedEntry,
        upstream: aiohttp.ClientResponse,
    ) -> Outcome:
        """304 to our revalidation: record the stored copy again (a revisit record) with the
        headers the 304 updated, and hand it back to serve."""
        updated = merge_not_modified(cached.headers, without_controls(upstream.headers.items()))

        def record() -> None:
            recorder = self._recorder(exchange, record_headers)
            try:
                with cached.open_body() as stream:
                    while chunk := stream.read(CHUNK):
                        recorder.write(chunk)
                recorder.finish(cached.status, cached.reason, updated)
            except BaseException:
                recorder.abort()
                raise

        recorded = True
        try:
            await asyncio.to_thread(record)
        except RECORDING_ERRORS as exc:
            recorded = False
            self.not_recorded.report(f"revisit of {exchange.url.canonical}", exc)
        fresh = await asyncio.to_thread(
            self.store.get, exchange.url, exchange.key, prefer_good=False
        )
        return Outcome(304, recorded=recorded, not_modified=fresh or cached)

    def _recorder(self, exchange: Exchange, record_headers: Headers) -> Recorder | _Unrecorded:
        if not exchange.record:
            return _Unrecorded()
        return self.store.recorder(
            exchange.url,
            exchange.key,
            method=exchange.method,
            request_headers=record_headers,
            request_body=exchange.body,
            target=exchange.target,
        )

    async def _tee(
        self,
        exchange: Exchange,
        record_headers: Headers,
        upstream: aiohttp.ClientResponse,
        sink: Sink | None,
    ) -> Outcome:
        """Relay and record the body: the I/O of a :class:`~.tee.Tee`, which decides what goes
        where (and holds back what completes the body until it is recorded)."""
        raw_headers = decode_headers(upstream.raw_headers)
        version = (upstream.version.major, upstream.version.minor) if upstream.version else (1, 1)
        recorder = self._recorder(exchange, record_headers)
        client = Client.NONE
        if sink is not None:
            content = upstream.content
            head_sent = await sink.start(
                upstream.status,
                upstream.reason or "",
                raw_headers,
                version,
                body_ready=content.total_bytes > 0 or content.is_eof(),
            )
            client = Client.OPEN if head_sent else Client.GONE
        tee = Tee(
            content_length(raw_headers),
            GoOn.from_config(self.finish_on_disconnect, self.config()),
            keep=exchange.keep_body,
        )
        chunks = upstream.content.iter_chunked(CHUNK)
        failure: BaseException | None = None

        async def carry_out(command: Command) -> Event | None:
            """Do one command; its reply, if it waits for one."""
            match command:
                case Read():
                    try:
                        return Chunk(await anext(chunks))
                    except StopAsyncIteration:
                        return BodyEnded()
                case Record(data):
                    recorder.write(data)
                case Send(data):
                    assert sink is not None
                    return Wrote(await sink.write(data))
                case Finish():
                    try:
                        await asyncio.to_thread(
                            recorder.finish,
                            upstream.status,
                            upstream.reason or "",
                            raw_headers,
                            f"HTTP/{version[0]}.{version[1]}",
                        )
                    except RECORDING_ERRORS as exc:
                        self.not_recorded.report(exchange.url.canonical, exc)
                        return Recorded(ok=False)
                    return Recorded(ok=True)
                case Drop(browser_left):
                    if browser_left:
                        log.info(
                            "%s: the browser left after %d bytes; not finished",
                            exchange.url.canonical,
                            tee.received,
                        )
                    recorder.abort()
                case End(complete):
                    assert sink is not None
                    await sink.end(complete)
            return None

        commands = tee.feed(Started(client))
        while commands:
            reply: Event | None = None
            try:
                for command in commands:
                    reply = await carry_out(command)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                if not tee.receiving:
                    raise
                failure, reply = exc, UpstreamFailed()
                log.warning(
                    "upstream body of %s failed: %s",
                    exchange.url.canonical,
                    describe_error(exc)[0],
                )
            except BaseException:
                if tee.receiving:
                    recorder.abort()
                raise
            commands = tee.feed(reply) if reply is not None else []
        recorded = tee.recorded and exchange.record
        if sink is None:
            if failure is not None:
                reason, status = describe_error(failure)
                raise UpstreamError(exchange.url.canonical, reason, status) from failure
            if not recorded and tee.complete and exchange.record:
                raise StoreError(f"{exchange.url.canonical} was fetched but not recorded")
        return Outcome(
            upstream.status,
            recorded=recorded,
            received=tee.received,
            reason=upstream.reason or "",
            headers=raw_headers,
            body=tee.body,
        )


class _Unrecorded:
    """The recorder of an exchange that is never archived: the body only passes through."""

    def write(self, chunk: bytes) -> None:
        pass

    def finish(self, *args: object) -> list[object]:
        return []

    def abort(self) -> None:
        pass


def decode_headers(raw: Iterable[tuple[bytes, bytes]]) -> Headers:
    """Header bytes as text the archive turns back into the same bytes (UTF-8 with
    surrogateescape, as aiohttp decodes request headers and the WARC layer encodes them),
    but for control characters, which neither the browser nor the archive is sent."""
    return without_controls(
        (n.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape")) for n, v in raw
    )


def content_length(headers: Iterable[tuple[str, str]]) -> int | None:
    """The Content-Length the origin announced (aiohttp has refused the response if it is
    malformed or repeated with different values), or None for a chunked or close-delimited
    body."""
    value = get_header(headers, "Content-Length")
    value = value.strip() if value is not None else None
    return int(value) if value and value.isascii() and value.isdigit() else None
