"""The on-disk CDXJ index: sorted runs searched through sparse indexes, plus a journal.

``index.cdxj`` and the newer runs ``run-<time>.cdxj`` are never read whole: lookups bisect a
sparse in-memory index of each one's keys (one per 8 KiB, ``read.IndexFile``, kept beside the
file by its writer) and read one block; an exact lookup skips the runs whose Bloom filter says
they lack its key. New records are appended to ``journal.cdxj`` (durably, under ``flock``) and
are visible at once, since lookups consult it too; ``Index.compact()`` turns the journal into a
new run, merged with the newest runs while they are small beside the next older one
(``runs.runs_to_merge``), or into a new ``index.cdxj`` when the merge reaches it.

Changes on disk show at once, whichever process made them: every lookup ``stat``-s the directory
(a journal made, sealed or removed, or an index renamed in, changes its mtime) and, while that
mtime is unchanged and older than the timestamps' granularity (``_settled``), ``fstat``-s the
index's open descriptor (an edit in place changes its size, mtime or ctime); otherwise it
``stat``-s the index's path; and the active journal's, when there is one. An index every line
of which was checked when it was written (``checked``: all this package's writers) is read
without checking its lines again.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import fcntl
import heapq
import io
import json
import logging
import operator
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from ...fsutil import Durability, PendingFlush, atomic_write, fsync_dir, lock_if_still_at
from .checked import forget, is_checked
from .line import (
    HEADER_LINE,
    SUPPORTED_MAJOR,
    CDXJError,
    CDXJRecord,
    _check_key,
    _checked_line,
    _parse_bytes,
    format_header,
    format_timestamp,
    parse_timestamp,
)
from .merge import (
    DEFAULT_RUN_LINES,
    Installer,
    _atomic_write,
    _external_sort,
    merge_sorted,
    write_index,
)
from .read import (
    DEFAULT_BLOCK_SIZE,
    NOT_HELD,
    IndexFile,
    StrPath,
    _Headers,
    _scan,
    check,
    file_version,
    iter_records,
    read_journal,
)
from .runs import RUN_RE, Bloom, Samples, forget_keys, run_name, runs_to_merge

__all__ = ["INDEX_NAME", "JOURNAL_NAME", "Index", "IndexFile", "append_journal"]

log = logging.getLogger(__package__)  # the logger of the whole CDXJ layer

INDEX_NAME = "index.cdxj"
JOURNAL_NAME = "journal.cdxj"

_MAX_PROBLEMS = 1000
_SEALED_RE = re.compile(r"journal-[0-9]{20}-[0-9]+\.sealed\Z")
_LOCK_NAME = ".compact.lock"
_SUPERSEDED_NAME = ".superseded"
_SHORTEST_LINE = 64  # bytes (a run's lines, guessed from its size, are at most its size / this)
_RETRIES = 3  # listings a lookup takes while runs it listed are merged away under it
_FILE_MODE = 0o600  # the cache is private browsing history
# a directory listing is reused once the directory's mtime is older than the timestamps'
# granularity (_settled): whole seconds (or two) where they may be whole, else a few ticks
_SETTLED_NS = 2_000_000_000
_SETTLED_FINE_NS = 50_000_000


# ---------------------------------------------------------------------------------------------
# Journal


def _open_locked_journal(path: StrPath) -> int:
    """An fd on the journal at ``path`` holding its exclusive lock (retrying if it was sealed
    by a compaction between open and lock)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
        try:
            if lock_if_still_at(fd, path):
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


def append_journal(
    path: StrPath, records: Iterable[CDXJRecord], sync: Durability | PendingFlush | None = None
) -> None:
    """Append records durably: one write under an exclusive ``flock``, then fsync (with a
    :class:`~wwwproxy.fsutil.Durability`, its flush, e.g. one shared with the other writers
    that finish together; with a :class:`~wwwproxy.fsutil.PendingFlush`, none: what is to be
    flushed is added to it, for the caller to flush with the rest of its change).

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
        if sync is None:
            os.fsync(fd)
        elif isinstance(sync, PendingFlush):
            sync.file(fd)
            if size == 0:
                sync.folder(Path(path).parent)
        else:  # by the descriptor: a compaction may rename the journal meanwhile
            sync.sync([fd, Path(path).parent] if size == 0 else [fd])
    finally:
        os.close(fd)
    if sync is None and size == 0:
        fsync_dir(Path(path).parent)


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
_PROBE = 256  # bytes before where a journal was read to, checked before reading on from there


@dataclass
class _JournalRead:
    """A journal's records as read, and where to go on reading it from."""

    ident: _Ident
    records: list[CDXJRecord]
    #: the end of its last whole line, when it ended with one (else it is read again whole)
    end: int | None = None
    #: the bytes before ``end``: the same file, grown, still has them there (this tells a new
    #: journal that got the same inode number from the old one)
    probe: bytes = b""
    lineno: int = 0
    headers: _Headers | None = None


