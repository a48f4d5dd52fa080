"""SQLite WAL checkpoints off the writer's path (:class:`BackgroundCheckpoint`).

In WAL mode SQLite copies the log back into the database (a checkpoint) inside the commit
that takes the log past 1,000 pages, and that checkpoint waits for two fsyncs.  On a disk busy
with other writes those took up to a second, and the catalog's commit is on a cold miss's
path (the recording helper applies a batch's changes before it answers): every miss in
flight stalled with it.  A writer that turns automatic checkpoints off and tells a
:class:`BackgroundCheckpoint` after each commit has the log copied back by a thread of its
own, with a connection of its own, which writers do not wait for (a PASSIVE checkpoint).

SQLite starts the log over only at a write after a checkpoint that copied all of it back; a
writer that commits while each checkpoint runs keeps the log growing.  So past
:data:`HOLD_PAST` times the limit, a checkpoint holds the writer's lock (``hold``) while it
runs: it copies everything, the next commit starts the log over, and the file is cut back
(``journal_size_limit``).  Writers then wait once, for one checkpoint, every so many MB.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path

__all__ = [
    "CHECKPOINT_EVERY",
    "HOLD_PAST",
    "WAL_CHECKPOINT_BYTES",
    "BackgroundCheckpoint",
    "without_auto_checkpoint",
]

log = logging.getLogger(__name__)

#: a log past this size is copied back (SQLite's own automatic checkpoint: 1,000 pages)
WAL_CHECKPOINT_BYTES = 4 * 1024 * 1024
_IDLE = 30.0  # seconds without a commit before the checkpoint thread ends
#: seconds at least between two checkpoints: a log the writer keeps adding to while it is
#: copied back (or a reader keeps in use) does not start over, stays past the limit, and
#: would otherwise make every commit another checkpoint (each waits for two fsyncs)
CHECKPOINT_EVERY = 1.0
#: a log past this many times the limit is copied back with the writer held (see above)
HOLD_PAST = 8


def without_auto_checkpoint(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` as a writer whose commits never checkpoint (a BackgroundCheckpoint does).

    Its log file is also cut back when SQLite starts the log over after a checkpoint
    (``journal_size_limit``): otherwise the file keeps its largest size, and the log's size,
    which says when a checkpoint is due, could not be read from it."""
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA journal_size_limit = 0")
    return conn


class BackgroundCheckpoint:
    """Copies the WAL of the database at ``path`` back into it, in a thread, once it has grown
    past ``limit`` bytes, at most once per ``every`` seconds.  :meth:`committed` is what a
    writer calls after a commit: a ``stat`` of the log, and a wake-up when it is due."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limit: int = WAL_CHECKPOINT_BYTES,
        every: float = CHECKPOINT_EVERY,
        hold: AbstractContextManager[object] | None = None,
    ) -> None:
        self.path = Path(path)
        self._wal = Path(f"{self.path}-wal")
        self.limit = limit
        self.every = every
        #: the writer's lock (in this process), held by a checkpoint of a log past HOLD_PAST
        self.hold = hold
        self._due = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.checkpoints = 0  # made (tests)

    def committed(self) -> None:
        """A writer committed: wake the thread when the log is past the limit."""
        if self._log_size() < self.limit:
            return
        self._due.set()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="wwwproxy-checkpoint", daemon=True
                )
                self._thread.start()

    def checkpoint(self) -> bool:
        """Copy the log back now (what the thread does); True if all of it was (False if a
        reader kept some of it, or on an error, which is logged)."""
        try:
            conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        except sqlite3.Error as exc:
            log.warning("%s: no checkpoint: %s", self.path, exc)
            return False
        try:
            busy, logged, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            log.warning("%s: no checkpoint: %s", self.path, exc)
            return False
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self.checkpoints += 1
        return not busy and copied == logged

    def _run(self) -> None:
        while True:
            if not self._due.wait(_IDLE):
                with self._lock:
                    if not self._due.is_set():
                        self._thread = None
                        return
                continue
            self._due.clear()
            if self.hold is not None and self._log_size() >= HOLD_PAST * self.limit:
                with self.hold:
                    self.checkpoint()
            else:
                self.checkpoint()
            time.sleep(self.every)

    def _log_size(self) -> int:
        try:
            return self._wal.stat().st_size
        except OSError:
            return 0
