"""Reading CDXJ files: the header block, records in file order, journals, and checks.

Strict readers raise ``CDXJError`` naming ``file:line`` at the first problem; tolerant ones
(journals above all, whose last line may be torn by a killed writer) skip bad lines and describe
them instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

from .line import SUPPORTED_MAJOR, CDXJError, CDXJRecord, CDXJVersionError, parse_header

__all__ = ["check", "file_version", "iter_records", "read_journal"]

StrPath = str | os.PathLike[str]


# ---------------------------------------------------------------------------------------------
# The header block


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
