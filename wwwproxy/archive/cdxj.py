"""OpenWayback CDXJ 1.0 index: record lines, byte-order sorting, merging, a journal and lookups.

Pure index logic plus thin file I/O; nothing here knows about WARC. The searchable keys (SURT)
arrive as ready strings from the URL layer; a record's ``ref`` names the WARC file and offset.

On disk (``Index``): a sorted index file (``index.cdxj``) searched by binary search over byte
offsets, never read whole, and an append-only journal (``journal.cdxj``) that ``compact()``
merges into a new sorted index with an atomic rename. Lookups consult both, so a record is
visible as soon as ``add()`` returns.

Lines are compared as UTF-8 bytes without their newline, which is what ``LC_ALL=C sort`` does.
Because the space (0x20) sorts below every byte a key may contain, byte order of whole lines is
key order first, then time order (timestamps are always written with microseconds).
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import heapq
import json
import logging
import operator
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from ..fsutil import fsync_dir

__all__ = [
    "DEFAULT_RUN_LINES",
    "HEADER_LINE",
    "INDEX_NAME",
    "JOURNAL_NAME",
    "SUPPORTED_MAJOR",
    "CDXJError",
    "CDXJRecord",
    "CDXJVersionError",
    "Index",
    "IndexFile",
    "append_journal",
    "check",
    "file_version",
    "format_header",
    "format_timestamp",
    "iter_records",
    "make_ref",
    "merge_files",
    "merge_sorted",
    "normalize_timestamp",
    "parse_header",
    "parse_ref",
    "parse_timestamp",
    "read_journal",
    "sort_lines",
    "write_index",
]

log = logging.getLogger(__name__)

StrPath = str | os.PathLike[str]

FORMAT_NAME = "OpenWayback-CDXJ"
SUPPORTED_MAJOR = 1
HEADER_LINE = "!OpenWayback-CDXJ 1.0"
INDEX_NAME = "index.cdxj"
JOURNAL_NAME = "journal.cdxj"
# Lines held in memory per sorted run of an external sort (about 25 MB of typical lines).
DEFAULT_RUN_LINES = 100_000

_READ_BUFFER = 8192
_MAX_PROBLEMS = 1000
_SEALED_RE = re.compile(r"journal-[0-9]{20}-[0-9]+\.sealed\Z")
_LOCK_NAME = ".compact.lock"
_FILE_MODE = 0o600  # the cache is private browsing history


# ---------------------------------------------------------------------------------------------
# Errors


class CDXJError(ValueError):
    """Malformed CDXJ data; the message names ``source:lineno`` when there is one."""

    def __init__(self, detail: str, source: str | None = None, lineno: int | None = None) -> None:
        self.detail = detail
        self.source = source
        self.lineno = lineno
        if source is None:
            message = detail
        elif lineno is None:
            message = f"{source}: {detail}"
        else:
            message = f"{source}:{lineno}: {detail}"
        super().__init__(message)

    def at(self, source: str | None, lineno: int | None) -> CDXJError:
        """The same problem, located (used when a line's origin becomes known)."""
        return type(self)(self.detail, source, lineno)


class CDXJVersionError(CDXJError):
    """A file declares an unsupported major version, or mixes major versions."""


# ---------------------------------------------------------------------------------------------
# Timestamps (WARC-Date, W3C-DTF profile of ISO 8601, always UTC)

_TS_RE = re.compile(
    r"([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2})"
    r"(?:T([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?Z)?)?)?"
)


def normalize_timestamp(ts: str) -> str:
    """Any of the six W3C-DTF granularities -> ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.

    The index form has one precision so that byte order is time order. Missing parts are the
    start of the period; fractions beyond microseconds are truncated (the index's precision).
    """
    if not isinstance(ts, str):
        raise CDXJError(f"timestamp must be a string, not {type(ts).__name__}")
    m = _TS_RE.fullmatch(ts)
    if m is None:
        raise CDXJError(
            f"invalid timestamp {ts!r}: expected a UTC W3C-DTF/WARC-Date such as "
            "2026-11-22T05:04:30.123456Z"
        )
    year, month, day, hour, minute, second, frac = m.groups()
    month, day = month or "01", day or "01"
    hour, minute, second = hour or "00", minute or "00", second or "00"
    try:
        datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError as e:
        raise CDXJError(f"invalid timestamp {ts!r}: {e}") from None
    micro = ((frac or "") + "000000")[:6]
    return f"{year}-{month}-{day}T{hour}:{minute}:{second}.{micro}Z"


def parse_timestamp(ts: str) -> datetime:
    """A timestamp of any accepted granularity as an aware UTC datetime."""
    return datetime.fromisoformat(normalize_timestamp(ts))


def format_timestamp(dt: datetime) -> str:
    """An aware datetime in the index form (UTC, microseconds)."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise CDXJError("naive datetime: pass an aware (UTC) datetime for a CDXJ timestamp")
    u = dt.astimezone(UTC)
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
        f".{u.microsecond:06d}Z"
    )


# ---------------------------------------------------------------------------------------------
# The warcfile: reference (Appendix C)

_WARCFILE = "warcfile:"


def make_ref(name: str, offset: int) -> str:
    """``warcfile:NAME#OFFSET``; NAME is a bare file name (no path)."""
    _check_ref_name(name)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise CDXJError(f"WARC offset must be a non-negative integer, not {offset!r}")
    return f"{_WARCFILE}{name}#{offset}"


def parse_ref(ref: str) -> tuple[str, int]:
    """``warcfile:NAME#OFFSET`` -> ``(NAME, OFFSET)``."""
    if not isinstance(ref, str) or not ref.startswith(_WARCFILE):
        raise CDXJError(f"not a warcfile: reference: {ref!r}")
    name, hash_, offset = ref[len(_WARCFILE) :].rpartition("#")
    if not hash_:
        raise CDXJError(f"warcfile: reference without '#OFFSET': {ref!r}")
    if not offset.isascii() or not offset.isdigit():
        raise CDXJError(f"warcfile: reference offset is not a non-negative integer: {ref!r}")
    _check_ref_name(name)
    return name, int(offset)


def _check_ref_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise CDXJError(f"WARC file name must be a non-empty string, not {name!r}")
    if "/" in name or "\\" in name or "\x00" in name or name in (".", ".."):
        raise CDXJError(f"WARC file name must be a bare file name without a path: {name!r}")


# ---------------------------------------------------------------------------------------------
# Field validation

_KEY_RE = re.compile(r"[^\x00-\x20\x7f]+")
_TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_SHA1_B32_RE = re.compile(r"[A-Z2-7]{32}")
_DIG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*:\S+")

# Defined keys first, in this order, then extra keys sorted: equal records give equal lines.
_KEY_ORDER = (
    "uri", "sha", "dig", "hsc", "mct", "ref", "rid", "cle", "ple", "rle", "rct",
    "rou", "rod", "roi", "ssu", "sts", "srt",
)  # fmt: skip
_REVISIT_ONLY = ("rou", "rod", "roi")


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise CDXJError(f"searchable key must be a string, not {type(key).__name__}")
    if not key:
        raise CDXJError("empty searchable key")
    if key[0] == "!":
        raise CDXJError(f"searchable key may not begin with '!' (reserved for headers): {key!r}")
    if key[0] == "{":
        raise CDXJError(f"searchable key may not begin with '{{': {key!r}")
    if not _KEY_RE.fullmatch(key):
        raise CDXJError(f"searchable key contains a space or control character: {key!r}")


def _check_record_type(record_type: object) -> None:
    if not isinstance(record_type, str) or not _TOKEN_RE.fullmatch(record_type):
        raise CDXJError(f"record type is not a WARC-Type token: {record_type!r}")


def _want_str(name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise CDXJError(f"JSON key {name!r} must be a non-empty string, not {value!r}")


def _want_any_str(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise CDXJError(f"JSON key {name!r} must be a string, not {value!r}")


def _want_length(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CDXJError(f"JSON key {name!r} must be a non-negative integer, not {value!r}")


def _check_ref_value(name: str, value: object) -> None:
    _want_str(name, value)
    if isinstance(value, str) and value.startswith(_WARCFILE):
        parse_ref(value)


def _check_sha(name: str, value: object) -> None:
    if not isinstance(value, str) or not _SHA1_B32_RE.fullmatch(value):
        raise CDXJError(
            f"JSON key 'sha' must be a Base32 SHA-1 digest (32 of A-Z2-7, no 'sha1:' prefix), "
            f"not {value!r}"
        )


def _check_dig(name: str, value: object) -> None:
    if not isinstance(value, str) or not _DIG_RE.fullmatch(value):
        raise CDXJError(f"JSON key 'dig' must be 'algorithm:digest', not {value!r}")


def _check_hsc(name: str, value: object) -> None:
    ok = (isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 999) or (
        isinstance(value, str) and len(value) == 3 and value.isascii() and value.isdigit()
    )
    if not ok:
        raise CDXJError(f"JSON key 'hsc' must be a 3-digit HTTP status code, not {value!r}")


def _check_timestamp_value(name: str, value: object) -> None:
    _want_str(name, value)
    try:
        normalize_timestamp(value)  # type: ignore[arg-type]
    except CDXJError as e:
        raise CDXJError(f"JSON key {name!r}: {e.detail}") from None


_FIELD_CHECKS: dict[str, Callable[[str, object], None]] = {
    "uri": _want_str,
    "sha": _check_sha,
    "dig": _check_dig,
    "hsc": _check_hsc,
    "mct": _want_any_str,  # may be empty: a server can send an empty Content-Type
    "ref": _check_ref_value,
    "rid": _want_str,
    "cle": _want_length,
    "ple": _want_length,
    "rle": _want_length,
    "rct": _want_str,
    "rou": _want_str,
    "rod": _check_timestamp_value,
    "roi": _want_str,
    "ssu": _want_str,
    "sts": _check_timestamp_value,
    "srt": _want_str,
}


def _check_fields(fields: Mapping[str, Any], key: str, timestamp: str, record_type: str) -> None:
    for name in ("uri", "ref"):
        if name not in fields:
            raise CDXJError(f"JSON block lacks the required key {name!r}")
    for name, value in fields.items():
        if not isinstance(name, str):
            raise CDXJError(f"JSON key must be a string, not {name!r}")
        checker = _FIELD_CHECKS.get(name)
        if checker is not None:
            checker(name, value)
    if record_type != "revisit":
        for name in _REVISIT_ONLY:
            if name in fields:
                raise CDXJError(f"JSON key {name!r} is only valid for revisit records")
    if "ssu" in fields and fields["ssu"] != key:
        raise CDXJError(f"JSON key 'ssu' {fields['ssu']!r} differs from the key {key!r}")
    if "srt" in fields and fields["srt"] != record_type:
        raise CDXJError(f"JSON key 'srt' {fields['srt']!r} differs from the record type")
    if "sts" in fields and normalize_timestamp(fields["sts"]) != timestamp:
        raise CDXJError(f"JSON key 'sts' {fields['sts']!r} differs from the timestamp")


def _ordered(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = {name: fields[name] for name in _KEY_ORDER if name in fields}
    if len(out) != len(fields):
        for name in sorted(k for k in fields if k not in out):
            out[name] = fields[name]
    return out


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise CDXJError(f"JSON block repeats the key {name!r}")
            seen.add(name)
    return obj


def _no_constants(name: str) -> Any:
    raise CDXJError(f"JSON block contains {name}, which is not valid JSON")


# ---------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class CDXJRecord:
    """One CDXJ line: searchable key, timestamp, WARC-Type and the JSON block.

    Construction validates everything and normalizes the timestamp to microseconds, so a
    record that exists can always be written and read back. ``fields`` is copied at
    construction and must be treated as read-only: the line is computed once, then.
    """

    key: str
    timestamp: str
    record_type: str
    fields: dict[str, Any] = field(hash=False)
    _raw: bytes = field(init=False, repr=False, compare=False, hash=False, default=b"")

    def __post_init__(self) -> None:
        _check_key(self.key)
        timestamp = normalize_timestamp(self.timestamp)
        _check_record_type(self.record_type)
        if not isinstance(self.fields, Mapping):
            raise CDXJError(f"JSON block must be an object, not {type(self.fields).__name__}")
        fields = dict(self.fields)
        _check_fields(fields, self.key, timestamp, self.record_type)
        try:
            block = json.dumps(
                _ordered(fields), ensure_ascii=False, separators=(",", ":"), allow_nan=False
            )
            raw = f"{self.key} {timestamp} {self.record_type} {block}".encode()
        except (TypeError, ValueError, RecursionError) as e:
            raise CDXJError(f"JSON block cannot be serialised: {e}") from None
        object.__setattr__(self, "timestamp", timestamp)
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "_raw", raw)

    @classmethod
    def build(
        cls,
        key: str,
        timestamp: str | datetime,
        record_type: str,
        *,
        uri: str,
        ref: str,
        **optional: Any,
    ) -> CDXJRecord:
        """Record from keyword fields (``sha=``, ``hsc=``, ``mct=`` ...); ``None`` is omitted."""
        if isinstance(timestamp, datetime):
            timestamp = format_timestamp(timestamp)
        fields: dict[str, Any] = {"uri": uri, "ref": ref}
        fields.update((k, v) for k, v in optional.items() if v is not None)
        return cls(key, timestamp, record_type, fields)

    @classmethod
    def parse_line(
        cls, line: str | bytes, *, source: str = "<string>", lineno: int | None = 0
    ) -> CDXJRecord:
        """Parse and validate one record line (a trailing ``\\n`` is allowed)."""
        try:
            return cls._parse(line)
        except CDXJError as e:
            raise e.at(source, lineno) from None

    @classmethod
    def _parse(cls, line: str | bytes) -> CDXJRecord:
        if isinstance(line, bytes | bytearray | memoryview):
            try:
                text = bytes(line).decode("utf-8")
            except UnicodeDecodeError as e:
                raise CDXJError(f"line is not valid UTF-8 (byte {e.start})") from None
        elif isinstance(line, str):
            text = line
        else:
            raise CDXJError(f"a line must be str or bytes, not {type(line).__name__}")
        if text.endswith("\n"):
            text = text[:-1]
        if "\n" in text:
            raise CDXJError("newline inside a record line")
        if "\r" in text:
            raise CDXJError("carriage return in a record line (CRLF line ending?)")
        if not text:
            raise CDXJError("empty line")
        if text[0] == "!":
            raise CDXJError("header line ('!') where a record was expected")
        parts = text.split(" ", 3)
        if len(parts) < 4:
            raise CDXJError(
                "expected 4 space-separated fields (key, timestamp, type, JSON), "
                f"found {len(parts)}"
            )
        for i, name in enumerate(("key", "timestamp", "record type")):
            if not parts[i]:
                raise CDXJError(f"empty {name} field (fields are separated by single spaces)")
        key, timestamp, record_type, block = parts
        if not block.startswith("{"):
            raise CDXJError(
                "fourth field must be a JSON object starting with '{' "
                "(fields are separated by single spaces)"
            )
        try:
            fields = json.loads(
                block, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants
            )
        except json.JSONDecodeError as e:
            raise CDXJError(f"invalid JSON block: {e.msg} (column {e.colno})") from None
        except RecursionError:
            raise CDXJError("JSON block nested too deeply") from None
        return cls(key, timestamp, record_type, fields)

    def to_line(self) -> str:
        """The record as one line, ending in ``\\n``."""
        return self._raw.decode() + "\n"

    def to_bytes(self) -> bytes:
        """UTF-8 bytes of ``to_line()``."""
        return self._raw + b"\n"

    @property
    def sort_key(self) -> bytes:
        """The line's bytes without the newline: what the index is ordered by."""
        return self._raw

    @property
    def uri(self) -> str:
        return self.fields["uri"]

    @property
    def ref(self) -> str:
        return self.fields["ref"]

    @property
    def warcfile(self) -> tuple[str, int] | None:
        """``(name, offset)`` when ``ref`` is a ``warcfile:`` reference, else ``None``."""
        ref = self.ref
        return parse_ref(ref) if ref.startswith(_WARCFILE) else None

    def as_datetime(self) -> datetime:
        """The timestamp as an aware UTC datetime."""
        return datetime.fromisoformat(self.timestamp)


# ---------------------------------------------------------------------------------------------
# Headers

_HEADER_RE = re.compile(rb"!OpenWayback-CDXJ ([0-9]+)\.([0-9]+)")


def format_header(version: tuple[int, int] = (1, 0)) -> str:
    """The header line for a version, without newline."""
    return f"!{FORMAT_NAME} {version[0]}.{version[1]}"


def parse_header(line: str | bytes) -> tuple[int, int] | None:
    """Version of an ``!OpenWayback-CDXJ M.N`` line; ``None`` for other ``!`` lines."""
    raw = line.encode() if isinstance(line, str) else bytes(line)
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if not raw.startswith(b"!"):
        raise CDXJError("not a header line (does not begin with '!')")
    if not raw.startswith(b"!" + FORMAT_NAME.encode()):
        return None
    m = _HEADER_RE.fullmatch(raw)
    if m is None:
        shown = raw.decode("utf-8", "replace")
        raise CDXJError(f"malformed format header {shown!r}; expected '!{FORMAT_NAME} M.N'")
    return int(m.group(1)), int(m.group(2))


class _Headers:
    """Header-block state for one file: headers only at the top, one major version."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.versions: list[tuple[int, int]] = []
        self.in_header = True

    def feed(self, line: bytes, lineno: int) -> None:
        if not self.in_header:
            raise CDXJError(
                "header line ('!') after records; headers must all be at the top",
                self.source,
                lineno,
            )
        try:
            version = parse_header(line)
        except CDXJError as e:
            raise e.at(self.source, lineno) from None
        if version is None:
            return  # an unknown '!' line at the top: allowed, ignored
        if self.versions and version[0] != self.versions[0][0]:
            first = self.versions[0]
            raise CDXJVersionError(
                f"mixed major versions {first[0]}.{first[1]} and {version[0]}.{version[1]} "
                "in one file",
                self.source,
                lineno,
            )
        if version[0] != SUPPORTED_MAJOR:
            raise CDXJVersionError(
                f"unsupported major version {version[0]}.{version[1]} "
                f"(this reader knows {SUPPORTED_MAJOR}.x)",
                self.source,
                lineno,
            )
        self.versions.append(version)

    @property
    def version(self) -> tuple[int, int]:
        """Highest version seen (files without a header are taken as 1.0)."""
        return max(self.versions, default=(SUPPORTED_MAJOR, 0))


def file_version(path: StrPath) -> tuple[int, int]:
    """Effective version of a CDXJ file from its header block (highest minor wins).

    Raises ``CDXJVersionError`` for mixed or unsupported major versions, naming file:line.
    """
    headers = _Headers(os.fspath(path))
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.startswith(b"!"):
                break
            headers.feed(raw.rstrip(b"\n"), lineno)
    return headers.version


# ---------------------------------------------------------------------------------------------
# Reading files


def _scan(
    f: BinaryIO,
    source: str,
    *,
    tolerant: bool,
    problems: list[str] | None,
    journal: bool,
    headers: _Headers | None = None,
) -> Iterator[tuple[int, CDXJRecord]]:
    """(lineno, record) for each record line; the state machine behind all readers."""
    headers = headers or _Headers(source)
    for lineno, raw in enumerate(f, 1):
        if raw.endswith(b"\n"):
            line = raw[:-1]
        elif journal:
            _note(
                problems,
                f"{source}:{lineno}: torn last line ignored ({len(raw)} bytes without a newline; "
                "interrupted write)",
            )
            return
        else:
            line = raw
        try:
            if line.startswith(b"!"):
                headers.feed(line, lineno)
                continue
            headers.in_header = False
            yield lineno, CDXJRecord.parse_line(line, source=source, lineno=lineno)
        except CDXJVersionError as e:
            if not tolerant:
                raise
            _note(problems, f"{e} (rest of file skipped)")
            return
        except CDXJError as e:
            if not tolerant:
                raise
            _note(problems, str(e))


def _note(problems: list[str] | None, message: str) -> None:
    if problems is not None:
        problems.append(message)


def iter_records(
    path: StrPath, *, tolerant: bool = False, problems: list[str] | None = None
) -> Iterator[CDXJRecord]:
    """Records of a CDXJ file in file order.

    Strict by default (raises ``CDXJError`` naming file:line at the first problem); with
    ``tolerant=True`` bad lines are skipped and described in ``problems``.
    """
    source = os.fspath(path)
    with open(path, "rb") as f:
        for _, record in _scan(f, source, tolerant=tolerant, problems=problems, journal=False):
            yield record


def read_journal(path: StrPath, problems: list[str] | None = None) -> list[CDXJRecord]:
    """Records of a journal, tolerantly: a torn last line and malformed lines are skipped and
    described in ``problems`` (never fatal); a missing journal is empty."""
    source = os.fspath(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; a missing file is not an error
    except FileNotFoundError:
        return []
    with f:
        return [rec for _, rec in _scan(f, source, tolerant=True, problems=problems, journal=True)]


def check(path: StrPath, *, index: bool = False) -> list[str]:
    """Every problem of a CDXJ file as ``file:line: message`` (empty list: valid).

    With ``index=True`` the file must also be a searchable index: lines in byte order and
    timestamps in the microsecond form (else byte order would not be time order).
    """
    source = os.fspath(path)
    problems: list[str] = []
    headers = _Headers(source)
    previous: bytes | None = None
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if raw.endswith(b"\n"):
                    line = raw[:-1]
                else:
                    line = raw
                    problems.append(f"{source}:{lineno}: last line has no newline (torn write?)")
                if line.startswith(b"!"):
                    try:
                        headers.feed(line, lineno)
                    except CDXJError as e:
                        problems.append(str(e))
                    continue
                headers.in_header = False
                try:
                    record = CDXJRecord.parse_line(line, source=source, lineno=lineno)
                except CDXJError as e:
                    problems.append(str(e))
                    record = None
                if not index:
                    continue
                if record is not None and line.split(b" ", 2)[1] != record.timestamp.encode():
                    problems.append(
                        f"{source}:{lineno}: timestamp not in the index form "
                        "YYYY-MM-DDTHH:MM:SS.ffffffZ"
                    )
                if previous is not None and line < previous:
                    problems.append(
                        f"{source}:{lineno}: out of order (sorts before the previous line)"
                    )
                previous = line
    except OSError as e:
        problems.append(f"{source}: cannot read: {e.strerror or e}")
    return problems


# ---------------------------------------------------------------------------------------------
# Sorting and merging (byte order, as LC_ALL=C sort)


def _line_bytes(line: str | bytes) -> bytes:
    raw = line.encode() if isinstance(line, str) else bytes(line)
    return raw[:-1] if raw.endswith(b"\n") else raw


def sort_lines(lines: Iterable[str | bytes], *, unique: bool = True) -> list[bytes]:
    """Sort lines in memory by their UTF-8 bytes (trailing newline ignored and dropped)."""
    data = [_line_bytes(line) for line in lines]
    return sorted(set(data)) if unique else sorted(data)


def merge_sorted(*streams: Iterable[bytes], unique: bool = True) -> Iterator[bytes]:
    """Stream the merge of already byte-sorted line streams; identical lines once if unique."""
    previous: bytes | None = None
    for line in heapq.merge(*streams):
        if unique and line == previous:
            continue
        previous = line
        yield line


def _write_run(directory: str, lines: list[bytes]) -> str:
    fd, path = tempfile.mkstemp(prefix="run-", suffix=".cdxj", dir=directory)
    with os.fdopen(fd, "wb", buffering=1 << 20) as f:
        for line in lines:
            f.write(line)
            f.write(b"\n")
    return path


def _read_run(path: str) -> Iterator[bytes]:
    with open(path, "rb", buffering=1 << 20) as f:
        for raw in f:
            yield raw[:-1]


def _external_sort(lines: Iterable[bytes], directory: str, run_lines: int) -> Iterator[bytes]:
    """Sorted unique lines holding at most ``run_lines`` in memory; runs spill to ``directory``
    (which must outlive the returned iterator)."""
    runs: list[str] = []
    buffer: set[bytes] = set()
    for line in lines:
        buffer.add(line)
        if len(buffer) >= run_lines:
            runs.append(_write_run(directory, sorted(buffer)))
            buffer = set()
    last = sorted(buffer)
    if not runs:
        return iter(last)
    return merge_sorted(*(_read_run(run) for run in runs), last)


def _atomic_write(path: Path, header: str, lines: Iterable[bytes]) -> int:
    """Write header + lines to a temp file beside ``path``, fsync, then rename over ``path``.

    Readers see the old file or the new one, never a part; returns the number of lines.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as f:
            f.write(header.encode() + b"\n")
            count = 0
            for line in lines:
                f.write(line)
                f.write(b"\n")
                count += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return count


def merge_files(
    inputs: Sequence[StrPath],
    output: StrPath,
    *,
    tolerant: bool = False,
    problems: list[str] | None = None,
    run_lines: int = DEFAULT_RUN_LINES,
) -> int:
    """Merge CDXJ files (sorted or not) into one sorted index file, atomically.

    Every line is validated and rewritten in canonical form (so timestamps have one precision);
    identical lines are written once; one header (the highest version seen) is written. Refuses
    mixed or unsupported major versions before writing anything. ``output`` may be one of the
    inputs. Returns the number of records written.
    """
    first: tuple[str, tuple[int, int]] | None = None
    versions = []
    for path in inputs:
        version = file_version(path)  # raises on mixed majors inside one file
        if first is None:
            first = (os.fspath(path), version)
        elif version[0] != first[1][0]:
            raise CDXJVersionError(
                f"cannot merge {os.fspath(path)} (version {version[0]}.{version[1]}) with "
                f"{first[0]} (version {first[1][0]}.{first[1][1]}): major versions differ"
            )
        versions.append(version)
    header = format_header(max(versions, default=(SUPPORTED_MAJOR, 0)))
    out = Path(output)
    lines = (
        record.sort_key
        for path in inputs
        for record in iter_records(path, tolerant=tolerant, problems=problems)
    )
    with tempfile.TemporaryDirectory(prefix=".cdxj-sort-", dir=out.parent) as tmp:
        return _atomic_write(out, header, _external_sort(lines, tmp, run_lines))


def write_index(
    path: StrPath, records: Iterable[CDXJRecord], *, run_lines: int = DEFAULT_RUN_LINES
) -> int:
    """Write records as a sorted index file (atomic replace), in bounded memory."""
    out = Path(path)
    with tempfile.TemporaryDirectory(prefix=".cdxj-sort-", dir=out.parent) as tmp:
        lines = (record.sort_key for record in records)
        return _atomic_write(out, HEADER_LINE, _external_sort(lines, tmp, run_lines))


# ---------------------------------------------------------------------------------------------
# Journal


def _open_locked_journal(path: StrPath) -> int:
    """An fd on the journal at ``path`` holding its exclusive lock (retrying if it was sealed
    by a compaction between open and lock)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # renamed away under us: append to the new journal instead


def _cut_torn_tail(fd: int, size: int, source: str) -> int:
    """Drop a torn last line (left by a killed writer) so the next line starts cleanly."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end = size
    keep = 0
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            keep = start + nl + 1
            break
        end = start
    log.warning("%s: removed a torn last line (%d bytes) before appending", source, size - keep)
    os.ftruncate(fd, keep)
    return keep


def append_journal(path: StrPath, records: Iterable[CDXJRecord]) -> None:
    """Append records durably: one write under an exclusive ``flock``, then fsync.

    A new journal starts with the format header; a torn last line left by a killed writer is
    cut off first so that it cannot swallow the new records.
    """
    data = b"".join(record.to_bytes() for record in records)
    if not data:
        return
    source = os.fspath(path)
    fd = _open_locked_journal(path)
    try:
        size = _cut_torn_tail(fd, os.fstat(fd).st_size, source)
        if size == 0:
            data = HEADER_LINE.encode() + b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        # the lines are whole in the file now; make them durable outside the lock, so that
        # concurrent appends never queue behind each other's fsync
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.fsync(fd)
    finally:
        os.close(fd)
    if size == 0:
        fsync_dir(Path(path).parent)


# ---------------------------------------------------------------------------------------------
# Binary search in a sorted file


def _lower_bound(f: BinaryIO, lo: int, hi: int, target: bytes) -> int:
    """Offset of the first line ``>= target`` among lines starting in ``[lo, hi)``.

    ``lo`` is a line start; lines before it are ``< target``. Each step seeks to the middle,
    skips to the next line start and compares that line's first ``len(target)`` bytes.
    """
    n = len(target)
    while lo < hi:
        mid = (lo + hi) // 2
        s = lo
        if mid > lo:
            f.seek(mid - 1)
            f.readline()
            s = f.tell()
            if s >= hi:
                s = lo  # no line starts in [mid, hi): test the line at lo
        f.seek(s)
        line = f.readline()
        head = line[:n]
        nl = head.find(b"\n")
        if nl >= 0:
            head = head[:nl]
        if head < target:
            lo = s + len(line)
        else:
            hi = s
    return lo


class IndexFile:
    """A sorted CDXJ file searched by binary search over byte offsets.

    Each search opens the file, so it sees the index that is current then (and keeps reading
    that one even if ``compact()`` replaces it meanwhile); only a read buffer is in memory.
    """

    def __init__(self, path: StrPath) -> None:
        self.path = Path(path)
        self._header: tuple[tuple[int, int, int, int], int] | None = None

    def _data_start(self, f: BinaryIO, st: os.stat_result) -> int:
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._header
        if cached is not None and cached[0] == ident:
            return cached[1]
        headers = _Headers(os.fspath(self.path))
        f.seek(0)
        start = 0
        lineno = 0
        while True:
            raw = f.readline()
            if not raw.startswith(b"!"):
                break
            lineno += 1
            headers.feed(raw.rstrip(b"\n"), lineno)
            start += len(raw)
        self._header = (ident, start)
        return start

    def lines(self, prefix: bytes) -> Iterator[tuple[int, bytes]]:
        """``(offset, line)`` for each line starting with ``prefix``, in file order."""
        try:
            f = open(self.path, "rb", buffering=_READ_BUFFER)  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return
        with f:
            st = os.fstat(f.fileno())
            if st.st_size == 0:
                return
            pos = _lower_bound(f, self._data_start(f, st), st.st_size, prefix)
            f.seek(pos)
            for raw in f:
                line = raw[:-1] if raw.endswith(b"\n") else raw
                if not line.startswith(prefix):
                    return
                yield pos, line
                pos += len(raw)


# ---------------------------------------------------------------------------------------------
# The index: sorted file + journal


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _search_bytes(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise CDXJError(f"{what} must be a string, not {type(text).__name__}")
    if " " in text or "\n" in text:
        raise CDXJError(f"{what} may not contain spaces or newlines: {text!r}")
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise CDXJError(f"{what} is not encodable as UTF-8: {text!r}") from None


_Ident = tuple[int, int, int, int]


class Index:
    """The CDXJ index of a cache: ``index.cdxj`` (sorted) plus ``journal.cdxj`` (appended).

    Crash safety: ``compact()`` first renames the journal to a sealed name, merges sealed
    journals and the index into a temp file, fsyncs, renames it over the index, and only then
    deletes the sealed journals. Lookups read the active journal, the sealed journals and the
    index (in that order, so a concurrent compaction never hides a record), and drop identical
    lines, so a crash at any point loses nothing and duplicates nothing.

    Writers and compaction coordinate with ``flock`` and so may be in different processes.
    """

    def __init__(self, directory: StrPath, *, create: bool = True) -> None:
        self.directory = Path(directory)
        if create:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.index_path = self.directory / INDEX_NAME
        self.journal_path = self.directory / JOURNAL_NAME
        self._file = IndexFile(self.index_path)
        self._lock = threading.Lock()
        self._compact_lock = threading.Lock()
        self._journal_cache: dict[str, tuple[_Ident, list[CDXJRecord]]] = {}
        self._view: tuple[tuple[_Ident | None, ...], list[bytes], list[CDXJRecord]] | None = None
        self._problems: dict[str, None] = {}

    # -- writing -------------------------------------------------------------------------------

    def add(self, records: Iterable[CDXJRecord]) -> None:
        """Append records to the journal; they are visible to lookups at once."""
        append_journal(self.journal_path, records)

    def files(self) -> list[Path]:
        """The files that hold index lines now, existing ones only: the sorted index, the
        active journal, then sealed journals (left by a compaction in progress or killed)."""
        paths = [self.index_path, self.journal_path, *self._sealed_paths()]
        return [path for path in paths if path.exists()]

    def journal_bytes(self) -> int:
        """Size of the journals not yet compacted (to decide when to compact)."""
        total = 0
        for path in [self.journal_path, *self._sealed_paths()]:
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total

    def compact(self, *, keep: Callable[[CDXJRecord], bool] | None = None) -> int | None:
        """Merge the journal into a new sorted index (atomic rename); returns its record count,
        or ``None`` when there was nothing to do.

        ``keep``, when given, filters every record (e.g. to purge a URL's lines) and forces a
        rewrite. Malformed journal lines are skipped and reported (``problems``); a malformed
        or unsorted index is re-sorted strictly and raises ``CDXJError`` if a line is invalid,
        leaving everything as it was.
        """
        with self._compact_lock, _flock(self.directory / _LOCK_NAME):
            self._remove_stale_temps()
            self._seal_journal()
            sealed = self._sealed_paths()
            if not sealed and keep is None:
                return None
            journal_lines = self._read_sealed(sealed)
            try:
                count = self._rewrite(journal_lines, keep, resort=False)
            except _NotSorted as e:
                log.warning("%s: index not in byte order (%s); re-sorting", self.index_path, e)
                count = self._rewrite(journal_lines, keep, resort=True)
            self._drop(sealed)
            return count

    def rebuild(self, records: Iterable[CDXJRecord]) -> int:
        """Replace the index with exactly ``records`` (e.g. from a scan of the WARC files).

        Journals written before the call are discarded (the scan covers them); records added
        while it runs stay in the new journal. Returns the record count.
        """
        with self._compact_lock, _flock(self.directory / _LOCK_NAME):
            self._remove_stale_temps()
            self._seal_journal()
            sealed = self._sealed_paths()
            count = write_index(self.index_path, records)
            self._drop(sealed)
            return count

    def _seal_journal(self) -> None:
        try:
            fd = os.open(self.journal_path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits for an append in progress
            st = os.fstat(fd)
            try:
                now = os.stat(self.journal_path)
            except FileNotFoundError:
                return
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or st.st_size == 0:
                return
            sealed = self.directory / f"journal-{time.time_ns():020d}-{os.getpid()}.sealed"
            os.rename(self.journal_path, sealed)
            fsync_dir(self.directory)
        finally:
            os.close(fd)

    def _sealed_paths(self) -> list[Path]:
        try:
            names = sorted(e.name for e in os.scandir(self.directory) if _SEALED_RE.match(e.name))
        except FileNotFoundError:
            return []
        return [self.directory / name for name in names]

    def _read_sealed(self, sealed: list[Path]) -> list[bytes]:
        problems: list[str] = []
        lines: set[bytes] = set()
        for path in sealed:
            for record in read_journal(path, problems):
                lines.add(record.sort_key)
        for message in problems:
            self._report(message)
        return sorted(lines)

    def _index_lines(self, resort: bool, tmp: str) -> Iterator[bytes]:
        if not self.index_path.exists():
            return iter(())
        if resort:
            records = iter_records(self.index_path)
            return _external_sort((r.sort_key for r in records), tmp, DEFAULT_RUN_LINES)
        return _checked_order(self._raw_index_lines(), os.fspath(self.index_path))

    def _raw_index_lines(self) -> Iterator[bytes]:
        with open(self.index_path, "rb", buffering=1 << 20) as f:
            raw = f.readline()
            while raw.startswith(b"!"):  # the header block (its versions were checked already)
                raw = f.readline()
            while raw:
                if raw.startswith(b"!"):  # a header after records: let the strict path say where
                    raise _NotSorted("header line after records")
                yield raw[:-1] if raw.endswith(b"\n") else raw
                raw = f.readline()

    def _rewrite(
        self, journal_lines: list[bytes], keep: Callable[[CDXJRecord], bool] | None, resort: bool
    ) -> int:
        version = (SUPPORTED_MAJOR, 0)
        if self.index_path.exists():
            version = file_version(self.index_path)
        with tempfile.TemporaryDirectory(prefix=".cdxj-sort-", dir=self.directory) as tmp:
            lines = merge_sorted(self._index_lines(resort, tmp), journal_lines)
            if keep is not None:
                source = os.fspath(self.index_path)
                lines = (
                    line
                    for line in lines
                    if keep(CDXJRecord.parse_line(line, source=source, lineno=None))
                )
            return _atomic_write(self.index_path, format_header(version), lines)

    def _drop(self, sealed: list[Path]) -> None:
        for path in sealed:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        fsync_dir(self.directory)

    def _remove_stale_temps(self) -> None:
        """Leftovers of a compaction killed mid-way (we hold the compaction lock)."""
        for entry in os.scandir(self.directory):
            if entry.name.startswith(f".{INDEX_NAME}.") and entry.name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
            elif entry.name.startswith(".cdxj-sort-") and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)

    # -- reading -------------------------------------------------------------------------------

    @property
    def problems(self) -> list[str]:
        """Problems met while reading (torn or malformed journal lines, bad index lines)."""
        return list(self._problems)

    def _report(self, message: str) -> None:
        if message not in self._problems:
            log.warning("%s", message)
            if len(self._problems) < _MAX_PROBLEMS:
                self._problems[message] = None

    def _journal(self, path: Path) -> tuple[_Ident | None, list[CDXJRecord]]:
        """A journal's records, re-read only when its identity or size changed."""
        key = os.fspath(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None, []
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._journal_cache.get(key)
        if cached is not None and cached[0] == ident:
            return cached
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return None, []
        except OSError as exc:  # unreadable (permissions, a directory): the rest still answers
            self._report(f"{key}: cannot read: {exc.strerror or exc}")
            return None, []
        problems: list[str] = []
        with f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # no half-written append
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            records = [
                rec for _, rec in _scan(f, key, tolerant=True, problems=problems, journal=True)
            ]
        for message in problems:
            self._report(message)
        self._journal_cache[key] = (ident, records)
        return ident, records

    def _journal_view(self) -> tuple[list[bytes], list[CDXJRecord]]:
        """Sorted unique lines of all journals (active first, then sealed) and their records."""
        with self._lock:
            parts = [self._journal(self.journal_path)]
            sealed = self._sealed_paths()
            parts += [self._journal(path) for path in sealed]
            idents = tuple(ident for ident, _ in parts)
            if self._view is not None and self._view[0] == idents:
                return self._view[1], self._view[2]
            live = {os.fspath(p) for p in [self.journal_path, *sealed]}
            for stale in set(self._journal_cache) - live:
                del self._journal_cache[stale]
            by_line = {rec.sort_key: rec for _, recs in parts for rec in recs}
            lines = sorted(by_line)
            records = [by_line[line] for line in lines]
            self._view = (idents, lines, records)
            return lines, records

    def _records(self, target: bytes, record_types: Collection[str] | None) -> Iterator[CDXJRecord]:
        """Records whose line starts with ``target``, journal and index merged in byte order."""
        jlines, jrecords = self._journal_view()
        i = bisect.bisect_left(jlines, target)
        j = i
        while j < len(jlines) and jlines[j].startswith(target):
            j += 1
        from_journal = ((jlines[k], -1, jrecords[k]) for k in range(i, j))
        from_index = ((line, offset, None) for offset, line in self._file.lines(target))
        previous: bytes | None = None
        source = os.fspath(self.index_path)
        for line, offset, record in heapq.merge(
            from_index, from_journal, key=operator.itemgetter(0)
        ):
            if line == previous:
                continue
            previous = line
            if record is None:
                try:
                    record = CDXJRecord.parse_line(
                        line, source=f"{source} (byte {offset})", lineno=None
                    )
                except CDXJError as e:
                    self._report(str(e))
                    continue
            if record_types is None or record.record_type in record_types:
                yield record

    def captures(
        self, key: str, *, record_types: Collection[str] | None = None
    ) -> Iterator[CDXJRecord]:
        """All captures of exactly ``key``, oldest first."""
        _check_key(key)
        return self._records(_search_bytes(key, "key") + b" ", record_types)

    def exact(self, key: str, *, record_types: Collection[str] | None = None) -> list[CDXJRecord]:
        """All captures of exactly ``key``, oldest first."""
        return list(self.captures(key, record_types=record_types))

    def newest(self, key: str, *, record_types: Collection[str] | None = None) -> CDXJRecord | None:
        """The latest capture of ``key`` (``None`` if there is none)."""
        newest = None
        for newest in self.captures(key, record_types=record_types):  # noqa: B007
            pass
        return newest

    def closest(
        self,
        key: str,
        timestamp: str | datetime,
        *,
        record_types: Collection[str] | None = None,
    ) -> CDXJRecord | None:
        """The capture of ``key`` nearest in time to ``timestamp``; ties go to the earlier one."""
        if isinstance(timestamp, datetime):
            when = datetime.fromisoformat(format_timestamp(timestamp))
        else:
            when = parse_timestamp(timestamp)
        best: CDXJRecord | None = None
        best_gap = None
        for record in self.captures(key, record_types=record_types):
            moment = record.as_datetime()
            gap = abs(moment - when)
            if best_gap is None or gap < best_gap:
                best, best_gap = record, gap
            elif moment > when:
                break  # later captures are only further away
        return best

    def prefix(
        self, surt_prefix: str, *, record_types: Collection[str] | None = None
    ) -> Iterator[CDXJRecord]:
        """Records whose key starts with ``surt_prefix``, in key then time order.

        ``(com,example,)/`` is one host, ``(com,example,`` a domain with its subdomains,
        ``(com,example,)/a/`` a path; ``""`` is everything.
        """
        return self._records(_search_bytes(surt_prefix, "prefix"), record_types)

    def check(self) -> list[str]:
        """Problems of the index file (as an index) and of the journals."""
        problems: list[str] = []
        for path in self.files():
            problems += check(path, index=path == self.index_path)
        return problems


class _NotSorted(Exception):
    pass


def _checked_order(lines: Iterator[bytes], source: str) -> Iterator[bytes]:
    previous = b""
    for lineno, line in enumerate(lines, 1):
        if not line or line < previous:
            raise _NotSorted(f"{source}: record {lineno} is empty or sorts before the one above")
        previous = line
        yield line
