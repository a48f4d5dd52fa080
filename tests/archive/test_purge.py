"""Purge: the pure decisions by tables, then real stores (WARC files read back with warcio,
the CDXJ index checked, the search index following), and a purge killed with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive.purge import (
    LOW_WATER,
    Limits,
    Member,
    PageFacts,
    PurgeResult,
    flush_used,
    keep_members,
    plan_files,
    purge,
    purge_loop,
    read_used,
)
from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.store import Store
from wwwproxy.config import PurgeRule
from wwwproxy.url import canonicalize

from ..proxy.conftest import make_proxy, origin  # noqa: F401 (fixtures)

T0 = datetime(2026, 11, 1, tzinfo=UTC)
DAY = 86400.0
NOW = 1_800_000_000.0


# --- keep_members: which records of one file stay ----------------------------------------------


def exchange(n: int, kind: str = "response", status: int = 200, refers: int | None = None):
    """Request + capture number ``n`` (ids q<n>, r<n>), one after the other in the file."""
    return [
        Member(n * 100, 10, "request", f"q{n}", concurrent_to=(f"r{n}",)),
        Member(
            n * 100 + 10,
            90,
            kind,
            f"r{n}",
            date=f"d{n}",
            status=status,
            target_uri="http://x/",
            concurrent_to=(f"q{n}",),
            refers_to=None if refers is None else f"r{refers}",
            refers_to_target_uri=None if refers is None else "http://x/",
            refers_to_date=None if refers is None else f"d{refers}",
        ),
    ]


def captures_kept(members, keep):
    return [m.record_id for m in keep_members(members, keep) if m.rec_type != "request"]


def file_of(*exchanges):
    return [m for e in exchanges for m in e]


KEEP_CASES = [
    # (what, file, keep_captures, captures kept)
    ("under the limit", file_of(exchange(1), exchange(2)), 5, ["r1", "r2"]),
    ("0 keeps all", file_of(*(exchange(i) for i in range(8))), 0, [f"r{i}" for i in range(8)]),
    ("the newest N", file_of(*(exchange(i) for i in range(6))), 2, ["r4", "r5"]),
    (
        "the good copy behind newer errors",
        file_of(exchange(1), exchange(2), exchange(3, status=404), exchange(4, status=500)),
        2,
        ["r2", "r3", "r4"],
    ),
    (
        "the servable copy behind a 304 and a 206",
        file_of(exchange(1), exchange(2), exchange(3, status=304), exchange(4, status=206)),
        1,
        ["r2", "r4"],
    ),
    (
        "a kept revisit keeps its original",
        file_of(exchange(1), exchange(2), exchange(3, "revisit", refers=1)),
        1,
        ["r1", "r3"],
    ),
    (
        "a revisit found by URI and date",
        [
            *exchange(1),
            *exchange(2),
            Member(300, 10, "request", "q3", concurrent_to=("r3",)),
            Member(
                310,
                50,
                "revisit",
                "r3",
                status=200,
                concurrent_to=("q3",),
                refers_to="unknown",
                refers_to_target_uri="http://x/",
                refers_to_date="d1",
            ),
        ],
        1,
        ["r1", "r3"],
    ),
    (
        "a dropped revisit's original goes when nothing kept needs it",
        file_of(exchange(1), exchange(2, "revisit", refers=1), exchange(3), exchange(4)),
        2,
        ["r3", "r4"],
    ),
]


@pytest.mark.parametrize(("what", "members", "keep", "expected"), KEEP_CASES)
def test_keep_members(what, members, keep, expected) -> None:
    assert captures_kept(members, keep) == expected, what


def test_keep_members_keeps_the_requests_of_kept_captures_only() -> None:
    members = file_of(*(exchange(i) for i in range(4)))
    members.insert(0, Member(0, 5, "warcinfo", "w"))
    members.append(Member(999, 10, "request", "orphan"))  # a request whose answer never came
    kept = [m.record_id for m in keep_members(members, 2)]
    assert kept == ["w", "q2", "r2", "q3", "r3", "orphan"]


# --- plan_files: which files go --------------------------------------------------------------


def page(name, size, fetched_days_ago, served_days_ago=None, url=None):
    served = None if served_days_ago is None else NOW - served_days_ago * DAY
    return PageFacts(name, url or f"http://x/{name}", size, NOW - fetched_days_ago * DAY, served)


def rule(pattern, days):
    return PurgeRule(pattern, days, re.compile(pattern))


PLAN_CASES = [
    # (what, pages, limits, removed names)
    ("no limits", [page("a", 10, 900)], Limits(), []),
    (
        "age by the first matching rule",
        [page("a.jpg", 10, 40), page("b.jpg", 10, 20), page("c.html", 10, 40)],
        Limits(rules=(rule(r"\.jpg$", 30), rule(r".", 60))),
        ["a.jpg"],
    ),
    (
        "the first rule wins even when a later one would purge",
        [page("a.jpg", 10, 40)],
        Limits(rules=(rule(r"\.jpg$", 90), rule(r".", 1))),
        [],
    ),
    (
        "served recently counts as used",
        [page("a.jpg", 10, 40, served_days_ago=2)],
        Limits(rules=(rule("jpg", 30),)),
        [],
    ),
    (
        "under max_size nothing goes",
        [page("a", 50, 9), page("b", 50, 1)],
        Limits(max_size=100),
        [],
    ),
    (
        "over max_size: least recently used first, down to the low water mark",
        [page("a", 40, 9), page("b", 40, 1), page("c", 40, 5, served_days_ago=0.5)],
        Limits(max_size=100),
        ["a"],  # 120 > 100: a (used 9 days ago) goes, and 80 is under 90% of 100
    ),
    (
        "ties: the larger first",
        [page("a", 10, 3), page("b", 30, 3), page("c", 70, 0)],
        Limits(max_size=100),
        ["b"],
    ),
    (
        "age first, then size over what is left",
        [page("old.jpg", 60, 50), page("a", 50, 3), page("b", 50, 1)],
        Limits(max_size=100, rules=(rule("jpg", 30),)),
        ["old.jpg"],
    ),
]


@pytest.mark.parametrize(("what", "pages", "limits", "expected"), PLAN_CASES)
def test_plan_files(what, pages, limits, expected) -> None:
    removed = [r.page.name for r in plan_files(pages, limits, NOW)]
    assert removed == expected, what


def test_plan_files_stops_at_the_low_water_mark() -> None:
    pages = [page(f"p{i}", 10, 100 - i) for i in range(20)]  # 200 bytes, p0 the oldest
    removed = [r.page.name for r in plan_files(pages, Limits(max_size=100), NOW)]
    assert removed == [f"p{i}" for i in range(11)]  # 90 bytes left: LOW_WATER of 100
    assert LOW_WATER == 0.9


def test_plan_files_says_why() -> None:
    (age,) = plan_files([page("a.jpg", 1, 45)], Limits(rules=(rule("jpg", 30),)), NOW)
    assert age.reason == "not used for 45 days (rule 'jpg': 30)"
    (size,) = plan_files([page("a", 200, 1)], Limits(max_size=100), NOW)
    assert "max_size" in size.reason


# --- real stores -------------------------------------------------------------------------------


def put(store: Store, url_text: str, body: bytes, when: datetime, status: int = 200):
    url = canonicalize(url_text)
    rec = store.recorder(
        url, url.file, method="GET", request_headers=[("Host", url.hostport)], request_body=b""
    )
    rec.date = when
    rec.write(body)
    headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))]
    return rec.finish(status, "OK", headers)


def warc(path: Path) -> list[tuple[str, bytes]]:
    """(type, payload) of every record, as warcio reads the file."""
    out = []
    with open(path, "rb") as f:
        for record in ArchiveIterator(f):
            out.append((record.rec_type, record.content_stream().read()))
    return out


def history(store: Store, url_text: str) -> list[tuple[str, int]]:
    """(type, status) of the indexed captures, oldest first."""
    url = canonicalize(url_text)
    return [(r.record_type, r.fields.get("hsc")) for r in store.captures(url.file)]


def body_of(store: Store, url_text: str) -> bytes | None:
    entry = store.get(canonicalize(url_text))
    if entry is None:
        return None
    with entry.open_body() as f:
        return f.read()


def page_html(title: str) -> bytes:
    return f"<html><title>{title}</title><body>words about {title}</body></html>".encode()


def test_keep_captures_rewrites_the_file_keeping_what_is_needed(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache", memory_bytes=1 << 20)
    url = "http://example.com/news"
    put(store, url, page_html("first"), T0)  # the original of the revisits below
    put(store, url, page_html("first"), T0 + timedelta(hours=1))  # revisit
    for i in range(2, 6):
        put(store, url, page_html(f"v{i}"), T0 + timedelta(hours=i))
    put(store, url, page_html("first"), T0 + timedelta(hours=7))  # a revisit? no: v5 newest
    put(store, "http://example.com/other", b"other", T0)
    path = store.path_for(canonicalize(url))
    before = path.stat()
    assert body_of(store, url) == page_html("first")  # now held by the memory cache
    assert len(history(store, url)) == 7

    result = purge(store, Limits(keep_captures=2), now=NOW)

    assert [t.captures for t in result.trimmed] == [5]
    assert result.files_removed == 0
    records = warc(path)
    assert [t for t, _ in records] == ["request", "response", "request", "response"]
    assert records[1][1] == page_html("v5") and records[3][1] == page_html("first")
    assert path.stat().st_mtime_ns == before.st_mtime_ns  # still says when it was fetched
    assert path.stat().st_mode == before.st_mode
    assert path.stat().st_ino != before.st_ino  # a new file, renamed over the old one
    assert body_of(store, url) == page_html("first")
    assert history(store, url) == [("response", 200), ("response", 200)]
    assert store.check_index() == []
    assert result.bytes_freed == result.bytes_before - sum(
        p.stat().st_size for p in store.warc_files()
    )
    assert purge(store, Limits(keep_captures=2), now=NOW).captures_removed == 0


def test_a_file_whose_index_lines_are_still_coming_is_not_trimmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording appends its records under the file's lock and writes their index lines
    just after: a purge in between must not move those records (the lines would point at the
    old places); it leaves the file to the next purge."""
    store = Store(tmp_path / "cache")
    url = "http://example.com/busy"
    for i in range(4):
        put(store, url, page_html(f"v{i}"), T0 + timedelta(hours=i))
    held: list = []
    monkeypatch.setattr(store.index, "add", lambda lines, sync=None: held.extend(lines))
    put(store, url, page_html("v4"), T0 + timedelta(hours=4))  # appended, its line to come
    monkeypatch.undo()
    path = store.path_for(canonicalize(url))
    before = path.read_bytes()

    assert purge(store, Limits(keep_captures=2), now=NOW).trimmed == []
    assert path.read_bytes() == before

    store.index.add(held)  # the recording's lines arrive: they point where the record is
    assert store.check_index() == []
    assert purge(store, Limits(keep_captures=2), now=NOW).captures_removed == 3
    assert store.check_index() == []
    assert body_of(store, url) == page_html("v4")


