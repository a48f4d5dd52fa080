"""Host patterns: the one syntax of the config's host lists (``https_intercept``,
``https_bypass``, ``no_proxy``): ``*``, ``example.com``, ``*.example.com``, an IP address."""

from __future__ import annotations

import ipaddress

__all__ = ["host_ip", "host_matches", "normalize_host"]


def normalize_host(host: str) -> str:
    """Lower case, no surrounding brackets, no trailing dot: one spelling per host."""
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.endswith("."):
        host = host[:-1]
    return host.lower()


def host_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address ``host`` spells (normalized, no brackets), or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def host_matches(pattern: str, host: str) -> bool:
    """Whether ``host`` matches one pattern: ``*`` (every host), ``*.example.com`` (every
    sub-domain, at any depth, but not example.com itself) or an exact host.  Case and a
    trailing dot do not matter; an IP literal (brackets allowed) matches only the same
    address, never a ``*.`` pattern."""
    pattern, host = normalize_host(pattern), normalize_host(host)
    if not pattern or not host:
        return False
    if pattern == "*":
        return True
    address = host_ip(host)
    if pattern.startswith("*."):
        suffix = pattern[1:]  # ".example.com"
        return address is None and len(host) > len(suffix) and host.endswith(suffix)
    pattern_ip = host_ip(pattern)
    if address is not None or pattern_ip is not None:
        return address is not None and address == pattern_ip
    return host == pattern
