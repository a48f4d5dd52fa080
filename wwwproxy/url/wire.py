"""The request target sent upstream: the browser's own spelling of the path and query.

The canonical URL (:mod:`.canonical`) names the cache entry; the origin is sent what the browser
asked for, byte for byte.  Servers read their own spellings: a search page that echoes its
query back into its links, or a signed or token URL checked over the bytes, breaks when
``title=Special%3ASearch`` arrives as ``title=Special:Search``.

Only what a request line cannot carry is percent-encoded: control bytes, space, DEL and bytes
that are not ASCII (as UTF-8, or as the bytes they are).  Every printable ASCII character goes as
it came, escapes keep their spelling and case (``%3A``, ``%2F``, ``%7e``), ``+`` stays a plus,
and ``.`` and ``..`` segments go as sent (removing them is the client's job, and the browser has
done it).  RFC 3986 would also encode ``"<>[\\]^`{|}`` and a ``%`` that begins no escape, but
they are what the browser sent, and what an origin reads from any browser that goes to it
directly: re-encoding them changes what it reads (browsers, and
WWWOFFLE's canonical form, keep a ``|`` in a query as it is).  The fragment is never sent, and
an empty path is ``/``.
"""

from __future__ import annotations

import re

from .canonical import split_url, to_byte_chars

__all__ = ["wire_target"]

#: what a request line cannot carry (RFC 9112 §3: the target is printable ASCII up to a space)
_UNSENDABLE = re.compile(r"[^\x21-\x7e]")


def wire_target(raw: str | bytes) -> str:
    """The origin-form request target (``/path?query``) of ``raw``, a request target as the
    browser sent it (absolute-form, or origin-form) or a URL as a page wrote it: its path and
    query exactly as written, but for the bytes a request line cannot carry, percent-encoded.
    The scheme and authority are dropped (the canonical URL's are sent), as is the fragment."""
    _, _, rest = split_url(to_byte_chars(raw))
    if not rest.startswith("/"):
        rest = "/" + rest  # ``http://host`` and ``http://host?q`` ask for the root
    if _UNSENDABLE.search(rest) is None:
        return rest
    return _UNSENDABLE.sub(lambda m: f"%{ord(m.group(0)):02X}", rest)
