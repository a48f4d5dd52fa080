"""Requests to origin servers (aiohttp client), with bounded timeouts and raw bodies.

Bodies are taken as the origin sent them (``auto_decompress=False``): the archive must hold the
bytes the browser received, with their Content-Encoding, so a replay is byte-identical.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

import aiohttp
from aiohttp import http_writer
from multidict import CIMultiDict
from yarl import URL as YURL

from ..config import Config
from ..url import URL, canonicalize
from ..url.hosts import host_matches
from ..url.proxy import UpstreamProxy, basic_authorization, no_proxy_patterns
from .upstream_protocol import UpstreamConnector

__all__ = [
    "DIRECT",
    "ProxySettings",
    "UpstreamError",
    "UpstreamProxy",
    "UpstreamTimeouts",
    "basic_authorization",
    "describe_error",
    "describe_proxy_error",
    "new_session",
    "no_proxy_patterns",
    "open_upstream",
    "proxy_arguments",
    "proxy_settings",
    "serialize_head",
    "upstream_url",
]

log = logging.getLogger("wwwproxy.recording")


class UpstreamError(Exception):
    """The origin could not be reached or failed mid-response; ``status`` is 502 or 504.
    ``untrusted``: its TLS certificate failed verification (never answered with a copy)."""

    def __init__(self, url: str, reason: str, status: int = 502, *, untrusted: bool = False):
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status
        self.untrusted = untrusted


def tls_context(extra_ca: str | os.PathLike[str] | None = None) -> ssl.SSLContext:
    """Upstream TLS: verified against the system's CAs, plus ``extra_ca`` (a PEM file: a
    corporate or test CA).  Nothing is downgraded; ValueError says what is wrong with the file."""
    context = ssl.create_default_context()
    if extra_ca is not None:
        try:
            context.load_verify_locations(cafile=os.fspath(extra_ca))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"upstream_ca {os.fspath(extra_ca)!r}: {exc}") from None
    return context


@dataclass(frozen=True)
class UpstreamTimeouts:
    connect: float = 10.0
    read: float = 60.0


# --- header bytes as they came ----------------------------------------------------------------

#: what aiohttp refuses in a head (RFC 9110 §5.5): control characters but HTAB, and DEL
_FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _escaped(text: str) -> bool:
    """Does ``text`` hold bytes that were not UTF-8 (surrogate escapes), which aiohttp's
    serializer would drop (its C one) or refuse (its Python one)?"""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


#: aiohttp's own serializer (C), for the heads that are text throughout
_AIOHTTP_HEAD = http_writer._serialize_headers


def serialize_head(status_line: str, headers: CIMultiDict[str]) -> bytes:
    """A request or response head as aiohttp writes it, but a header that came with bytes
    that are not UTF-8 (held as surrogate escapes, as aiohttp's parser decodes them) goes out
    as exactly those bytes: ``caf\\xe9`` reaches the origin as it came, not as ``caf``.
    Control characters are refused as aiohttp refuses them (ValueError), so CR, LF and NUL
    never reach the wire.  Heads without such bytes take aiohttp's fast serializer."""
    # header names are tokens (ASCII): aiohttp's parser and the config refuse others
    values = "".join(headers.values())
    if values.isascii() or not _escaped(values):
        return _AIOHTTP_HEAD(status_line, headers)
    lines = [status_line, *(f"{name}: {value}" for name, value in headers.items())]
    if any(_FORBIDDEN.search(line) for line in lines):
        raise ValueError(
            "Forbidden control character detected in headers. Potential header injection attack."
        )
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


# aiohttp builds every head in ``http_writer._serialize_headers``, a module global it looks up
# on each call (its request and response classes offer no other hook: ClientRequest.send makes
# its StreamWriter itself), so that is where the header bytes are kept.
http_writer._serialize_headers = serialize_head


def new_session(
    timeouts: UpstreamTimeouts,
    limit_per_host: int = 8,
    resolver: aiohttp.abc.AbstractResolver | None = None,
    *,
    limit: int = 256,
    ssl_context: ssl.SSLContext | None = None,
) -> aiohttp.ClientSession:
    """One shared client session: keep-alive to origins, no cookies, no decompression, its
    responses read by :class:`~.upstream_protocol.UpstreamProtocol` (interim responses
    reported, extra bytes after a response dropped).
    ``resolver`` replaces DNS (tests send names such as ``example.com`` to local servers).
    ``limit_per_host`` and ``limit`` bound the open connections (0: no bound); a request over
    the bound waits, without a time limit, for a response to finish."""
    tls = ssl_context if ssl_context is not None else tls_context()
    if resolver is None:
        connector = UpstreamConnector(
            limit=limit, limit_per_host=limit_per_host, ttl_dns_cache=60, ssl=tls
        )
    else:
        connector = UpstreamConnector(
            limit=limit,
            limit_per_host=limit_per_host,
            resolver=resolver,
            use_dns_cache=False,
            ssl=tls,
        )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect, sock_read=timeouts.read
        ),
        # only what the browser sent: no Content-Type made up for a body sent without one
        skip_auto_headers=("Accept-Encoding", "User-Agent", "Accept", "Content-Type"),
        trust_env=False,
    )


