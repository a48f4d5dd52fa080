"""WAL checkpoints in a thread of their own: a writer whose commits never checkpoint keeps its
log bounded through :class:`BackgroundCheckpoint` (real SQLite files), and the catalog's writer
is one."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time

import pytest

from wwwproxy.archive.catalog import Catalog
from wwwproxy.archive.checkpoint import HOLD_PAST, BackgroundCheckpoint, without_auto_checkpoint
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

LIMIT = 256 * 1024
EVERY = 0.02  # seconds between checkpoints at least (the proxy's: 1)
ROWS = 800  # about 3 MB of rows, some 10 MB of log without checkpoints
ROW = b"x" * 4000


def writer(path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (v BLOB)")
    return without_auto_checkpoint(conn)


def write_rows(conn: sqlite3.Connection, count: int, after_commit=None, lock=None) -> None:
    for _ in range(count):
        with lock or contextlib.nullcontext():
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?)", (ROW,))
            conn.execute("COMMIT")
        if after_commit is not None:
            after_commit()


def wal_size(path) -> int:
    return (path.parent / f"{path.name}-wal").stat().st_size


def test_without_automatic_checkpoints_the_log_grows(tmp_path):
    """(What the background checkpoint is for: the writer alone never copies the log back.)"""
    path = tmp_path / "db.sqlite"
    conn = writer(path)
    write_rows(conn, 2000)  # about 8 MB of rows
    assert wal_size(path) > 4 * 1024 * 1024
    conn.close()


@pytest.mark.parametrize("pause", [0.001, 0.0])
def test_the_background_checkpoint_keeps_the_log_bounded(tmp_path, pause):
    """Also for a writer that never stops (``pause`` 0): one that commits while each
    checkpoint runs is held, past HOLD_PAST times the limit, for one checkpoint."""
    path = tmp_path / "db.sqlite"
    conn = writer(path)
    lock = threading.Lock()
    checkpoint = BackgroundCheckpoint(path, limit=LIMIT, every=EVERY, hold=lock)
    largest = 0

    def paced() -> None:  # the thread gets its turn, as between a proxy's batches
        nonlocal largest
        checkpoint.committed()
        largest = max(largest, wal_size(path))
        time.sleep(pause)

    write_rows(conn, ROWS, paced, lock)
    assert checkpoint.checkpoints >= 1
    # copied back and started over, not the 10 MB of log these rows make without the hold
    assert largest < (HOLD_PAST + 8) * LIMIT
    (count,) = sqlite3.connect(path).execute("SELECT count(*) FROM t").fetchone()
    assert count == ROWS
    conn.close()


def test_a_log_copied_back_starts_over_small_and_is_not_copied_at_every_commit(tmp_path):
    """SQLite reuses a log file at its largest size; a log past the limit once must not make
    every later commit a checkpoint (each one waits for two fsyncs)."""
    path = tmp_path / "db.sqlite"
    conn = writer(path)
    checkpoint = BackgroundCheckpoint(path, limit=LIMIT, every=EVERY)

    def paced() -> None:
        checkpoint.committed()
        time.sleep(0.001)

    started = time.monotonic()
    write_rows(conn, ROWS, paced)  # about 3 MB of rows: a dozen logs' worth of LIMIT
    took = time.monotonic() - started
    assert 1 <= checkpoint.checkpoints <= took / EVERY + 2
    conn.close()


def test_a_checkpoint_a_reader_holds_back_says_so(tmp_path):
    path = tmp_path / "db.sqlite"
    conn = writer(path)
    write_rows(conn, 10)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # a snapshot that uses the log
    write_rows(conn, 10)
    checkpoint = BackgroundCheckpoint(path, limit=LIMIT)
    assert not checkpoint.checkpoint()  # the reader's snapshot keeps the newer rows' frames
    reader.execute("COMMIT")
    assert checkpoint.checkpoint()
    conn.close()
    reader.close()


def test_a_checkpoint_of_a_missing_database_says_so(tmp_path):
    checkpoint = BackgroundCheckpoint(tmp_path / "gone" / "db.sqlite")
    checkpoint.committed()  # no log: nothing due, nothing raised
    assert not checkpoint.checkpoint()
    assert checkpoint.checkpoints == 0


def test_the_catalogs_writer_leaves_checkpoints_to_the_thread(tmp_path):
    store = Store(tmp_path / "cache")
    url = canonicalize("http://c.example/page")
    rec = store.recorder(url, url.file, method="GET", request_headers=[], request_body=b"")
    rec.write(b"<p>page</p>")
    rec.finish(200, "OK", [("Content-Type", "text/html")])
    catalog: Catalog = store.catalog
    assert catalog.rebuild(store.index.prefix("")) == 1  # (a build writes: the writer opens)
    writer_conn = catalog._writer  # noqa: SLF001
    assert writer_conn is not None
    assert writer_conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    assert writer_conn.execute("PRAGMA journal_size_limit").fetchone() == (0,)
    assert catalog._checkpoint.path == catalog.path  # noqa: SLF001
    assert catalog._checkpoint.hold is catalog._write_lock  # noqa: SLF001
