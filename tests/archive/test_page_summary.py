"""What the catalog keeps of one page (:mod:`wwwproxy.archive.page_summary`): a table of
capture sequences and what the page list shows for each, with and without keep-the-good-copy;
a line counted twice counts once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wwwproxy.archive.catalog import PageRow
from wwwproxy.archive.cdxj import CDXJRecord
from wwwproxy.archive.page_summary import fold, host_of, line_of, summarize
from wwwproxy.commands.listing import PageInfo
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


def shown(records: list[CDXJRecord], keep_good: bool) -> PageInfo:
    lines = [line_of(r) for r in records]
    assert None not in lines
    summary = summarize(None, lines)  # type: ignore[arg-type]
    assert summary is not None
    return PageInfo.of(PageRow(f"http://{HOST}/a", summary), keep_good)


@pytest.mark.parametrize(("records", "good", "newest", "rest"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])  # fmt: skip
def test_what_a_page_shows(records, good, newest, rest):
    for keep_good, want in ((True, good), (False, newest)):
        info = shown(records, keep_good)
        assert (info.status, info.newest_status, info.mime, info.payload) == want
        assert info.key == f"http://{HOST}/a"
        assert info.time == T0 + timedelta(minutes=rest[0])
        assert (info.captures, info.size) == rest[1:]


def test_a_line_counted_already_is_not_counted_again():
    """A build reads a line from the index, and the put that wrote it tells the catalog
    too: a line at or before the last offset counted leaves the summary as it is."""
    first, second = line_of(line("/a", 0, ple=4)), line_of(line("/a", 5, 404, offset=500))
    assert first is not None and second is not None
    summary = summarize(None, [first, second])
    assert summary is not None and summary.captures == 2
    assert fold(summary, first, again=True) is None
    assert fold(summary, second, again=True) is None
    assert summarize(summary, [second, first], again=True) == summary


def test_lines_of_two_writers_count_whatever_order_they_come_in():
    """Two processes append to one file; the later append's line may reach the catalog
    first: both count, and the newest and served captures are the same either way."""
    first, second = line_of(line("/a", 0, ple=4)), line_of(line("/a", 5, 404, offset=500))
    assert first is not None and second is not None
    in_order = fold(fold(None, first), second)
    reversed_ = fold(fold(None, second), first)
    assert in_order is not None and reversed_ is not None
    assert in_order.captures == reversed_.captures == 2
    for keep_good in (True, False):
        assert in_order.served(keep_good) == reversed_.served(keep_good)
    assert (in_order.newest, in_order.size) == (reversed_.newest, reversed_.size)


def test_lines_the_catalog_does_not_count():
    request = CDXJRecord.build(
        host_surt(HOST, None) + "/c", T0, "request", uri=f"http://{HOST}/c",
        ref=f"warcfile:{'c' * 32}.warc.gz#0",
    )  # fmt: skip
    assert line_of(request) is None


@pytest.mark.parametrize(
    ("uri", "host"),
    [
        ("http://a.example/x", ("http", "a.example")),
        ("https://a.example:8443/x?y", ("https", "a.example:8443")),
        ("http://user@a.example/", ("http", "a.example")),
        ("http://[::1]:8080/", ("http", "[::1]:8080")),
        ("nothing", None),
    ],
)
def test_the_host_folder_of_a_key(uri, host):
    assert host_of(uri) == host
