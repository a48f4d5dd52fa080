"""WARC layer of the cache: build, append and read one archive key's records.

Each archive key has one file, ``cache/<proto>/<host[:port]>/<hash>.warc.gz``, holding that
key's ``request`` and ``response`` (or ``revisit``) records, oldest first, each record its own gzip
member. This package knows nothing of hashes, URLs or the index: the store hands it a path, the
archive key and the exchange, and gets back record offsets and lengths for the CDXJ index.

The work is split by job, as warcio and pywb split theirs:

- :mod:`.record`: the record metadata shared by both directions, errors, dates and digests;
- :mod:`.build`: turning one HTTP exchange into ``request`` + ``response``/``revisit`` records;
- :mod:`.write`: appending built records to a file, one gzip member each, crash-safely;
- :mod:`.read`: the strict reader (records at offsets or in file order, payloads, the newest
  servable response).

The public names are all importable from here.
"""

from __future__ import annotations

from .build import (
    ORIG_HEADER_PREFIX,
    REVISIT_PROFILE,
    HTTPRequest,
    HTTPResponse,
    PendingRecord,
    build_exchange,
    fit_content_length,
    sanitize_headers,
)
from .read import (
    CachedResponse,
    newest_response,
    open_payload,
    read_record_at,
    read_records,
    resolve_payload,
    response_at,
)
from .record import (
    ARCHIVE_KEY_HEADER,
    PreviousPayload,
    RecordInfo,
    RecordLocation,
    StoredRecord,
    WARCFormatError,
    WARCWriteError,
    bare_uri,
    format_warc_date,
    parse_warc_date,
    sha1_base32,
)
from .write import COMPRESS_LEVEL, FileEnd, append_exchange, repair_file

__all__ = [
    "ARCHIVE_KEY_HEADER",
    "COMPRESS_LEVEL",
    "ORIG_HEADER_PREFIX",
    "REVISIT_PROFILE",
    "CachedResponse",
    "FileEnd",
    "HTTPRequest",
    "HTTPResponse",
    "PendingRecord",
    "PreviousPayload",
    "RecordInfo",
    "RecordLocation",
    "StoredRecord",
    "WARCFormatError",
    "WARCWriteError",
    "append_exchange",
    "bare_uri",
    "repair_file",
    "build_exchange",
    "fit_content_length",
    "format_warc_date",
    "newest_response",
    "open_payload",
    "parse_warc_date",
    "read_record_at",
    "read_records",
    "resolve_payload",
    "response_at",
    "sanitize_headers",
    "sha1_base32",
]
