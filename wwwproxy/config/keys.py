"""The configuration keys, each declared once, as a field of :class:`Config`.

A key's declaration holds its default, the parser of its YAML value, what it does, how the
``/config/`` page shows it, whether a value is a secret, and whether a change needs a restart.
Everything else is derived from the declarations by :func:`settings`: the validator of
:func:`~wwwproxy.config.parse_config`, the ``/config/`` page's table, the values in force
(:func:`effective`) and ``docs/configuration.md`` (:mod:`wwwproxy.config.reference`).
``conf/wwwproxy.yaml`` is checked against them by the tests.  Adding a key is one
``setting(...)`` field of :class:`Config`, placed as its (maybe commented-out) entry in
``conf/wwwproxy.yaml`` (a test checks the file names every key, in this order), then
``python -m wwwproxy.config.reference > docs/configuration.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from ..fsutil import DEFAULT_SYNC
from ..url.proxy import UpstreamProxy, shown_proxy
from . import values
from .values import FreshnessRule, ModifyHTMLRule, PurgeRule

__all__ = ["Config", "Setting", "effective", "plain", "setting", "settings", "shown_text"]

T = TypeVar("T")
_SETTING = "wwwproxy.setting"


@dataclass(frozen=True)
class Setting:
    """One configuration key: what the rest of the program derives from its declaration."""

    #: the key in the YAML file
    name: str
    #: the YAML value -> the attribute's value; ValueError says what is wrong
    parse: Callable[..., Any]
    #: what the key does, in a line (the /config/ page, docs/configuration.md)
    help: str
    #: the Config attributes it sets: its own, or (listen) one for each item parse returns
    fields: tuple[str, ...] = ()
    #: the value in force as plain data, never a secret (None: the attribute's, by :func:`plain`)
    show: Callable[[Any], Any] | None = None
    #: a value as written that is never sent back to a page: True (a password, typed unseen
    #: too) or a test of the value (a proxy URL with credentials in it)
    secret: bool | Callable[[Any], bool] = False
    #: a change is saved but takes effect at the next start, not at a reload
    restart: bool = False
    #: a list of rules: parse takes the file's name too, and each problem names its item's line
    rules: bool = False

    def value(self, raw: Any, source: str) -> dict[str, Any]:
        """The Config attributes ``raw`` (as YAML gave it) sets; ValueError if it is bad."""
        parsed = self.parse(raw, source) if self.rules else self.parse(raw)
        if len(self.fields) == 1:
            return {self.fields[0]: parsed}
        return dict(zip(self.fields, parsed, strict=True))

    def shown(self, config: Config) -> Any:
        """The value in force in ``config`` as plain data (lists, text, numbers, None)."""
        if self.show is not None:
            return self.show(config)
        return plain(getattr(config, self.fields[0]))

    def hides(self, raw: object) -> bool:
        """Is this value as written (in the file, or typed in) never to be sent back?"""
        return self.secret is True or (callable(self.secret) and self.secret(raw))


def setting(
    default: T,
    parse: Callable[..., Any],
    help: str,
    *,
    key: str = "",
    sets: tuple[str, ...] = (),
    show: Callable[[Any], Any] | None = None,
    secret: bool | Callable[[Any], bool] = False,
    restart: bool = False,
    rules: bool = False,
) -> T:
    """A :class:`Config` field declaring a configuration key (named as the field, unless
    ``key`` names it and ``sets`` the fields it sets).  A secret is kept out of the repr."""
    declared = Setting(key, parse, help, sets, show, secret, restart, rules)
    return field(default=default, repr=secret is False, metadata={_SETTING: declared})


def plain(value: Any) -> Any:
    """An attribute's value as plain data: tuples as lists, paths and networks as text, rules
    as mappings of their shown fields."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, Path | ipaddress.IPv4Network | ipaddress.IPv6Network):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr}
    return value


def _with_credentials(value: object) -> bool:
    """A proxy URL as written with a user name or password in it (a refused one too: its
    password may be right and the rest wrong)."""
    try:
        if isinstance(value, str) and UpstreamProxy.parse(value).authorization is not None:
            return True
    except ValueError:
        pass
    return "@" in str(value)


