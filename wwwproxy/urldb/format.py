"""One domain file of the URL database (the contract: docs/specs/urldb-format.txt).

A domain file is a multi-document YAML file: a metadata document, then one record document
per URL, sorted by ``_path``.  The files are meant to be kept under version control and edited
by hand, so this layer

* reads with ruamel.yaml's round-trip loader and keeps the loaded documents, so comments and
  unknown keys survive a rewrite (comments before the first ``---`` and inside an empty
  metadata document, which ruamel drops, are kept by :class:`DomainFile` itself);
* writes in one normal form, the spec's: ``---`` before every document, an empty metadata
  document as a bare ``---``, keys sorted, ``categories`` and ``cnames`` sorted and without
  duplicates, block style, lists indented two spaces (``categories:\\n  - frontend``), no line
  folding, and strings that YAML 1.1 readers would take for something else (``yes``, ``1:20``)
  quoted, so other tools read the same values;
* refuses malformed files with a :class:`URLDBError` naming the file, the document (1 is the
  metadata document, 2 the first record) and the line where one is known;
* replaces a file only by writing a temporary file in the same directory, ``fsync`` and
  ``os.replace``, so a file is never left half-written.

Sort order of records: Python ``str`` order of ``_path``, i.e. by code point.  For text read
from UTF-8 this is the same as byte order (UTF-8 preserves code point order), so the files sort
as ``LC_ALL=C sort`` would sort them.  Out-of-order or duplicate records in a loaded file are
errors, not silently re-sorted: the file was not written by a conforming tool (or a merge went
wrong), and a person should look at it.  Unsorted keys and lists are merely put in order when
the file is next written.

This layer knows nothing about URLs beyond the shape of ``_path``; canonical paths, host names
and cnames are checked by :mod:`wwwproxy.urldb.db`.
"""

from __future__ import annotations

import bisect
import contextlib
import io
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import DocumentStartEvent
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.resolver import VersionedResolver

from .. import fsutil

__all__ = [
    "DomainFile",
    "DomainMeta",
    "Record",
    "URLDBError",
    "atomic_write",
    "check_path",
]

SUFFIX = ".yaml"

# Record keys with a meaning; any other key is kept as it is ("extra").
PATH = "_path"
CONTENT_TYPE = "content-type"
CATEGORIES = "categories"
CONTENT_LENGTH = "content-length"
CONTENT_SHA256 = "content-sha256"
RECORD_KEYS = frozenset({PATH, CONTENT_TYPE, CATEGORIES, CONTENT_LENGTH, CONTENT_SHA256})

# Metadata keys.
CNAMES = "cnames"
HTTPS = "https"
CASE_SENSITIVE_PATHS = "case-sensitive-paths"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PATH_BAD = re.compile(r"[\x00-\x20\x7f]")
_MARKER = re.compile(r"---(?=\s|$)")


class URLDBError(ValueError):
    """A malformed URL database file or a request the database cannot honour.

    ``file``, ``document`` (1-based; 1 is the metadata document) and ``line`` (1-based) are
    filled in where known, so a person can go straight to the problem.
    """

    def __init__(
        self,
        reason: str,
        *,
        file: str | os.PathLike[str] | None = None,
        document: int | None = None,
        line: int | None = None,
    ) -> None:
        self.reason = reason
        self.file = None if file is None else os.fspath(file)
        self.document = document
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.document is not None:
            where.append(f"document {self.document}")
        if self.line is not None:
            where.append(f"line {self.line}")
        place = ", ".join(where)
        if self.file is not None:
            place = f"{self.file}: {place}" if place else self.file
        return f"{place}: {self.reason}" if place else self.reason


class _FieldError(Exception):
    """A bad value under one key; the caller knows the document and adds the place."""

    def __init__(self, key: str, reason: str, index: int | None = None) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason
        self.index = index  # position in a list value, for the line number


# --- values -----------------------------------------------------------------------------------


def check_path(path: object) -> str:
    """Check a ``_path`` value: an absolute path, optional ``;params`` and ``?query``, no
    fragment, no whitespace or control characters.  Returns it; raises :class:`URLDBError`."""
    try:
        return _check_path(path)
    except _FieldError as exc:
        raise URLDBError(f"{PATH}: {exc.reason}") from None


