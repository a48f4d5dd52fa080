"""The full-text search index: decoding, text extraction, safe queries, and staying in step
with a real Store (listener, revisits, deletes, rebuild)."""

from __future__ import annotations

import gzip
import sqlite3
import threading
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.archive.search import (
    SEARCH_DB,
    SearchIndex,
    decode_text,
    extract_text,
    fts_query,
)
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize


def put(store: Store, url: str, body: bytes, headers, status=200, when=None) -> None:
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"", date=when)
    rec.write(body)
    rec.finish(status, "OK", headers)


HTML = [("Content-Type", "text/html; charset=utf-8")]


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    yield store, index
    index.close()


# --- pure parts ----------------------------------------------------------------------------


def test_decode_text_by_bom_header_and_meta():
    assert decode_text("café".encode("latin-1"), "text/html; charset=ISO-8859-1") == "café"
    meta = b'<meta charset="windows-1252"><p>\x93q\x94'
    assert decode_text(meta, "text/html") == '<meta charset="windows-1252"><p>\u201cq\u201d'
    assert decode_text(b"\xff\xfe" + "é".encode("utf-16-le"), None) == "é"
    assert decode_text(b"\xef\xbb\xbfok", "text/plain") == "ok"
    assert decode_text(b"bad \xff byte", "text/plain; charset=nonsense") == "bad \ufffd byte"


def test_extract_text_keeps_what_a_reader_sees():
    title, text = extract_text(
        "<html><head><title>The <b> &amp; title</title><style>p{x:1}</style>"
        "<script>var secret=1</script></head><body><p>One</p><p>two&nbsp;three</p>"
        "<template>hidden</template></body></html>"
    )
    assert title == "The <b> & title"
    assert text == "One two three"
    assert "secret" not in text and "hidden" not in text and "x:1" not in text
    assert extract_text("plain\n\ntext\x00here", "text/plain") == ("", "plain text here")


@pytest.mark.parametrize(
    ("page", "text"),
    [
        ("w<b>or</b>d<span class=x>s</span>", "words"),  # inline tags join
        (
            "one<p>two</p>three<BR>four<Td>five<h1>six</H1>seven",
            "one two three four five six seven",
        ),
        ("a<DIV CLASS='x>y'>b</Div>c<hR/>d<TABLE><tr><TH>e", "a b c d e"),
        ("a<pre>b</pre>c<progress>d</progress>e", "a b cde"),  # <progress> is no <p>
        ("a<h7>b</h7>c<dl><dt>d<dd>e</dl>f<header>g", "abc d e f g"),
        # "\u017f" (long s) folds to "s" in Unicode, but a tag name starts with an ASCII
        # letter: a browser shows this as text, not as <section>
        ("a<\u017fection>b", "a<\u017fection>b"),
    ],
)
def test_block_tags_separate_words_in_either_case(page, text):
    assert extract_text(page) == ("", text)


@pytest.mark.parametrize(
    ("page", "text"),
    [
        ("a<SCRIPT type=x>b</script >c<Style>d</STYLE>e", "a c e"),
        ("a<noframes>b</noframes>c<TEMPLATE>d</template>e<script>f", "a c e"),  # to the end
        ("a<scripts>b</scripts>c<sty>d", "abcd"),  # other names: their text shows
        ("a<s>b</s>c<t>d<n>e<strong>f</strong>", "abcdef"),  # the same first letters
        # long s folds to "s" under re.I: this text was always hidden, and stays so (a page's
        # text may not change, or its terms could not be deleted from the index)
        ("a<\u017fcript>b</script>c", "a"),  # and to the end: its end tag is another name
    ],
)
def test_hidden_elements_leave_no_text(page, text):
    assert extract_text(page) == ("", text)


def test_fts_query_quotes_every_token():
    """FTS5's own tokenizer splits the words (the index keeps no positions, so a phrase
    could not be matched): every token quoted, folded as the index folds it."""
    assert fts_query("hello world") == '"hello" "world"'
    assert fts_query('say "hi"') == '"say" "hi"'
    assert fts_query("pre*") == '"pre"*'
    assert fts_query("Foo-Bar* CAFÉ") == '"foo" "bar"* "cafe"'
    assert fts_query("*** ( ) -") is None
    assert fts_query("") is None


