"""Recording in a helper process (:mod:`wwwproxy.archive.recordproc`): what it records is what
the store would have recorded itself, read back by warcio; the catalog and the search index
follow it; a large body, a helper that cannot start and a helper killed are recorded here;
the recording's own failure comes back as the error it was."""

from __future__ import annotations

import os
import signal
import threading
from datetime import UTC, datetime

import pytest
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive import recordproc
from wwwproxy.archive.recordproc import RecordHelper
from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

WHEN = datetime(2026, 5, 1, 12, tzinfo=UTC)


def put(store: Store, url: str, body: bytes, ctype: str = "text/html") -> list:
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[("Accept", "*/*")],
                         request_body=b"", date=WHEN)  # fmt: skip
    rec.write(body)
    return rec.finish(200, "OK", [("Content-Type", ctype), ("Content-Length", str(len(body)))])


def records(store: Store, url: str) -> list[tuple[str, bytes]]:
    u = canonicalize(url)
    with open(store.path_for(u, u.file), "rb") as fh:
        return [
            (r.rec_type, r.content_stream().read()) for r in ArchiveIterator(fh)
        ]  # fmt: skip


@pytest.fixture
def helped(tmp_path):
    store = Store(tmp_path / "cache")
    helper = store.record_helper = RecordHelper()
    yield store, helper
    helper.stop()


def test_the_helper_records_what_the_store_would(helped, tmp_path):
    store, helper = helped
    page = b"<title>Moth</title><p>a lunar moth on the window</p>"
    lines = put(store, "http://h.example/moth", page)
    assert helper.pid is not None and helper.pid != os.getpid()
    assert [line.record_type for line in lines] == ["response"]
    assert store.index.exact(lines[0].key)[-1].to_line() == lines[0].to_line()
    got = records(store, "http://h.example/moth")
    assert [kind for kind, _ in got] == ["request", "response"]
    assert got[1][1] == page
    here = Store(tmp_path / "here")  # the same exchange recorded in this process
    put(here, "http://h.example/moth", page)
    assert [k for k, _ in records(here, "http://h.example/moth")] == [k for k, _ in got]
    # the catalog shows it at once, the search index once it is indexed
    store.open_catalog()
    put(store, "http://h.example/second", b"<p>second</p>")
    _, rows = store.catalog.pages("http", "h.example")
    assert [r.key for r in rows] == ["http://h.example/moth", "http://h.example/second"]
    search = SearchIndex(store.root)
    try:
        search.waits_for.append(lambda timeout: helper.wait_search(str(store.root), timeout))
        assert search.flush()
        assert [hit.url for hit in search.search("lunar moth").hits] == ["http://h.example/moth"]
    finally:
        search.close()


def test_a_large_body_is_recorded_here(helped, monkeypatch):
    store, helper = helped
    monkeypatch.setattr(recordproc, "SENT_MAX", 1000)
    body = b"x" * 5000
    put(store, "http://h.example/big", body, "application/octet-stream")
    assert helper.pid is None  # never started: nothing was sent
    assert records(store, "http://h.example/big")[1][1] == body


def test_without_a_helper_the_exchange_is_recorded_here(tmp_path):
    store = Store(tmp_path / "cache")
    store.record_helper = RecordHelper(argv=["/nonexistent/python"])
    put(store, "http://h.example/a", b"aaa")
    assert records(store, "http://h.example/a")[1][1] == b"aaa"


def test_a_killed_helper_loses_nothing(helped):
    store, helper = helped
    put(store, "http://h.example/one", b"one")
    pid = helper.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    put(store, "http://h.example/two", b"two")
    assert records(store, "http://h.example/one")[1][1] == b"one"
    assert [k for k, _ in records(store, "http://h.example/two")] == ["request", "response"]


def test_the_recordings_own_failure_comes_back(helped):
    store, _ = helped
    store.sync_mode = "sometimes"  # not a setting the helper's store can follow
    with pytest.raises(ValueError, match="sometimes"):
        put(store, "http://h.example/x", b"x")


