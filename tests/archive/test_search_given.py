"""The search index takes a recorded page's payload from the store (no reading it back from
its WARC file): the same text is indexed either way, and what waits in memory is bounded."""

from __future__ import annotations

import gzip
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.search import capture as capture_module
from wwwproxy.archive.search import text as text_module
from wwwproxy.archive.search import worker as worker_module
from wwwproxy.archive.store import RecordedPayload, Store
from wwwproxy.url import URL, canonicalize

HTML = [("Content-Type", "text/html; charset=utf-8")]

LATIN1 = [("Content-Type", "text/html; charset=ISO-8859-1")]
NO_CHARSET = [("Content-Type", "text/html")]
GZIP = [*HTML, ("Content-Encoding", "gzip")]
XHTML = b"<html xmlns='http://www.w3.org/1999/xhtml'><title>X</title><p>x</p></html>"

#: (path, body, headers, status): what a crawl meets, each decoded its own way
PAGES = [
    ("/utf8", "<title>Café</title><p>crème brûlée</p>".encode(), HTML, 200),
    ("/latin1", "<title>été</title>ça".encode("latin-1"), LATIN1, 200),
    ("/meta", b'<meta charset="windows-1252"><title>q</title>\x93quoted\x94', NO_CHARSET, 200),
    ("/untyped", b"<title>none</title>no type at all", [], 200),
    ("/gz", gzip.compress(b"<title>Zed</title>zipped words"), GZIP, 200),
    ("/plain", b"plain text\x00with a NUL", [("Content-Type", "text/plain")], 200),
    ("/xhtml", XHTML, [("Content-Type", "application/xhtml+xml")], 200),
    ("/image", b"\x89PNG not text", [("Content-Type", "image/png")], 200),
    ("/error", b"<title>404</title>missing", HTML, 404),
    ("/big", b"<title>Big</title>" + b"<p>many words here " * 70_000, HTML, 200),  # > GIVEN_MAX
]


def put(store: Store, url: str, body: bytes, headers, status=200) -> None:
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"")
    rec.write(body)
    rec.finish(status, "OK", headers)


def rows(index: SearchIndex) -> dict[str, tuple]:
    """Each page's row as the index keeps it; the digest is that of the title, the text and
    the ranking terms indexed."""
    index.flush()
    with index._lock:
        return {
            key: (title, mime, status, digest, doc is not None)
            for key, title, mime, status, digest, doc in index._conn.execute(
                "SELECT key, title, mime, status, digest, doc FROM pages"
            )
        }


def test_the_given_payload_indexes_the_same_text_as_the_archive(tmp_path):
    """Every page indexed while it was recorded (its payload handed over, or read back when
    too large) has the row a rebuild reading each capture from its WARC file makes."""
    store = Store(tmp_path / "cache")
    live = SearchIndex(store.root)
    live.attach(store)
    for path, body, headers, status in PAGES:
        put(store, f"http://g.example{path}", body, headers, status)
    assert len(PAGES[-1][1]) > worker_module.GIVEN_MAX
    recorded = rows(live)
    rebuilt_index = SearchIndex(store.root, path=tmp_path / "rebuilt.sqlite3")
    assert rebuilt_index.rebuild(store) == len(PAGES)
    rebuilt = rows(rebuilt_index)
    assert recorded == rebuilt
    assert (
        sum(has_text for *_, has_text in recorded.values()) == 7
    )  # not the image, the 404, the untyped page
    assert recorded["http://g.example/latin1"][0] == "été"
    assert live.search("brûlée").total == 1 and live.search("zipped").total == 1
    assert live.indexing._given_bytes == 0  # what waited in memory was given back
    live.close()
    rebuilt_index.close()


