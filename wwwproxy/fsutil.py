"""File-system helpers shared by every writer of the cache, the config and the URL database.

One way to replace a file atomically (readers see the old file or the new one, never a part,
and a crash leaves no half-written file behind), one way to make a rename durable, and one way
for many writers to make their writes durable together (:class:`GroupSync`, or in the
background: :class:`BackgroundSync`; :func:`durability` makes the one the ``sync`` setting
names); and the one way a coroutine reads a file chunk by chunk (:func:`read_chunks`, with
``aiofiles``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import fcntl
import logging
import os
import tempfile
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable
from concurrent.futures import Executor
from pathlib import Path
from typing import BinaryIO, Protocol

import aiofiles.threadpool

_log = logging.getLogger("wwwproxy.archive")

__all__ = [
    "DEFAULT_SYNC",
    "SYNC_MODES",
    "BackgroundSync",
    "Durability",
    "GroupSync",
    "PendingFlush",
    "atomic_write",
    "dirty_bytes",
    "durability",
    "fsync_dir",
    "fsync_path",
    "lock_if_still_at",
    "read_chunks",
    "use_syncfs",
]


def _find_syncfs() -> Callable[[int], int] | None:
    """Linux's ``syncfs(2)`` (not in the os module), or None where the C library lacks it."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return None
    syncfs.argtypes = [ctypes.c_int]
    syncfs.restype = ctypes.c_int
    return syncfs


_SYNCFS = _find_syncfs()
#: a flush of more paths than this is one syncfs(2) of the whole file system ...
SYNCFS_OVER = 4
#: ... unless the machine has more than this waiting to be written (syncfs would wait for all
#: of it: another program's big copy would hold up the browser's page)
SYNCFS_DIRTY_MAX = 32 << 20


def dirty_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes the kernel has yet to write back (Dirty + Writeback), or None if unknown."""
    total = 0
    try:
        with open(meminfo, "rb") as f:
            for line in f:
                if line.startswith((b"Dirty:", b"Writeback:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return total


def use_syncfs(paths: int, dirty: int | None) -> bool:
    """One syncfs for a flush of ``paths`` files and folders when the machine has little
    else dirty; fsync each when it is few paths, or when syncfs might wait for others' data."""
    return paths > SYNCFS_OVER and dirty is not None and dirty <= SYNCFS_DIRTY_MAX


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in ``directory`` durable (best effort: not every file
    system lets a directory be opened or synced)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, new_mode: int = 0o600) -> None:
    """Replace ``path`` with ``data``: a temporary file beside it, fsync, rename, fsync the
    directory.  An existing file keeps its permission bits; a new one gets ``new_mode`` (the
    user's alone by default: queued requests, monitors and URL lists are a person's browsing,
    and the mode is set explicitly, so no umask narrows it).
    Raises OSError, after removing the temporary file and leaving the original untouched."""
    target = Path(path)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = new_mode
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, target)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    fsync_dir(target.parent)


