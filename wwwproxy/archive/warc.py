"""WARC layer of the cache: build, append and read one archive key's records.

Each archive key has one file, ``cache/<proto>/<host[:port]>/<hash>.warc.gz``, holding that
key's ``request`` and ``response`` (or ``revisit``) records, oldest first, each record its own gzip
member. This module knows nothing of hashes, URLs or the index: the store hands it a path, the
archive key and the exchange, and gets back record offsets and lengths for the CDXJ index.

Writing goes through warcio (``RecordBuilder`` records, ``WARCWriter`` serialisation), with three
changes, each for a reason:

- HTTP header blocks are written byte for byte as given (warcio would percent-encode non-ASCII
  header values), so replay sends exactly what upstream sent;
- digests are computed here in one pass over the body and checked again while warcio copies it,
  so a body file that changes between build and write can never produce an inconsistent record;
- each gzip member is compressed at level 6, not warcio's 9: on text, level 9 measured ~2.6 MB/s
  against ~33 MB/s for level 6 at nearly the same size.

Reading does not use warcio's ``ArchiveIterator``: it is lenient by design (a gzip member cut off
by a crash is returned as a short record with its digest silently unchecked, and ``warcio check``
passes such a file), which is exactly what crash safety cannot accept. Here a record is yielded
only when its gzip member is complete (CRC and length checked by zlib), its ``Content-Length``
matches, it ends with CRLF CRLF and its digests match. Bodies are never held in memory: they are
streamed from disk through a decompressor.

Bodies are stored as received minus transfer coding: the body given to :func:`build_exchange` must
be the message body with any ``Transfer-Encoding`` removed (aiohttp de-chunks) but its
``Content-Encoding`` intact. A ``Transfer-Encoding: chunked`` header stored next to a de-chunked
body is the pywb#584 bug (readers would try to de-chunk it again), so :func:`build_exchange`
refuses a ``Transfer-Encoding`` header; :func:`sanitize_headers` renames it to
``X-Archive-Orig-Transfer-Encoding`` (pywb's prefix for original headers), keeping the information.
The payload digest is then over the de-chunked body, as WARC 1.1 §6.3.2 defines the payload
(warcio#74).
"""

from __future__ import annotations

import base64
import binascii
import errno
import fcntl
import hashlib
import io
import logging
import os
import re
import uuid
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, NamedTuple
from urllib.parse import urlsplit

from warcio.recordbuilder import RecordBuilder
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from ..fsutil import fsync_dir

__all__ = [
    "ARCHIVE_KEY_HEADER",
    "COMPRESS_LEVEL",
    "ORIG_HEADER_PREFIX",
    "REVISIT_PROFILE",
    "CachedResponse",
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
    "build_exchange",
    "format_warc_date",
    "newest_response",
    "open_payload",
    "parse_warc_date",
    "read_record_at",
    "read_records",
    "resolve_payload",
    "sanitize_headers",
    "sha1_base32",
]

log = logging.getLogger(__name__)

#: Extension field naming the archive key (WARC 1.1 §5.1: unknown fields are ignored by readers).
#: It lets the index be rebuilt from the WARC files alone: for non-GET requests the key (URL plus
#: ``__wb_method=...``) differs from ``WARC-Target-URI``.
ARCHIVE_KEY_HEADER = "WARC-Archive-Key"
#: Prefix given to headers that no longer describe the stored body (as pywb names them).
ORIG_HEADER_PREFIX = "X-Archive-Orig-"
REVISIT_PROFILE = RecordBuilder.REVISIT_PROFILE_1_1
COMPRESS_LEVEL = 6
WARC_VERSION = "WARC/1.1"

_RAW_CHUNK = 64 * 1024  # compressed bytes read at a time
_OUT_CHUNK = 64 * 1024  # most decompressed bytes produced at a time (bounds gzip bombs)
_MAX_WARC_HEAD = 1024 * 1024
_MAX_HTTP_HEAD = 1024 * 1024
_HTTP_RECORD_TYPES = ("request", "response", "revisit")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # controls except HTAB
_BAD_URI = re.compile(r"[\x00-\x20\x7f]")
_HTTP_VERSION = re.compile(r"HTTP/[0-9]\.[0-9]")
_STATUS_LINE = re.compile(rb"(HTTP/[0-9]\.[0-9]) ([0-9]{3})(?: (.*))?")
_REQUEST_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\S+) (HTTP/[0-9]\.[0-9])")
_WARC_DATE = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?Z)?)?)?"
)

Header = tuple[str | bytes, str | bytes]


# ---------------------------------------------------------------------------------------------
# errors


class WARCFormatError(Exception):
    """A WARC file is damaged at ``offset`` (the start of the gzip member concerned).

    ``kind`` says what the reader could do about it:
    ``"torn"`` the file ends inside a gzip member (a write cut short, e.g. by kill -9);
    ``"corrupt"`` the bytes there are not valid gzip, so nothing after them can be framed;
    ``"record"`` the gzip member is whole but the record in it is invalid; it is skipped and
    reading goes on with the next member.
    """

    def __init__(self, path: str | os.PathLike[str], offset: int, reason: str, kind: str):
        self.path = os.fspath(path)
        self.offset = offset
        self.reason = reason
        self.kind = kind
        super().__init__(f"{self.path}: at offset {offset}: {reason}")

    @property
    def torn(self) -> bool:
        return self.kind == "torn"


