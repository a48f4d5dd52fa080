"""The CDXJ line format: one record line and the ``!`` header line, built, parsed and validated.

A record line is ``KEY TIMESTAMP TYPE {JSON}``: the searchable key (a SURT from the URL layer),
a W3C-DTF timestamp written with microseconds, the WARC-Type and a JSON block whose keys are
checked against OpenWayback CDXJ 1.0 (``uri``, ``ref`` = ``warcfile:NAME#OFFSET``, ``sha`` ...).
Pure logic: nothing here opens a file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn

__all__ = [
    "HEADER_LINE",
    "SUPPORTED_MAJOR",
    "CDXJError",
    "CDXJRecord",
    "CDXJVersionError",
    "format_header",
    "format_timestamp",
    "make_ref",
    "normalize_timestamp",
    "parse_header",
    "parse_ref",
    "parse_timestamp",
]

FORMAT_NAME = "OpenWayback-CDXJ"
SUPPORTED_MAJOR = 1
HEADER_LINE = "!OpenWayback-CDXJ 1.0"


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


_GOOD_KEY_RE = re.compile(r"[^\x00-\x20\x7f!{][^\x00-\x20\x7f]*")  # all the checks below


def _check_key(key: object) -> None:
    if type(key) is str and (
        # the usual key, told quicker than by the match: printable (so no control character
        # nor DEL), no space, and a first character that is allowed
        (key.isprintable() and " " not in key and key != "" and key[0] not in "!{")
        or _GOOD_KEY_RE.fullmatch(key)  # (one match, as every lookup checks its key)
    ):
        return
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


def _want_str(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise CDXJError(f"JSON key {name!r} must be a non-empty string, not {value!r}")
    return value


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
    text = _want_str(name, value)
    try:
        normalize_timestamp(text)
    except CDXJError as e:
        raise CDXJError(f"JSON key {name!r}: {e.detail}") from None


_FIELD_CHECKS: dict[str, Callable[[str, object], object]] = {  # raise CDXJError; results unused
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


def _no_constants(name: str) -> NoReturn:
    raise CDXJError(f"JSON block contains {name}, which is not valid JSON")


# ---------------------------------------------------------------------------------------------
# The fast path for canonical lines
#
# Nearly every line read back is one this module wrote: a line that ``CDXJRecord`` would write
# again byte for byte, with flat string and integer values in the defined key order. One regular
# expression recognises that shape and, with it, every check ``__post_init__`` would make, so such
# a line costs a match instead of a JSON parse, a validation and a JSON dump (a lookup is mostly
# parsing). Whatever the expression does not recognise (escapes, extra keys, other orders or
# spacing, any doubt) goes the full way, which alone decides errors and their messages.
# The match is kept in the record and the ``fields`` dict built from it on first use: every check
# is made at once, but a lookup returns all of a key's captures and most callers read one.

_S = r'[^"\\\x00-\x1f]'  # a string character that JSON (ensure_ascii=False) writes as itself
_INT = r"(?:0|[1-9][0-9]{0,17})"
_FAST_LINE_RE = re.compile(
    r"(?P<key>[^\x00-\x20\x7f!{][^\x00-\x20\x7f]*)"
    r" (?P<ts>(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z)"
    r" (?P<type>(?P<revisit>revisit)(?= )|[!#$%&'*+\-.^_`|~0-9A-Za-z]+)"
    rf' \{{"uri":"(?P<uri>{_S}+)"'
    r'(?:,"sha":"(?P<sha>[A-Z2-7]{32})")?'
    r'(?:,"dig":"(?P<dig>[A-Za-z0-9][A-Za-z0-9_.+-]*:[^"\\\s\x00-\x1f]+)")?'
    r'(?:,"hsc":(?:(?P<hsc>[1-9][0-9]{2})|"(?P<hscs>[0-9]{3})"))?'
    rf'(?:,"mct":"(?P<mct>{_S}*)")?'
    # a warcfile: reference as parse_ref() takes it (names starting "." go the full way)
    rf',"ref":"(?P<ref>warcfile:(?!\.)[^"\\\x00-\x1f/]+#[0-9]+|(?!warcfile:){_S}+)"'
    rf'(?:,"rid":"(?P<rid>{_S}+)")?'
    rf'(?:,"cle":(?P<cle>{_INT}))?'
    rf'(?:,"ple":(?P<ple>{_INT}))?'
    rf'(?:,"rle":(?P<rle>{_INT}))?'
    rf'(?:,"rct":"(?P<rct>{_S}+)")?'
    # the keys only revisit records may have
    rf'(?(revisit)(?:,"rou":"(?P<rou>{_S}+)")?'
    rf'(?:,"rod":"(?P<rod>{_S}+)")?'
    rf'(?:,"roi":"(?P<roi>{_S}+)")?)'
    r"\}"
)
_FAST_NAMES = ("uri", "sha", "dig", "hsc", "hsc", "mct", "ref", "rid", "cle", "ple", "rle", "rct",
               "rou", "rod", "roi")  # fmt: skip
_GROUP = {name: n for name, n in _FAST_LINE_RE.groupindex.items()}  # number for m.group()
# the JSON values are the last groups, in _FAST_NAMES order
assert (
    _FAST_LINE_RE.groups == _GROUP["uri"] - 1 + len(_FAST_NAMES)
    and _GROUP["hscs"] == _GROUP["hsc"] + 1
)
_HEAD = tuple(_GROUP[name] for name in ("key", "ts", "type", "date", "rod"))
_FIRST, _HSC, _CLE, _PLE, _RLE = (  # indexes in m.groups()
    _GROUP[name] - 1 for name in ("uri", "hsc", "cle", "ple", "rle")
)
_VALID_DATES: dict[str, bool] = {}  # "YYYY-MM-DD" -> whether it is a real date


def _valid_date(date: str) -> bool:
    valid = _VALID_DATES.get(date)
    if valid is None:
        try:
            datetime(int(date[:4]), int(date[5:7]), int(date[8:10]))
            valid = True
        except ValueError:
            valid = False
        if len(_VALID_DATES) >= 100_000:
            _VALID_DATES.clear()
        _VALID_DATES[date] = valid
    return valid


def _parse_canonical(text: str, raw: bytes | None) -> CDXJRecord | None:
    """The record of a line in canonical form (``raw`` is its UTF-8 if known), or ``None``
    when the line needs the full parser (which then also reports its errors).

    Every check is made here, at once; only the ``fields`` dict is built later, when it is
    first asked for (``_canonical_fields``): a lookup returns all of a key's captures, and
    most callers read the fields of one of them."""
    m = _FAST_LINE_RE.fullmatch(text)
    if m is None:
        return None
    key, ts, record_type, date, rod = m.group(*_HEAD)
    if not _VALID_DATES.get(date) and not _valid_date(date):
        return None
    if rod is not None:
        try:
            normalize_timestamp(rod)
        except CDXJError:
            return None
    record = object.__new__(CDXJRecord)
    state = record.__dict__
    state["key"] = key
    state["timestamp"] = ts
    state["record_type"] = record_type
    state["_raw"] = text.encode() if raw is None else raw
    state["_match"] = m
    return record


def _parse_bytes(raw: bytes) -> CDXJRecord:
    """The record of a line given as bytes without its newline, as ``CDXJRecord._parse``
    makes it (the lookups' path: the fast path without the dispatch on the line's type; any
    line it does not recognise goes the full way, which alone raises the errors)."""
    try:
        m = _FAST_LINE_RE.fullmatch(raw.decode())
    except UnicodeDecodeError:
        m = None
    if m is None:
        return CDXJRecord._parse(raw)
    key, ts, record_type, date, rod = m.group(*_HEAD)
    if (not _VALID_DATES.get(date) and not _valid_date(date)) or rod is not None:
        return CDXJRecord._parse(raw)  # (rare: a revisit's rod, or an impossible date)
    record = _new(CDXJRecord)
    state = record.__dict__
    state["key"] = key
    state["timestamp"] = ts
    state["record_type"] = record_type
    state["_raw"] = raw
    state["_match"] = m
    return record


_new = object.__new__
_UNPARSED = object()  # the ``_match`` of a record whose fields are read from ``_raw`` on first use


def _checked_line(raw: bytes) -> CDXJRecord:
    """The record of a line known to be valid (one of a file whose every line was checked when
    it was written: ``checked``), without checking it again: the JSON block is read when the
    fields are first asked for."""
    key, ts, record_type, _ = raw.split(b" ", 3)
    record = _new(CDXJRecord)
    state = record.__dict__
    state["key"] = key.decode()
    state["timestamp"] = ts.decode()
    state["record_type"] = record_type.decode()
    state["_raw"] = raw
    state["_match"] = _UNPARSED
    return record


def _fields_of_line(raw: bytes) -> dict[str, Any]:
    """The JSON block of a valid line as a dict, as the parser would make it."""
    text = raw.decode()
    m = _FAST_LINE_RE.fullmatch(text)
    if m is not None:
        return _canonical_fields(m)
    return CDXJRecord._parse_text(text).fields


def _canonical_fields(m: re.Match[str]) -> dict[str, Any]:
    """The JSON block of a line ``_FAST_LINE_RE`` matched (and so validated) as a dict."""
    g = m.groups()
    fields: dict[str, Any] = {k: v for k, v in zip(_FAST_NAMES, g[_FIRST:]) if v is not None}  # noqa: B905
    if g[_HSC] is not None:
        fields["hsc"] = int(g[_HSC])
    if g[_CLE] is not None:
        fields["cle"] = int(g[_CLE])
    if g[_PLE] is not None:
        fields["ple"] = int(g[_PLE])
    if g[_RLE] is not None:
        fields["rle"] = int(g[_RLE])
    return fields


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

    def __getstate__(self) -> dict[str, Any]:
        """For pickle and copy: the fields built, the match (which cannot be pickled) left out."""
        self.fields  # noqa: B018 - builds them
        return {k: v for k, v in self.__dict__.items() if k != "_match"}

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
        raw: bytes | None = None
        if type(line) is bytes:
            raw = line
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CDXJError(f"line is not valid UTF-8 (byte {e.start})") from None
        elif isinstance(line, bytes | bytearray | memoryview):
            raw = bytes(line)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CDXJError(f"line is not valid UTF-8 (byte {e.start})") from None
        elif isinstance(line, str):
            text = line
        else:
            raise CDXJError(f"a line must be str or bytes, not {type(line).__name__}")
        if text.endswith("\n"):
            text = text[:-1]
            raw = None if raw is None else raw[:-1]
        record = _parse_canonical(text, raw)
        if record is not None:
            return record
        return cls._parse_text(text)

    @classmethod
    def _parse_text(cls, text: str) -> CDXJRecord:
        """The full way: any line, every error (the fast path must agree with it)."""
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
        uri: str = self.fields["uri"]  # checked to be a string when the record was made
        return uri

    @property
    def ref(self) -> str:
        ref: str = self.fields["ref"]  # checked to be a string when the record was made
        return ref

    @property
    def warcfile(self) -> tuple[str, int] | None:
        """``(name, offset)`` when ``ref`` is a ``warcfile:`` reference, else ``None``."""
        ref = self.ref
        return parse_ref(ref) if ref.startswith(_WARCFILE) else None

    def as_datetime(self) -> datetime:
        """The timestamp as an aware UTC datetime."""
        return datetime.fromisoformat(self.timestamp)


class _LazyFields:
    """``CDXJRecord.fields`` of a record the fast path parsed: built on first use and kept in
    the instance, where every later access finds it first (this descriptor has no ``__set__``,
    so the instance's own ``fields`` wins, as it does for every record constructed)."""

    def __get__(self, record: CDXJRecord | None, owner: type | None = None) -> dict[str, Any]:
        if record is None:
            raise AttributeError("fields")
        state = record.__dict__
        m = state.get("_match")
        if m is None:  # another thread built them meanwhile
            try:
                built: dict[str, Any] = state["fields"]
            except KeyError:
                raise AttributeError("fields") from None
            return built
        fields = _fields_of_line(state["_raw"]) if m is _UNPARSED else _canonical_fields(m)
        state["fields"] = fields
        state.pop("_match", None)  # the line's text is no longer needed
        return fields


CDXJRecord.fields = _LazyFields()  # type: ignore[assignment]  # set after @dataclass saw the field


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
