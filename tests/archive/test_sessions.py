"""The session log and lastout (wwwproxy/archive/sessions.py): the rules by tables, the files
for real (crash-torn lines, bounds, modes)."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wwwproxy.archive.sessions import (
    LASTOUT_NAME,
    MAX_LASTOUT,
    SESSIONS_NAME,
    Event,
    OutEntry,
    Session,
    SessionLog,
    boundary,
    parse_events,
    read_lastout,
    sessions_of,
    write_lastout,
)

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def t(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (None, "online", "start"),
        (None, "autodial", "start"),
        (None, "offline", None),
        ("offline", "online", "start"),
        ("offline", "autodial", "start"),
        ("online", "autodial", None),  # one session: both fetch
        ("autodial", "online", None),
        ("online", "online", None),
        ("online", "offline", "end"),
        ("autodial", "offline", "end"),
        ("online", None, "end"),  # the proxy stops
        ("offline", None, None),
        ("offline", "offline", None),
    ],
)
def test_boundary(before: str | None, after: str | None, expected: str | None) -> None:
    assert boundary(before, after) == expected


def ev(kind: str, minutes: int, mode: str = "online") -> Event:
    return Event(kind, t(minutes), mode)


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([], []),
        ([ev("start", 0)], [Session(t(0), None, "online")]),
        ([ev("start", 0), ev("end", 5, "offline")], [Session(t(0), t(5), "online")]),
        (  # a crash left the first open: it ends where the next starts
            [ev("start", 0), ev("start", 9, "autodial"), ev("end", 12, "offline")],
            [Session(t(0), t(9), "online"), Session(t(9), t(12), "autodial")],
        ),
        ([ev("end", 3, "offline"), ev("start", 4)], [Session(t(4), None, "online")]),
        (  # a clock that went back makes an empty session, never a negative one
            [ev("start", 10), ev("end", 5, "offline")],
            [Session(t(10), t(10), "online")],
        ),
    ],
)
def test_sessions_of(events: list[Event], expected: list[Session]) -> None:
    assert sessions_of(events) == expected


def test_parse_events_skips_what_is_not_an_event() -> None:
    good = ev("start", 1).to_json()
    lines = [
        good,
        '{"event": "start", "time": "2026-11-20T08:00:00+00:00"',  # torn
        '{"event": "pause", "time": "2026-11-20T08:00:00+00:00", "mode": "x"}',
        '{"event": "end", "time": "2026-11-20T08:00:00", "mode": "offline"}',  # naive time
        '{"event": "end", "time": 5, "mode": "offline"}',
        "[1, 2]",
        "",
        b"\xff\xfe",
        '{"event": "end", "time": "2026-11-20T09:00:00+01:00", "mode": "offline"}',
    ]
    assert parse_events(lines) == [ev("start", 1), ev("end", 0, "offline")]


def test_log_records_switches_and_is_private(tmp_path: Path) -> None:
    log = SessionLog(tmp_path)
    assert log.sessions() == []
    assert log.note(None, "offline", t(0)) is False  # starting offline: no session
    assert not (tmp_path / SESSIONS_NAME).exists()
    assert log.note("offline", "online", t(1))
    assert log.note("online", "autodial", t(2)) is False
    assert log.note("autodial", "offline", t(3))
    assert log.note("offline", "autodial", t(4))
    assert stat.S_IMODE(os.stat(tmp_path / SESSIONS_NAME).st_mode) == 0o600
    # newest first: lasttime (still running), then prevtime1
    assert SessionLog(tmp_path).sessions() == [
        Session(t(4), None, "autodial"),
        Session(t(1), t(3), "online"),
    ]


def test_a_torn_line_is_skipped_and_not_joined_to_the_next(tmp_path: Path) -> None:
    log = SessionLog(tmp_path)
    log.note(None, "online", t(0))
    with open(tmp_path / SESSIONS_NAME, "ab") as f:  # a crash in the middle of a write
        f.write(b'{"event": "end", "time": "2026-')
    log.note(None, "online", t(10))  # the next start
    log.note("online", "offline", t(11))
    lines = (tmp_path / SESSIONS_NAME).read_bytes().splitlines()
    assert len(lines) == 4 and lines[1].startswith(b'{"event": "end", "time": "2026-')
    assert log.sessions() == [Session(t(10), t(11), "online"), Session(t(0), t(10), "online")]


def test_the_log_is_bounded_to_the_last_sessions(tmp_path: Path) -> None:
    log = SessionLog(tmp_path, keep=3)
    for n in range(20):
        log.note("offline", "online", t(10 * n))
        log.note("online", "offline", t(10 * n + 5))
        assert len((tmp_path / SESSIONS_NAME).read_bytes().splitlines()) <= 4 * 3
    assert log.sessions() == [Session(t(10 * n), t(10 * n + 5), "online") for n in (19, 18, 17)]
    assert stat.S_IMODE(os.stat(tmp_path / SESSIONS_NAME).st_mode) == 0o600


def test_lastout_round_trip(tmp_path: Path) -> None:
    assert read_lastout(tmp_path) is None
    entries = [
        OutEntry("http://a.example/", "GET", "fetched", 200, None),
        OutEntry("http://b.example/x", "POST", "failed", None, "connection refused <&>"),
        OutEntry("http://c.example/", "GET", "fresh", 304, None),
    ]
    write_lastout(tmp_path, t(0), t(1), entries)
    got = read_lastout(tmp_path)
    assert got is not None
    assert (got.started, got.finished, got.total, got.entries) == (t(0), t(1), 3, entries)
    assert [e.ok for e in got.entries] == [True, False, True]
    assert stat.S_IMODE(os.stat(tmp_path / LASTOUT_NAME).st_mode) == 0o600
    write_lastout(tmp_path, t(5), t(6), entries[1:2])  # replaced whole
    again = read_lastout(tmp_path)
    assert again is not None and again.entries == entries[1:2] and again.started == t(5)


def test_lastout_is_bounded_and_bad_lines_are_skipped(tmp_path: Path) -> None:
    many = [OutEntry(f"http://h.example/{n}", "GET", "fetched", 200, None) for n in range(11_000)]
    write_lastout(tmp_path, t(0), t(1), many)
    got = read_lastout(tmp_path)
    assert got is not None and got.total == 11_000 and len(got.entries) == MAX_LASTOUT
    path = tmp_path / LASTOUT_NAME
    head = json.dumps({"started": t(0).isoformat(), "finished": t(1).isoformat(), "total": 2})
    path.write_text(head + '\n{"url": 5}\nnot json\n' + json.dumps(many[0].as_json()) + "\n")
    got = read_lastout(tmp_path)
    assert got is not None and got.entries == many[:1] and got.total == 2
    path.write_text("garbage\n")
    assert read_lastout(tmp_path) is None
