"""The index pages at scale, over HTTP: paging (every page once, links between pages, numbers
out of range), a large host's first page only, the kept listings following new captures,
other processes, compactions, deletes and rebuilds, and hostile URLs and types kept inert."""

from __future__ import annotations

import html
import os
import re
import threading
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from wwwproxy.archive.store import Store
from wwwproxy.archive.warc import HTTPRequest, HTTPResponse, append_exchange, build_exchange
from wwwproxy.url import canonicalize

from .test_index import record

T0 = datetime(2024, 1, 1, tzinfo=UTC)


class _NoFlush:
    """In place of the store's GroupSync: fixture data need not reach the disk platter (an
    fsync per file would make a 450-page host take seconds)."""

    def sync(self, paths: object) -> None:
        pass


def fill(store: Store, host: str, count: int, *, proto: str = "http") -> list[str]:
    """``count`` pages of ``host``, written as recording writes them (the real WARC writer,
    the store's index lines, one journal append): distinct times and sizes in no simple
    relation to the names.  Returns their archive keys."""
    lines = []
    keys = []
    for i in range(count):
        u = canonicalize(f"{proto}://{host}/p{i:04d}")
        body = b"%d " % i * ((i * 7919) % 97 + 1)
        when = T0 + timedelta(minutes=(i * 7907) % (count * 3))
        records = build_exchange(
            target_uri=u.canonical,
            archive_key=u.file,
            request=HTTPRequest("GET", [("Host", u.hostport)]),
            response=HTTPResponse(200, "OK", [("Content-Type", "text/plain")], body),
            date=when,
        )
        path = store.path_for(u)
        locations = append_exchange(path, records, sync=_NoFlush())  # type: ignore[arg-type]
        for rec, loc in zip(records, locations, strict=True):
            if rec.info.rec_type == "response":
                lines.append(
                    Store._index_line(u.file, rec.info, path.name, loc.offset, loc.length)  # noqa: SLF001
                )
        keys.append(u.file)
    store.index.add(lines)
    store.catalog.add(lines)  # as the store's own put tells it
    return keys


def file_size(store: Store, key: str) -> int:
    return store.path_for(canonicalize(key)).stat().st_size


def expected(store: Store, keys: list[str], sort: str, order: str) -> list[str]:
    """The order the page should list ``keys`` in (ties by name)."""
    if sort == "time":
        when = {k: store.captures(k)[-1].timestamp for k in keys}
        out = sorted(sorted(keys), key=lambda k: when[k])
    elif sort == "size":  # the served copy's payload (its index line's ple)

        def size(key: str) -> int:
            ple = store.captures(key)[-1].fields.get("ple")
            return ple if isinstance(ple, int) else file_size(store, key)

        out = sorted(sorted(keys), key=size)
    else:
        out = sorted(keys)
    return out[::-1] if order == "desc" else out


def rows(page: str) -> list[str]:
    """The page URLs listed in a host page's table, in order."""
    return [html.unescape(u) for u in re.findall(r'<a class="url" href="([^"]+)" title=', page)]


def pager_link(page: str, label: str) -> str | None:
    m = re.search(rf'<a href="([^"]+)">{label}</a>', page)
    return html.unescape(m.group(1)) if m else None


async def walk(client, path: str) -> list[tuple[str, str]]:
    """(path, HTML) of each page of a paged list, from ``path`` on by its "next" links."""
    walked = []
    following: str | None = path
    while following is not None:
        status, text, _ = await client.get(following)
        assert status == 200
        walked.append((following, text))
        following = pager_link(text, "next →")
    return walked


def page_arg(link: str) -> int:
    return int(parse_qs(urlsplit(link).query)["page"][0])


@pytest.mark.parametrize(
    ("sort", "order"),
    [("name", "asc"), ("name", "desc"), ("time", "desc"), ("time", "asc"), ("size", "desc")],
)
async def test_following_next_shows_every_page_exactly_once(client, proxy, sort, order):
    store = proxy.services.store
    keys = fill(store, "paged.example", 53)
    seen: list[str] = []
    start = f"/index/http/paged.example/?sort={sort}&order={order}&per=7"
    walked = await walk(client, start)
    for number, (path, text) in enumerate(walked, 1):
        shown = rows(text)
        assert len(shown) == (7 if number < 8 else 53 - 7 * 7)
        assert f"page {number} of 8" in text
        status, data = await client.get_json(path + "&format=json")
        assert status == 200 and data["page"] == number and data["pages_total"] == 8
        assert data["total"] == 53 and [p["url"] for p in data["pages"]] == shown
        previous = pager_link(text, "← previous")
        assert (previous is None) == (number == 1)
        if previous is not None:
            assert page_arg(previous) == number - 1
        seen += shown
        following = pager_link(text, "next →")
        assert following is None or page_arg(following) == number + 1
    assert len(walked) == 8
    assert seen == expected(store, keys, sort, order)  # each once, in order


