"""Sorting and merging CDXJ lines in byte order (as ``LC_ALL=C sort``), into files atomically.

Lines are compared as UTF-8 bytes without their newline. Large inputs are sorted externally in
bounded memory (sorted runs spilled to a temp directory, then merged); a new file is written
beside its target, fsynced and renamed over it, so readers see the old file or the new one.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from ...fsutil import fsync_dir
from .checked import forget, note_checked
from .line import HEADER_LINE, SUPPORTED_MAJOR, CDXJRecord, CDXJVersionError, format_header
from .read import DEFAULT_BLOCK_SIZE, StrPath, file_version, iter_records
from .runs import Samples, bloom_for, forget_keys, write_keys

__all__ = ["DEFAULT_RUN_LINES", "merge_files", "merge_sorted", "sort_lines", "write_index"]

#: does a rename (the first argument) of a new file open at the descriptor, with its samples
Installer = Callable[[Callable[[], None], int, Samples], None]

# Lines held in memory per sorted run of an external sort (about 25 MB of typical lines).
DEFAULT_RUN_LINES = 100_000


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


#: read buffer of each sorted run while they are merged: all of them are open at once, so a
#: large one would make the merge's memory grow with the number of runs
_RUN_READ_BUFFER = 64 * 1024


def _read_run(path: str) -> Iterator[bytes]:
    with open(path, "rb", buffering=_RUN_READ_BUFFER) as f:
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


def _atomic_write(
    path: Path,
    header: str,
    lines: Iterable[bytes],
    *,
    checked: bool | Callable[[], bool],
    block_size: int = DEFAULT_BLOCK_SIZE,
    sampled: list[Samples] | None = None,
    install: Installer | None = None,
    bloom_lines: int | None = None,
) -> int:
    """Write header + lines to a temp file beside ``path``, fsync, then rename over ``path``.

    Readers see the old file or the new one, never a part; returns the number of lines.
    ``checked`` (or what it returns once the lines are written): every line is a checked
    record's, which a note beside the file then says (``.checked``); otherwise an old note is
    removed before the rename. The file's sparse index (every ``block_size`` bytes) is taken
    as it is written and kept beside it (``runs.write_keys``), and appended to ``sampled``.
    With ``bloom_lines`` (about how many lines there will be at most), the samples also
    get a Bloom filter of the keys. ``install``, when given, does the rename (so that a
    reader of ``path`` may take the new file with its samples at once: ``IndexFile.install``).
    """
    head = header.encode() + b"\n"
    samples = Samples(block_size, len(head))
    if bloom_lines is not None:
        samples.bloom = bloom_for(bloom_lines)
    feed = samples.feed
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as f:
            f.write(head)
            pos = len(head)
            count = 0
            for line in lines:
                feed(pos, line)
                f.write(line)
                f.write(b"\n")
                pos += len(line) + 1
                count += 1
            f.flush()
            os.fsync(f.fileno())
            written = os.fstat(f.fileno())
            if callable(checked):
                checked = checked()
            if not checked:
                forget(path)
            if samples.keys:  # (before the rename: no reader opens the new file without it)
                write_keys(path, written, samples)
            else:
                forget_keys(path)
            if install is None:
                os.replace(tmp, path)
            else:
                install(functools.partial(os.replace, tmp, path), f.fileno(), samples)
            st = os.fstat(f.fileno())  # (the rename may change the ctime)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    if sampled is not None:
        sampled.append(samples)
    if checked and (st.st_ino, st.st_size, st.st_mtime_ns) == (
        written.st_ino,
        written.st_size,
        written.st_mtime_ns,
    ):
        note_checked(path, st)
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
        return _atomic_write(out, header, _external_sort(lines, tmp, run_lines), checked=True)


def write_index(
    path: StrPath,
    records: Iterable[CDXJRecord],
    *,
    run_lines: int = DEFAULT_RUN_LINES,
    install: Installer | None = None,
) -> int:
    """Write records as a sorted index file (atomic replace, by ``install`` when given), in
    bounded memory."""
    out = Path(path)
    with tempfile.TemporaryDirectory(prefix=".cdxj-sort-", dir=out.parent) as tmp:
        lines = (record.sort_key for record in records)
        sorted_lines = _external_sort(lines, tmp, run_lines)
        return _atomic_write(out, HEADER_LINE, sorted_lines, checked=True, install=install)
