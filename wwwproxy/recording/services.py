"""The services object: what the proxy, the command pages and the crawler share at run time.

Built once by :mod:`wwwproxy.app` and passed down, instead of module-level registries and a
server object that everything reached into.  Mode is state here, not configuration: a config
reload (SIGHUP, ``/config/``) never changes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import secrets
import ssl
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.request import getproxies_environment

from ..archive.outgoing import OutgoingQueue
from ..archive.sessions import SessionLog
from ..archive.store import Store
from ..config import Config
from ..http.filters import Blocklist, Filters, Treatment, parse_blocklist
from ..http.policy import (
    Action,
    Mode,
    RequestDirectives,
    Stored,
    decide,
    max_age_for,
    prefers_good,
)
from ..url import URL
from ..url.canonical import DEFAULT_PORTS
from .engine import Engine
from .upstream import UpstreamProxy, UpstreamTimeouts, proxy_settings, tls_context

if TYPE_CHECKING:
    from ..archive.search import SearchIndex

__all__ = ["RuntimeState", "Services", "load_filters"]

_filter_log = logging.getLogger("wwwproxy.filters")

log = logging.getLogger(__name__)

NO_DIRECTIVES = RequestDirectives()

#: Config fields set up when the proxy starts: a reload keeps them
_AT_START = ("listen_host", "listen_port", "cache")


@dataclasses.dataclass
class RuntimeState:
    """What can change while the proxy runs (mode switch, config reload)."""

    config: Config
    mode: Mode
    started: datetime = dataclasses.field(default_factory=lambda: datetime.now(UTC))


RULE_AGES_KEPT = 4096  # URLs whose freshness rule is remembered
PROBLEMS_SHOWN = 20  # skipped blocklist lines logged one by one; the rest are counted


def load_filters(config: Config) -> Filters:
    """The config's URL filters, with the hosts of its blocklist files read now; a skipped
    line is logged as ``file:line: why``.  ValueError if a file cannot be read."""
    blocklist = None
    if config.blocklist:
        blocklist = Blocklist()
        for path in config.blocklist:
            try:
                with open(path, encoding="utf-8", errors="replace") as lines:
                    parse_blocklist(lines, str(path), blocklist)
            except OSError as exc:
                raise ValueError(f"blocklist {str(path)!r}: {exc.strerror or exc}") from None
        for problem in blocklist.problems[:PROBLEMS_SHOWN]:
            _filter_log.warning("blocklist line skipped: %s", problem)
        more = len(blocklist.problems) - PROBLEMS_SHOWN
        if more > 0:
            _filter_log.warning("blocklist: %d more lines skipped", more)
        _filter_log.info(
            "blocklist: %d hosts from %s",
            len(blocklist),
            ", ".join(str(p) for p in config.blocklist),
        )
    return Filters(
        config.dont_get,
        config.dont_cache,
        config.dont_queue,
        config.local_net,
        blocklist=blocklist,
        status=config.dont_get_status,
    )


def _local_host(config: Config) -> str:
    host = config.listen_host
    if host in ("0.0.0.0", "::", ""):
        host = "localhost"
    port = config.listen_port
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Services:
    """Store, queue, search index, recording engine, mode and config, and background jobs."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        mode: Mode | None = None,
        search: SearchIndex | None = None,
        engine: Engine | None = None,
    ) -> None:
        self.state = RuntimeState(config, mode or Mode(config.mode))
        self.store = store
        self.queue = OutgoingQueue(store.root / "outgoing")
        self.search = search
        self.engine = engine or Engine(
            store,
            UpstreamTimeouts(config.connect_timeout, config.read_timeout),
            finish_on_disconnect=config.finish_on_disconnect,
        )
        #: the key of the command pages' form tokens (new each start: old pages reload)
        self.form_secret = secrets.token_bytes(32)
        #: /refresh/ jobs, newest first (the page shows them)
        self.refresh_jobs: list[Any] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._own_names: set[str] = set()
        self._own_hosts: set[str] = set()
        self._tls_for: Path | None = None  # the upstream_ca the engine's TLS context has
        self._tls_made = False
        #: re-reads the configuration file as SIGHUP does (``/control/``'s reload), set by
        #: ``wwwproxy serve``; it answers the problem that kept the old one, or None
        self.reread_config: Callable[[], str | None] | None = None
        #: the cache's online-session log, once serve has started (None: not serving)
        self.sessions: SessionLog | None = None
        #: a proxy of these services for a rendering browser, its ``host:port`` while open
        #: (:func:`wwwproxy.app.browser_recorder`; set by serve and by ``wwwproxy fetch``)
        self.browser_recorder: Callable[[], AbstractAsyncContextManager[str]] | None = None
        self._apply(config)

    # --- configuration -----------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self.state.config

    @property
    def mode(self) -> Mode:
        return self.state.mode

    def set_mode(self, mode: Mode) -> Mode:
        """Switch the mode (returns the one before); an online session that starts or ends
        here goes into the session log (the lasttime / prevtime pages)."""
        before, self.state.mode = self.state.mode, mode
        self._note_session(before.value, mode.value)
        return before

    def start_sessions(self) -> None:
        """Serving starts: from now on mode switches are logged (starting connected starts a
        session); :meth:`close` ends the session that is open."""
        self.sessions = SessionLog(self.store.root)
        self._note_session(None, self.mode.value)

    def _note_session(self, before: str | None, after: str | None) -> None:
        if self.sessions is None:
            return
        try:
            self.sessions.note(before, after)
        except OSError as exc:  # a full disk must not stop a mode switch
            log.warning("the session log %s was not written: %s", self.sessions.path, exc)

    def _apply(self, config: Config, *, reread: bool = True) -> None:
        tls = self._tls(config)  # first: a CA file that does not load changes nothing
        filters = self._filters(config, reread)  # and a blocklist that cannot be read
        self.state.config = config
        #: dont_get, dont_cache, dont_queue, local_net (both fronts ask on every request)
        self.filters = filters
        port = config.listen_port
        names = {"localhost", "127.0.0.1", "[::1]", *config.names}
        host = config.listen_host
        names.add(f"[{host}]" if ":" in host else host)
        self._own_names = {f"{n}:{port}" for n in names} | set(config.names)
        self._own_hosts = {"localhost", "127.0.0.1", "::1", host.lower()} | {
            n.strip("[]").rstrip(".") for n in config.names if _host_only(n)
        }
        self.freshness_rules = [(r.regex, r.max_age) for r in config.freshness]
        self._local_host = _local_host(config)  # asked on every request
        self._rule_ages: dict[str, int | None] = {}  # canonical URL -> its rule's max_age
        self.engine.configure(
            finish_on_disconnect=config.finish_on_disconnect,
            ssl_context=tls,
        )
        # the upstream proxy (upstream_proxy, else http_proxy/https_proxy), never ourselves
        # local_net hosts are fetched directly, as no_proxy ones are
        self.engine.proxies = dataclasses.replace(
            proxy_settings(config, getproxies_environment(), self.is_own),
            local=lambda url: filters.verdict(url).treatment is Treatment.DIRECT,
            local_host=filters.direct_connect,
        )
        self.store.memory.resize(config.memory_cache_mb * 2**20)
        self.store.set_sync(config.sync)

    def _tls(self, config: Config) -> ssl.SSLContext | None:
        """The upstream TLS context for ``config``, made anew only when ``upstream_ca``
        changes (None: keep the engine's)."""
        if self._tls_for == config.upstream_ca and self._tls_made:
            return None
        context = tls_context(config.upstream_ca)
        self._tls_for, self._tls_made = config.upstream_ca, True
        return context

    def _filters(self, config: Config, reread: bool = True) -> Filters:
        """The filters for ``config``: made anew when the lists changed, and when the config
        has blocklist files, which a reload reads again (``reread``)."""
        old: Filters | None = self.__dict__.get("filters")
        unchanged = old is not None and _same_filters(self.config, config)
        if old is not None and unchanged and (not config.blocklist or not reread):
            return old
        return load_filters(config)

    def reload(self, config: Config) -> None:
        """A new configuration (SIGHUP, /config/).  The mode is state and stays as it is, and
        so do the listening address and the cache until a restart.  ValueError (nothing
        changed) if ``upstream_ca`` cannot be loaded."""
        current = self.config
        self._apply(dataclasses.replace(config, **{k: getattr(current, k) for k in _AT_START}))

    def listening_on(self, port: int) -> None:
        """The port the proxy really listens on (the config may say 0: any free port)."""
        self._apply(dataclasses.replace(self.config, listen_port=port), reread=False)

    def rule_max_age(self, canonical: str) -> int | None:
        """The max_age of the first configured ``freshness`` rule for the URL, if any (kept
        per URL until the rules change: every cache hit asks, and the rules are regexes)."""
        ages = self._rule_ages
        if canonical in ages:
            return ages[canonical]
        if len(ages) >= RULE_AGES_KEPT:
            ages.clear()
        age = ages[canonical] = max_age_for(canonical, self.freshness_rules)
        return age

    def prefers_good(self) -> bool:
        """Does a lookup now prefer the good copy over newer error answers
        (:func:`~wwwproxy.http.policy.prefers_good` in the running mode)?"""
        return prefers_good(self.mode, self.config.keep_good_copy)

    def decide(
        self,
        url: URL,
        stored: Stored | None,
        *,
        method: str = "GET",
        directives: RequestDirectives = NO_DIRECTIVES,
        mode: Mode | None = None,
        rule_max_age: int | None = None,
    ) -> Action:
        """:func:`~wwwproxy.http.policy.decide` for ``url`` and its copy with what the
        configuration and the store add (freshness rules, WWWOFFLE's saving rules, shared or
        private, invalidation by an unsafe request): the proxy's two fronts and the crawler
        ask here, so they cannot disagree.  ``mode``: the running mode unless given;
        ``rule_max_age``: a lifetime standing in for the configured freshness rules."""
        config = self.config
        return decide(
            self.mode if mode is None else mode,
            stored,
            datetime.now(UTC),
            method=method,
            directives=directives,
            rule_max_age=self.rule_max_age(url.canonical) if rule_max_age is None else rule_max_age,
            request_changed=config.request_changed,
            request_expired=config.request_expired,
            request_no_cache=config.request_no_cache,
            shared=config.shared,
            invalidated=stored is not None
            and self.store.invalidations.stale(url.file, stored.date),
        )

    @property
    def local_host(self) -> str:
        """``host:port`` that path-only URLs name (the address browsers reach us at)."""
        return self._local_host

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
        addr = ip_address(host)
        if addr is None:
            return False
        if local is not None and addr == ip_address(local[0]):
            return True
        listen = ip_address(self.config.listen_host)
        if listen is not None and listen.is_unspecified:
            return addr.is_loopback or addr.is_unspecified
        return addr == listen

    def direct_connect(self, host: str, port: int) -> bool:
        """Is a CONNECT to ``host:port`` for the local network (``local_net``): tunnelled
        even offline, never through an upstream proxy?"""
        return self.filters.direct_connect(host, port)

    def upstream_proxy(self, proto: str, host: str, port: int) -> UpstreamProxy | None:
        """The upstream proxy a connection to ``host:port`` goes through (None: direct)."""
        return self.engine.proxies.for_host(proto, host, port)

    # --- background work ---------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run background work (a refresh job, fetching the queue) that :meth:`close` cancels."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def close(self) -> None:
        self._note_session(self.mode.value, None)
        self.sessions = None
        await self.cancel_background()
        await self.engine.close()

    async def cancel_background(self) -> None:
        """Cancel the background jobs (revalidations, refreshes) and wait for them."""
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


def ip_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IP address (v4-mapped v6 as v4), or None for a name."""
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


_FILTER_KEYS = (
    "dont_get",
    "dont_cache",
    "dont_queue",
    "local_net",
    "dont_get_status",
    "blocklist",
)


def _same_filters(a: Config, b: Config) -> bool:
    return all(getattr(a, k) == getattr(b, k) for k in _FILTER_KEYS)


def _host_only(name: str) -> bool:
    """A configured name without a port (``names`` may hold ``host`` or ``host:port``)."""
    return ":" not in name or (name.startswith("[") and name.endswith("]"))
