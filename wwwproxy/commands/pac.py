"""``/proxy.pac``: a proxy auto-configuration file, for browsers set up with its URL
(``http://localhost:8080/proxy.pac``) instead of a proxy address.

What the proxy would only pass through goes DIRECT: ``local_net`` (the proxy fetches it
directly and never records it), ``https_bypass`` hosts over HTTPS (tunnelled, never read), and
HTTPS to ports outside ``connect_ports`` (the proxy refuses those tunnels).  Everything else goes
through the proxy, with no DIRECT fallback: a page the proxy cannot get is one it queues.  With
an ``upstream_proxy`` only ``local_net`` goes DIRECT (the network may have no other way out).

The file is made by :func:`proxy_pac` from the configuration; every value goes into the
JavaScript as a JSON string (escaped, ASCII), never as code.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from aiohttp import web

from ..http.filters import parse_pattern
from ..url.hosts import host_ip, normalize_host
from .context import Context

__all__ = ["CONTENT_TYPE", "page", "proxy_pac"]

CONTENT_TYPE = "application/x-ns-proxy-autoconfig"

_SCRIPT = """\
// wwwproxy proxy auto-configuration, made from its configuration. DIRECT: local_net, and
// HTTPS the proxy only tunnels (https_bypass, ports outside connect_ports); the rest through
// the proxy.
var PROXY = %(proxy)s;
// local_net: [scheme or "", host or "" (any), sub-domains only, port or 0, path regex or "",
//             the regex covers the query]
var LOCAL_NET = %(local)s;
// https_bypass: [host or "" (any), sub-domains only]
var BYPASS = %(bypass)s;
var CONNECT_PORTS = %(ports)s;

function wwwproxyHost(host) {
  host = host.toLowerCase();
  if (host.charAt(0) == "[") host = host.substring(1, host.length - 1);
  if (host.charAt(host.length - 1) == ".") host = host.substring(0, host.length - 1);
  return host;
}

function wwwproxyHostMatches(host, pattern, subdomains) {
  if (pattern == "") return true;
  if (!subdomains) return host == pattern;
  var suffix = "." + pattern;
  return host.length > suffix.length &&
    host.substring(host.length - suffix.length) == suffix;
}

function FindProxyForURL(url, host) {
  var scheme = url.substring(0, url.indexOf(":")).toLowerCase();
  var parts = url.match(/^[^:]*:\\/\\/(\\[[^\\]]*\\]|[^\\/?#:]*)(?::(\\d+))?([^?#]*)(\\?[^#]*)?/);
  var defaults = {"http": 80, "ws": 80, "https": 443, "wss": 443};
  var port = parts && parts[2] ? parseInt(parts[2], 10) : (defaults[scheme] || 0);
  var path = parts && parts[3] ? parts[3] : "/";
  var query = parts && parts[4] ? parts[4] : "";
  var secure = scheme == "https" || scheme == "wss";
  var web = secure ? "https" : "http";
  host = wwwproxyHost(host);
  for (var i = 0; i < LOCAL_NET.length; i++) {
    var p = LOCAL_NET[i];
    if (p[0] != "" && p[0] != web) continue;
    if (!wwwproxyHostMatches(host, p[1], p[2])) continue;
    if (p[3] != 0 && p[3] != port) continue;
    if (p[4] != "" && !new RegExp("^(?:" + p[4] + ")$").test(p[5] ? path + query : path)) continue;
    return "DIRECT";
  }
  if (secure) {
    for (var j = 0; j < BYPASS.length; j++) {
      if (wwwproxyHostMatches(host, BYPASS[j][0], BYPASS[j][1])) return "DIRECT";
    }
    if (CONNECT_PORTS !== null && !CONNECT_PORTS.hasOwnProperty(String(port))) return "DIRECT";
  }
  return PROXY;
}
"""


def _js(value: object) -> str:
    """A value as a JavaScript literal: JSON, ASCII only (U+2028 and the like escaped)."""
    return json.dumps(value, ensure_ascii=True)


def _pac_host(host: str) -> str:
    """A host as the script compares it: no brackets, an address in its one spelling."""
    host = normalize_host(host)
    address = host_ip(host)
    return host if address is None else str(address)


def _host_pattern(pattern: str) -> list[object]:
    """An ``https_bypass`` pattern as ``[host, sub-domains only]``."""
    pattern = normalize_host(pattern)
    if pattern == "*":
        return ["", False]
    if pattern.startswith("*."):
        return [_pac_host(pattern[2:]), True]
    return [_pac_host(pattern), False]


def proxy_pac(
    proxy: str,
    local_net: Sequence[str],
    https_bypass: Sequence[str],
    connect_ports: Sequence[int],
    *,
    upstream_proxy: bool = False,
) -> str:
    """The PAC script for a proxy reached at ``proxy`` (host:port) with these settings."""
    local = []
    for text in local_net:
        pattern = parse_pattern(text)
        local.append(
            [
                pattern.scheme or "",
                _pac_host(pattern.host) if pattern.host else "",
                pattern.subdomains,
                pattern.port or 0,
                pattern.path.pattern if pattern.path is not None else "",
                pattern.with_query,
            ]
        )
    bypass = [] if upstream_proxy else [_host_pattern(p) for p in https_bypass]
    ports = None if upstream_proxy else {str(port): True for port in connect_ports}
    return _SCRIPT % {
        "proxy": _js(f"PROXY {proxy}"),
        "local": _js(local),
        "bypass": _js(bypass),
        "ports": _js(ports),
    }


def _proxy_address(ctx: Context) -> str:
    """How the browser reached the proxy (the Host it asked for the file), else the proxy's
    own name for itself."""
    asked = ctx.request.host
    try:
        parsed = parse_pattern(f"http://{asked}")
    except ValueError:
        parsed = None
    if parsed is not None and parsed.host and parsed.port is not None and not parsed.subdomains:
        return f"{parsed.host}:{parsed.port}"
    return ctx.services.local_host


async def page(ctx: Context) -> web.StreamResponse:
    config = ctx.services.config
    script = proxy_pac(
        _proxy_address(ctx),
        config.local_net,
        config.https_bypass,
        config.connect_ports,
        upstream_proxy=config.upstream_proxy is not None,
    )
    return web.Response(
        body=script.encode("ascii"),  # ASCII throughout: every value is escaped JSON
        content_type=CONTENT_TYPE,
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )
