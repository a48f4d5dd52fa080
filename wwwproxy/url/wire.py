"""The request target sent upstream: the browser's own spelling of the path and query.

The canonical URL (:mod:`.canonical`) names the cache entry; the origin is sent what the browser
asked for, byte for byte.  Servers read their own spellings: a search page that echoes its
query back into its links, or a signed or token URL checked over the bytes, breaks when
``title=Special%3ASearch`` arrives as ``title=Special:Search``.

Only what RFC 3986 does not allow in a path or query (RFC 9112 §3.2's request-target) is
percent-encoded: controls, space, non-ASCII bytes (as UTF-8), ``"<>[\\]^`{|}`` and a ``%``
that begins no ``%XX`` escape.  Everything else is left as it came: escapes keep their spelling
and case (``%3A``, ``%2F``, ``%7e``), ``+`` stays a plus, and ``.`` and ``..`` segments go as
sent (removing them is the client's job, and the browser has done it).  The fragment is never
sent, and an empty path is ``/``.
"""

from __future__ import annotations

import re

from .canonical import split_url, to_byte_chars

__all__ = ["wire_target"]

#: RFC 3986 pchar plus ``/`` and ``?`` (the path and query), without ``%``: a byte outside it is
#: encoded; ``%`` is kept where it begins an escape (:data:`_INVALID`)
_ALLOWED = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?"
)
_INVALID = re.compile(
    "%(?![0-9A-Fa-f]{2})|[^" + re.escape("".join(sorted(_ALLOWED))) + "%]",
)


def wire_target(raw: str | bytes) -> str:
    """The origin-form request target (``/path?query``) of ``raw``, a request target as the
    browser sent it (absolute-form, or origin-form) or a URL as a page wrote it: its path and
    query exactly as written, but for the bytes a request line cannot carry, percent-encoded.
    The scheme and authority are dropped (the canonical URL's are sent), as is the fragment."""
    _, _, rest = split_url(to_byte_chars(raw))
    if not rest.startswith("/"):
        rest = "/" + rest  # ``http://host`` and ``http://host?q`` ask for the root
    if _INVALID.search(rest) is None:
        return rest
    return _INVALID.sub(lambda m: f"%{ord(m.group(0)):02X}", rest)
