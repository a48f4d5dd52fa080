"""The URL layer: canonical URLs, the request targets sent upstream, cache file names, SURT
keys and command-URL form arguments."""

from .cachename import cache_name, url_hash
from .canonical import URL, InvalidURL, canonicalize
from .surt import surt
from .wire import wire_target

__all__ = ["URL", "InvalidURL", "cache_name", "canonicalize", "surt", "url_hash", "wire_target"]
