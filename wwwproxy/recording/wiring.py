"""How the services of one process are put together: the store, the recording engine and the
full-text index, for ``wwwproxy serve`` (:mod:`wwwproxy.app`) and for the commands that fetch
without listening (``wwwproxy fetch``, ``import-wwwoffle``).

Apart from :mod:`wwwproxy.app` so that those commands start without importing the proxy's
server, the command pages and ``cryptography`` (about 0.2 s of a crawl's start).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
from collections.abc import AsyncIterator
from typing import TypedDict, Unpack

import aiohttp

from ..archive.recordproc import RecordHelper
from ..archive.search import SearchIndex
from ..archive.store import Store
from ..config import Config
from ..http.policy import Mode
from .engine import Engine
from .services import Services
from .upstream import UpstreamTimeouts

__all__ = ["SEARCH_FLUSH", "build_services", "close_services", "open_search", "open_services"]

log = logging.getLogger("wwwproxy")

SEARCH_FLUSH = 120.0  # seconds to wait at the end for the search index to catch up


def open_search(store: Store) -> SearchIndex | None:
    """The full-text index, following every recording of ``store``; None (and a warning) if
    its database cannot be used: recording never depends on it."""
    try:
        search = SearchIndex(store.root)
    except (ValueError, sqlite3.Error) as exc:
        log.warning("the search index is not kept up to date: %s", exc)
        return None
    search.attach(store)
    return search


class ServiceOptions(TypedDict, total=False):
    """The keywords of :func:`build_services` beside the configuration."""

    mode: Mode | None
    store: Store | None
    search: bool
    record_apart: bool
    resolver: aiohttp.abc.AbstractResolver | None
    limit_per_host: int


def build_services(
    config: Config,
    *,
    mode: Mode | None = None,
    store: Store | None = None,
    search: bool = True,
    record_apart: bool = False,
    resolver: aiohttp.abc.AbstractResolver | None = None,
    limit_per_host: int = 0,
) -> Services:
    """The one services object of a process.  ``resolver`` replaces DNS (tests send
    ``example.com`` to local servers); ``limit_per_host`` bounds connections to one origin
    (the crawler is polite; the proxy leaves that to the browsers)."""
    store = store or Store(config.cache)
    if record_apart and store.record_helper is None:  # recording on the other core
        store.record_helper = RecordHelper(search=search)
    engine = Engine(
        store,
        UpstreamTimeouts(config.connect_timeout, config.read_timeout),
        finish_on_disconnect=config.finish_on_disconnect,
        resolver=resolver,
        limit_per_host=limit_per_host,
    )
    services = Services(
        config,
        store,
        mode=mode,
        search=open_search(store) if search else None,
        engine=engine,
    )
    helper = store.record_helper
    if helper is not None and services.search is not None:  # a search waits for its pages
        services.search.waits_for.append(functools.partial(helper.wait_search, str(store.root)))
    engine.follow(lambda: services.config)  # the header policy and abort limits, reloaded
    return services


async def close_services(services: Services) -> None:
    """Cancel background work, close the upstream session, let the search index catch up and
    close it (no -wal file left)."""
    await services.close()
    helper = services.store.record_helper
    if helper is not None:  # (what it recorded is indexed before it ends)
        await asyncio.to_thread(helper.stop)
    if services.search is not None:
        if not await asyncio.to_thread(services.search.flush, SEARCH_FLUSH):
            log.warning("the search index was not brought up to date: run a rebuild on /search/")
        await asyncio.to_thread(services.search.close)


@contextlib.asynccontextmanager
async def open_services(
    config: Config, **options: Unpack[ServiceOptions]
) -> AsyncIterator[Services]:
    """:func:`build_services` for a command that does not listen (``wwwproxy fetch``)."""
    services = await asyncio.to_thread(lambda: build_services(config, **options))
    try:
        yield services
    finally:
        await close_services(services)
