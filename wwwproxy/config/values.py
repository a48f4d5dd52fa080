"""The parsers of configuration values: each takes a key's value as YAML gave it and returns
the typed value the :class:`~wwwproxy.config.Config` attribute holds, or raises ValueError saying
what is wrong (the caller adds the file, line and key).  Rule lists (freshness,
purge_after_days, modify_html) also take the file's name: each problem names its item's line.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fsutil import SYNC_MODES
from ..http.filters import parse_pattern
from ..http.modify_html import ModifyHTMLRule
from ..url.proxy import UpstreamProxy

MODES = ("online", "offline", "autodial")


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


def where_in(source: str, node: Any, key: Any) -> str:
    """``source:line`` of a mapping's key or a sequence's item (by index) as the YAML file has
    it; ``source`` alone for a value that does not know its lines."""
    try:
        lines = node.lc
        line = (lines.item(key) if isinstance(node, list) else lines.key(key))[0] + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return source
    return f"{source}:{line}"


def as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__} {value!r}")
    return value


def as_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def shared_cache(value: Any) -> bool | None:
    """true, false or auto (None: decided by ``allowed_clients``)."""
    if value == "auto":
        return None
    if not isinstance(value, bool):
        raise ValueError(f"expected true, false or auto, got {value!r}")
    return value


def as_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return float(value)


def as_whole_seconds(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number of seconds >= 0, got {value!r}")
    return value


def as_megabytes(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 20:
        raise ValueError(f"expected a whole number of MiB from 0 to 1048576, got {value!r}")
    return value


def as_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 20:
        raise ValueError(f"expected a whole number from 0 (no limit) to 1048576, got {value!r}")
    return value


def as_port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValueError(f"expected a port number from 1 to 65535, got {value!r}")
    return value


def as_path(value: Any) -> Path:
    return Path(as_str(value))


def as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {type(value).__name__} {value!r}")
    return value


def strings(value: Any) -> tuple[str, ...]:
    """A list of strings."""
    return tuple(as_str(item) for item in as_list(value))


def listen(value: Any) -> tuple[str, int]:
    return parse_hostport(as_str(value))


def sync_mode(value: Any) -> str:
    text = as_str(value)
    if text not in SYNC_MODES:
        raise ValueError(f"expected one of {', '.join(SYNC_MODES)}, got {text!r}")
    return text


def mode(value: Any) -> str:
    text = as_str(value)
    if text not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got {text!r}")
    return text


_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?\.?")


def networks(value: Any) -> tuple[Any, ...]:
    """CIDR ranges, single addresses and host names; a name is resolved now (at each load and
    reload), to all of its addresses, and one that does not resolve is an error."""
    nets = []
    for item in as_list(value):
        text = as_str(item).strip()
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


def names(value: Any) -> tuple[str, ...]:
    return tuple(as_str(v).lower() for v in as_list(value))


_METHOD = re.compile(r"[A-Za-z!#$%&'*+.^_`|~0-9-]+")


def methods(value: Any) -> tuple[str, ...]:
    """HTTP request methods (tokens, RFC 9110 §9), in capitals."""
    out = []
    for item in as_list(value):
        text = as_str(item).strip()
        if not _METHOD.fullmatch(text):
            raise ValueError(f"not a request method: {item!r}")
        out.append(text.upper())
    return tuple(out)


def ports(value: Any) -> tuple[int, ...]:
    return tuple(as_port(v) for v in as_list(value))


_HOST_PATTERN = re.compile(r"\*|(\*\.)?[A-Za-z0-9_.\-]+\.?|\[?[0-9A-Fa-f:.]+\]?")


def host_patterns(value: Any) -> tuple[str, ...]:
    patterns = []
    for item in as_list(value):
        text = as_str(item).strip().lower()
        if not _HOST_PATTERN.fullmatch(text):
            raise ValueError(
                f"bad host pattern {item!r} (use *, example.com, *.example.com or an IP address)"
            )
        patterns.append(text)
    return tuple(patterns)


def upstream_proxy(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = as_str(value).strip()
    if text != "direct":
        UpstreamProxy.parse(text)  # ValueError says what is wrong
    return text


def url_patterns(value: Any) -> tuple[str, ...]:
    """``[scheme://]host[:port][/path]`` patterns (wwwproxy.http.filters), checked now."""
    patterns = []
    for item in as_list(value):
        patterns.append(parse_pattern(as_str(item)).text)
    return tuple(patterns)


def files(value: Any) -> tuple[Path, ...]:
    """One file name or a list of them; each must be a readable file."""
    items = [value] if isinstance(value, str) else as_list(value)
    paths = []
    for item in items:
        path = Path(as_str(item))
        if not path.is_file():
            raise ValueError(f"{str(path)!r} is not a readable file")
        paths.append(path)
    return tuple(paths)


def dont_get_status(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 200 <= value <= 599:
        raise ValueError(f"expected an HTTP status from 200 to 599, got {value!r}")
    if value == 304:
        raise ValueError("304 answers a browser's own copy, not a blocked URL")
    return value


def ca_file(value: Any) -> Path | None:
    if value is None or value == "":
        return None
    path = Path(as_str(value))
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is not a readable PEM file")
    return path


def kib(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 40:
        raise ValueError(f"expected a whole number of KiB >= 0 (or null: no limit), got {value!r}")
    return value


def percent(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise ValueError(f"expected a whole percentage from 0 to 100 (or null), got {value!r}")
    return value


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*")


def censor_rules(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise ValueError(
            f'expected a mapping of header names to values ("" removes), got {value!r}'
        )
    rules = []
    for name, text in value.items():
        name = as_str(name)
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a header name")
        if name.lower() in ("host", "content-length", "transfer-encoding", "connection"):
            raise ValueError(f"{name!r} frames the request: it cannot be censored")
        text = "" if text is None else as_str(text).strip()
        if not _HEADER_VALUE.fullmatch(text):
            raise ValueError(f"the value for {name!r} has a control character")
        rules.append((name, text))
    return tuple(rules)


def password(value: Any) -> str | None:
    if value is None:
        return None
    text = as_str(value)
    return text or None


def _rule_regex(item: Any, where: str, number: str) -> re.Pattern[str]:
    """The regex of a ``{pattern: REGEX, <number>: N}`` rule (freshness, purge_after_days)."""
    if not isinstance(item, dict) or set(item) != {"pattern", number}:
        raise ValueError(f"{where}: each rule has exactly 'pattern' and '{number}'")
    pattern = as_str(item["pattern"])
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{where}: bad pattern {pattern!r}: {exc}") from None


def freshness(value: Any, source: str) -> tuple[FreshnessRule, ...]:
    rules = []
    for i, item in enumerate(as_list(value)):
        where = f"{where_in(source, value, i)}: key 'freshness'"
        regex = _rule_regex(item, where, "max_age")
        pattern = regex.pattern
        max_age = item["max_age"]
        if isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0:
            raise ValueError(f"{where}: max_age must be a whole number of seconds >= 0")
        rules.append(FreshnessRule(pattern, max_age, regex))
    return tuple(rules)


def purge_after_days(value: Any, source: str) -> tuple[PurgeRule, ...]:
    rules = []
    for i, item in enumerate(as_list(value)):
        where = f"{where_in(source, value, i)}: key 'purge_after_days'"
        regex = _rule_regex(item, where, "days")
        days = item["days"]
        if isinstance(days, bool) or not isinstance(days, int | float) or not days > 0:
            raise ValueError(f"{where}: days must be a number of days > 0")
        rules.append(PurgeRule(regex.pattern, float(days), regex))
    return tuple(rules)


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(i?)B?", re.IGNORECASE)


def as_size(value: Any) -> int:
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


def as_captures(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number of captures >= 0 (0: keep all), got {value!r}")
    return value


_MODIFY_HTML_FLAGS = ("mark_links", "disable_scripts", "disable_meta_refresh", "disable_popups")


def modify_html(value: Any, source: str) -> tuple[ModifyHTMLRule, ...]:
    try:
        items = as_list(value)
    except ValueError as exc:
        raise ValueError(f"{source}: key 'modify_html': {exc}") from None
    rules = []
    for i, item in enumerate(items):
        where = f"{where_in(source, value, i)}: key 'modify_html'"
        if not isinstance(item, dict) or "pattern" not in item:
            raise ValueError(f"{where}: each rule is a mapping with a 'pattern'")
        unknown = sorted(str(k) for k in item if k != "pattern" and k not in _MODIFY_HTML_FLAGS)
        if unknown:
            known = ", ".join(("pattern", *_MODIFY_HTML_FLAGS))
            raise ValueError(f"{where}: unknown {', '.join(unknown)} (known: {known})")
        pattern = as_str(item["pattern"])
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{where}: bad pattern {pattern!r}: {exc}") from None
        flags = {}
        for name in _MODIFY_HTML_FLAGS:
            if name in item:
                try:
                    flags[name] = as_bool(item[name])
                except ValueError as exc:
                    raise ValueError(f"{where}: {name}: {exc}") from None
        rules.append(ModifyHTMLRule(pattern, regex, **flags))
    return tuple(rules)
