"""Building WARC records: one HTTP exchange becomes ``request`` + ``response`` (or ``revisit``).

Records are serialised here, byte for byte as warcio's ``RecordBuilder`` and ``WARCWriter``
would write them (a test compares the two), without their generic machinery (a third of the
cost of recording a small page), and with two changes, each for a reason:

- HTTP header blocks are written byte for byte as given (warcio would percent-encode non-ASCII
  header values), so replay sends exactly what upstream sent;
- digests are computed here in one pass over the body and checked again while it is copied
  (see :mod:`.write`), so a body file that changes between build and write can never produce an
  inconsistent record.

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

import hashlib
import io
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, NamedTuple
from urllib.parse import urlsplit

from .record import (
    _RAW_CHUNK,
    _TOKEN,
    ARCHIVE_KEY_HEADER,
    WARC_VERSION,
    PreviousPayload,
    RecordInfo,
    WARCWriteError,
    _as_bytes,
    _as_text,
    _format_digest,
    _same_digest,
    format_warc_date,
)

__all__ = [
    "ORIG_HEADER_PREFIX",
    "REVISIT_PROFILE",
    "HTTPRequest",
    "HTTPResponse",
    "PendingRecord",
    "build_exchange",
    "fit_content_length",
    "sanitize_headers",
]

#: Prefix given to headers that no longer describe the stored body (as pywb names them).
ORIG_HEADER_PREFIX = "X-Archive-Orig-"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # controls except HTAB
_BAD_URI = re.compile(r"[\x00-\x20\x7f]")
_HTTP_VERSION = re.compile(r"HTTP/[0-9]\.[0-9]")

Header = tuple[str | bytes, str | bytes]


# ---------------------------------------------------------------------------------------------
# headers


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


def fit_content_length(headers: Sequence[tuple[str, str]], size: int) -> list[tuple[str, str]]:
    """``headers`` for a stored body of ``size`` bytes: a ``Content-Length`` that is not its
    length (a de-chunked or cut body) is kept only as ``X-Archive-Orig-Content-Length``, as
    replaying it would break the answer."""
    length = next((v for n, v in headers if n.lower() == "content-length"), None)
    if length is None or length.strip() == str(size):
        return list(headers)
    return [(ORIG_HEADER_PREFIX + n if n.lower() == "content-length" else n, v) for n, v in headers]


class _Head(NamedTuple):
    """An HTTP head as written, and its fields as a reader parses them back."""

    block: bytes
    fields: tuple[tuple[str, str], ...]


def _header_block(start_line: bytes, headers: Iterable[Header], what: str) -> _Head:
    """The head: the start line, ``Name: value`` lines as given, a blank line.  Its fields are
    what :func:`~.record._parse_http_fields` reads back from it (values without surrounding
    blanks), made here from the checked names and values instead of parsing it again."""
    names = [_as_bytes(name) for name, _ in headers]
    values = [_as_bytes(value) for _, value in headers]
    if (
        not all(map(_TOKEN.fullmatch, names))
        or _BAD_VALUE.search(b"\t".join(values))
        or b"transfer-encoding" in {name.lower() for name in names}
    ):
        for bname, bvalue in zip(names, values, strict=True):
            if not _TOKEN.fullmatch(bname):
                raise ValueError(f"{what}: invalid header name {bname!r}")
            if _BAD_VALUE.search(bvalue):
                raise ValueError(f"{what}: header {bname!r} has a control character (CR/LF?) in it")
            if bname.lower() == b"transfer-encoding":
                raise ValueError(
                    f"{what}: a Transfer-Encoding header cannot be stored with a decoded body; "
                    "pass the headers through sanitize_headers() first"
                )
    lines = b"".join([b"%s: %s\r\n" % pair for pair in zip(names, values, strict=True)])
    fields = tuple(
        (_as_text(name), _as_text(value.strip(b" \t")))
        for name, value in zip(names, values, strict=True)
    )
    return _Head(start_line + b"\r\n" + lines + b"\r\n", fields)


@dataclass(frozen=True)
class PendingRecord:
    """A built record not yet written; its body stream is consumed by writing it once."""

    info: RecordInfo
    #: the WARC header block, then the HTTP head (``info.http_head``), the payload (read from
    #: ``_body``: a revisit has none) and the record's two CRLFs
    _warc_head: bytes = field(repr=False)
    _body: _CheckedBody | None = field(repr=False, default=None)

    def chunks(self, size: int) -> Iterator[bytes]:
        """The record's bytes, as written, in pieces of the payload of at most ``size``
        bytes; its digest is checked before the last piece (WARCWriteError, then: the member
        is left unfinished).  Once only: the body is a stream."""
        if self._body is not None:
            self._body.rewind()
        yield self._warc_head + self.info.http_head
        if self._body is not None:
            while chunk := self._body.read(size):
                yield chunk
        yield b"\r\n\r\n"

    def read_payload(self) -> bytes | None:
        """The payload once written, read again from its stream (still open: the caller's),
        and checked against its digest; None for a record without one (a revisit).  Lets a
        listener of the store (the search index) have a page it just recorded without
        reading it back from the file."""
        return self._body.read_again() if self._body is not None else None


# ---------------------------------------------------------------------------------------------
# building


@dataclass(frozen=True)
class HTTPRequest:
    """The request as sent upstream. ``target`` defaults to the path and query of the URI."""

    method: str
    headers: Sequence[Header]
    body: bytes | IO[bytes] = b""
    target: str | None = None
    version: str = "HTTP/1.1"


@dataclass(frozen=True)
class HTTPResponse:
    """The response as received. ``body`` is a seekable binary file (or bytes), read from its
    current position to its end; headers must already be through :func:`sanitize_headers`."""

    status: int
    reason: str
    headers: Sequence[Header]
    body: bytes | IO[bytes] = b""
    version: str = "HTTP/1.1"


class _CheckedBody:
    """Gives the writer exactly ``length`` bytes and checks they hash to what was recorded.

    Raising before the record trailer is written leaves the gzip member unfinished, so a body
    that changed between build and write can only ever produce a torn (never served) record.
    """

    def __init__(self, stream: IO[bytes], start: int, length: int, digest: bytes):
        self._stream, self._start, self._length, self._digest = stream, start, length, digest
        self._remaining = length
        self._hash = hashlib.sha1()
        self._used = False

    def rewind(self) -> None:
        if self._used:
            raise WARCWriteError("a PendingRecord can be written only once")
        self._used = True
        self._stream.seek(self._start)

    def read_again(self) -> bytes:
        """The whole body once more (after it was written): WARCWriteError if it is not what
        was recorded."""
        self._stream.seek(self._start)
        data = self._stream.read(self._length)
        if len(data) != self._length or hashlib.sha1(data).digest() != self._digest:
            raise WARCWriteError("body changed after it was recorded")
        return data

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


def _body_stream(body: bytes | bytearray | memoryview | IO[bytes], what: str) -> IO[bytes]:
    if isinstance(body, bytes | bytearray | memoryview):
        return io.BytesIO(bytes(body))
    if not (hasattr(body, "read") and hasattr(body, "seek") and hasattr(body, "tell")):
        raise TypeError(f"{what} body must be bytes or a seekable binary file, not {type(body)}")
    return body


def _digest_body(stream: IO[bytes], head: bytes) -> tuple[int, int, bytes, str, str]:
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


#: the bits of a random (version 4, RFC 9562 variant) UUID that say it is one
_UUID4_CLEAR = ~((0xF << 76) | (0x3 << 62))
_UUID4_SET = (0x4 << 76) | (0x2 << 62)


def _new_record_id() -> str:
    """A random UUID, as ``uuid.uuid4()`` makes one but from the process's random generator
    (seeded from the system's, and again in a forked child): a record ID must be unique, not
    secret, and two ``getrandom`` calls a recording cost more than the rest of its IDs."""
    h = "%032x" % (random.getrandbits(128) & _UUID4_CLEAR | _UUID4_SET)
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"


def _make_info(headers: list[tuple[str, str]], http_head: _Head, payload_length: int) -> RecordInfo:
    fields = dict((n.lower(), v) for n, v in headers)
    return RecordInfo(
        rec_type=fields["warc-type"],
        record_id=fields["warc-record-id"],
        date=fields["warc-date"],
        target_uri=fields.get("warc-target-uri"),
        archive_key=fields.get(ARCHIVE_KEY_HEADER.lower()),
        warc_headers=tuple(headers),
        content_length=int(fields["content-length"]),
        http_head=http_head.block,
        http_headers=http_head.fields,
        payload_length=payload_length,
    )


def _make_pending(
    headers: list[tuple[str, str]],
    http_head: _Head,
    body: _CheckedBody | None,
    body_length: int,
) -> PendingRecord:
    """``headers`` end with Content-Length, the length of the block (HTTP head and payload),
    as warcio writes them: the version line, ``Name: value`` lines, UTF-8, a blank line."""
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
    warc_head = f"{WARC_VERSION}\r\n{lines}\r\n".encode()
    return PendingRecord(_make_info(headers, http_head, body_length), warc_head, body)


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
    req_http = _header_block(req_line, request.headers, "request")
    req_head = req_http.block
    status_line = f"{response.version} {response.status} ".encode("ascii") + reason
    resp_http = _header_block(status_line, response.headers, "response")
    resp_head = resp_http.block

    req_stream = _body_stream(request.body, "request")
    resp_stream = _body_stream(response.body, "response")
    r_start, r_len, r_raw, r_payload, r_block = _digest_body(req_stream, req_head)
    p_start, p_len, p_raw, p_payload, p_block = _digest_body(resp_stream, resp_head)

    req_id, resp_id = _new_record_id(), _new_record_id()
    common = [("WARC-Date", warc_date), ("WARC-Target-URI", target_uri)]
    if ip_address:
        _check_uri(ip_address, "IP address")
        common.append(("WARC-IP-Address", ip_address))

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
            req_headers,
            req_http,
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
        records.append(_make_pending(resp_headers, resp_http, None, 0))
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
                resp_headers,
                resp_http,
                _CheckedBody(resp_stream, p_start, p_len, p_raw),
                p_len,
            )
        )
    return records
