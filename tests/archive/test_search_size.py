"""The search index keeps no text (issue 11): at most half the size of the WARC data it
indexes, snippets made from the archive with the words still marked, a page's old terms taken
out exactly when it changes, garbage compacted away after deletes, and a database in the old
format (the text stored in FTS5) replaced and rebuilt from the cache."""

from __future__ import annotations

import random
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wwwproxy.archive.search import SEARCH_DB, SearchIndex
from wwwproxy.archive.search.schema import SCHEMA_VERSION
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

HTML = [("Content-Type", "text/html; charset=utf-8")]


def put(store: Store, url: str, body: bytes, headers=HTML, status=200, when=None) -> None:
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"", date=when)
    rec.write(body)
    rec.finish(status, "OK", headers)


def marked(hit) -> list[str]:
    return [text.lower() for text, hit_word in hit.snippet if hit_word]


def db_bytes(path: Path) -> int:
    """The database's size on disk once its write-ahead log is folded in."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


# --- a corpus of real-looking pages ------------------------------------------------------------

_COMMON = (
    "the of and to a in is it you that he was for on are with as his they be at one have this "
    "from or had by word but what some we can out other were all there when up use your how said "
    "an each she which do their time if will way about many then them write would like so these "
    "her long make thing see him two has look more day could go come did number sound no most "
    "people my over know water than call first who may down side been now find any new work part "
    "take get place made live where after back little only round man year came show every good"
)
COMMON = _COMMON.split()


def vocabulary(rng: random.Random, size: int = 8000) -> list[str]:
    onsets = "b bl br c ch cr d dr f fl g gr h j k l m n p pl pr r s sh st str t th tr v w z"
    vowels = "a e i o u ai ea ee oa ou io"
    codas = "n r s t l nd nt st ng ck m rd ll ss x tion ment ness able ing ed er"
    made: set[str] = set()
    while len(made) < size:
        syllables = rng.randint(1, 3)
        made.add(
            "".join(
                rng.choice(onsets.split()) + rng.choice(vowels.split()) for _ in range(syllables)
            )
            + rng.choice(codas.split())
        )
    rest = sorted(made - set(COMMON))
    rng.shuffle(rest)
    return COMMON + rest


def corpus(pages: int, seed: int = 7) -> list[tuple[str, bytes]]:
    """Pages of one site: shared navigation and footer, headings, paragraphs, lists and code
    of Zipf-distributed words, 4-20 KB each."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    cum: list[float] = []
    total = 0.0
    for rank in range(len(words)):
        total += 1.0 / (rank + 2.7)
        cum.append(total)

    def sentence() -> str:
        text = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(5, 22)))
        return text[0].upper() + text[1:] + rng.choice("....?!")

    nav = "".join(f'<li><a href="/{w}.html">{w.title()}</a></li>' for w in words[300:330])
    out = []
    for n in range(pages):
        title = " ".join(rng.choices(words, cum_weights=cum, k=4)).title()
        parts = [
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>'
            '<link rel="stylesheet" href="/s.css"><script>var page = 1;</script></head><body>'
            f'<nav class="menu"><ul>{nav}</ul></nav><main><h1>{title}</h1>'
        ]
        size = rng.randint(4000, 20000)
        while sum(map(len, parts)) < size:
            kind = rng.random()
            if kind < 0.1:
                parts.append(f"<h2>{sentence()}</h2>\n")
            elif kind < 0.2:
                parts.append("<ul>" + "".join(f"<li>{sentence()}</li>" for _ in range(3)) + "</ul>")
            elif kind < 0.25:
                parts.append(f"<pre><code>def {rng.choice(words)}(x):\n    return x</code></pre>")
            else:
                parts.append(
                    "<p>" + " ".join(sentence() for _ in range(rng.randint(2, 6))) + "</p>\n"
                )
        parts.append('</main><footer><p>&copy; Example. <a href="/about">About</a></p></footer>')
        out.append((f"http://docs.example/{n}.html", "".join(parts).encode()))
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """200 pages recorded as the proxy records them: indexed one by one as they come."""
    store = Store(tmp_path_factory.mktemp("site") / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    pages = corpus(200)
    deep = pages[17][1].replace(b"</main>", b"<p>The quokkaberry harvest.</p></main>")
    pages[17] = (pages[17][0], deep)
    for n, (url, body) in enumerate(pages):
        put(store, url, body, when=start + timedelta(seconds=n))
    assert index.flush(60)
    yield store, index
    index.close()


def test_the_index_is_at_most_half_the_warc_data_it_indexes(site):
    store, index = site
    warc = sum(p.stat().st_size for p in store.warc_files())
    assert index.count() == (200, 200)
    size = db_bytes(index.path)
    assert size <= 0.5 * warc, (size, warc)  # was 2.9x in the old format
    # a rebuild (merged into one b-tree a table, and vacuumed)
    assert index.rebuild(store) == 200
    rebuilt = db_bytes(index.path)
    assert rebuilt <= 0.45 * warc, (rebuilt, warc)


def test_snippets_are_made_from_the_archive_with_the_words_marked(site):
    store, index = site
    (hit,) = index.search("quokkaberry").hits  # the last paragraph of a long page
    assert hit.url == "http://docs.example/17.html"
    assert marked(hit) == ["quokkaberry"]
    assert hit.snippet_text.startswith("…") and "harvest" in hit.snippet_text
    results = index.search("water", limit=20)
    assert results.total > 20 and len(results.hits) == 20
    assert all(marked(h) and set(marked(h)) <= {"water"} for h in results.hits)
    # without the store there is nothing to make a snippet from: the hits are still found
    bare = SearchIndex(store.root)
    try:
        (hit,) = bare.search("quokkaberry").hits
        assert hit.snippet == () and hit.url == "http://docs.example/17.html"
    finally:
        bare.close()


def test_a_page_about_a_word_ranks_above_one_that_mentions_it(store):
    store, index = store
    filler = " ".join(f"word{i}" for i in range(300))
    put(store, "http://r.example/once", f"<title>a</title><p>{filler} kiwi</p>".encode())
    put(store, "http://r.example/about", f"<title>b</title><p>kiwi {filler} kiwi</p>".encode())
    put(store, "http://r.example/title", f"<title>Kiwi</title><p>{filler}</p>".encode())
    urls = [h.url for h in index.search("kiwi").hits]
    assert urls == ["http://r.example/title", "http://r.example/about", "http://r.example/once"]
    (hit,) = index.search("kiwi", limit=1, offset=2).hits
    assert marked(hit) == ["kiwi"]


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    yield store, index
    index.close()


def test_snippets_find_the_words_where_a_reader_sees_them(store):
    store, index = store
    big = " ".join(f"filler{i}" for i in range(15000))  # ~160 KB before the word
    deep = f'<title>Deep</title><a href="/mango/x">link</a><p>{big}</p><p>ripe mango here</p>'
    put(store, "http://s.example/deep", deep.encode())
    put(store, "http://s.example/fr", "<title>Menu</title><p>Une crème brûlée</p>".encode())
    put(
        store,
        "http://s.example/latin1",
        "<title>t</title><p>Caf&eacute; au lait, CAFÉ noir</p>".encode(),
    )
    put(
        store,
        "http://s.example/plain.txt",
        b"line one\nsome words: mango",
        [("Content-Type", "text/plain")],
    )
    filler = " ".join(f"text{i}" for i in range(600))
    site_nav = '<nav><a href="/papaya">Papaya</a></nav>'
    put(
        store,
        "http://s.example/nav",
        f"{site_nav}<main><p>{filler} fresh papaya juice</p>".encode(),
    )
    (hit,) = index.search("papaya").hits  # not the site's navigation, the page's own text
    assert marked(hit) == ["papaya"] and "juice" in hit.snippet_text
    page = '<nav><a href="/">Home</a></nav><main><h1>Lime pie</h1><script>x>1</script>ok</main>'
    put(store, "http://s.example/pie", page.encode())
    (hit,) = index.search("pie").hits  # nor the navigation before it, nor a tag's end
    assert hit.snippet_text == "…Lime pie ok" and marked(hit) == ["pie"]
    (hit,) = index.search("ripe mango").hits
    assert marked(hit) == ["ripe", "mango"] and hit.snippet_text.startswith("…")
    (hit,) = index.search("creme brulee").hits  # folded as the index folds
    assert marked(hit) == ["crème", "brûlée"]
    (hit,) = index.search("cafe").hits  # found by CAFÉ; the entity is marked too
    assert marked(hit) == ["café", "café"]
    (hit,) = index.search("words").hits
    assert hit.url.endswith("plain.txt") and marked(hit) == ["words"]
    (hit,) = index.search("menu").hits  # only in the title: the start of the text
    assert hit.snippet == (("Une crème brûlée", False),)


def test_a_changed_page_leaves_no_terms_behind(store):
    """A contentless FTS5 table forgets terms only when given the very text again: the old
    capture is read back from its cache file, so nothing is left to compact."""
    store, index = store
    url = "http://c.example/p"
    for n, word in enumerate(["apple", "banana", "cherry"]):
        when = datetime(2020 + n, 1, 1, tzinfo=UTC)
        put(store, url, f"<title>v{n}</title><p>{word} {word}</p>".encode(), when=when)
    assert index.flush()
    assert index.garbage() == (0, 1)
    assert index.search("apple").total == 0 and index.search("banana").total == 0
    (hit,) = index.search("cherry").hits
    assert hit.title == "v2" and marked(hit) == ["cherry", "cherry"]
    conn = sqlite3.connect(index.path)
    try:  # FTS5's own check of its index (raises if the deletes had corrupted it)
        for table in ("page_words", "page_rank"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
    finally:
        conn.close()


def test_deleted_pages_are_compacted_away(store):
    store, index = store
    for n, (url, body) in enumerate(corpus(90, seed=3)):
        host = "gone.example" if n < 70 else "kept.example"
        put(store, url.replace("docs.example", host), body)
    assert index.flush(60)
    before = db_bytes(index.path)
    found = {h.url for h in index.search("water", limit=200).hits}
    kept = {url for url in found if "kept.example" in url}
    assert len(found) > 60 and len(kept) > 10
    store.delete_host("http", "gone.example")  # their files are gone: garbage ...
    assert index.flush(60)  # ... compacted in the indexing thread
    assert index.garbage() == (0, 20) and index.count() == (20, 20)
    assert db_bytes(index.path) < 0.6 * before  # (a database has a fixed part too)
    results = index.search("water", limit=200)
    assert {h.url for h in results.hits} == kept
    assert all(marked(h) == ["water"] * len(marked(h)) and marked(h) for h in results.hits)


# --- the old format ------------------------------------------------------------------------------

OLD_SCHEMA = """
CREATE TABLE pages (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, url TEXT NOT NULL, file TEXT, mime TEXT,
    status INTEGER, fetched TEXT, title TEXT
);
CREATE INDEX pages_file ON pages(file);
CREATE VIRTUAL TABLE page_text USING fts5(title, body, tokenize = 'unicode61 remove_diacritics 2');
INSERT INTO pages VALUES (1, 'http://o.example/', 'http://o.example/', NULL, 'text/html', 200,
    '2020-01-01T00:00:00Z', 'Old');
INSERT INTO page_text(rowid, title, body) VALUES (1, 'Old', 'stored text of the old format');
"""


def test_a_database_in_the_old_format_is_replaced_and_rebuilt(tmp_path):
    """The old database stored every page's text in FTS5 (twice the archive's size): it is
    dropped on opening, and rebuilt from the cache once a store is attached."""
    store = Store(tmp_path / "cache")
    for n in range(3):
        put(store, f"http://o.example/{n}", f"<title>P{n}</title><p>plum {n}</p>".encode())
    path = store.root / SEARCH_DB
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA)
    conn.close()
    index = SearchIndex(store.root)
    try:
        assert index.search("stored").total == 0  # the old text is gone at once
        index.attach(store)
        assert index.flush(30)  # the rebuild runs in the indexing thread
        assert index.count() == (3, 3)
        results = index.search("plum")
        assert sorted(h.title for h in results.hits) == ["P0", "P1", "P2"]
        assert all(marked(h) == ["plum"] for h in results.hits)
    finally:
        index.close()
    conn = sqlite3.connect(path)
    try:
        names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert "page_text" not in names and {"page_words", "page_rank"} <= names
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    finally:
        conn.close()
    # opened again: nothing to migrate, nothing rebuilt
    again = SearchIndex(store.root)
    try:
        again.attach(store)
        assert again.flush() and again.count() == (3, 3)
    finally:
        again.close()


def test_a_migration_cut_short_is_finished_at_the_next_start(tmp_path):
    """The old database is dropped at once, the rebuild runs later: a proxy stopped in
    between rebuilds at its next start (the stale mark is in the database)."""
    store = Store(tmp_path / "cache")
    put(store, "http://o.example/", b"<title>T</title><p>damson</p>")
    conn = sqlite3.connect(store.root / SEARCH_DB)
    conn.executescript(OLD_SCHEMA)
    conn.close()
    SearchIndex(store.root).close()  # migrated, never attached: nothing rebuilt yet
    index = SearchIndex(store.root)
    try:
        assert index.search("damson").total == 0
        index.attach(store)
        assert index.flush(30) and index.search("damson").total == 1
    finally:
        index.close()


def test_a_new_sqlite_or_text_code_rebuilds_the_index(tmp_path):
    """Terms leave a contentless table only when given exactly as they went in: an index made
    by another SQLite (tokenizer) or another version of the text code is rebuilt, not trusted."""
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    put(store, "http://f.example/", b"<title>T</title><p>quince</p>")
    index.close()
    conn = sqlite3.connect(store.root / SEARCH_DB)
    with conn:
        conn.execute("UPDATE meta SET value = 1 WHERE name = 'format'")
        conn.execute("UPDATE pages SET title = 'made by another version'")
    conn.close()
    index = SearchIndex(store.root)
    try:
        index.attach(store)
        assert index.flush(30)
        (hit,) = index.search("quince").hits
        assert hit.title == "T" and marked(hit) == ["quince"] and index.garbage() == (0, 1)
    finally:
        index.close()
    conn = sqlite3.connect(store.root / SEARCH_DB)
    try:
        assert conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone() != (1,)
    finally:
        conn.close()
