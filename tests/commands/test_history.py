"""``/history/`` (every capture) and ``/cache/`` (one capture, time travel), over HTTP."""

from __future__ import annotations

import dataclasses
import gzip
from array import array
from datetime import UTC, datetime
from urllib.parse import quote

import aiohttp
import pytest

from wwwproxy.commands.history import annotate_html, parse_when
from wwwproxy.url import canonicalize


def put(store, url: str, body: bytes, when: datetime, headers=None) -> None:
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"", date=when)
    rec.write(body)
    rec.finish(200, "OK", headers or [("Content-Type", "text/html")])


T1 = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)
T2 = datetime(2022, 3, 4, 5, 6, 7, tzinfo=UTC)
T3 = datetime(2023, 3, 4, 5, 6, 7, tzinfo=UTC)


@pytest.fixture
def three(proxy):
    store = proxy.services.store
    url = "http://tt.example/page"
    put(store, url, b"<html><head><title>One</title></head><body>first</body></html>", T1)
    put(store, url, b"<html><head><title>Two</title></head><body>second</body></html>", T2)
    put(store, url, b"<html><head><title>Two</title></head><body>second</body></html>", T3)
    return url


async def test_history_lists_every_capture(client, three):
    status, data = await client.get_json("/history/?url=" + quote(three, safe=""))
    assert status == 200
    caps = data["captures"]
    assert [c["time"][:4] for c in caps] == ["2021", "2022", "2023"]
    assert [c["type"] for c in caps] == ["response", "response", "revisit"]
    assert all(c["status"] == 200 for c in caps)
    status, text, _ = await client.get("/history/?url=" + quote(three, safe=""))
    assert "2021-03-04 05:06:07 UTC" in text and "same content" in text
    assert 'href="/cache/?url=http%3A%2F%2Ftt.example%2Fpage&amp;t=2021-03-04T05%3A06%3A07' in text


async def test_each_capture_viewable_as_it_was(client, three):
    u = quote(three, safe="")
    for t, expect in [
        ("2021-03-04T05:06:07.000000Z", "first"),
        ("2022-03-04T05:06:07.000000Z", "second"),
        ("2023-03-04T05:06:07.000000Z", "second"),  # a revisit: the body of the capture before
        ("20210101", "first"),  # closest capture to a wayback-style time
        ("2022", "second"),
        ("2099", "second"),
    ]:
        status, text, headers = await client.get(f"/cache/?url={u}&t={quote(t)}")
        assert status == 200, t
        assert expect in text and ("first" if expect == "second" else "second") not in text, t
        assert headers["X-Cache"] == "HIT"
    _, text, headers = await client.get(f"/cache/?url={u}")
    assert "second" in text and headers["X-Wwwproxy-Capture"].startswith("2023")


async def test_cached_html_gets_base_and_banner_raw_does_not(client, three):
    u = quote(three, safe="")
    _, text, _ = await client.get(f"/cache/?url={u}&t=2021")
    assert text.index('<base href="http://tt.example/page">') < text.index("<title>")
    assert "archived copy of" in text and "2021-03-04 05:06:07 UTC" in text
    _, raw, _ = await client.get(f"/cache/?url={u}&t=2021&raw=1")
    assert raw == "<html><head><title>One</title></head><body>first</body></html>"


