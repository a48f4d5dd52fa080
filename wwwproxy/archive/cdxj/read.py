"""Reading CDXJ files: the header block, records in file order, journals, checks, and searching
a sorted file through a sparse index of its keys.

Strict readers raise ``CDXJError`` naming ``file:line`` at the first problem; tolerant ones
(journals above all, whose last line may be torn by a killed writer) skip bad lines and describe
them instead.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import os
import queue
import sys
import threading
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from .checked import is_checked
from .line import SUPPORTED_MAJOR, CDXJError, CDXJRecord, CDXJVersionError, parse_header
from .runs import SAMPLE_MAX, Samples, read_keys, sample_key, write_keys

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "IndexFile",
    "check",
    "file_version",
    "iter_records",
    "read_journal",
]

StrPath = str | os.PathLike[str]
log = logging.getLogger(__package__)


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
    first_lineno: int = 1,
) -> Iterator[tuple[int, CDXJRecord]]:
    """(lineno, record) for each record line; the state machine behind all readers (a reader
    that goes on where it stopped passes its ``headers`` and the number of the next line)."""
    headers = headers or _Headers(source)
    for lineno, raw in enumerate(f, first_lineno):
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
# Searching a sorted file: a sparse index of sampled keys, then one read
#
# The sorted index is never read whole. On first use, and again whenever the file changes (its
# device, inode, size, mtime or ctime), the line starting first after every ``block_size`` bytes is
# sampled: the start of the line (its key and the space after it, at most ``SAMPLE_MAX``
# bytes) and its offset, about 90 bytes of memory per 8 KiB block (3.2 MB for the million lines,
# 300 MB, of bench/index_bench.py; sampled in about 0.2 s). A search bisects the samples in
# memory and reads the one block that can hold the first match with one ``pread``, instead of a
# dozen seeks and reads of a binary search on disk.

DEFAULT_BLOCK_SIZE = 8192
_READ = 65536
_FANOUT = 64  # keys per entry of the sparse index's top level
#: a file this large sampled on opening (one made by an older version, or by another tool)
#: gets its samples kept beside it, so that the next opening reads those instead
_KEEP_SAMPLES_OVER = 16 << 20
_CLOSE_APART_OVER = 16 << 20  # a file this large is closed by _Closer
_Ident = tuple[int, int, int, int, int]


def _ident(st: os.stat_result) -> _Ident:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _line_at(fd: int, pos: int) -> bytes:
    """The line starting at ``pos``, with its newline if it has one."""
    parts = []
    while True:
        chunk = os.pread(fd, 4096, pos)
        newline = chunk.find(b"\n")
        if newline >= 0:
            parts.append(chunk[: newline + 1])
            break
        if not chunk:
            break
        parts.append(chunk)
        pos += len(chunk)
    return b"".join(parts)


def _data_start(fd: int, source: str) -> int:
    """Where the records start: after the ``!`` header lines, whose versions are checked."""
    headers = _Headers(source)
    start = lineno = 0
    while True:
        line = _line_at(fd, start)
        if not line.startswith(b"!"):
            return start
        lineno += 1
        headers.feed(line.rstrip(b"\n"), lineno)
        start += len(line)


class _Closer:
    """Closes descriptors in a thread of its own: closing the last descriptor of a file that
    was replaced or removed frees its cached pages, about 45 ms for every 400 MB, and that must
    not fall on the lookup that happened to let go of the file last."""

    def __init__(self) -> None:
        self._fds: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # (reentrant: a collection while it is held may let go of another file in this thread)
        self._lock = threading.RLock()

    def close(self, fd: int) -> None:
        self._fds.put(fd)
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="cdxj-closer", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while True:
            fd = self._fds.get()
            with contextlib.suppress(OSError):
                os.close(fd)


_closer = _Closer()


class _Snapshot:
    """One version of a sorted file: an open descriptor, where records start, the samples."""

    __slots__ = (
        "bloom", "checked", "ctime_ns", "directory", "fd", "from_keys", "ident", "keys",
        "line_total", "mtime_ns", "offsets", "size", "start", "top",
    )  # fmt: skip

    def __init__(
        self, fd: int, source: str, block_size: int, samples: Samples | None = None
    ) -> None:
        self.fd = fd  # owned from here (closed by __del__); only pread() is used on it
        st = os.fstat(fd)
        self.ident = _ident(st)
        self.size = self.ident[2]
        self.mtime_ns = self.ident[3]
        self.ctime_ns = st.st_ctime_ns
        # every line was checked when the file was written (its lines are taken as they are)
        self.checked = is_checked(source, st)
        self.directory: object = None  # the directory's token when the path last named it
        kept = samples  # given by its writer, or kept beside it by its writer
        if kept is None or kept.block_size != block_size:
            kept = read_keys(source, st, block_size)
        if kept is not None:
            self.start, self.keys, self.offsets = kept.start, kept.keys, kept.offsets
        else:
            if self.size >= _KEEP_SAMPLES_OVER:
                log.info("%s: making its sparse index (once: %d MB)", source, self.size >> 20)
            self.start, self.keys, self.offsets = self._sampled(fd, source, block_size)
            if self.size >= _KEEP_SAMPLES_OVER and self.keys:  # kept for the next opening
                try:
                    write_keys(source, st, Samples(block_size, self.start, self.keys, self.offsets))
                except OSError as exc:
                    log.warning("%s: cannot keep its sparse index: %s", source, exc)
        self.from_keys = kept is not None
        self.bloom = kept.bloom if kept is not None else None
        self.line_total = kept.lines if kept is not None else None
        self.top = self.keys[::_FANOUT]

    def _sampled(
        self, fd: int, source: str, block_size: int
    ) -> tuple[int, list[bytes], array[int]]:
        """Where the records start, and the samples read from the file (one ``pread`` every
        ``block_size`` bytes): ``keys[n]`` is a prefix of the line at ``offsets[n]``."""
        start = _data_start(fd, source)
        keys: list[bytes] = []
        offsets = array("q")
        pos = start
        while pos < self.size:
            keys.append(sample_key(os.pread(fd, SAMPLE_MAX + 1, pos)))
            offsets.append(pos)
            pos = self._line_start(pos + block_size)
        return start, keys, offsets

    def __del__(
        self,
        _close: Callable[[int], None] = os.close,
        _finalizing: Callable[[], bool] = sys.is_finalizing,
    ) -> None:
        # (bound early: this may run at interpreter exit, when no thread may start)
        if self.size >= _CLOSE_APART_OVER and not _finalizing():
            _closer.close(self.fd)
        else:
            _close(self.fd)

    def _line_start(self, at: int) -> int:
        """The first line start at or after ``at`` (the file size if there is none)."""
        at -= 1  # a line starts at `at` if the byte before it ends a line
        while at < self.size:
            chunk = os.pread(self.fd, 4096, at)
            if not chunk:
                break
            newline = chunk.find(b"\n")
            if newline >= 0:
                return at + newline + 1
            at += len(chunk)
        return self.size

    def lines(self, target: bytes) -> Iterator[tuple[int, bytes]]:
        """``(offset, line)`` for each line starting with ``target``, in file order."""
        keys = self.keys
        if not keys:
            return iter(())
        # a line is >= its sample, so the line of the first sample >= target is >= target too;
        # a line is < target if its sample is and is no prefix of target (one cut short may be)
        # in two steps: the top level (every _FANOUT-th key) stays in the CPU's cache, and only
        # a few keys of the whole list are touched
        j = bisect.bisect_left(self.top, target)  # so keys[(j - 1) * F] < target <= keys[j * F]
        i = bisect.bisect_left(
            keys, target, (j - 1) * _FANOUT + 1 if j else 0, min(j * _FANOUT, len(keys))
        )
        hi = self.offsets[i] if i < len(keys) else self.size
        while i > 0 and target.startswith(keys[i - 1]):
            i -= 1
        lo = self.offsets[i - 1] if i > 0 else self.start
        # so the first line >= target, the first match if there is one, starts in [lo, hi]
        found = self._first(lo, hi, target)
        if found is None:
            return iter(())
        base, buf, at = found  # buf holds the file from offset base; a match starts at buf[at]
        # those in buf, mostly all there are: a list costs less than a generator
        matches: list[tuple[int, bytes]] = []
        while True:
            end = buf.find(b"\n", at)
            last = end < 0
            if last:
                if base + len(buf) < self.size:  # the line goes on: read on
                    return itertools.chain(matches, self._read_on(target, base + at))
                end = len(buf)  # the file's last line, without a newline
                if at == end:
                    break
            if not buf.startswith(target, at, end):
                break
            matches.append((base + at, buf[at:end]))
            if last:
                break
            at = end + 1
        return iter(matches)

    def _read_on(self, target: bytes, base: int) -> Iterator[tuple[int, bytes]]:
        """The lines from offset ``base`` (a line start) on, while they start with ``target``."""
        buf = b""
        at = 0
        while True:
            end = buf.find(b"\n", at)
            last = end < 0
            if last:
                more = os.pread(self.fd, _READ, base + len(buf))
                if more:  # nothing at the end of the file (or if it was cut short meanwhile)
                    buf = buf[at:] + more
                    base += at
                    at = 0
                    continue
                end = len(buf)
                if at == end:
                    return
            if not buf.startswith(target, at, end):
                return
            yield base + at, buf[at:end]
            if last:
                return
            at = end + 1

    def _first(self, lo: int, hi: int, target: bytes) -> tuple[int, bytes, int] | None:
        """The first line starting in ``[lo, hi]`` (``lo`` is a line start) that starts with
        ``target``: as (offset of the buffer, the buffer, its index there); read in windows."""
        extra = len(target) + 1024  # enough to hold the match's line mostly
        buf = os.pread(self.fd, min(hi - lo, _READ) + extra, lo)
        if buf.startswith(target):
            return lo, buf, 0
        needle = b"\n" + target
        base = lo
        while True:
            at = buf.find(needle, 0, hi - base + len(target))  # its line starts by hi
            if at >= 0:
                return base, buf, at + 1
            end = base + len(buf)
            if end >= hi + len(target) or end >= self.size or not buf:
                return None
            more = os.pread(self.fd, min(hi - end, _READ) + extra, end)
            if not more:  # the file was cut short meanwhile
                return None
            keep = min(len(needle) - 1, len(buf))  # a needle may straddle the windows
            buf = buf[len(buf) - keep :] + more
            base = end - keep


#: what ``IndexFile.search_existing`` returns for a key its file does not hold
NOT_HELD: tuple[bool, Iterator[tuple[int, bytes]]] = (True, iter(()))


class IndexFile:
    """A sorted CDXJ file, searched through a sparse index of its keys (see above).

    The file stays open between searches; each search checks that the path still names the
    same unchanged file (or, given the token of a directory known not to have changed, that
    the open file did not change: ``_current``), and otherwise opens and samples it afresh, so
    it sees a new index at once. A search under way keeps reading the version it began on
    (its descriptor stays valid when ``compact()`` renames a new index over it). Thread-safe.
    """

    def __init__(self, path: StrPath, *, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be positive, not {block_size}")
        self.path = Path(path)
        self._path = os.fspath(path)  # (a str: os.stat takes it a little faster)
        self.block_size = block_size
        self._snapshot: _Snapshot | None = None
        self._lock = threading.Lock()

    def _current(self, directory: object = None) -> _Snapshot | None:
        """The snapshot of the file the path names now. ``directory``: a token that is the
        same object only while the file's directory has not changed (``Index._listing``);
        while it is, the path still names the open file, whose ``fstat`` then tells whether it
        changed in place (cheaper than a ``stat`` of the path)."""
        snapshot = self._snapshot
        if directory is not None and snapshot is not None and snapshot.directory is directory:
            st = os.fstat(snapshot.fd)
            if (
                snapshot.mtime_ns == st.st_mtime_ns
                and snapshot.ctime_ns == st.st_ctime_ns
                and snapshot.size == st.st_size
            ):
                return snapshot
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return None
        if (
            snapshot is not None
            and snapshot.mtime_ns == st.st_mtime_ns
            and snapshot.ctime_ns == st.st_ctime_ns
            and snapshot.size == st.st_size
            and snapshot.ident[1] == st.st_ino
            and snapshot.ident[0] == st.st_dev
        ):
            if (
                not snapshot.checked
                and directory is not None
                and snapshot.directory is not directory
            ):
                # a writer notes a checked file just after renaming it in, and a search may
                # come between: looked for again once the directory changed (as the note does)
                snapshot.checked = is_checked(self._path, st)
            snapshot.directory = directory  # (seen before this stat: the path named it then)
            return snapshot
        ident = _ident(st)
        with self._lock:  # one sampling at a time; the others wait and use it
            snapshot = self._snapshot
            if snapshot is not None and snapshot.ident == ident:
                snapshot.directory = directory
                return snapshot
            try:
                fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
            snapshot = _Snapshot(fd, os.fspath(self.path), self.block_size)
            # (no token if the path was replaced between the stat and the open)
            snapshot.directory = directory if snapshot.ident == ident else None
            self._snapshot = snapshot  # the one before is closed once no search uses it
            return snapshot

    def lines(self, prefix: bytes) -> Iterator[tuple[int, bytes]]:
        """``(offset, line)`` for each line starting with ``prefix``, in file order."""
        snapshot = self._current()
        return iter(()) if snapshot is None else snapshot.lines(prefix)

    def search(
        self, prefix: bytes, directory: object = None
    ) -> tuple[bool, Iterator[tuple[int, bytes]]]:
        """``lines(prefix)``, and whether every line of the file was checked when it was
        written (``checked``: its lines may be taken as they are); ``directory`` as for
        ``_current``."""
        snapshot = self._current(directory)
        if snapshot is None:
            return True, iter(())
        return snapshot.checked, snapshot.lines(prefix)

    def install(self, rename: Callable[[], None], fd: int, samples: Samples) -> None:
        """Rename a new file in at the path (``rename``) and take it at once with ``samples``
        as its sparse index (``fd`` is open on it): no search after the rename samples the
        file or reads its kept samples (a large file's take a while)."""
        with self._lock:  # a search that sees the new file waits, then takes this snapshot
            rename()
            self._snapshot = _Snapshot(os.dup(fd), self._path, self.block_size, samples)

    def search_existing(
        self, prefix: bytes, directory: object = None, key_hash: int | None = None
    ) -> tuple[bool, Iterator[tuple[int, bytes]]] | None:
        """``search``, or ``None`` if there is no file at the path (any longer). With
        ``key_hash`` (``Bloom.hash`` of the key: ``prefix`` is a whole key and its space) the
        file is read only if its Bloom filter (a run's) says it may hold the key; while the
        directory is as ``directory`` says, the filter of the file last seen is asked first
        (a run is never changed in place: only renamed in and removed)."""
        if key_hash is not None:
            last = self._snapshot
            if (
                directory is not None
                and last is not None
                and last.directory is directory
                and last.bloom is not None
                and not last.bloom.may_hold(key_hash)
            ):
                return NOT_HELD
        snapshot = self._current(directory)
        if snapshot is None:
            return None
        bloom = snapshot.bloom
        if key_hash is not None and bloom is not None and not bloom.may_hold(key_hash):
            return NOT_HELD
        return snapshot.checked, snapshot.lines(prefix)

    def line_count(self) -> int | None:
        """The lines of the file as it is now if its writer counted them (else ``None``)."""
        snapshot = self._current()
        return None if snapshot is None else snapshot.line_total

    def from_keys(self) -> bool:
        """Whether the sparse index of the file as it is now came from the summary its writer
        kept beside it (``runs.write_keys``), not from reading the file."""
        snapshot = self._current()
        return snapshot is not None and snapshot.from_keys

    def sample_count(self) -> int:
        """Keys in the sparse index of the file as it is now (each costs about 90 bytes)."""
        snapshot = self._current()
        return 0 if snapshot is None else len(snapshot.keys)

    def sample_bytes(self) -> int:
        """Memory the sparse index of the file as it is now takes (to report, not to limit)."""
        snapshot = self._current()
        if snapshot is None:
            return 0
        keys = sys.getsizeof(snapshot.keys) + sum(map(sys.getsizeof, snapshot.keys))
        return keys + sys.getsizeof(snapshot.offsets)
