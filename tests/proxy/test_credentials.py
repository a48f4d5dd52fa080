"""Header policy end to end: credentials kept out of the archive (digests instead), copies
served only to the credentials they were fetched with (both fronts), Set-Cookie not replayed,
censored request headers as the origin sees them.  A real origin, the real proxy, WARC files
read back with warcio."""

from __future__ import annotations

import gzip
import json
import stat

from warcio.archiveiterator import ArchiveIterator

from wwwproxy.http.policy import CREDENTIALS_HEADER
from wwwproxy.url import canonicalize

AUTH_A = {"Authorization": "Basic YWxpY2U6c2VjcmV0"}  # alice:secret
AUTH_B = {"Authorization": "Basic Ym9iOmh1bnRlcjI="}  # bob:hunter2


def request_headers(proxy, url):
    """The HTTP headers of the URL's WARC request records, every digest checked by warcio."""
    path = proxy.store.path_for(canonicalize(url))
    out = []
    with open(path, "rb") as f:
        for record in ArchiveIterator(f, check_digests=True):
            if record.rec_type == "request":
                out.append(list(record.http_headers.headers))
            record.content_stream().read()  # read whole: the digests are checked at its end
    return out


def names(headers):
    return {n.lower() for n, _ in headers}


async def test_credentials_are_sent_but_not_recorded_by_default(proxy, origin):
    url = origin.url("/echo")
    reply = await proxy.get(url, headers={**AUTH_A, "Cookie": "session=s3cret"})
    assert reply.status == 200
    seen = origin.last("/echo")
    assert seen.header("Authorization") == AUTH_A["Authorization"]  # the origin has them
    assert seen.header("Cookie") == "session=s3cret"
    await proxy.recorded(url)
    [recorded] = request_headers(proxy, url)
    assert "authorization" not in names(recorded) and "cookie" not in names(recorded)
    digests = dict(recorded)[CREDENTIALS_HEADER]
    assert digests.startswith("authorization=") and "; cookie=" in digests
    archived = gzip.decompress(proxy.store.path_for(canonicalize(url)).read_bytes())
    request_record = archived.split(b"WARC-Type: response")[0]
    assert b"s3cret" not in request_record and b"YWxpY2U6c2VjcmV0" not in request_record
    key = proxy.cache / "credentials.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32


async def test_record_credentials_keeps_them(make_proxy, origin):
    proxy = await make_proxy(record_credentials=True)
    url = origin.url("/echo")
    await proxy.get(url, headers={**AUTH_A, "Cookie": "session=s3cret"})
    await proxy.recorded(url)
    [recorded] = request_headers(proxy, url)
    assert dict(recorded)["Authorization"] == AUTH_A["Authorization"]
    assert dict(recorded)["Cookie"] == "session=s3cret"
    assert CREDENTIALS_HEADER in dict(recorded)


async def test_proxy_authorization_is_never_recorded(make_proxy, origin):
    proxy = await make_proxy(record_credentials=True)
    url = origin.url("/echo")
    await proxy.get(url, headers={"Proxy-Authorization": "Basic eDp5"})
    await proxy.recorded(url)
    [recorded] = request_headers(proxy, url)
    assert "proxy-authorization" not in names(recorded)
    assert origin.last("/echo").header("Proxy-Authorization") is None


async def test_authorized_copy_is_served_offline_only_to_the_same_credentials(proxy, origin):
    url = origin.url("/echo")
    await proxy.get(url, headers=AUTH_A)
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    front = proxy.running.front
    same = await proxy.get(url, headers=AUTH_A)  # read into memory on the way
    assert same.status == 200 and same.header("X-Cache") == "HIT"
    assert ["Authorization", AUTH_A["Authorization"]] in json.loads(same.body)["headers"]
    before = front.answered
    again = await proxy.get(url, headers=AUTH_A)  # a memory hit, on the fast front
    assert again.status == 200 and again.body == same.body
    assert front.answered == before + 1
    for others in ({}, AUTH_B, {"Authorization": AUTH_A["Authorization"] + "x"}):
        refused = await proxy.get(url, headers=others)
        assert refused.status == 503, others  # not in the cache for them: queued
        assert b"queued" in refused.body
        assert AUTH_A["Authorization"].encode() not in refused.body
    assert front.answered == before + 1  # the fast front handed every one of them on
    assert len(proxy.outgoing()) == 1


async def test_authorized_copy_is_fetched_again_online_for_others(make_proxy, origin):
    proxy = await make_proxy(freshness=[(".*", 3600)])  # every copy fresh for an hour
    url = origin.url("/echo")
    await proxy.get(url, headers=AUTH_A)
    await proxy.recorded(url)
    hit = await proxy.get(url, headers=AUTH_A)
    assert hit.header("X-Cache") == "HIT" and origin.hits["/echo"] == 1
    other = await proxy.get(url, headers=AUTH_B)
    assert other.header("X-Cache") == "MISS" and origin.hits["/echo"] == 2
    assert ["Authorization", AUTH_B["Authorization"]] in json.loads(other.body)["headers"]
    anonymous = await proxy.get(url)
    assert anonymous.header("X-Cache") == "MISS" and origin.hits["/echo"] == 3


