"""Monitored URLs: pages refetched on a schedule (WWWOFFLE's "monitor"), while online.

The schedule lives in ``<cache>/monitor.yaml``, a YAML list that people may edit by hand::

    # URLs wwwproxy refetches on a schedule
    - url: http://example.com/news
      every: 6                  # hours
      last: '2024-05-01T10:00:00Z'
    - url: http://example.com/weekly/
      weekdays: [mon, thu]      # any of mon tue wed thu fri sat sun; none = every day
      hours: [6, 18]            # 0-23, local time; none = 0 (midnight)
      render: true              # loaded in headless Chromium too (what its scripts load)

An entry has ``url`` and either ``every`` (hours, a positive number) or ``weekdays`` and/or
``hours``; ``render: true`` (absent: false) renders the page in the browser when it is fetched
(:mod:`wwwproxy.fetch.render`).  ``last`` is when it was last fetched (UTC), written by
wwwproxy; ``tried`` and ``error`` record a failed attempt.

Decisions where the brief was silent:

* **Due.**  ``every``: when ``every`` hours have passed since ``last``.  ``weekdays``/``hours``:
  when a scheduled hour (local time) has come since ``last``.  A URL never fetched is due at
  once, so adding one gives a copy straight away.
* **Failures** leave ``last`` alone and set ``tried``; the URL is not tried again for
  :data:`RETRY_AFTER`, so an unreachable site is not hammered every minute.
* **What is fetched:** the page (reloaded when due: revalidated if it has validators, else
  fetched) and its requisites (images, style sheets, scripts, frames; fetched only when the
  cache policy says they are stale), so it can be read offline.  With ``render``, the page is
  also loaded in the browser through the recording proxy, which records what its scripts
  load; without a browser (or outside a running proxy) that is the entry's error.
* **Concurrent writers** (``wwwproxy monitor add`` while the server records a fetch): every
  read-modify-write holds an exclusive ``flock`` on ``monitor.yaml.lock``, and the file is
  replaced atomically (temporary file, fsync, rename), so no update is lost or half-written.
  Comments and key order survive (ruamel.yaml round trip).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import logging
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ..fsutil import atomic_write
from ..http.policy import Mode
from ..url import InvalidURL, canonicalize
from .prefetch import PageRenderer, Prefetcher
from .render import RenderUnavailable, render_options, rendering
from .tasks import FetchOptions

if TYPE_CHECKING:
    from ..recording.services import Services

__all__ = [
    "MONITOR_FILE",
    "RETRY_AFTER",
    "WEEKDAYS",
    "MonitorEntry",
    "MonitorError",
    "PageRow",
    "Schedule",
    "add",
    "describe",
    "due",
    "fetch_now",
    "is_due",
    "list_entries",
    "load",
    "monitor_loop",
    "monitor_path",
    "next_due",
    "page_rows",
    "parse_schedule",
    "record_result",
    "remove",
    "run_due",
]

log = logging.getLogger("wwwproxy.monitor")

MONITOR_FILE = "monitor.yaml"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
RETRY_AFTER = timedelta(minutes=15)
_KEYS = ("url", "every", "weekdays", "hours", "render", "last", "tried", "error")
_HEADER = "# URLs wwwproxy refetches on a schedule (wwwproxy monitor add|list|remove, /monitor/)\n"
_SEARCH = 24 * 8  # hours looked back or ahead for a weekday/hour slot: more than a week


class MonitorError(ValueError):
    """A bad monitor file or request; the message names the file and line where known."""


@dataclass(frozen=True)
class Schedule:
    """``every`` hours, or at ``hours`` (0-23) on ``weekdays`` (0 = Monday)."""

    every: float | None = None
    weekdays: tuple[int, ...] = ()
    hours: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.every is not None:
            if self.weekdays or self.hours:
                raise MonitorError("give either every (hours) or weekdays/hours, not both")
            if isinstance(self.every, bool) or not isinstance(self.every, int | float):
                raise MonitorError(f"every must be a number of hours, not {self.every!r}")
            if not math.isfinite(self.every) or self.every <= 0:
                raise MonitorError(f"every must be a positive number of hours, not {self.every}")
        elif not self.weekdays and not self.hours:
            raise MonitorError("a schedule needs every (hours), or weekdays and/or hours")
        for day in self.weekdays:
            if isinstance(day, bool) or not isinstance(day, int) or not 0 <= day <= 6:
                raise MonitorError(f"weekday {day!r} is not 0-6")
        for hour in self.hours:
            if isinstance(hour, bool) or not isinstance(hour, int) or not 0 <= hour <= 23:
                raise MonitorError(f"hour {hour!r} is not 0-23")
        object.__setattr__(self, "weekdays", tuple(sorted(set(self.weekdays))))
        object.__setattr__(self, "hours", tuple(sorted(set(self.hours))))


@dataclass(frozen=True)
class MonitorEntry:
    url: str  # canonical (the GET archive key)
    schedule: Schedule
    last: datetime | None = None
    tried: datetime | None = None
    error: str | None = None
    #: loaded in headless Chromium too when fetched (``render: true``)
    render: bool = False


# --- schedules (pure) -------------------------------------------------------------------------


def parse_schedule(
    every: str | float | None = None,
    weekdays: str | Sequence[str] | None = None,
    hours: str | Sequence[str | int] | None = None,
) -> Schedule:
    """A schedule from command-line or form text: ``every="6"``, ``weekdays="mon,thu"``,
    ``hours="6,18"`` (lists may be comma or space separated)."""
    every_value: float | None = None
    if every not in (None, ""):
        try:
            every_value = float(every)
        except (TypeError, ValueError):
            raise MonitorError(f"every: {every!r} is not a number of hours") from None
        if every_value.is_integer():
            every_value = int(every_value)
    days = tuple(_weekday(d) for d in _items(weekdays))
    hrs: list[int] = []
    for item in _items(hours):
        text = str(item).strip()
        if not text.isdigit():
            raise MonitorError(f"hours: {item!r} is not an hour 0-23")
        hrs.append(int(text))
    return Schedule(every_value, days, tuple(hrs))


def _items(value: str | Sequence[object] | None) -> list[object]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in value.replace(",", " ").split() if p]
    return list(value)


def _weekday(name: object) -> int:
    text = str(name).strip().lower()[:3]
    if text not in WEEKDAYS:
        raise MonitorError(f"weekday {name!r} is not one of {', '.join(WEEKDAYS)}")
    return WEEKDAYS.index(text)


def describe(schedule: Schedule) -> str:
    """The schedule in words, for listings and the /monitor/ page."""
    if schedule.every is not None:
        return f"every {schedule.every:g} hour{'s' if schedule.every != 1 else ''}"
    days = ", ".join(WEEKDAYS[d] for d in schedule.weekdays) if schedule.weekdays else "every day"
    hours = ", ".join(f"{h:02d}:00" for h in schedule.hours or (0,))
    return f"{days} at {hours}"


def _slot_matches(schedule: Schedule, t: datetime) -> bool:
    return (not schedule.weekdays or t.weekday() in schedule.weekdays) and t.hour in (
        schedule.hours or (0,)
    )


def _latest_slot(schedule: Schedule, now: datetime) -> datetime | None:
    """The latest scheduled hour at or before ``now`` (in ``now``'s time zone)."""
    t = now.replace(minute=0, second=0, microsecond=0)
    for _ in range(_SEARCH):
        if _slot_matches(schedule, t):
            return t
        t -= timedelta(hours=1)
    return None


def _next_slot(schedule: Schedule, after: datetime) -> datetime | None:
    """The first scheduled hour strictly after ``after``."""
    t = after.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    for _ in range(_SEARCH):
        if _slot_matches(schedule, t):
            return t
        t += timedelta(hours=1)
    return None


def next_due(entry: MonitorEntry, now: datetime) -> datetime:
    """When the entry is (or was) due; at most ``now`` when it is due now.  ``now`` must be
    time-zone aware; weekday/hour slots are taken in its time zone."""
    if entry.last is None:
        when = now
    elif entry.schedule.every is not None:
        when = entry.last + timedelta(hours=entry.schedule.every)
    else:
        latest = _latest_slot(entry.schedule, now)
        if latest is not None and entry.last < latest:
            when = latest
        else:
            when = _next_slot(entry.schedule, max(entry.last, now).astimezone(now.tzinfo)) or now
    if entry.tried is not None and (entry.last is None or entry.tried > entry.last):
        when = max(when, entry.tried + RETRY_AFTER)
    return when


def is_due(entry: MonitorEntry, now: datetime) -> bool:
    return next_due(entry, now) <= now


def due(entries: Iterable[MonitorEntry], now: datetime) -> list[MonitorEntry]:
    """The entries to fetch now."""
    return [e for e in entries if is_due(e, now)]


# --- the file ---------------------------------------------------------------------------------


def monitor_path(cache: str | os.PathLike[str]) -> Path:
    return Path(cache) / MONITOR_FILE


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.indent(mapping=2, sequence=2, offset=0)
    y.width = 1 << 30
    return y


def _line(node: Any, key: object = None) -> str:
    with contextlib.suppress(AttributeError, KeyError, TypeError, IndexError):
        if key is None:
            return f"line {node.lc.line + 1}"
        return f"line {node.lc.key(key)[0] + 1}"
    return "?"


def _time(value: object, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise MonitorError(f"{where}: {value!r} is not a date and time") from None
    else:
        raise MonitorError(f"{where}: {value!r} is not a date and time")
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def _format_time(dt: datetime) -> str:
    return dt.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(item: object, source: str) -> MonitorEntry:
    where = f"{source}: {_line(item)}"
    if not isinstance(item, dict):
        raise MonitorError(f"{where}: an entry must be a mapping with url and a schedule")
    unknown = [k for k in item if k not in _KEYS]
    if unknown:
        raise MonitorError(
            f"{source}: {_line(item, unknown[0])}: unknown key {unknown[0]!r} "
            f"(known: {', '.join(_KEYS)})"
        )
    url = item.get("url")
    if not isinstance(url, str):
        raise MonitorError(f"{where}: the entry has no url")
    try:
        canonical = canonicalize(url).file
    except InvalidURL as exc:
        raise MonitorError(f"{source}: {_line(item, 'url')}: {exc.reason}") from None
    try:
        weekdays = [_weekday(d) for d in _items(item.get("weekdays"))]
        hours = item.get("hours") or []
        if not isinstance(hours, list):
            hours = [hours]
        schedule = Schedule(item.get("every"), tuple(weekdays), tuple(hours))
    except MonitorError as exc:
        raise MonitorError(f"{where}: {url}: {exc}") from None
    render = item.get("render", False)
    if not isinstance(render, bool):
        raise MonitorError(
            f"{source}: {_line(item, 'render')}: render must be true or false, not {render!r}"
        )
    error = item.get("error")
    return MonitorEntry(
        canonical,
        schedule,
        last=_time(item.get("last"), f"{source}: {_line(item, 'last')}"),
        tried=_time(item.get("tried"), f"{source}: {_line(item, 'tried')}"),
        error=None if error is None else str(error),
        render=render,
    )


def _read(path: Path) -> tuple[CommentedSeq, list[MonitorEntry]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CommentedSeq(), []
    except (OSError, UnicodeDecodeError) as exc:
        raise MonitorError(f"{path}: cannot read: {exc}") from None
    try:
        data = _yaml().load(text)
    except Exception as exc:  # noqa: BLE001 - any parser failure means "not valid YAML"
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}: line {mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise MonitorError(f"{where}: not valid YAML: {' '.join(str(problem).split())}") from None
    if data is None:
        return CommentedSeq(), []
    if not isinstance(data, CommentedSeq):  # what the round-trip loader makes of any list
        raise MonitorError(f"{path}: the file must be a list of entries")
    entries = [_entry(item, str(path)) for item in data]
    seen: set[str] = set()
    for item, entry in zip(data, entries, strict=True):
        if entry.url in seen:
            raise MonitorError(f"{path}: {_line(item)}: {entry.url} is listed twice")
        seen.add(entry.url)
    return data, entries


def load(path: str | os.PathLike[str]) -> list[MonitorEntry]:
    """The monitored URLs (none if the file does not exist)."""
    return _read(Path(path))[1]


def list_entries(path: str | os.PathLike[str]) -> list[MonitorEntry]:
    return load(path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(path: Path, data: CommentedSeq) -> None:
    out = io.StringIO()
    if len(data):
        _yaml().dump(data, out)
    text = out.getvalue()
    if not text.startswith("#"):
        text = _HEADER + text
    atomic_write(path, text)


def _schedule_into(item: CommentedMap, schedule: Schedule) -> None:
    for key in ("every", "weekdays", "hours"):
        item.pop(key, None)
    if schedule.every is not None:
        item.insert(1, "every", schedule.every)
        return
    pos = 1
    if schedule.weekdays:
        days = CommentedSeq(WEEKDAYS[d] for d in schedule.weekdays)
        days.fa.set_flow_style()
        item.insert(pos, "weekdays", days)
        pos += 1
    if schedule.hours:
        hours = CommentedSeq(schedule.hours)
        hours.fa.set_flow_style()
        item.insert(pos, "hours", hours)


def _render_into(item: CommentedMap, render: bool) -> None:
    """``render: true`` after the schedule; no key for false (as in files written before)."""
    item.pop("render", None)
    if render:
        keys = list(item)
        after = max(keys.index(k) for k in ("url", "every", "weekdays", "hours") if k in item)
        item.insert(after + 1, "render", True)


def add(
    path: str | os.PathLike[str], url: str, schedule: Schedule, *, render: bool = False
) -> MonitorEntry:
    """Monitor ``url`` (canonicalized), rendered in the browser when fetched if ``render``;
    an already monitored URL gets the new schedule and ``render`` and keeps its history."""
    path = Path(path)
    try:
        parsed = canonicalize(url)
    except InvalidURL as exc:
        raise MonitorError(str(exc)) from None
    if parsed.local:
        raise MonitorError(f"{url}: not a full URL (give http://host/path)")
    canonical = parsed.file
    if not canonical.startswith(("http://", "https://")):
        raise MonitorError(f"{canonical}: only http and https URLs can be monitored")
    with _locked(path):
        data, entries = _read(path)
        for item, entry in zip(data, entries, strict=True):
            if entry.url == canonical:
                _schedule_into(item, schedule)
                _render_into(item, render)
                item["url"] = canonical
                _write(path, data)
                return replace(entry, schedule=schedule, render=render)
        item = CommentedMap()
        item["url"] = canonical
        _schedule_into(item, schedule)
        _render_into(item, render)
        data.append(item)
        _write(path, data)
    return MonitorEntry(canonical, schedule, render=render)


def remove(path: str | os.PathLike[str], url: str) -> bool:
    """Stop monitoring ``url``; False if it was not monitored."""
    path = Path(path)
    try:
        canonical = canonicalize(url).file
    except InvalidURL as exc:
        raise MonitorError(str(exc)) from None
    with _locked(path):
        data, entries = _read(path)
        for i, entry in enumerate(entries):
            if entry.url == canonical:
                del data[i]
                _write(path, data)
                return True
    return False


def record_result(
    path: str | os.PathLike[str], url: str, when: datetime, error: str | None = None
) -> None:
    """Note a fetch of ``url``: success sets ``last`` (and clears an old error), failure
    sets ``tried`` and ``error``.  A URL removed meanwhile is left removed."""
    path = Path(path)
    with _locked(path):
        data, entries = _read(path)
        for item, entry in zip(data, entries, strict=True):
            if entry.url != url:
                continue
            if error is None:
                item["last"] = _format_time(when)
                item.pop("tried", None)
                item.pop("error", None)
            else:
                item["tried"] = _format_time(when)
                item["error"] = " ".join(error.split())
            _write(path, data)
            return


class PageRow(TypedDict):
    """One monitored URL as the /monitor/ page shows it (text is plain: escape it)."""

    url: str
    schedule: str  # in words
    every: float | None
    weekdays: list[str]
    hours: list[int]
    last: str | None  # ISO time
    next: str  # ISO time
    due: bool
    error: str | None
    render: bool


def page_rows(path: str | os.PathLike[str], now: datetime) -> list[PageRow]:
    """What the /monitor/ page shows, one row per URL."""
    rows: list[PageRow] = []
    for entry in load(path):
        when = next_due(entry, now)
        rows.append(
            {
                "url": entry.url,
                "schedule": describe(entry.schedule),
                "every": entry.schedule.every,
                "weekdays": [WEEKDAYS[d] for d in entry.schedule.weekdays],
                "hours": list(entry.schedule.hours),
                "last": _format_time(entry.last) if entry.last else None,
                "next": _format_time(when),
                "due": when <= now,
                "error": entry.error,
                "render": entry.render,
            }
        )
    return rows


# --- running (in the server) ------------------------------------------------------------------


async def fetch_now(
    services: Services, path: str | os.PathLike[str], urls: Iterable[str]
) -> list[tuple[str, str | None]]:
    """Fetch monitored URLs now, due or not (the /monitor/ page's "fetch now"), each with its
    requisites, through the one crawler, and note the results in the file; ``(url, error)``
    each.  The URLs themselves are reloaded (revalidated or fetched, never taken as fresh);
    their requisites are fetched when the cache policy says they are stale.  Entries with
    ``render`` are crawled with a browser (:func:`~.render.rendering`); if there is none,
    that is their error."""
    urls = list(dict.fromkeys(urls))
    if not urls:
        return []
    rendered = {e.url for e in await asyncio.to_thread(load, path) if e.render}
    errors: dict[str, str | None] = {}
    plain = [url for url in urls if url not in rendered]
    if plain:
        errors |= await _crawl(services, plain)
    scripted = [url for url in urls if url in rendered]
    if scripted:
        try:
            async with rendering(services, render_options(services.config)) as renderer:
                errors |= await _crawl(services, scripted, renderer)
        except RenderUnavailable as exc:
            errors |= dict.fromkeys(scripted, f"not rendered: {exc}")
    done = []
    for url in urls:
        error = errors[url]
        await asyncio.to_thread(record_result, path, url, datetime.now(UTC), error)
        if error:
            log.warning("monitor: %s: %s", url, error)
        else:
            log.info("monitor: fetched %s", url)
        done.append((url, error))
    return done


async def _crawl(
    services: Services, urls: list[str], renderer: PageRenderer | None = None
) -> dict[str, str | None]:
    """One crawler run over ``urls`` with their requisites; each URL's problem (None: ok)."""
    options = FetchOptions(requisites=True, refresh_seeds=True, concurrency=2)
    summary = await Prefetcher(services, options, renderer=renderer).run(urls)
    errors: dict[str, str | None] = {}
    for url in urls:
        result = summary.results.get(url)
        errors[url] = "not fetched" if result is None else result.problem
    return errors


async def run_due(
    services: Services, path: str | os.PathLike[str], now: datetime | None = None
) -> list[tuple[str, str | None]]:
    """Fetch the due URLs (if the proxy is online or autodial); ``(url, error)`` each."""
    if services.mode not in (Mode.ONLINE, Mode.AUTODIAL):
        return []
    now = now or datetime.now().astimezone()
    try:
        entries = await asyncio.to_thread(load, path)
    except MonitorError as exc:
        log.warning("monitor: %s", exc)
        return []
    return await fetch_now(services, path, (e.url for e in due(entries, now)))


async def monitor_loop(
    services: Services, path: str | os.PathLike[str], *, interval: float = 60.0
) -> None:
    """Check the schedule every ``interval`` seconds for as long as the server runs (cancel
    the task to stop it); fetches the due URLs when online or autodial."""
    while True:
        try:
            await run_due(services, path)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the loop must outlive one bad round
            log.exception("monitor: checking %s failed", path)
        await asyncio.sleep(interval)
