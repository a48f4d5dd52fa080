"""fsutil: group commit (GroupSync) shares one flush among writers that finish together and
never acknowledges a write before a flush that began after it and covers it."""

from __future__ import annotations

import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from wwwproxy import fsutil
from wwwproxy.fsutil import (
    GROUP_WINDOW,
    SYNC_MODES,
    SYNCFS_DIRTY_MAX,
    SYNCFS_OVER,
    BackgroundSync,
    GroupSync,
    PendingFlush,
    durability,
    read_chunks,
    use_syncfs,
)


def test_one_writer_gets_one_flush_of_its_own_files(tmp_path: Path) -> None:
    group = GroupSync(tmp_path)
    (tmp_path / "a").write_bytes(b"x")
    group.sync([tmp_path / "a", tmp_path])
    assert (group.flushes, group.syncfs_flushes) == (1, 0)
    group.sync([tmp_path / "a"])  # a later write needs a later flush
    assert group.flushes == 2


def piled_up_writers(group: GroupSync, tmp_path: Path, count: int) -> list[set[str]]:
    """A first writer whose flush is slow, then ``count`` more that pile up behind it; the
    batches each flush covered."""
    batches: list[set[str]] = []
    release = threading.Event()
    real = group._flush

    def slow_flush(batch: set[str]) -> None:
        batches.append(set(batch))
        real(batch)
        if len(batches) == 1:
            release.wait(5)

    group._flush = slow_flush  # type: ignore[method-assign]
    done: list[int] = []

    def writer(i: int) -> None:
        path = tmp_path / f"f{i}"
        path.write_bytes(b"data")
        group.sync([path, tmp_path / "journal"])
        done.append(i)

    (tmp_path / "journal").write_bytes(b"")
    first = threading.Thread(target=writer, args=(0,))
    first.start()
    while not group._running:
        time.sleep(0.001)
    others = [threading.Thread(target=writer, args=(i,)) for i in range(1, count + 1)]
    for t in others:
        t.start()
    time.sleep(0.2)
    assert done == []  # nobody is acknowledged before a flush that began after its write
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert sorted(done) == list(range(count + 1))
    return batches


@pytest.mark.parametrize(
    ("paths", "dirty", "syncfs"),
    [
        (SYNCFS_OVER, 0, False),  # few paths: an fsync each
        (SYNCFS_OVER + 1, 0, True),
        (100, SYNCFS_DIRTY_MAX, True),
        (100, SYNCFS_DIRTY_MAX + 1, False),  # syncfs would wait for others' data
        (100, None, False),  # not known: the safe way
    ],
)
def test_when_one_syncfs_replaces_the_fsyncs(paths: int, dirty: int | None, syncfs: bool) -> None:
    assert use_syncfs(paths, dirty) is syncfs


def test_dirty_bytes_reads_dirty_and_writeback(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nDirty:  12 kB\nWriteback:   3 kB\nOther: 9 kB\n")
    assert fsutil.dirty_bytes(str(meminfo)) == 15 * 1024
    assert fsutil.dirty_bytes(str(tmp_path / "none")) is None
    if Path("/proc/meminfo").exists():
        assert isinstance(fsutil.dirty_bytes(), int)


def test_a_busy_machine_gets_an_fsync_per_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fsutil, "dirty_bytes", lambda: SYNCFS_DIRTY_MAX + 1)
    group = GroupSync(tmp_path)
    piled_up_writers(group, tmp_path, 8)
    assert group.flushes == 2 and group.syncfs_flushes == 0


def test_writers_finishing_together_share_one_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fsutil, "dirty_bytes", lambda: 0)  # a quiet machine
    group = GroupSync(tmp_path)
    batches = piled_up_writers(group, tmp_path, 8)
    # the first writer's, and one for the eight that waited (their journal once)
    assert len(batches) == 2
    assert batches[1] == {str(tmp_path / f"f{i}") for i in range(1, 9)} | {
        str(tmp_path / "journal")
    }
    assert group.syncfs_flushes == (1 if fsutil._SYNCFS is not None else 0)


def test_a_small_batch_is_fsynced_file_by_file(tmp_path: Path) -> None:
    group = GroupSync(tmp_path)
    batches = piled_up_writers(group, tmp_path, SYNCFS_OVER - 2)
    assert len(batches) == 2 and len(batches[1]) <= SYNCFS_OVER
    assert group.syncfs_flushes == 0


def test_a_failed_flush_is_an_error_for_the_writer_and_retried_by_the_next(
    tmp_path: Path,
) -> None:
    group = GroupSync(tmp_path)
    missing = tmp_path / "not yet"
    with pytest.raises(OSError):
        group.sync([missing])
    missing.write_bytes(b"now")
    group.sync([])  # the next flush covers what the failed one did not
    assert group.flushes == 1


