"""Which stored copy may answer which request, as pure functions: the request headers its
``Vary`` names (RFC 9111 §4.1), the content codings the browser accepts (RFC 9110 §12.5.3),
and the credentials it was fetched with (kept in the archive only as keyed digests); and which
of several captures of a URL stands for the request (one per variant).
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .freshness import shared_reusable
from .headers import Headers, get_header

__all__ = [
    "CREDENTIALS_HEADER",
    "CREDENTIAL_HEADERS",
    "CredentialCheck",
    "accepts_coding",
    "credential_check",
    "credential_tags",
    "recorded_request_headers",
    "request_headers_for_reuse",
    "replaces",
    "select_variant",
    "vary_matches",
    "vary_names",
]


# --- Vary and content codings ---------------------------------------------------------------


def vary_names(headers: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The request headers a stored response's ``Vary`` names, lower-cased (``*`` included);
    a caller that asks often keeps them (:func:`vary_matches`'s ``names``)."""
    names: list[str] = []
    for n, v in headers:
        if n.lower() == "vary":
            names += [t.strip().lower() for t in v.split(",") if t.strip()]
    return tuple(names)


#: request headers whose values compare without regard to case (RFC 9110 §12.5)
_CASELESS = frozenset({"accept", "accept-charset", "accept-language", "accept-encoding"})


def _normalized(headers: Sequence[tuple[str, str]], name: str) -> str | None:
    """The header's values joined with white space removed (RFC 9111 §4.1), lower-cased only
    where the header's values are case-insensitive; None when absent (an empty header is
    present, and matches only an empty one)."""
    values = [v for n, v in headers if n.lower() == name]
    if not values:
        return None
    joined = ",".join("".join(v.split()) for v in values)
    return joined.lower() if name in _CASELESS else joined


def vary_matches(
    stored_headers: Sequence[tuple[str, str]],
    recorded_request: Sequence[tuple[str, str]] | None,
    request: Sequence[tuple[str, str]],
    *,
    names: Sequence[str] | None = None,
) -> bool:
    """Does a stored response fit this request on the headers its ``Vary`` names (RFC 9111
    §4.1)?  ``Vary: *`` never fits.  ``Accept-Encoding`` is left to :func:`accepts_coding`
    (a coded copy can be decoded on the way out), so it does not count here.  ``names``:
    :func:`vary_names` of ``stored_headers``, when the caller has them.  ``Cookie`` and
    ``Authorization`` recorded as digests (:func:`recorded_request_headers`) are left to
    :class:`CredentialCheck`."""
    if names is None:
        names = vary_names(stored_headers)
    if not names:
        return True
    if "*" in names:
        return False
    recorded = recorded_request or []
    # Accept-Encoding; and credentials the archive keeps only as digests (judged by
    # :class:`CredentialCheck`, which has the key)
    skip = {"accept-encoding"}
    if get_header(recorded, CREDENTIALS_HEADER) is not None:
        skip |= CREDENTIAL_HEADERS
    names = [n for n in names if n not in skip]
    if not names:
        return True
    return all(_normalized(recorded, n) == _normalized(request, n) for n in names)


def replaces(
    stored_headers: Sequence[tuple[str, str]],
    stored_request: Sequence[tuple[str, str]] | None,
    new_request: Sequence[tuple[str, str]],
) -> bool:
    """Does a new capture, made for ``new_request``, replace this stored one of the same URL
    (RFC 9111 §4.1)?  Yes when the stored one would have answered that request (its ``Vary``
    headers fit, :func:`vary_matches`): the new capture is the same variant, newer.  No when
    they differ: the new one sits beside it, another variant (``vary-invalidate``: a second
    ``Vary: Foo`` answer for ``Foo: 2`` leaves the one for ``Foo: 1`` in use)."""
    return vary_matches(stored_headers, stored_request, new_request)


def select_variant(
    captures: Sequence[tuple[Sequence[tuple[str, str]], Sequence[tuple[str, str]] | None]],
    request: Sequence[tuple[str, str]],
) -> int | None:
    """Which of a URL's captures answers ``request``: the index of the newest that fits it
    (:func:`vary_matches`) and that no newer capture :func:`replaces`, or None (fetch it).
    ``captures`` are (response headers, recorded request headers), newest first: those of
    the archive key's captures that may stand for it (after the keep-the-good-copy choice).
    Without ``Vary`` anywhere this is the newest capture, as a lookup by URL alone gives."""
    for index, (headers, recorded) in enumerate(captures):
        if not vary_matches(headers, recorded, request):
            continue
        newer = captures[:index]
        if any(replaces(headers, recorded, newer_request or ()) for _, newer_request in newer):
            return None  # the variant was fetched again, and the new one's Vary rules it out
        return index
    return None


def _qvalues(accept_encoding: str) -> Mapping[str, float]:
    out: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
        out.setdefault(coding, q)
    return out


