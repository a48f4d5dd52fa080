"""SQLite WAL checkpoints off the writer's path (:class:`BackgroundCheckpoint`).

In WAL mode SQLite copies the log back into the database (a checkpoint) inside the commit
that takes the log past 1,000 pages, and that checkpoint waits for two fsyncs.  On a disk busy
with other writes those took up to a second, and the catalog's commit is on a cold miss's
path (the recording helper applies a batch's changes before it answers): every miss in
flight stalled with it.  A writer that turns automatic checkpoints off and tells a
:class:`BackgroundCheckpoint` after each commit has the log copied back by a thread of its
own, with a connection of its own, which writers do not wait for (a PASSIVE checkpoint).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["WAL_CHECKPOINT_BYTES", "BackgroundCheckpoint", "without_auto_checkpoint"]

log = logging.getLogger(__name__)

#: a log past this size is copied back (SQLite's own automatic checkpoint: 1,000 pages)
WAL_CHECKPOINT_BYTES = 4 * 1024 * 1024
_IDLE = 30.0  # seconds without a commit before the checkpoint thread ends
#: after a checkpoint that could not copy the whole log back (a reader still uses it), the
#: thread waits this long before the next: the log cannot start over until that reader is done
_RETRY_AFTER = 1.0


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
    past ``limit`` bytes.  :meth:`committed` is what a writer calls after a commit: a
    ``stat`` of the log, and a wake-up when it is due."""

    def __init__(self, path: str | os.PathLike[str], *, limit: int = WAL_CHECKPOINT_BYTES) -> None:
        self.path = Path(path)
        self._wal = Path(f"{self.path}-wal")
        self.limit = limit
        self._due = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.checkpoints = 0  # made (tests)

    def committed(self) -> None:
        """A writer committed: wake the thread when the log is past the limit."""
        try:
            size = self._wal.stat().st_size
        except OSError:
            return
        if size < self.limit:
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
            if not self.checkpoint():
                time.sleep(_RETRY_AFTER)