async def test_gzip_capture_is_decoded_for_the_banner_and_kept_for_raw(client, proxy):
    body = b"<html><head><title>Z</title></head><body>zipped words</body></html>"
    put(
        proxy.services.store,
        "http://gz.example/",
        gzip.compress(body),
        T1,
        [("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
    )
    u = quote("http://gz.example/", safe="")
    status, text, headers = await client.get(f"/cache/?url={u}")
    assert status == 200 and "zipped words" in text and "archived copy of" in text
    assert "Content-Encoding" not in headers
    async with client.session.get(
        client.url(f"/cache/?url={u}&raw=1"), auto_decompress=False, **client._kw({})
    ) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(await resp.read()) == body


def _large_page() -> bytes:
    """HTML whose ``<body>`` starts past the first MiB, and that decodes to 3 MiB."""
    rows = b"".join(b"<p>row %07d</p>\n" % i for i in range(220_000))
    return b"<html><head><title>L</title>" + b" " * 1_100_000 + b"</head><body>" + rows


async def test_a_large_coded_capture_is_decoded_whole_and_annotated_as_one(client, proxy):
    body = _large_page()
    headers = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    put(proxy.services.store, "http://large.example/", gzip.compress(body), T1, headers)
    u = quote("http://large.example/", safe="")
    async with client.session.get(client.url(f"/cache/?url={u}"), **client._kw({})) as resp:
        assert resp.status == 200 and "Content-Encoding" not in resp.headers
        served = await resp.read()
    history = client.base + "/history/?url=" + u
    assert served == annotate_html(body, "http://large.example/", T1, history)
    assert b"archived copy of" not in served  # its <body> is past where the banner is put


async def test_a_coded_capture_is_cut_off_past_max_decoded_size(client, proxy, caplog):
    services = proxy.services
    services.reload(dataclasses.replace(services.config, max_decoded_size=2_000_000))
    body = _large_page()
    headers = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    put(services.store, "http://bomb.example/", gzip.compress(body), T1, headers)
    u = quote("http://bomb.example/", safe="")
    received = b""
    with pytest.raises(aiohttp.ClientPayloadError):  # no last chunk: not a whole answer
        async with client.session.get(client.url(f"/cache/?url={u}"), **client._kw({})) as resp:
            assert resp.status == 200
            async for chunk in resp.content.iter_any():
                received += chunk
    base = b'<base href="http://bomb.example/">'
    assert received == body[:12] + base + body[12:2_000_000]  # the bytes up to the bound
    assert "larger than 2000000 bytes (max_decoded_size)" in caplog.text


async def test_a_capture_too_large_for_memory_is_streamed_whole(client, proxy):
    from wwwproxy.archive.memory import MAX_OBJECT

    # 4-byte counters: a chunk sent twice or out of place does not compare equal
    body = array("I", range(MAX_OBJECT // 2 + 12345)).tobytes()  # 2 MiB and some
    octets = [("Content-Type", "application/octet-stream")]  # not annotated: sent as stored
    put(proxy.services.store, "http://big.example/file.bin", body, T1, octets)
    u = quote("http://big.example/file.bin", safe="")
    for path in (f"/cache/?url={u}", f"/cache/?url={u}&raw=1"):
        async with client.session.get(client.url(path), **client._kw({})) as resp:
            assert resp.status == 200 and resp.headers["X-Cache"] == "HIT", path
            assert await resp.read() == body, path


async def test_non_html_is_served_as_stored(client, origin, fetch):
    from .conftest import PNG

    await fetch(origin.url("/img.png"))
    async with client.session.get(
        client.url("/cache/?url=" + quote(origin.url("/img.png"), safe="")), **client._kw({})
    ) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "image/png"
        assert await resp.read() == PNG


async def test_not_cached_and_bad_time(client, three):
    status, data = await client.get_json("/history/?url=http%3A%2F%2Fnone.example%2F")
    assert status == 404 and data["captures"] == []
    status, text, _ = await client.get("/history/?url=http%3A%2F%2Fnone.example%2F")
    assert status == 404 and "not in the cache" in text and "/refresh/?url=" in text
    status, data = await client.get_json("/cache/?url=http%3A%2F%2Fnone.example%2F")
    assert status == 404
    status, data = await client.get_json(f"/cache/?url={quote(three, safe='')}&t=yesterday")
    assert status == 400 and "YYYYMMDDhhmmss" in data["error"]


def test_parse_when():
    assert parse_when("2021") == datetime(2021, 1, 1, tzinfo=UTC)
    assert parse_when("20210304050607") == datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert parse_when("2021-03-04T05:06:07.5Z") == datetime(2021, 3, 4, 5, 6, 7, 500000, UTC)
    for bad in ("", "21", "20211301", "tomorrow", "2021-03-04T05:06:07+01:00"):
        with pytest.raises(ValueError, match="YYYYMMDDhhmmss"):
            parse_when(bad)


def test_annotate_html_puts_base_first_and_escapes():
    out = annotate_html(
        b"<HTML><Head lang=x><base href=/other><title>t</title></head><BODY class=a>x",
        'http://e.example/"q"',
        T1,
        "http://127.0.0.1:1/history/?url=x",
    )
    text = out.decode()
    assert text.startswith('<HTML><Head lang=x><base href="http://e.example/&quot;q&quot;">')
    assert text.index("<BODY class=a><div") > 0
    no_head = annotate_html(b"plain", "http://e.example/", T1, "/h")
    assert no_head.startswith(b'<base href="http://e.example/">plain')


async def test_banner_links_back_to_this_proxy_with_its_port(client, three):
    """The banner's "all captures" link is absolute (the page's <base> is the original site):
    it must name the proxy's address as the browser reached it, port included, directly and
    through the proxy alike (a link without the port would be queued as a foreign URL)."""
    _, text, _ = await client.get(f"/cache/?url={quote(three, safe='')}")
    want = f'href="http://127.0.0.1:{client.port}/history/?url=http%3A%2F%2Ftt.example%2Fpage"'
    assert want in text


async def test_history_says_which_capture_is_served(client, proxy, visible):
    from .test_index import served_statuses

    served_statuses(proxy.services.store)
    status, data = await client.get_json("/history/?url=http%3A%2F%2Fst.example%2Fok")
    assert status == 200 and [c["status"] for c in data["captures"]] == [200, 304]
    assert data["served"]["status"] == 200
    assert [c["served"] for c in data["captures"]] == [True, False]
    _, data = await client.get_json("/history/?url=http%3A%2F%2Fst.example%2Fpart")
    assert [c["status"] for c in data["captures"]] == [206, 404]
    assert data["served"]["status"] == 404
    _, data = await client.get_json("/history/?url=http%3A%2F%2Fst.example%2Fwas")
    assert data["served"]["status"] == 200 and data["served"]["time"].startswith("2024-03-01T00")
    _, text, _ = await client.get("/history/?url=http%3A%2F%2Fst.example%2Fok")
    shown = visible(text)
    assert "Served from the cache: capture 1 of 2, status 200." in shown
    assert "200 (served)" in shown and "304 (served)" not in shown
