"""Reading WARC files strictly: records at offsets or in file order, payloads streamed.

Reading does not use warcio's ``ArchiveIterator``: it is lenient by design (a gzip member cut off
by a crash is returned as a short record with its digest silently unchecked, and ``warcio check``
passes such a file), which is exactly what crash safety cannot accept. Here a record is yielded
only when its gzip member is complete (CRC and length checked by the inflater: ISA-L's, or
zlib's), its ``Content-Length`` matches, it ends with CRLF CRLF and its digests match. Bodies are
never held in memory: they are streamed from disk through a decompressor.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import os
import re
import types
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, BinaryIO, cast

from .plain import GZIP_MAGIC, frame_plain
from .record import (
    _RAW_CHUNK,
    _STATUS_LINE,
    ARCHIVE_KEY_HEADER,
    PreviousPayload,
    StoredRecord,
    WARCFormatError,
    _decode_digest,
    _parse_http_fields,
    _RecordError,
    _same_digest,
    _split_fields,
    bare_uri,
    parse_warc_date,
)

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_gunzip_lib: types.ModuleType
try:  # ISA-L's inflate: the same bytes out in less than half zlib's time (a disk hit's
    # largest cost); zlib where the package has no wheel for the platform
    from isal import isal_zlib

    _gunzip_lib = isal_zlib
    _GUNZIP_ERRORS: tuple[type[Exception], ...] = (
        zlib.error,
        cast(type[Exception], isal_zlib.error),
    )
except ImportError:  # pragma: no cover (isal is a dependency; kept for platforms without it)
    _gunzip_lib = zlib
    _GUNZIP_ERRORS = (zlib.error,)

__all__ = [
    "CachedResponse",
    "newest_response",
    "open_payload",
    "read_payload",
    "read_record_at",
    "read_records",
    "resolve_payload",
    "response_at",
]

log = logging.getLogger(__package__)  # the logger of the whole WARC layer

_OUT_CHUNK = 64 * 1024  # most decompressed bytes produced at a time (bounds gzip bombs)
_MAX_WARC_HEAD = 1024 * 1024
_MAX_HTTP_HEAD = 1024 * 1024
_HTTP_RECORD_TYPES = ("request", "response", "revisit")
_REQUEST_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\S+) (HTTP/[0-9]\.[0-9])")


def _inflate(fh: BinaryIO, path: str, offset: int) -> Generator[bytes, None, int]:
    """Decompress the gzip member at ``offset`` in bounded chunks; return its compressed length.

    Leaves ``fh`` at the start of the next member. Raises WARCFormatError (torn or corrupt).
    """
    fh.seek(offset)
    d = _gunzip_lib.decompressobj(zlib.MAX_WBITS + 16)
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
        except _GUNZIP_ERRORS as exc:
            raise WARCFormatError(path, offset, f"not valid gzip data ({exc})", "corrupt") from None
        pending = d.unconsumed_tail
        if out:
            yield out
    # At the end, every byte fed past the member is in unused_data (zlib may also leave a
    # copy in unconsumed_tail, so that must not be subtracted again).
    length = fed - len(d.unused_data)
    fh.seek(offset + length)
    return length


def _frame(fh: BinaryIO, path: str, offset: int) -> Generator[bytes, None, int]:
    """The record at ``offset``: a gzip member (:func:`_inflate`), or in a file named
    ``*.warc`` a record that does not start as one, uncompressed (:func:`.plain.frame_plain`).
    A ``.warc.gz`` file (every cache file) holds gzip members only."""
    if path.endswith(".warc"):
        fh.seek(offset)
        if not GZIP_MAGIC.startswith(fh.read(len(GZIP_MAGIC))):
            return frame_plain(fh, path, offset)
    return _inflate(fh, path, offset)


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
    uri = bare_uri(fields.get("warc-target-uri"))

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
        found = reader.read_until(b"\r\n\r\n", min(length, _MAX_HTTP_HEAD))
        if found is None:
            raise _RecordError("HTTP header block does not end within the record")
        http_head = found
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
    fh: BinaryIO,
    path: str | os.PathLike[str],
    *,
    parse: bool = True,
    verify: bool = True,
    start: int = 0,
) -> Iterator[StoredRecord | _Member | WARCFormatError]:
    """Walk the members from ``start`` (a member's first byte: by default the file's); a torn
    or corrupt one ends the walk (yielded last)."""
    path = os.fspath(path)
    offset = start
    while True:
        fh.seek(offset)
        if not fh.read(1):
            return
        reader = _MemberReader(_frame(fh, path, offset))
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
    with open(path, "rb") as fh:
        return _record_at(fh, os.fspath(path), offset)


def _record_at(fh: BinaryIO, spath: str, offset: int) -> StoredRecord:
    size = os.fstat(fh.fileno()).st_size
    if not 0 <= offset < size:
        raise WARCFormatError(spath, offset, f"offset outside the file ({size} bytes)", "record")
    reader = _MemberReader(_frame(fh, spath, offset))
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
        self._chunks = _frame(self._fh, record.path, record.offset)
        self._skip = record.payload_start
        self._remaining = record.payload_length
        self._buf = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
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
        out = memoryview(b).cast("B")
        n = min(len(out), len(self._buf), self._remaining)
        out[:n] = self._buf[:n]
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
    return io.BufferedReader(_PayloadReader(record), buffer_size=_OUT_CHUNK)


def read_payload(record: StoredRecord) -> bytes:
    """The record's whole payload at once: one read of its member, one inflate, no copy.

    For a body small enough to hold (a cache hit's): streaming it through
    :func:`open_payload` costs a read, an inflate call and a copy per 64 KiB chunk and a join.
    The member is inflated in three stages (the heads, the payload, the closing CRLF CRLF),
    so the payload comes out as its own bytes, not a slice copied out of the whole record: a
    100 KB body is one big allocation fewer, which is what a block in a mapping of its own
    (:mod:`wwwproxy.allocator`) costs most. The member must be whole and end as a record
    does (CRC, length and the closing CRLF CRLF checked); WARCFormatError if not (a file cut
    or changed since it was indexed).
    """
    if record.path.endswith(".warc"):  # maybe uncompressed (:func:`_frame`): streamed
        with open_payload(record) as stream:
            return stream.read()
    fd = os.open(record.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))  # no file object
    try:
        data = os.pread(fd, record.length, record.offset)
    finally:
        os.close(fd)
    if len(data) < record.length:
        raise WARCFormatError(
            record.path, record.offset, f"gzip member cut off after {len(data)} bytes", "torn"
        )
    d = _gunzip_lib.decompressobj(zlib.MAX_WBITS + 16)
    try:
        heads = d.decompress(data, record.payload_start)
        del data  # the compressed rest is in unconsumed_tail now
        # max_length 0 would mean "no limit": an empty payload is not inflated at all
        payload = (
            d.decompress(d.unconsumed_tail, record.payload_length) if record.payload_length else b""
        )
        trailer = d.decompress(d.unconsumed_tail, 5)  # CRLF CRLF, and one byte to see more
    except _GUNZIP_ERRORS as exc:
        raise WARCFormatError(
            record.path, record.offset, f"not valid gzip data ({exc})", "corrupt"
        ) from None
    if (
        not d.eof
        or len(heads) != record.payload_start
        or not heads.endswith(b"\r\n\r\n")  # both heads end so: where the payload starts
        or len(payload) != record.payload_length
        or trailer != b"\r\n\r\n"
    ):
        raise WARCFormatError(
            record.path, record.offset, "the record is not what its index line says", "record"
        )
    return payload


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

    def read_body(self) -> bytes:
        """The whole body (:func:`read_payload`: for one small enough to hold)."""
        return read_payload(self.payload_record)

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

    The file's members are framed first (inflated, not parsed: framing is cheap), and records
    are parsed and checked only as they are needed, newest first: the newest capture, the
    request beside it, a revisit's original.  A page fetched again and again holds a capture
    per fetch, and parsing every one of them on each hit and each capture would make the
    proxy slower with each.  Damage in records never parsed
    is not reported here (``index check`` and ``read_records`` see it).
    """
    spath = os.fspath(path)
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        return None
    with fh:
        members: list[_Member] = []
        for item in _scan(fh, spath, parse=False):
            if isinstance(item, WARCFormatError):
                _report(item, problems)
            elif isinstance(item, _Member):
                members.append(item)
        records = _LazyRecords(fh, spath, members, problems)
        return _newest(records, spath, archive_key, target_uri, problems, accept, at_or_before)


def _report(problem: WARCFormatError, problems: list[WARCFormatError] | None) -> None:
    log.debug("%s", problem)
    if problems is not None:
        problems.append(problem)


class _LazyRecords:
    """The records of framed members, each parsed and checked the first time it is asked for
    (None: not a valid record, reported once)."""

    def __init__(
        self,
        fh: BinaryIO,
        path: str,
        members: list[_Member],
        problems: list[WARCFormatError] | None,
    ) -> None:
        self._fh, self._path, self._members, self._problems = fh, path, members, problems
        self._parsed: dict[int, StoredRecord | None] = {}

    def __len__(self) -> int:
        return len(self._members)

    def __getitem__(self, i: int) -> StoredRecord | None:
        if i in self._parsed:
            return self._parsed[i]
        member = self._members[i]
        reader = _MemberReader(_frame(self._fh, self._path, member.offset))
        record: StoredRecord | None = None
        try:
            fields = _parse_member(reader, self._path, member.offset, True)
        except _RecordError as bad:
            _report(WARCFormatError(self._path, member.offset, str(bad), "record"), self._problems)
        except WARCFormatError as exc:  # changed since it was framed (a purge meanwhile)
            _report(exc, self._problems)
        else:
            record = StoredRecord(length=member.length, **fields)
        self._parsed[i] = record
        return record

    def first(
        self, indices: Iterable[int], wanted: Callable[[StoredRecord], bool]
    ) -> StoredRecord | None:
        for i in indices:
            record = self[i]
            if record is not None and wanted(record):
                return record
        return None


def _is_request_of(record: StoredRecord, response: StoredRecord) -> bool:
    """Is ``record`` the request recorded with ``response`` (linked by WARC-Concurrent-To)?"""
    return record.rec_type == "request" and (
        record.record_id in response.concurrent_to or response.record_id in record.concurrent_to
    )


def _is_original_by_id(record: StoredRecord, revisit: StoredRecord) -> bool:
    """Is ``record`` the response a revisit names by record ID (its payload digest aside)?"""
    return record.rec_type == "response" and record.record_id == revisit.refers_to


def _original(records: _LazyRecords, revisit: StoredRecord) -> StoredRecord | None:
    """:func:`_find_payload`, parsing only what it must: record IDs are unique, so the one
    response a revisit refers to is looked for from the start, where the original usually is."""
    every = range(len(records))
    if revisit.refers_to:
        by_id = records.first(every, lambda r: _is_original_by_id(r, revisit))
        if by_id is not None:
            return by_id if _same_digest(by_id.payload_digest, revisit.payload_digest) else None
    return records.first(
        reversed(every),
        lambda r: (
            r.rec_type == "response"
            and r.target_uri == revisit.refers_to_target_uri
            and r.date == revisit.refers_to_date
            and _same_digest(r.payload_digest, revisit.payload_digest)
        ),
    )


def _newest(
    records: _LazyRecords,
    spath: str,
    archive_key: str | None,
    target_uri: str | None,
    problems: list[WARCFormatError] | None,
    accept: Callable[[StoredRecord], bool] | None,
    at_or_before: datetime | None,
) -> CachedResponse | None:
    for i in reversed(range(len(records))):
        rec = records[i]
        if rec is None or rec.rec_type not in ("response", "revisit"):
            continue
        if archive_key is not None and rec.archive_key != archive_key:
            continue
        if target_uri is not None and rec.target_uri != target_uri:
            continue
        if accept is not None and not accept(rec):
            continue
        if at_or_before is not None and parse_warc_date(rec.date) > at_or_before:
            continue
        payload = rec if rec.rec_type == "response" else _original(records, rec)
        if payload is None:
            if problems is not None:
                problems.append(
                    WARCFormatError(
                        spath, rec.offset, "revisit's original is not in the file", "record"
                    )
                )
            continue
        request = records.first(
            reversed(range(len(records))), functools.partial(_is_request_of, response=rec)
        )
        return CachedResponse(rec, payload, request)
    return None


def response_at(
    path: str | os.PathLike[str],
    offset: int,
    *,
    archive_key: str,
    request_offset: int,
    original_offset: int | None = None,
) -> CachedResponse | None:
    """The capture whose record an index line puts at ``offset``, read without framing the
    rest of the file: the request recorded with it is the member that ends where it starts
    (at ``request_offset``: :func:`append_exchange` writes an exchange's two records
    together), and a revisit's original is at ``original_offset``.

    Each of the two or three records is read and checked whole; None unless they are exactly
    what :func:`newest_response` would pair (the record ``archive_key``'s response or revisit,
    its request beside it, the original with the revisit's ID and payload digest), so that a
    caller can fall back to it.  A missing file raises FileNotFoundError; damage raises
    WARCFormatError."""
    spath = os.fspath(path)
    with open(path, "rb") as fh:
        rec = _record_at(fh, spath, offset)
        if rec.rec_type not in ("response", "revisit") or rec.archive_key != archive_key:
            return None
        payload = rec
        if rec.rec_type == "revisit":
            if original_offset is None or not rec.refers_to:
                return None
            payload = _record_at(fh, spath, original_offset)
            if not _is_original_by_id(payload, rec) or not _same_digest(
                payload.payload_digest, rec.payload_digest
            ):
                return None
        request = _record_at(fh, spath, request_offset)
    if not _is_request_of(request, rec) or request.offset + request.length != offset:
        return None
    return CachedResponse(rec, payload, request)