@settings(max_examples=150)
@given(st.text(max_size=30))
def test_no_query_raises(tmp_path_factory, query):
    """Nor does making its snippets: the words are looked for in a recorded page's source."""
    index = _shared_index(tmp_path_factory)
    result = index.search(query)
    assert result.total >= 0
    for hit in result.hits:
        assert all(text for text, _ in hit.snippet)


_INDEXES: dict[str, SearchIndex] = {}


def _shared_index(factory) -> SearchIndex:
    if "x" not in _INDEXES:
        store = Store(factory.mktemp("search") / "cache")
        index = SearchIndex(store.root)
        index.attach(store)
        index.add("http://e.example/", "http://e.example/", title="Example", text="some words")
        page = "<title>Mixed</title><p>Some wörds, ÉTÉ 1–2 \\d+ [a-z]* (x|y) a_b İstanbul ﬁne</p>"
        put(store, "http://e.example/mixed", page.encode(), HTML)
        index.flush()
        _INDEXES["x"] = index
    return _INDEXES["x"]


# --- with a real store -----------------------------------------------------------------------


def test_recorded_pages_are_indexed_at_once(store):
    store, index = store
    put(store, "http://e.example/a", b"<title>Alpha</title><p>red fox</p>", HTML)
    put(
        store,
        "http://e.example/gz",
        gzip.compress(b"<title>Zed</title>zipped fox"),
        [*HTML, ("Content-Encoding", "gzip")],
    )
    put(store, "http://e.example/img.png", b"\x89PNG fox", [("Content-Type", "image/png")])
    put(store, "http://e.example/missing", b"<title>404</title>fox", HTML, status=404)
    results = index.search("fox")
    assert [h.url for h in results.hits] == ["http://e.example/a", "http://e.example/gz"]
    assert results.hits[0].title == "Alpha"
    assert any(hit for _, hit in results.hits[0].snippet)
    assert [h.url for h in index.search("img.png").hits] == ["http://e.example/img.png"]
    assert index.count() == (4, 2)


def test_titles_rank_first_and_url_matches_follow(store):
    store, index = store
    put(store, "http://e.example/body", b"<title>x</title>kiwi kiwi kiwi", HTML)
    put(store, "http://e.example/title", b"<title>Kiwi</title>other", HTML)
    put(store, "http://e.example/kiwi.css", b"a{}", [("Content-Type", "text/css")])
    assert [h.url for h in index.search("kiwi").hits] == [
        "http://e.example/title",
        "http://e.example/body",
        "http://e.example/kiwi.css",
    ]
    page = index.search("kiwi", limit=1, offset=1)
    assert page.total == 3 and [h.url for h in page.hits] == ["http://e.example/body"]


def test_new_capture_replaces_the_text_and_revisit_keeps_it(store):
    store, index = store
    url = "http://e.example/p"
    put(store, url, b"<title>v1</title>apple", HTML, when=datetime(2020, 1, 1, tzinfo=UTC))
    put(store, url, b"<title>v2</title>banana", HTML, when=datetime(2021, 1, 1, tzinfo=UTC))
    assert index.search("apple").total == 0 and index.search("banana").total == 1
    put(store, url, b"<title>v2</title>banana", HTML, when=datetime(2022, 1, 1, tzinfo=UTC))
    (hit,) = index.search("banana").hits
    assert hit.title == "v2" and hit.fetched.startswith("2022")


def test_an_error_answer_never_replaces_the_good_page(store):
    store, index = store
    url = "http://e.example/kept"
    put(store, url, b"<title>good</title>cherry", HTML, when=datetime(2020, 1, 1, tzinfo=UTC))
    put(store, url, b"gone", HTML, status=404, when=datetime(2021, 1, 1, tzinfo=UTC))
    index.flush()
    (hit,) = index.search("cherry").hits
    assert hit.title == "good" and hit.fetched.startswith("2020")


def test_remove_remove_files_prune_and_rebuild(store):
    store, index = store
    for name in ("a", "b", "c"):
        put(store, f"http://e.example/{name}", f"<title>{name}</title>pear".encode(), HTML)
    assert index.remove("http://e.example/a") and not index.remove("http://e.example/a")
    b = store.path_for(canonicalize("http://e.example/b"))
    assert index.remove_files([store.warcfile_name(b)]) == 1
    assert [h.url for h in index.search("pear").hits] == ["http://e.example/c"]
    store.path_for(canonicalize("http://e.example/c")).unlink()
    assert index.prune(store) == 1 and index.search("pear").total == 0
    # rebuild from the index: a and b are still in the cache
    assert index.rebuild(store) == 2  # c's index line is still there, its file is not
    assert sorted(h.url for h in index.search("pear").hits) == [
        "http://e.example/a",
        "http://e.example/b",
    ]