def _check_path(path: object) -> str:
    if not isinstance(path, str):
        raise _FieldError(PATH, f"must be a string, not {_kind(path)}")
    if not path.startswith("/"):
        raise _FieldError(PATH, f"{path!r} is not an absolute path (it must start with '/')")
    if "#" in path:
        raise _FieldError(PATH, f"{path!r} has a fragment ('#'), which a record cannot have")
    bad = _PATH_BAD.search(path)
    if bad:
        raise _FieldError(PATH, f"{path!r} contains {_describe(bad.group())}")
    return path


def _check_content_type(value: object) -> str:
    if not isinstance(value, str):
        raise _FieldError(CONTENT_TYPE, f"must be a string, not {_kind(value)}")
    if not value.strip():
        raise _FieldError(CONTENT_TYPE, "is empty")
    bad = _CONTROL.search(value)
    if bad:
        raise _FieldError(CONTENT_TYPE, f"{value!r} contains {_describe(bad.group())}")
    return value


def _check_string_list(key: str, value: object) -> tuple[str, ...]:
    """A list of non-empty strings, returned sorted and without duplicates."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise _FieldError(key, f"must be a list of strings, not {_kind(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _FieldError(key, f"item {i + 1} must be a string, not {_kind(item)}", i)
        if not item.strip():
            raise _FieldError(key, f"item {i + 1} is empty", i)
        bad = _CONTROL.search(item)
        if bad:
            raise _FieldError(key, f"item {i + 1} {item!r} contains {_describe(bad.group())}", i)
    return tuple(sorted(set(value)))


def _check_length(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _FieldError(CONTENT_LENGTH, f"must be a whole number of bytes, not {_kind(value)}")
    if value < 0:
        raise _FieldError(CONTENT_LENGTH, f"{value} is negative")
    return int(value)


def _check_sha256(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        shown = repr(value) if isinstance(value, str) else _kind(value)
        raise _FieldError(CONTENT_SHA256, f"{shown} is not 64 lower-case hexadecimal digits")
    return value


def _check_bool(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _FieldError(key, f"must be true or false, not {_kind(value)}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null (empty)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _describe(ch: str) -> str:
    return "a space" if ch == " " else f"the control character U+{ord(ch):04X}"


# --- data types -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DomainMeta:
    """The metadata document; defaults are the spec's (HTTP only, case-sensitive paths)."""

    cnames: tuple[str, ...] = ()
    https: bool = False
    case_sensitive_paths: bool = True

    def __post_init__(self) -> None:
        try:
            cnames = _check_string_list(CNAMES, self.cnames)
            _check_bool(HTTPS, self.https)
            _check_bool(CASE_SENSITIVE_PATHS, self.case_sensitive_paths)
        except _FieldError as exc:
            raise URLDBError(f"{exc.key}: {exc.reason}") from None
        object.__setattr__(self, "cnames", cnames)


@dataclass(frozen=True, slots=True)
class Record:
    """One URL record.  ``categories`` is kept sorted and free of duplicates; ``extra`` holds
    keys this program does not know, so they are written back unchanged."""

    path: str
    content_type: str
    categories: tuple[str, ...] = ()
    content_length: int | None = None
    content_sha256: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        try:
            _check_path(self.path)
            _check_content_type(self.content_type)
            categories = _check_string_list(CATEGORIES, self.categories)
            length = _check_length(self.content_length)
            _check_sha256(self.content_sha256)
        except _FieldError as exc:
            raise URLDBError(f"{exc.key}: {exc.reason}") from None
        for key in self.extra:
            if not isinstance(key, str):
                raise URLDBError(f"record key {key!r} is not a string")
            if key in RECORD_KEYS:
                raise URLDBError(f"{key!r} is a known record key and cannot be in extra")
        object.__setattr__(self, "categories", categories)
        object.__setattr__(self, "content_length", length)
        object.__setattr__(self, "extra", dict(self.extra))

    def fields(self) -> dict[str, Any]:
        """The record as the keys of its YAML document, sorted, empty values left out."""
        out: dict[str, Any] = dict(self.extra)
        out[PATH] = self.path
        out[CONTENT_TYPE] = self.content_type
        if self.categories:
            out[CATEGORIES] = list(self.categories)
        if self.content_length is not None:
            out[CONTENT_LENGTH] = self.content_length
        if self.content_sha256 is not None:
            out[CONTENT_SHA256] = self.content_sha256
        return dict(sorted(out.items()))