def test_a_kept_revisit_keeps_the_response_it_points_at(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    url = "http://example.com/same"
    put(store, url, page_html("same"), T0)
    for i in range(1, 5):
        put(store, url, page_html("same"), T0 + timedelta(hours=i))
    assert [t for t, _ in history(store, url)] == ["response"] + ["revisit"] * 4

    purge(store, Limits(keep_captures=1), now=NOW)

    path = store.path_for(canonicalize(url))
    assert [t for t, _ in warc(path)] == ["request", "response", "request", "revisit"]
    assert body_of(store, url) == page_html("same")
    assert store.check_index() == []


def test_the_good_copy_survives_a_run_of_errors(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    url = "http://example.com/flaky"
    put(store, url, b"good old", T0)
    put(store, url, b"good", T0 + timedelta(hours=1))
    for i in range(2, 6):
        put(store, url, b"oops", T0 + timedelta(hours=i), status=503)
    purge(store, Limits(keep_captures=2), now=NOW)
    # the newest two are revisits of the first 503: that response stays too
    assert history(store, url) == [
        ("response", 200),
        ("response", 503),
        ("revisit", 503),
        ("revisit", 503),
    ]
    assert body_of(store, url) == b"good"


def test_age_and_size_remove_files_index_lines_and_search_pages(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    search = SearchIndex(store.root)
    search.attach(store)
    try:
        for name, days in (("old.jpg", 40), ("a", 3), ("b", 2), ("c", 1)):
            put(store, f"http://example.com/{name}", page_html(name) * 40, T0)
            os.utime(
                store.path_for(canonicalize(f"http://example.com/{name}")), (0, NOW - days * DAY)
            )
        put(store, "http://example.org/x", page_html("x") * 40, T0)
        os.utime(store.path_for(canonicalize("http://example.org/x")), (0, NOW - 5 * DAY))
        assert search.flush()
        assert {h.key for h in search.search("words").hits} >= {"http://example.com/a"}
        size = store.path_for(canonicalize("http://example.com/a")).stat().st_size
        limits = Limits(max_size=int(size * 3.5), rules=(PurgeRule("jpg", 30, re.compile("jpg")),))

        dry = purge(store, limits, dry_run=True, now=NOW)
        assert [r.page.name.split("/")[1] for r, _ in dry.removed] == ["example.com", "example.org"]
        assert len(list(store.warc_files())) == 5  # a dry run changes nothing

        result = purge(store, limits, now=NOW)

        assert [(r.page.url, n) for r, n in result.removed] == [
            ("http://example.com/old.jpg", 1),
            ("http://example.org/x", 1),
        ]
        assert result.bytes_freed == dry.bytes_freed
        left = sorted(p.name for p in store.warc_files())
        assert len(left) == 3
        assert not (store.root / "http" / "example.org").exists()  # its emptied folder went
        assert store.captures("http://example.org/x") == []
        assert store.check_index() == []
        assert search.flush()
        keys = {h.key for h in search.search("words").hits}
        assert keys == {f"http://example.com/{n}" for n in ("a", "b", "c")}
    finally:
        search.close()


def test_trimmed_pages_stay_searchable_with_their_new_places(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    search = SearchIndex(store.root)
    search.attach(store)
    try:
        url = "http://example.com/doc"
        for i in range(4):
            put(store, url, page_html(f"edition{i}"), T0 + timedelta(hours=i))
        assert search.flush()
        purge(store, Limits(keep_captures=1), now=NOW)
        assert search.flush()
        (hit,) = search.search("edition3", store=store).hits
        assert hit.key == url and ("edition3", True) in hit.snippet  # read at its new place
        assert search.search("edition1").hits == []
    finally:
        search.close()


def test_served_pages_count_as_used(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    now = time.time()
    for name in ("a", "b"):
        url = canonicalize(f"http://example.com/{name}")
        put(store, url.canonical, b"x" * 1000, T0)
        os.utime(store.path_for(url), (0, now - 10 * DAY))
    assert store.lookup(canonicalize("http://example.com/a"), "http://example.com/a", "GET", b"")
    assert flush_used(store) == 1
    assert flush_used(store) == 0  # nothing served since
    assert list(read_used(store)) == [
        "http/example.com/" + store.path_for(canonicalize("http://example.com/a")).name
    ]
    size = store.path_for(canonicalize("http://example.com/a")).stat().st_size
    result = purge(store, Limits(max_size=int(size * 1.5)), now=now)
    assert [r.page.url for r, _ in result.removed] == ["http://example.com/b"]
    assert len(read_used(store)) == 1


# --- killed midway -----------------------------------------------------------------------------


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from wwwproxy.archive import purge as p
    from wwwproxy.archive.store import Store

    what, after = sys.argv[2], int(sys.argv[3])
    calls = 0

    def dying(original):
        def call(*args, **kwargs):
            global calls
            calls += 1
            if calls > after:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)
        return call

    if what == "fsync":  # inside a rewrite: the temporary file written, not yet renamed
        p.os.fsync = dying(os.fsync)
    elif what == "replace":  # between rewrites, before the index is compacted
        p.os.replace = dying(os.replace)
    else:  # removing files, before the index is compacted
        p.Path.unlink = dying(p.Path.unlink)
    p.purge(Store(sys.argv[1]), p.Limits(max_size=1, keep_captures=2))
    """
)


@pytest.mark.parametrize(("what", "after"), [("fsync", 3), ("replace", 4), ("unlink", 2)])
def test_a_purge_killed_midway_loses_nothing_else(tmp_path: Path, what: str, after: int) -> None:
    root = tmp_path / "cache"
    store = Store(root)
    urls = [f"http://example.com/p{i}" for i in range(8)]
    for n, url in enumerate(urls):
        for i in range(4):
            put(store, url, page_html(f"{url} {i}"), T0 + timedelta(days=n, hours=i))
    snapshot = {p: warc(p) for p in store.warc_files()}
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, str(root), what, str(after)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr

    # every file is whole: the old one, or the new one with exactly the newest two captures
    changed = 0
    for path, records in snapshot.items():
        if not path.exists():
            assert what == "unlink"
            continue
        now = warc(path)
        if now != records:
            changed += 1
            assert now == records[-4:]
    assert changed or what != "replace"
    assert (root / "index" / "purge.pending").exists()
    if what != "fsync":
        assert Store(root).check_index() != []  # lines of moved or removed records, for now

    # the next purge puts the index right and finishes the job
    store = Store(root)
    purge(store, Limits(keep_captures=2), now=NOW)
    assert not list(root.rglob("*.purge"))
    assert not (root / "index" / "purge.pending").exists()
    assert store.check_index() == []
    for path in store.warc_files():
        assert len(warc(path)) == 4
    for url in urls:
        entry = body_of(store, url)
        assert entry is None or entry == page_html(f"{url} 3")


# --- under a running proxy ---------------------------------------------------------------------


async def test_the_proxy_notes_what_it_serves_and_the_loop_purges_the_unused(
    make_proxy,  # noqa: F811 (the fixture)
    origin,  # noqa: F811
) -> None:
    proxy = await make_proxy()
    store = proxy.store
    now = time.time()
    for path, days in (("/page.html", 3), ("/image.png", 1)):
        assert (await proxy.get(origin.url(path))).status == 200
        await proxy.recorded(origin.url(path))
        os.utime(store.path_for(canonicalize(origin.url(path))), (0, now - days * DAY))
    await proxy.control(mode="offline")
    store.served.clear()
    for _ in range(3):  # from disk, then from memory: both are uses
        reply = await proxy.get(origin.url("/page.html"))
        assert reply.status == 200 and reply.header("X-Cache") == "HIT"
    assert list(store.served) == [canonicalize(origin.url("/page.html")).file]
    page = store.path_for(canonicalize(origin.url("/page.html")))
    image = store.path_for(canonicalize(origin.url("/image.png")))
    limit = int((page.stat().st_size + image.stat().st_size) * 0.9)

    done: asyncio.Queue[PurgeResult] = asyncio.Queue()
    loop = asyncio.create_task(
        purge_loop(store, lambda: Limits(max_size=limit), tick=0.01, on_purge=done.put_nowait)
    )
    try:
        result = await asyncio.wait_for(done.get(), 30)
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    # the picture was fetched later, but the page was served since: the picture goes
    assert [r.page.url for r, _ in result.removed] == [origin.url("/image.png")]
    assert page.exists() and not image.exists()
    assert (await proxy.get(origin.url("/page.html"))).status == 200
    assert (await proxy.get(origin.url("/image.png"))).status == 503  # offline, not cached
    assert (store.root / "index" / "purged").exists()
    assert page.relative_to(store.root).as_posix() in read_used(store)


async def test_the_loop_purges_again_once_recordings_cross_max_size(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    path = put(store, "http://example.com/0", b"0" * 3000, T0) and store.path_for(
        canonicalize("http://example.com/0")
    )
    size = path.stat().st_size
    done: asyncio.Queue[PurgeResult] = asyncio.Queue()
    loop = asyncio.create_task(
        purge_loop(store, lambda: Limits(max_size=size * 3), tick=0.01, on_purge=done.put_nowait)
    )
    try:
        first = await asyncio.wait_for(done.get(), 30)  # measures the cache at start
        assert first.files_removed == 0 and first.bytes_after == size
        for i in range(1, 4):  # the third crosses the limit
            put(store, f"http://example.com/{i}", bytes([48 + i]) * 3000, T0)
        second = await asyncio.wait_for(done.get(), 30)
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    assert second.files_before == 4 and second.files_removed == 2
    assert second.bytes_after <= size * 3 * LOW_WATER
    assert store.listeners == []  # the loop's size watch is gone with it


def test_two_purges_at_once_take_turns(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path / "cache"
    writer = Store(root)
    for n in range(6):
        for i in range(4):
            put(writer, f"http://example.com/{n}", page_html(f"{n} {i}"), T0 + timedelta(hours=i))
    stores = [Store(root), Store(root)]  # as two processes would have
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda s: purge(s, Limits(keep_captures=1), now=NOW), stores))
    assert sorted(r.captures_removed for r in results) == [0, 18]
    assert writer.check_index() == []
    assert all(len(warc(p)) == 2 for p in writer.warc_files())
