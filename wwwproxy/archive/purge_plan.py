"""The pure decisions of a purge (WWWOFFLE's Purge), tested by tables:
:func:`keep_members` (which records of one cache file stay under ``keep_captures``) and
:func:`plan_files` (which files go under ``purge_after_days`` and ``max_size``).  No I/O:
:mod:`.purge` gathers the facts and carries the plan out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..http.policy import is_good, is_servable
from .index_lines import INDEXED_TYPES
from .warc import StoredRecord

if TYPE_CHECKING:
    from ..config import Config, PurgeRule

__all__ = [
    "DAY",
    "LOW_WATER",
    "Limits",
    "Member",
    "PageFacts",
    "Removal",
    "keep_members",
    "plan_files",
]

#: a cache over ``max_size`` is purged down to this share of it, so that the next few pages
#: recorded do not start another purge at once
LOW_WATER = 0.9
DAY = 86400.0
CAPTURES = INDEXED_TYPES  # the record types a page's captures are


@dataclass(frozen=True)
class Member:
    """One record of a cache file, as the plan sees it (its gzip member's place and links)."""

    offset: int
    length: int
    rec_type: str
    record_id: str
    date: str = ""
    status: int | None = None
    target_uri: str | None = None
    concurrent_to: tuple[str, ...] = ()
    refers_to: str | None = None
    refers_to_target_uri: str | None = None
    refers_to_date: str | None = None

    @classmethod
    def of(cls, record: StoredRecord) -> Member:
        return cls(
            record.offset,
            record.length,
            record.rec_type,
            record.record_id,
            record.date,
            record.status,
            record.target_uri,
            record.concurrent_to,
            record.refers_to,
            record.refers_to_target_uri,
            record.refers_to_date,
        )


def _original(members: Sequence[Member], revisit: Member) -> int | None:
    """The position of the response a revisit stands for (as the reader finds it: by record
    id, else by target URI and date)."""
    for i, m in enumerate(members):
        if m.rec_type == "response" and revisit.refers_to and m.record_id == revisit.refers_to:
            return i
    for i in range(len(members) - 1, -1, -1):
        m = members[i]
        if (
            m.rec_type == "response"
            and m.target_uri == revisit.refers_to_target_uri
            and m.date == revisit.refers_to_date
        ):
            return i
    return None


def keep_members(members: Sequence[Member], keep_captures: int) -> tuple[Member, ...]:
    """The records of one cache file (file order) that stay when it keeps ``keep_captures``
    captures (0: all): the newest ones, plus the capture the store serves (the newest 2xx/3xx,
    and the newest servable one: a run of error answers never costs the good copy), plus the
    response each kept revisit refers to (never a revisit without its payload), plus the
    request of every kept capture.  Requests of dropped captures go with them; records of
    any other kind, and requests linked to nothing, stay."""
    captures = [i for i, m in enumerate(members) if m.rec_type in CAPTURES]
    if keep_captures <= 0 or len(captures) <= keep_captures:
        return tuple(members)
    kept = set(captures[-keep_captures:])
    for test in (is_good, is_servable):
        for i in reversed(captures):
            if test(members[i].status or 200):
                kept.add(i)
                break
    for i in list(kept):
        if members[i].rec_type == "revisit":
            original = _original(members, members[i])
            if original is not None:
                kept.add(original)
    kept_ids = {members[i].record_id for i in kept}
    dropped_ids = {members[i].record_id for i in captures if i not in kept}
    result = []
    for i, m in enumerate(members):
        if m.rec_type in CAPTURES:
            if i in kept:
                result.append(m)
        elif m.rec_type == "request":
            links = set(m.concurrent_to) | {
                c.record_id for c in members if m.record_id in c.concurrent_to
            }
            if links & kept_ids or not links & dropped_ids:
                result.append(m)
        else:
            result.append(m)
    return tuple(result)


@dataclass(frozen=True)
class Limits:
    """What a purge enforces (from the configuration)."""

    max_size: int = 0  # bytes of cache files; 0: no limit
    keep_captures: int = 0  # per cache file; 0: all
    rules: tuple[PurgeRule, ...] = ()  # purge_after_days

    @classmethod
    def from_config(cls, config: Config) -> Limits:
        return cls(config.max_size, config.keep_captures, config.purge_after_days)

    @property
    def active(self) -> bool:
        return self.max_size > 0 or self.keep_captures > 0 or bool(self.rules)


@dataclass(frozen=True)
class PageFacts:
    """One cache file as :func:`plan_files` sees it."""

    name: str  # its path in the cache, <proto>/<host>/<hash>.warc.gz
    url: str  # its archive key ("" if unknown)
    size: int  # bytes (after any trimming of old captures)
    fetched: float  # its modification time: when its newest capture was recorded
    served: float | None = None  # when the proxy last served it, if known

    @property
    def used(self) -> float:
        """When it was last used: fetched or served, whichever is later."""
        return max(self.fetched, self.served or 0.0)


@dataclass(frozen=True)
class Removal:
    page: PageFacts
    reason: str


def _days(seconds: float) -> str:
    days = seconds / DAY
    return f"{days:.0f}" if days >= 10 else f"{days:.1f}"


def plan_files(files: Iterable[PageFacts], limits: Limits, now: float) -> list[Removal]:
    """The cache files to remove: first each page not used for longer than the days of the
    first ``purge_after_days`` rule whose pattern is found in its URL; then, while the rest
    take more than ``max_size``, the least recently used (the larger first among equals),
    until they take at most :data:`LOW_WATER` of it."""
    removals: list[Removal] = []
    rest: list[PageFacts] = []
    for page in files:
        rule = next((r for r in limits.rules if r.regex.search(page.url)), None)
        if rule is not None and now - page.used > rule.days * DAY:
            age = _days(now - page.used)
            reason = f"not used for {age} days (rule '{rule.pattern}': {rule.days:g})"
            removals.append(Removal(page, reason))
        else:
            rest.append(page)
    total = sum(page.size for page in rest)
    if limits.max_size > 0 and total > limits.max_size:
        target = int(limits.max_size * LOW_WATER)
        for page in sorted(rest, key=lambda p: (p.used, -p.size, p.name)):
            if total <= target:
                break
            removals.append(Removal(page, "least recently used, the cache is over max_size"))
            total -= page.size
    return removals
