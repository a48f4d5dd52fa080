"""``index check`` and ``index rebuild`` over a whole cache (:mod:`wwwproxy.archive.index_lines`):
check's memory does not grow with the index, and the rebuild's scan split over worker
processes gives what one process's does."""

from __future__ import annotations

import gc
import shutil
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wwwproxy.archive import index_lines
from wwwproxy.archive.store import Store
from wwwproxy.archive.warc import (
    HTTPRequest,
    HTTPResponse,
    PreviousPayload,
    append_exchange,
    build_exchange,
)
from wwwproxy.url import canonicalize

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class _NoFlush:
    def sync(self, paths: object) -> None:
        return None


def fill(store: Store, pages: int, captures: int) -> None:
    """``pages`` cache files of ``captures`` captures each (every other one a revisit),
    written without a flush each, indexed by one rebuild."""
    for page in range(pages):
        url = canonicalize(f"http://host{page % 7}.example/page/{page}")
        records = []
        previous = None
        for n in range(captures):
            exchange = build_exchange(
                target_uri=url.canonical,
                archive_key=url.file,
                request=HTTPRequest("GET", [("Host", url.hostport)], b""),
                response=HTTPResponse(200, "OK", [], b"body %d" % (n // 2)),
                date=T0 + timedelta(seconds=n),
                previous=previous,
            )
            if exchange[-1].info.rec_type == "response":
                previous = PreviousPayload.from_record(exchange[-1].info)
            records.extend(exchange)
        append_exchange(store.path_for(url, url.file), records, sync=_NoFlush())  # type: ignore[arg-type]
    store.rebuild_index()


def check_peak(root: Path, pages: int) -> int:
    store = Store(root)
    fill(store, pages, 100)
    assert sum(1 for _ in store.index.prefix("")) == pages * 100
    gc.collect()
    tracemalloc.start()  # (maybe started already: the peak is counted from here)
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        assert store.check_index() == []
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_check_holds_memory_that_does_not_grow_with_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """500 and 4,000 index lines: the peak of memory held while checking stays within a
    small bound (every line parsed into a dict, it grew eightfold: 1.3 MB to 10 MB)."""
    monkeypatch.setattr(index_lines, "CHECK_RUN_LINES", 500, raising=False)
    small = check_peak(tmp_path / "small", 5)
    large = check_peak(tmp_path / "large", 40)
    assert large < small + 2_000_000, (small, large)


def test_check_still_finds_every_kind_of_problem_in_sorted_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With runs of a few lines (many spilled runs merged): a record the index lacks, a line
    whose record is gone, and a line pointing at a request record are all reported."""
    monkeypatch.setattr(index_lines, "CHECK_RUN_LINES", 7, raising=False)
    store = Store(tmp_path)
    fill(store, 9, 4)
    lines = list(store.index.prefix(""))
    assert store.check_index() == []
    gone = store.path_of(lines[5])
    extra = canonicalize("http://zz.example/new")
    append_exchange(
        store.path_for(extra, extra.file),
        build_exchange(
            target_uri=extra.canonical,
            archive_key=extra.file,
            request=HTTPRequest("GET", [], b""),
            response=HTTPResponse(200, "OK", [], b"new"),
            date=T0,
        ),
    )
    gone.unlink()
    problems = store.check_index()
    assert any("record not in the index (http://zz.example/new)" in p for p in problems)
    assert sum("No such file" in p for p in problems) == 4  # the four lines of the gone file
    assert len(problems) == 5, problems


class _WithGone:
    """The store's cache files with one more that is gone when it is read (as root, no
    permission makes a file unreadable), walked in the middle."""

    def __init__(self, store: Store, gone: Path, not_warc: Path) -> None:
        self.store = store
        self.gone = gone
        self.not_warc = not_warc

    def warc_files(self) -> Iterator[Path]:
        for n, path in enumerate(self.store.warc_files()):
            if n == 5:
                yield self.gone
            yield path

    def warcfile_name(self, path: Path) -> str:
        return self.store.warcfile_name(path)

    def resolve_warcfile(self, name: str, key: str) -> Path:
        return self.store.resolve_warcfile(name, key)


def damaged_cache(root: Path) -> _WithGone:
    """Cache files of 7 hosts, one with a torn tail, one holding only a torn record, one
    that is not a WARC file, and a gone one."""
    store = Store(root)
    fill(store, 20, 3)
    files = list(store.warc_files())
    whole = files[3].read_bytes()
    with open(files[3], "ab") as f:
        f.write(whole[: len(whole) // 2])
    files[8].write_bytes(whole[: len(whole) // 3])
    files[13].write_bytes(b"this is not a WARC file\n" * 10)
    return _WithGone(store, files[0].parent / ("g" * 22 + ".warc.gz"), files[13])


def test_the_scan_split_over_workers_gives_what_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 3 files over 2 worker processes: the same index file, problems and repairs
    as the rebuild in one process, and the lines of the one-process scan."""
    monkeypatch.setattr(index_lines, "SCAN_CHUNK_FILES", 3)
    root = tmp_path / "cache"
    files = damaged_cache(root)
    shutil.copytree(root, tmp_path / "pristine")

    def fresh() -> None:  # the damage back, for the next scan to repair
        shutil.rmtree(root)
        shutil.copytree(tmp_path / "pristine", root)

    problems: list[str] = []
    repaired: list[str] = []
    scanned = sorted({line.sort_key for line in index_lines.scan(files, problems, repaired)})
    results = {}
    for workers in (1, 2):
        fresh()
        tally = index_lines.ScanTally()
        got: list[str] = []
        count, found = index_lines.rebuild_index(
            files.store.index, files, got, workers=workers, tally=tally
        )
        assert (tally.workers, tally.files) == (workers, 21)
        results[workers] = (files.store.index.index_path.read_bytes(), count, found, got)
    assert results[1] == results[2]
    index_file, count, found, got = results[2]
    assert index_file.split(b"\n")[1:-1] == scanned and count == len(scanned) > 40
    assert found == problems == [f"{files.gone}: cannot read: No such file or directory"]
    assert got == repaired and len(got) == 3
    assert sum("torn tail cut off at offset" in r for r in got) == 2  # a file cut short twice
    assert f"{files.not_warc}: held only a torn record: removed" in got


def test_a_small_cache_is_scanned_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fewer than two chunks' worth of files: no worker is started, whatever was asked."""
    monkeypatch.setattr(index_lines, "SCAN_CHUNK_FILES", 11)
    store = Store(tmp_path)
    fill(store, 20, 2)
    tally = index_lines.ScanTally()
    assert store.rebuild_index(workers=2, tally=tally) == (40, [])
    assert (tally.workers, tally.files) == (1, 20)
    assert index_lines.scan_workers() >= 1
