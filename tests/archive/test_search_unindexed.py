"""Pages another process recorded without a search index (``wwwproxy fetch``) are indexed by
the index of the proxy running meanwhile (before its next search) or of the next process to
start with one: the mark they touch (:mod:`wwwproxy.archive.search.unindexed`), a real Store
and a real index."""

from __future__ import annotations

import os
from pathlib import Path

from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.search import unindexed as unindexed_module
from wwwproxy.archive.search.unindexed import MARK, UnindexedMark, mark_time
from wwwproxy.archive.store import Store

from .test_search import HTML, put


def record(root: Path, words: str, *paths: str) -> None:
    """Pages recorded as a crawl without a search index records them: a store of its own,
    no listener, the mark touched after."""
    crawl = Store(root)
    for path in paths:
        put(crawl, f"http://crawl.example/{path}", f"<title>{path}</title>{words}".encode(), HTML)
    UnindexedMark(root).done()


def test_the_next_index_to_start_catches_up_with_pages_recorded_unindexed(tmp_path):
    root = tmp_path / "cache"
    record(root, "quince", "a", "b", "c")
    index = SearchIndex(root)
    try:
        assert index.search("quince").total == 0  # not attached to a store: nothing to do
        index.attach(Store(root))  # as the services of the next start do
        assert index.flush(60)
        assert index.search("quince").total == 3
    finally:
        index.close()
    # caught up once: the next start finds nothing new to do
    again = SearchIndex(root)
    try:
        again.attach(Store(root))
        assert again.indexing._enqueued == 0
        assert again.search("quince").total == 3
    finally:
        again.close()


def test_a_running_index_catches_up_before_a_search(tmp_path):
    root = tmp_path / "cache"
    proxy = Store(root)
    index = SearchIndex(root)
    index.attach(proxy)
    try:
        put(proxy, "http://proxy.example/", b"<title>own</title>quince", HTML)
        record(root, "quince", "a", "b")  # a crawl while the proxy runs
        # a search right after has the index catch up (and waits for it, a while: a busy
        # machine may take longer, and the test waits on)
        searched = index.search("quince", limit=20).total
        assert index.flush(60)
        assert searched in (1, 3) and index.search("quince", limit=20).total == 3
        # a page recorded without the mark touched again is not looked for ...
        put(Store(root), "http://crawl.example/late", b"quince", HTML)
        index.search("quince", limit=20)
        assert index.flush(60)
        assert index.search("quince", limit=20).total == 3
        # ... until the crawl touches it (it does at the end)
        UnindexedMark(root).done()
        index.search("quince", limit=20)
        assert index.flush(60)
        assert index.search("quince", limit=20).total == 4
    finally:
        index.close()


def test_without_the_mark_nothing_is_caught_up(tmp_path):
    root = tmp_path / "cache"
    put(Store(root), "http://crawl.example/x", b"quince", HTML)  # (no mark: not ours to find)
    index = SearchIndex(root)
    try:
        index.attach(Store(root))
        assert index.search("quince").total == 0
        assert index.indexing._enqueued == 0
    finally:
        index.close()


def test_the_mark_is_touched_at_most_once_a_second_and_always_when_done(tmp_path, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(unindexed_module.time, "monotonic", lambda: now[0])
    assert mark_time(tmp_path) is None
    mark = UnindexedMark(tmp_path)
    mark.touch()
    first = mark_time(tmp_path)
    assert first is not None and (tmp_path / MARK).exists()
    now[0] += 0.5
    mark.touch()
    assert mark_time(tmp_path) == first  # a moment ago: left alone
    now[0] += 0.6
    mark.touch()
    second = mark_time(tmp_path)
    assert second is not None and second > first
    os.utime(tmp_path / MARK, ns=(second, second + 10**12))  # (a clock ahead of ours)
    mark.done()  # at once, and a time it never had
    third = mark_time(tmp_path)
    assert third is not None and third > second + 10**12
