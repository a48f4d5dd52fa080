"""Load and validate the YAML configuration (``conf/wwwproxy.yaml``).

The file is read with ruamel.yaml's round-trip loader so that (a) every error can name the file,
line and key, and (b) the ``/config/`` page can later edit a value and write the file back with
its comments and order intact.  A config that does not validate is refused as a whole: a proxy
that starts with half a config is worse than one that says what is wrong.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from .http.filters import parse_pattern
from .http.modify_html import ModifyHTMLRule
from .url.proxy import UpstreamProxy

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "Config",
    "ConfigError",
    "FreshnessRule",
    "ModifyHTMLRule",
    "PurgeRule",
    "load_config",
    "parse_config",
    "parse_hostport",
]

DEFAULT_CONFIG_PATH = Path("conf/wwwproxy.yaml")
MODES = ("online", "offline", "autodial")


class ConfigError(ValueError):
    """A configuration problem; the message names file, line and key."""


@dataclass(frozen=True)
class FreshnessRule:
    """Serve a cached copy of URLs matching ``pattern`` without fetching while younger than
    ``max_age`` seconds (WWWOFFLE's purge/fetch-age idea, per URL pattern)."""

    pattern: str
    max_age: int
    regex: re.Pattern[str] = field(compare=False, repr=False)


@dataclass(frozen=True)
class PurgeRule:
    """Remove the cached pages of URLs matching ``pattern`` not used (fetched or served) for
    ``days`` days (WWWOFFLE's purge age, per URL pattern)."""

    pattern: str
    days: float
    regex: re.Pattern[str] = field(compare=False, repr=False)


@dataclass(frozen=True)
class Config:
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    cache: Path = Path("cache")
    mode: str = "online"
    names: tuple[str, ...] = ()
    allowed_clients: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )
    connect_ports: tuple[int, ...] = (443,)
    password: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    finish_on_disconnect: bool = True
    #: with finish_on_disconnect: a download the browser left is finished only if its whole
    #: size is at most this many KiB, or (next key) if that much of it has come already;
    #: neither set (null): always finished (WWWOFFLE's intr-download-size/-percent)
    finish_on_disconnect_max_kb: int | None = None
    finish_on_disconnect_percent: int | None = None
    #: request headers replaced on the way upstream (name, value), removed when the value is
    #: "" (WWWOFFLE's CensorHeader)
    censor_request_headers: tuple[tuple[str, str], ...] = ()
    #: write Cookie and Authorization into the WARC request records (else only digests)
    record_credentials: bool = False
    #: send a copy's recorded Set-Cookie headers with it when it is served from the cache
    replay_set_cookie: bool = False
    freshness: tuple[FreshnessRule, ...] = ()
    #: offline reading: HTML served from the cache changed on the way out (first match wins)
    modify_html: tuple[ModifyHTMLRule, ...] = ()
    #: seconds a copy is served online without asking the origin again, unless the origin
    #: said no-cache/no-store (WWWOFFLE's request-changed); 0: ask every time
    request_changed: int = 600
    #: a 4xx/5xx answer is recorded, but the good copy stays the one served offline
    keep_good_copy: bool = True
    #: `wwwproxy online` (and the /control/ switch to online) fetches the queue at once
    fetch_on_online: bool = True
    #: MiB of hot objects (bodies up to 1 MiB) answered from memory; 0 turns it off
    memory_cache_mb: int = 64
    #: bytes the cache files may take (purged down to 90% when crossed); 0: no limit
    max_size: int = 0
    #: captures kept per URL (the newest, and any a kept one needs); 0: keep all
    keep_captures: int = 5
    #: pages of URLs matching a rule are purged once not used for its days (first match wins)
    purge_after_days: tuple[PurgeRule, ...] = ()
    #: open client connections in all (fewer if the open-files limit has no room); 0: no cap
    max_connections: int = 2048
    #: open connections from one client address; 0: no cap
    max_client_connections: int = 256
    #: host patterns whose HTTPS is intercepted, recorded and served offline (``*`` = all,
    #: ``*.example.com``, ``example.com``); [] = HTTPS only tunnelled
    https_intercept: tuple[str, ...] = ()
    #: host patterns never intercepted (tunnelled as they are: banks, pinned hosts)
    https_bypass: tuple[str, ...] = ()
    #: a PEM file of extra CAs trusted for upstream TLS (besides the system's)
    upstream_ca: Path | None = None
    #: the proxy origins are reached through, ``http://[user:password@]host:port``; None: the
    #: http_proxy/https_proxy environment variables; ``direct``: none, whatever they say
    upstream_proxy: str | None = field(default=None, repr=False)  # may hold a password
    #: host patterns reached directly, not through the upstream proxy; None: the no_proxy
    #: environment variable
    no_proxy: tuple[str, ...] | None = None
    #: URL patterns never fetched: answered at once with an empty image, script, stylesheet
    #: or a short page (WWWOFFLE's DontGet); syntax in wwwproxy.http.filters
    dont_get: tuple[str, ...] = ()
    #: the status of that answer
    dont_get_status: int = 200
    #: hosts-file or AdBlock-domain files whose hosts are added to dont_get (read at each load)
    blocklist: tuple[Path, ...] = ()
    #: URL patterns fetched online but never recorded nor served from the cache (DontCache)
    dont_cache: tuple[str, ...] = ()
    #: URL patterns whose offline misses are not queued (DontRequestOffline)
    dont_queue: tuple[str, ...] = ()
    #: URL patterns of the local network: fetched directly, offline too, never recorded
    local_net: tuple[str, ...] = ()
    urldb: Path = Path("urldb")
    source: str = "<defaults>"

    @property
    def listen(self) -> str:
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"