def upstream_url(url: URL, target: str | None = None) -> YURL:
    """What is asked for upstream: the canonical URL's scheme and authority (so the Host header
    is the canonical one) with ``target``, the browser's own path and query
    (:func:`~wwwproxy.url.wire.wire_target`); without one, the canonical URL.  Either goes
    exactly as given (``encoded=True``: yarl must not requote)."""
    if target is None:
        return YURL(url.canonical, encoded=True)
    return YURL(f"{url.proto}://{url.hostport}{target}", encoded=True)


# --- the upstream proxy ----------------------------------------------------------------------


@dataclass(frozen=True)
class ProxySettings:
    """Which proxy a request goes through: ``http`` for http URLs, ``https`` for https URLs
    and CONNECT tunnels, none for a host that matches ``no_proxy``.  ``source`` says where
    they came from (the config key, the environment, or none)."""

    http: UpstreamProxy | None = None
    https: UpstreamProxy | None = None
    no_proxy: tuple[str, ...] = ()
    source: str = "none"
    #: URLs of the local network (``local_net``): always fetched directly, like no_proxy
    local: Callable[[URL], bool] = field(default=lambda url: False, compare=False, repr=False)
    #: the same for a CONNECT tunnel to ``host``, ``port``
    local_host: Callable[[str, int], bool] = field(
        default=lambda host, port: False, compare=False, repr=False
    )

    def for_host(self, proto: str, host: str, port: int | None = None) -> UpstreamProxy | None:
        proxy = self.https if proto == "https" else self.http if proto == "http" else None
        if proxy is None or any(host_matches(p, host) for p in self.no_proxy):
            return None
        if port is not None and self.local_host(host, port):
            return None
        return proxy

    def for_url(self, url: URL) -> UpstreamProxy | None:
        if self.local(url):
            return None
        return self.for_host(url.proto, url.host)


DIRECT = ProxySettings()


def proxy_settings(
    config: Config,
    environ: Mapping[str, str],
    is_own: Callable[[URL], bool] = lambda url: False,
) -> ProxySettings:
    """The proxies of ``config``: its ``upstream_proxy`` (``direct``: none), or when that is
    unset the ``http_proxy``/``https_proxy`` environment variables as
    :func:`urllib.request.getproxies_environment` reads them (``environ``: its mapping of
    scheme to URL, ``no`` for ``no_proxy``).  ``no_proxy`` likewise, from the config or the
    environment.  A proxy that is this proxy itself (``is_own``: a shell that exported
    ``http_proxy`` pointing at wwwproxy for its tools, then started it) would forward every
    request back to itself: it is left out, with a warning, as is an environment value that
    is not an http proxy."""
    if config.upstream_proxy == "direct":
        return DIRECT
    no_proxy = config.no_proxy
    if no_proxy is None:
        no_proxy, skipped = no_proxy_patterns(environ.get("no", ""))
        if skipped:
            log.warning("no_proxy: entries that are not host names ignored: %s", ", ".join(skipped))
    if config.upstream_proxy is not None:
        proxy = _usable(UpstreamProxy.parse(config.upstream_proxy), "upstream_proxy", is_own)
        settings = ProxySettings(proxy, proxy, no_proxy, "upstream_proxy")
    else:
        found = {}
        for scheme in ("http", "https"):
            value = environ.get(scheme)
            if not value:
                continue
            try:
                found[scheme] = _usable(UpstreamProxy.parse(value), f"{scheme}_proxy", is_own)
            except ValueError as exc:
                log.warning("the %s_proxy environment variable is ignored: %s", scheme, exc)
        if not any(found.values()):
            return DIRECT
        settings = ProxySettings(found.get("http"), found.get("https"), no_proxy, "environment")
    return settings if settings.http or settings.https else DIRECT


def _usable(proxy: UpstreamProxy, name: str, is_own: Callable[[URL], bool]) -> UpstreamProxy | None:
    if is_own(canonicalize(f"http://{proxy.address}/")):
        log.warning(
            "%s %s is this proxy itself: requests go to the origin servers directly",
            name,
            proxy.address,
        )
        return None
    return proxy