def test_rebuild_indexes_a_revisit_from_its_original(tmp_path):
    store = Store(tmp_path / "cache")
    url = "http://e.example/r"
    put(store, url, b"<title>R</title>cherry", HTML, when=datetime(2020, 1, 1, tzinfo=UTC))
    put(store, url, b"<title>R</title>cherry", HTML, when=datetime(2021, 1, 1, tzinfo=UTC))
    index = SearchIndex(store.root)
    assert index.search("cherry").total == 0
    assert index.rebuild(store) == 1
    (hit,) = index.search("cherry").hits
    assert hit.title == "R" and hit.fetched.startswith("2021")


def test_attach_follows_once_and_survives_reopen(tmp_path):
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    index.attach(store)
    assert len(store.listeners) == 1
    put(store, "http://e.example/", b"<title>T</title>plum", HTML)
    assert index.flush()  # pages are indexed in a worker thread, after the recording
    again = SearchIndex(store.root)
    assert again.search("plum").total == 1
    assert (store.root / SEARCH_DB).exists()
    index.close()
    again.close()


def test_store_deletes_and_purges_reach_the_index(store):
    """The store tells its listeners what it removes: nobody updates the index by hand."""
    store, index = store
    for name in ("a", "b", "c"):
        put(store, f"http://d.example/{name}", f"<title>{name}</title>fig".encode(), HTML)
    put(store, "http://k.example/", b"<title>k</title>fig", HTML)
    assert index.search("fig").total == 4
    assert store.delete(canonicalize("http://d.example/a"))
    assert sorted(h.url for h in index.search("fig").hits) == [
        "http://d.example/b",
        "http://d.example/c",
        "http://k.example/",
    ]
    assert store.purge(None, canonicalize("http://d.example/")).pages == 2
    assert [h.url for h in index.search("fig").hits] == ["http://k.example/"]
    assert store.delete_host("http", "k.example").pages == 1
    assert index.search("fig").total == 0 and index.count() == (0, 0)


def test_a_page_recorded_just_before_its_delete_does_not_come_back(store):
    store, index = store
    for i in range(20):  # a backlog for the indexing thread
        put(store, f"http://r.example/{i}", b"<title>t</title>quince", HTML)
    store.delete_host("http", "r.example")
    assert index.flush() and index.search("quince").total == 0


def test_a_corrupt_database_is_a_clear_error(tmp_path):
    (tmp_path / SEARCH_DB).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="not a usable search database"):
        SearchIndex(tmp_path)


def test_listener_failure_never_breaks_recording(tmp_path):
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    index.close()  # every write to the search index now fails
    put(store, "http://e.example/", b"<title>T</title>x", HTML)
    assert len(store.captures("http://e.example/")) == 1
    with pytest.raises(sqlite3.ProgrammingError):
        index.count()


# --- the indexing thread: batches, merges in pauses, a bounded queue ----------------------------


def test_a_full_queue_never_blocks_recording_and_is_caught_up_from_the_index(store, monkeypatch):
    """Past MAX_PENDING waiting pages, recording goes on: the pages left out are found in
    the store's CDXJ index once the indexing thread is free, none lost."""
    from wwwproxy.archive.search import worker as worker_module

    store, index = store
    monkeypatch.setattr(worker_module, "MAX_PENDING", 3)
    busy, go = threading.Event(), threading.Event()

    def slow_job():
        busy.set()
        go.wait(60)

    index.indexing.enqueue(slow_job)  # the thread is busy: pages wait in the queue
    assert busy.wait(60)
    for i in range(10):
        put(store, f"http://q.example/{i}", f"<title>{i}</title>medlar".encode(), HTML)
    assert len(list(store.list_prefix(""))) >= 10  # all recorded, none waited for the index
    assert index.indexing._pending.qsize() == 3 and index.indexing._behind is store
    go.set()
    assert index.flush(60)
    assert index.search("medlar", limit=20).total == 10
    assert index.count() == (10, 10)


