"""The cache's small logs behind WWWOFFLE's lasttime / prevtime and lastout indexes.

``cache/sessions.jsonl`` records where each online session began and ended: one JSON line per
boundary (``{"event": "start", "time": ..., "mode": "online"}``, ``"end"``), appended and
fsynced, so the pages that list what a session fetched ask the CDXJ index for captures between
two times instead of scanning anything.  A session is time spent connected (online or
autodial): it starts when ``serve`` starts connected or switches from offline to a connected
mode, and ends when it switches to offline or stops.  A line torn by a crash is skipped; a
session a crash left open ends where the next one starts.  Only the last :data:`KEEP_SESSIONS`
sessions are kept: when the file holds four times that many lines it is rewritten (atomically)
with the last ones.

``cache/lastout.jsonl`` is what the last fetch of the outgoing queue got: a first line with when
it ran, then one line per URL (status, outcome, problem, whether it left the queue after
failing ``queue_failures`` times), replaced whole (atomically) by each
queue fetch.  Both files are private (0600), like the rest of the cache.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..fsutil import atomic_write, fsync_dir

__all__ = [
    "CONNECTED",
    "KEEP_SESSIONS",
    "LASTOUT_NAME",
    "MAX_LASTOUT",
    "SESSIONS_NAME",
    "Event",
    "LastOut",
    "OutEntry",
    "Session",
    "SessionLog",
    "boundary",
    "parse_events",
    "read_lastout",
    "sessions_of",
    "write_lastout",
]

SESSIONS_NAME = "sessions.jsonl"
LASTOUT_NAME = "lastout.jsonl"
#: sessions kept: lasttime and prevtime1 .. prevtime9, as WWWOFFLE keeps them
KEEP_SESSIONS = 10
#: URLs of one queue fetch kept in lastout (a recursive fetch can reach many more)
MAX_LASTOUT = 10_000
#: the modes that fetch: time spent in them is an online session
CONNECTED = frozenset({"online", "autodial"})
_FILE_MODE = 0o600
_MAX_LOG_BYTES = 1024 * 1024  # a larger session log is not ours to read whole: only its tail
_MAX_LASTOUT_BYTES = 64 * 1024 * 1024  # lastout is read from its start up to this


# ---------------------------------------------------------------------------------------------
# The rules (pure)


@dataclass(frozen=True)
class Event:
    kind: str  # "start" or "end"
    time: datetime
    mode: str  # the mode switched to ("" when the proxy stopped)

    def to_json(self) -> str:
        return json.dumps({"event": self.kind, "time": self.time.isoformat(), "mode": self.mode})


@dataclass(frozen=True)
class Session:
    """One online session: ``end`` is None while it runs (the newest, if the proxy is
    connected now)."""

    start: datetime
    end: datetime | None
    mode: str  # the mode it started in

    def as_json(self) -> dict[str, object]:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat() if self.end else None,
            "mode": self.mode,
        }


def boundary(before: str | None, after: str | None) -> str | None:
    """What a mode change means for the log: ``"start"``, ``"end"`` or nothing.  ``None`` is
    "not running" (``before`` at start-up, ``after`` at shutdown); online and autodial are one
    session, offline is none."""
    was, now = before in CONNECTED, after in CONNECTED
    if now and not was:
        return "start"
    if was and not now:
        return "end"
    return None


def parse_events(lines: Iterable[bytes | str]) -> list[Event]:
    """The events of the log's lines, skipping any that is not one (torn by a crash, edited)."""
    out = []
    for raw in lines:
        try:
            data = json.loads(raw)
            kind, mode = data["event"], data.get("mode", "")
            when = datetime.fromisoformat(data["time"])
        except (ValueError, TypeError, KeyError):
            continue
        if kind not in ("start", "end") or not isinstance(mode, str) or when.tzinfo is None:
            continue
        out.append(Event(kind, when.astimezone(UTC), mode))
    return out


def sessions_of(events: Iterable[Event]) -> list[Session]:
    """The sessions the events describe, oldest first.  A start while one is open (a crash
    left it so) ends that one; an end with none open is ignored."""
    out: list[Session] = []
    open_: Event | None = None
    for event in events:
        if event.kind == "start":
            if open_ is not None:
                out.append(Session(open_.time, max(open_.time, event.time), open_.mode))
            open_ = event
        elif open_ is not None:
            out.append(Session(open_.time, max(open_.time, event.time), open_.mode))
            open_ = None
    if open_ is not None:
        out.append(Session(open_.time, None, open_.mode))
    return out


def _kept_events(events: list[Event], keep: int) -> list[Event]:
    """The events of the last ``keep`` sessions (what a rewrite keeps)."""
    starts = [i for i, e in enumerate(events) if e.kind == "start"]
    if len(starts) <= keep:
        return events
    return events[starts[-keep] :]


# ---------------------------------------------------------------------------------------------
# The session log (I/O)


