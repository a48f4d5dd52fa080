"""The URL layer: canonical URLs, cache file names, SURT keys and command-URL form arguments."""

from .cachename import cache_name, url_hash
from .canonical import URL, InvalidURL, canonicalize
from .surt import surt

__all__ = ["URL", "InvalidURL", "cache_name", "canonicalize", "surt", "url_hash"]