def test_a_search_waits_for_the_pages_recorded_before_it_not_for_an_empty_queue(store):
    """While pages keep being recorded the queue is seldom empty: a search (or ``/``'s
    count) that waited for that took its whole time-out, holding a command pages' thread, and
    an hour into the soak they piled up until every command page timed out.  Here a job
    queued after the search began stays unfinished; the search's page is indexed all the
    same, and the wait ends without its time-out."""
    store, index = store
    started, first = threading.Event(), threading.Event()
    busy_later, go = threading.Event(), threading.Event()

    def block_first():
        started.set()
        first.wait(60)

    def block_later():  # queued after the wait began: a page recorded after the search
        busy_later.set()
        go.wait(60)

    index.indexing.enqueue(block_first)
    assert started.wait(60)
    put(store, "http://w.example/", b"<title>W</title>quince", HTML)  # waits in the queue
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(index.indexing.wait(5.0)))
    waiter.start()
    try:
        for _ in range(6000):  # the waiter has taken its number
            if index.indexing._waiters:
                break
            threading.Event().wait(0.01)
        index.indexing.enqueue(block_later)
        first.set()
        assert busy_later.wait(60)  # the later job runs (and stays unfinished) ...
        waiter.join(60)
        assert waited == [True]  # ... and the wait ended when the page was indexed
        assert index.indexing._pending.unfinished_tasks  # (the queue was not empty)
        assert index.search("quince").total == 1
    finally:
        first.set()
        go.set()
        waiter.join(60)
    assert index.flush(60)  # flush waits for every job, the later one too
    assert index.indexing._pending.unfinished_tasks == 0


def test_a_merge_waits_for_a_pause_and_flush_merges_at_once(store, monkeypatch):
    from wwwproxy.archive.search import worker as worker_module

    store, index = store
    monkeypatch.setattr(worker_module, "MERGE_IDLE", 600.0)
    for i in range(5):
        put(store, f"http://m.example/{i}", b"<title>t</title>sloe", HTML)
    assert index.search("sloe").total == 5  # indexed (a search waits for the pages) ...
    assert index._meta("unmerged") == 5  # ... not merged yet: more pages may come
    assert index.flush(60)
    assert index._meta("unmerged") == 0
    assert index.search("sloe").total == 5


def test_closing_twice_writes_nothing_and_logs_nothing(tmp_path, caplog):
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    put(store, "http://c.example/", b"<title>T</title>rowan", HTML)
    index.close()
    index.close()  # the services and the server both close it on the way out
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []


@given(st.text())
@settings(max_examples=300)
def test_clean_turns_each_control_character_to_a_space_and_collapses_runs(text):
    """clean() by str.translate is the regular expression's result exactly (the terms of
    pages indexed before must come out of their text the same)."""
    import re

    from wwwproxy.archive.search.text import CONTROL, clean

    assert CONTROL.pattern == r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
    assert clean(text) == " ".join(re.sub(CONTROL, " ", text).split())
    every = "".join(map(chr, range(0x3000)))
    assert clean(every) == " ".join(CONTROL.sub(" ", every).split())


@given(
    st.lists(st.sampled_from(["a", "bc", " ", "\n", "\x00", "\xa0", "é", "  "])).map("".join),
    st.integers(min_value=0, max_value=40),
)
@settings(max_examples=500)
def test_clean_capped_is_clean_cut_at_the_cap(text, cap):
    """Cleaning only the prefix a capped text needs gives what cleaning all and cutting
    gives: the same terms for a page however long its text."""
    from wwwproxy.archive.search.text import clean, clean_capped

    assert clean_capped(text, cap) == clean(text)[:cap]


def test_a_long_pages_text_is_cut_the_same_with_less_cleaned():
    from wwwproxy.archive.search.text import MAX_TEXT, clean, clean_capped

    words = " \n ".join(f"w{n}\x01x" for n in range(200_000))  # 2 MB: past the prefix
    assert len(words) > MAX_TEXT * 2
    assert clean_capped(words, MAX_TEXT) == clean(words)[:MAX_TEXT]
    spaced = " " * (MAX_TEXT * 2) + "last words"  # the prefix cleans to nothing: all of it
    assert clean_capped(spaced, MAX_TEXT) == "last words"
