"""Running the proxy: listen, log one line per request, SIGHUP reloads, SIGTERM drains."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError

from ..archive.search import SearchIndex
from ..archive.store import Store
from ..commands import handle_command
from ..config import Config, ConfigError, load_config
from ..fetch.monitor import monitor_loop, monitor_path
from .modes import Mode
from .server import ProxyServer

__all__ = ["Running", "serve", "start"]

log = logging.getLogger("wwwproxy")


class AccessLogger(AbstractAccessLogger):
    """One line per request: client, method, the full URL asked for, status, bytes, seconds,
    and whether it came from the cache (X-Cache)."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        peer = request.remote or "-"
        cache = response.headers.get("X-Cache", "-")
        self.logger.info(
            '%s "%s %s" %s %s %.3fs %s',
            peer,
            request.method,
            request.raw_path,
            response.status,
            response.body_length,
            time,
            cache,
        )


SHUTDOWN_TIMEOUT = 30.0
IO_THREADS = 32


class BadRequestFilter(logging.Filter):
    """A malformed request is the client's problem: one INFO line saying who sent what, not an
    ERROR with a traceback (a port scan would otherwise flood the journal)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            peer = "-"
            if isinstance(record.args, tuple) and record.args:
                peer = str(record.args[0])
            reason = " ".join(str(exc.message).split())[:200]
            record.msg, record.args = "bad request from %s: %s", (peer, reason)
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_bad_requests() -> None:
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, BadRequestFilter) for f in server_log.filters):
        server_log.addFilter(BadRequestFilter())


@dataclasses.dataclass
class Running:
    server: ProxyServer
    runner: web.AppRunner
    port: int

    async def stop(self) -> None:
        """Stop listening, let in-flight requests finish (bounded), close the archive."""
        await self.runner.cleanup()


async def start(config: Config, *, mode: Mode | None = None) -> Running:
    """Start the proxy on ``config.listen`` (port 0: any free port) and return at once."""
    quiet_bad_requests()
    # recording waits mostly on fsync: more threads than asyncio's default (cores + 4) keep
    # one slow disk flush from holding up every other response
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="wwwproxy-io")
    )
    store = Store(config.cache)
    SearchIndex.for_store(store)  # full-text search follows every recording
    server = ProxyServer(config, store, mode=mode, commands=handle_command)
    app = server.make_app()
    runner = web.AppRunner(
        app,
        access_log_class=AccessLogger,
        handle_signals=False,
        shutdown_timeout=SHUTDOWN_TIMEOUT,
    )
    await runner.setup()
    site = web.TCPSite(runner, config.listen_host, config.listen_port, reuse_address=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    sockets = [s for s in (site._server.sockets if site._server else [])]  # noqa: SLF001
    port = sockets[0].getsockname()[1] if sockets else config.listen_port
    if config.listen_port == 0:
        server.reload(dataclasses.replace(config, listen_port=port))
        server.state.mode = mode or Mode(config.mode)
    return Running(server, runner, port)


COMPACT_EVERY = 60.0  # seconds between checks of the index journal
COMPACT_BYTES = 256 * 1024  # journal size that triggers a merge into the sorted index


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


async def serve(
    config_path: str | Path | None,
    overrides: dict[str, Any],
    *,
    mode: Mode | None = None,
    on_ready: Callable[[Running], None] | None = None,
) -> int:
    """``wwwproxy serve``: run until SIGTERM/SIGINT; SIGHUP re-reads the config file."""

    def load() -> Config:
        return dataclasses.replace(load_config(config_path), **overrides)

    config = load()
    config.cache.mkdir(parents=True, exist_ok=True)
    running = await start(config, mode=mode)
    monitor = asyncio.create_task(monitor_loop(running.server, monitor_path(config.cache)))
    compactor = asyncio.create_task(compact_loop(running.server.store))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def reload() -> None:
        try:
            new = load()
        except ConfigError as exc:
            log.error("config not reloaded, keeping the old one:\n%s", exc)
            return
        if (new.listen_host, new.listen_port, new.cache) != (
            config.listen_host,
            config.listen_port,
            config.cache,
        ):
            log.warning("listen address and cache change only with a restart")
        keep_mode = running.server.state.mode if mode is not None else None
        running.server.reload(
            dataclasses.replace(
                new,
                listen_host=config.listen_host,
                listen_port=running.port,
                cache=config.cache,
            )
        )
        if keep_mode is not None:
            running.server.state.mode = keep_mode
        log.info("configuration reloaded from %s", new.source)

    loop.add_signal_handler(signal.SIGHUP, reload)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    log.info(
        "wwwproxy listening on %s (mode %s, cache %s)",
        running.server.config.listen,
        running.server.state.mode.value,
        config.cache,
    )
    if on_ready is not None:
        on_ready(running)
    await stop.wait()
    for task in (monitor, compactor):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    log.info("stopping: finishing requests in flight")
    await running.stop()
    try:
        count = await asyncio.to_thread(running.server.store.index.compact)
        if count is not None:
            log.info("index compacted: %s records", count)
    except Exception:  # noqa: BLE001 (the journal is still valid; the next start merges it)
        log.exception("index compaction at exit failed")
    # index what is still queued for search and close the database cleanly (no -wal left)
    await asyncio.to_thread(SearchIndex.for_store(running.server.store).close)
    log.info("stopped")
    return 0


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
