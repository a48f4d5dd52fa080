"""Online / offline / autodial: what to do with one request, as pure decisions.

Kept free of sockets so every combination of mode, cache state and freshness is tested directly
(the mitmproxy "playbook" idea); the server only carries the decision out.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "Action",
    "CacheState",
    "Mode",
    "age_seconds",
    "client_freshness",
    "decide",
    "max_age_for",
]


class Mode(enum.StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"
    AUTODIAL = "autodial"


class Action(enum.Enum):
    FETCH = "fetch"  # ask upstream (unconditionally)
    REVALIDATE = "revalidate"  # ask upstream with If-None-Match / If-Modified-Since
    SERVE = "serve"  # answer from the cache
    QUEUE = "queue"  # remember it for the next time we are online


@dataclass(frozen=True)
class CacheState:
    """What the cache holds for the request's archive key."""

    date: datetime  # when it was recorded (the WARC-Date)
    has_validators: bool  # an ETag or Last-Modified to revalidate with


def age_seconds(recorded: datetime, now: datetime, age_header: str | None = None) -> int:
    """RFC 9111 §4.2.3 current age: time in our cache plus the Age the origin already gave."""
    resident = max(0, int((now - recorded).total_seconds()))
    initial = 0
    if age_header and age_header.strip().isdigit():
        initial = int(age_header.strip())
    return initial + resident


def max_age_for(url: str, rules: Iterable[tuple[re.Pattern[str], int]]) -> int | None:
    """The first freshness rule whose pattern matches the canonical URL, if any."""
    for regex, max_age in rules:
        if regex.search(url):
            return max_age
    return None


_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?([0-9]+)\"?\s*(?:,|$)", re.IGNORECASE)
_NO_CACHE = re.compile(r"(?:^|,)\s*no-cache\s*(?:[,=]|$)", re.IGNORECASE)


def client_freshness(cache_control: str | None, pragma: str | None) -> tuple[bool, int | None]:
    """What the browser asks of a cached answer (RFC 9111 §5.2.1): ``(force, max_age)``.

    ``no-cache`` (a forced reload; ``Pragma: no-cache`` from HTTP/1.0 clients too) means "ask
    the origin"; ``max-age=N`` (a normal reload sends ``max-age=0``) caps how old a copy a
    freshness rule may serve.
    """
    cc = cache_control or ""
    force = bool(_NO_CACHE.search(cc)) or (not cc and bool(_NO_CACHE.search(pragma or "")))
    match = _MAX_AGE.search(cc)
    return force, int(match.group(1)) if match else None


def decide(
    mode: Mode,
    cached: CacheState | None,
    now: datetime,
    *,
    max_age: int | None = None,
    force: bool = False,
    method: str = "GET",
) -> Action:
    """The action for one request.

    * offline: serve what is cached, queue the rest (never touch the network);
    * autodial: serve what is cached, fetch the rest (the server queues if that fails);
    * online: serve a copy that a freshness rule still calls fresh, revalidate a copy with
      validators, fetch otherwise.  ``force`` (a browser reload) skips the freshness rule.
      Other methods than GET and HEAD are always sent online: a POST answered from the cache
      would never happen, and a conditional one is refused (412, RFC 9110 §13.1.2).
    """
    if mode is Mode.OFFLINE:
        return Action.SERVE if cached else Action.QUEUE
    if mode is Mode.AUTODIAL:
        return Action.SERVE if cached else Action.FETCH
    if cached is None or method.upper() not in ("GET", "HEAD"):
        return Action.FETCH
    if not force and max_age is not None and (now - cached.date).total_seconds() < max_age:
        # fresh while younger than max_age (so max_age 0 is never fresh)
        return Action.SERVE
    return Action.REVALIDATE if cached.has_validators else Action.FETCH
