"""The CDXJ searchable key (SURT) of an archive key, per canonical-url-rules.md.

Keys sort so that a host, a domain or a path is one contiguous range of the index, which is what
lets the index answer prefix queries by binary search.
"""

from __future__ import annotations

import functools
import re

import idna

__all__ = ["host_surt", "surt"]

_IPV4 = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}")


@functools.lru_cache(maxsize=4096)
def _unicode_label(label: str) -> str:
    if not label.startswith("xn--"):
        return label
    try:
        return idna.decode(label)
    except (idna.IDNAError, UnicodeError, ValueError):
        return label


def host_surt(host: str, port: int | str | None = None) -> str:
    """``(com,example,www,)`` for ``www.example.com``; IP addresses are not reversed."""
    host = host.lower()
    suffix = "" if port in (None, "") else f":{port}"
    if host.startswith("[") or _IPV4.fullmatch(host):
        return f"({host}{suffix})"
    labels = [_unicode_label(label) for label in host.split(".")]
    labels.reverse()
    return "(" + ",".join(labels) + "," + suffix + ")"


def surt(key: str) -> str:
    """SURT of a canonical archive key (``proto://[userinfo@]host[:port]/path[?args]``)."""
    scheme_end = key.find("://")
    if scheme_end < 0:
        raise ValueError(f"not a canonical archive key (no '://'): {key!r}")
    rest = key[scheme_end + 3 :]
    slash = rest.find("/")
    if slash < 0:
        authority, tail = rest, "/"
    else:
        authority, tail = rest[:slash], rest[slash:]
    authority = authority[authority.rfind("@") + 1 :]
    if authority.startswith("["):
        end = authority.index("]") + 1
        host, port = authority[:end], authority[end + 1 :]
    else:
        host, _, port = authority.partition(":")
    return host_surt(host, port) + tail.lower()
