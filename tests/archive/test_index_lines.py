"""``index check`` and ``index rebuild`` over a whole cache (:mod:`wwwproxy.archive.index_lines`):
check's memory does not grow with the index, and the rebuild's scan split over worker
processes gives what one process's does."""

from __future__ import annotations

import gc
import tracemalloc
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
