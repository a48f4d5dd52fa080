"""Wiring: builds the services (store, queue, search index, recording engine, mode) and the
proxy server, and runs ``wwwproxy serve``.  Everything below gets what it needs from here; the
CLI sits above."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import logging
import resource
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aiohttp import web

from .allocator import GIVE_BACK_EVERY, fix_mmap_threshold, give_back, limit_arenas
from .archive.purge import Limits, purge_loop
from .archive.store import Store
from .commands import handle_command
from .config import Config, ConfigError, config_candidates, load_config
from .fetch.monitor import monitor_loop, monitor_path
from .http.policy import Mode
from .proxy import front as fast_front
from .proxy.accesslog import SHUTDOWN_TIMEOUT, AccessLogger, quiet_bad_requests
from .proxy.front import FrontListener
from .proxy.request_parser import ignore_other_upgrades
from .proxy.server import ProxyServer
from .recording.services import Services
from .recording.wiring import (
    SEARCH_FLUSH,
    build_services,
    open_services,
)

__all__ = [
    "CannotListen",
    "Running",
    "browser_recorder",
    "build_services",
    "open_services",
    "serve",
    "start",
]

log = logging.getLogger("wwwproxy")

IO_THREADS = 32
#: seconds a recorded response is taken as fresh by a rendering browser's proxy
RENDER_REUSE = 3600
COMPACT_EVERY = 60.0  # seconds between checks of the index journal
COMPACT_BYTES = 256 * 1024  # journal size that triggers a merge into the sorted index
#: seconds between two warnings that connections cannot be accepted (one line per burst)
ACCEPT_WARN_EVERY = 60.0
#: the open-files limit asked for when the hard limit is "unlimited" (Linux's nr_open default)
NOFILE_WANTED = 1024 * 1024
_OUT_OF_FDS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard one, once, when ``serve`` starts: each
    browser connection, upstream connection and WARC file takes a file descriptor, and the soft
    limit (1,024 under systemd unless the unit says otherwise) ran out under 1,100 stalled
    connections.  Returns (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = NOFILE_WANTED if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as exc:  # macOS refuses more than OPEN_MAX, say
            log.warning("the open files limit stays %s: %s", soft, exc)
            return soft, soft
        log.info("open files limit raised from %s to %s", soft, wanted)
        return soft, wanted
    return soft, soft


class AcceptErrors:
    """The loop's exception handler, for one kind of error: asyncio's server logs a traceback
    for every ``accept()`` that fails for want of file descriptors (Python 3.11 up to its
    backlog, 100, times per retry, each second: 130,000 lines in 30 s), and pauses accepting
    for a second each time.  Here that is one warning line per burst, with a count; the open
    connections are served meanwhile, and new ones are accepted again as descriptors free up.
    Everything else goes to the handler that was there before.  (uvloop logs nothing here:
    libuv accepts and closes the connections over the limit with a spare descriptor.)"""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.previous = loop.get_exception_handler()
        self.refused = 0  # since the last warning
        self.quiet_until = float("-inf")

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", ""))
        if (
            isinstance(exc, OSError)
            and exc.errno in _OUT_OF_FDS
            and message.startswith("socket.accept()")
        ):
            self.refused += 1
            now = loop.time()
            if now >= self.quiet_until:
                soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                log.warning(
                    "cannot accept new connections: %s (open files limit %s); the open ones "
                    "are still served (%d refusals; next warning in %.0f s at the earliest)",
                    exc.strerror or exc,
                    soft,
                    self.refused,
                    ACCEPT_WARN_EVERY,
                )
                self.refused = 0
                self.quiet_until = now + ACCEPT_WARN_EVERY
            return
        handle = context.get("handle")
        if (
            isinstance(exc, ValueError)
            and handle is not None
            and "_start_serving" in repr(handle)
            and "Invalid file descriptor" in str(exc)
        ):
            # the accept retry asyncio scheduled after such a failure, firing after shutdown
            # closed the listening socket: nothing is left to accept on
            log.debug("accepting not resumed: the listening socket is closed")
            return
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)


@dataclasses.dataclass
class Running:
    server: ProxyServer
    runner: web.AppRunner
    port: int
    front: FrontListener

    @property
    def services(self) -> Services:
        return self.server.services

    @property
    def addresses(self) -> list[Any]:
        """The socket addresses it listens on."""
        return self.front.addresses

    async def stop(self) -> None:
        """Stop listening, let in-flight requests finish (bounded), close the upstream
        session, and let the search index catch up and close."""
        self.front.close()
        await self.runner.cleanup()  # closes the services (ProxyServer's on_cleanup)
        self.server.access_log.close()
        helper = self.services.store.record_helper
        if helper is not None:  # (it indexes what it recorded before it ends)
            await asyncio.to_thread(helper.stop)
        search = self.services.search
        if search is not None:
            if not await asyncio.to_thread(search.flush, SEARCH_FLUSH):
                log.warning("the search index was not brought up to date: rebuild on /search/")
            await asyncio.to_thread(search.close)


class CannotListen(OSError):
    """The listening address is taken or not allowed (nothing was made)."""

    def __init__(self, address: str, exc: OSError) -> None:
        super().__init__(exc.errno, f"cannot listen on {address}: {exc.strerror or exc}")
        self.address = address


def config_read(config: Config) -> str:
    """Which configuration file is in force, for the start-up line: a person who edited a
    file that was not read learns it at once."""
    if config.source == Config.source:
        looked = " nor ".join(str(path.absolute()) for path in config_candidates())
        return f"no configuration file (neither {looked}): the defaults"
    return f"configuration {Path(config.source).absolute()}"


def check_listen(host: str, port: int) -> None:
    """Bind the listening address once and let it go, so that a busy port is reported before
    anything is made (the cache directory); :class:`CannotListen` if it is taken."""
    if port == 0:
        return
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        for family, kind, proto, _, address in found:  # each address, as asyncio binds them
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
    except OSError as exc:
        raise CannotListen(_address(host, port), exc) from exc


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _open_catalog(store: Store) -> None:
    """The catalog the index pages read, opened (and made from the index, for a cache that
    has none) at start in a worker thread, not by the first person to open ``/``."""
    try:
        await asyncio.to_thread(store.open_catalog)
    except (OSError, ValueError, sqlite3.Error) as exc:  # the page itself will say what is wrong
        log.warning("catalog not opened: %s", exc)


async def _listen(
    services: Services, host: str, port: int, *, owns_services: bool = True
) -> Running:
    """The proxy server for ``services`` on ``host:port`` (port 0: any free one), both fronts;
    :class:`CannotListen` if the address cannot be had."""
    server = ProxyServer(services, commands=handle_command)
    runner = web.AppRunner(
        server.make_app(owns_services=owns_services),
        access_log_class=AccessLogger.bound_to(server.access_log),
        handle_signals=False,
        shutdown_timeout=SHUTDOWN_TIMEOUT,
        # aiohttp's keep-alive timeout (3,630 s by default) is also the time a connection
        # handed to it has to complete its next request head: bounded as the fast front's
        keepalive_timeout=fast_front.HEAD_TIMEOUT,
        # a request body is forwarded (and recorded) as the browser sent it: aiohttp would
        # otherwise decode a gzip body and the origin get it decoded under Content-Encoding:
        # gzip (and a body that is not gzip was a 500 with a traceback)
        auto_decompress=False,
    )
    await runner.setup()
    # the fast front answers memory hits itself and hands every other request to aiohttp
    assert runner.server is not None  # made by setup()
    ignore_other_upgrades(runner.server)  # (an Upgrade but WebSocket's: a plain request)
    front = FrontListener(server, runner.server)
    try:
        bound = await front.start(host, port)
    except OSError as exc:
        await runner.cleanup()
        raise CannotListen(_address(host, port), exc) from exc
    return Running(server, runner, bound, front)


async def start(config: Config, *, mode: Mode | None = None) -> Running:
    """Start the proxy on ``config.listen`` (port 0: any free port) and return at once."""
    quiet_bad_requests()
    loop = asyncio.get_running_loop()
    if not isinstance(loop.get_exception_handler(), AcceptErrors):
        loop.set_exception_handler(AcceptErrors(loop))
    # recording waits mostly on fsync: more threads than asyncio's default (cores + 4) keep
    # one slow disk flush from holding up every other response
    loop.set_default_executor(
        ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="wwwproxy-io")
    )
    services = build_services(config, mode=mode, record_apart=True)
    running = await _listen(services, config.listen_host, config.listen_port)
    if config.listen_port == 0:
        services.listening_on(running.port)
    services.browser_recorder = functools.partial(browser_recorder, services)
    services.start_sessions()  # an online session starts now if the mode is connected
    # the welcome page's host summaries count every cache file once (about a second at
    # 100,000 pages): done now, in a worker thread, not by the first person to open `/`
    services.spawn(_open_catalog(services.store))
    return running


@contextlib.asynccontextmanager
async def browser_recorder(services: Services) -> AsyncIterator[str]:
    """A proxy on a free loopback port recording through ``services``' store and engine,
    online, for a crawl's own browser (``fetch --render``, ``/refresh/``'s render); its
    ``host:port``.  What was recorded less than :data:`RENDER_REUSE` seconds ago is taken from
    the cache without asking, whatever lifetime its server gave it (a site's script bundles are
    fetched once a crawl, not once a page, and the page the crawl just fetched is not fetched
    again); HTTPS is intercepted for every host but ``https_bypass``'s; everything else as the
    configuration says.  Only this machine may use it."""
    config = dataclasses.replace(
        services.config,
        request_changed=max(services.config.request_changed, RENDER_REUSE),
        # a crawl is a snapshot: what it recorded within the hour stands, even a copy its
        # server said to ask about every time (a page the crawl has just fetched, above all)
        request_expired=False,
        request_no_cache=False,
        # the crawl records HTTPS itself, so what its browser loads over HTTPS is recorded
        # too (https_bypass still holds); the browser is told to take the proxy's certificates
        https_intercept=("*",),
    )
    recording = Services(
        config, services.store, mode=Mode.ONLINE, search=services.search, engine=services.engine
    )
    quiet_bad_requests()
    running = await _listen(recording, "127.0.0.1", 0, owns_services=False)
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        running.front.close()
        await running.runner.cleanup()
        running.server.access_log.close()
        await recording.cancel_background()


async def compact_loop(
    store: Store, *, every: float = COMPACT_EVERY, min_bytes: int = COMPACT_BYTES
) -> None:
    """Merge the index journal into the sorted index in the background, so lookups stay
    binary searches instead of re-reading an ever-growing journal."""
    while True:
        await asyncio.sleep(every)
        try:
            if await asyncio.to_thread(store.index.journal_bytes) >= min_bytes:
                count = await asyncio.to_thread(store.index.compact)
                log.info("index compacted: %s records", count)
        except Exception:  # noqa: BLE001 (never fatal: the journal keeps serving lookups)
            log.exception("index compaction failed; will retry")


async def give_back_loop(every: float = GIVE_BACK_EVERY) -> None:
    """Give the memory the allocator holds free back to the system every few seconds
    (:mod:`wwwproxy.allocator`): a burst (the queue fetched on going online, a big page)
    leaves the process as small as before within seconds."""
    while True:
        await asyncio.sleep(every)
        await asyncio.to_thread(give_back)


async def serve(
    config_path: str | Path | None,
    overrides: dict[str, Any],
    *,
    mode: Mode | None = None,
    on_ready: Callable[[Running], None] | None = None,
) -> int:
    """``wwwproxy serve``: run until SIGTERM/SIGINT; SIGHUP re-reads the config file (the
    mode is state: a reload keeps it)."""

    def load() -> Config:
        return dataclasses.replace(load_config(config_path), **overrides)

    limit_arenas()  # before the worker threads allocate: memory stays flat for months
    fix_mmap_threshold()
    config = load()
    check_listen(config.listen_host, config.listen_port)
    config.cache.mkdir(parents=True, exist_ok=True)
    raise_open_files_limit()
    running = await start(config, mode=mode)
    services = running.services
    helper = services.store.record_helper
    if helper is not None:  # started now: the first page recorded does not wait for it
        services.spawn(asyncio.to_thread(helper.start, str(services.store.root)))
    monitor = asyncio.create_task(monitor_loop(services, monitor_path(config.cache)))
    compactor = asyncio.create_task(compact_loop(services.store))
    trimmer = asyncio.create_task(give_back_loop())
    # keep_captures, purge_after_days, max_size: daily, and when the cache outgrows max_size
    purger = asyncio.create_task(
        purge_loop(services.store, lambda: Limits.from_config(services.config))
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def reload() -> str | None:
        try:
            new = load()
        except ConfigError as exc:
            log.error("config not reloaded, keeping the old one:\n%s", exc)
            return f"not reloaded, the old configuration stays:\n{exc}"
        if (new.listen_host, new.listen_port, new.cache) != (
            config.listen_host,
            config.listen_port,
            config.cache,
        ):
            log.warning("listen address and cache change only with a restart")
        try:
            services.reload(new)
        except ValueError as exc:
            log.error("config not reloaded, keeping the old one: %s", exc)
            return f"not reloaded, the old configuration stays: {exc}"
        log.info("configuration reloaded from %s (mode stays %s)", new.source, services.mode)
        return None

    services.reread_config = reload
    loop.add_signal_handler(signal.SIGHUP, reload)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    log.info(
        "wwwproxy listening on %s (mode %s, cache directory %s, %s)",
        services.config.listen,
        services.mode.value,
        config.cache.absolute(),
        config_read(config),
    )
    if on_ready is not None:
        on_ready(running)
    await stop.wait()
    for task in (monitor, compactor, trimmer, purger):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    log.info("stopping: finishing requests in flight")
    await running.stop()
    try:
        count = await asyncio.to_thread(services.store.index.compact)
        if count is not None:
            log.info("index compacted: %s records", count)
    except Exception:  # noqa: BLE001 (the journal is still valid; the next start merges it)
        log.exception("index compaction at exit failed")
    log.info("stopped")
    return 0
