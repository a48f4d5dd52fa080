"""Appending built records to a key's WARC file: one gzip member each, locked, durable.

Each record (serialised by :mod:`.build` as warcio's ``WARCWriter`` would) goes into a gzip
member compressed here fast (ISA-L's deflate, see :data:`COMPRESS_LEVEL`), not at warcio's level
9: on text, level 9 is many times slower than level 6 for nearly the same size. The
members of one exchange are written with one
``write`` when they are small. An exclusive ``flock`` serialises appends; a torn tail left by a
crash is cut off (or, if it is not gzip at all, quarantined) before writing, and a failed append
is cut back.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import types
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, cast

from ...fsutil import Durability, PendingFlush, fsync_dir, lock_if_still_at
from .build import PendingRecord
from .read import _scan
from .record import _RAW_CHUNK, RecordLocation, WARCFormatError, WARCWriteError

_deflate_lib: types.ModuleType
try:  # ISA-L's deflate (a dependency; zlib where the package has no wheel for the platform)
    from isal import isal_zlib

    _deflate_lib = isal_zlib
except ImportError:  # pragma: no cover
    _deflate_lib = zlib

__all__ = ["COMPRESS_LEVEL", "FileEnd", "append_exchange", "repair_file"]

log = logging.getLogger(__package__)  # the logger of the whole WARC layer

#: gzip level of a record's member: 3, not zlib's default 6, for a good part of the recording
#: process's CPU against a few more bytes; level 1 saves little more CPU for many more bytes
COMPRESS_LEVEL = 3
#: ... and a member that is deflated at all is deflated by ISA-L at its level 2 where it is
#: installed: a fraction of zlib's CPU at level 3 for a few per cent more bytes (its level 1
#: costs as much for more bytes, its level 3 more CPU).  Level 0 (a payload compressed
#: already) stays zlib's stored blocks: ISA-L's level 0 still deflates.
_ISAL_LEVEL = 2
_HELD = 256 * 1024  # compressed bytes held before they are written out

#: where a caller knows a cache file's last complete member ends: (st_dev, st_ino, offset)
FileEnd = tuple[int, int, int]


def _deflater(level: int) -> zlib._Compress:
    """A compressor of one gzip member at zlib ``level``: stored blocks for 0, else ISA-L's
    (:data:`_ISAL_LEVEL`) when installed, else zlib's at ``level``."""
    lib: types.ModuleType = zlib
    if level and _deflate_lib is not zlib:
        level, lib = _ISAL_LEVEL, _deflate_lib
    return cast("zlib._Compress", lib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS + 16))


class _Members:
    """Compresses records into gzip members for an unbuffered file: small ones are held and
    written together (one ``write`` for a small exchange), large ones as they come.  Nothing
    held is written after a failure, so nothing can land past the point the append is cut
    back to."""

    def __init__(self, fh: BinaryIO, level: int):
        self._fh = fh
        self._level = level
        self._held: list[bytes] = []
        self._held_size = 0

    def member(self, record: PendingRecord) -> int:
        """Compress ``record`` into one gzip member; its length."""
        comp = _deflater(self._level)
        written = 0
        for chunk in record.chunks(_RAW_CHUNK):
            written += self._emit(comp.compress(chunk))
        return written + self._emit(comp.flush())

    def _emit(self, data: bytes) -> int:
        if data:
            self._held.append(data)
            self._held_size += len(data)
            if self._held_size >= _HELD:
                self.write_out()
        return len(data)

    def write_out(self) -> None:
        """Write what is held."""
        data = b"".join(self._held)
        self._held.clear()
        self._held_size = 0
        view = memoryview(data)
        while view:  # the file is unbuffered: a short write is possible
            n = self._fh.write(view)
            if not n:
                raise OSError(errno.EIO, "write returned 0")
            view = view[n:]


def _make_dirs(directory: Path, pending: PendingFlush | None = None) -> None:
    """Create missing directories and make each new entry durable (or, with ``pending``,
    name the folders that must be flushed for it)."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        if pending is None:
            fsync_dir(d.parent)
        else:
            pending.folder(d.parent)


def _quarantine(path: Path, fh: BinaryIO, offset: int) -> Path:
    """Copy the damaged tail from ``offset`` to a side file, so repair never destroys data."""
    n = 0
    while True:
        side = path.with_name(f"{path.name}.corrupt-{offset}" + (f".{n}" if n else ""))
        try:
            fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            n += 1
    with os.fdopen(fd, "wb") as out:
        fh.seek(offset)
        while chunk := fh.read(_RAW_CHUNK):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return side


def repair_file(path: str | os.PathLike[str]) -> int | None:
    """Cut a torn tail (a record being written when the process was killed) off a cache file,
    as the next append would (bytes that are not gzip go to a ``.corrupt-<offset>`` side file
    first), under the file's lock; a file left empty is removed.  Returns where the file now
    ends if it was cut, else None.  ``index rebuild`` runs it on every file, so that ``index
    check`` is clean afterwards and no other archive tool meets a truncated record."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "r+b", buffering=0) as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            size = os.fstat(fh.fileno()).st_size
            end = _repair_tail(path, fh)
            if end == size:
                return None
            if end == 0:
                _remove_empty(path, fh)
            return end
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _framed_end(path: Path, fh: BinaryIO, start: int) -> tuple[int, WARCFormatError | None]:
    """Where the complete members from ``start`` end, and the torn or corrupt one after them."""
    end = start
    for item in _scan(fh, path, parse=False, start=start):
        if isinstance(item, WARCFormatError):
            return end, item
        end = item.offset + item.length
    return end, None