# --- YAML -------------------------------------------------------------------------------------

_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER_11 = VersionedResolver(version=(1, 1))


class _Representer(RoundTripRepresenter):
    """Round-trip representer that also quotes strings a YAML 1.1 reader would not read as
    strings (``yes``, ``no``, ``on``, ``1:20``); ruamel itself only guards against YAML 1.2."""


def _represent_str(representer: RoundTripRepresenter, data: str) -> ScalarNode:
    style = None
    if _RESOLVER_11.resolve(ScalarNode, data, (True, False)) != _STR_TAG:
        style = "'"
    return representer.represent_scalar(_STR_TAG, data, style=style)


_Representer.add_representer(str, _represent_str)


def _yaml() -> YAML:
    """A fresh YAML instance (they are not thread-safe) set up for the spec's layout."""
    y = YAML(typ="rt")
    y.Representer = _Representer
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 1 << 30  # never fold a long path or content type
    y.explicit_start = True
    y.allow_unicode = True
    y.default_flow_style = False
    return y


def _key_line(doc: Any, key: str) -> int | None:
    try:
        return doc.lc.key(key)[0] + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return _doc_line(doc)


def _item_line(doc: Any, key: str, index: int | None) -> int | None:
    if index is not None:
        with contextlib.suppress(AttributeError, KeyError, TypeError, IndexError):
            return doc[key].lc.item(index)[0] + 1
    return _key_line(doc, key)


def _doc_line(doc: Any) -> int | None:
    try:
        return doc.lc.line + 1
    except (AttributeError, TypeError):
        return None


def _document_starts(text: str) -> list[int]:
    """1-based first line of each document, as far as the text can be parsed."""
    starts: list[int] = []
    try:
        for event in _yaml().parse(text):
            if isinstance(event, DocumentStartEvent):
                starts.append(event.start_mark.line + 1)
    except Exception:  # noqa: BLE001 - only locating an error already being reported
        pass
    return starts


def _split_header(text: str) -> tuple[str, str]:
    """Comment lines before the first ``---`` (which ruamel drops) and the rest."""
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end + 1
        line = text[pos:end].strip()
        if line and not line.startswith("#"):
            break
        pos = end
    if pos and _MARKER.match(text, pos):
        return text[:pos], text[pos:]
    return "", text


def _empty_doc_comments(text: str) -> str:
    """Comment lines between the first ``---`` and the next (ruamel drops them when the
    metadata document is empty)."""
    if not _MARKER.match(text):
        return ""
    lines = text.splitlines(keepends=True)[1:]
    kept = []
    for line in lines:
        if _MARKER.match(line):
            break
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return ""
        kept.append(line if line.endswith("\n") else line + "\n")
    return "".join(kept) if any(line.strip() for line in kept) else ""


def _set_list(doc: CommentedMap, key: str, values: tuple[str, ...]) -> None:
    """Store a sorted list under ``key``, keeping comments on the items that stay."""
    old = doc.get(key)
    if not values:
        if key in doc:
            del doc[key]
        return
    seq = CommentedSeq(values)
    if isinstance(old, CommentedSeq):
        if list(old) == list(values):
            old.fa.set_block_style()
            return
        comments = {}
        for i, item in enumerate(old):
            if i in old.ca.items and item not in comments:
                comments[item] = old.ca.items[i]
        for i, item in enumerate(values):
            if item in comments:
                seq.ca.items[i] = comments[item]
        seq.ca.comment = old.ca.comment
    seq.fa.set_block_style()
    doc[key] = seq