def accepts_coding(accept_encoding: str | None, content_encoding: str | None) -> bool:
    """RFC 9110 §12.5.3: may a response with this ``Content-Encoding`` be sent to a request
    with this ``Accept-Encoding``?  No Accept-Encoding means only identity is safe (what curl
    and scripts send); ``x-gzip`` is ``gzip``."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return True
    if accept_encoding is None:
        return False
    q = _qvalues(accept_encoding)

    def accepted(coding: str) -> bool:
        coding = "gzip" if coding == "x-gzip" else coding
        if coding in q:
            return q[coding] > 0
        if coding == "gzip" and "x-gzip" in q:
            return q["x-gzip"] > 0
        return q.get("*", 0.0) > 0

    return all(accepted(c) for c in codings)


# --- credentials ----------------------------------------------------------------------------

#: Request headers that say who the user is to the origin.  (``Proxy-Authorization`` is ours,
#: hop-by-hop: never sent upstream nor recorded.)
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie"})
#: The recorded request's header that holds keyed digests of its credentials, in place of them
#: (``authorization=<digest>; cookie=<digest>``): enough to tell whether a later request
#: carries the same ones, and nothing that would let anyone who reads the archive log in.
CREDENTIALS_HEADER = "WWWProxy-Credentials"


def _digest(key: bytes, name: str, values: Sequence[str]) -> str:
    data = name.encode("ascii") + b"\0" + "\n".join(values).encode("utf-8", "surrogateescape")
    mac = hmac.digest(key, data, "sha256")  # the one-shot C path: asked on hits
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def credential_tags(headers: Iterable[tuple[str, str]], key: bytes) -> dict[str, str]:
    """{credential header name: HMAC-SHA256 of its values under the cache's ``key``} for the
    credential headers the request carries."""
    values: dict[str, list[str]] = {}
    for n, v in headers:
        name = n.lower()
        if name in CREDENTIAL_HEADERS:
            values.setdefault(name, []).append(v.strip())
    return {name: _digest(key, name, vs) for name, vs in sorted(values.items())}


def _parse_tags(value: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for part in value.split(";"):
        name, sep, digest = part.strip().partition("=")
        if sep and name.strip().lower() in CREDENTIAL_HEADERS:
            tags[name.strip().lower()] = digest.strip()
    return tags


def recorded_request_headers(
    headers: Sequence[tuple[str, str]], key: bytes, *, keep_credentials: bool = False
) -> Headers:
    """The request headers as the archive records them: ``Cookie`` and ``Authorization``
    left out unless ``keep_credentials`` (``record_credentials``), and their digests added in
    :data:`CREDENTIALS_HEADER` either way (what :class:`CredentialCheck` compares)."""
    tags = credential_tags(headers, key)
    out = [(n, v) for n, v in headers if n.lower() != CREDENTIALS_HEADER.lower()]
    if not keep_credentials:
        out = [(n, v) for n, v in out if n.lower() not in CREDENTIAL_HEADERS]
    if tags:
        out.append((CREDENTIALS_HEADER, "; ".join(f"{n}={d}" for n, d in tags.items())))
    return out


@dataclass(frozen=True)
class CredentialCheck:
    """Which credentials a request must carry, alike, to be served a stored copy: the
    ``Authorization`` of the request that fetched it, if it had one; both ``Authorization`` and
    ``Cookie`` (or their absence) for a ``Cache-Control: private`` answer; and those of them
    its ``Vary`` names.  Alike means the same digest under the cache's key."""

    needed: frozenset[str]
    #: the recorded request's digests of the needed headers (absent: it had none)
    recorded: tuple[tuple[str, str], ...] = ()

    def admits(self, request: Iterable[tuple[str, str]], key: bytes) -> bool:
        """May a request with these headers have the copy?"""
        if not self.needed:
            return True
        asked = credential_tags(((n, v) for n, v in request if n.lower() in self.needed), key)
        recorded = dict(self.recorded)
        return all(hmac.compare_digest(asked.get(n, ""), recorded.get(n, "")) for n in self.needed)


def credential_check(
    response_headers: Sequence[tuple[str, str]],
    recorded_request: Sequence[tuple[str, str]],
    key: bytes,
) -> CredentialCheck:
    """The :class:`CredentialCheck` of a stored copy (made once per copy: it is asked on every
    hit).  The recorded request's :data:`CREDENTIALS_HEADER`, or, in a record without it,
    the credentials themselves (``record_credentials``, or an older recording)."""
    marked = get_header(recorded_request, CREDENTIALS_HEADER)
    tags = _parse_tags(marked) if marked is not None else credential_tags(recorded_request, key)
    needed: set[str] = set()
    if "authorization" in tags:
        needed.add("authorization")
    if not shared_reusable(response_headers):
        needed |= CREDENTIAL_HEADERS
    needed |= CREDENTIAL_HEADERS.intersection(vary_names(response_headers))
    recorded = tuple(sorted((n, d) for n, d in tags.items() if n in needed))
    return CredentialCheck(frozenset(needed), recorded)


def request_headers_for_reuse(
    response_headers: Sequence[tuple[str, str]], recorded_request: Sequence[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """Of a recorded request's headers, those that decide whether its copy may serve a later
    request: the ones the response's ``Vary`` names, the credentials and their digests
    (:func:`vary_matches` and :func:`credential_check` read no others).  What a copy kept in
    memory holds instead of the whole request: a few hundred bytes fewer of small objects
    each, which thousands of copies coming and going had spread over the allocator's pools."""
    wanted = {CREDENTIALS_HEADER.lower(), *CREDENTIAL_HEADERS, *vary_names(response_headers)}
    return tuple((n, v) for n, v in recorded_request if n.lower() in wanted)
