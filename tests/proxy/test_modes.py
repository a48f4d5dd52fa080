"""The mode and freshness decision, as a pure function: every combination, no sockets."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.proxy.modes import (
    Action,
    CacheState,
    Mode,
    age_seconds,
    client_freshness,
    decide,
    max_age_for,
)

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def cached(age: float = 10, validators: bool = False) -> CacheState:
    return CacheState(NOW - timedelta(seconds=age), validators)


# mode, cached?, validators?, max_age, force -> action
TABLE = [
    # offline never touches the network
    (Mode.OFFLINE, None, None, None, False, Action.QUEUE),
    (Mode.OFFLINE, None, None, 3600, True, Action.QUEUE),
    (Mode.OFFLINE, 10, False, None, False, Action.SERVE),
    (Mode.OFFLINE, 10, True, None, True, Action.SERVE),
    (Mode.OFFLINE, 10**7, True, 5, False, Action.SERVE),  # stale, but it is all there is
    # autodial: cached is served, the rest fetched
    (Mode.AUTODIAL, None, None, None, False, Action.FETCH),
    (Mode.AUTODIAL, 10, False, None, False, Action.SERVE),
    (Mode.AUTODIAL, 10, True, 5, False, Action.SERVE),
    # online: fetch, revalidate when possible, serve only what a rule calls fresh
    (Mode.ONLINE, None, None, None, False, Action.FETCH),
    (Mode.ONLINE, None, None, 3600, False, Action.FETCH),
    (Mode.ONLINE, 10, False, None, False, Action.FETCH),
    (Mode.ONLINE, 10, True, None, False, Action.REVALIDATE),
    (Mode.ONLINE, 10, False, 60, False, Action.SERVE),
    (Mode.ONLINE, 10, True, 60, False, Action.SERVE),
    (Mode.ONLINE, 10, True, 60, True, Action.REVALIDATE),  # a reload skips the rule
    (Mode.ONLINE, 10, False, 60, True, Action.FETCH),
    (Mode.ONLINE, 120, True, 60, False, Action.REVALIDATE),  # too old for the rule
    (Mode.ONLINE, 120, False, 60, False, Action.FETCH),
    (Mode.ONLINE, 0, False, 0, False, Action.FETCH),  # max_age 0: never fresh
    (Mode.ONLINE, 59.5, False, 60, False, Action.SERVE),
    (Mode.ONLINE, 60, False, 60, False, Action.FETCH),  # "younger than", not "as young as"
    (Mode.ONLINE, 60.4, False, 60, False, Action.FETCH),  # no rounding down to 60
]


@pytest.mark.parametrize(("mode", "age", "validators", "max_age", "force", "action"), TABLE)
def test_decision_table(mode, age, validators, max_age, force, action):
    state = None if age is None else cached(age, validators)
    assert decide(mode, state, NOW, max_age=max_age, force=force) is action


@settings(max_examples=200)
@given(
    mode=st.sampled_from(list(Mode)),
    age=st.none() | st.floats(min_value=-1e6, max_value=1e8, allow_nan=False),
    validators=st.booleans(),
    max_age=st.none() | st.integers(min_value=0, max_value=10**8),
    force=st.booleans(),
)
def test_decision_invariants(mode, age, validators, max_age, force):
    state = None if age is None else cached(age, validators)
    action = decide(mode, state, NOW, max_age=max_age, force=force)
    if mode is Mode.OFFLINE:
        assert action in (Action.SERVE, Action.QUEUE)  # never the network
    else:
        assert action is not Action.QUEUE  # queueing online happens only on failure
    if state is None:
        assert action is not Action.SERVE and action is not Action.REVALIDATE
    if action is Action.REVALIDATE:
        assert state is not None and state.has_validators
    if mode is Mode.ONLINE and action is Action.SERVE:
        assert not force and max_age is not None and age is not None and age < max_age


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "post"])
@pytest.mark.parametrize("validators", [False, True])
def test_online_other_methods_always_go_upstream(method, validators):
    state = cached(1, validators)
    assert decide(Mode.ONLINE, state, NOW, max_age=3600, method=method) is Action.FETCH
    # offline and autodial still answer them from the cache
    assert decide(Mode.OFFLINE, state, NOW, method=method) is Action.SERVE
    assert decide(Mode.AUTODIAL, state, NOW, method=method) is Action.SERVE
    assert decide(Mode.OFFLINE, None, NOW, method=method) is Action.QUEUE


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_online_get_and_head_use_the_cache(method):
    assert decide(Mode.ONLINE, cached(1, True), NOW, method=method) is Action.REVALIDATE
    assert decide(Mode.ONLINE, cached(1), NOW, max_age=60, method=method) is Action.SERVE


def test_clock_skew_recorded_in_future_counts_as_new():
    future = CacheState(NOW + timedelta(seconds=30), False)
    assert decide(Mode.ONLINE, future, NOW, max_age=10) is Action.SERVE
    assert age_seconds(future.date, NOW) == 0


@pytest.mark.parametrize(
    ("resident", "header", "expected"),
    [
        (0, None, 0),
        (59.9, None, 59),
        (100, "20", 120),
        (100, " 20 ", 120),
        (100, "-5", 100),  # not a delta-seconds: ignored
        (100, "abc", 100),
        (100, "", 100),
        (-10, None, 0),
        (5, "99999999999", 99999999999 + 5),
    ],
)
def test_age_seconds(resident, header, expected):
    assert age_seconds(NOW - timedelta(seconds=resident), NOW, header) == expected


def test_max_age_for_first_matching_rule():
    rules = [
        (re.compile(r"^http://example\.com/news/"), 60),
        (re.compile(r"\.png$"), 86400),
        (re.compile(r"example\.com"), 5),
    ]
    assert max_age_for("http://example.com/news/a.png", rules) == 60
    assert max_age_for("http://example.com/logo.png", rules) == 86400
    assert max_age_for("http://example.com/", rules) == 5
    assert max_age_for("http://other.org/", rules) is None
    assert max_age_for("http://other.org/", []) is None


def test_modes_parse_from_config_strings():
    assert [Mode(m) for m in ("online", "offline", "autodial")] == list(Mode)
    with pytest.raises(ValueError):
        Mode("sideways")


@pytest.mark.parametrize(
    ("cache_control", "pragma", "expected"),
    [
        (None, None, (False, None)),
        ("no-cache", None, (True, None)),
        ("No-Cache", None, (True, None)),
        ("max-age=0", None, (False, 0)),
        ("max-age=0, no-cache", None, (True, 0)),
        ("no-store, max-age=30", None, (False, 30)),
        ('max-age="15"', None, (False, 15)),
        ("max-stale=10", None, (False, None)),  # not max-age
        ("s-maxage=5", None, (False, None)),
        ("no-cache-please", None, (False, None)),  # not the directive
        ("max-age=abc", None, (False, None)),
        (None, "no-cache", (True, None)),  # HTTP/1.0 reload
        ("max-age=5", "no-cache", (False, 5)),  # Cache-Control wins over Pragma
        ("", "", (False, None)),
    ],
)
def test_client_freshness(cache_control, pragma, expected):
    assert client_freshness(cache_control, pragma) == expected
