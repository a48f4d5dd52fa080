"""What a WARC record is, for this cache: the metadata model shared by building and reading.

Records about to be written (:mod:`.build`) and records read back (:mod:`.read`) describe
themselves with the same :class:`RecordInfo`; this module also holds the errors, WARC-Date and
digest helpers, and the parsing of header fields that both sides need.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

__all__ = [
    "ARCHIVE_KEY_HEADER",
    "WARC_VERSION",
    "PreviousPayload",
    "RecordInfo",
    "RecordLocation",
    "StoredRecord",
    "WARCFormatError",
    "WARCWriteError",
    "b32encode",
    "bare_uri",
    "format_warc_date",
    "parse_warc_date",
    "sha1_base32",
]

#: Extension field naming the archive key (WARC 1.1 §5.1: unknown fields are ignored by readers).
#: It lets the index be rebuilt from the WARC files alone: for non-GET requests the key (URL plus
#: ``__wb_method=...``) differs from ``WARC-Target-URI``.
ARCHIVE_KEY_HEADER = "WARC-Archive-Key"
WARC_VERSION = "WARC/1.1"

_RAW_CHUNK = 64 * 1024  # compressed bytes read at a time
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_SHA1_BASE32 = re.compile(r"sha1:[A-Z2-7]{32}")
_STATUS_LINE = re.compile(rb"(HTTP/[0-9]\.[0-9]) ([0-9]{3})(?: (.*))?")
_WARC_DATE = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?Z)?)?)?"
)


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


#: RFC 4648 base32's digits as the digits of ``int(text, 32)``
_BASE32_AS_INT = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "0123456789abcdefghijklmnopqrstuv"
)
_SHA1_BASE32 = re.compile(r"[A-Z2-7]{32}")


def _decode_digest(value: str | None) -> tuple[str, bytes] | None:
    """``algo:value`` (base32, hex or base64, as WARC writers use) to (hashlib name, raw).

    The form every record of ours has (``sha1:`` and 32 base32 digits) is decoded as one base
    32 number: ``base64.b32decode`` is written in Python and slow for this, and a disk hit
    checks up to six digests."""
    if not value or ":" not in value:
        return None
    algo, _, text = value.partition(":")
    algo = algo.strip().lower().replace("-", "")
    text = text.strip()
    if algo == "sha1" and _SHA1_BASE32.fullmatch(text):
        return algo, int(text.translate(_BASE32_AS_INT), 32).to_bytes(20, "big")
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


#: every pair of Base32 letters, by the 10 bits they stand for (:func:`b32encode`)
_B32_PAIRS = [
    a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
]


def b32encode(raw: bytes) -> str:
    """Base32 of ``raw`` (RFC 4648, as :func:`base64.b32encode` gives it), ten bits at a time
    for whole groups of five bytes (a SHA-1's 20): the base64 module's is pure Python and
    took a tenth of a record's build, two digests a record."""
    if len(raw) % 5:
        return base64.b32encode(raw).decode("ascii")
    number, pairs = int.from_bytes(raw, "big"), _B32_PAIRS
    return "".join([pairs[(number >> shift) & 1023] for shift in range(len(raw) * 8 - 10, -1, -10)])


def _format_digest(h: hashlib._Hash) -> str:
    return "sha1:" + b32encode(h.digest())


def sha1_base32(digest: str | None) -> str | None:
    """The CDXJ ``sha`` value: Base32 SHA-1 without prefix, or None if not a SHA-1 digest."""
    if digest is not None and _SHA1_BASE32.fullmatch(digest):
        return digest[5:]  # as this cache writes it (32 characters: 160 bits, no padding)
    decoded = _decode_digest(digest)
    if decoded is None or decoded[0] != "sha1":
        return None
    return b32encode(decoded[1])


def bare_uri(value: str | None) -> str | None:
    """A URI field's value without the angle brackets WARC 1.0's grammar puts around it
    (``WARC-Target-URI: <http://...>``, as wget writes it); WARC 1.1 writes it bare."""
    if value is not None and len(value) > 1 and value[0] == "<" and value[-1] == ">":
        return value[1:-1]
    return value


def _same_digest(a: str | None, b: str | None) -> bool:
    da, db = _decode_digest(a), _decode_digest(b)
    return da is not None and da == db


# ---------------------------------------------------------------------------------------------
# header fields


def _as_bytes(value: str | bytes) -> bytes:
    # aiohttp decodes header bytes as UTF-8 with surrogateescape; this undoes that exactly.
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _as_text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


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


# ---------------------------------------------------------------------------------------------
# records: metadata shared by records about to be written and records read back


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordInfo:
    """What the index and the store need to know about one record.  Slotted, as
    :class:`StoredRecord` is: 144 bytes a record instead of 336 with an instance dict, and
    thousands are kept a while (where the copies too big for memory are on disk)."""

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
        return bare_uri(self.warc_header("WARC-Refers-To-Target-URI"))

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


@dataclass(frozen=True, kw_only=True, slots=True)
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
