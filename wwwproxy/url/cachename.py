"""Cache file names: ``<proto>/<host[:port]>/<hash>``, as in WWWOFFLE's spool.

The hash is WWWOFFLE's MakeHash of the archive key, so no URL text but the validated scheme and
host ever reaches the file system, and one key always lands in one file.
"""

from __future__ import annotations

import base64
import hashlib

from .canonical import URL

__all__ = ["cache_name", "url_hash"]


def url_hash(key: str) -> str:
    """Base64 of the key's MD5 digest, ``=`` padding removed and ``/`` replaced by ``-``."""
    digest = hashlib.md5(key.encode("utf-8", "surrogateescape"), usedforsecurity=False).digest()
    return base64.b64encode(digest).decode("ascii").rstrip("=").replace("/", "-")


def cache_name(url: URL, key: str | None = None) -> str:
    """Cache file name (without suffix) for ``key``, by default the URL's GET key (file string)."""
    return f"{url.proto}/{url.hostport}/{url_hash(url.file if key is None else key)}"
