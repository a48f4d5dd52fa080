"""One host's pages as rows in flat columns: what each row shows (a table of capture
sequences), its orders, and its memory per page."""

from __future__ import annotations

import gc
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wwwproxy.archive.cdxj import CDXJRecord
from wwwproxy.commands.host_rows import HostRows
from wwwproxy.url.surt import host_surt

T0 = datetime(2025, 6, 1, tzinfo=UTC)
HOST = "rows.example"


def line(
    path: str,
    minutes: int,
    status: int | None = 200,
    *,
    kind: str = "response",
    mime: str | None = "text/html",
    ple: int | None = None,
    rle: int = 500,
    offset: int = 0,
) -> CDXJRecord:
    """An index line of ``http://rows.example<path>`` as the store writes it."""
    uri = f"http://{HOST}{path}"
    return CDXJRecord.build(
        host_surt(HOST, None) + path,
        T0 + timedelta(minutes=minutes),
        kind,
        uri=uri,
        ref=f"warcfile:{'a' * 32}.warc.gz#{offset}",
        hsc=status,
        mct=mime,
        ple=ple,
        rle=rle,
    )


def listing_of(*records: CDXJRecord) -> HostRows:
    listing = HostRows(Path("/nonexistent"), "http", HOST)
    for record in records:
        assert listing.wants(record)
        listing.add(record)
    return listing


# captures of one key, in the order their lines arrive -> what its row shows, with and without
# keep_good: (status, newest_status, mime, payload) and then (time in minutes, captures, size)
ROWS = [
    (
        "one 200",
        [line("/a", 0, ple=40)],
        (200, None, "text/html", 40),
        (200, None, "text/html", 40),
        (0, 1, 500),
    ),  # fmt: skip
    (
        "a 304 after a 200 (a browser's conditional request)",
        [line("/a", 0, ple=40), line("/a", 5, 304, ple=0, offset=500)],
        (200, 304, "text/html", 40),
        (200, 304, "text/html", 40),
        (5, 2, 1000),
    ),
    (
        "a 404 after a 200: the good copy, unless keep_good is off",
        [line("/a", 0, ple=40), line("/a", 5, 404, mime="text/plain", ple=9, offset=500)],
        (200, 404, "text/html", 40),
        (404, None, "text/plain", 9),
        (5, 2, 1000),
    ),
    (
        "a 206 then a 404: nothing good, the 404 served",
        [line("/a", 0, 206, mime="image/png", ple=2), line("/a", 5, 404, ple=4, offset=500)],
        (404, None, "text/html", 4),
        (404, None, "text/html", 4),
        (5, 2, 1000),
    ),
    (
        "lines out of time order: the newer 404 first",
        [line("/a", 5, 404, ple=4, offset=500), line("/a", 0, ple=40)],
        (200, 404, "text/html", 40),
        (404, None, "text/html", 4),
        (5, 2, 1000),
    ),
    (
        "only a 304: nothing to serve, the newest's type shown",
        [line("/a", 0, 304, mime="image/gif")],
        (None, 304, "image/gif", None),
        (None, 304, "image/gif", None),
        (0, 1, 500),
    ),
    (
        "a revisit repeats the payload of the response before it",
        [line("/a", 0, ple=40), line("/a", 5, kind="revisit", offset=500, rle=300)],
        (200, None, "text/html", 40),
        (200, None, "text/html", 40),
        (5, 2, 800),
    ),
    (
        "no status: taken as 200",
        [line("/a", 0, None, mime=None)],
        (200, None, None, None),
        (200, None, None, None),
        (0, 1, 500),
    ),
    (
        "equal times: the later line is served",
        [line("/a", 0, 404, ple=1), line("/a", 0, 200, ple=2, offset=500)],
        (200, 404, "text/html", 2),
        (200, 404, "text/html", 2),
        (0, 2, 1000),
    ),
    (
        "a newer good copy again after a 404",
        [line("/a", 0, ple=1), line("/a", 5, 404, offset=500), line("/a", 9, ple=3, offset=900)],
        (200, None, "text/html", 3),
        (200, None, "text/html", 3),
        (9, 3, 1400),
    ),
]


@pytest.mark.parametrize(("records", "good", "newest", "rest"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])  # fmt: skip
def test_what_a_row_shows(records, good, newest, rest):
    listing = listing_of(*records)
    assert len(listing) == 1
    for keep_good, want in ((True, good), (False, newest)):
        info = listing.info(0, keep_good)
        assert (info.status, info.newest_status, info.mime, info.payload) == want
        assert info.key == f"http://{HOST}/a"
        assert info.time == T0 + timedelta(minutes=rest[0])
        assert (info.captures, info.size) == rest[1:]