class Recording:
    """A listener that wants payloads: keeps what it was handed (read while it is called)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, list[str], bytes | None, dict[str, str] | None]] = []

    def on_put(self, url: URL, key: str, lines) -> None:
        raise AssertionError("on_put_payload is called instead")

    def on_put_payload(self, url: URL, key: str, lines, payload: RecordedPayload | None) -> None:
        body = payload.read() if payload is not None else None
        headers = dict(payload.http_headers) if payload is not None else None
        if payload is not None:
            assert payload.length == len(body)
        self.got.append((key, [line.record_type for line in lines], body, headers))

    def on_delete(self, keys, files) -> None:
        pass


class Plain:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def on_put(self, url: URL, key: str, lines) -> None:
        self.keys.append(key)

    def on_delete(self, keys, files) -> None:
        pass


def test_the_store_hands_the_recorded_payload_to_listeners_that_want_it(tmp_path):
    store = Store(tmp_path / "cache")
    wants, plain = Recording(), Plain()
    store.listeners += [wants, plain]
    body = b"<title>T</title>handed over"
    put(store, "http://h.example/", body, HTML)
    put(store, "http://h.example/", body, HTML)  # the same payload again: a revisit
    put(store, "http://h.example/", b"", HTML, status=204)
    (key, first, got, headers), (_, second, none, _), (_, third, empty, _) = wants.got
    assert key == "http://h.example/" and plain.keys == [key, key, key]
    assert first == ["response"] and got == body
    assert headers == {"Content-Type": "text/html; charset=utf-8"}
    assert second == ["revisit"] and none is None  # the text is the previous capture's
    assert third == ["response"] and empty == b""


def test_index_capture_indexes_the_payload_it_is_given(tmp_path):
    """The given payload is what is indexed: the file is not read (its text differs here)."""
    store = Store(tmp_path / "cache")
    put(store, "http://i.example/", b"<title>Filed</title>alpha", HTML)
    (line,) = [line for line in store.list_prefix("") if line.record_type == "response"]
    index = SearchIndex(store.root)
    given = capture_module.Given(
        gzip.compress(b"<title>Given</title>beta"), (*HTML, ("Content-Encoding", "gzip"))
    )
    with index.batch():
        assert index.index_capture(store, line, given)
    assert index.search("beta").total == 1 and index.search("alpha").total == 0
    with index.batch():  # without: read from the file
        assert index.index_capture(store, line)
    assert index.search("alpha").total == 1 and index.search("beta").total == 0
    index.close()


def test_payloads_past_the_budget_are_read_back_and_none_is_lost(tmp_path, monkeypatch):
    """While the indexing thread is busy, pages past GIVEN_BUDGET bytes wait without their
    payload (read back from the file when their turn comes); every page is indexed."""
    monkeypatch.setattr(worker_module, "GIVEN_BUDGET", 2500)
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    busy, go = threading.Event(), threading.Event()

    def slow_job():
        busy.set()
        go.wait(60)

    index.indexing.enqueue(slow_job)
    assert busy.wait(60)
    for i in range(6):
        put(store, f"http://b.example/{i}", b"<title>t</title>quince " + b"x" * 1000, HTML)
    waiting = [
        job for job in list(index.indexing._pending.queue) if isinstance(job, worker_module.Capture)
    ]
    assert [job.given is not None for job in waiting] == [True, True, False, False, False, False]
    assert index.indexing._given_bytes == sum(len(job.given.payload) for job in waiting[:2])
    go.set()
    assert index.flush(60)
    assert index.search("quince", limit=20).total == 6
    assert index.indexing._given_bytes == 0
    index.close()


def test_a_payload_not_at_hand_is_read_back(tmp_path):
    """A payload whose spool changed after it was recorded is not indexed from memory: the
    page is read back from its file (the recording itself stands)."""
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    u = canonicalize("http://s.example/")
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"")
    rec.write(b"<title>S</title>sorrel")

    class Spoil:
        """Runs before the index's listener: overwrites the spool the payload is read from."""

        def on_put(self, url, key, lines) -> None:
            rec_spool.seek(0)
            rec_spool.write(b"<title>X</title>spoilt")

        def on_delete(self, keys, files) -> None:
            pass

    rec_spool = rec._spool
    store.listeners.insert(0, Spoil())
    rec.finish(200, "OK", HTML)
    assert index.search("sorrel").total == 1 and index.search("spoilt").total == 0
    assert index.indexing._given_bytes == 0
    index.close()


def _rank_text_reference(text: str) -> str:
    """rank_text as it was first written (most_common over every term): the ranking terms
    are part of each page's digest in the index, so they must never change."""
    import unicodedata
    from collections import Counter

    sample = unicodedata.normalize("NFC", text[: text_module.RANK_CHARS].lower())
    pattern = (
        text_module._TERM_PRIVATE if text_module._PRIVATE.search(sample) else text_module._TERM
    )
    top = Counter(pattern.findall(sample)).most_common(text_module.RANK_TERMS)
    repeat = text_module.RANK_REPEAT
    return "".join((term + " ") * min(n, repeat) for term, n in top if n >= 2).rstrip()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "cé", "d1", "E", "f_g", "\ue000x", "Ω", "z"]), max_size=400)
)
def test_rank_text_gives_the_terms_it_always_gave(words):
    text = " ".join(words)
    assert text_module.rank_text(text) == _rank_text_reference(text)


def test_rank_text_keeps_the_first_seen_of_equal_counts_past_the_limit():
    words = [f"w{i}" for i in range(text_module.RANK_TERMS + 30)]
    text = " ".join(words * 2 + ["late"] * 5)
    ranked = text_module.rank_text(text)
    assert ranked == _rank_text_reference(text)
    # 64 terms: "late" (most often), then the first 63 seen of those seen twice
    assert ranked.startswith("late late late w0 w0 w1 w1") and ranked.endswith("w62 w62")
    assert len(set(ranked.split())) == text_module.RANK_TERMS


def test_a_page_failing_in_a_batch_leaves_nothing_and_the_others_are_indexed(tmp_path, caplog):
    """A batch has no savepoint per page: when one page fails midway (here the database
    refuses its row after its text went in), the batch is rolled back and its pages indexed
    again one by one: the others are kept, the failing one leaves no trace, and is logged."""
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    with index._lock, index._conn:
        index._conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON pages WHEN NEW.key = 'http://f.example/bad' "
            "BEGIN SELECT RAISE(ABORT, 'refused for the test'); END"
        )
    busy, go = threading.Event(), threading.Event()

    def slow_job():
        busy.set()
        go.wait(60)

    index.indexing.enqueue(slow_job)  # the pages wait together: one batch
    assert busy.wait(60)
    for name in ("one", "bad", "two"):
        put(store, f"http://f.example/{name}", f"<title>{name}</title>rowan".encode(), HTML)
    assert index.indexing._pending.qsize() == 3
    go.set()
    assert index.flush(60)
    assert sorted(h.url for h in index.search("rowan").hits) == [
        "http://f.example/one",
        "http://f.example/two",
    ]
    assert index.count() == (2, 2)
    assert index.garbage() == (0, 2)  # the refused page's text was taken back with it
    assert index._meta("next_doc") == 3  # documents 1 and 2: the refused one took none
    assert any("http://f.example/bad not indexed" in r.getMessage() for r in caplog.records)
    index.close()