@pytest.mark.parametrize("sync", ["write", "flush"])  # one after another; side by side
def test_exchanges_recorded_together_are_each_recorded_once(helped, sync):
    store, helper = helped
    store.set_sync(sync)
    urls = [f"http://h.example/p{i}" for i in range(40)]
    threads = [threading.Thread(target=put, args=(store, u, u.encode())) for u in urls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for u in urls:
        assert records(store, u) == [records(store, u)[0], ("response", u.encode())]
    assert len(list(store.index.prefix(""))) == len(urls)
    assert helper.failures == 0 and (sync == "write" or helper.flushes >= 1)


def test_a_helper_without_search_keeps_no_search_index(tmp_path):
    """``build_services(search=False)``'s helper: the pages are recorded, not indexed."""
    store = Store(tmp_path / "cache")
    helper = store.record_helper = RecordHelper(search=False)
    try:
        put(store, "http://h.example/quiet", b"<p>quiet</p>")
        assert helper.pid is not None
        assert helper.wait_search(str(store.root))
    finally:
        helper.stop()
    assert records(store, "http://h.example/quiet")[1][1] == b"<p>quiet</p>"
    assert not (store.root / "search.sqlite3").exists()


@pytest.mark.parametrize(
    ("sizes", "first_batch"),
    [
        ([1, 1, 2], 3),  # all that wait
        ([3, 2, 1], 1),  # the bodies past the cap wait for the next batch
        ([5], 1),  # one body larger than the cap goes alone
        ([2, 2, 1], 2),
        ([0, 0, 4, 1], 3),  # a search wait has no body
    ],
)
def test_a_batch_holds_at_most_the_cap_of_bodies(monkeypatch, sizes, first_batch):
    monkeypatch.setattr(recordproc, "BATCH_BYTES", 4)
    helper = RecordHelper()
    waiting = [
        recordproc._Waiting(("put", (b"x" * n,)) if n else ("search", "/", 1.0))  # noqa: SLF001
        for n in sizes
    ]
    helper._waiting = list(waiting)  # noqa: SLF001
    assert helper._next_batch() == waiting[:first_batch]  # noqa: SLF001
    assert helper._waiting == waiting[first_batch:]  # noqa: SLF001


def test_this_processs_listeners_hear_of_the_helpers_puts_but_shared_indexes_do_not(helped):
    """The purge's growth count (a listener of this process) hears of a put the helper made;
    a listener that keeps an index shared with the helper (the search index) does not: the
    helper's store told its own."""

    class Heard:
        def __init__(self, shared: bool) -> None:
            self.shared_index = shared
            self.puts: list[str] = []

        def on_put(self, url, key, lines) -> None:
            self.puts.append(key)

        def on_delete(self, keys, files) -> None:
            pass

    store, helper = helped
    mine, shared = Heard(False), Heard(True)
    store.listeners += [mine, shared]
    put(store, "http://h.example/heard", b"<p>heard</p>")
    assert helper.pid is not None
    assert mine.puts == [canonicalize("http://h.example/heard").file] and shared.puts == []


def test_the_helper_outlasts_a_sigterm_to_the_group(helped):
    """systemd stops a service with SIGTERM to every process of it: the helper goes on until
    the proxy, stopping, closes its pipe."""
    store, helper = helped
    put(store, "http://h.example/before", b"before")
    pid = helper.pid
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    put(store, "http://h.example/after", b"after")
    assert helper.pid == pid
    assert records(store, "http://h.example/after")[1][1] == b"after"


def test_an_exchange_is_sent_as_built_in_types_whatever_types_it_came_in(helped):
    """aiohttp's header names are ``str`` subclasses and a status may be an ``IntEnum``:
    marshal refuses both, so each is sent as its built-in type."""
    import http
    import marshal

    from multidict import istr

    from wwwproxy.archive.warc import HTTPRequest, HTTPResponse

    store, helper = helped
    u = canonicalize("http://h.example/typed")
    request = HTTPRequest("GET", [(istr("User-Agent"), "moth/1"), ("Accept", b"*/*")])
    response = HTTPResponse(http.HTTPStatus.OK, "OK", [(istr("Content-Type"), "text/plain")])
    sent = recordproc._encode_put(store, u, u.file, request, response, WHEN, bytearray(b"ok"))  # noqa: SLF001
    assert marshal.loads(marshal.dumps(sent)) == sent
    assert sent[5] == [("User-Agent", "moth/1"), ("Accept", b"*/*")] and sent[10] == 200
    assert type(sent[5][0][0]) is str and type(sent[10]) is int and type(sent[-1]) is bytes
    lines = helper.put(store, u, u.file, request, response, WHEN)
    assert lines is not None and helper.failures == 0