def test_without_syncfs_a_large_batch_is_fsynced_file_by_file(tmp_path: Path) -> None:
    group = GroupSync(tmp_path, use_syncfs=False)
    piled_up_writers(group, tmp_path, 8)
    assert group.flushes == 2 and group.syncfs_flushes == 0


# --- the sync setting: durability() and its three kinds ---------------------------------------


@pytest.mark.parametrize(
    ("mode", "kind", "window"),
    [("write", BackgroundSync, None), ("group", GroupSync, GROUP_WINDOW), ("flush", GroupSync, 0)],
)
def test_each_sync_mode_has_its_durability(
    tmp_path: Path, mode: str, kind: type, window: float | None
) -> None:
    made = durability(mode, tmp_path)
    assert type(made) is kind
    assert getattr(made, "window", None) == window


def test_an_unknown_sync_mode_is_refused(tmp_path: Path) -> None:
    assert SYNC_MODES == ("write", "group", "flush")
    with pytest.raises(ValueError, match="write, group, flush"):
        durability("fsync", tmp_path)


def test_background_sync_returns_at_once_and_flushes_within_its_interval(tmp_path: Path) -> None:
    flusher = BackgroundSync(tmp_path, interval=0.05)
    (tmp_path / "a").write_bytes(b"x")
    flusher.sync([tmp_path / "a"])
    assert flusher.flushes == 0  # acknowledged before any flush
    deadline = time.monotonic() + 5
    while flusher.flushes == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flusher.flushes == 1
    time.sleep(0.15)
    assert flusher.flushes == 1  # nothing written since: no flush


def test_background_sync_gathers_the_writes_of_an_interval_into_one_flush(tmp_path: Path) -> None:
    flusher = BackgroundSync(tmp_path, interval=0.2)
    for i in range(20):
        (tmp_path / str(i)).write_bytes(b"x")
        flusher.sync([tmp_path / str(i)])
    flusher.flush()  # as at exit: what was not flushed yet, now
    assert flusher.flushes == 1
    time.sleep(0.3)
    assert flusher.flushes == 1  # the thread found nothing left to flush


def test_a_failed_background_flush_is_logged_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "cache"
    root.write_bytes(b"not a folder")  # syncfs cannot open it: the flush fails
    flusher = BackgroundSync(root, interval=0.05)
    flusher.sync([])
    flusher.flush()
    assert flusher.flushes == 0 and isinstance(flusher.failed, OSError)
    assert "cannot flush the cache to disk" in caplog.text
    root.unlink()
    root.mkdir()
    deadline = time.monotonic() + 5
    while flusher.flushes == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flusher.flushes == 1 and flusher.failed is None


def test_a_removed_cache_has_nothing_left_to_flush(tmp_path: Path) -> None:
    flusher = BackgroundSync(tmp_path / "gone", interval=0.05)
    flusher.sync([])
    flusher.flush()
    assert flusher.failed is None and flusher.flushes == 0
    flusher.flush()  # nothing dirty: not tried again
    assert flusher.failed is None


def test_the_flushing_thread_ends_when_idle_and_comes_back(tmp_path: Path) -> None:
    flusher = BackgroundSync(tmp_path, interval=0.01, idle=0.05)
    flusher.sync([])
    assert flusher.running
    deadline = time.monotonic() + 5
    while flusher.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not flusher.running and flusher.flushes == 1
    flusher.sync([])  # a later write starts it again
    assert flusher.running
    while flusher.flushes < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flusher.flushes == 2


def test_group_sync_gathers_the_writers_of_its_window_into_one_flush(tmp_path: Path) -> None:
    group = GroupSync(tmp_path, window=0.2)
    for i in range(4):
        (tmp_path / str(i)).write_bytes(b"x")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: group.sync([tmp_path / str(i)]), range(4)))
    assert group.flushes == 1