def _censored(rules: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"{name}: {value}" if value else f"{name}: (removed)" for name, value in rules]


@dataclass(frozen=True)
class Config:
    """The configuration: one :func:`setting` field per key, in the order of
    ``conf/wwwproxy.yaml`` (the order of the /config/ page and docs/configuration.md)."""

    listen_host: str = setting(
        "127.0.0.1",
        values.listen,
        "the proxy's address, HOST:PORT",
        key="listen",
        sets=("listen_host", "listen_port"),
        show=lambda config: config.listen,
        restart=True,
    )
    listen_port: int = 8080  # set by the listen key
    cache: Path = setting(
        Path("cache"),
        values.as_path,
        "the cache directory (unset: ./cache in a checkout, where ./conf/wwwproxy.yaml is, else "
        "$XDG_CACHE_HOME/wwwproxy, ~/.cache/wwwproxy by default)",
        restart=True,
    )
    mode: str = setting(
        "online",
        values.mode,
        "online, offline or autodial at start (switch the running mode on /control/)",
    )
    names: tuple[str, ...] = setting((), values.names, "other host names of this proxy (a list)")
    allowed_clients: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = setting(
        (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")),
        values.networks,
        "client networks served (a list of networks)",
    )
    connect_ports: tuple[int, ...] = setting(
        (443,), values.ports, "ports CONNECT tunnels may go to (a list)"
    )
    password: str | None = setting(
        None,
        values.password,
        "the password for control actions (empty: none)",
        show=lambda config: "(set)" if config.password else None,
        secret=True,
    )
    connect_timeout: float = setting(
        10.0, values.as_seconds, "seconds to wait for a server's connection"
    )
    read_timeout: float = setting(60.0, values.as_seconds, "seconds to wait for a server's data")
    finish_on_disconnect: bool = setting(
        True, values.as_bool, "finish a download when the browser goes away (true/false)"
    )
    finish_on_disconnect_max_kb: int | None = setting(
        None,
        values.kib,
        "... but only one of at most this many KiB, or (next key) already that far along "
        "(empty: no size rule)",
    )
    finish_on_disconnect_percent: int | None = setting(
        None,
        values.percent,
        "... or one of which at least this percentage has come (empty: no percentage rule)",
    )
    censor_request_headers: tuple[tuple[str, str], ...] = setting(
        (),
        values.censor_rules,
        'request headers replaced on the way to servers, or removed with "" (a mapping: '
        '{User-Agent: "...", Referer: ""})',
        show=lambda config: _censored(config.censor_request_headers),
    )
    record_credentials: bool = setting(
        False,
        values.as_bool,
        "write Cookie and Authorization into the archive's request records (false: only "
        "their digests)",
    )
    replay_set_cookie: bool = setting(
        False,
        values.as_bool,
        "send a copy's recorded Set-Cookie when serving it from the cache (true/false)",
    )
    max_decoded_size: int = setting(
        1024**3,
        values.as_size,
        "bytes a cached copy decoded for a browser that does not take its Content-Encoding may "
        "have, e.g. 1 GiB; past it the answer is cut off (a decompression bomb; 0: no limit)",
    )
    request_changed: int = setting(
        0,
        values.as_whole_seconds,
        "online, serve a cached copy younger than this many seconds without asking the server, "
        "even one without freshness information (WWWOFFLE's request-changed; 0: as the server "
        "says)",
    )
    request_expired: bool = setting(
        True,
        values.as_bool,
        "online, ask the server again for a copy whose max-age or Expires has passed (false: "
        "serve it while younger than request_changed; WWWOFFLE's request-expired)",
    )
    request_no_cache: bool = setting(
        True,
        values.as_bool,
        "online, ask the server every time for a copy it marked no-cache (false: serve it while "
        "younger than request_changed; WWWOFFLE's request-no-cache)",
    )
    shared_cache: bool | None = setting(
        None,
        values.shared_cache,
        "obey the rules for a cache several people use (s-maxage, proxy-revalidate, private: "
        "RFC 9111): true, false, or auto (shared unless allowed_clients are all loopback)",
        show=lambda config: "auto" if config.shared_cache is None else config.shared_cache,
    )
    keep_good_copy: bool = setting(
        True,
        values.as_bool,
        "a 4xx/5xx answer is recorded but the good cached copy stays the one served (true/false)",
    )
    fetch_on_online: bool = setting(
        True,
        values.as_bool,
        "switching online fetches the queued requests at once (true/false)",
    )
    sync: str = setting(
        DEFAULT_SYNC,
        values.sync_mode,
        "when a recorded page is safe: write (written before the browser has it all, on disk "
        "within a second), group or flush (on disk before the browser has it all; group "
        "gathers 5 ms of pages into one flush)",
    )
    memory_cache_mb: int = setting(
        64,
        values.as_megabytes,
        "MiB of recently served pages (each up to 1 MiB) answered from memory (0: off)",
    )
    max_connections: int = setting(
        2048,
        values.as_count,
        "open browser connections in all; more are answered 503 (0: no cap)",
    )
    max_client_connections: int = setting(
        256,
        values.as_count,
        "open connections from one client address; more are answered 503 (0: no cap)",
    )
    websocket_max_message: int = setting(
        4 * 1024 * 1024,
        values.as_size,
        "bytes a WebSocket message may have, e.g. 4 MiB, either way; a larger one closes "
        "the WebSocket with 1009 (0: no limit)",
    )
    freshness: tuple[FreshnessRule, ...] = setting(
        (),
        values.freshness,
        "serve a cached copy without asking while it is younger than max_age seconds (a list "
        "of {pattern, max_age})",
        rules=True,
    )
    max_size: int = setting(
        0,
        values.as_size,
        "bytes the cache files may take, e.g. 2 GiB; over it the least recently used pages "
        "are purged down to 90% (0: no limit)",
    )
    keep_captures: int = setting(
        5,
        values.as_captures,
        "captures kept per URL; older ones are purged (0: keep all)",
    )
    purge_after_days: tuple[PurgeRule, ...] = setting(
        (),
        values.purge_after_days,
        "pages not fetched or served for that many days are purged (a list of {pattern, "
        "days}; the first match wins)",
        rules=True,
    )
    modify_html: tuple[ModifyHTMLRule, ...] = setting(
        (),
        values.modify_html,
        "offline reading: HTML served from the cache changed on the way out (a list of "
        "{pattern, mark_links, disable_scripts, disable_meta_refresh, disable_popups})",
        rules=True,
    )
    https_intercept: tuple[str, ...] = setting(
        (),
        values.host_patterns,
        "hosts whose HTTPS is decrypted, recorded and served offline (a list of patterns: *, "
        "example.com, *.example.com, or an IP address such as 127.0.0.1 or ::1, as the browser "
        "names the host)",
    )
    https_bypass: tuple[str, ...] = setting(
        (),
        values.host_patterns,
        "hosts never decrypted, even when https_intercept matches (a list)",
    )
    upstream_ca: Path | None = setting(
        None,
        values.ca_file,
        "a PEM file of extra certificate authorities trusted for upstream TLS",
    )
    upstream_proxy: str | None = setting(
        None,
        values.upstream_proxy,
        "the proxy origins are reached through, http://[user:password@]host:port (unset: the "
        "http_proxy/https_proxy environment variables; direct: none; a password is never "
        "shown: type the whole URL to change it)",
        show=lambda config: (
            shown_proxy(config.upstream_proxy) if config.upstream_proxy is not None else None
        ),
        secret=_with_credentials,
    )
    no_proxy: tuple[str, ...] | None = setting(
        None,
        values.host_patterns,
        "hosts reached directly, not through the upstream proxy (a list of patterns; unset: "
        "the no_proxy environment variable)",
    )
    dont_get: tuple[str, ...] = setting(
        (),
        values.url_patterns,
        "URL patterns never fetched: answered at once with an empty image, script or "
        "stylesheet, or a short page (a list: example.com, *.example.com, */track.gif, "
        "example.com/ads/*)",
    )
    dont_get_status: int = setting(
        200,
        values.dont_get_status,
        "the status of the answer to a dont_get URL (200 to 599)",
    )
    blocklist: tuple[Path, ...] = setting(
        (),
        values.files,
        "hosts-file or AdBlock-domain files whose hosts are added to dont_get (a file or a "
        "list of files; read again on each reload)",
    )
    dont_cache: tuple[str, ...] = setting(
        (),
        values.url_patterns,
        "URL patterns fetched online but never recorded nor served from the cache (a list)",
    )
    dont_queue: tuple[str, ...] = setting(
        (),
        values.url_patterns,
        "URL patterns whose offline misses are not queued (a list)",
    )
    queue_background: bool = setting(
        False,
        values.as_bool,
        "queue the offline misses of browsers' and systems' own background requests (update, "
        "time, telemetry, safe-browsing and connectivity checks: the built-in list in "
        "docs/background-requests.md) like any other; false: they are answered at once, a "
        "connectivity check as online",
    )
    queue_methods: tuple[str, ...] = setting(
        ("GET", "HEAD"),
        values.methods,
        "the request methods whose offline misses are queued (a list; others are answered "
        "503 and not queued)",
    )
    queue_failures: int = setting(
        3,
        values.as_count,
        "a queued request that could not be fetched this many times leaves the queue (listed "
        "once on /index/lastout/); 0: it stays until fetched",
    )
    local_net: tuple[str, ...] = setting(
        (),
        values.url_patterns,
        "URL patterns of the local network: fetched directly, offline too, never recorded (a list)",
    )
    urldb: Path = setting(Path("urldb"), values.as_path, "the URL database directory")
    max_links_per_page: int = setting(
        20000,
        values.as_count,
        "links a crawl (wwwproxy fetch, /refresh/, monitored URLs) takes from one page, in "
        "document order; the rest are counted in its summary (0: no bound)",
    )
    render_browser: str = setting(
        "",
        values.as_str,
        "the Chromium that renders pages for wwwproxy fetch --render, /refresh/'s render and "
        "monitors with render (a path or a command; empty: chromium on PATH)",
    )
    render_timeout: float = setting(
        30.0,
        values.as_seconds,
        "seconds a rendered page may take at most (load, scroll, fonts, network idle); a "
        "page still busy then is taken as it stands",
    )
    render_tabs: int = setting(
        0,
        values.as_count,
        "pages rendered at once, a browser tab each (0: one a core, 2 to 4)",
    )
    render_tab_memory: int = setting(
        512,
        values.as_megabytes,
        "MiB of JavaScript heap one rendering tab may use: a page that takes more crashes its "
        "tab and is reported (0: the browser's own bound)",
    )
    render_browser_args: tuple[str, ...] = setting(
        (),
        values.strings,
        "more command-line flags for the rendering browser (a list, e.g. --lang=de)",
    )
    source: str = "<defaults>"  # the file read (not a key)

    @property
    def listen(self) -> str:
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"

    @functools.cached_property
    def shared(self) -> bool:
        """Is this a shared cache (RFC 9111 §3.5)?  ``shared_cache``, or with ``auto`` whether
        anyone but this machine may use the proxy (``allowed_clients`` beyond loopback)."""
        if self.shared_cache is not None:
            return self.shared_cache
        return not all(
            net.network_address.is_loopback and net.broadcast_address.is_loopback
            for net in self.allowed_clients
        )


def settings(config_class: type[Config] = Config) -> Mapping[str, Setting]:
    """The keys ``config_class`` declares, by name, in the order of its fields."""
    declared = {}
    for attribute in dataclasses.fields(config_class):
        spec = attribute.metadata.get(_SETTING)
        if spec is not None:
            name = spec.name or attribute.name
            declared[name] = dataclasses.replace(
                spec, name=name, fields=spec.fields or (attribute.name,)
            )
    return MappingProxyType(declared)


def effective(config: Config) -> dict[str, Any]:
    """The configuration in force, as plain data, by key (a secret never shown)."""
    return {name: key.shown(config) for name, key in settings(type(config)).items()}


def shown_text(value: object) -> str:
    """A value in force as a person reads it (YAML's ``true``, not Python's ``True``)."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict) and set(value) == {"pattern", "max_age"}:
        return f"{value['pattern']} (max_age {value['max_age']} s)"
    if isinstance(value, list):
        return ", ".join(shown_text(v) for v in value) or "(none)"
    return str(value)