class Index:
    """The CDXJ index of a cache: ``index.cdxj`` and runs (sorted) plus ``journal.cdxj``
    (appended).

    Crash safety: ``compact()`` first renames the journal to a sealed name, merges sealed
    journals and the runs it merges into a temp file, fsyncs, renames it in (a new run, or
    over the index), and only then deletes the sealed journals and the merged runs. Lookups
    read the active journal, the sealed journals and the sorted files (in that order, so a
    concurrent compaction never hides a record; a run merged away under a lookup makes it list
    the files again), and drop identical lines, so a crash at any point loses nothing and
    duplicates nothing.

    Writers and compaction coordinate with ``flock`` and so may be in different processes.
    ``block_size`` is the spacing of the sparse index's samples (``IndexFile``; tests make it
    small to search through many samples).
    """

    def __init__(
        self, directory: StrPath, *, create: bool = True, block_size: int = DEFAULT_BLOCK_SIZE
    ) -> None:
        self.directory = Path(directory)
        if create:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.index_path = self.directory / INDEX_NAME
        self.journal_path = self.directory / JOURNAL_NAME
        self._block_size = block_size
        self._file = IndexFile(self.index_path, block_size=block_size)
        self._runs: dict[str, IndexFile] = {}  # the newer sorted runs by name
        self._writing: set[str] = set()  # the names of runs being written
        self._lock = threading.Lock()
        self._compact_lock = threading.Lock()
        self._journal_cache: dict[str, _JournalRead] = {}
        self._view: tuple[tuple[_Ident | None, ...], list[bytes], list[CDXJRecord]] | None = None
        self._directory = os.fspath(self.directory)  # (a str: os.stat takes it a little faster)
        self._listed: _Listing | None = None
        self._problems: dict[str, None] = {}

    # -- writing -------------------------------------------------------------------------------

    def add(
        self, records: Iterable[CDXJRecord], sync: Durability | PendingFlush | None = None
    ) -> None:
        """Append records to the journal; they are visible to lookups at once (and durable on
        return: fsynced, or flushed with other writers' by ``sync``)."""
        append_journal(self.journal_path, records, sync)

    def files(self) -> list[Path]:
        """The files that hold index lines now, existing ones only: the sorted index, the
        active journal, then sealed journals (left by a compaction in progress or killed), then
        the newer sorted runs."""
        paths = [self.index_path, self.journal_path, *self._sealed_paths(), *self._run_paths()]
        gone = self._superseded()
        return [path for path in paths if path.exists() and path.name not in gone]

    def journal_bytes(self) -> int:
        """Size of the journals not yet compacted (to decide when to compact)."""
        total = 0
        for path in [self.journal_path, *self._sealed_paths()]:
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total

    def compact(
        self, *, keep: Callable[[CDXJRecord], bool] | None = None, full: bool = False
    ) -> int | None:
        """Merge the journal into the sorted runs; returns the record count of the run it
        wrote, or ``None`` when there was nothing to do.

        The journal's lines become a new sorted run, merged with the newest runs for as long
        as they are small beside the next older one (``runs.runs_to_merge``); when that is all
        of them, the result is a new ``index.cdxj`` (atomic rename). ``keep``, when given,
        filters every record (e.g. to purge a URL's lines) and merges everything into a new
        ``index.cdxj``, as ``full`` does. Malformed journal lines are skipped and reported
        (``problems``); a malformed or unsorted index is re-sorted strictly and raises
        ``CDXJError`` if a line is invalid, leaving everything as it was.
        """
        with self._compact_lock, _flock(self.directory / _LOCK_NAME):
            self._remove_stale_temps()
            self._seal_journal()
            sealed = self._sealed_paths()
            runs = self._run_paths()[::-1]  # newest first
            if not sealed and keep is None and not (full and runs):
                return None
            journal_lines = self._read_sealed(sealed)
            if keep is None and not full:
                sizes = [_size(path) for path in runs]
                if self.index_path.exists():
                    sizes.append(_size(self.index_path))
                new_bytes = sum(len(line) + 1 for line in journal_lines)
                merged = runs_to_merge(new_bytes, sizes)
                if merged < len(sizes):  # index.cdxj stays: a new run
                    count = self._write_run(journal_lines, runs[:merged])
                    self._drop([*sealed, *runs[:merged]])
                    return count
            install = self._superseding([*sealed, *runs])
            try:
                count = self._rewrite(journal_lines, runs, keep, install, resort=False)
            except _NotSorted as e:
                log.warning("%s: index not in byte order (%s); re-sorting", self.index_path, e)
                count = self._rewrite(journal_lines, runs, keep, install, resort=True)
            self._drop([*sealed, *runs])
            self._forget_superseded()
            return count

    def rebuild(self, records: Iterable[CDXJRecord]) -> int:
        """Replace the index with exactly ``records`` (e.g. from a scan of the WARC files).

        Journals and runs written before the call are discarded (the scan covers them);
        records added while it runs stay in the new journal. Returns the record count.
        """
        with self._compact_lock, _flock(self.directory / _LOCK_NAME):
            self._remove_stale_temps()
            self._seal_journal()
            sealed = self._sealed_paths()
            runs = self._run_paths()
            count = write_index(
                self.index_path, records, install=self._superseding([*sealed, *runs])
            )
            self._drop([*sealed, *runs])
            self._forget_superseded()
            return count

    def _write_run(self, journal_lines: list[bytes], runs: list[Path]) -> int:
        """Write ``journal_lines`` merged with the lines of ``runs`` as a new run."""
        path = self.directory / run_name(time.time_ns())
        checked: list[bool] = []
        lines = merge_sorted(journal_lines, *(self._run_lines(run, checked) for run in runs))
        most = len(journal_lines) + sum(map(self._line_count, runs))
        file = IndexFile(path, block_size=self._block_size)
        with self._lock:  # (a listing made meanwhile takes this one)
            self._runs[path.name] = file
            self._writing.add(path.name)
        try:
            return _atomic_write(
                path,
                HEADER_LINE,
                lines,
                checked=lambda: _all_checked(checked, len(runs)),
                block_size=self._block_size,
                install=file.install,
                bloom_lines=most,
            )
        finally:
            with self._lock:
                self._writing.discard(path.name)

    def _line_count(self, run: Path) -> int:
        """The lines of a run (as its writer counted them; else guessed from its size)."""
        with self._lock:
            file = self._runs.get(run.name)
        counted = file.line_count() if file is not None else None
        return counted if counted is not None else _size(run) // _SHORTEST_LINE

    def _run_lines(self, path: Path, checked: list[bool]) -> Iterator[bytes]:
        """The lines of a run in order (checked on the way if it has no note: ``checked``
        gets whether they all were valid once they are all read)."""
        return _checked_order(_raw_lines(path, checked), os.fspath(path))

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

    def _index_lines(self, resort: bool, tmp: str, checked: list[bool]) -> Iterator[bytes]:
        """The index's lines in order for a rewrite; ``checked`` gets, once they are all read,
        whether every one is a valid record's (so the new file may say so: ``.checked``)."""
        if not self.index_path.exists():
            checked.append(True)
            return iter(())
        if resort:  # (a strict reader: a bad line stops the rewrite)
            return self._resorted_lines(tmp, checked)
        return _checked_order(self._raw_index_lines(checked), os.fspath(self.index_path))

    def _resorted_lines(self, tmp: str, checked: list[bool]) -> Iterator[bytes]:
        records = iter_records(self.index_path)
        yield from _external_sort((r.sort_key for r in records), tmp, DEFAULT_RUN_LINES)
        checked.append(True)

    def _raw_index_lines(self, checked: list[bool]) -> Iterator[bytes]:
        """The lines of the index as they are (``_raw_lines``)."""
        return _raw_lines(self.index_path, checked)

    def _rewrite(
        self,
        journal_lines: list[bytes],
        runs: list[Path],
        keep: Callable[[CDXJRecord], bool] | None,
        install: Installer,
        resort: bool,
    ) -> int:
        """A new ``index.cdxj``: the index, ``journal_lines`` and the ``runs`` merged,
        renamed in by ``install``."""
        version = (SUPPORTED_MAJOR, 0)
        if self.index_path.exists():
            version = file_version(self.index_path)
        checked: list[bool] = []
        with tempfile.TemporaryDirectory(prefix=".cdxj-sort-", dir=self.directory) as tmp:
            lines = merge_sorted(
                self._index_lines(resort, tmp, checked),
                journal_lines,
                *(self._run_lines(run, checked) for run in runs),
            )
            if keep is not None:  # (which checks every line)
                source = os.fspath(self.index_path)
                lines = (
                    line
                    for line in lines
                    if keep(CDXJRecord.parse_line(line, source=source, lineno=None))
                )
            return _atomic_write(
                self.index_path,
                format_header(version),
                lines,
                checked=lambda: keep is not None or _all_checked(checked, len(runs) + 1),
                block_size=self._block_size,
                install=install,
            )

    # -- what a new index.cdxj supersedes ----------------------------------------------------
    #
    # A new index.cdxj holds every line of the sealed journals and runs it was made from, less
    # those a ``keep`` dropped (a delete, a purge) or a rebuild did not find.  Those files are
    # removed once it is in place; a crash between its rename and their removal would bring
    # the dropped lines back.  So before the rename, a note (``.superseded``) names them and
    # the new file (device, inode, size): while index.cdxj is that file, lookups ignore them,
    # and the next compaction removes them.

    def _superseding(self, paths: list[Path]) -> Installer:
        """What renames a new ``index.cdxj`` in, once a note says it supersedes ``paths``."""

        def install(rename: Callable[[], None], fd: int, samples: Samples) -> None:
            if paths:
                st = os.fstat(fd)
                note = {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size}
                note["files"] = [path.name for path in paths]  # type: ignore[assignment]
                atomic_write(self.directory / _SUPERSEDED_NAME, json.dumps(note))
            self._file.install(rename, fd, samples)

        return install

    def _superseded(self) -> set[str]:
        """The names the note says ``index.cdxj`` supersedes, if it is the file it names."""
        try:
            note = json.loads((self.directory / _SUPERSEDED_NAME).read_bytes())
            st = os.stat(self.index_path)
            if (note["dev"], note["ino"], note["size"]) != (st.st_dev, st.st_ino, st.st_size):
                return set()
            return {name for name in note["files"] if isinstance(name, str) and "/" not in name}
        except (OSError, ValueError, KeyError, TypeError):
            return set()

    def _forget_superseded(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.directory / _SUPERSEDED_NAME)
            fsync_dir(self.directory)

    def _drop(self, merged: list[Path]) -> None:
        """Remove what a compaction merged (sealed journals, runs and their notes) once what
        it wrote is in place."""
        for path in merged:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            if RUN_RE.match(path.name):
                forget(path)
                forget_keys(path)
        fsync_dir(self.directory)

    def _run_paths(self) -> list[Path]:
        """The sorted runs newer than ``index.cdxj``, oldest first."""
        try:
            names = sorted(e.name for e in os.scandir(self.directory) if RUN_RE.match(e.name))
        except FileNotFoundError:
            return []
        return [self.directory / name for name in names]

    def _remove_stale_temps(self) -> None:
        """Leftovers of a compaction killed mid-way (we hold the compaction lock): what a new
        index.cdxj superseded, temp files, sort directories, and the notes of runs that are
        gone."""
        names = set(os.listdir(self.directory))
        if _SUPERSEDED_NAME in names:
            gone = self._superseded()
            self._drop([self.directory / name for name in gone if name in names])
            self._forget_superseded()
            names = set(os.listdir(self.directory))
        for name in names:
            path = os.path.join(self.directory, name)
            if name.startswith(".") and name.endswith(".tmp"):
                if name.startswith((f".{INDEX_NAME}.", ".run-")):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            elif name.startswith(".cdxj-sort-") and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif name.startswith(".run-") and name.endswith((".keys", ".checked")):
                run = name[1:].rsplit(".", 1)[0]
                if run not in names:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)

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

    def _journal(self, path: Path) -> tuple[_JournalRead | None, list[CDXJRecord] | None]:
        """A journal as read (None: there is none, or it cannot be read), re-read only when
        its identity or size changed, and then only from where it was read to when it only
        grew; and the records that added (None: it was read whole).  Every capture appends to
        the journal, and reading it all again on the next lookup cost milliseconds (a quarter
        of a megabyte of lines between compactions)."""
        key = os.fspath(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None, None
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._journal_cache.get(key)
        if cached is not None and cached.ident == ident:
            return cached, []
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return None, None
        except OSError as exc:  # unreadable (permissions, a directory): the rest still answers
            self._report(f"{key}: cannot read: {exc.strerror or exc}")
            return None, None
        problems: list[str] = []
        with f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # no half-written append
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if cached is not None and not self._grown(f, cached, ident):
                cached = None
            if cached is None:
                read = _JournalRead(ident, [], headers=_Headers(key))
            else:
                read = dataclasses.replace(cached, ident=ident, records=list(cached.records))
            start = cached.end or 0 if cached is not None else 0
            data = os.pread(f.fileno(), st.st_size - start, start)
        lines = io.BytesIO(data)
        added = [
            rec
            for _, rec in _scan(
                lines,
                key,
                tolerant=True,
                problems=problems,
                journal=True,
                headers=read.headers,
                first_lineno=read.lineno + 1,
            )
        ]
        read.records += added
        read.lineno += data.count(b"\n")
        # read on from here next time, unless a torn last line or a version it cannot read
        # stopped it: then it is read whole again
        if lines.tell() == len(data) and (not data or data.endswith(b"\n")):
            read.end = start + len(data)
            read.probe = (cached.probe if cached is not None else b"") + data
            read.probe = read.probe[-_PROBE:]
        else:
            read.end = None
        for message in problems:
            self._report(message)
        self._journal_cache[key] = read
        return read, added if cached is not None else None

    @staticmethod
    def _grown(f: BinaryIO, cached: _JournalRead, ident: _Ident) -> bool:
        """Is the open journal ``cached``'s file, only longer (read on from its end)?"""
        end = cached.end
        if end is None or ident[:2] != cached.ident[:2] or ident[2] <= end:
            return False
        return os.pread(f.fileno(), len(cached.probe), end - len(cached.probe)) == cached.probe

    def _listing(self, *, again: bool = False) -> _Listing:
        """The files of the index now: whether the active journal exists, the sealed journals,
        and the sorted runs (``index.cdxj`` first, then the newer runs).  The directory is
        listed again only when its mtime changed (or ``again``), since every journal's
        creation, sealing and removal and every new run or index change it (appends do not;
        the active journal is checked itself).  A listing whose mtime is settled
        (``_Listing.token``) also tells ``IndexFile.search`` that the names still name the
        files it has open.
        """
        try:
            st = os.stat(self._directory)
        except FileNotFoundError:
            return _Listing(0, 0, 0, False, [], [self._file], False)
        cached = self._listed
        if (
            not again
            and cached is not None
            and cached.mtime_ns == st.st_mtime_ns
            and cached.ino == st.st_ino
            and cached.dev == st.st_dev
        ):
            return cached
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return _Listing(0, 0, 0, False, [], [self._file], False)
        if _SUPERSEDED_NAME in names:  # (a compaction killed before it removed them)
            gone = self._superseded()
            names = [name for name in names if name not in gone]
        has_journal = JOURNAL_NAME in names
        sealed = [self.directory / name for name in names if _SEALED_RE.match(name)]
        run_names = [name for name in names if RUN_RE.match(name)]
        with self._lock:
            runs: dict[str, IndexFile] = {}
            for name in run_names:
                file = self._runs.get(name)
                if file is None:
                    file = IndexFile(self.directory / name, block_size=self._block_size)
                runs[name] = file
            for name in self._writing:  # (not renamed in yet)
                runs.setdefault(name, self._runs[name])
            self._runs = runs
        files = [self._file, *(self._runs[name] for name in run_names)]
        # kept only for an mtime well in the past: with coarse file timestamps, a change in
        # the same clock tick as this listing could leave the mtime as it is
        settled = _settled(st.st_mtime_ns, time.time_ns())
        listing = _Listing(
            st.st_mtime_ns, st.st_ino, st.st_dev, has_journal, sealed, files, settled
        )
        self._listed = listing if settled else None
        return listing

    def _journal_view(self) -> tuple[list[bytes], list[CDXJRecord], _Listing]:
        """Sorted unique lines of all journals (active first, then sealed), their records, and
        the files of the index (``_listing``).  Lines appended to the active journal since the
        last view are put into it in their places; any other change makes it anew."""
        token = self._listing()  # (the lock is for the caches, not this)
        has_journal, sealed = token.has_journal, token.sealed
        if not has_journal and not sealed:
            return [], [], token
        with self._lock:
            before = self._journal_cache.get(os.fspath(self.journal_path))
            active, added = self._journal(self.journal_path) if has_journal else (None, None)
            parts = [active]
            for path in sealed:  # a sealed journal never changes: read once
                cached = self._journal_cache.get(os.fspath(path))
                parts.append(cached if cached is not None else self._journal(path)[0])
            idents = tuple(part.ident if part is not None else None for part in parts)
            view = self._view
            if view is not None and view[0] == idents:
                return view[1], view[2], token
            if (
                view is not None
                and added is not None
                and before is not None
                and view[0] == (before.ident, *idents[1:])
            ):
                lines, records = _inserted(view[1], view[2], added)
            else:
                live = {os.fspath(p) for p in [self.journal_path, *sealed]}
                for stale in set(self._journal_cache) - live:
                    del self._journal_cache[stale]
                by_line = {
                    rec.sort_key: rec for part in parts if part is not None for rec in part.records
                }
                lines = sorted(by_line)
                records = [by_line[line] for line in lines]
            self._view = (idents, lines, records)
            return lines, records, token

    def _wanted(
        self,
        line: bytes,
        offset: int,
        record: CDXJRecord | None,
        record_types: Collection[str] | None,
    ) -> CDXJRecord | None:
        """The record of a line (parsed here when ``record`` is ``None``: an index line at
        ``offset``) if it is valid and of a wanted type; a malformed line is reported."""
        if record is None:
            try:
                record = _parse_bytes(line)
            except CDXJError as e:
                self._report(str(e.at(f"{self.index_path} (byte {offset})", None)))
                return None
        if record_types is None or record.record_type in record_types:
            return record
        return None

    def _journal_span(self, target: bytes) -> tuple[list[bytes], list[CDXJRecord], _Listing]:
        """The journals' lines that start with ``target``, their records, and the files of the
        index (``_listing``)."""
        jlines, jrecords, token = self._journal_view()
        if not jlines:
            return jlines, jrecords, token
        i = j = bisect.bisect_left(jlines, target)
        while j < len(jlines) and jlines[j].startswith(target):
            j += 1
        return jlines[i:j], jrecords[i:j], token

    def _merged(
        self, target: bytes, jlines: list[bytes], jrecords: list[CDXJRecord], token: _Listing
    ) -> Iterator[tuple[bytes, int, CDXJRecord | None]]:
        """``(line, offset, record)`` of the index's lines that start with ``target`` (offset
        their place, record ``None``) and of the journals' (-1, their record), merged in byte
        order; a line in both counts once."""
        from_index = self._from_index(target, token)
        from_journal = ((jlines[k], -1, jrecords[k]) for k in range(len(jlines)))
        merged = heapq.merge(from_index, from_journal, key=operator.itemgetter(0))
        previous: bytes | None = None
        for item in merged:
            if item[0] != previous:
                previous = item[0]
                yield item

    def _from_index(
        self, target: bytes, token: _Listing
    ) -> Iterator[tuple[bytes, int, CDXJRecord | None]]:
        """``(line, offset, record)`` of the sorted runs' lines that start with ``target``, in
        byte order (a line in two runs, left by a merge killed before it removed what it
        merged, comes twice: callers drop repeats): the record made at once if the run's lines
        were all checked when it was written (``checked``), else ``None`` (for ``_wanted`` to
        parse and check)."""
        files = token.files
        if len(files) == 1:
            checked, found = files[0].search(target, token.token)
            return _with_records(checked, found)
        whole_key = target.endswith(b" ")  # (a prefix has no space)
        key_hash = Bloom.hash(target[:-1]) if whole_key else None
        for _ in range(_RETRIES):
            parts: list[Iterator[tuple[bytes, int, CDXJRecord | None]]] = []
            gone = False
            for file in files:
                searched = file.search_existing(target, token.token, key_hash)
                if searched is NOT_HELD:
                    continue
                if searched is None:  # a run merged into a newer one since the listing
                    gone = gone or file is not self._file
                    continue
                parts.append(_with_records(*searched))
            if not gone:
                break
            token = self._listing(again=True)
            files = token.files
        if whole_key:  # a key's lines, few: lists cost less than merging generators
            lists = [part for part in map(list, parts) if part]
            if len(lists) <= 1:
                return iter(lists[0] if lists else ())
            return heapq.merge(*lists, key=operator.itemgetter(0))
        # a prefix may match the whole index: streamed
        return heapq.merge(*parts, key=operator.itemgetter(0))

    def _deduped(
        self, target: bytes, token: _Listing
    ) -> Iterator[tuple[bytes, int, CDXJRecord | None]]:
        """``_from_index``'s lines, each once."""
        previous: bytes | None = None
        for item in self._from_index(target, token):
            if item[0] != previous:
                previous = item[0]
                yield item

    def _index_records(
        self, target: bytes, record_types: Collection[str] | None, token: _Listing
    ) -> Iterator[CDXJRecord]:
        """Records whose line starts with ``target``, from the sorted runs alone."""
        for line, offset, record in self._deduped(target, token):
            wanted = self._wanted(line, offset, record, record_types)
            if wanted is not None:
                yield wanted

    def _records(self, target: bytes, record_types: Collection[str] | None) -> Iterator[CDXJRecord]:
        """Records whose line starts with ``target``, journal and index merged in byte order
        (streamed: a prefix may match the whole index)."""
        jlines, jrecords, token = self._journal_span(target)
        if not jlines:  # the common case, made short
            return self._index_records(target, record_types, token)
        merged = self._merged(target, jlines, jrecords, token)
        wanted = (self._wanted(*item, record_types) for item in merged)
        return (record for record in wanted if record is not None)

    def _key_target(self, key: str) -> bytes:
        """What the lines of exactly ``key`` start with (``key`` checked)."""
        _check_key(key)  # (so no space nor newline, which _search_bytes checks for prefixes)
        try:
            return key.encode() + b" "
        except UnicodeEncodeError:
            raise CDXJError(f"key is not encodable as UTF-8: {key!r}") from None

    def captures(
        self, key: str, *, record_types: Collection[str] | None = None
    ) -> Iterator[CDXJRecord]:
        """All captures of exactly ``key``, oldest first."""
        return iter(self.exact(key, record_types=record_types))

    def exact(self, key: str, *, record_types: Collection[str] | None = None) -> list[CDXJRecord]:
        """All captures of exactly ``key``, oldest first."""
        target = self._key_target(key)
        jlines, jrecords, token = self._journal_span(target)
        if jlines:
            merged = self._merged(target, jlines, jrecords, token)
            wanted = (self._wanted(*item, record_types) for item in merged)
            return [record for record in wanted if record is not None]
        records: list[CDXJRecord] = []
        previous: bytes | None = None
        if len(token.files) > 1:  # (the loop of _deduped and _wanted, inline)
            for line, offset, record in self._from_index(target, token):
                if line == previous:
                    continue
                previous = line
                if record is None:
                    record = self._wanted(line, offset, None, record_types)
                    if record is None:
                        continue
                elif record_types is not None and record.record_type not in record_types:
                    continue
                records.append(record)
            return records
        # the common case, written out (the loop of _index_records and _wanted, inline)
        checked, found = self._file.search(target, token.token)
        if checked:  # every line was checked when the file was written
            for _, line in found:
                if line != previous:
                    previous = line
                    record = _checked_line(line)
                    if record_types is None or record.record_type in record_types:
                        records.append(record)
            return records
        for offset, line in found:
            if line == previous:
                continue
            previous = line
            try:
                record = _parse_bytes(line)
            except CDXJError:
                self._wanted(line, offset, None, record_types)  # reports it
                continue
            if record_types is None or record.record_type in record_types:
                records.append(record)
        return records

    def newest(self, key: str, *, record_types: Collection[str] | None = None) -> CDXJRecord | None:
        """The latest capture of ``key`` (``None`` if there is none): the lines are read from
        the newest back, and only as far as the first valid one of the wanted types is parsed
        (an older malformed line is reported by the lookups that read it)."""
        target = self._key_target(key)
        jlines, jrecords, token = self._journal_span(target)
        if jlines:
            found = list(self._merged(target, jlines, jrecords, token))
        else:
            found = list(self._from_index(target, token))
        for item in reversed(found):
            record = self._wanted(*item, record_types)
            if record is not None:
                return record
        return None

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
            problems += check(path, index=path == self.index_path or bool(RUN_RE.match(path.name)))
        return problems


def _inserted(
    lines: list[bytes], records: list[CDXJRecord], added: list[CDXJRecord]
) -> tuple[list[bytes], list[CDXJRecord]]:
    """Sorted ``lines`` and their ``records`` with ``added`` put in their places (a line there
    already counts once); new lists, since lookups in other threads may hold the old ones."""
    lines, records = list(lines), list(records)
    for rec in added:
        line = rec.sort_key
        i = bisect.bisect_left(lines, line)
        if i == len(lines) or lines[i] != line:
            lines.insert(i, line)
            records.insert(i, rec)
    return lines, records


def _raw_lines(path: Path, checked: list[bool]) -> Iterator[bytes]:
    """The lines of a sorted file as they are; the ones of a file without a matching note
    (``.checked``) are checked on the way, once, so that the new index may have one."""
    with open(path, "rb", buffering=1 << 20) as f:
        before = os.fstat(f.fileno())
        noted = is_checked(path, before)
        valid = True
        raw = f.readline()
        while raw.startswith(b"!"):  # the header block (its versions were checked already)
            raw = f.readline()
        while raw:
            if raw.startswith(b"!"):  # a header after records: let the strict path say where
                raise _NotSorted("header line after records")
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if not noted:
                try:
                    _parse_bytes(line)
                except CDXJError:
                    noted = True  # (so no more checks: a bad line is kept; lookups say it)
                    valid = False
            yield line
            raw = f.readline()
        after = os.fstat(f.fileno())
    same = (before.st_ino, before.st_size, before.st_mtime_ns, before.st_ctime_ns) == (
        after.st_ino,
        after.st_size,
        after.st_mtime_ns,
        after.st_ctime_ns,
    )
    checked.append(same and valid)


def _with_records(
    checked: bool, found: Iterator[tuple[int, bytes]]
) -> Iterator[tuple[bytes, int, CDXJRecord | None]]:
    """``(line, offset, record)`` of a sorted file's ``(offset, line)``: the record made at
    once if all its lines were checked when it was written, else ``None`` (to check)."""
    if checked:
        return ((line, offset, _checked_line(line)) for offset, line in found)
    return ((line, offset, None) for offset, line in found)


def _all_checked(checked: list[bool], files: int) -> bool:
    """Whether the lines of all ``files`` read were found valid (each says so once read)."""
    return len(checked) == files and all(checked)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _settled(mtime_ns: int, now_ns: int) -> bool:
    """Whether a directory's mtime is old enough that any later change must give it another:
    older than the file system's timestamp granularity. An mtime with a fraction of a second
    comes from a file system that keeps them (the kernel's clock ticks every few milliseconds);
    one on the whole second may come from one that keeps whole seconds (or two, FAT)."""
    age = now_ns - mtime_ns
    if mtime_ns % 1_000_000_000:
        return age > _SETTLED_FINE_NS
    return age > _SETTLED_NS


@dataclass
class _Listing:
    """The index's files as a listing of its directory found them (``Index._listing``)."""

    mtime_ns: int
    ino: int
    dev: int
    has_journal: bool
    sealed: list[Path]
    #: ``index.cdxj``'s then the newer runs', oldest first
    files: list[IndexFile]
    #: the directory's mtime is old enough that any change since would have changed it
    settled: bool

    @property
    def token(self) -> object:
        """What ``IndexFile.search`` takes to know that the names still name its open files:
        this listing while it is settled (the same object while the directory is unchanged)."""
        return self if self.settled else None


class _NotSorted(Exception):
    pass


def _checked_order(lines: Iterator[bytes], source: str) -> Iterator[bytes]:
    previous = b""
    for lineno, line in enumerate(lines, 1):
        if not line or line < previous:
            raise _NotSorted(f"{source}: record {lineno} is empty or sorts before the one above")
        previous = line
        yield line
