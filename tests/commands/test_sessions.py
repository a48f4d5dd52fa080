"""``/index/lasttime/``, ``/index/prevtime<n>/`` and ``/index/lastout/`` over HTTP, with the
real proxy switching modes, a real origin, real WARC files and the real index."""

from __future__ import annotations

import html
import os
import socket
import stat
from datetime import UTC, datetime, timedelta

import pytest

from wwwproxy.archive.sessions import SESSIONS_NAME, SessionLog
from wwwproxy.url import canonicalize

from .conftest import EVIL_TITLE, make_config, start_proxy, stop_proxy

T0 = datetime(2025, 6, 1, 8, 0, tzinfo=UTC)


def record(store, url: str, when: datetime, body: bytes = b"page", status: int = 200) -> None:
    """One capture straight into the store at ``when`` (no origin needed)."""
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"", date=when)
    rec.write(body)
    rec.finish(status, "OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))])


def sessions_at(store, *spans: tuple[int, int | None]) -> None:
    """Replace the session log with sessions from T0 + start to T0 + end minutes (None:
    still running), oldest first."""
    (store.root / SESSIONS_NAME).unlink(missing_ok=True)
    log = SessionLog(store.root)
    for start, end in spans:
        log.note("offline", "online", T0 + timedelta(minutes=start))
        if end is not None:
            log.note("online", "offline", T0 + timedelta(minutes=end))


def names(captures: list[dict]) -> list[str]:
    return [c["url"].rsplit("/", 1)[1] for c in captures]


async def test_each_session_lists_what_was_fetched_in_it(client, proxy, origin, fetch):
    """Online from the start: a.html; offline; online again: b.html.  lasttime is the second
    session, prevtime1 the first, each with its own captures and times."""
    await fetch(origin.url("/a.html"))
    status, _ = await client.post_api("/control/", {"mode": "offline"})
    assert status == 200
    status, _ = await client.post_api("/control/", {"mode": "autodial"})
    await fetch(origin.url("/b.html"))
    await client.post_api("/control/", {"mode": "online"})  # the same session still
    await fetch(origin.url("/style.css"))
    status, last = await client.get_json("/index/lasttime/")
    assert status == 200
    assert names(last["captures"]) == ["style.css", "b.html"]  # newest first
    assert last["session"]["end"] is None and last["session"]["mode"] == "autodial"
    assert last["complete"] is True and last["total"] == 2
    assert last["captures"][1]["status"] == 200
    assert last["captures"][1]["mime"] == "text/html"
    status, prev = await client.get_json("/index/prevtime1/?format=json", headers={})
    assert status == 200
    assert names(prev["captures"]) == ["a.html"]
    assert prev["session"]["end"] is not None
    assert prev["session"]["end"] <= last["session"]["start"]
    assert [s["name"] for s in last["sessions"]] == ["lasttime", "prevtime1"]
    status, _ = await client.get_json("/index/prevtime2/")
    assert status == 404
    status, _ = await client.get_json("/index/prevtime10/")
    assert status == 404
    mode = stat.S_IMODE(os.stat(proxy.services.store.root / SESSIONS_NAME).st_mode)
    assert mode == 0o600
    status, text, _ = await client.get("/index/prevtime1/")
    assert status == 200 and "a.html" in text and "b.html" not in text
    assert 'href="/index/lasttime/"' in text and 'href="/index/lastout/"' in text


async def test_stopping_ends_the_session_and_a_restart_starts_one(tmp_path):
    config = make_config(tmp_path)
    running = await start_proxy(config)
    await stop_proxy(running)
    running = await start_proxy(config, mode=None)
    try:
        sessions = SessionLog(running.services.store.root).sessions()
        assert len(sessions) == 2 and sessions[0].end is None and sessions[1].end is not None
    finally:
        await stop_proxy(running)
    sessions = SessionLog(config.cache).sessions()
    assert all(s.end is not None for s in sessions)


async def test_starting_offline_is_no_session(tmp_path, via):
    import aiohttp

    from .conftest import TIMEOUT, Client

    running = await start_proxy(make_config(tmp_path, mode="offline"))
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            client = Client(running.port, via, session)
            status, data = await client.get_json("/index/lasttime/")
            assert status == 200 and data["session"] is None and data["captures"] == []
            status, text, _ = await client.get("/index/lasttime/")
            assert status == 200 and "No online session is recorded yet" in text
            status, _ = await client.get_json("/index/prevtime1/")
            assert status == 404
    finally:
        await stop_proxy(running)
    assert not (tmp_path / "cache" / SESSIONS_NAME).exists()


async def test_a_long_session_is_paged_and_escaped(client, proxy):
    store = proxy.services.store
    sessions_at(store, (0, 60), (100, None))
    for i in range(250):
        record(store, f"http://many.example/p{i:03d}", T0 + timedelta(minutes=100, seconds=i))
    record(store, "http://many.example/before", T0 + timedelta(minutes=30))  # prevtime1
    record(store, "http://many.example/between", T0 + timedelta(minutes=80))  # in no session
    evil = "http://many.example/x?a=1&b=<script>alert(1)</script>"
    record(store, evil, T0 + timedelta(minutes=200))
    status, data = await client.get_json("/index/lasttime/?per=100&page=3")
    assert status == 200
    assert (data["total"], data["page"], data["pages_total"]) == (251, 3, 3)
    assert names(data["captures"]) == [f"p{i:03d}" for i in range(50, -1, -1)]
    status, data = await client.get_json("/index/lasttime/?per=100&page=1&order=asc")
    assert names(data["captures"])[:2] == ["p000", "p001"]
    status, data = await client.get_json("/index/lasttime/?per=100&page=99")
    assert data["page"] == 3
    status, data = await client.get_json("/index/prevtime1/")
    assert names(data["captures"]) == ["before"]
    status, text, _ = await client.get("/index/lasttime/?per=100&page=2")
    assert status == 200
    assert "page 2 of 3 (101–200 of 251 captures)" in text
    assert "« first" not in text and "last »" not in text and "next →" in text
    status, text, _ = await client.get("/index/lasttime/?per=100")
    key = canonicalize(evil).file  # the URL layer encodes < and >, not &
    assert "a=1&b=" in key and "a=1&b=" not in text and html.escape(key) in text
    status, text, _ = await client.get("/index/lasttime/?per=100&page=9")
    assert "There is no page 9" in text
    for bad in ("order=up", "per=0", "page=x"):
        status, _ = await client.get_json(f"/index/lasttime/?{bad}")
        assert status == 400


async def test_the_lists_follow_new_captures_deletes_and_compactions(client, proxy):
    store = proxy.services.store
    sessions_at(store, (0, None))
    record(store, "http://f.example/one", T0 + timedelta(minutes=1))
    _, data = await client.get_json("/index/lasttime/")
    assert names(data["captures"]) == ["one"]
    record(store, "http://f.example/two", T0 + timedelta(minutes=2))  # from the journal
    _, data = await client.get_json("/index/lasttime/")
    assert names(data["captures"]) == ["two", "one"]
    store.index.compact()  # a merge: the kept list stays
    record(store, "http://f.example/three", T0 + timedelta(minutes=3))
    _, data = await client.get_json("/index/lasttime/")
    assert names(data["captures"]) == ["three", "two", "one"]
    assert store.delete(canonicalize("http://f.example/two"))
    _, data = await client.get_json("/index/lasttime/")
    assert names(data["captures"]) == ["three", "one"]
    from wwwproxy.archive.store import Store

    other = Store(store.root)  # another process's store: only its journal lines tell
    record(other, "http://f.example/four", T0 + timedelta(minutes=4))
    _, data = await client.get_json("/index/lasttime/")
    assert names(data["captures"]) == ["four", "three", "one"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_lastout_is_what_the_last_queue_fetch_got(client, proxy, origin):
    status, data = await client.get_json("/index/lastout/")
    assert status == 200 and data["started"] is None and data["urls"] == []
    status, text, _ = await client.get("/index/lastout/")
    assert "The queue has not been fetched yet" in text
    await client.post_api("/control/", {"mode": "offline"})
    good = origin.url("/a.html")
    evil = origin.url("/evil")
    dead = f"http://127.0.0.1:{closed_port()}/gone?a=1&b=2"
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for url in (good, evil, dead):
            async with session.get(url, proxy=f"http://127.0.0.1:{proxy.port}") as resp:
                assert resp.status == 503  # queued
    status, result = await client.post_api("/control/", {"mode": "online", "action": "fetch"})
    assert status == 200 and result["failed"] == 1
    status, data = await client.get_json("/index/lastout/")
    assert status == 200 and data["total"] == 3 and data["failed"] == 1
    by_url = {u["url"]: u for u in data["urls"]}
    assert by_url[canonicalize(good).file]["ok"] is True
    assert by_url[canonicalize(good).file]["status"] == 200
    failed = [u for u in data["urls"] if not u["ok"]]
    assert len(failed) == 1 and failed[0]["outcome"] == "failed" and failed[0]["problem"]
    status, text, _ = await client.get("/index/lastout/")
    assert "gone?a=1&b=2" not in text and "gone?a=1&amp;b=2" in text
    assert EVIL_TITLE not in text
    assert "3 URL(s), 2 got, 1 failed" in text
    status, data = await client.get_json("/index/lastout/?per=1&page=2")
    assert len(data["urls"]) == 1 and data["pages_total"] == 3


@pytest.mark.parametrize("path", ["/", "/index/", "/index/http/l.example/"])
async def test_the_welcome_and_index_pages_link_to_them(client, proxy, path):
    record(proxy.services.store, "http://l.example/", T0)
    status, text, _ = await client.get(path)
    assert status == 200
    assert 'href="/index/lasttime/"' in text
    if path != "/index/http/l.example/":
        assert 'href="/index/lastout/"' in text


async def test_past_the_memory_bound_the_oldest_are_let_go(client, proxy, monkeypatch):
    from wwwproxy.commands import recent

    monkeypatch.setattr(recent, "MAX_RECENT", 5)
    store = proxy.services.store
    sessions_at(store, (0, 10), (20, None))
    for i in range(4):
        record(store, f"http://b.example/old{i}", T0 + timedelta(minutes=1 + i))
    for i in range(4):
        record(store, f"http://b.example/new{i}", T0 + timedelta(minutes=21 + i))
    _, data = await client.get_json("/index/lasttime/")
    assert names(data["captures"]) == ["new3", "new2", "new1", "new0"] and data["complete"]
    _, data = await client.get_json("/index/prevtime1/")
    assert names(data["captures"]) == ["old3"] and data["complete"] is False
    status, text, _ = await client.get("/index/prevtime1/")
    assert status == 200 and "the start of this session is not listed" in text


async def test_index_lines_in_other_forms_are_read(client, proxy):
    """A line the index did not write (a timestamp to the second, keys in another order) is
    read the full way; a malformed one is skipped."""
    store = proxy.services.store
    sessions_at(store, (0, None))
    record(store, "http://o.example/written", T0 + timedelta(minutes=1))
    journal = store.root / "index" / "journal.cdxj"
    with open(journal, "ab") as f:
        f.write(
            b'(example,o,)/other 2025-06-01T08:02:00Z response {"ref":"warcfile:x.warc.gz#0",'
            b'"uri":"http://o.example/other","hsc":404}\n'
            b"(example,o,)/bad 2025-06-01T08:03:00.000000Z response {not json\n"
        )
    _, data = await client.get_json("/index/lasttime/")
    assert names(data["captures"]) == ["other", "written"]
    assert data["captures"][0]["status"] == 404