def _repair_tail(path: Path, fh: BinaryIO, known_end: FileEnd | None = None) -> int:
    """Cut whatever follows the last complete gzip member; return the new end of file.

    A torn member (the file ends inside it: the record being written when a crash came) is
    discarded. Bytes that are not gzip at all are copied to ``<name>.corrupt-<offset>`` first,
    since they did not come from an interrupted append. Complete members whose record is invalid
    are left in place: framing is intact, readers skip them, and appending after them is safe.

    With ``known_end`` (this file, by device and inode, has complete members up to its offset:
    the end of its newest indexed record, read and checked by the caller) only what follows it
    is framed, not every member from the start: a page fetched again and again would cost more
    with each capture.  Anything amiss after it is judged from the start of the file again, so
    a wrong guess can cost time, never bytes.
    """
    st = os.fstat(fh.fileno())
    problem: WARCFormatError | None
    if known_end is not None and known_end[:2] == (st.st_dev, st.st_ino):
        if st.st_size == known_end[2]:
            return st.st_size
        if st.st_size > known_end[2]:
            end, problem = _framed_end(path, fh, known_end[2])
            if problem is None:
                return end
    end, problem = _framed_end(path, fh, 0)
    if problem is None:
        return end
    if problem.torn:
        log.warning("%s; discarding the torn tail from offset %d", problem, problem.offset)
    else:
        side = _quarantine(path, fh, problem.offset)
        log.warning("%s; moved the bytes from offset %d to %s", problem, problem.offset, side)
    fh.truncate(problem.offset)
    os.fsync(fh.fileno())
    return problem.offset


def append_exchange(
    path: str | os.PathLike[str],
    records: Sequence[PendingRecord],
    *,
    compress_level: int = COMPRESS_LEVEL,
    sync: Durability | None = None,
    known_end: FileEnd | None = None,
    pending: PendingFlush | None = None,
) -> list[RecordLocation]:
    """Append ``records`` (one gzip member each) to the key's file; return offsets and lengths.

    Holds an exclusive ``flock`` for the whole append, so appends from threads or processes
    never interleave and never mistake another writer's record in progress for a torn tail.
    Before writing, a torn tail left by a crash is cut off (see :func:`_repair_tail`, which
    ``known_end`` spares framing the members before it) so new records stay readable. Data
    is durable before returning: fsynced, or with ``sync``, flushed
    together with the writes of other threads (:class:`~wwwproxy.fsutil.GroupSync`), after the
    lock is released. If writing or flushing fails, the file is cut back to where it was (when
    nothing was appended after) and :class:`WARCWriteError` (or the OSError) is raised.
    With ``pending`` the records are only written, and what must be flushed for them is added
    to it: the caller flushes them together with what it writes next (their index line).
    """
    path = Path(path)
    _make_dirs(path.parent, pending)
    fd, created = _open_locked(path)
    with os.fdopen(fd, "r+b", buffering=0) as fh:
        try:
            start = _repair_tail(path, fh, known_end)
            fh.seek(start)
            members = _Members(fh, compress_level)
            locations: list[RecordLocation] = []
            pos = start
            try:
                for rec in records:
                    length = members.member(rec)
                    locations.append(RecordLocation(pos, length))
                    pos += length
                members.write_out()
                if fh.tell() != pos:
                    raise WARCWriteError(f"file position {fh.tell()} != expected {pos}")
                if pending is not None:
                    pending.file(fh.fileno())
                    if created:
                        pending.folder(path.parent)
                elif sync is None:
                    os.fsync(fh.fileno())
            except BaseException:
                _undo(fh, start, path)
                if start == 0:
                    _remove_empty(path, fh)  # no 0-byte file left behind (a full disk)
                raise
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        if sync is not None and pending is None:
            try:
                sync.sync([fh.fileno(), path.parent] if created else [fh.fileno()])
            except OSError:
                _undo_if_last(fh, start, pos, path)
                raise
    if created and sync is None and pending is None:
        fsync_dir(path.parent)
    return locations


def _open_locked(path: Path) -> tuple[int, bool]:
    """An fd on ``path`` (made if missing) holding its exclusive lock, and whether this call
    made it; retried if the file was removed (a failed first append) between open and lock."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            created = True
        except FileExistsError:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            created = False
        try:
            if lock_if_still_at(fd, path):
                return fd, created
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _remove_empty(path: Path, fh: BinaryIO) -> None:
    """Remove the file an append failed to start (under its lock: a writer waiting for it
    sees it gone and makes it anew)."""
    try:
        if os.fstat(fh.fileno()).st_size == 0:
            os.unlink(path)
    except OSError as exc:
        log.warning("%s: could not remove the empty file: %s", path, exc)


def _undo_if_last(fh: BinaryIO, start: int, end: int, path: Path) -> None:
    """A flush failed after the lock was released: cut our records back off, unless another
    writer has appended after them meanwhile (then they stay, complete and unindexed)."""
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    try:
        if os.fstat(fh.fileno()).st_size == end:
            _undo(fh, start, path)
            if start == 0:
                _remove_empty(path, fh)
    finally:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _undo(fh: BinaryIO, start: int, path: Path) -> None:
    try:
        fh.truncate(start)
        os.fsync(fh.fileno())
    except OSError as exc:  # the next append repairs the torn tail
        log.error("%s: could not cut back failed append to %d: %s", path, start, exc)