async def test_page_numbers_out_of_range(client, proxy, visible):
    fill(proxy.services.store, "range.example", 12)
    base = "/index/http/range.example/?per=5"
    status, data = await client.get_json(base + "&page=4")
    assert status == 200 and data["page"] == 3 and len(data["pages"]) == 2
    status, text, _ = await client.get(base + "&page=4000")
    assert status == 200
    assert "There is no page 4000: this is the last one, 3 of 3." in visible(text)
    assert rows(text) == [f"http://range.example/p{i:04d}" for i in (10, 11)]
    assert pager_link(text, "next →") is None and page_arg(pager_link(text, "« first")) == 1
    for bad in ("0", "-1", "abc", "1.5", "9" * 40):
        status, data = await client.get_json(base + f"&page={bad}")
        assert status == 400 and "'page'" in data["error"]
        status, text, _ = await client.get(base + f"&page={bad}")
        assert status == 400 and "Traceback" not in text
    for bad in ("0", "1001"):
        status, data = await client.get_json(f"/index/http/range.example/?per={bad}")
        assert status == 400 and "'per'" in data["error"]


async def test_a_large_host_shows_its_first_page_only(client, proxy):
    store = proxy.services.store
    keys = fill(store, "large.example", 450)
    fill(store, "small.example", 3)
    status, text, _ = await client.get("/index/http/large.example/")
    assert status == 200
    assert rows(text) == sorted(keys)[:100]
    assert "page 1 of 5 (1–100 of 450 pages)" in text
    assert page_arg(pager_link(text, "next →")) == 2
    assert page_arg(pager_link(text, "last »")) == 5
    assert pager_link(text, "← previous") is None
    status, data = await client.get_json("/index/http/large.example/")
    assert data["total"] == 450 and data["files"] == 450 and len(data["pages"]) == 100
    # a host with one page of entries has no pager
    status, text, _ = await client.get("/index/http/small.example/")
    assert status == 200 and len(rows(text)) == 3 and "next →" not in text
    status, data = await client.get_json("/index/")
    hosts = {h["host"]: h for h in data["hosts"]}
    assert hosts["large.example"]["pages"] == 450 and data["total_pages"] == 453


def host_files(store: Store, host: str) -> tuple[int, int, float]:
    """(files, bytes) of a host's folder, read from the disk, and the time of its newest
    capture, read from the index."""
    from wwwproxy.url.surt import host_surt

    paths = list(store.list_host("http", host))
    stats = [p.stat() for p in paths]
    newest = max(r.as_datetime() for r in store.list_prefix(host_surt(host) + "/"))
    return len(paths), sum(s.st_size for s in stats), newest.timestamp()


async def test_kept_listings_follow_every_change(client, proxy):
    """What happens after a page was seen must show: captures by this process and by
    another one (another Store on the same cache, as ``wwwproxy fetch`` is), a compaction, a
    delete and an index rebuild."""
    store = proxy.services.store
    keys = fill(store, "live.example", 30)
    fill(store, "other.example", 4)
    path = "/index/http/live.example/?per=100"

    async def pages() -> dict[str, dict]:
        status, data = await client.get_json(path)
        assert status == 200
        assert data["total"] == len(data["pages"])
        return {p["url"]: p for p in data["pages"]}

    async def hosts() -> dict[str, dict]:
        status, data = await client.get_json("/index/")
        assert status == 200
        return {h["host"]: h for h in data["hosts"]}

    async def check_host(host: str) -> None:
        files, size, last = host_files(store, host)
        shown = (await hosts())[host]
        assert (shown["pages"], shown["size"]) == (files, size)
        assert abs(datetime.fromisoformat(shown["last"]).timestamp() - last) < 1e-3
        status, data = await client.get_json("/")
        assert status == 200 and data["pages"] == sum(h["pages"] for h in (await hosts()).values())

    assert len(await pages()) == 30
    await check_host("live.example")
    later = T0 + timedelta(days=30)
    record(store, "http://live.example/new", b"new", later)
    record(store, keys[0], b"changed", later + timedelta(hours=1), status=404)
    got = await pages()
    assert len(got) == 31 and got["http://live.example/new"]["captures"] == 1
    first = got[keys[0]]
    assert first["captures"] == 2 and first["time"].startswith("2024-01-31T01:00")
    assert first["status"] == 200  # the good copy is still the one served
    assert first["size"] == file_size(store, keys[0])
    await check_host("live.example")

    other = Store(store.root)  # another process's store: no listener of ours hears it
    record(other, "http://live.example/by-other", b"o", later)
    record(other, keys[1], b"appended by the other", later)
    got = await pages()
    assert len(got) == 32 and got[keys[1]]["captures"] == 2
    assert got[keys[1]]["size"] == file_size(store, keys[1])
    await check_host("live.example")  # an append to an existing file shows too

    assert store.index.compact() is not None  # the journal merged into the index
    record(other, keys[2], b"after the compaction", later)
    got = await pages()
    assert len(got) == 32 and got[keys[2]]["captures"] == 2 and got[keys[0]]["captures"] == 2
    await check_host("live.example")

    assert store.delete(canonicalize("http://live.example/new"))
    got = await pages()
    assert len(got) == 31 and "http://live.example/new" not in got
    await check_host("live.example")

    os.remove(store.path_for(canonicalize(keys[3])))
    count, problems = store.rebuild_index()  # a file gone behind the index's back
    assert not problems
    got = await pages()
    assert len(got) == 30 and keys[3] not in got and got[keys[0]]["captures"] == 2
    await check_host("live.example")
    await check_host("other.example")

    for path_ in store.list_host("http", "other.example"):  # removed behind its back ...
        path_.unlink()
    (store.root / "http" / "other.example").rmdir()
    store.rebuild_index()  # ... shows once the index is made again
    assert "other.example" not in await hosts()
    assert len(await pages()) == 30


