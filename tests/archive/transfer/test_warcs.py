"""``wwwproxy import``'s work: a WARC that real wget wrote of a real local site, and a WACZ that
``wwwproxy export`` wrote, imported into a fresh cache and served offline by the real proxy;
importing twice; damaged and wrong inputs."""

from __future__ import annotations

import asyncio
import gzip
import re
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web

from wwwproxy.archive.store import Store
from wwwproxy.archive.transfer import Selection, export_wacz
from wwwproxy.archive.transfer.warcs import ImportError_, import_warcs
from wwwproxy.archive.warc import HTTPRequest, HTTPResponse, read_records
from wwwproxy.url import canonicalize

from .conftest import make_proxy  # noqa: F401 (the fixture)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
CSS = b"body { color: #333 }"
HOME = (
    b'<html><head><link rel="stylesheet" href="/style.css"></head><body>'
    b'<a href="/a.html">A</a> <a href="/b.html">B</a> <a href="/old">old</a>'
    b'<img src="/logo.png"></body></html>'
)
PAGE_A = b'<html><body>page A <a href="/b.html">B</a> <a href="/">home</a></body></html>'
PAGE_B = [b"<html><body>page B, sent ", b'in chunks <a href="/a.html">A</a></body></html>']


@pytest.fixture
async def site() -> AsyncIterator[int]:
    """Several pages linking each other, a stylesheet, an image, a redirect and a chunked
    page, on 127.0.0.1; yields its port."""

    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for part in PAGE_B:
            await resp.write(part)
        await resp.write_eof()
        return resp

    def fixed(body: bytes, ctype: str):  # noqa: ANN202
        async def handler(request: web.Request) -> web.Response:
            return web.Response(body=body, content_type=ctype)

        return handler

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/a.html")

    app = web.Application()
    app.router.add_get("/", fixed(HOME, "text/html"))
    app.router.add_get("/a.html", fixed(PAGE_A, "text/html"))
    app.router.add_get("/b.html", chunked)
    app.router.add_get("/style.css", fixed(CSS, "text/css"))
    app.router.add_get("/logo.png", fixed(PNG, "image/png"))
    app.router.add_get("/old", moved)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    try:
        yield tcp._server.sockets[0].getsockname()[1]  # noqa: SLF001
    finally:
        await runner.cleanup()