def parse_hostport(text: str, default_port: int = 8080) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT``, ``HOST`` or ``:PORT``; raises ValueError."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"{text!r}: missing ']'")
        host, rest = text[1:end], text[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else rest
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r}: unexpected {rest!r} after ']'")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        host = "127.0.0.1"
    if not port_text:
        return host, default_port
    if not port_text.isascii() or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: port must be a number from 1 to 65535")
    return host, int(port_text)


# --- validation ------------------------------------------------------------------------------


def _where(source: str, node: Any, key: Any) -> str:
    try:
        line = node.lc.key(key)[0] + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return source
    return f"{source}:{line}"


def _item_where(source: str, seq: Any, index: int) -> str:
    try:
        line = seq.lc.item(index)[0] + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return source
    return f"{source}:{line}"


def _as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__} {value!r}")
    return value


def _as_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _as_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return float(value)


def _as_whole_seconds(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number of seconds >= 0, got {value!r}")
    return value


def _as_megabytes(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 20:
        raise ValueError(f"expected a whole number of MiB from 0 to 1048576, got {value!r}")
    return value


def _as_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 20:
        raise ValueError(f"expected a whole number from 0 (no limit) to 1048576, got {value!r}")
    return value


def _as_port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValueError(f"expected a port number from 1 to 65535, got {value!r}")
    return value


def _as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {type(value).__name__} {value!r}")
    return value


def _listen(value: Any) -> tuple[str, int]:
    return parse_hostport(_as_str(value))


def _mode(value: Any) -> str:
    text = _as_str(value)
    if text not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got {text!r}")
    return text


_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?\.?")


def _networks(value: Any) -> tuple[Any, ...]:
    """CIDR ranges, single addresses and host names; a name is resolved now (at each load and
    reload), to all of its addresses, and one that does not resolve is an error."""
    nets = []
    for item in _as_list(value):
        text = _as_str(item).strip()
        try:
            nets.append(ipaddress.ip_network(text, strict=False))
            continue
        except ValueError as exc:
            if "/" in text or not _HOST_NAME.fullmatch(text):
                raise ValueError(f"bad network {item!r}: {exc}") from None
        nets.extend(_resolved(text))
    return tuple(nets)


def _resolved(name: str) -> list[Any]:
    """The addresses of a host name, each as a one-address network."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"host name {name!r} does not resolve: {reason}") from None
    nets = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]
        net = ipaddress.ip_network(address)
        if net not in nets:
            nets.append(net)
    return nets


def _names(value: Any) -> tuple[str, ...]:
    return tuple(_as_str(v).lower() for v in _as_list(value))


def _ports(value: Any) -> tuple[int, ...]:
    return tuple(_as_port(v) for v in _as_list(value))


_HOST_PATTERN = re.compile(r"\*|(\*\.)?[A-Za-z0-9_.\-]+\.?|\[?[0-9A-Fa-f:.]+\]?")


def _host_patterns(value: Any) -> tuple[str, ...]:
    patterns = []
    for item in _as_list(value):
        text = _as_str(item).strip().lower()
        if not _HOST_PATTERN.fullmatch(text):
            raise ValueError(f"bad host pattern {item!r} (use *, example.com or *.example.com)")
        patterns.append(text)
    return tuple(patterns)


def _upstream_proxy(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = _as_str(value).strip()
    if text != "direct":
        UpstreamProxy.parse(text)  # ValueError says what is wrong
    return text


def _url_patterns(value: Any) -> tuple[str, ...]:
    """``[scheme://]host[:port][/path]`` patterns (wwwproxy.http.filters), checked now."""
    patterns = []
    for item in _as_list(value):
        patterns.append(parse_pattern(_as_str(item)).text)
    return tuple(patterns)


def _files(value: Any) -> tuple[Path, ...]:
    """One file name or a list of them; each must be a readable file."""
    items = [value] if isinstance(value, str) else _as_list(value)
    paths = []
    for item in items:
        path = Path(_as_str(item))
        if not path.is_file():
            raise ValueError(f"{str(path)!r} is not a readable file")
        paths.append(path)
    return tuple(paths)


def _dont_get_status(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 200 <= value <= 599:
        raise ValueError(f"expected an HTTP status from 200 to 599, got {value!r}")
    if value == 304:
        raise ValueError("304 answers a browser's own copy, not a blocked URL")
    return value


def _ca_file(value: Any) -> Path | None:
    if value is None or value == "":
        return None
    path = Path(_as_str(value))
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is not a readable PEM file")
    return path


def _kib(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 40:
        raise ValueError(f"expected a whole number of KiB >= 0 (or null: no limit), got {value!r}")
    return value


def _percent(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise ValueError(f"expected a whole percentage from 0 to 100 (or null), got {value!r}")
    return value


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*")


def _censor_rules(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise ValueError(
            f'expected a mapping of header names to values ("" removes), got {value!r}'
        )
    rules = []
    for name, text in value.items():
        name = _as_str(name)
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a header name")
        if name.lower() in ("host", "content-length", "transfer-encoding", "connection"):
            raise ValueError(f"{name!r} frames the request: it cannot be censored")
        text = "" if text is None else _as_str(text).strip()
        if not _HEADER_VALUE.fullmatch(text):
            raise ValueError(f"the value for {name!r} has a control character")
        rules.append((name, text))
    return tuple(rules)


def _password(value: Any) -> str | None:
    if value is None:
        return None
    text = _as_str(value)
    return text or None


def _rule_regex(item: Any, where: str, number: str) -> re.Pattern[str]:
    """The regex of a ``{pattern: REGEX, <number>: N}`` rule (freshness, purge_after_days)."""
    if not isinstance(item, dict) or set(item) != {"pattern", number}:
        raise ValueError(f"{where}: each rule has exactly 'pattern' and '{number}'")
    pattern = _as_str(item["pattern"])
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{where}: bad pattern {pattern!r}: {exc}") from None


def _freshness(value: Any, source: str) -> tuple[FreshnessRule, ...]:
    rules = []
    for i, item in enumerate(_as_list(value)):
        where = f"{_item_where(source, value, i)}: key 'freshness'"
        regex = _rule_regex(item, where, "max_age")
        pattern = regex.pattern
        max_age = item["max_age"]
        if isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0:
            raise ValueError(f"{where}: max_age must be a whole number of seconds >= 0")
        rules.append(FreshnessRule(pattern, max_age, regex))
    return tuple(rules)


def _purge_after_days(value: Any, source: str) -> tuple[PurgeRule, ...]:
    rules = []
    for i, item in enumerate(_as_list(value)):
        where = f"{_item_where(source, value, i)}: key 'purge_after_days'"
        regex = _rule_regex(item, where, "days")
        days = item["days"]
        if isinstance(days, bool) or not isinstance(days, int | float) or not days > 0:
            raise ValueError(f"{where}: days must be a number of days > 0")
        rules.append(PurgeRule(regex.pattern, float(days), regex))
    return tuple(rules)


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(i?)B?", re.IGNORECASE)


def _as_size(value: Any) -> int:
    """Bytes from ``2 GiB``, ``500MB``, ``1.5G`` (K/M/G/T alone or with ``iB`` are powers of
    1024, with ``B`` alone of 1000) or a whole number of bytes; 0, empty or null: no limit."""
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"expected a size such as 2 GiB, 500 MB or 0 (no limit), got {value!r}")
    number, unit, binary = match.groups()
    power = "KMGT".index(unit.upper()) + 1 if unit else 0
    base = 1024 if binary or (unit and not value.strip().upper().endswith("B")) else 1000
    return int(float(number) * base**power)


def _as_captures(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number of captures >= 0 (0: keep all), got {value!r}")
    return value


_MODIFY_HTML_FLAGS = ("mark_links", "disable_scripts", "disable_meta_refresh", "disable_popups")


def _modify_html(value: Any, source: str) -> tuple[ModifyHTMLRule, ...]:
    try:
        items = _as_list(value)
    except ValueError as exc:
        raise ValueError(f"{source}: key 'modify_html': {exc}") from None
    rules = []
    for i, item in enumerate(items):
        where = f"{_item_where(source, value, i)}: key 'modify_html'"
        if not isinstance(item, dict) or "pattern" not in item:
            raise ValueError(f"{where}: each rule is a mapping with a 'pattern'")
        unknown = sorted(str(k) for k in item if k != "pattern" and k not in _MODIFY_HTML_FLAGS)
        if unknown:
            known = ", ".join(("pattern", *_MODIFY_HTML_FLAGS))
            raise ValueError(f"{where}: unknown {', '.join(unknown)} (known: {known})")
        pattern = _as_str(item["pattern"])
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{where}: bad pattern {pattern!r}: {exc}") from None
        flags = {}
        for name in _MODIFY_HTML_FLAGS:
            if name in item:
                try:
                    flags[name] = _as_bool(item[name])
                except ValueError as exc:
                    raise ValueError(f"{where}: {name}: {exc}") from None
        rules.append(ModifyHTMLRule(pattern, regex, **flags))
    return tuple(rules)


_RULE_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "freshness": _freshness,
    "purge_after_days": _purge_after_days,
    "modify_html": _modify_html,
}

_KEYS: dict[str, Callable[[Any], Any]] = {
    "listen": _listen,
    "cache": lambda v: Path(_as_str(v)),
    "mode": _mode,
    "names": _names,
    "allowed_clients": _networks,
    "connect_ports": _ports,
    "password": _password,
    "connect_timeout": _as_seconds,
    "read_timeout": _as_seconds,
    "finish_on_disconnect": _as_bool,
    "finish_on_disconnect_max_kb": _kib,
    "finish_on_disconnect_percent": _percent,
    "censor_request_headers": _censor_rules,
    "record_credentials": _as_bool,
    "replay_set_cookie": _as_bool,
    "request_changed": _as_whole_seconds,
    "keep_good_copy": _as_bool,
    "fetch_on_online": _as_bool,
    "memory_cache_mb": _as_megabytes,
    "max_connections": _as_count,
    "max_client_connections": _as_count,
    "freshness": lambda v: v,  # needs the source for per-item lines; handled below
    "max_size": _as_size,
    "keep_captures": _as_captures,
    "purge_after_days": lambda v: v,  # as freshness
    "modify_html": lambda v: v,  # as freshness
    "https_intercept": _host_patterns,
    "https_bypass": _host_patterns,
    "upstream_ca": _ca_file,
    "upstream_proxy": _upstream_proxy,
    "no_proxy": _host_patterns,
    "dont_get": _url_patterns,
    "dont_get_status": _dont_get_status,
    "blocklist": _files,
    "dont_cache": _url_patterns,
    "dont_queue": _url_patterns,
    "local_net": _url_patterns,
    "urldb": lambda v: Path(_as_str(v)),
}


def _yaml_problem(exc: YAMLError) -> str:
    """ruamel's several-line message as one line with the place: ``problem (line L, column C)``."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return problem
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"


def parse_config(text: str, source: str = "<string>") -> Config:
    """Validate YAML text into a :class:`Config`; raises :class:`ConfigError` naming the place."""
    try:
        data = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        data = CommentedMap()
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping of keys to values")
    values: dict[str, Any] = {"source": source}
    problems = []
    for key, raw in data.items():
        where = _where(source, data, key)
        if key not in _KEYS:
            known = ", ".join(sorted(_KEYS))
            problems.append(f"{where}: unknown key {key!r} (known keys: {known})")
            continue
        try:
            if key in _RULE_KEYS:
                values[key] = _RULE_KEYS[key](raw, source)
            elif key == "listen":
                values["listen_host"], values["listen_port"] = _listen(raw)
            else:
                values[key] = _KEYS[key](raw)
        except ValueError as exc:
            # a rule's problems name its item's line; the rest (not a list) the key's
            placed = key in _RULE_KEYS and str(exc).startswith(source)
            problems.append(str(exc) if placed else f"{where}: key {key!r}: {exc}")
    if problems:
        raise ConfigError("\n".join(problems))
    return Config(**values)


def load_config(path: str | Path | None = None) -> Config:
    """Read the config file; a missing default file means the defaults, a missing named one is
    an error."""
    if path is None:
        path = DEFAULT_CONFIG_PATH
        if not path.exists():
            return Config()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_config(text, str(path))
