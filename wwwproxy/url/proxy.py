"""Proxy URLs: credentials in a URL as an ``Authorization`` value, the upstream proxy's
``http://[user:password@]host:port``, and the ``no_proxy`` environment variable as host
patterns (:mod:`wwwproxy.url.hosts`).  Pure: the config validates with these, the upstream
client uses them."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from .canonical import URL, InvalidURL, canonicalize
from .hosts import host_ip

__all__ = ["UpstreamProxy", "basic_authorization", "no_proxy_patterns", "shown_proxy"]


def basic_authorization(url: URL) -> str | None:
    """The ``Authorization`` value for credentials in the URL (RFC 7617), from the bytes the
    URL holds, as browsers send them (UTF-8 for non-ASCII text); None without credentials."""
    if url.user is None:
        return None
    credentials = unquote_to_bytes(url.user) + b":" + unquote_to_bytes(url.password or "")
    return "Basic " + base64.b64encode(credentials).decode("ascii")


@dataclass(frozen=True)
class UpstreamProxy:
    """A proxy to reach origins through (WWWOFFLE's Proxy section).  ``authorization`` (from
    the credentials in its URL) goes to that proxy only, as ``Proxy-Authorization``; it is
    kept out of ``repr`` and of :attr:`address`, which is what logs and pages show."""

    host: str  # as in a URL: an IPv6 address in brackets
    port: int
    authorization: str | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> UpstreamProxy:
        """``http://[user:pass@]host:port`` (``host:port`` alone means http); ValueError says
        what is wrong.  Only an http proxy is supported: HTTPS reaches it with CONNECT."""
        text = text.strip()
        if "://" not in text:
            text = "http://" + text
        scheme = text.split("://", 1)[0].lower()
        if scheme != "http":
            raise ValueError(f"a {scheme}:// proxy is not supported (use http://host:port)")
        try:
            url = canonicalize(text)
        except InvalidURL as exc:
            raise ValueError(exc.reason) from None
        if url.local:
            raise ValueError("it names no host (use http://host:port)")
        if url.path != "/" or url.args is not None:
            raise ValueError("a proxy URL is http://[user:password@]host:port, without a path")
        return cls(url.host, url.port or 80, basic_authorization(url))


def no_proxy_patterns(value: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``no_proxy`` environment variable (comma-separated, as curl and Python read it:
    ``example.com`` and ``.example.com`` both mean that host and its sub-domains, ``*`` every
    host, a port is ignored) as host patterns, and the entries that are none (an address
    range, which curl reads but Python does not)."""
    patterns: list[str] = []
    skipped: list[str] = []
    for entry in value.split(","):
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            patterns.append("*")
            continue
        host = entry
        if host.startswith("[") and "]" in host:
            host = host[: host.index("]") + 1]
        elif host.count(":") == 1:
            host = host.split(":", 1)[0]
        host = host.lstrip(".")
        if not host or "/" in host or "*" in host:
            skipped.append(entry)
            continue
        patterns.append(host)
        if host_ip(host.strip("[]")) is None:
            patterns.append("*." + host)
    return tuple(patterns), tuple(skipped)


def shown_proxy(text: str) -> str:
    """A proxy URL as pages and logs may show it: its credentials masked (``***@``)."""
    if text.strip() == "direct":
        return "direct"
    try:
        proxy = UpstreamProxy.parse(text)
    except ValueError:
        return "(invalid)"
    return f"http://{'***@' if proxy.authorization else ''}{proxy.address}"
