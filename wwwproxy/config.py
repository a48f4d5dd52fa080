"""Load and validate the YAML configuration (``conf/wwwproxy.yaml``).

The file is read with ruamel.yaml's round-trip loader so that (a) every error can name the file,
line and key, and (b) the ``/config/`` page can later edit a value and write the file back with
its comments and order intact.  A config that does not validate is refused as a whole: a proxy
that starts with half a config is worse than one that says what is wrong.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "Config",
    "ConfigError",
    "FreshnessRule",
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
    freshness: tuple[FreshnessRule, ...] = ()
    #: seconds a copy is served online without asking the origin again, unless the origin
    #: said no-cache/no-store (WWWOFFLE's request-changed); 0: ask every time
    request_changed: int = 600
    #: a 4xx/5xx answer is recorded, but the good copy stays the one served offline
    keep_good_copy: bool = True
    #: `wwwproxy online` (and the /control/ switch to online) fetches the queue at once
    fetch_on_online: bool = True
    #: MiB of hot objects (bodies up to 1 MiB) answered from memory; 0 turns it off
    memory_cache_mb: int = 64
    #: host patterns whose HTTPS is intercepted, recorded and served offline (``*`` = all,
    #: ``*.example.com``, ``example.com``); [] = HTTPS only tunnelled
    https_intercept: tuple[str, ...] = ()
    #: host patterns never intercepted (tunnelled as they are: banks, pinned hosts)
    https_bypass: tuple[str, ...] = ()
    #: a PEM file of extra CAs trusted for upstream TLS (besides the system's)
    upstream_ca: Path | None = None
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


def _networks(value: Any) -> tuple[Any, ...]:
    nets = []
    for item in _as_list(value):
        try:
            nets.append(ipaddress.ip_network(_as_str(item), strict=False))
        except ValueError as exc:
            raise ValueError(f"bad network {item!r}: {exc}") from None
    return tuple(nets)


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


def _ca_file(value: Any) -> Path | None:
    if value is None or value == "":
        return None
    path = Path(_as_str(value))
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is not a readable PEM file")
    return path


def _password(value: Any) -> str | None:
    if value is None:
        return None
    text = _as_str(value)
    return text or None


def _freshness(value: Any, source: str) -> tuple[FreshnessRule, ...]:
    rules = []
    for i, item in enumerate(_as_list(value)):
        where = f"{_item_where(source, value, i)}: key 'freshness'"
        if not isinstance(item, dict) or set(item) != {"pattern", "max_age"}:
            raise ValueError(f"{where}: each rule has exactly 'pattern' and 'max_age'")
        pattern = _as_str(item["pattern"])
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{where}: bad pattern {pattern!r}: {exc}") from None
        max_age = item["max_age"]
        if isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0:
            raise ValueError(f"{where}: max_age must be a whole number of seconds >= 0")
        rules.append(FreshnessRule(pattern, max_age, regex))
    return tuple(rules)


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
    "request_changed": _as_whole_seconds,
    "keep_good_copy": _as_bool,
    "fetch_on_online": _as_bool,
    "memory_cache_mb": _as_megabytes,
    "freshness": lambda v: v,  # needs the source for per-item lines; handled below
    "https_intercept": _host_patterns,
    "https_bypass": _host_patterns,
    "upstream_ca": _ca_file,
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
            if key == "freshness":
                values["freshness"] = _freshness(raw, source)
            elif key == "listen":
                values["listen_host"], values["listen_port"] = _listen(raw)
            else:
                values[key] = _KEYS[key](raw)
        except ValueError as exc:
            # freshness problems already name their item's line
            problems.append(str(exc) if key == "freshness" else f"{where}: key {key!r}: {exc}")
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