def describe_error(exc: BaseException) -> tuple[str, int]:
    """A reason a person can read, and 502 or 504."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "the connection to the server timed out", 504
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "the server did not answer in time", 504
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        inner = exc.certificate_error
        why = getattr(inner, "verify_message", None) or getattr(inner, "reason", None) or inner
        return f"its TLS certificate could not be verified ({why})", 502
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"the TLS handshake failed ({exc.os_error})", 502
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "the host name could not be resolved", 502
    if isinstance(exc, aiohttp.ClientConnectorError):
        inner = exc.os_error
        if isinstance(inner, ConnectionRefusedError):
            return "the connection was refused", 502
        if isinstance(inner, socket.gaierror):
            return "the host name could not be resolved", 502
        return f"could not connect ({inner.strerror or inner})", 502
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection without answering", 502
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"the response body was cut off ({exc})", 502
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"the server sent a malformed response ({exc.message})", 502
    if isinstance(exc, aiohttp.ClientError | OSError):
        return f"{type(exc).__name__}: {exc}", 502
    return f"{type(exc).__name__}: {exc}", 502


class ProxyArguments(TypedDict, total=False):
    """The aiohttp keywords that send a request through an upstream proxy."""

    proxy: YURL
    proxy_headers: dict[str, str]


def proxy_arguments(
    proxy: UpstreamProxy | None, secure: bool, headers: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], ProxyArguments]:
    """The headers and aiohttp keywords of a request through ``proxy`` (None: direct).  Its
    credentials go to the proxy only: on the CONNECT for an https (or wss) URL, and for a
    plain one on the request the proxy itself reads (aiohttp sends ``proxy_headers`` only
    on a CONNECT).  The browser's own Proxy-Authorization was for wwwproxy and is never
    forwarded (a hop-by-hop header)."""
    if proxy is None:
        return headers, {}
    arguments: ProxyArguments = {"proxy": YURL(f"http://{proxy.address}", encoded=True)}
    if proxy.authorization is not None:
        if secure:
            arguments["proxy_headers"] = {"Proxy-Authorization": proxy.authorization}
        else:
            headers = [*headers, ("Proxy-Authorization", proxy.authorization)]
    return headers, arguments


def describe_proxy_error(exc: BaseException, proxy: UpstreamProxy) -> tuple[str, int] | None:
    """What went wrong between us and the upstream proxy (None: the error is the origin's),
    naming the proxy so the page says which hop failed."""
    where = f"the upstream proxy {proxy.address}"
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return f"{where} could not be reached ({describe_error(exc)[0]})", 502
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return f"{where} refused the connection ({exc.status} {exc.message})", 502
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return f"the connection to {where} timed out", 504
    return None


async def open_upstream(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    headers: list[tuple[str, str]],
    body: bytes | None,
    proxy: UpstreamProxy | None = None,
    target: str | None = None,
) -> aiohttp.ClientResponse:
    """Send the request (through ``proxy``, when there is one) and return the response with
    its body not yet read.  The request is the origin's either way: what the engine records.
    ``target``: the path and query to ask for, as the browser sent them (see
    :func:`upstream_url`).

    Raises :class:`UpstreamError` with a readable reason for any failure to connect or answer.
    """
    # The browser's own Authorization wins over credentials in the URL.
    authorization = basic_authorization(url)
    if authorization is not None and not any(n.lower() == "authorization" for n, _ in headers):
        headers = [*headers, ("Authorization", authorization)]
    headers, via = proxy_arguments(proxy, url.proto == "https", headers)
    try:
        response = await session.request(
            method,
            upstream_url(url, target),
            headers=headers,
            data=body if body else None,
            allow_redirects=False,
            **via,
        )
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        described = describe_proxy_error(exc, proxy) if proxy is not None else None
        reason, status = described or describe_error(exc)
        untrusted = isinstance(exc, aiohttp.ClientSSLError)
        raise UpstreamError(url.canonical, reason, status, untrusted=untrusted) from exc
    if response.status == 407 and proxy is not None:
        # the proxy's answer, not the origin's: never relayed (the browser would ask for
        # wwwproxy's credentials) nor recorded as the page
        response.close()
        raise UpstreamError(
            url.canonical,
            f"the upstream proxy {proxy.address} asks for credentials (407): give them in "
            "upstream_proxy as http://user:password@host:port",
        )
    if response.status == 101:
        # The Upgrade header is hop-by-hop and was not forwarded, so this is the server's
        # error; relayed, it would leave the browser waiting on a connection nobody speaks on.
        response.close()
        raise UpstreamError(
            url.canonical, "the server switched protocols, which the proxy does not relay"
        )
    return response