def lock_if_still_at(fd: int, path: str | os.PathLike[str]) -> bool:
    """Take ``fd``'s exclusive ``flock`` and say whether it is still the file at ``path``
    (another writer may have renamed or removed it between our open and our lock: then the
    caller closes ``fd`` and opens the path again).  The lock is kept either way."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    st = os.fstat(fd)
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file (or a directory) by name: its written data and its entry's metadata."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def read_chunks(
    stream: BinaryIO, size: int, executor: Executor | None = None
) -> AsyncGenerator[bytes, None]:
    """``stream``'s bytes to its end, at most ``size`` at a time, each read in a thread of
    ``executor`` (the loop's default one if None) so the loop never waits on the disk: a cached
    body streamed to the browser reads its WARC file and inflates its gzip member in each read.
    The stream is ``aiofiles``' to read from meanwhile; the caller opened it and closes it."""
    reader = aiofiles.threadpool.wrap(stream, executor=executor)
    while chunk := await reader.read(size):
        yield chunk


class GroupSync:
    """Durability for concurrent writers at the price of one flush (group commit).

    Each writer writes its data (without fsync), then calls :meth:`sync` with what it would
    have fsynced; the call returns once a flush that *began after* those writes, and covers
    them, has finished, so every acknowledged write is on disk.  Writers that finish together
    share one flush: the first becomes the leader and flushes what all the waiting writers
    named, each file and folder once (a folder that got two new files, the index journal that
    eight writers appended to); when that is more than :data:`SYNCFS_OVER` paths, it flushes
    the whole file system of ``root`` with one ``syncfs(2)`` instead (quicker than an fsync
    each for many paths; for one or two files an fsync each is quicker), unless much is dirty
    on the machine (:func:`use_syncfs`: syncfs waits for everything dirty on the file system,
    other programs' writes too)."""

    def __init__(
        self, root: str | os.PathLike[str], *, use_syncfs: bool = True, window: float = 0.0
    ) -> None:
        self.root = os.fspath(root)
        self._syncfs = _SYNCFS if use_syncfs else None
        #: seconds the writer that leads a flush waits before taking the batch, so that the
        #: writers finishing meanwhile share it (``sync: group``); 0: flush at once
        self.window = window
        self._cond = threading.Condition()
        self._pending: set[int | str] = set()  # what the next flush covers
        self._started = 0  # generation of the newest flush begun
        self._done = 0  # generation of the newest flush finished
        self._running = False
        #: flushes made, and how many of them were syncfs (tests and benchmarks)
        self.flushes = 0
        self.syncfs_flushes = 0

    def sync(self, paths: Iterable[int | str | os.PathLike[str]]) -> None:
        """Return when ``paths`` are durable: open file descriptors (of files written; the
        caller keeps them open until this returns, so a file renamed or removed meanwhile is
        still the one flushed) and names (of folders given new entries).  OSError if the
        flush failed (the next flush tries them again)."""
        with self._cond:
            self._pending.update(p if isinstance(p, int) else os.fspath(p) for p in paths)
            needed = self._started + 1  # a flush begun after this writer's writes
            while self._done < needed:
                if self._running:
                    self._cond.wait()
                    continue
                self._running = True
                if self.window:
                    self._cond.wait(self.window)  # nobody notifies: gather for the window
                self._started += 1
                generation = self._started
                batch, self._pending = self._pending, set()
                self._cond.release()
                try:
                    self._flush(batch)
                except BaseException:
                    self._cond.acquire()
                    self._pending |= batch
                    self._running = False
                    self._cond.notify_all()
                    raise
                self._cond.acquire()
                self._running = False
                self._done = generation
                self._cond.notify_all()

    def _flush(self, batch: set[int | str]) -> None:
        whole = (
            self._syncfs is not None
            and len(batch) > SYNCFS_OVER
            and use_syncfs(len(batch), dirty_bytes())
        )
        if whole:
            sync_file_system(self.root)
            self.syncfs_flushes += 1
        else:
            for item in batch:
                if isinstance(item, int):
                    os.fsync(item)
                else:
                    fsync_path(item)
        self.flushes += 1


def sync_file_system(root: str) -> None:
    """Flush everything written to the file system that holds ``root``: one ``syncfs(2)``
    (``sync(2)`` of every file system where the C library lacks it)."""
    if _SYNCFS is None:
        os.sync()
        return
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _SYNCFS(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"syncfs of {root}: {os.strerror(errno)}")
    finally:
        os.close(fd)


class PendingFlush:
    """What one change must flush to be durable, gathered while it writes, so that its records
    and its index line are flushed in one round: files by a descriptor of their own (a
    duplicate: the writer closes its own, and a journal renamed meanwhile is still the one
    flushed) and new folders by name.  A context manager: the duplicates are closed on exit."""

    def __init__(self) -> None:
        self.items: list[int | str] = []
        self._fds: list[int] = []

    def file(self, fd: int) -> None:
        dup = os.dup(fd)
        self._fds.append(dup)
        self.items.append(dup)

    def folder(self, path: str | os.PathLike[str]) -> None:
        self.items.append(os.fspath(path))

    def __enter__(self) -> PendingFlush:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        self.items.clear()


class Durability(Protocol):
    """How a change becomes durable (the ``sync`` setting): :meth:`sync` is called once the
    change is written, with what it wrote, and returns when the setting's promise is kept."""

    def sync(self, paths: Iterable[int | str | os.PathLike[str]]) -> None: ...


class BackgroundSync:
    """``sync: write``: a change is acknowledged once written (it survives the process being
    killed: the kernel has it), and a thread flushes what was written at most ``interval``
    seconds after the first change it has not flushed yet: a power cut loses at most about
    that much.  A round flushes the files and folders the changes named (by path: each file
    the change wrote, each folder given a new file) and the ``always`` files (a database log
    that must not fall behind them), an fsync each, or one ``syncfs`` for all when that is
    quicker (:func:`use_syncfs`: many paths and little else dirty on the machine; also when a
    change named none, or more than :data:`BACKGROUND_PATHS_MAX`).  Not ``syncfs`` every
    round: that waits for every other program's writes to the file system, and the cache's
    writers (a new file, a database commit) waited for it, up to a second on a busy disk.
    A flush that fails is logged and tried again on the next round (a cache folder that is
    gone has nothing left to flush); the last round runs at exit.  The thread ends after
    ``idle`` seconds without a change (the next one starts another)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        interval: float = 1.0,
        idle: float = 30.0,
        always: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        self.root = os.fspath(root)
        self.interval = interval
        self.idle = idle
        self.always = [os.fspath(p) for p in always]
        self._dirty = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: the paths the next round flushes, and whether it flushes the whole file system
        self._paths: set[str] = set()
        self._whole = False
        #: flushes made, and how many of them were syncfs (tests and benchmarks)
        self.flushes = 0
        self.syncfs_flushes = 0
        #: the error of the newest flush that failed, None once one succeeded since
        self.failed: OSError | None = None

    @property
    def running(self) -> bool:
        """Is the flushing thread there (tests)?"""
        return self._thread is not None

    def sync(self, paths: Iterable[int | str | os.PathLike[str]]) -> None:
        """Note what a change wrote (open descriptors of its files, names of its new folders)
        for the next round, and return at once."""
        named = [_path_of(p) for p in paths]
        with self._lock:  # the thread ends under it only when nothing is dirty
            if not named or None in named or len(self._paths) >= BACKGROUND_PATHS_MAX:
                self._whole = True
            if not self._whole:
                self._paths.update(p for p in named if p)
            self._dirty.set()
            if self._thread is None:
                _flushed_at_exit.add(self)
                self._thread = threading.Thread(
                    target=self._run, name="wwwproxy-flush", daemon=True
                )
                self._thread.start()

    def flush(self) -> None:
        """Flush now what was written (a clean exit, a test)."""
        with self._lock:
            if not self._dirty.is_set():
                return
            self._dirty.clear()
            paths, whole = self._paths, self._whole
            self._paths, self._whole = set(), False
        try:
            self._flush(paths, whole)
        except FileNotFoundError:
            return  # the cache was removed: nothing of it is left to flush
        except OSError as exc:
            with self._lock:
                self._paths |= paths
                self._whole = self._whole or whole
                self._dirty.set()
            if self.failed is None:
                _log.error(
                    "cannot flush the cache to disk: %s (tried again in %g s)", exc, self.interval
                )
            self.failed = exc
            return
        self.failed = None
        self.flushes += 1

    def _flush(self, paths: set[str], whole: bool) -> None:
        todo = paths | set(self.always)
        if whole or use_syncfs(len(todo), dirty_bytes()):
            sync_file_system(self.root)
            self.syncfs_flushes += 1
            return
        # the files before the folders that name them
        for path in sorted(todo, key=lambda p: os.path.isdir(p)):
            try:
                fsync_path(path)
            except FileNotFoundError:  # removed since (a purge, a compaction's rename)
                continue

    def _run(self) -> None:
        while True:
            if not self._dirty.wait(self.idle):
                with self._lock:
                    if not self._dirty.is_set():
                        self._thread = None
                        return
                continue
            time.sleep(self.interval)
            self.flush()


#: paths a background round fsyncs one by one at most; past it, one syncfs
BACKGROUND_PATHS_MAX = 4096


def _path_of(item: int | str | os.PathLike[str]) -> str | None:
    """The path of a file named by an open descriptor (Linux's /proc), or of a path; "" for
    a file removed since (nothing to flush); None when the descriptor's path cannot be told
    (the round then flushes the file system)."""
    if not isinstance(item, int):
        return os.fspath(item)
    try:
        path = os.readlink(f"/proc/self/fd/{item}")
    except OSError:
        return None
    if path.endswith(" (deleted)"):
        return ""
    return path if path.startswith("/") else None


#: the background flushers that have flushed or will: the last round of each runs at exit
_flushed_at_exit: weakref.WeakSet[BackgroundSync] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for flusher in list(_flushed_at_exit):
        flusher.flush()


#: the ``sync`` setting's values, from the fastest to the safest, and its default
SYNC_MODES = ("write", "group", "flush")
DEFAULT_SYNC = "write"
#: seconds ``sync: group`` gathers writers into one flush
GROUP_WINDOW = 0.005


def durability(
    mode: str, root: str | os.PathLike[str], always: Iterable[str | os.PathLike[str]] = ()
) -> Durability:
    """The :class:`Durability` of ``sync: MODE`` for the cache at ``root`` (``always``: files
    a background round flushes whatever the changes named)."""
    if mode == "write":
        return BackgroundSync(root, always=always)
    if mode == "group":
        return GroupSync(root, window=GROUP_WINDOW)
    if mode == "flush":
        return GroupSync(root)
    raise ValueError(f"sync: expected one of {', '.join(SYNC_MODES)}, got {mode!r}")
