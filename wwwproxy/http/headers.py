"""Header rules for a forwarding proxy (RFC 9110 §7.6, RFC 9111 §5.1), as pure functions."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "HOP_BY_HOP",
    "Headers",
    "add_via",
    "censor",
    "end_to_end",
    "get_header",
    "set_header",
    "without_controls",
]

Headers = list[tuple[str, str]]

# RFC 9110 §7.6.1 and the de-facto ones; the Proxy-* ones are about a proxy's own
# authentication, never the origin's (RFC 9111 §3.1: a cache must not store them).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authorization",
        "proxy-authenticate",
        "proxy-authentication-info",
    }
)


def _connection_tokens(headers: Iterable[tuple[str, str]]) -> set[str]:
    tokens: set[str] = set()
    for name, value in headers:
        if name.lower() in ("connection", "proxy-connection"):
            tokens.update(t.strip().lower() for t in value.split(",") if t.strip())
    return tokens


def end_to_end(headers: Iterable[tuple[str, str]]) -> Headers:
    """Drop hop-by-hop headers and every header the Connection header names."""
    headers = list(headers)
    drop = HOP_BY_HOP | _connection_tokens(headers)
    return [(n, v) for n, v in headers if n.lower() not in drop]


def get_header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    return next((v for n, v in headers if n.lower() == name), None)


def set_header(headers: Headers, name: str, value: str) -> Headers:
    """Replace every ``name`` header with one ``name: value`` (at the first one's place)."""
    lname = name.lower()
    out: Headers = []
    done = False
    for n, v in headers:
        if n.lower() == lname:
            if not done:
                out.append((name, value))
                done = True
        else:
            out.append((n, v))
    if not done:
        out.append((name, value))
    return out


def censor(headers: Headers, rules: Iterable[tuple[str, str]]) -> Headers:
    """The request with each ruled header it carries replaced by the rule's value (one
    header, at the first one's place), or removed when the value is empty
    (``censor_request_headers``, WWWOFFLE's CensorHeader).  A header the request lacks is not
    added: a Referer rule must not invent a referrer."""
    for name, value in rules:
        lname = name.lower()
        if not any(n.lower() == lname for n, _ in headers):
            continue
        if value:
            headers = set_header(headers, name, value)
        else:
            headers = [(n, v) for n, v in headers if n.lower() != lname]
    return headers


def add_via(headers: Headers, version: tuple[int, int], pseudonym: str) -> Headers:
    """Append ``<version> <pseudonym>`` to Via (RFC 9110 §7.6.3), keeping earlier hops."""
    hop = f"{version[0]}.{version[1]} {pseudonym}"
    previous = [v for n, v in headers if n.lower() == "via"]
    value = ", ".join([*previous, hop])
    return set_header(headers, "Via", value)


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def without_controls(headers: Iterable[tuple[str, str]]) -> Headers:
    """Values with every control character but HTAB replaced by SP.  An origin may send them
    (aiohttp's client parser lets them through); aiohttp will not write them to the browser nor
    the archive store them, and RFC 9110 §5.5 allows the replacement for CR, LF and NUL."""
    return [(n, _CONTROL.sub(" ", v)) for n, v in headers]