def test_pending_flush_holds_its_own_descriptors_until_closed(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with open(path, "wb") as f, PendingFlush() as pending:
        pending.file(f.fileno())
        pending.folder(tmp_path)
        f.close()  # the writer's own descriptor: the pending one stays usable
        dup = pending.items[0]
        assert isinstance(dup, int)
        os.fsync(dup)
        assert pending.items[1] == str(tmp_path)
    with pytest.raises(OSError):
        os.fstat(dup)


class _ThreadNoted(io.BufferedReader):
    """A file whose reads note the thread they ran in."""

    def __init__(self, path: Path) -> None:
        super().__init__(io.FileIO(path))
        self.threads: set[str] = set()

    def read(self, size: int | None = -1) -> bytes:
        self.threads.add(threading.current_thread().name)
        return super().read(size)


@pytest.mark.parametrize(
    ("size", "chunks"),
    [(0, []), (1, [1]), (99, [99]), (100, [100]), (101, [100, 1]), (305, [100, 100, 100, 5])],
)
async def test_read_chunks_gives_a_file_in_chunks_read_in_the_executors_threads(
    tmp_path: Path, size: int, chunks: list[int]
) -> None:
    data = bytes(i % 251 for i in range(size))
    (tmp_path / "f").write_bytes(data)
    with ThreadPoolExecutor(1, thread_name_prefix="chunk-reader") as executor:
        with _ThreadNoted(tmp_path / "f") as stream:
            got = [c async for c in read_chunks(stream, 100, executor)]
            assert not stream.closed  # the caller's to close
    assert [len(c) for c in got] == chunks
    assert b"".join(got) == data
    assert stream.threads == {"chunk-reader_0"}  # never the loop's thread


def fsyncs_seen(monkeypatch: pytest.MonkeyPatch, dirty: int | None) -> list[str]:
    """The paths fsynced one by one from now on (each still fsynced), with the machine's
    dirty bytes said to be ``dirty`` (what decides between fsyncs and one syncfs)."""
    seen: list[str] = []
    real = fsutil.fsync_path

    def fsync_path(path: str | os.PathLike[str]) -> None:
        seen.append(os.fspath(path))
        real(path)

    monkeypatch.setattr(fsutil, "fsync_path", fsync_path)
    monkeypatch.setattr(fsutil, "dirty_bytes", lambda: dirty)
    return seen


def test_a_background_round_flushes_the_files_written_not_the_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With other programs' data waiting to be written, a round fsyncs what the puts wrote
    (files by descriptor, then the new folders) and the ``always`` files; no syncfs, which
    would wait for the others' data too."""
    seen = fsyncs_seen(monkeypatch, SYNCFS_DIRTY_MAX + 1)
    log = tmp_path / "catalog.sqlite-wal"
    log.write_bytes(b"log")
    flusher = BackgroundSync(tmp_path, interval=60, always=[log, tmp_path / "no-such-file"])
    folder = tmp_path / "host"
    folder.mkdir()
    names = [folder / f"page{n}.warc.gz" for n in range(SYNCFS_OVER + 2)]
    for name in names:
        with open(name, "wb") as f, PendingFlush() as pending:
            f.write(b"records")
            f.flush()
            pending.file(f.fileno())
            pending.folder(folder)
            flusher.sync(pending.items)
    flusher.flush()
    assert (flusher.flushes, flusher.syncfs_flushes) == (1, 0)
    missing = str(tmp_path / "no-such-file")  # (tried, and passed over: nothing to flush)
    assert sorted(seen[:-1]) == sorted([*map(str, names), str(log), missing])
    assert seen[-1] == str(folder)  # the folder after the files it names
    flusher.flush()
    assert flusher.flushes == 1  # nothing written since


def test_a_background_round_of_many_paths_on_a_quiet_machine_is_one_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = fsyncs_seen(monkeypatch, 0)
    flusher = BackgroundSync(tmp_path, interval=60)
    names = [tmp_path / str(n) for n in range(SYNCFS_OVER + 2)]
    for name in names:
        name.write_bytes(b"x")
    flusher.sync(names)
    flusher.flush()
    assert flusher.flushes == 1 and seen == []
    assert flusher.syncfs_flushes == 1


def test_a_file_removed_before_its_round_needs_no_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = fsyncs_seen(monkeypatch, SYNCFS_DIRTY_MAX + 1)
    flusher = BackgroundSync(tmp_path, interval=60)
    gone = tmp_path / "gone.warc.gz"
    with open(gone, "wb") as f, PendingFlush() as pending:
        f.write(b"x")
        pending.file(f.fileno())
        gone.unlink()
        flusher.sync(pending.items)
    kept = tmp_path / "kept.warc.gz"
    kept.write_bytes(b"y")
    flusher.sync([kept])
    flusher.flush()
    assert seen == [str(kept)] and flusher.syncfs_flushes == 0


def test_a_descriptor_whose_file_cannot_be_named_makes_the_round_a_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = fsyncs_seen(monkeypatch, SYNCFS_DIRTY_MAX + 1)
    flusher = BackgroundSync(tmp_path, interval=60)
    read_end, write_end = os.pipe()  # a pipe has no path
    try:
        flusher.sync([write_end])
        flusher.flush()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert seen == [] and flusher.syncfs_flushes == 1


def test_a_store_flushes_its_catalogs_log_in_the_background(tmp_path: Path) -> None:
    from wwwproxy.archive.store import Store

    store = Store(tmp_path / "cache")
    assert isinstance(store.sync, BackgroundSync)
    assert store.sync.always == [str(store.catalog.log_path)]
    store.set_sync("flush")
    store.set_sync("write")
    assert isinstance(store.sync, BackgroundSync)
    assert store.sync.always == [str(store.catalog.log_path)]