def _read_lines(path: Path, *, tail: int = 0, head: int = 0) -> list[bytes]:
    """The file's lines: at most its last ``tail`` bytes (from a whole line), or its first
    ``head`` bytes (to a whole line)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if tail and size > tail:
                f.seek(size - tail)
                f.readline()  # from the first whole line of the tail
            data = f.read(head) if head and size > head else f.read()
            if head and size > head:
                data = data[: data.rfind(b"\n") + 1]
            return data.splitlines()
    except FileNotFoundError:
        return []


class SessionLog:
    """``cache/sessions.jsonl``: appended at each session boundary, read by the pages."""

    def __init__(self, root: str | os.PathLike[str], *, keep: int = KEEP_SESSIONS) -> None:
        self.path = Path(root) / SESSIONS_NAME
        self.keep = keep

    def note(self, before: str | None, after: str | None, when: datetime | None = None) -> bool:
        """Record the boundary a mode change makes, if it makes one (True then)."""
        kind = boundary(before, after)
        if kind is None:
            return False
        self.append(Event(kind, when or datetime.now(UTC), after or ""))
        return True

    def append(self, event: Event) -> None:
        """One line, durable on return.  A torn last line (a crash mid-write) is ended first
        so it stays a line of its own, which readers skip."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
        try:
            size = os.fstat(fd).st_size
            torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            os.write(fd, (b"\n" if torn else b"") + event.to_json().encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        if size == 0:
            fsync_dir(self.path.parent)
        lines = _read_lines(self.path, tail=_MAX_LOG_BYTES)
        if len(lines) > 4 * self.keep:
            kept = _kept_events(parse_events(lines), self.keep)
            text = "".join(e.to_json() + "\n" for e in kept)
            atomic_write(self.path, text, new_mode=_FILE_MODE)

    def events(self) -> list[Event]:
        return parse_events(_read_lines(self.path, tail=_MAX_LOG_BYTES))

    def sessions(self) -> list[Session]:
        """The kept sessions, newest first (``[0]`` is lasttime, ``[n]`` prevtime\\ *n*)."""
        return sessions_of(self.events())[::-1][: self.keep]


# ---------------------------------------------------------------------------------------------
# lastout


@dataclass(frozen=True)
class OutEntry:
    """One URL a queue fetch handled."""

    url: str
    method: str
    outcome: str  # fetched, fresh, failed, robots (wwwproxy.fetch.tasks.Outcome)
    status: int | None
    problem: str | None
    #: a queued request that failed ``queue_failures`` times and left the queue
    dropped: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome in ("fetched", "fresh")

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.url,
            "method": self.method,
            "outcome": self.outcome,
            "ok": self.ok,
            "status": self.status,
            "problem": self.problem,
            "dropped": self.dropped,
        }


@dataclass(frozen=True)
class LastOut:
    started: datetime
    finished: datetime
    total: int  # URLs handled (more than ``entries`` when past MAX_LASTOUT)
    entries: list[OutEntry]


def write_lastout(
    root: str | os.PathLike[str],
    started: datetime,
    finished: datetime,
    entries: Sequence[OutEntry],
) -> None:
    """Replace ``cache/lastout.jsonl`` with what a queue fetch got (the first MAX_LASTOUT)."""
    head = {"started": started.isoformat(), "finished": finished.isoformat(), "total": len(entries)}
    lines = [json.dumps(head)] + [json.dumps(e.as_json()) for e in entries[:MAX_LASTOUT]]
    path = Path(root) / LASTOUT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "\n".join(lines) + "\n", new_mode=_FILE_MODE)


def _entry(data: object) -> OutEntry | None:
    if not isinstance(data, dict):
        return None
    url, method, outcome = data.get("url"), data.get("method", "GET"), data.get("outcome")
    status, problem = data.get("status"), data.get("problem")
    if not (isinstance(url, str) and isinstance(method, str) and isinstance(outcome, str)):
        return None
    if type(status) is not int:
        status = None
    problem = problem if isinstance(problem, str) else None
    return OutEntry(url, method, outcome, status, problem, data.get("dropped") is True)


def read_lastout(root: str | os.PathLike[str]) -> LastOut | None:
    """The last queue fetch's record, or None (never fetched, or the file is not one).
    Lines that are not entries are skipped."""
    lines = _read_lines(Path(root) / LASTOUT_NAME, head=_MAX_LASTOUT_BYTES)
    if not lines:
        return None
    try:
        head = json.loads(lines[0])
        started = datetime.fromisoformat(head["started"])
        finished = datetime.fromisoformat(head["finished"])
        total = int(head["total"])
    except (ValueError, TypeError, KeyError):
        return None
    entries = []
    for raw in lines[1:]:
        with contextlib.suppress(ValueError):
            entry = _entry(json.loads(raw))
            if entry is not None:
                entries.append(entry)
    return LastOut(started, finished, max(total, len(entries)), entries)