def _answer(*headers: str, body: bytes = b"private page") -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        f"{head}Connection: close\r\n\r\n"
    ).encode() + body


async def record_then_offline(proxy, raw_origin, answer: bytes, path: str, **headers: str):
    """The URL of ``answer`` on a raw origin, fetched online with ``headers``, recorded, and
    the proxy switched offline; returns the URL and the live reply."""
    site = await raw_origin(answer)
    url = site.url(path)
    live = await proxy.get(url, headers=headers)
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    return url, live


async def test_private_copy_is_served_only_to_the_same_cookies(proxy, raw_origin):
    answer = _answer("Cache-Control: private", "Set-Cookie: s=1; Path=/")
    url, live = await record_then_offline(proxy, raw_origin, answer, "/account", Cookie="s=1")
    assert live.header("Set-Cookie") == "s=1; Path=/"  # relayed live
    for _ in range(2):  # from disk, then from memory on the fast front
        mine = await proxy.get(url, headers={"Cookie": "s=1"})
        assert (mine.status, mine.body) == (200, b"private page")
        assert mine.header("Set-Cookie") is None  # not replayed by default
    for others in ({}, {"Cookie": "s=2"}, {"Cookie": "s=1", **AUTH_A}):
        assert (await proxy.get(url, headers=others)).status == 503, others


async def test_public_copy_is_served_to_anyone_without_its_set_cookie(proxy, raw_origin):
    answer = _answer("Set-Cookie: tracker=42", body=b"public page")
    url, _ = await record_then_offline(proxy, raw_origin, answer, "/news", Cookie="s=1")
    for headers in ({}, {"Cookie": "s=9"}, {}):
        reply = await proxy.get(url, headers=headers)
        assert (reply.status, reply.body) == (200, b"public page")
        assert reply.header("Set-Cookie") is None and reply.header("X-Cache") == "HIT"


async def test_replay_set_cookie_replays_it(make_proxy, raw_origin):
    proxy = await make_proxy(replay_set_cookie=True)
    answer = _answer("Set-Cookie: tracker=42", body=b"public page")
    url, _ = await record_then_offline(proxy, raw_origin, answer, "/news")
    for _ in range(3):  # from disk, then from memory: the same answer
        reply = await proxy.get(url)
        assert reply.header("X-Cache") == "HIT"
        assert reply.header("Set-Cookie") == "tracker=42"


async def test_censored_request_headers_reach_the_origin_censored(make_proxy, origin):
    proxy = await make_proxy(
        censor_request_headers=(("User-Agent", "Mozilla/5.0 (generic)"), ("Referer", ""))
    )
    url = origin.url("/echo")
    await proxy.get(url, headers={"User-Agent": "MyBrowser/1.0", "Referer": "http://me/"})
    seen = origin.last("/echo")
    assert seen.header("User-Agent") == "Mozilla/5.0 (generic)"
    assert seen.header("Referer") is None
    await proxy.recorded(url)
    [recorded] = request_headers(proxy, url)  # the archive records what was sent
    assert dict(recorded)["User-Agent"] == "Mozilla/5.0 (generic)"
    assert "referer" not in names(recorded)


async def test_vary_cookie_is_matched_on_the_digests(proxy, raw_origin):
    answer = _answer("Vary: Cookie", body=b"your page")
    url, _ = await record_then_offline(proxy, raw_origin, answer, "/mine", Cookie="s=1")
    for _ in range(2):  # from disk, then from memory
        reply = await proxy.get(url, headers={"Cookie": "s=1"})
        assert (reply.status, reply.body) == (200, b"your page")
    assert (await proxy.get(url, headers={"Cookie": "s=2"})).status == 503
    assert (await proxy.get(url)).status == 503


async def test_the_proxys_pages_withhold_a_copy_fetched_with_credentials(proxy, origin):
    """/cache/ and /search/ are the proxy's own pages: no site's credentials ever come with a
    request for them, so a copy fetched with Authorization is never shown there (the /echo
    body holds the credentials themselves), nor its text in search results; a public copy
    is."""
    private, public = origin.url("/echo?private"), origin.url("/page.html")
    await proxy.get(private, headers=AUTH_A)
    await proxy.get(public)
    await proxy.recorded(private)
    await proxy.recorded(public)
    async with proxy.session() as s:
        async with s.get(f"{proxy.url}/cache/", params={"url": private}) as reply:
            body = await reply.read()
            assert reply.status == 403 and b"credentials" in body
            assert AUTH_A["Authorization"].encode() not in body
        async with s.get(f"{proxy.url}/cache/", params={"url": private, "raw": "1"}) as reply:
            assert reply.status == 403
        async with s.get(f"{proxy.url}/cache/", params={"url": public}) as reply:
            assert reply.status == 200 and b"Hello from the origin." in await reply.read()
        assert proxy.running.services.search is not None
        proxy.running.services.search.flush(10)
        async with s.get(f"{proxy.url}/search/", params={"q": "echo", "format": "json"}) as r:
            data = await r.json()
    found = {hit["url"]: hit for hit in data["results"]}
    assert private in found, data
    assert found[private]["title"] is None and "not shown" in found[private]["snippet"]
    assert "YWxpY2U6c2VjcmV0" not in json.dumps(data)
