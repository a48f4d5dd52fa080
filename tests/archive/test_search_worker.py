"""The indexing thread on its own (:class:`IndexWorker`): driven through the narrow
:class:`PageIndex` it is given, here a small index that notes what it is asked, with a real
text helper and store (no SQLite, no SearchIndex)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from wwwproxy.archive.cdxj import CDXJRecord
from wwwproxy.archive.search import worker as worker_module
from wwwproxy.archive.search.capture import Given
from wwwproxy.archive.search.schema import Text
from wwwproxy.archive.search.textproc import TextHelper
from wwwproxy.archive.search.worker import Capture, Follower, IndexWorker
from wwwproxy.archive.store import Store

HTML = (("Content-Type", "text/html"),)


class NotedIndex:
    """A :class:`~wwwproxy.archive.search.worker.PageIndex` that notes what it is asked: each
    committed batch as the (key, title) of its pages, the stores caught up, the merges."""

    def __init__(self, path: Path, refuse: str = "") -> None:
        self.path = path
        self.refuse = refuse  # a key whose indexing fails inside a batch
        self.batches: list[list[tuple[str, str]]] = []
        self._open: list[list[tuple[str, str]]] = []
        self.caught_up: list[Store] = []
        self.merges: list[Callable[[], bool]] = []
        self.removed: list[tuple[list[str], list[str], Store | None]] = []

    @contextmanager
    def batch(self) -> Iterator[None]:
        self._open.append([])
        try:
            yield
        finally:
            pages = self._open.pop()
        self.batches.append(pages)  # only a batch that ended well is committed

    def index_capture(self, store, line, given, made) -> bool:  # noqa: ANN001
        if self._open and line.uri == self.refuse:
            raise ValueError("refused for the test")
        title = made.title if isinstance(made, Text) else ""
        if self._open:
            self._open[-1].append((line.uri, title))
        else:
            self.batches.append([(line.uri, title)])
        return True

    def catch_up(self, store: Store) -> int:
        self.caught_up.append(store)
        return 0

    def merge_if_due(self, interrupted: Callable[[], bool]) -> bool:
        self.merges.append(interrupted)
        return True

    def remove_pages(
        self, keys: Iterable[str], files: Iterable[str], *, store: Store | None = None
    ) -> int:
        self.removed.append((list(keys), list(files), store))
        return 0


def line(key: str) -> CDXJRecord:
    host = key.split("/")[2]
    return CDXJRecord.build(
        f"{host})/",
        "2026-01-01T00:00:00Z",
        "response",
        uri=key,
        ref="warcfile:x.warc.gz#0",
        hsc=200,
        mct="text/html",
    )


def page(key: str, title: str) -> tuple[CDXJRecord, Given]:
    return line(key), Given(f"<title>{title}</title>text".encode(), HTML)


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[tuple[Store, NotedIndex, IndexWorker]]:
    store = Store(tmp_path / "cache")
    index = NotedIndex(tmp_path / "noted")
    texts = TextHelper()
    worker = IndexWorker(index, texts)
    yield store, index, worker
    worker.flush(60)
    texts.stop()


def hold(worker: IndexWorker) -> threading.Event:
    """Keep the indexing thread busy until the event returned is set."""
    busy, go = threading.Event(), threading.Event()

    def slow_job() -> None:
        busy.set()
        go.wait(60)

    worker.enqueue(slow_job)
    assert busy.wait(60)
    return go


def test_pages_that_wait_together_are_one_batch_with_their_text_made(parts):
    store, index, worker = parts
    go = hold(worker)
    for key, title in (("http://a.example/", "A"), ("http://b.example/", "B")):
        record, given = page(key, title)
        worker.enqueue(Capture(store, record, given))
    go.set()
    assert worker.flush(60)
    assert index.batches == [[("http://a.example/", "A"), ("http://b.example/", "B")]]
    assert len(index.merges) == 1 and index.merges[0]() is False  # nothing waits


def test_a_page_failing_in_a_batch_is_retried_alone_and_the_others_are_kept(parts):
    store, index, worker = parts
    index.refuse = "http://bad.example/"
    go = hold(worker)
    for key in ("http://one.example/", "http://bad.example/", "http://two.example/"):
        worker.enqueue(Capture(store, *page(key, "t")))
    go.set()
    assert worker.flush(60)
    # the batch was dropped; each page then went on its own (outside a batch: no refusal)
    assert index.batches == [
        [("http://one.example/", "")],
        [("http://bad.example/", "")],
        [("http://two.example/", "")],
    ]


def test_past_the_queue_bound_the_store_is_caught_up_once_the_thread_is_idle(parts, monkeypatch):
    store, index, worker = parts
    monkeypatch.setattr(worker_module, "MAX_PENDING", 2)
    go = hold(worker)
    for i in range(5):
        worker.enqueue(Capture(store, *page(f"http://q{i}.example/", "q")))
    assert worker._pending.qsize() == 2  # the slow job's queue slot is free again: two pages
    assert index.caught_up == []
    go.set()
    assert worker.flush(60)
    assert index.caught_up == [store]
    assert sum(len(b) for b in index.batches) == 2  # the others were left to the catch-up


def test_after_close_what_a_full_queue_left_is_not_caught_up(parts, monkeypatch):
    store, index, worker = parts
    monkeypatch.setattr(worker_module, "MAX_PENDING", 0)
    worker.close()
    worker.enqueue(Capture(store, *page("http://late.example/", "late")))
    assert worker.flush(60)
    assert index.caught_up == [] and index.merges == []


def test_the_follower_hands_captures_to_the_worker_and_deletes_to_the_index(parts, monkeypatch):
    store, index, worker = parts
    follower = Follower(index, worker, store)
    go = hold(worker)
    record, given = page("http://f.example/", "F")

    class Payload:
        length = len(given.payload)
        http_headers = HTML

        def read(self) -> bytes:
            return given.payload

    follower.on_put_payload(None, record.uri, [record], Payload())  # type: ignore[arg-type]
    assert worker._given_bytes == len(given.payload)  # it waits in memory, counted
    go.set()
    assert worker.flush(60)
    assert index.batches == [[("http://f.example/", "F")]]
    assert worker._given_bytes == 0
    follower.on_delete(["http://f.example/"], ["x.warc.gz"])
    assert index.removed == [(["http://f.example/"], ["x.warc.gz"], store)]
