"""What a request that changes state makes stale (RFC 9111 §4.4), as a pure function."""

from __future__ import annotations

from urllib.parse import urljoin

from ..url import URL, InvalidURL, canonicalize

__all__ = ["SAFE_METHODS", "invalidated_urls", "invalidates"]

#: RFC 9110 §9.2.1: the methods that change nothing; every other one, an unknown one too
#: (``M-SEARCH``), may have changed the resource.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def invalidates(method: str, status: int) -> bool:
    """Does this answer to this request make the stored responses for its target stale?
    A non-error (2xx or 3xx) answer to an unsafe method (RFC 9111 §4.4); a failed one changed
    nothing, so the copies stay in use."""
    return method.upper() not in SAFE_METHODS and 200 <= status < 400


def invalidated_urls(
    method: str,
    status: int,
    target: URL,
    location: str | None = None,
    content_location: str | None = None,
) -> tuple[URL, ...]:
    """The URLs whose stored responses must not be served again without revalidation after
    this answer (RFC 9111 §4.4): when :func:`invalidates`, the request's canonical ``target``
    and the URLs its ``Location`` and ``Content-Location`` name, resolved against the target,
    of the same origin (scheme, host and port) only, so that a response cannot make another
    site's pages stale; each once, the target first.  Nothing otherwise."""
    if not invalidates(method, status):
        return ()
    found = [target]
    for value in (location, content_location):
        if not value or not value.strip():
            continue
        try:
            url = canonicalize(urljoin(target.canonical, value.strip()))
        except (InvalidURL, ValueError):
            continue
        same_origin = (url.proto, url.host, url.port) == (target.proto, target.host, target.port)
        if same_origin and all(url.canonical != seen.canonical for seen in found):
            found.append(url)
    return tuple(found)