def test_listing_functions_see_changes_between_calls(tmp_path):
    """The same without a proxy: the functions the pages use, on a Store of their own."""
    from wwwproxy.commands.index import host_pages, list_hosts
    from wwwproxy.commands.listing import host_window

    store = Store(tmp_path / "cache")
    keys = fill(store, "fn.example", 9)
    window = host_window(store, "http", "fn.example", sort="time", descending=True, per=4)
    assert (window.total, window.files, window.number, window.last) == (9, 9, 1, 3)
    assert [p.key for p in window.pages] == expected(store, keys, "time", "desc")[:4]
    window = host_window(store, "http", "fn.example", number=99, per=4)
    assert window.number == 3 and window.start == 8 and [p.key for p in window.pages] == keys[8:]
    record(store, "http://fn.example/zz", b"z", T0)
    assert [p.key for p in host_pages(store, "http", "fn.example")][-1] == "http://fn.example/zz"
    assert [(h.hostport, h.pages) for h in list_hosts(store.root)] == [("fn.example", 10)]
    with pytest.raises(ValueError):
        host_window(store, "http", "fn.example", sort="colour")


HOSTILE_URL = "http://evil.example/<script>alert(1)</script>?q=\"><img src=x onerror=alert(2)>&x='"
HOSTILE_TYPE = 'text/html"><script>alert(3)</script>'


async def test_hostile_urls_and_types_stay_inert_on_every_page_and_order(client, proxy):
    store = proxy.services.store
    record(store, HOSTILE_URL, b"x", T0, ctype=HOSTILE_TYPE)
    record(store, "http://evil.example/a'b\"c<d>e&f", b"y", T0 + timedelta(hours=1))
    fill(store, "evil.example", 12)
    for args in ("", "?sort=time", "?sort=size&order=asc", "?per=3&page=2", "?per=1&page=14"):
        status, text, _ = await client.get(f"/index/http/evil.example/{args}")
        assert status == 200
        for raw in ("<script", "<img", "onerror=alert(2)>", "'b\"c"):
            assert raw not in text.split("<main>", 1)[1]
    status, text, _ = await client.get("/index/http/evil.example/?sort=time&order=asc&per=2")
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in text  # the type, escaped
    status, data = await client.get_json("/index/http/evil.example/?sort=time&order=asc&per=2")
    assert data["pages"][0]["mime"] == HOSTILE_TYPE  # JSON carries it as it was
    assert data["pages"][0]["url"] == canonicalize(HOSTILE_URL).file


async def test_a_host_name_no_file_system_holds_is_not_found(client):
    status, data = await client.get_json(f"/index/http/{'a' * 4100}/")
    assert status == 404


def test_no_index_yet_and_empty_folders(tmp_path):
    from wwwproxy.commands.index import list_hosts
    from wwwproxy.commands.listing import host_window

    store = Store(tmp_path / "cache")
    (store.root / "http" / "empty.example").mkdir(parents=True)
    assert list_hosts(store) == []
    window = host_window(store, "http", "empty.example")
    assert (window.total, window.files, window.number, window.last) == (0, 0, 1, 1)
    assert window.start == 0 and window.pages == []


