"""Reading a capture's page back for the search index: which captures have text worth
indexing, and their source decoded (Content-Encoding, charset) from the payload the store
handed over or from the WARC record.  Separate from :mod:`.index` because indexing,
compaction and snippets (:mod:`.searching`) all read pages the same way, and none of it
touches the database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ..cdxj import CDXJError, CDXJRecord
from ..store import StoreError
from ..warc import WARCFormatError, open_payload, read_record_at
from .text import MAX_PAYLOAD, extract_text, payload_document

if TYPE_CHECKING:
    from ..store import Store

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
#: what reading a capture back may raise (the page is then left out, or has no snippet)
READ_ERRORS = (WARCFormatError, CDXJError, StoreError, OSError, ValueError, EOFError)


class Given(NamedTuple):
    """A capture's payload (still Content-Encoded) and HTTP headers, as recorded."""

    payload: bytes
    headers: tuple[tuple[str, str], ...]


def wants_text(line: CDXJRecord) -> bool:
    """Is the text of this capture indexed (a 2xx page of a text type)?"""
    status = line.fields.get("hsc")
    return isinstance(status, int) and 200 <= status < 300 and line.fields.get("mct") in TEXT_TYPES


def read_payload(store: Store, key: str, file: str, pos: int) -> Given | None:
    """The payload (its first :data:`MAX_PAYLOAD` bytes, still Content-Encoded) and HTTP
    headers of the capture at ``file``/``pos``; None for a revisit whose page is gone."""
    record = read_record_at(store.resolve_warcfile(file, key), pos)
    if record.rec_type == "revisit":
        from ...url import canonicalize

        entry = store.get(canonicalize(key), key, keep=False)  # not a browser's copy
        if entry is None:
            return None
        stream = entry.open_body()
        headers = tuple(entry.headers)
    else:
        stream = open_payload(record)
        headers = tuple(record.http_headers)
    with stream:
        return Given(stream.read(MAX_PAYLOAD), headers)


def read_document(store: Store, key: str, file: str, pos: int) -> tuple[str, str]:
    """``(page source, mime type)`` of the capture at ``file``/``pos``: its payload
    decoded from its Content-Encoding and charset (the first :data:`MAX_PAYLOAD` bytes)."""
    given = read_payload(store, key, file, pos)
    if given is None:
        return "", "text/plain"
    return payload_document(given.payload, given.headers)


def read_text(store: Store, key: str, file: str, pos: int) -> tuple[str, str]:
    """``(title, visible text)`` of the capture at ``file``/``pos``."""
    document, mime = read_document(store, key, file, pos)
    return extract_text(document, mime)