def test_lines_of_other_protocols_and_types_are_left_out():
    listing = listing_of(line("/a", 0))
    https = CDXJRecord.build(
        host_surt(HOST, None) + "/b", T0, "response", uri=f"https://{HOST}/b",
        ref=f"warcfile:{'b' * 32}.warc.gz#0",
    )  # fmt: skip
    listing.add(https)
    request = CDXJRecord.build(
        host_surt(HOST, None) + "/c", T0, "request", uri=f"http://{HOST}/c",
        ref=f"warcfile:{'c' * 32}.warc.gz#0",
    )  # fmt: skip
    assert not listing.wants(request)
    assert len(listing) == 1


def test_orders_by_name_time_and_size():
    names = ["/b", "/a", "/%C3%A9t%C3%A9", "/a?x=1", "/c", "/\u00e9t\u00e9", "/\U0001f600"]
    records = [line(n, minutes=(7 * i) % 5, ple=(3 * i) % 4) for i, n in enumerate(names)]
    listing = listing_of(*records)

    def keys(rows):
        return [listing.key(row)[len(f"http://{HOST}") :] for row in rows]

    assert keys(listing.order("name")) == sorted(names)
    by_time = sorted(sorted(names), key=lambda n: (7 * names.index(n)) % 5)
    assert keys(listing.order("time")) == by_time
    by_size = sorted(sorted(names), key=lambda n: (3 * names.index(n)) % 4)
    assert keys(listing.order("size")) == by_size
    listing.add(line("/0", 99))  # a change makes the orders again
    assert keys(listing.order("name")) == sorted([*names, "/0"])
    assert keys(listing.order("time"))[-1] == "/0"


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("burst", [1, 5, 40, 400])
def test_orders_kept_in_step_equal_orders_made_anew(seed, burst):
    """Orders are made once and then kept in step with the rows added or changed since (a few
    at a time, over 8 at a time, more than the order takes one by one): after every change,
    each order equals the one a listing of the same lines makes from scratch."""
    import random

    rng = random.Random(seed)
    names = [f"/p/{rng.randrange(300)}{rng.choice(['', '?q=1', '/x', '.css'])}" for _ in range(600)]
    records = []
    listing = HostRows(Path("/nonexistent"), "http", HOST)
    sorts = [("name", True), ("time", True), ("size", True), ("size", False)]
    for step in range(12):
        for _ in range(burst if step else 200):
            kind = "revisit" if rng.random() < 0.1 else "response"
            status = rng.choice([200, 200, 200, 304, 404, 206, None])
            record = line(
                rng.choice(names),
                rng.randrange(50),  # older and newer captures of a key, equal times too
                status,
                kind=kind,
                ple=rng.choice([None, rng.randrange(5000)]),
                rle=rng.randrange(1, 900),
                offset=rng.randrange(10_000),
            )
            records.append(record)
            listing.add(record)
        anew = listing_of(*records)
        for sort, keep_good in rng.sample(sorts, rng.randrange(1, 5)):
            kept = [listing.key(r) for r in listing.order(sort, keep_good)]
            made = [anew.key(r) for r in anew.order(sort, keep_good)]
            assert kept == made, (step, sort, keep_good)
            assert len(kept) == len(set(kept)) == len(listing)


def test_many_keys_are_all_found_again():
    """The open-addressing table grows and keeps every key findable."""
    listing = listing_of(*(line(f"/p{i}", i % 50) for i in range(3000)))
    listing_again = [line(f"/p{i}", 60, 404, offset=500) for i in range(0, 3000, 7)]
    for record in listing_again:
        listing.add(record)
    assert len(listing) == 3000
    rows = {listing.key(r): listing.info(r, True) for r in range(len(listing))}
    assert all(
        rows[f"http://{HOST}/p{i}"].captures == (2 if i % 7 == 0 else 1) for i in range(3000)
    )
    assert rows[f"http://{HOST}/p7"].newest_status == 404


def test_a_page_costs_little_memory():
    """About 120 bytes a page with its three orders made (an object per page cost 390)."""
    count = 20_000
    lines = [line(f"/p/{i}", i % 1000, ple=i, offset=i).to_bytes() for i in range(count)]
    gc.collect()
    tracemalloc.start()
    try:
        listing = listing_of(*(CDXJRecord.parse_line(raw) for raw in lines))
        for sort in ("name", "time", "size"):
            listing.order(sort)
        gc.collect()
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(listing) == count
    assert used / count < 180
