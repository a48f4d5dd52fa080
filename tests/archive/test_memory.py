"""The hot-object memory cache: answers repeated GETs without reading the WARC file, and never
serves what the archive would not (a new capture, a delete, another process's write)."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest

from wwwproxy.archive.memory import OVERHEAD, MemoryCache
from wwwproxy.archive.store import Store

from .test_store import T0, put

URL = "http://example.com/page"


def hot_store(root: Path, mib: float = 1.0) -> Store:
    return Store(root, memory_bytes=int(mib * 2**20))


def test_a_repeated_get_comes_from_memory_with_the_same_bytes(tmp_path: Path) -> None:
    store = hot_store(tmp_path)
    url, key, _ = put(store, URL, b"<p>one</p>")
    first = store.get(url, key)
    assert first is not None and first.body == b"<p>one</p>"
    assert store.memory.hits == 0 and len(store.memory) == 1
    second = store.get(url, key)
    assert second is first and store.memory.hits == 1
    with second.open_body() as f:
        assert f.read() == b"<p>one</p>"


def test_a_read_that_does_not_keep_leaves_memory_as_it_was(tmp_path: Path) -> None:
    """The search index reads pages (and its result list reads their copies): those reads must
    not push out the copies browsers are served."""
    store = hot_store(tmp_path)
    url, key, _ = put(store, URL, b"<p>one</p>")
    entry = store.get(url, key, keep=False)
    assert entry is not None and entry.read_body() == b"<p>one</p>"
    assert len(store.memory) == 0 and len(store.located) == 0
    kept = store.get(url, key)
    assert kept is not None and len(store.memory) == 1
    assert store.get(url, key, keep=False) is kept  # one already there is still used


def test_indexing_a_revisit_reads_its_page_without_keeping_it(tmp_path: Path) -> None:
    from wwwproxy.archive.search.capture import read_payload

    store = hot_store(tmp_path)
    put(store, URL, b"<p>same</p>")
    _, key, lines = put(store, URL, b"<p>same</p>", date=T0 + timedelta(seconds=5))
    (revisit,) = [line for line in lines if line.record_type == "revisit"]
    given = read_payload(store, key, *revisit.warcfile)
    assert given is not None and given.payload == b"<p>same</p>"
    assert len(store.memory) == 0 and len(store.located) == 0


def test_a_new_capture_is_seen_at_once(tmp_path: Path) -> None:
    store = hot_store(tmp_path)
    url, key, _ = put(store, URL, b"old")
    assert store.get(url, key).body == b"old"
    put(store, URL, b"new", date=T0 + timedelta(seconds=5))
    assert store.get(url, key).body == b"new"


def test_another_process_writing_the_file_is_seen(tmp_path: Path) -> None:
    serving = hot_store(tmp_path)
    url, key, _ = put(serving, URL, b"old")
    assert serving.get(url, key).body == b"old"
    fetcher = Store(tmp_path)  # another Store on the same cache, as wwwproxy fetch is
    put(fetcher, URL, b"fetched meanwhile", date=T0 + timedelta(seconds=5))
    assert serving.get(url, key).body == b"fetched meanwhile"


def test_a_deleted_page_is_never_served_from_memory(tmp_path: Path) -> None:
    store = hot_store(tmp_path)
    url, key, _ = put(store, URL, b"gone soon")
    assert store.get(url, key) is not None
    assert store.lookup_hot(url, key, []) is not None
    store.delete(url)
    assert store.lookup_hot(url, key, []) is None
    assert store.get(url, key) is None


def test_error_answers_and_keep_good_copy_have_their_own_slots(tmp_path: Path) -> None:
    store = hot_store(tmp_path)
    url, key, _ = put(store, URL, b"good")
    put(store, URL, b"broken", status=500, date=T0 + timedelta(seconds=5))
    assert store.get(url, key, prefer_good=True).body == b"good"
    assert store.get(url, key, prefer_good=False).body == b"broken"
    assert store.get(url, key, prefer_good=True).body == b"good"  # from memory now


def test_vary_is_checked_on_memory_hits(tmp_path: Path) -> None:
    store = hot_store(tmp_path)
    url, key, _ = put(store, URL, b"en page", headers=[("Vary", "Content-Type")])
    store.get(url, key)  # into memory; recorded with Content-Type: text/plain
    assert store.lookup_hot(url, key, [("Content-Type", "text/plain")]) is not None
    assert store.lookup_hot(url, key, [("Content-Type", "text/html")]) is None


def test_large_bodies_and_non_get_keys_stay_on_disk(tmp_path: Path) -> None:
    store = hot_store(tmp_path, mib=8)
    url, key, _ = put(store, URL, b"x" * (2 * 2**20))
    entry = store.get(url, key)
    assert entry is not None and entry.body is None and len(store.memory) == 0
    url, key, _ = put(store, "http://example.com/form", b"answer", method="POST")
    assert store.lookup(url, key, "POST", b"") is not None
    assert len(store.memory) == 0


def test_memory_is_bounded_least_recently_used_first(tmp_path: Path) -> None:
    store = hot_store(tmp_path, mib=0.05)  # ~52 KB: room for two 20 KB pages
    pages = [put(store, f"http://example.com/{i}", bytes([65 + i]) * 20_000) for i in range(3)]
    for url, key, _ in pages:
        store.get(url, key)
    assert len(store.memory) == 2 and store.memory.size <= store.memory.max_bytes
    url, key, _ = pages[0]
    hits = store.memory.hits
    store.get(url, key)  # evicted first: read from disk again
    assert store.memory.hits == hits


def test_memory_off_with_zero_bytes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, _ = put(store, URL, b"page")
    assert store.get(url, key).body is None
    assert store.lookup_hot(url, key, []) is None


@pytest.mark.parametrize("size", [0, 1, 2**20])
def test_keeps_only_what_fits(size: int) -> None:
    cache = MemoryCache(2**21)
    assert cache.keeps(size)
    assert not cache.keeps(2**20 + 1)
    assert not MemoryCache(0).keeps(0)


@pytest.mark.parametrize("mib", [0, 8])
def test_a_copy_not_kept_in_memory_is_located_once_not_scanned_per_hit(
    tmp_path: Path, mib: int
) -> None:
    # over the memory object limit, or with the memory cache off: the entry (without its
    # body) is kept, checked against its file like a memory entry, and its body read at its
    # offset; a new capture or a delete is seen at once
    store = hot_store(tmp_path, mib=mib)
    url, key, _ = put(store, URL, b"x" * (2 * 2**20))
    first = store.get(url, key)
    assert first is not None and first.body is None and len(store.memory) == 0
    assert store.get(url, key) is first
    with first.open_body() as f:
        assert f.read() == b"x" * (2 * 2**20)
    put(store, URL, b"y" * (2 * 2**20), date=T0 + timedelta(seconds=5))
    second = store.get(url, key)
    assert second is not first
    with second.open_body() as f:
        assert f.read(1) == b"y"
    store.delete(url)
    assert store.get(url, key) is None


REQUEST_HEAD = [
    ("Host", "example.com"),
    ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/156.0 Safari/537.36"),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-US,en;q=0.9"),
    ("Accept-Encoding", "gzip, deflate, br"),
    ("Referer", "http://example.com/"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Connection", "keep-alive"),
]
RESPONSE_HEAD = [
    ("Content-Type", "text/html; charset=utf-8"),
    ("Server", "nginx/1.22"),
    ("Last-Modified", "Mon, 23 Nov 2026 10:00:00 GMT"),
    ("ETag", '"5f3a-12ab"'),
    ("Cache-Control", "max-age=3600"),
    ("Vary", "Accept-Encoding, Accept-Language"),
    ("X-Frame-Options", "SAMEORIGIN"),
    ("Strict-Transport-Security", "max-age=63072000"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
]


def _record(store: Store, url_text: str, body: bytes) -> tuple:
    from wwwproxy.url import canonicalize
    from wwwproxy.url.requestkey import request_key

    url = canonicalize(url_text)
    key = request_key(url.file, "GET", None, b"")
    rec = store.recorder(
        url, key, method="GET", request_headers=REQUEST_HEAD, request_body=b"", date=T0
    )
    rec.write(body)
    rec.finish(200, "OK", [*RESPONSE_HEAD, ("Content-Length", str(len(body)))])
    return url, key


def test_a_copy_in_memory_keeps_its_answer_not_the_records_it_was_read_from(
    tmp_path: Path,
) -> None:
    """A hit reads the answer's status, headers and body, and of the recorded request only what
    Vary and the credential check compare: the records' WARC headers and the rest of the
    request are let go, and every decision stays as it was."""
    store = hot_store(tmp_path)
    url, key = _record(store, URL, b"<p>hello</p>")
    from_disk = store.get(url, key, keep=False)
    kept = store.get(url, key)
    assert kept is not None and from_disk is not None and kept is not from_disk
    assert kept._cached is None and kept.body == b"<p>hello</p>"
    assert kept.request_headers == (  # the two its Vary names
        ("Accept-Language", "en-US,en;q=0.9"),
        ("Accept-Encoding", "gzip, deflate, br"),
    )
    for name in ("status", "reason", "headers", "date", "payload_length", "record_id", "vary"):
        assert getattr(kept, name) == getattr(from_disk, name), name
    with kept.open_body() as f:
        assert f.read() == from_disk.read_body()
    assert store.lookup_hot(url, key, [("Accept-Language", "en-US,en;q=0.9")]) is kept
    assert store.lookup_hot(url, key, [("Accept-Language", "fr")]) is None
    with pytest.raises(ValueError, match="in memory"):
        kept.request_body()


def _held(roots: object, leave_out: set[int]) -> int:
    """Bytes of every object reachable from ``roots`` (classes, functions and modules, which
    are the program's, and the objects in ``leave_out`` not counted): what keeping them holds,
    whatever else the process is doing."""
    import gc
    import types

    shared = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set(leave_out)
    stack = [roots]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, shared):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


@pytest.mark.parametrize("mib", [64, 0], ids=["in-memory", "located"])
def test_copies_kept_hold_little_besides_their_bodies(tmp_path: Path, mib: int) -> None:
    """Thousands of copies come and go in memory; each held its three records (WARC headers,
    HTTP heads, the whole request: about 9.8 KB of objects with these heads) until they
    were let go, and that churn spread over the allocator's pools made a long run's memory
    creep. What is left is the answer's own headers and the entry (about 3.5 KB), which the
    cache's byte count covers. With the memory cache off (or for a page over 1 MiB) the store
    keeps where each copy is in its file: its records' places, not their heads."""
    store = hot_store(tmp_path, mib=mib)
    pages = [_record(store, f"http://example.com/p{i}", b"<p>%d</p>" % i * 100) for i in range(200)]
    for url, key in pages:
        store.get(url, key)
    kept = store.memory if mib else store.located
    assert len(kept) == len(pages)
    bodies = {id(hot.entry.body) for hot in kept._items.values() if hot.entry.body is not None}
    per_entry = _held(list(kept._items.values()), leave_out=bodies) / len(pages)
    # in the file: the three records' places too, about 1.2 KB more (9.8 KB before)
    limit = OVERHEAD if mib else 1.5 * OVERHEAD
    assert per_entry < limit, f"{per_entry:.0f} bytes an entry besides its body"


def test_a_located_copy_keeps_the_places_of_its_records_not_their_heads(tmp_path: Path) -> None:
    store = Store(tmp_path)  # no memory cache: copies are kept as places in their files
    url, key = _record(store, URL, b"<p>hello</p>")
    first = store.get(url, key)
    assert first is not None and len(store.located) == 1 and first.body is None
    cached = first._cached
    assert cached is not None and cached.response.warc_headers == ()
    assert cached.request is not None and cached.request.http_headers == ()
    assert first.read_body() == b"<p>hello</p>" and first.headers[0] == RESPONSE_HEAD[0]
    assert store.get(url, key) is first
    assert store.lookup(url, key, "GET", b"", [("Accept-Language", "en-US,en;q=0.9")]) is first
    assert store.lookup(url, key, "GET", b"", [("Accept-Language", "fr")]) is None
