"""A WWWOFFLE spool imported into the cache: every page served offline afterwards by the real
proxy, with its status, headers, body and time; the queue queued; the rest skipped, each for
a stated reason."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wwwproxy.archive.cdxj import parse_timestamp
from wwwproxy.archive.outgoing import OutgoingQueue
from wwwproxy.archive.store import Store
from wwwproxy.archive.transfer.wwwoffle import SpoolError, import_spool, parse_head
from wwwproxy.url import canonicalize
from wwwproxy.url.requestkey import request_key

from .conftest import Spool

HOME = b"<html><head><title>WWWOFFLE home</title></head><body>cached long ago</body></html>"
IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
OLD_TEXT = b"text WWWOFFLE compressed when it purged, " * 40
WHEN = datetime(2023, 1, 2, 3, 4, 5, tzinfo=UTC)


# --- the head of a spooled message: a pure parser, by table ------------------------------------


@pytest.mark.parametrize(
    ("data", "first", "headers", "length"),
    [
        (b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\nbody", ("HTTP/1.1", "200", "OK"), [("A", "1")], 25),
        (b"HTTP/1.0 404 Not Found\nA: 1\n\nx", ("HTTP/1.0", "404", "Not Found"), [("A", "1")], 29),
        (b"HTTP/1.1 204\r\n\r\n", ("HTTP/1.1", "204", ""), [], 16),
        (
            b"HTTP/1.1 200 OK\r\nX: a\r\n  b\r\nY:c\r\n\r\n",
            ("HTTP/1.1", "200", "OK"),
            [("X", "a b"), ("Y", "c")],
            35,
        ),
        # the first blank line ends the head, even if the body holds another
        (b"HTTP/1.1 200 OK\r\n\r\nA: 1\r\n\r\n", ("HTTP/1.1", "200", "OK"), [], 19),
    ],
)
def test_parse_response_head(
    data: bytes, first: tuple[str, str, str], headers: list[tuple[str, str]], length: int
) -> None:
    head = parse_head(data)
    assert (head.first, head.headers, head.length) == (first, headers, length)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"HTTP/1.1 2OO OK\r\n\r\n", "bad status line"),
        (b"<html>not a response</html>\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 200 OK\r\nA: 1\r\n", "no blank line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line 2"),
        (b"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", "header line 2"),
        (b"\r\n\r\n", "empty header"),
    ],
)
def test_parse_head_refuses(data: bytes, reason: str) -> None:
    with pytest.raises(SpoolError, match=reason):
        parse_head(data)


def test_parse_request_head() -> None:
    head = parse_head(b"POST http://x/f HTTP/1.0\r\nContent-Type: a/b\r\n\r\nk=v", request=True)
    assert head.first == ("POST", "http://x/f", "HTTP/1.0")
    assert head.headers == [("Content-Type", "a/b")]
    with pytest.raises(SpoolError, match="bad request line"):
        parse_head(b"HTTP/1.1 200 OK\r\n\r\n", request=True)


# --- a whole spool, then the proxy offline -------------------------------------------------------


def _fill(spool: Spool) -> None:
    spool.page(
        "http://example.com/",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d" % len(HOME),
        HOME,
        when=WHEN,
    )
    spool.page(
        "http://example.com/missing.html",
        b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain",
        b"no such page",
    )
    spool.page(
        "http://example.com/logo.png",
        b"HTTP/1.0 200 OK\r\nContent-Type: image/png\r\nContent-Length: %d" % len(IMAGE),
        IMAGE,
    )
    spool.page(
        "http://example.com/search?q=wwwoffle&lang=en",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain",
        b"results for wwwoffle",
    )
    spool.page(
        "http://example.com:8080/port.html",
        b"HTTP/1.1 200 OK\nContent-Type: text/plain",  # LF line ends, as some servers send
        b"on another port",
    )
    spool.page(
        "http://example.com/old.txt",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain",
        OLD_TEXT,
        compress=True,
    )
    spool.page(  # a Content-Length that is not the body's (WWWOFFLE cut the download short)
        "http://example.com/cut.txt",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 9999",
        b"only this much",
    )
    spool.page(
        "https://secure.example.org/account?id=7",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain",
        b"an https page",
    )
    # what cannot be imported
    spool.page("http://example.com/no-u.html", b"HTTP/1.1 200 OK", b"lost URL", with_u=False)
    spool.page("http://example.com/garbage.html", b"<html>not a spooled answer", b"")
    spool.page("ftp://ftp.example.com/pub/file.txt", b"HTTP/1.0 200 OK", b"ftp file")
    lone_u = spool.root / "http" / "example.com" / "Uonly-a-url"
    lone_u.write_bytes(b"http://example.com/never-fetched.html")
    # the queue
    spool.queued(
        "http://example.com/later.html",
        b"GET http://example.com/later.html HTTP/1.0\r\nUser-Agent: Browser/1\r\n"
        b"If-Modified-Since: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n",
    )
    spool.queued(
        "http://example.com/form",
        b"POST http://example.com/form HTTP/1.0\r\nContent-Type: "
        b"application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\na=1&b=2",
    )
    spool.queued("http://example.com/lost", b"GET /lost HTTP/1.0\r\n\r\n", with_u=False)


def _reasons(report) -> dict[str, str]:  # noqa: ANN001
    return {Path(s.path).name: s.reason for s in report.skipped}


async def test_spool_imports_and_every_page_is_served_offline(
    spool: Spool, tmp_path: Path, make_proxy
) -> None:
    _fill(spool)
    cache = tmp_path / "cache"
    store = Store(cache)
    report = await asyncio.to_thread(
        import_spool, store, OutgoingQueue(cache / "outgoing"), spool.root
    )

    imported = {p.url: p.status for p in report.pages}
    assert imported == {
        "http://example.com/": 200,
        "http://example.com/missing.html": 404,
        "http://example.com/logo.png": 200,
        "http://example.com/search?q=wwwoffle&lang=en": 200,
        "http://example.com:8080/port.html": 200,
        "http://example.com/old.txt": 200,
        "http://example.com/cut.txt": 200,
        "https://secure.example.org/account?id=7": 200,
    }
    assert sorted(report.queued) == ["http://example.com/form", "http://example.com/later.html"]
    reasons = _reasons(report)
    assert "without its U file" in reasons[spool.files[8].name]
    assert "bad status line" in reasons[spool.files[9].name]
    assert "ftp pages are not imported" in reasons["ftp"]
    assert "without its D file" in reasons["Uonly-a-url"]
    lost = [s for s in report.skipped if "outgoing" in s.path]
    assert len(lost) == 1 and "without its U file" in lost[0].reason
    assert len(report.skipped) == 5

    # the page keeps the time WWWOFFLE fetched it (the D file's time)
    home = canonicalize("http://example.com/")
    [capture] = store.captures(home.file)
    assert parse_timestamp(capture.timestamp) == WHEN

    proxy = await make_proxy(mode="offline", cache=cache)
    for url, status, body in [
        ("http://example.com/", 200, HOME),
        ("http://example.com/missing.html", 404, b"no such page"),
        ("http://example.com/logo.png", 200, IMAGE),
        ("http://example.com/search?q=wwwoffle&lang=en", 200, b"results for wwwoffle"),
        ("http://example.com:8080/port.html", 200, b"on another port"),
        ("http://example.com/old.txt", 200, OLD_TEXT),
        ("http://example.com/cut.txt", 200, b"only this much"),
    ]:
        reply = await proxy.get(url)
        assert (reply.status, reply.body) == (status, body), url
        assert (reply.header("X-Cache") or "").startswith("HIT"), url
    image = await proxy.get("http://example.com/logo.png")
    assert image.header("Content-Type") == "image/png"
    old = await proxy.get("http://example.com/old.txt")
    assert old.header("Content-Encoding") is None
    assert "wwwoffle" not in (old.header("Pragma") or "")
    cut = await proxy.get("http://example.com/cut.txt")
    assert cut.header("Content-Length") == str(len(b"only this much"))
    # an https page is in the cache as any intercepted one would be
    secure = store.get(canonicalize("https://secure.example.org/account?id=7"))
    assert secure is not None and secure.status == 200
    with secure.open_body() as f:
        assert f.read() == b"an https page"

    # the queue: what WWWOFFLE would have fetched next time online, the browser's own
    # condition left out; the POST under its body's key
    queued = {r.url: r for r in OutgoingQueue(cache / "outgoing").requests()}
    later = queued["http://example.com/later.html"]
    assert later.method == "GET" and ("User-Agent", "Browser/1") in later.headers
    assert not any(n.lower() == "if-modified-since" for n, _ in later.headers)
    form = queued["http://example.com/form"]
    assert (form.method, form.body) == ("POST", b"a=1&b=2")
    assert form.key == request_key(
        "http://example.com/form", "POST", "application/x-www-form-urlencoded", b"a=1&b=2"
    )


async def test_importing_again_records_nothing_twice(spool: Spool, tmp_path: Path) -> None:
    _fill(spool)
    cache = tmp_path / "cache"
    store, queue = Store(cache), OutgoingQueue(cache / "outgoing")
    first = await asyncio.to_thread(import_spool, store, queue, spool.root)
    files = {p: p.stat().st_size for p in store.warc_files()}
    again = await asyncio.to_thread(import_spool, store, queue, spool.root)
    assert again.pages == [] and again.queued == []
    assert {p: p.stat().st_size for p in store.warc_files()} == files
    reasons = [s.reason for s in again.skipped]
    assert sum("already imported" in r for r in reasons) == len(first.pages)
    assert sum("queued already" in r for r in reasons) == len(first.queued)


def test_a_damaged_compressed_body_is_skipped(spool: Spool, tmp_path: Path) -> None:
    d = spool.page("http://example.com/z", b"HTTP/1.1 200 OK", b"whole", compress=True)
    d.write_bytes(d.read_bytes()[:-6])  # the gzip trailer torn off
    cache = tmp_path / "cache"
    report = import_spool(Store(cache), OutgoingQueue(cache / "outgoing"), spool.root)
    assert report.pages == []
    assert "compressed by WWWOFFLE, is damaged" in _reasons(report)[d.name]
    assert list(Store(cache).warc_files()) == []


def test_a_header_the_archive_cannot_hold_is_skipped(spool: Spool, tmp_path: Path) -> None:
    d = spool.page("http://example.com/h", b"HTTP/1.1 200 OK\r\nBad Name: x", b"body")
    cache = tmp_path / "cache"
    report = import_spool(Store(cache), OutgoingQueue(cache / "outgoing"), spool.root)
    assert report.pages == []
    assert "invalid header name" in _reasons(report)[d.name]


def test_a_hostile_spool_plants_nothing(spool: Spool, tmp_path: Path) -> None:
    """A spool from elsewhere cannot plant a page for another host (its U file must name
    the host of its folder), keep one fresh for years (a D file dated in the future is dated
    now), or read files through symbolic links (not followed, files or folders)."""
    planted = spool.page("http://example.com/a", b"HTTP/1.1 200 OK", b"planted")
    (planted.parent / ("U" + planted.name[1:])).write_bytes(b"http://victim.example/")
    future = spool.page(
        "http://example.com/later",
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=999999999",
        b"from the future",
        when=datetime(2030, 1, 1, tzinfo=UTC),
    )
    secret = tmp_path / "secret"
    secret.write_bytes(b"HTTP/1.1 200 OK\r\n\r\nSECRET")
    linked = spool.page("http://example.com/link", b"HTTP/1.1 200 OK", b"x")
    linked.unlink()
    linked.symlink_to(secret)
    elsewhere = tmp_path / "elsewhere" / "other.example"
    elsewhere.mkdir(parents=True)
    (spool.root / "http" / "other.example").symlink_to(elsewhere)
    cache = tmp_path / "cache"
    store = Store(cache)
    report = import_spool(store, OutgoingQueue(cache / "outgoing"), spool.root)
    reasons = _reasons(report)
    assert "not of the host folder example.com" in reasons[planted.name]
    assert "symbolic link" in reasons[linked.name]
    assert [(p.url, p.date.year) for p in report.pages] == [
        ("http://example.com/later", datetime.now(UTC).year)
    ]
    assert store.get(canonicalize("http://victim.example/")) is None
    assert datetime.fromtimestamp(future.stat().st_mtime, UTC).year == 2030  # only read
    assert b"SECRET" not in b"".join(p.read_bytes() for p in store.warc_files())


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_not_a_spool(tmp_path: Path, make: str) -> None:
    root = tmp_path / "spool"
    if make == "empty":
        root.mkdir()
    cache = tmp_path / "cache"
    with pytest.raises(
        SpoolError, match="no such folder" if make == "missing" else "not a WWWOFFLE"
    ):
        import_spool(Store(cache), OutgoingQueue(cache / "outgoing"), root)
