"""Crawl scope as URL comparisons: same host, same registrable domain, under a URL prefix."""

from __future__ import annotations

import functools

from wwwproxy.url.canonical import InvalidURL, canonicalize

__all__ = ["canonical_host", "registrable_domain", "same_domain", "same_host", "under_prefix"]

# Second-level labels under which a country-code TLD registers names (co.uk, com.au, ac.jp).
_CC_SECOND_LEVELS = "ac co com edu gob gov go gv ltd mil ne net nhs nic nom or org plc sch"
_CC_SECOND_LEVEL = frozenset(_CC_SECOND_LEVELS.split())


#: a crawl checks each off-site link on every page that has it, and a site has thousands
#: (4,154 on the Python docs: canonicalize's own cache of 4,096 URLs thrashed, a tenth of
#: the crawl's own CPU); an entry is about 200 bytes
HOST_CACHE = 32768


@functools.lru_cache(maxsize=HOST_CACHE)
def _host(url: str) -> str | None:
    try:
        parsed = canonicalize(url)
    except (InvalidURL, TypeError):
        return None
    return None if parsed.local else parsed.host.rstrip(".")


def canonical_host(file: str) -> str | None:
    """The host name of a canonical URL (``URL.file``, as every link and task of a crawl is),
    read off the string as :func:`same_host` would find it (canonicalizing it again gives the
    same host, at a hundred times the cost: a crawl checks thousands of off-site links); None
    where it is not plain enough to read off (credentials, a host not in canonical form)."""
    start = file.find("://") + 3
    end = file.find("/", start)
    if start < 3 or end <= start or "@" in file:
        return None
    authority = file[start:end]
    if authority[0] == "[":
        close = authority.find("]")
        return authority[: close + 1] if close > 0 else None
    host = authority.partition(":")[0]
    if not host.isascii() or "%" in host or host != host.lower():
        return None
    return host.rstrip(".")


def registrable_domain(host: str) -> str:
    """An approximation of the registrable domain ("eTLD+1") without the Public Suffix List.

    The last two labels, or three when the TLD is a two-letter country code and the second
    label a usual registry label (``example.co.uk``, ``example.com.au``). It is wrong for the
    private suffixes (``a.github.io`` and ``b.github.io`` count as one domain) and for less
    usual registries (``city.kawasaki.jp``). IP addresses are returned whole.
    """
    host = host.rstrip(".").lower()
    if host.startswith("[") or host.replace(".", "").isdigit():
        return host
    labels = host.split(".")
    if len(labels) <= 2:
        return host
    if len(labels[-1]) == 2 and labels[-2] in _CC_SECOND_LEVEL:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def same_host(a: str, b: str) -> bool:
    """Whether two URLs are on the same host name (ports and http/https not compared)."""
    ha, hb = _host(a), _host(b)
    return ha is not None and ha == hb


def same_domain(a: str, b: str) -> bool:
    """Whether two URLs are under the same registrable domain (see :func:`registrable_domain`)."""
    ha, hb = _host(a), _host(b)
    return ha is not None and hb is not None and registrable_domain(ha) == registrable_domain(hb)


def under_prefix(url: str, prefix: str) -> bool:
    """Whether ``url`` is at or below ``prefix`` (both canonicalized; scheme, host and port
    must match). A prefix path not ending in ``/`` is a whole segment: ``/docs`` covers
    ``/docs``, ``/docs/x`` and ``/docs?x`` but not ``/docs2``."""
    try:
        u, p = canonicalize(url), canonicalize(prefix)
    except (InvalidURL, TypeError):
        return False
    if (u.proto, u.host, u.port) != (p.proto, p.host, p.port):
        return False
    target, want = u.path_args, p.path_args
    if not target.startswith(want):
        return False
    if len(target) == len(want) or want.endswith("/") or p.args is not None:
        return True
    return target[len(want)] in "/?"
