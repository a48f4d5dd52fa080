"""Monitored URLs: schedules, the file, and fetching when due."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from wwwproxy.app import open_services
from wwwproxy.config import Config
from wwwproxy.fetch import monitor
from wwwproxy.fetch.monitor import (
    MonitorEntry,
    MonitorError,
    Schedule,
    describe,
    due,
    is_due,
    next_due,
    parse_schedule,
)
from wwwproxy.http.policy import Mode
from wwwproxy.url import canonicalize

from .conftest import Site

TZ = timezone(timedelta(hours=2))
# Thursday 2 May 2024, 07:30 local time
NOW = datetime(2024, 5, 2, 7, 30, tzinfo=TZ)


# --- schedules ---------------------------------------------------------------------------------


def test_parse_schedule() -> None:
    assert parse_schedule(every="6") == Schedule(every=6)
    assert parse_schedule(every="1.5") == Schedule(every=1.5)
    assert parse_schedule(weekdays="Mon, thursday", hours="18 6") == Schedule(
        weekdays=(0, 3), hours=(6, 18)
    )
    assert parse_schedule(hours=["6"]) == Schedule(hours=(6,))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs"),
        ({"every": "0"}, "positive"),
        ({"every": "-1"}, "positive"),
        ({"every": "nan"}, "positive"),
        ({"every": "soon"}, "number"),
        ({"weekdays": "someday"}, "weekday"),
        ({"hours": "24"}, "0-23"),
        ({"hours": "six"}, "hour"),
        ({"every": "6", "hours": "3"}, "either"),
    ],
)
def test_bad_schedules(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(MonitorError, match=message):
        parse_schedule(**kwargs)


def test_describe() -> None:
    assert describe(Schedule(every=1)) == "every 1 hour"
    assert describe(Schedule(every=1.5)) == "every 1.5 hours"
    assert describe(Schedule(weekdays=(0, 3), hours=(6, 18))) == "mon, thu at 06:00, 18:00"
    assert describe(Schedule(weekdays=(6,))) == "sun at 00:00"
    assert describe(Schedule(hours=(9,))) == "every day at 09:00"


def entry(schedule: Schedule, last: datetime | None = None, **kw: object) -> MonitorEntry:
    return MonitorEntry("http://example.com/", schedule, last, **kw)  # type: ignore[arg-type]


def test_every_hours() -> None:
    six = Schedule(every=6)
    assert is_due(entry(six), NOW)  # never fetched: at once
    assert not is_due(entry(six, NOW - timedelta(hours=5)), NOW)
    assert is_due(entry(six, NOW - timedelta(hours=6)), NOW)
    assert next_due(entry(six, NOW - timedelta(hours=5)), NOW) == NOW + timedelta(hours=1)


def test_weekdays_and_hours() -> None:
    thursday_morning = Schedule(weekdays=(3,), hours=(6, 18))
    six_am = datetime(2024, 5, 2, 6, tzinfo=TZ)
    assert is_due(entry(thursday_morning, six_am - timedelta(minutes=5)), NOW)
    fetched_after = entry(thursday_morning, six_am + timedelta(minutes=10))
    assert not is_due(fetched_after, NOW)
    assert next_due(fetched_after, NOW) == datetime(2024, 5, 2, 18, tzinfo=TZ)
    # last week's fetch: due since this morning's slot
    assert next_due(entry(thursday_morning, six_am - timedelta(days=7)), NOW) == six_am
    monday = Schedule(weekdays=(0,))
    got = next_due(entry(monday, datetime(2024, 4, 29, 1, tzinfo=TZ)), NOW)
    assert got == datetime(2024, 5, 6, 0, tzinfo=TZ)
    # slots are local times: the same instant in UTC gives the same answer
    assert not is_due(fetched_after, NOW.astimezone(UTC).astimezone(TZ))


def test_a_failed_try_waits_before_the_next() -> None:
    tried = NOW - timedelta(minutes=5)
    failing = entry(Schedule(every=1), None, tried=tried, error="refused")
    assert not is_due(failing, NOW)
    assert next_due(failing, NOW) == tried + monitor.RETRY_AFTER
    assert is_due(failing, tried + monitor.RETRY_AFTER)


def test_due_picks_the_due_ones() -> None:
    a = MonitorEntry("http://a.example/", Schedule(every=1), NOW - timedelta(hours=2))
    b = MonitorEntry("http://b.example/", Schedule(every=1), NOW - timedelta(minutes=2))
    c = MonitorEntry("http://c.example/", Schedule(hours=(7,)), NOW - timedelta(days=1))
    assert due([a, b, c], NOW) == [a, c]


# --- the file ----------------------------------------------------------------------------------


def test_add_list_remove_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    assert monitor.load(path) == []
    monitor.add(path, "http://Example.COM/news", parse_schedule(every="6"))
    monitor.add(path, "http://example.com/weekly", parse_schedule(weekdays="thu,mon", hours="6"))
    monitor.record_result(path, "http://example.com/news", datetime(2024, 5, 1, 10, tzinfo=UTC))
    assert path.read_text() == (
        "# URLs wwwproxy refetches on a schedule (wwwproxy monitor add|list|remove, /monitor/)\n"
        "- url: http://example.com/news\n"
        "  every: 6\n"
        "  last: '2024-05-01T10:00:00Z'\n"
        "- url: http://example.com/weekly\n"
        "  weekdays: [mon, thu]\n"
        "  hours: [6]\n"
    )
    entries = monitor.load(path)
    assert [e.url for e in entries] == ["http://example.com/news", "http://example.com/weekly"]
    assert entries[0].last == datetime(2024, 5, 1, 10, tzinfo=UTC)
    # a new schedule for a monitored URL keeps its history
    monitor.add(path, "http://example.com/news", parse_schedule(hours="5"))
    news = monitor.load(path)[0]
    assert news.schedule == Schedule(hours=(5,)) and news.last is not None
    assert monitor.remove(path, "http://EXAMPLE.com/news")
    assert not monitor.remove(path, "http://example.com/news")
    assert [e.url for e in monitor.load(path)] == ["http://example.com/weekly"]


def test_only_full_http_urls_are_monitored(tmp_path: Path) -> None:
    """A path-only URL names the proxy itself (canonicalized to localhost:8080, which may not
    even be this proxy): the server would fetch its own pages on a schedule."""
    path = tmp_path / "monitor.yaml"
    for url, message in [
        ("/index/", "not a full URL"),
        ("ftp://example.com/", "only http and https"),
    ]:
        with pytest.raises(MonitorError, match=message):
            monitor.add(path, url, parse_schedule(every="1"))
    assert not path.exists()


def test_hand_edits_and_comments_survive(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("# my pages\n- url: http://example.com/a   # the important one\n  every: 2\n")
    monitor.add(path, "http://example.com/b", Schedule(every=3))
    monitor.record_result(path, "http://example.com/a", NOW, error="the connection was refused")
    text = path.read_text()
    assert text.startswith("# my pages\n")
    assert "# the important one" in text
    a = monitor.load(path)[0]
    assert a.error == "the connection was refused" and a.tried == NOW and a.last is None
    monitor.record_result(path, "http://example.com/a", NOW)
    a = monitor.load(path)[0]
    assert a.error is None and a.tried is None and a.last == NOW


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- url: [unclosed\n", "line 2: not valid YAML"),
        ("url: http://example.com/\n", "must be a list"),
        ("- every: 6\n", "line 1: the entry has no url"),
        ("- url: http://example.com/\n  every: 6\n  colour: red\n", "line 3: unknown key 'colour'"),
        ("- url: http://example.com/\n  every: never\n", "every must be a number"),
        ("- url: http://example.com/\n", "needs every"),
        ("- url: http://example.com/\n  every: 1\n  last: yesterday\n", "line 3: 'yesterday'"),
        ("- url: 'http://exa mple.com/'\n  every: 1\n", "line 1:"),
        (
            "- url: http://example.com/\n  every: 1\n- url: http://EXAMPLE.com/\n  every: 2\n",
            "line 3: http://example.com/ is listed twice",
        ),
    ],
)
def test_bad_files_are_named_with_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(text)
    with pytest.raises(MonitorError) as info:
        monitor.load(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)
    with pytest.raises(MonitorError):  # and nothing is written over it
        monitor.add(path, "http://example.org/", Schedule(every=1))
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("text", "render"),
    [
        ("- url: http://example.com/\n  every: 6\n", False),  # a file from before the key
        ("- url: http://example.com/\n  every: 6\n  render: true\n", True),
        ("- url: http://example.com/\n  every: 6\n  render: false\n", False),
        ("- url: http://example.com/\n  render: true\n  hours: [6]\n", True),
        ("- url: http://example.com/\n  every: 6\n  render: yes\n", "line 3: render must be"),
        ("- url: http://example.com/\n  every: 6\n  render: 1\n", "line 3: render must be"),
        ("- url: http://example.com/\n  every: 6\n  render:\n", "line 3: render must be"),
    ],
)
def test_render_of_an_entry(tmp_path: Path, text: str, render: bool | str) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(text)
    if isinstance(render, str):
        with pytest.raises(MonitorError, match=render):
            monitor.load(path)
        return
    (entry,) = monitor.load(path)
    assert entry.render is render
    assert monitor.page_rows(path, NOW)[0]["render"] is render


def test_add_with_render_writes_the_key_and_adding_again_sets_it(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    entry = monitor.add(path, "http://example.com/a", Schedule(every=6), render=True)
    assert entry.render
    monitor.record_result(path, "http://example.com/a", NOW)
    assert path.read_text().splitlines()[1:] == [
        "- url: http://example.com/a",
        "  every: 6",
        "  render: true",
        "  last: '2024-05-02T05:30:00Z'",
    ]
    assert monitor.add(path, "http://example.com/a", Schedule(hours=(6,))).render is False
    assert path.read_text().splitlines()[1:] == [
        "- url: http://example.com/a",
        "  hours: [6]",
        "  last: '2024-05-02T05:30:00Z'",
    ]
    (entry,) = monitor.load(path)
    assert not entry.render and entry.last == NOW


async def test_a_rendered_entry_without_a_browser_is_noted(tmp_path: Path, site: Site) -> None:
    """Outside a running proxy there is no recording proxy for a browser: the entry's error
    says so, and the entries without render are fetched all the same."""
    cache = tmp_path / "cache"
    path = monitor.monitor_path(cache)
    rendered, plain = site.url("/a.html"), site.url("/deep/d.html")
    monitor.add(path, rendered, Schedule(every=1), render=True)
    monitor.add(path, plain, Schedule(every=1))
    async with open_services(Config(cache=cache)) as services:
        done = dict(await monitor.run_due(services, path))
    assert done[plain] is None
    assert done[rendered] == "not rendered: no recording proxy for the browser (not serving)"
    assert monitor.load(path)[0].error == done[rendered]
    assert site.take_hits() == ["/deep/d.html"]


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    urls = [f"http://example.com/{i}" for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda u: monitor.add(path, u, Schedule(every=1)), urls))
    assert sorted(e.url for e in monitor.load(path)) == sorted(urls)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_page_rows(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    monitor.add(path, "http://example.com/a", Schedule(every=6))
    monitor.add(path, "http://example.com/b", Schedule(weekdays=(3,), hours=(9,)))
    monitor.record_result(path, "http://example.com/b", NOW - timedelta(hours=1))
    rows = monitor.page_rows(path, NOW)
    assert rows[0]["due"] is True and rows[0]["last"] is None
    assert rows[1]["due"] is False
    assert rows[1]["schedule"] == "thu at 09:00"
    assert rows[1]["next"] == "2024-05-02T07:00:00Z"  # 09:00 at +02:00
    assert rows[1]["weekdays"] == ["thu"] and rows[1]["hours"] == [9]


# --- fetching when due -------------------------------------------------------------------------


async def test_run_due_fetches_due_pages_when_online(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    path = monitor.monitor_path(cache)
    page = site.url("/iframe.html")
    monitor.add(path, page, Schedule(every=1))
    saving = Config(cache=cache, request_changed=2 * 3600)  # WWWOFFLE's saving rule
    async with open_services(saving, mode=Mode.OFFLINE) as services:
        store = services.store
        assert await monitor.run_due(services, path) == []
        assert site.take_hits() == []

        services.state.mode = Mode.ONLINE
        assert await monitor.run_due(services, path) == [(page, None)]
        # the page and its requisite (robots.txt is read for the requisite)
        assert sorted(site.take_hits()) == ["/iframe.html", "/img/iframe.png", "/robots.txt"]
        assert store.get(canonicalize(page)) is not None
        assert monitor.load(path)[0].last is not None

        assert await monitor.run_due(services, path) == []  # not due again for an hour
        later = datetime.now(UTC) + timedelta(hours=1, minutes=1)
        assert await monitor.run_due(services, path, later) == [(page, None)]
        # the page is refetched; its requisite is still fresh (request_changed: two hours)
        assert site.take_hits() == ["/iframe.html"]


async def test_a_failing_page_is_noted(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    path = monitor.monitor_path(cache)
    monitor.add(path, site.url("/missing.html"), Schedule(every=1))
    async with open_services(Config(cache=cache)) as services:
        done = await monitor.run_due(services, path)
    assert done == [(site.url("/missing.html"), "HTTP 404 Not Found")]
    noted = monitor.load(path)[0]
    assert noted.error == "HTTP 404 Not Found" and noted.last is None and noted.tried is not None


async def test_monitor_loop_runs_until_cancelled(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    path = monitor.monitor_path(cache)
    monitor.add(path, site.url("/deep/d.html"), Schedule(every=24))
    async with open_services(Config(cache=cache)) as services:
        task = asyncio.create_task(monitor.monitor_loop(services, path, interval=0.02))
        try:
            for _ in range(250):
                if monitor.load(path)[0].last is not None:
                    break
                await asyncio.sleep(0.02)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert monitor.load(path)[0].last is not None
    assert site.take_hits() == ["/deep/d.html"]  # once: then not due for a day


async def test_fetch_now_fetches_a_url_that_is_not_due(tmp_path: Path, site: Site) -> None:
    cache = tmp_path / "cache"
    path = monitor.monitor_path(cache)
    page = site.url("/deep/c.html")
    monitor.add(path, page, Schedule(every=24))
    monitor.record_result(path, page, datetime.now(UTC))
    async with open_services(Config(cache=cache)) as services:
        assert await monitor.run_due(services, path) == []
        assert await monitor.fetch_now(services, path, [page, page]) == [(page, None)]
    assert site.take_hits() == ["/deep/c.html"]
