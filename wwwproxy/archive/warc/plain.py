"""Framing an uncompressed WARC record (a ``.warc`` file, as wget writes with
``--no-warc-compression`` and other tools by default): where it ends is its WARC header's
``Content-Length`` past the header, plus the CRLF CRLF that closes it.

The cache writes one gzip member per record; the reader frames those by inflating them
(:func:`.read._inflate`).  A record that does not start with the gzip magic is framed here
instead, so the same strict reading (digests, lengths, the closing CRLF CRLF) covers WARC
files other tools wrote uncompressed.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import BinaryIO

from .record import _RAW_CHUNK, WARCFormatError

__all__ = ["GZIP_MAGIC", "frame_plain"]

#: the first two bytes of every gzip member
GZIP_MAGIC = b"\x1f\x8b"
_HEAD_LIMIT = 1024 * 1024
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*([0-9]+)[ \t]*\r\n", re.IGNORECASE)


def frame_plain(fh: BinaryIO, path: str, offset: int) -> Generator[bytes, None, int]:
    """The bytes of the uncompressed record at ``offset``, in chunks; return its length.

    Leaves ``fh`` at the start of the next record.  WARCFormatError: ``torn`` when the file
    ends inside the record, ``corrupt`` when no WARC header with a Content-Length is there
    (nothing after it can be framed)."""
    fh.seek(offset)
    head = b""
    while (end := head.find(b"\r\n\r\n")) < 0:
        more = fh.read(_RAW_CHUNK)
        if not more:
            kind = "torn" if head.startswith(b"WARC/") else "corrupt"
            what = "cut off in its header" if kind == "torn" else "not a WARC record"
            raise WARCFormatError(path, offset, f"record {what}", kind)
        head += more
        if len(head) > _HEAD_LIMIT and head.find(b"\r\n\r\n", 0, _HEAD_LIMIT) < 0:
            raise WARCFormatError(path, offset, "no end of a WARC header within 1 MiB", "corrupt")
    found = _CONTENT_LENGTH.search(head, 0, end + 2)
    if not head.startswith(b"WARC/") or found is None:
        raise WARCFormatError(path, offset, "not a WARC record with a Content-Length", "corrupt")
    length = end + 4 + int(found.group(1)) + 4
    yielded = 0
    data = head
    while True:
        take = data[: length - yielded]
        if take:
            yield take
            yielded += len(take)
        if yielded == length:
            break
        data = fh.read(min(_RAW_CHUNK, length - yielded))
        if not data:
            raise WARCFormatError(
                path, offset, f"record cut off after {yielded} of {length} bytes", "torn"
            )
    fh.seek(offset + length)
    return length
