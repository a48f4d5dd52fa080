"""The cache policy over real sockets: origin freshness, WWWOFFLE's minimum age, keep the good
copy, Vary and content codings, the browser's own conditional requests, offline reloads.

Each test here is a bug of issue 9 that failed before the policy moved into one module."""

from __future__ import annotations

import gzip

from wwwproxy.url import canonicalize


async def test_origin_max_age_is_served_without_asking_again(proxy, origin):
    url = origin.url("/max-age")
    first = await proxy.get(url)
    assert first.status == 200 and first.header("X-Cache") == "MISS"
    await proxy.recorded(url)
    second = await proxy.get(url)
    assert second.header("X-Cache") == "HIT"
    assert second.body == first.body == b"hit 1"
    assert origin.hits["/max-age"] == 1  # a metered link pays once
    # a browser reload (max-age=0) and a forced one (no-cache) do ask
    await proxy.get(url, headers={"Cache-Control": "max-age=0"})
    await proxy.get(url, headers={"Cache-Control": "no-cache"})
    assert origin.hits["/max-age"] == 3


async def test_request_changed_is_a_minimum_age_before_asking_again(make_proxy, origin):
    proxy = await make_proxy(request_changed=600)
    url = origin.url("/counted")  # no caching headers at all
    assert (await proxy.get(url)).body == b"hit 1"
    await proxy.recorded(url)
    again = await proxy.get(url)
    assert again.body == b"hit 1" and again.header("X-Cache") == "HIT"
    assert origin.hits["/counted"] == 1


async def test_request_changed_never_overrides_an_origin_no_cache(make_proxy, origin):
    proxy = await make_proxy(request_changed=600)
    url = origin.url("/no-cache")
    await proxy.get(url)
    await proxy.recorded(url)
    again = await proxy.get(url)
    assert again.body == b"hit 2" and again.header("X-Cache") == "MISS"


async def test_request_changed_zero_asks_every_time(proxy, origin):
    url = origin.url("/counted")
    await proxy.get(url)
    await proxy.recorded(url)
    assert (await proxy.get(url)).body == b"hit 2"


async def test_error_answer_never_replaces_the_good_copy(proxy, origin):
    url = origin.url("/then-gone")
    assert (await proxy.get(url)).body == b"the good copy"
    await proxy.recorded(url)
    gone = await proxy.get(url)
    assert gone.status == 404  # online, the browser sees what the origin says
    records = await proxy.recorded(url, 4)
    assert [r.status for r in records if r.rec_type == "response"] == ["200", "404"]
    await proxy.control(mode="offline")
    offline = await proxy.get(url)
    assert offline.status == 200 and offline.body == b"the good copy"
    assert offline.header("X-Cache") == "HIT"


async def test_a_cached_500_is_never_fresh(make_proxy, origin):
    proxy = await make_proxy(freshness=[(r"/then-broken$", 3600)], keep_good_copy=False)
    url = origin.url("/then-broken")
    await proxy.get(url)
    await proxy.recorded(url)
    assert (await proxy.get(url)).header("X-Cache") == "HIT"  # the rule: fresh for an hour
    broken = await proxy.get(url, headers={"Cache-Control": "no-cache"})
    assert broken.status == 500
    await proxy.recorded(url, 4)
    # the newest copy is the 500: the rule does not make an error fresh, so it is asked again
    again = await proxy.get(url)
    assert again.status == 500 and again.header("X-Cache") == "MISS"
    assert origin.hits["/then-broken"] == 3


async def test_keep_good_copy_can_be_turned_off(make_proxy, origin):
    proxy = await make_proxy(keep_good_copy=False)
    url = origin.url("/then-broken")
    await proxy.get(url)
    await proxy.recorded(url)
    assert (await proxy.get(url)).status == 500
    await proxy.recorded(url, 4)
    await proxy.control(mode="offline")
    assert (await proxy.get(url)).status == 500


async def test_gzip_copy_is_decoded_for_a_client_without_gzip(proxy, origin):
    url = origin.url("/gzip")
    browser = await proxy.get(url, headers={"Accept-Encoding": "gzip, deflate"})
    assert browser.body == origin.GZIP_BODY
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    plain = await proxy.get(url, headers={"Accept-Encoding": "identity"})
    assert plain.status == 200
    assert plain.body == origin.GZIP_PLAIN
    assert plain.header("Content-Encoding") is None
    assert gzip.decompress(origin.GZIP_BODY) == plain.body
    # a client that takes gzip gets the recorded bytes as they are
    coded = await proxy.get(url, headers={"Accept-Encoding": "gzip"})
    assert coded.body == origin.GZIP_BODY and coded.header("Content-Encoding") == "gzip"


async def test_vary_names_a_header_the_copy_must_match(proxy, origin):
    url = origin.url("/vary-language")
    english = await proxy.get(url, headers={"Accept-Language": "en"})
    assert english.body == b"page in en"
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    same = await proxy.get(url, headers={"Accept-Language": "en"})
    assert same.status == 200 and same.body == b"page in en"
    other = await proxy.get(url, headers={"Accept-Language": "fr"})
    assert other.status == 503  # not the English page: queued for fetching
    assert proxy.outgoing()


async def test_browser_conditional_request_records_the_whole_page(proxy, origin):
    url = origin.url("/etag")
    reply = await proxy.get(url, headers={"If-None-Match": origin.ETAG})
    # the browser gets the 304 it asked about ...
    assert reply.status == 304 and reply.body == b""
    # ... but the proxy asked for the whole page and recorded it, not a 304
    assert origin.last("/etag").header("If-None-Match") is None
    records = await proxy.recorded(url)
    assert [r.status for r in records if r.rec_type == "response"] == ["200"]
    cached = proxy.store.get(canonicalize(url))
    assert cached is not None and cached.status == 200
    await proxy.control(mode="offline")
    offline = await proxy.get(url)
    assert offline.status == 200 and offline.body == b"validated body"


async def test_offline_forced_reload_serves_the_copy_and_queues_a_refresh(proxy, origin):
    url = origin.url("/page.html")
    await proxy.get(url)
    await proxy.recorded(url)
    await proxy.control(mode="offline")
    normal = await proxy.get(url)
    assert normal.status == 200 and not proxy.outgoing()
    forced = await proxy.get(url, headers={"Cache-Control": "no-cache"})
    assert forced.status == 200 and forced.body == origin.HTML
    assert len(proxy.outgoing()) == 1  # fetched when next online, as WWWOFFLE does


async def test_only_if_cached_never_goes_upstream(proxy, origin):
    url = origin.url("/page.html")
    reply = await proxy.get(url, headers={"Cache-Control": "only-if-cached"})
    assert reply.status == 504 and origin.hits["/page.html"] == 0