class WARCWriteError(Exception):
    """Appending failed; the file was cut back to where it was before the append."""


class _RecordError(Exception):
    """Invalid record inside a complete gzip member (internal; becomes a WARCFormatError)."""


# ---------------------------------------------------------------------------------------------
# dates and digests


def format_warc_date(dt: datetime) -> str:
    """WARC-Date with microseconds, always 6 digits, so byte order is time order in the index."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"WARC-Date needs a timezone-aware datetime, got naive {dt!r}")
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_warc_date(value: str) -> datetime:
    """Parse any W3C-DTF WARC-Date (year to nanoseconds) to an aware UTC datetime."""
    m = _WARC_DATE.fullmatch(value)
    if not m:
        raise ValueError(f"not a WARC-Date (W3C-DTF, UTC 'Z'): {value!r}")
    year, month, day, hour, minute, second, frac = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    try:
        return datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            micro,
            tzinfo=UTC,
        )
    except ValueError as exc:
        raise ValueError(f"not a valid WARC-Date: {value!r} ({exc})") from None


def _decode_digest(value: str | None) -> tuple[str, bytes] | None:
    """``algo:value`` (base32, hex or base64, as WARC writers use) to (hashlib name, raw)."""
    if not value or ":" not in value:
        return None
    algo, _, text = value.partition(":")
    algo = algo.strip().lower().replace("-", "")
    text = text.strip()
    try:
        size = hashlib.new(algo).digest_size
    except (ValueError, TypeError):
        return None
    for decode in (
        lambda t: base64.b32decode(t, casefold=True),
        lambda t: base64.b16decode(t, casefold=True),
        lambda t: base64.b64decode(t, altchars=b"-_" if ("-" in t or "_" in t) else None),
    ):
        try:
            raw = decode(text)
        except (binascii.Error, ValueError):
            continue
        if len(raw) == size:
            return algo, raw
    return None


def _format_digest(h: hashlib._Hash) -> str:
    return "sha1:" + base64.b32encode(h.digest()).decode("ascii")


def sha1_base32(digest: str | None) -> str | None:
    """The CDXJ ``sha`` value: Base32 SHA-1 without prefix, or None if not a SHA-1 digest."""
    decoded = _decode_digest(digest)
    if decoded is None or decoded[0] != "sha1":
        return None
    return base64.b32encode(decoded[1]).decode("ascii")


# ---------------------------------------------------------------------------------------------
# headers


def _as_bytes(value: str | bytes) -> bytes:
    # aiohttp decodes header bytes as UTF-8 with surrogateescape; this undoes that exactly.
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _as_text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def sanitize_headers(headers: Iterable[Header], *, content_decoded: bool = False) -> list[Header]:
    """Rename headers that describe a transfer coding the stored body no longer has.

    ``Transfer-Encoding`` is always renamed to ``X-Archive-Orig-Transfer-Encoding``: the stored
    body is de-chunked. With ``content_decoded`` (the body was decompressed before storing, which
    the store should avoid), ``Content-Encoding`` and ``Content-Length`` are renamed too.
    """
    rename = {b"transfer-encoding"}
    if content_decoded:
        rename |= {b"content-encoding", b"content-length"}
    out: list[Header] = []
    for name, value in headers:
        if _as_bytes(name).lower() in rename:
            if isinstance(name, bytes):
                name = ORIG_HEADER_PREFIX.encode("ascii") + name
            else:
                name = ORIG_HEADER_PREFIX + name
        out.append((name, value))
    return out


def _header_block(start_line: bytes, headers: Iterable[Header], what: str) -> bytes:
    lines = [start_line]
    for name, value in headers:
        bname, bvalue = _as_bytes(name), _as_bytes(value)
        if not _TOKEN.fullmatch(bname):
            raise ValueError(f"{what}: invalid header name {bname!r}")
        if _BAD_VALUE.search(bvalue):
            raise ValueError(f"{what}: header {bname!r} has a control character (CR/LF?) in it")
        if bname.lower() == b"transfer-encoding":
            raise ValueError(
                f"{what}: a Transfer-Encoding header cannot be stored with a decoded body; "
                "pass the headers through sanitize_headers() first"
            )
        lines.append(bname + b": " + bvalue)
    return b"\r\n".join(lines) + b"\r\n\r\n"


class _ExactHTTPHeaders(StatusAndHeaders):
    """warcio headers object that serialises to exactly the given bytes."""

    def __init__(self, start_line: str, raw: bytes):
        super().__init__(start_line, [])
        self._raw = raw
        self.headers_buff = raw

    def compute_headers_buffer(self, header_filter=None) -> None:  # warcio's signature
        self.headers_buff = self._raw


# ---------------------------------------------------------------------------------------------
# records: metadata shared by records about to be written and records read back


@dataclass(frozen=True, kw_only=True)
class RecordInfo:
    """What the index and the store need to know about one record."""

    rec_type: str
    record_id: str
    date: str
    target_uri: str | None
    archive_key: str | None
    warc_headers: tuple[tuple[str, str], ...]
    content_length: int
    #: HTTP start line + headers + CRLF, exactly as stored (b"" for non-HTTP records).
    http_head: bytes
    #: Parsed from ``http_head``, decoded UTF-8 with surrogateescape (as aiohttp does), so
    #: ``.encode("utf-8", "surrogateescape")`` gives back the stored bytes.
    http_headers: tuple[tuple[str, str], ...]
    #: Payload bytes held by this record (0 for a revisit: its payload is in the original).
    payload_length: int

    def warc_header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for n, v in self.warc_headers if n.lower() == lname), None)

    def http_header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for n, v in self.http_headers if n.lower() == lname), None)

    @property
    def http_start_line(self) -> str | None:
        if not self.http_head:
            return None
        return _as_text(self.http_head.split(b"\r\n", 1)[0])

    @property
    def status(self) -> int | None:
        """HTTP status code of a response or revisit."""
        line = self.http_start_line
        if line is None or self.rec_type == "request":
            return None
        m = _STATUS_LINE.fullmatch(_as_bytes(line))
        return int(m.group(2)) if m else None

    @property
    def method(self) -> str | None:
        line = self.http_start_line
        if line is None or self.rec_type != "request":
            return None
        return line.split(" ", 1)[0]

    @property
    def payload_digest(self) -> str | None:
        return self.warc_header("WARC-Payload-Digest")

    @property
    def block_digest(self) -> str | None:
        return self.warc_header("WARC-Block-Digest")

    @property
    def sha1(self) -> str | None:
        """CDXJ ``sha``: Base32 SHA-1 of the payload (for a revisit, of the original's)."""
        return sha1_base32(self.payload_digest)

    @property
    def concurrent_to(self) -> tuple[str, ...]:
        return tuple(v for n, v in self.warc_headers if n.lower() == "warc-concurrent-to")

    @property
    def refers_to(self) -> str | None:
        return self.warc_header("WARC-Refers-To")

    @property
    def refers_to_target_uri(self) -> str | None:
        return self.warc_header("WARC-Refers-To-Target-URI")

    @property
    def refers_to_date(self) -> str | None:
        return self.warc_header("WARC-Refers-To-Date")

    @property
    def profile(self) -> str | None:
        return self.warc_header("WARC-Profile")

    @property
    def mime_type(self) -> str | None:
        """CDXJ ``mct``: the HTTP Content-Type without parameters."""
        ctype = self.http_header("Content-Type")
        return ctype.split(";", 1)[0].strip().lower() if ctype else None


@dataclass(frozen=True)
class PendingRecord:
    """A built record not yet written; its body stream is consumed by writing it once."""

    info: RecordInfo
    _record: object = field(repr=False)  # warcio ArcWarcRecord
    _body: _CheckedBody | None = field(repr=False, default=None)


@dataclass(frozen=True, kw_only=True)
class StoredRecord(RecordInfo):
    """A complete, verified record read back from ``path``."""

    path: str
    offset: int  #: where its gzip member starts (CDXJ ``ref`` warcfile:NAME#OFFSET)
    length: int  #: compressed length of the member (CDXJ ``rle``)
    payload_start: int  #: offset of the payload inside the decompressed record


class RecordLocation(NamedTuple):
    offset: int
    length: int


@dataclass(frozen=True)
class PreviousPayload:
    """The newest stored payload of a key, for the revisit decision."""

    record_id: str
    target_uri: str
    date: str
    payload_digest: str

    @classmethod
    def from_record(cls, record: RecordInfo) -> PreviousPayload:
        if record.rec_type != "response" or not record.payload_digest:
            raise ValueError(f"{record.record_id} is not a response record with a payload digest")
        return cls(record.record_id, record.target_uri or "", record.date, record.payload_digest)


# ---------------------------------------------------------------------------------------------
# building


@dataclass(frozen=True)
class HTTPRequest:
    """The request as sent upstream. ``target`` defaults to the path and query of the URI."""

    method: str
    headers: Sequence[Header]
    body: bytes | BinaryIO = b""
    target: str | None = None
    version: str = "HTTP/1.1"


@dataclass(frozen=True)
class HTTPResponse:
    """The response as received. ``body`` is a seekable binary file (or bytes), read from its
    current position to its end; headers must already be through :func:`sanitize_headers`."""

    status: int
    reason: str
    headers: Sequence[Header]
    body: bytes | BinaryIO = b""
    version: str = "HTTP/1.1"


class _CheckedBody:
    """Gives warcio exactly ``length`` bytes and checks they hash to what was recorded.

    Raising before warcio writes the record trailer leaves the gzip member unfinished, so a body
    that changed between build and write can only ever produce a torn (never served) record.
    """

    def __init__(self, stream: BinaryIO, start: int, length: int, digest: bytes):
        self._stream, self._start, self._length, self._digest = stream, start, length, digest
        self._remaining = length
        self._hash = hashlib.sha1()
        self._used = False

    def rewind(self) -> None:
        if self._used:
            raise WARCWriteError("a PendingRecord can be written only once")
        self._used = True
        self._stream.seek(self._start)

    def read(self, size: int = -1) -> bytes:
        if self._remaining == 0:
            if self._hash.digest() != self._digest:
                raise WARCWriteError("body changed between build_exchange and append_exchange")
            return b""
        want = self._remaining if size is None or size < 0 else min(size, self._remaining)
        data = self._stream.read(want)
        if not data:
            raise WARCWriteError(
                f"body shrank between build_exchange and append_exchange "
                f"({self._length - self._remaining} of {self._length} bytes)"
            )
        self._remaining -= len(data)
        self._hash.update(data)
        return data


def _body_stream(body: bytes | bytearray | memoryview | BinaryIO, what: str) -> BinaryIO:
    if isinstance(body, bytes | bytearray | memoryview):
        return io.BytesIO(bytes(body))
    if not (hasattr(body, "read") and hasattr(body, "seek") and hasattr(body, "tell")):
        raise TypeError(f"{what} body must be bytes or a seekable binary file, not {type(body)}")
    return body


def _digest_body(stream: BinaryIO, head: bytes) -> tuple[int, int, bytes, str, str]:
    """One pass over the body: (start, length, raw payload sha1, payload digest, block digest)."""
    start = stream.tell()
    payload, block = hashlib.sha1(), hashlib.sha1(head)
    length = 0
    while chunk := stream.read(_RAW_CHUNK):
        if not isinstance(chunk, bytes):
            raise TypeError("body stream must be binary (read() returned str)")
        payload.update(chunk)
        block.update(chunk)
        length += len(chunk)
    stream.seek(start)
    return start, length, payload.digest(), _format_digest(payload), _format_digest(block)


def _check_uri(value: str, what: str) -> None:
    if not value or _BAD_URI.search(value):
        raise ValueError(
            f"{what} must be non-empty with no spaces or control characters: {value!r}"
        )


def _new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def _make_info(headers: list[tuple[str, str]], http_head: bytes, payload_length: int) -> RecordInfo:
    fields = dict((n.lower(), v) for n, v in headers)
    return RecordInfo(
        rec_type=fields["warc-type"],
        record_id=fields["warc-record-id"],
        date=fields["warc-date"],
        target_uri=fields.get("warc-target-uri"),
        archive_key=fields.get(ARCHIVE_KEY_HEADER.lower()),
        warc_headers=tuple(headers),
        content_length=int(fields["content-length"]),
        http_head=http_head,
        http_headers=_parse_http_fields(http_head) if http_head else (),
        payload_length=payload_length,
    )


def _make_pending(
    builder: RecordBuilder,
    uri: str,
    headers: list[tuple[str, str]],
    http_head: bytes,
    body: _CheckedBody | None,
    body_length: int,
) -> PendingRecord:
    rec_type = headers[0][1]
    start_line = _as_text(http_head.split(b"\r\n", 1)[0])
    record = builder.create_warc_record(
        uri,
        rec_type,
        payload=body,
        length=body_length if body is not None else None,
        warc_headers=StatusAndHeaders("", list(headers), protocol=WARC_VERSION),
        http_headers=_ExactHTTPHeaders(start_line, http_head),
    )
    return PendingRecord(_make_info(headers, http_head, body_length), record, body)


def build_exchange(
    *,
    target_uri: str,
    archive_key: str,
    request: HTTPRequest,
    response: HTTPResponse,
    date: datetime,
    previous: PreviousPayload | None = None,
    ip_address: str | None = None,
) -> list[PendingRecord]:
    """Build the ``request`` and ``response`` records of one exchange, in that order.

    The response becomes a ``revisit`` (identical-payload-digest profile, referring to
    ``previous``) when its payload digest equals ``previous.payload_digest``. Request first: a crash
    between the two leaves a request without response, never a response without its request.
    Bodies are read once here to digest them and once more when written; nothing is buffered.
    """
    _check_uri(target_uri, "target URI")
    _check_uri(archive_key, "archive key")
    scheme = urlsplit(target_uri).scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(
            f"target URI must be http or https (readers parse HTTP only there): {target_uri!r}"
        )
    warc_date = format_warc_date(date)
    for what, version in (("request", request.version), ("response", response.version)):
        if not _HTTP_VERSION.fullmatch(version):
            raise ValueError(f"{what}: bad HTTP version {version!r}")
    if not _TOKEN.fullmatch(request.method.encode("ascii", "replace")):
        raise ValueError(f"request: bad method {request.method!r}")
    target = request.target
    if target is None:
        parts = urlsplit(target_uri)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    _check_uri(target, "request target")
    if (
        isinstance(response.status, bool)
        or not isinstance(response.status, int)
        or not (100 <= response.status <= 999)
    ):
        raise ValueError(f"response: status must be a 3-digit int, got {response.status!r}")
    reason = _as_bytes(response.reason)
    if _BAD_VALUE.search(reason):
        raise ValueError(f"response: reason phrase has a control character: {reason!r}")

    req_line = f"{request.method} {target} {request.version}".encode()
    req_head = _header_block(req_line, request.headers, "request")
    status_line = f"{response.version} {response.status} ".encode("ascii") + reason
    resp_head = _header_block(status_line, response.headers, "response")

    req_stream = _body_stream(request.body, "request")
    resp_stream = _body_stream(response.body, "response")
    r_start, r_len, r_raw, r_payload, r_block = _digest_body(req_stream, req_head)
    p_start, p_len, p_raw, p_payload, p_block = _digest_body(resp_stream, resp_head)

    req_id, resp_id = _new_record_id(), _new_record_id()
    common = [("WARC-Date", warc_date), ("WARC-Target-URI", target_uri)]
    if ip_address:
        _check_uri(ip_address, "IP address")
        common.append(("WARC-IP-Address", ip_address))

    builder = RecordBuilder(warc_version=WARC_VERSION)
    req_headers = [
        ("WARC-Type", "request"),
        ("WARC-Record-ID", req_id),
        *common,
        ("WARC-Concurrent-To", resp_id),
        (ARCHIVE_KEY_HEADER, archive_key),
        ("Content-Type", "application/http; msgtype=request"),
        ("WARC-Payload-Digest", r_payload),
        ("WARC-Block-Digest", r_block),
        ("Content-Length", str(len(req_head) + r_len)),
    ]
    records = [
        _make_pending(
            builder,
            target_uri,
            req_headers,
            req_head,
            _CheckedBody(req_stream, r_start, r_len, r_raw),
            r_len,
        )
    ]

    same = previous is not None and _same_digest(previous.payload_digest, p_payload)
    if same:
        assert previous is not None
        resp_headers = [
            ("WARC-Type", "revisit"),
            ("WARC-Record-ID", resp_id),
            *common,
            ("WARC-Concurrent-To", req_id),
            (ARCHIVE_KEY_HEADER, archive_key),
            ("WARC-Profile", REVISIT_PROFILE),
            ("WARC-Refers-To", previous.record_id),
            ("WARC-Refers-To-Target-URI", previous.target_uri),
            ("WARC-Refers-To-Date", previous.date),
            ("Content-Type", "application/http; msgtype=response"),
            ("WARC-Payload-Digest", p_payload),
            ("WARC-Block-Digest", _format_digest(hashlib.sha1(resp_head))),
            ("Content-Length", str(len(resp_head))),
        ]
        records.append(_make_pending(builder, target_uri, resp_headers, resp_head, None, 0))
    else:
        resp_headers = [
            ("WARC-Type", "response"),
            ("WARC-Record-ID", resp_id),
            *common,
            ("WARC-Concurrent-To", req_id),
            (ARCHIVE_KEY_HEADER, archive_key),
            ("Content-Type", "application/http; msgtype=response"),
            ("WARC-Payload-Digest", p_payload),
            ("WARC-Block-Digest", p_block),
            ("Content-Length", str(len(resp_head) + p_len)),
        ]
        records.append(
            _make_pending(
                builder,
                target_uri,
                resp_headers,
                resp_head,
                _CheckedBody(resp_stream, p_start, p_len, p_raw),
                p_len,
            )
        )
    return records


def _same_digest(a: str | None, b: str | None) -> bool:
    da, db = _decode_digest(a), _decode_digest(b)
    return da is not None and da == db


# ---------------------------------------------------------------------------------------------
# appending


class _GzipMember:
    """File-like target for warcio: compresses into one gzip member; ``flush`` ends it.

    Writes go straight to an unbuffered file, so after a failure nothing is left in a buffer
    that could be written past the point the append is cut back to.
    """

    def __init__(self, fh: BinaryIO, level: int):
        self._fh = fh
        self._comp = zlib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        self.written = 0
        self.finished = False

    def write(self, data: bytes) -> None:
        self._emit(self._comp.compress(data))

    def flush(self) -> None:
        self._emit(self._comp.flush())
        self.finished = True

    def _emit(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # the file is unbuffered: a short write is possible
            n = self._fh.write(view)
            if not n:
                raise OSError(errno.EIO, "write returned 0")
            view = view[n:]
        self.written += len(data)


def _make_dirs(directory: Path) -> None:
    """Create missing directories and make each new entry durable."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        fsync_dir(d.parent)


def _quarantine(path: Path, fh: BinaryIO, offset: int) -> Path:
    """Copy the damaged tail from ``offset`` to a side file, so repair never destroys data."""
    n = 0
    while True:
        side = path.with_name(f"{path.name}.corrupt-{offset}" + (f".{n}" if n else ""))
        try:
            fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            n += 1
    with os.fdopen(fd, "wb") as out:
        fh.seek(offset)
        while chunk := fh.read(_RAW_CHUNK):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return side


def _repair_tail(path: Path, fh: BinaryIO) -> int:
    """Cut whatever follows the last complete gzip member; return the new end of file.

    A torn member (the file ends inside it: the record being written when a crash came) is
    discarded. Bytes that are not gzip at all are copied to ``<name>.corrupt-<offset>`` first,
    since they did not come from an interrupted append. Complete members whose record is invalid
    are left in place: framing is intact, readers skip them, and appending after them is safe.
    """
    end = 0
    problem: WARCFormatError | None = None
    for item in _scan(fh, path, parse=False):
        if isinstance(item, WARCFormatError):
            problem = item
            break
        end = item.offset + item.length
    if problem is None:
        return end
    if problem.torn:
        log.warning("%s; discarding the torn tail from offset %d", problem, problem.offset)
    else:
        side = _quarantine(path, fh, problem.offset)
        log.warning("%s; moved the bytes from offset %d to %s", problem, problem.offset, side)
    fh.truncate(problem.offset)
    os.fsync(fh.fileno())
    return problem.offset


def append_exchange(
    path: str | os.PathLike[str],
    records: Sequence[PendingRecord],
    *,
    compress_level: int = COMPRESS_LEVEL,
) -> list[RecordLocation]:
    """Append ``records`` (one gzip member each) to the key's file; return offsets and lengths.

    Holds an exclusive ``flock`` for the whole append, so appends from threads or processes
    never interleave and never mistake another writer's record in progress for a torn tail.
    Before writing, a torn tail left by a crash is cut off (see :func:`_repair_tail`) so new
    records stay readable. Data is fsynced before returning. If writing fails, the file is cut
    back to where it was and :class:`WARCWriteError` (or the OSError) is raised.
    """
    path = Path(path)
    _make_dirs(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        created = True
    except FileExistsError:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        created = False
    with os.fdopen(fd, "r+b", buffering=0) as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            start = _repair_tail(path, fh)
            fh.seek(start)
            writer = WARCWriter(fh, gzip=False, warc_version=WARC_VERSION)
            locations: list[RecordLocation] = []
            pos = start
            try:
                for rec in records:
                    if rec._body is not None:
                        rec._body.rewind()
                    member = _GzipMember(fh, compress_level)
                    writer.out = member
                    writer.write_record(rec._record)
                    if not member.finished:
                        raise WARCWriteError("warcio did not finish the record")
                    locations.append(RecordLocation(pos, member.written))
                    pos += member.written
                if fh.tell() != pos:
                    raise WARCWriteError(f"file position {fh.tell()} != expected {pos}")
                os.fsync(fh.fileno())
            except BaseException:
                _undo(fh, start, path)
                raise
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    if created:
        fsync_dir(path.parent)
    return locations


def _undo(fh: BinaryIO, start: int, path: Path) -> None:
    try:
        fh.truncate(start)
        os.fsync(fh.fileno())
    except OSError as exc:  # the next append repairs the torn tail
        log.error("%s: could not cut back failed append to %d: %s", path, start, exc)


# ---------------------------------------------------------------------------------------------
# reading


def _inflate(fh: BinaryIO, path: str, offset: int) -> Generator[bytes, None, int]:
    """Decompress the gzip member at ``offset`` in bounded chunks; return its compressed length.

    Leaves ``fh`` at the start of the next member. Raises WARCFormatError (torn or corrupt).
    """
    fh.seek(offset)
    d = zlib.decompressobj(zlib.MAX_WBITS + 16)
    fed = 0
    pending = b""
    while not d.eof:
        if not pending:
            pending = fh.read(_RAW_CHUNK)
            if not pending:
                raise WARCFormatError(
                    path, offset, f"gzip member cut off after {fed} bytes (torn write)", "torn"
                )
            fed += len(pending)
        try:
            out = d.decompress(pending, _OUT_CHUNK)
        except zlib.error as exc:
            raise WARCFormatError(path, offset, f"not valid gzip data ({exc})", "corrupt") from None
        pending = d.unconsumed_tail
        if out:
            yield out
    # At the end, every byte fed past the member is in unused_data (CPython may also leave a
    # copy in unconsumed_tail, so that must not be subtracted again).
    length = fed - len(d.unused_data)
    fh.seek(offset + length)
    return length


class _MemberReader:
    """Buffered view of one member's decompressed bytes."""

    def __init__(self, chunks: Generator[bytes, None, int]):
        self._chunks = chunks
        self._buf = b""
        self.member_length: int | None = None

    def _fill(self) -> bool:
        if self.member_length is not None:
            return False
        try:
            self._buf += next(self._chunks)
        except StopIteration as stop:
            self.member_length = stop.value
            return False
        return True

    def read_until(self, delim: bytes, limit: int) -> bytes | None:
        """Bytes up to and including ``delim`` if it ends within ``limit`` bytes, else None."""
        while True:
            i = self._buf.find(delim, 0, limit)
            if i >= 0:
                out, self._buf = self._buf[: i + len(delim)], self._buf[i + len(delim) :]
                return out
            if len(self._buf) >= limit or not self._fill():
                return None

    def iter_exact(self, n: int) -> Iterator[bytes]:
        """Yield exactly ``n`` bytes, or raise _RecordError saying how many there were."""
        got = 0
        while got < n:
            if not self._buf and not self._fill():
                raise _RecordError(
                    f"Content-Length is {n} more bytes than the record holds (only {got})"
                )
            take, self._buf = self._buf[: n - got], self._buf[n - got :]
            got += len(take)
            yield take

    def read(self, n: int) -> bytes:
        while len(self._buf) < n and self._fill():
            pass
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def at_end(self) -> bool:
        while not self._buf:
            if not self._fill():
                return True
        return False

    def drain(self) -> None:
        self._buf = b""
        while self._fill():
            self._buf = b""


def _split_fields(lines: list[bytes], what: str) -> list[tuple[bytes, bytes]]:
    fields: list[tuple[bytes, bytes]] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):  # obsolete line folding
            if not fields:
                raise _RecordError(f"{what} starts with a continuation line")
            name, value = fields[-1]
            fields[-1] = (name, (value + b" " + line.strip(b" \t")).strip(b" \t"))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise _RecordError(f"{what} has a malformed line {line[:80]!r}")
        fields.append((name, value.strip(b" \t")))
    return fields


def _parse_http_fields(head: bytes) -> tuple[tuple[str, str], ...]:
    lines = head[:-4].split(b"\r\n")[1:] if head.endswith(b"\r\n\r\n") else []
    return tuple((_as_text(n), _as_text(v)) for n, v in _split_fields(lines, "HTTP header"))


def _check_http_head(head: bytes, rec_type: str) -> None:
    start = head.split(b"\r\n", 1)[0]
    pattern = _REQUEST_LINE if rec_type == "request" else _STATUS_LINE
    if not pattern.fullmatch(start):
        raise _RecordError(f"{rec_type} record has a bad HTTP start line {start[:80]!r}")


def _parse_member(reader: _MemberReader, path: str, offset: int, verify: bool) -> dict:
    """Parse and check one record; return StoredRecord fields except the member length."""
    head = reader.read_until(b"\r\n\r\n", _MAX_WARC_HEAD)
    if head is None:
        raise _RecordError("no WARC header block (not a WARC record, or header too long)")
    lines = head[:-4].split(b"\r\n")
    if lines[0] not in (b"WARC/1.0", b"WARC/1.1"):
        raise _RecordError(f"not a WARC/1.0 or WARC/1.1 record: first line {lines[0][:80]!r}")
    try:
        warc_headers = tuple(
            (n.decode("utf-8"), v.decode("utf-8"))
            for n, v in _split_fields(lines[1:], "WARC header")
        )
    except UnicodeDecodeError:
        raise _RecordError("WARC header is not UTF-8") from None
    fields = {n.lower(): v for n, v in warc_headers}
    for required in ("warc-type", "warc-record-id", "warc-date", "content-length"):
        if required not in fields:
            raise _RecordError(f"WARC header lacks {required.title()}")
    rec_type = fields["warc-type"]
    if not fields["content-length"].isdigit():
        raise _RecordError(f"bad Content-Length {fields['content-length']!r}")
    length = int(fields["content-length"])
    uri = fields.get("warc-target-uri")

    block_check = _decode_digest(fields.get("warc-block-digest")) if verify else None
    payload_check = None
    if verify and rec_type != "revisit":
        payload_check = _decode_digest(fields.get("warc-payload-digest"))
    block_hash = hashlib.new(block_check[0]) if block_check else None

    http_head = b""
    if (
        rec_type in _HTTP_RECORD_TYPES
        and length > 0
        and uri is not None
        and uri.lower().startswith(("http:", "https:"))
    ):
        http_head = reader.read_until(b"\r\n\r\n", min(length, _MAX_HTTP_HEAD))
        if http_head is None:
            raise _RecordError("HTTP header block does not end within the record")
        _check_http_head(http_head, rec_type)
        if block_hash:
            block_hash.update(http_head)
    payload_length = length - len(http_head)
    payload_hash = hashlib.new(payload_check[0]) if payload_check else None
    for chunk in reader.iter_exact(payload_length):
        if block_hash:
            block_hash.update(chunk)
        if payload_hash:
            payload_hash.update(chunk)
    if reader.read(4) != b"\r\n\r\n":
        raise _RecordError("record does not end with CRLF CRLF after Content-Length bytes")
    if not reader.at_end():
        raise _RecordError("more data in the gzip member after the record (Content-Length short?)")
    if payload_check and payload_hash and payload_hash.digest() != payload_check[1]:
        raise _RecordError(f"WARC-Payload-Digest mismatch ({fields['warc-payload-digest']})")
    if block_check and block_hash and block_hash.digest() != block_check[1]:
        raise _RecordError(f"WARC-Block-Digest mismatch ({fields['warc-block-digest']})")
    http_headers = _parse_http_fields(http_head) if http_head else ()
    return dict(
        rec_type=rec_type,
        record_id=fields["warc-record-id"],
        date=fields["warc-date"],
        target_uri=uri,
        archive_key=fields.get(ARCHIVE_KEY_HEADER.lower()),
        warc_headers=warc_headers,
        content_length=length,
        http_head=http_head,
        http_headers=http_headers,
        payload_length=payload_length if rec_type != "revisit" else 0,
        path=path,
        offset=offset,
        payload_start=len(head) + len(http_head),
    )


@dataclass(frozen=True)
class _Member:
    """A complete gzip member found by a framing-only scan."""

    offset: int
    length: int


def _scan(
    fh: BinaryIO, path: str | os.PathLike[str], *, parse: bool = True, verify: bool = True
) -> Iterator[StoredRecord | _Member | WARCFormatError]:
    """Walk the members from the start; a torn or corrupt one ends the walk (yielded last)."""
    path = os.fspath(path)
    offset = 0
    while True:
        fh.seek(offset)
        if not fh.read(1):
            return
        reader = _MemberReader(_inflate(fh, path, offset))
        try:
            if parse:
                fields = _parse_member(reader, path, offset, verify)
            else:
                reader.drain()
        except WARCFormatError as exc:
            yield exc
            return
        except _RecordError as bad:
            try:
                reader.drain()
            except WARCFormatError as exc:  # the member is torn: say that, not the symptom
                yield exc
                return
            yield WARCFormatError(path, offset, str(bad), "record")
        else:
            assert reader.member_length is not None
            if parse:
                yield StoredRecord(length=reader.member_length, **fields)
            else:
                yield _Member(offset, reader.member_length)
        assert reader.member_length is not None
        offset += reader.member_length


def read_records(
    path: str | os.PathLike[str], problems: list[WARCFormatError] | None = None
) -> Iterator[StoredRecord]:
    """Yield every complete, verified record of the file in file order (oldest first).

    Damage never raises: it is appended to ``problems`` (when given) and logged at debug level.
    An invalid record in a whole gzip member is skipped; a torn or corrupt member ends the
    reading (nothing after it can be framed). A torn last member may also be an append still in
    progress, which is why reading needs no lock. A missing file raises FileNotFoundError.
    """
    with open(path, "rb") as fh:
        for item in _scan(fh, path):
            if isinstance(item, WARCFormatError):
                log.debug("%s", item)
                if problems is not None:
                    problems.append(item)
            elif isinstance(item, StoredRecord):
                yield item


def read_record_at(path: str | os.PathLike[str], offset: int) -> StoredRecord:
    """Read and verify the one record at ``offset`` (an index ``ref``); WARCFormatError if bad."""
    spath = os.fspath(path)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if not 0 <= offset < size:
            raise WARCFormatError(
                spath, offset, f"offset outside the file ({size} bytes)", "record"
            )
        reader = _MemberReader(_inflate(fh, spath, offset))
        try:
            fields = _parse_member(reader, spath, offset, True)
        except _RecordError as bad:
            raise WARCFormatError(spath, offset, str(bad), "record") from None
        assert reader.member_length is not None
        return StoredRecord(length=reader.member_length, **fields)


class _PayloadReader(io.RawIOBase):
    """Streams one record's payload from disk through a decompressor."""

    def __init__(self, record: StoredRecord):
        super().__init__()
        self._path = record.path
        self._offset = record.offset
        self._fh = open(record.path, "rb")  # noqa: SIM115 (closed in close())
        self._chunks = _inflate(self._fh, record.path, record.offset)
        self._skip = record.payload_start
        self._remaining = record.payload_length
        self._buf = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self._remaining == 0:
            return 0
        while not self._buf:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                raise WARCFormatError(
                    self._path, self._offset, "record ended before its payload did", "record"
                ) from None
            if self._skip:
                drop = min(self._skip, len(chunk))
                self._skip -= drop
                chunk = chunk[drop:]
            self._buf = memoryview(chunk)
        n = min(len(b), len(self._buf), self._remaining)
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._remaining -= n
        return n

    def close(self) -> None:
        if not self.closed:
            self._chunks.close()
            self._fh.close()
        super().close()


def open_payload(record: StoredRecord) -> BinaryIO:
    """A binary stream of the record's payload (the body, or a request's body), read from disk."""
    return io.BufferedReader(_PayloadReader(record), buffer_size=_OUT_CHUNK)  # type: ignore[return-value]


def _find_payload(records: Sequence[StoredRecord], revisit: StoredRecord) -> StoredRecord | None:
    """The earlier full response a revisit stands for, with the same payload digest."""
    candidates = [r for r in records if r.rec_type == "response"]
    if revisit.refers_to:
        by_id = [r for r in candidates if r.record_id == revisit.refers_to]
        if by_id:
            return (
                by_id[-1]
                if _same_digest(by_id[-1].payload_digest, revisit.payload_digest)
                else None
            )
    for r in reversed(candidates):
        if (
            r.target_uri == revisit.refers_to_target_uri
            and r.date == revisit.refers_to_date
            and _same_digest(r.payload_digest, revisit.payload_digest)
        ):
            return r
    return None


def resolve_payload(
    path: str | os.PathLike[str],
    record: StoredRecord,
    problems: list[WARCFormatError] | None = None,
) -> StoredRecord | None:
    """The record holding ``record``'s payload: itself, or a revisit's original in the file."""
    if record.rec_type != "revisit":
        return record
    return _find_payload(list(read_records(path, problems)), record)


@dataclass(frozen=True)
class CachedResponse:
    """The newest servable response of a key, with what is needed to replay and compare it."""

    #: The response or revisit: its status and headers are what to replay.
    response: StoredRecord
    #: The full response whose payload is the body (``response`` itself unless a revisit).
    payload_record: StoredRecord
    #: The request recorded with it (linked by WARC-Concurrent-To), if present.
    request: StoredRecord | None

    @property
    def status(self) -> int | None:
        return self.response.status

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        return self.response.http_headers

    @property
    def date(self) -> datetime:
        return parse_warc_date(self.response.date)

    @property
    def is_revisit(self) -> bool:
        return self.response.rec_type == "revisit"

    def open_body(self) -> BinaryIO:
        return open_payload(self.payload_record)

    def previous(self) -> PreviousPayload:
        """What :func:`build_exchange` needs to decide whether the next capture is a revisit."""
        return PreviousPayload.from_record(self.payload_record)


def newest_response(
    path: str | os.PathLike[str],
    *,
    archive_key: str | None = None,
    target_uri: str | None = None,
    problems: list[WARCFormatError] | None = None,
    accept: Callable[[StoredRecord], bool] | None = None,
    at_or_before: datetime | None = None,
) -> CachedResponse | None:
    """The newest complete response (or resolvable revisit) in the file, or None.

    Only records whose ``WARC-Archive-Key`` / ``WARC-Target-URI`` equal the given ones count
    (hashes can collide), and only those ``accept`` accepts (e.g. no 304s to serve) and, with
    ``at_or_before``, recorded no later than that time (time travel). A revisit whose original
    is missing is reported and skipped, so an older full response may be returned. A missing
    file gives None.
    """
    try:
        records = list(read_records(path, problems))
    except FileNotFoundError:
        return None
    spath = os.fspath(path)
    for rec in reversed(records):
        if rec.rec_type not in ("response", "revisit"):
            continue
        if archive_key is not None and rec.archive_key != archive_key:
            continue
        if target_uri is not None and rec.target_uri != target_uri:
            continue
        if accept is not None and not accept(rec):
            continue
        if at_or_before is not None and parse_warc_date(rec.date) > at_or_before:
            continue
        payload = rec if rec.rec_type == "response" else _find_payload(records, rec)
        if payload is None:
            if problems is not None:
                problems.append(
                    WARCFormatError(
                        spath, rec.offset, "revisit's original is not in the file", "record"
                    )
                )
            continue
        request = next(
            (
                r
                for r in reversed(records)
                if r.rec_type == "request"
                and (r.record_id in rec.concurrent_to or rec.record_id in r.concurrent_to)
            ),
            None,
        )
        return CachedResponse(rec, payload, request)
    return None
