"""Reading a cached response's body for the crawler: the payload without its
Content-Encoding, the links of a page or style sheet, and the length and digest of the content
(``wwwproxy urldb``).  Blocking: call these in a thread."""

from __future__ import annotations

import hashlib
from typing import BinaryIO

from ..archive.store import CachedEntry
from ..http.content import ContentDecoder, charset_param
from ..http.headers import get_header
from .css_links import extract_css_links
from .html_links import extract_html_links
from .links import Link, is_css, is_html

__all__ = ["MAX_PARSE", "decoded_digest", "page_links", "read_decoded"]

MAX_PARSE = 16 * 1024 * 1024  # bytes of a page or style sheet read for links (decoded)
_READ = 64 * 1024


def read_decoded(entry: CachedEntry, limit: int = MAX_PARSE) -> bytes:
    """The cached payload without its Content-Encoding, at most ``limit`` bytes (blocking:
    call in a thread).  ValueError if it cannot be decoded."""
    decoder = ContentDecoder(get_header(entry.headers, "Content-Encoding"), limit)
    out = bytearray()
    with entry.open_body() as stream:
        while not decoder.full and (chunk := stream.read(_READ)):
            out += decoder.feed(chunk)
    out += decoder.flush()
    return bytes(out)


def page_links(entry: CachedEntry, base: str) -> list[Link]:
    """The links of a cached HTML page or style sheet (none for other types), resolved
    against ``base`` (blocking: call in a thread).  ValueError if the body cannot be decoded."""
    content_type = get_header(entry.headers, "Content-Type")
    html, css = is_html(content_type), is_css(content_type)
    if not (html or css):
        return []
    data = read_decoded(entry)
    charset = charset_param(content_type)
    if html:
        return extract_html_links(data, base, encoding=charset)
    return extract_css_links(data, base, encoding=charset)


def decoded_digest(stream: BinaryIO, content_encoding: str | None) -> tuple[int, str]:
    """Length and SHA-256 of the decoded payload, streaming."""
    decoder = ContentDecoder(content_encoding)
    sha = hashlib.sha256()
    n = 0
    while chunk := stream.read(_READ):
        data = decoder.feed(chunk)
        sha.update(data)
        n += len(data)
    data = decoder.flush()
    sha.update(data)
    return n + len(data), sha.hexdigest()