async def wget_warc(port: int, where: Path, *extra: str) -> Path:
    """``wget -r -p --warc-file`` of the site (loopback only): the WARC it wrote."""
    where.mkdir()
    proc = await asyncio.create_subprocess_exec(
        "wget", "-q", "-r", "-p", "-e", "robots=off", "--no-proxy", "--tries=1",
        f"--warc-file={where / 'site'}", *extra, f"http://127.0.0.1:{port}/",
        cwd=where, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    [warc] = where.glob("site.warc*")
    return warc


def served(port: int) -> list[tuple[str, int, bytes]]:
    base = f"http://127.0.0.1:{port}"
    return [
        (f"{base}/", 200, HOME),
        (f"{base}/a.html", 200, PAGE_A),
        (f"{base}/b.html", 200, b"".join(PAGE_B)),
        (f"{base}/style.css", 200, CSS),
        (f"{base}/logo.png", 200, PNG),
        (f"{base}/old", 302, b"302: Found"),
    ]


@pytest.mark.parametrize("compressed", [True, False])
async def test_a_wget_warc_is_served_offline(
    site: int,
    tmp_path: Path,
    make_proxy,  # noqa: ANN001, F811
    compressed: bool,
) -> None:
    warc = await wget_warc(
        site, tmp_path / "wget", *([] if compressed else ["--no-warc-compression"])
    )
    assert warc.name == ("site.warc.gz" if compressed else "site.warc")
    # wget writes WARC-Target-URI: <http://...> (WARC 1.0's grammar): read, and its digests
    # (over the body as sent, chunks and all) check
    assert b"WARC-Target-URI: <http://127.0.0.1" in (
        gzip.decompress(warc.read_bytes()) if compressed else warc.read_bytes()
    )
    problems: list = []
    uris = {r.target_uri for r in read_records(warc, problems) if r.rec_type == "response"}
    assert problems == []
    assert {u for u, _, _ in served(site)} <= uris

    cache = tmp_path / "cache"
    store = Store(cache)
    report = await asyncio.to_thread(import_warcs, store, [warc])
    assert report.damaged == []
    # wget fetches /a.html twice (a link, then the redirect's target): one capture when both
    # fetches are in the same second (its WARC-Date's precision), else two
    captures = [(r.target_uri, r.date) for r in read_records(warc, []) if r.rec_type == "response"]
    assert len(captures) == 7
    assert report.imported == len(set(captures)) in (6, 7)
    again = len(captures) - len(set(captures))
    assert dict(report.skipped) == ({"a capture the cache holds already": again} if again else {})
    assert store.check_index() == []

    proxy = await make_proxy(mode="offline", cache=cache)
    for url, status, body in served(site):
        reply = await proxy.get(url)
        assert (reply.status, reply.body) == (status, body), url
        assert (reply.header("X-Cache") or "").startswith("HIT"), url
    assert (await proxy.get(f"http://127.0.0.1:{site}/old")).header("Location") == "/a.html"
    chunked = await proxy.get(f"http://127.0.0.1:{site}/b.html")
    assert chunked.header("Transfer-Encoding") is None

    # again: nothing recorded twice
    files = {p: p.stat().st_size for p in store.warc_files()}
    lines = [r.sort_key for r in store.index.prefix("")]
    again = await asyncio.to_thread(import_warcs, store, [warc.parent])
    assert again.imported == 0
    assert dict(again.skipped) == {"a capture the cache holds already": 7}
    assert {p: p.stat().st_size for p in store.warc_files()} == files
    assert [r.sort_key for r in store.index.prefix("")] == lines


async def test_a_wacz_export_is_served_offline_from_a_fresh_cache(
    tmp_path: Path,
    make_proxy,  # noqa: ANN001, F811
) -> None:
    first = Store(tmp_path / "first")
    pages = {
        "http://example.com/": b"<html><body>home</body></html>",
        "http://example.com/x?b=2&a=1": b"<html><body>x</body></html>",
        "https://other.example.org:8443/y": b"why",
    }
    for n, (url, body) in enumerate(pages.items()):
        u = canonicalize(url)
        for day in (1, 2):  # the second capture is a revisit of the first
            first.put(
                u,
                u.file,
                HTTPRequest("GET", [("Host", u.hostport)], b""),
                HTTPResponse(200, "OK", [("Content-Type", "text/html")], body),
                date=datetime(2026, 1, day, 0, n, tzinfo=UTC),
            )
    u = canonicalize("http://example.com/form")
    post = HTTPRequest(
        "POST", [("Content-Type", "application/x-www-form-urlencoded")], b"q=1", target="/form"
    )
    key = "http://example.com/form?__wb_method=post&q=1"
    first.put(u, key, post, HTTPResponse(200, "OK", [], b"posted"))
    wacz = tmp_path / "all.wacz"
    export_wacz(first, wacz, Selection((), None))

    cache = tmp_path / "fresh"
    store = Store(cache)
    report = await asyncio.to_thread(import_warcs, store, [wacz])
    assert (report.imported, dict(report.skipped), report.damaged) == (7, {}, [])
    assert len(store.captures(canonicalize("http://example.com/").file)) == 2
    assert store.captures(key) and store.check_index() == []

    proxy = await make_proxy(mode="offline", cache=cache)
    for url, body in pages.items():
        if url.startswith("https:"):  # in the cache as any intercepted page would be
            entry = store.get(canonicalize(url))
            assert entry is not None and entry.read_body() == body
            continue
        reply = await proxy.get(url)
        assert (reply.status, reply.body) == (200, body), url
    posted = await proxy.get(
        "http://example.com/form",
        method="POST",
        data=b"q=1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert (posted.status, posted.body) == (200, b"posted")


def test_a_truncated_warc_imports_what_comes_before_the_tear(tmp_path: Path) -> None:
    first = Store(tmp_path / "first")
    for n in range(3):
        u = canonicalize(f"http://example.com/{n}")
        first.put(u, u.file, HTTPRequest("GET", [], b""), HTTPResponse(200, "OK", [], b"x" * n))
    whole = b"".join(p.read_bytes() for p in first.warc_files())
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(whole[:-10])
    store = Store(tmp_path / "cache")
    report = import_warcs(store, [cut])
    assert report.imported == 2
    assert len(report.damaged) == 1 and "torn write" in report.damaged[0]
    assert str(cut) in report.damaged[0]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: (d / "notes.txt", b"hello"), "not a WARC (.warc, .warc.gz) or WACZ"),
        (lambda d: (d / "fake.warc.gz", b"hello there"), "not a WARC file"),
        (lambda d: (d / "fake.wacz", b"not a zip"), "not a WACZ (ZIP) file"),
        (lambda d: (d / "empty", None), "no WARC (.warc, .warc.gz) or WACZ file in it"),
        (lambda d: (d / "missing", ...), "no such file or directory"),
    ],
)
def test_inputs_that_are_not_warcs_are_refused_before_anything_is_written(
    tmp_path: Path, make, words: str
) -> None:
    path, content = make(tmp_path)
    if content is None:
        path.mkdir()
        (path / "readme.txt").write_text("nothing here")
    elif content is not ...:
        path.write_bytes(content)
    good = tmp_path / "good.warc.gz"
    first = Store(tmp_path / "first")
    u = canonicalize("http://example.com/")
    first.put(u, u.file, HTTPRequest("GET", [], b""), HTTPResponse(200, "OK", [], b"hi"))
    shutil.copy(next(first.warc_files()), good)
    store = Store(tmp_path / "cache")
    with pytest.raises(ImportError_, match=re.escape(words)):
        import_warcs(store, [good, path])
    assert list(store.warc_files()) == []