def _set_value(doc: CommentedMap, key: str, value: object) -> None:
    if key in doc and type(doc[key]) is type(value) and doc[key] == value:
        return
    doc[key] = value


def _normalize(doc: CommentedMap) -> None:
    """Keys sorted, block style: the spec's form (comments travel with their keys)."""
    if list(doc) != sorted(doc):
        for key in sorted(doc):
            doc.move_to_end(key)
    doc.fa.set_block_style()


def _dump(docs: list[CommentedMap]) -> str:
    out = io.StringIO()
    _yaml().dump_all(docs, out)
    return out.getvalue()


# --- the file ---------------------------------------------------------------------------------


class DomainFile:
    """A domain file in memory: its metadata and records, with the loaded YAML kept so that
    rewriting it keeps comments and unknown keys.  Records are kept sorted by ``_path``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        meta: DomainMeta | None = None,
        records: Iterable[Record] = (),
    ) -> None:
        """A new (not yet saved) domain file; use :meth:`load` or :meth:`loads` to read one."""
        self.path = Path(path)
        self._header = ""
        self._meta_comments = ""
        self._meta_doc: CommentedMap = CommentedMap()
        self._meta = DomainMeta()
        self._docs: list[CommentedMap] = []
        self._paths: list[str] = []
        self._records: list[Record] = []
        if meta is not None:
            self.set_meta(meta)
        for record in records:
            self.put(record)

    @property
    def domain(self) -> str:
        """The primary domain, from the file name (``example.com.yaml``)."""
        name = self.path.name
        return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name

    # -- reading --

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DomainFile:
        """Read and check a domain file; every problem is a :class:`URLDBError`."""
        return cls.loads(_read_text(path), path)

    @classmethod
    def loads(cls, text: str, path: str | os.PathLike[str]) -> DomainFile:
        """Parse domain file text; ``path`` is where it lives (and what errors name)."""
        self = cls(path)
        # CRLF is one line break to YAML; making it LF keeps kept comments in the output's form.
        text = text.removeprefix("\ufeff").replace("\r\n", "\n")
        docs = _parse(text, self.path)
        self._header, rest = _split_header(text)
        if docs and docs[0] is None:
            self._meta_comments = _empty_doc_comments(rest)
        starts: list[int] | None = None

        def fail(reason: str, document: int, line: int | None = None) -> URLDBError:
            nonlocal starts
            if line is None:
                starts = _document_starts(text) if starts is None else starts
                line = starts[document - 1] if document <= len(starts) else None
            return URLDBError(reason, file=self.path, document=document, line=line)

        meta_doc = docs[0] if docs else None
        if meta_doc is not None:
            self._meta = _meta_from(meta_doc, fail)
            self._meta_doc = meta_doc
        first_seen: dict[str, int] = {}
        for number, doc in enumerate(docs[1:], start=2):
            record = _record_from(doc, number, fail)
            if record.path in first_seen:
                raise fail(
                    f"duplicate record: {PATH} {record.path!r} is also in document "
                    f"{first_seen[record.path]}",
                    number,
                    _key_line(doc, PATH),
                )
            first_seen[record.path] = number
            if self._paths and record.path < self._paths[-1]:
                raise fail(
                    f"records are not sorted by {PATH}: {record.path!r} comes after "
                    f"{self._paths[-1]!r} (document {number - 1})",
                    number,
                    _key_line(doc, PATH),
                )
            self._docs.append(doc)
            self._paths.append(record.path)
            self._records.append(record)
        return self

    @classmethod
    def read_meta(cls, path: str | os.PathLike[str]) -> DomainMeta:
        """Only the metadata document (cheap: later documents are not parsed)."""
        text = _read_text(path).removeprefix("\ufeff")
        file = Path(path)
        try:
            first = next(iter(_yaml().load_all(text)), None)
        except Exception as exc:  # noqa: BLE001 - see _parse
            raise _yaml_error(exc, file, text, 0) from exc

        def fail(reason: str, document: int, line: int | None = None) -> URLDBError:
            return URLDBError(reason, file=file, document=document, line=line)

        return DomainMeta() if first is None else _meta_from(first, fail)

    # -- access --

    @property
    def meta(self) -> DomainMeta:
        return self._meta

    @property
    def records(self) -> tuple[Record, ...]:
        """All records, sorted by path."""
        return tuple(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(tuple(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def get(self, path: str) -> Record | None:
        """The record whose ``_path`` is exactly ``path``."""
        i = bisect.bisect_left(self._paths, path)
        if i < len(self._paths) and self._paths[i] == path:
            return self._records[i]
        return None

    def document_of(self, path: str) -> tuple[int, int | None] | None:
        """(document number, line) of the record for ``path``, for messages."""
        i = bisect.bisect_left(self._paths, path)
        if i < len(self._paths) and self._paths[i] == path:
            return i + 2, _key_line(self._docs[i], PATH)
        return None

    # -- changes --

    def set_meta(self, meta: DomainMeta) -> None:
        """Change the metadata.  Only keys whose value changes are touched; a key set back to
        its default is removed, so the document stays minimal."""
        old = self._meta
        doc = self._meta_doc
        for key, before, after, default in (
            (CNAMES, old.cnames, meta.cnames, ()),
            (HTTPS, old.https, meta.https, False),
            (CASE_SENSITIVE_PATHS, old.case_sensitive_paths, meta.case_sensitive_paths, True),
        ):
            if before == after and (key in doc or after == default):
                continue
            if after == default:
                doc.pop(key, None)
            elif isinstance(after, tuple):  # CNAMES, the one list
                _set_list(doc, key, after)
            else:
                doc[key] = after
        self._meta = meta

    def put(self, record: Record) -> None:
        """Insert ``record`` in order, or replace the record with the same path.  Replacing
        updates the existing YAML document key by key, so its comments stay."""
        i = bisect.bisect_left(self._paths, record.path)
        fields = record.fields()
        if i < len(self._paths) and self._paths[i] == record.path:
            doc = self._docs[i]
            for key in [k for k in doc if k not in fields]:
                del doc[key]
            self._records[i] = record
        else:
            doc = CommentedMap()
            self._docs.insert(i, doc)
            self._paths.insert(i, record.path)
            self._records.insert(i, record)
        for key, value in fields.items():
            if key == CATEGORIES:
                _set_list(doc, key, tuple(value))
            else:
                _set_value(doc, key, value)
        _normalize(doc)

    def remove(self, path: str) -> bool:
        """Remove the record with exactly this path; False if there was none."""
        i = bisect.bisect_left(self._paths, path)
        if i < len(self._paths) and self._paths[i] == path:
            del self._docs[i], self._paths[i], self._records[i]
            return True
        return False

    # -- writing --

    def dumps(self) -> str:
        """The file's text in the spec's form (``\\n`` line ends)."""
        parts = [self._header]
        meta = self._meta_doc
        _normalize(meta)
        if CNAMES in meta and isinstance(meta[CNAMES], list):
            _set_list(meta, CNAMES, self._meta.cnames)
        if len(meta):
            # Comments that sat in an empty metadata document stay at its top.
            parts.append("---\n" + self._meta_comments + _dump([meta]).removeprefix("---\n"))
        else:
            parts.append("---\n" + self._meta_comments)
        for doc, record in zip(self._docs, self._records, strict=True):
            _normalize(doc)
            if isinstance(doc.get(CATEGORIES), list):
                _set_list(doc, CATEGORIES, record.categories)
        if self._docs:
            parts.append(_dump(self._docs))
        return "".join(parts)

    def save(self) -> None:
        """Write the file atomically (temporary file, fsync, rename), with native line ends."""
        try:
            text = self.dumps()
        except YAMLError as exc:  # a value put in ``extra`` that YAML cannot represent
            raise URLDBError(f"cannot write the file: {exc}", file=self.path) from exc
        if os.linesep != "\n":
            text = text.replace("\n", os.linesep)
        atomic_write(self.path, text.encode("utf-8"))


# --- parsing helpers --------------------------------------------------------------------------


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise URLDBError(f"cannot read the file: {exc.strerror or exc}", file=path) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise URLDBError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02X} at offset {exc.start})",
            file=path,
            line=line,
        ) from None


def _parse(text: str, file: Path) -> list[Any]:
    docs: list[Any] = []
    try:
        for doc in _yaml().load_all(text):
            docs.append(doc)
    except Exception as exc:  # noqa: BLE001
        # The YAML library is handed untrusted text and raises more than YAMLError for it
        # (ValueError for a bad timestamp, RecursionError for deep nesting, ...): all of it
        # means "this file is not valid YAML", and must not escape as a crash.
        raise _yaml_error(exc, file, text, len(docs)) from exc
    return docs


def _yaml_error(exc: BaseException, file: Path, text: str, loaded: int) -> URLDBError:
    line = None
    document = loaded + 1
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        if mark is not None:
            line = mark.line + 1
            starts = _document_starts(text)
            before = [s for s in starts if s <= line]
            document = max(len(before), 1)
        reason = " ".join(p for p in (exc.context, exc.problem) if p)
    elif isinstance(exc, YAMLError):
        reason = str(exc)
    else:
        reason = f"{type(exc).__name__}: {exc}"
    reason = " ".join(reason.split()) or type(exc).__name__
    return URLDBError(f"bad YAML: {reason}", file=file, document=document, line=line)


class _Fail(Protocol):
    """Makes the error for a problem in document ``document`` (1-based), at ``line`` when it
    is known."""

    def __call__(self, reason: str, document: int, line: int | None = None) -> URLDBError: ...


def _meta_from(doc: object, fail: _Fail) -> DomainMeta:
    if not isinstance(doc, Mapping):
        raise fail(f"the metadata document must be a mapping, not {_kind(doc)}", 1, _doc_line(doc))
    if PATH in doc:
        raise fail(
            f"the metadata document has a {PATH} key: the file must start with a metadata "
            "document (an empty one is a bare '---') before the first record",
            1,
            _key_line(doc, PATH),
        )
    for key in doc:
        if not isinstance(key, str):
            raise fail(f"key {key!r} is not a string", 1, _doc_line(doc))
    try:
        return DomainMeta(
            cnames=_check_string_list(CNAMES, doc.get(CNAMES, ())),
            https=_check_bool(HTTPS, doc.get(HTTPS, False)),
            case_sensitive_paths=_check_bool(
                CASE_SENSITIVE_PATHS, doc.get(CASE_SENSITIVE_PATHS, True)
            ),
        )
    except _FieldError as exc:
        raise fail(f"{exc.key}: {exc.reason}", 1, _item_line(doc, exc.key, exc.index)) from None


def _record_from(doc: object, number: int, fail: _Fail) -> Record:
    if doc is None:
        raise fail("empty record document (a record needs _path and content-type)", number)
    if not isinstance(doc, Mapping):
        raise fail(f"a record must be a mapping, not {_kind(doc)}", number, _doc_line(doc))
    for key in doc:
        if not isinstance(key, str):
            raise fail(f"key {key!r} is not a string", number, _doc_line(doc))
    for key in (PATH, CONTENT_TYPE):
        if key not in doc:
            raise fail(f"record has no {key} key", number, _doc_line(doc))
    try:
        record = Record(
            path=_check_path(doc[PATH]),
            content_type=_check_content_type(doc[CONTENT_TYPE]),
            categories=_check_string_list(CATEGORIES, doc.get(CATEGORIES, [])),
            content_length=_check_length(doc.get(CONTENT_LENGTH)),
            content_sha256=_check_sha256(doc.get(CONTENT_SHA256)),
            extra={k: v for k, v in doc.items() if k not in RECORD_KEYS},
        )
    except _FieldError as exc:
        line = _item_line(doc, exc.key, exc.index)
        raise fail(f"{exc.key}: {exc.reason}", number, line) from None
    return record


# --- atomic replace ---------------------------------------------------------------------------


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (:func:`wwwproxy.fsutil.atomic_write`); on any
    failure the original is untouched and no temporary file is left."""
    target = Path(path)
    try:
        fsutil.atomic_write(target, data)
    except OSError as exc:
        raise URLDBError(f"cannot write the file: {exc.strerror or exc}", file=target) from exc
