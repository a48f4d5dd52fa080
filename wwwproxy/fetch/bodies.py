"""Reading a cached response's body for the crawler: the payload without its
Content-Encoding, the links of a page or style sheet, and the length and digest of the content
(``wwwproxy urldb``).  Blocking: call these in a thread."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from ..http.content import ContentDecoder, charset_param
from ..http.headers import get_header
from .css_links import extract_css_links
from .html_links import extract_html_links
from .links import PageLinks, is_css, is_html

__all__ = ["MAX_PARSE", "Recorded", "Response", "decoded_digest", "page_links", "read_decoded"]

MAX_PARSE = 16 * 1024 * 1024  # bytes of a page or style sheet read for links (decoded)
_READ = 64 * 1024


class Response(Protocol):
    """A response the crawler reads: a cached copy (:class:`~wwwproxy.archive.store.
    CachedEntry`) or one just recorded (:class:`Recorded`)."""

    @property
    def headers(self) -> Sequence[tuple[str, str]]: ...

    def open_body(self) -> BinaryIO: ...


@dataclass(frozen=True)
class Recorded:
    """A response the recording engine just fetched and recorded, handed back with its body
    (``Exchange.keep_body``): the crawler takes its status and follows its links without
    reading it again from the archive (the same bytes as the archive's)."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    payload_length: int
    #: the payload as recorded (Content-Encoded); None: not kept (too large)
    body: bytes | None

    def open_body(self) -> BinaryIO:
        if self.body is None:
            raise ValueError("the body was not kept")
        return io.BytesIO(self.body)


def read_decoded(entry: Response, limit: int = MAX_PARSE) -> bytes:
    """The cached payload without its Content-Encoding, at most ``limit`` bytes (blocking:
    call in a thread).  ValueError if it cannot be decoded."""
    decoder = ContentDecoder(get_header(entry.headers, "Content-Encoding"), limit)
    out = bytearray()
    with entry.open_body() as stream:
        while not decoder.full and (chunk := stream.read(_READ)):
            out += decoder.feed(chunk)
    out += decoder.flush()
    return bytes(out)


def page_links(
    entry: Response, base: str, *, hyperlinks: bool = True, max_links: int | None = None
) -> PageLinks:
    """The links of a cached HTML page or style sheet (none for other types), resolved
    against ``base`` (blocking: call in a thread); ``hyperlinks`` False: only its requisites;
    ``max_links``: at most that many, the rest counted.  ValueError if the body cannot be
    decoded."""
    content_type = get_header(entry.headers, "Content-Type")
    html, css = is_html(content_type), is_css(content_type)
    if not (html or css):
        return PageLinks()
    data = read_decoded(entry)
    charset = charset_param(content_type)
    if html:
        return extract_html_links(
            data, base, encoding=charset, hyperlinks=hyperlinks, max_links=max_links
        )
    return extract_css_links(data, base, encoding=charset, max_links=max_links)


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