def fresh_listing(store: Store, host: str, keep_good: bool = True) -> list[dict]:
    """A host's pages computed the plain way, from nothing: every index line of the host,
    grouped by key, the served capture as the store chooses it, sizes from the files."""
    from wwwproxy.archive.store import served_record
    from wwwproxy.url.surt import host_surt

    lines: dict[str, list] = {}
    for rec in store.list_prefix(host_surt(host) + "/"):
        if rec.uri.startswith("http://"):
            lines.setdefault(rec.uri, []).append(rec)
    out = []
    for uri in sorted(lines):
        records = lines[uri]
        newest = max(records, key=lambda r: r.timestamp)
        served = served_record(records, prefer_good=keep_good)
        status = served.fields.get("hsc", 200) if served is not None else None
        newest_status = newest.fields.get("hsc", 200)
        payload = None
        if served is not None:  # a revisit's payload is the newest response's before it
            responses = [
                r
                for r in records
                if r.record_type == "response" and r.timestamp <= served.timestamp
            ]
            if served.record_type == "response":
                payload = served.fields.get("ple")
            elif responses:
                payload = responses[-1].fields.get("ple")
        out.append(
            {
                "url": uri,
                "time": newest.as_datetime().isoformat(),
                "status": status,
                "newest_status": newest_status if newest_status != status else None,
                "mime": (served or newest).fields.get("mct"),
                "captures": len(records),
                "size": file_size(store, uri),
                "payload": payload,
            }
        )
    return out


async def test_a_kept_listing_equals_a_fresh_one_after_concurrent_changes(client, proxy):
    """Writers in threads (this process's store and another one's) add pages and captures
    and compact the index while the pages are being asked for: afterwards the kept listing
    is exactly what a listing made from nothing says."""
    store = proxy.services.store
    fill(store, "busy.example", 40)
    other = Store(store.root)

    def writer(n: int, target: Store) -> None:
        for i in range(25):
            url = f"http://busy.example/p{(n * 13 + i * 7) % 60:04d}"  # old pages and new
            status = (200, 404, 304, 200)[(n + i) % 4]
            record(target, url, b"%d-%d" % (n, i), T0 + timedelta(days=n, hours=i), status=status)
            if n == 0 and i % 8 == 7:
                store.index.compact()

    threads = [
        threading.Thread(target=writer, args=(n, store if n % 2 else other)) for n in range(3)
    ]
    for thread in threads:
        thread.start()
    asked = 0
    while any(thread.is_alive() for thread in threads) or asked < 5:
        sort = ("name", "time", "size")[asked % 3]
        status, _ = await client.get_json(f"/index/http/busy.example/?sort={sort}&per=9")
        assert status == 200
        status, _ = await client.get_json("/index/")
        assert status == 200
        asked += 1
    for thread in threads:
        thread.join()
    status, data = await client.get_json("/index/http/busy.example/?per=1000")
    assert status == 200
    assert data["pages"] == fresh_listing(store, "busy.example")
    files, size, _ = host_files(store, "busy.example")
    status, data = await client.get_json("/index/")
    (busy,) = [h for h in data["hosts"] if h["host"] == "busy.example"]
    assert (busy["pages"], busy["size"]) == (files, size)


async def test_the_host_list_pages_250_hosts_as_3_pages(client, proxy):
    """``/index/`` shows 100 hosts a page with the host pages' pager, sortable by name,
    pages, size and last fetch; following "next" shows every host once."""
    store = proxy.services.store
    for i in range(250):
        fill(store, f"h{i:03d}.example", 1 + (i * 37) % 5)
    seen: list[str] = []
    walked = await walk(client, "/index/")
    for number, (_, text) in enumerate(walked, 1):
        shown = re.findall(r'<a href="/index/http/([^/"]+)/">', text)
        assert len(shown) == (100 if number < 3 else 50)
        assert f"page {number} of 3" in text and "250 hosts" in text
        seen += shown
    assert len(walked) == 3 and seen == sorted(f"h{i:03d}.example" for i in range(250))
    status, data = await client.get_json("/index/?page=3")
    assert status == 200 and (data["page"], data["pages_total"]) == (3, 3)
    assert data["total_hosts"] == 250 and len(data["hosts"]) == 50
    assert data["total_pages"] == sum(1 + (i * 37) % 5 for i in range(250))
    for sort, field in (("pages", "pages"), ("size", "size"), ("time", "last")):
        status, data = await client.get_json(f"/index/?sort={sort}&per=250")
        values = [h[field] for h in data["hosts"]]
        assert status == 200 and values == sorted(values, reverse=True)  # largest first
    status, data = await client.get_json("/index/?sort=name&order=desc&per=10")
    assert [h["host"] for h in data["hosts"]][0] == "h249.example"
    status, data = await client.get_json("/index/?sort=colour")
    assert status == 400 and "sort" in data["error"]
