"""The cache policy as tables: one row per case, a comment on every row that surprises.

``wwwproxy.http.policy`` is pure (no sockets, no files), so each rule is a table in the style
of h11's transition tables and mitmproxy's playbooks: mode x stored copy x request -> action;
headers -> freshness; request + response -> 304 or not; and so on.  The old
``tests/proxy/test_modes.py`` cases are ported here to the new API.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.http.headers import get_header
from wwwproxy.http.policy import (
    ANY_STALENESS,
    CREDENTIALS_HEADER,
    Action,
    Freshness,
    Mode,
    RequestDirectives,
    Stored,
    accepts_coding,
    after_upstream_error,
    credential_check,
    credential_tags,
    current_age,
    decide,
    finish_abandoned,
    freshness,
    is_fresh,
    is_good,
    is_servable,
    max_age_for,
    may_serve_stale,
    merge_not_modified,
    not_modified,
    not_modified_headers,
    parse_cache_control,
    prefers_good,
    recorded_request_headers,
    replay_headers,
    request_directives,
    request_headers_for_reuse,
    revalidation_headers,
    timeless,
    vary_matches,
    without_conditionals,
)

NOW = datetime(2025, 3, 1, 12, tzinfo=UTC)


def http_date(when: datetime) -> str:
    return format_datetime(when, usegmt=True)


def copy(
    age: float = 10,
    status: int = 200,
    *,
    validators: bool = False,
    cc: str | None = None,
    extra: tuple[tuple[str, str], ...] = (),
) -> Stored:
    """A stored capture recorded ``age`` seconds before NOW (negative: clock skew)."""
    recorded = NOW - timedelta(seconds=age)
    headers = [("Date", http_date(recorded))]
    if validators:
        headers.append(("ETag", '"v1"'))
    if cc is not None:
        headers.append(("Cache-Control", cc))
    return Stored(recorded, status, (*headers, *extra))


def _id(value: object) -> str | None:
    """Readable test ids, so a failing row names itself."""
    if isinstance(value, Stored):
        tags = [str(value.status), f"{(NOW - value.date).total_seconds():g}s"]
        if value.has_validators:
            tags.append("validators")
        cc = get_header(value.headers, "Cache-Control")
        if cc:
            tags.append(cc.replace(" ", ""))
        age = get_header(value.headers, "Age")
        if age:
            tags.append(f"Age:{age}")
        return "copy(" + ",".join(tags) + ")"
    if isinstance(value, RequestDirectives):
        parts = [
            "force" if value.force else "",
            f"max-age={value.max_age}" if value.max_age is not None else "",
            "only-if-cached" if value.only_if_cached else "",
        ]
        return "cc(" + ",".join(p for p in parts if p) + ")"
    if isinstance(value, Mode):
        return value.value
    if isinstance(value, Action):
        return value.name
    if value is None:
        return "none"
    return None


# Short names keep the decision table one row per line.
ON, OFF, AUTO = Mode.ONLINE, Mode.OFFLINE, Mode.AUTODIAL
FETCH, REVAL, SERVE = Action.FETCH, Action.REVALIDATE, Action.SERVE
QUEUE, SERVE_Q, UNAVAIL = Action.QUEUE, Action.SERVE_AND_QUEUE, Action.UNAVAILABLE
STALE = Action.SERVE_STALE
PLAIN = RequestDirectives()
FORCE = RequestDirectives(force=True)  # no-cache: a forced reload (shift-reload)
RELOAD = RequestDirectives(max_age=0)  # a normal reload
OIC = RequestDirectives(only_if_cached=True)
V = {"validators": True}


# --- decide ---------------------------------------------------------------------------------

# mode, stored copy, method, request directives, rule_max_age, request_changed -> action
DECISIONS = [
    # offline: never the network; what is cached is served, the rest queued
    (OFF, None, "GET", PLAIN, None, 0, QUEUE),
    (OFF, None, "GET", FORCE, 3600, 0, QUEUE),
    (OFF, None, "POST", PLAIN, None, 0, QUEUE),
    (OFF, copy(10), "GET", PLAIN, None, 0, SERVE),
    (OFF, copy(10, **V), "GET", FORCE, None, 0, SERVE_Q),  # new: the copy now, a refresh later
    (OFF, copy(10), "HEAD", FORCE, None, 0, SERVE_Q),
    (OFF, copy(10), "POST", FORCE, None, 0, SERVE),  # a forced POST is not queued
    (OFF, copy(10), "POST", PLAIN, None, 0, SERVE),  # history, but all there is offline
    (OFF, copy(10**7, **V), "GET", PLAIN, 5, 0, SERVE),  # stale, but it is all there is
    (OFF, copy(10), "GET", RELOAD, None, 0, SERVE),  # a normal reload is not a forced one
    (OFF, copy(10, 404), "GET", PLAIN, None, 0, SERVE),  # even an error page, offline
    (OFF, copy(10, 500), "GET", FORCE, None, 0, SERVE_Q),
    (OFF, None, "GET", OIC, None, 0, QUEUE),  # only-if-cached is not looked at offline
    # autodial: cached is served, the rest fetched (the caller queues if the dial fails)
    (AUTO, None, "GET", PLAIN, None, 0, FETCH),
    (AUTO, None, "POST", PLAIN, None, 0, FETCH),
    (AUTO, copy(10), "GET", PLAIN, None, 0, SERVE),
    (AUTO, copy(10, **V), "GET", PLAIN, 5, 0, SERVE),  # stale, served without asking
    (AUTO, copy(10), "GET", RELOAD, None, 0, SERVE),  # max-age=0 does not force in autodial
    (AUTO, copy(10, 404), "GET", PLAIN, None, 0, SERVE),  # autodial serves any copy
    (AUTO, copy(10, **V), "GET", FORCE, None, 0, REVAL),  # new: force goes to the network
    (AUTO, copy(10), "GET", FORCE, None, 0, FETCH),
    (AUTO, copy(10, **V), "HEAD", FORCE, 3600, 0, REVAL),  # force skips the fresh rule
    (AUTO, copy(10, cc="max-age=3600"), "GET", FORCE, None, 0, FETCH),
    (AUTO, copy(10), "POST", PLAIN, None, 0, SERVE),
    (AUTO, copy(10, **V), "POST", FORCE, None, 0, FETCH),  # never revalidate a POST
    (AUTO, None, "GET", OIC, None, 0, UNAVAIL),  # RFC 9111 §5.2.1.7: a 504, no dialling
    (AUTO, copy(10), "GET", RequestDirectives(force=True, only_if_cached=True), None, 0, SERVE),
    # online: serve the fresh, revalidate what has validators, fetch the rest
    (ON, None, "GET", PLAIN, None, 0, FETCH),
    (ON, None, "GET", PLAIN, 3600, 0, FETCH),
    (ON, None, "HEAD", FORCE, None, 0, FETCH),
    (ON, copy(10), "GET", PLAIN, None, 0, FETCH),  # no rule, no origin lifetime
    (ON, copy(10, **V), "GET", PLAIN, None, 0, REVAL),
    (ON, copy(10), "GET", PLAIN, 60, 0, SERVE),
    (ON, copy(10, **V), "GET", PLAIN, 60, 0, SERVE),
    (ON, copy(10), "HEAD", PLAIN, 60, 0, SERVE),
    (ON, copy(10, **V), "GET", FORCE, 60, 0, REVAL),  # a forced reload skips the rule
    (ON, copy(10), "GET", FORCE, 60, 0, FETCH),
    (ON, copy(120, **V), "GET", PLAIN, 60, 0, REVAL),  # too old for the rule
    (ON, copy(120), "GET", PLAIN, 60, 0, FETCH),
    (ON, copy(0), "GET", PLAIN, 0, 0, FETCH),  # a lifetime of 0 is never fresh
    (ON, copy(10, cc="max-age=60"), "GET", PLAIN, None, 0, SERVE),  # the origin's lifetime
    (ON, copy(10, cc="max-age=3600"), "GET", PLAIN, 5, 0, FETCH),  # the rule beats the origin
    (ON, copy(10, cc="no-cache"), "GET", PLAIN, 60, 0, SERVE),  # ... even its no-cache
    (ON, copy(10, cc="max-age=0", **V), "GET", PLAIN, None, 0, REVAL),
    (ON, copy(10, cc="s-maxage=3600"), "GET", PLAIN, None, 0, FETCH),  # shared caches only
    # request_changed: WWWOFFLE's minimum age before asking again, unless the origin forbids
    (ON, copy(10), "GET", PLAIN, None, 60, SERVE),
    (ON, copy(10, cc="max-age=5"), "GET", PLAIN, None, 60, FETCH),  # expired: request_expired
    (ON, copy(100, cc="max-age=600"), "GET", PLAIN, None, 60, SERVE),  # max(600, 60)
    (ON, copy(700, cc="max-age=600", **V), "GET", PLAIN, None, 60, REVAL),
    (ON, copy(10, cc="no-cache", **V), "GET", PLAIN, None, 60, REVAL),
    (ON, copy(10, cc="no-store"), "GET", PLAIN, None, 60, FETCH),
    (ON, copy(10), "GET", PLAIN, 5, 60, FETCH),  # a rule replaces request_changed
    # an error answer is fresh as its origin says (RFC 9111), never by our rules: a rule or
    # request_changed never keeps an error page where a refetch may bring the good one
    (ON, copy(10, 404), "GET", PLAIN, 3600, 0, FETCH),
    (ON, copy(10, 404, **V), "GET", PLAIN, 3600, 0, REVAL),
    (ON, copy(10, 500, cc="max-age=3600"), "GET", PLAIN, None, 0, SERVE),  # status-500-fresh
    (ON, copy(10, 500, cc="max-age=5"), "GET", PLAIN, None, 0, FETCH),  # status-500-stale
    (ON, copy(10, 503), "GET", PLAIN, None, 3600, FETCH),
    # stale within its stale-while-revalidate window: served while revalidated (RFC 5861)
    (ON, copy(3, cc="max-age=1, stale-while-revalidate=4", **V), "GET", PLAIN, None, 0, STALE),
    (ON, copy(6, cc="max-age=1, stale-while-revalidate=4", **V), "GET", PLAIN, None, 0, REVAL),
    (ON, copy(3, cc="max-age=1, stale-while-revalidate=4"), "GET", RELOAD, None, 0, FETCH),
    (
        ON,
        copy(3, cc="max-age=1, must-revalidate, stale-while-revalidate=4"),
        "GET",
        PLAIN,
        None,
        0,
        FETCH,
    ),
    (ON, copy(10, 301, cc="max-age=3600"), "GET", PLAIN, None, 0, SERVE),  # a redirect is good
    (ON, copy(10, 301), "GET", PLAIN, 60, 0, SERVE),
    # the browser's max-age caps the lifetime
    (ON, copy(10, cc="max-age=3600"), "GET", RELOAD, None, 0, FETCH),
    (ON, copy(10, cc="max-age=3600", **V), "GET", RELOAD, None, 0, REVAL),
    (ON, copy(10), "GET", RELOAD, 3600, 0, FETCH),
    (ON, copy(10, cc="max-age=3600"), "GET", RequestDirectives(max_age=30), None, 0, SERVE),
    (ON, copy(10, cc="max-age=3600"), "GET", RequestDirectives(max_age=5), None, 0, FETCH),
    (ON, copy(10, cc="max-age=5"), "GET", RequestDirectives(max_age=3600), None, 0, FETCH),
    # Age already on the response counts (RFC 9111 §4.2.3)
    (ON, copy(20, cc="max-age=60", extra=(("Age", "30"),)), "GET", PLAIN, None, 0, SERVE),
    (ON, copy(31, cc="max-age=60", extra=(("Age", "30"),)), "GET", PLAIN, None, 0, FETCH),
    # other methods always go upstream online: a stored POST answer is history
    (ON, copy(10), "POST", PLAIN, 3600, 0, FETCH),
    (ON, copy(10, **V), "POST", PLAIN, None, 0, FETCH),  # no revalidation of a POST
    (ON, None, "POST", PLAIN, None, 0, FETCH),
    # only-if-cached online: the copy, whatever its age or status, or a 504
    (ON, None, "GET", OIC, None, 0, UNAVAIL),
    (ON, None, "HEAD", OIC, 3600, 0, UNAVAIL),
    (ON, copy(10**7, **V), "GET", OIC, 5, 0, SERVE),  # stale, but the browser said so
    (ON, copy(10, 404), "GET", OIC, None, 0, SERVE),
    (ON, None, "POST", OIC, None, 0, FETCH),  # only for GET and HEAD
    # request no-store does not force a reload
    (ON, copy(10), "GET", request_directives("no-store"), 60, 0, SERVE),
]


@pytest.mark.parametrize(
    ("mode", "stored", "method", "directives", "rule", "changed", "expected"), DECISIONS, ids=_id
)
def test_decide(mode, stored, method, directives, rule, changed, expected):
    action = decide(
        mode,
        stored,
        NOW,
        method=method,
        directives=directives,
        rule_max_age=rule,
        request_changed=changed,
    )
    assert action is expected


# the inputs a timeless mode's decision may not depend on: (moment, rule_max_age,
# request_changed, ranged)
ELSEWHEN = [
    (NOW, None, 0, False),
    (NOW + timedelta(days=400), None, 0, False),
    (NOW - timedelta(days=400), 3600, 0, False),
    (NOW + timedelta(seconds=30), 0, 10**6, False),
    (NOW, 5, 60, True),
]


@pytest.mark.parametrize(
    ("mode", "stored", "method", "directives", "rule", "changed", "expected"), DECISIONS, ids=_id
)
def test_a_timeless_modes_decision_is_the_same_at_any_moment_and_under_any_rule(
    mode, stored, method, directives, rule, changed, expected
):
    """What the fast front keeps with a memory copy per request head (offline) is what
    decide() would say again at any moment, under any freshness rule or request_changed."""
    if not timeless(mode):
        return
    for now, rule_again, changed_again, ranged in ELSEWHEN:
        again = decide(
            mode,
            stored,
            now,
            method=method,
            directives=directives,
            rule_max_age=rule_again,
            request_changed=changed_again,
            ranged=ranged,
        )
        assert again is expected


def test_only_offline_is_timeless():
    """Online, the same copy is served now and fetched later: no decision may be kept."""
    assert [mode for mode in Mode if timeless(mode)] == [OFF]
    stored = copy(10, cc="max-age=60")
    assert decide(ON, stored, NOW) is SERVE
    assert decide(ON, stored, NOW + timedelta(seconds=60)) is FETCH


def test_decision_table_is_big_enough():
    assert len(DECISIONS) >= 40
    assert {row[0] for row in DECISIONS} == set(Mode)
    assert {row[-1] for row in DECISIONS} == set(Action)


@settings(max_examples=300, deadline=None)
@given(
    mode=st.sampled_from(list(Mode)),
    age=st.none() | st.floats(min_value=-1e6, max_value=1e8, allow_nan=False),
    status=st.sampled_from([200, 203, 204, 206, 301, 304, 404, 410, 500, 503]),
    validators=st.booleans(),
    cc=st.sampled_from([None, "max-age=60", "max-age=0", "no-cache", "no-store", "s-maxage=9"]),
    rule=st.none() | st.integers(min_value=0, max_value=10**8),
    changed=st.integers(min_value=0, max_value=10**6),
    force=st.booleans(),
    max_age=st.none() | st.integers(min_value=0, max_value=10**8),
    only_if_cached=st.booleans(),
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "get"]),
)
def test_decide_invariants(
    mode, age, status, validators, cc, rule, changed, force, max_age, only_if_cached, method
):
    stored = None if age is None else copy(age, status, validators=validators, cc=cc)
    directives = RequestDirectives(force=force, max_age=max_age, only_if_cached=only_if_cached)
    action = decide(
        mode,
        stored,
        NOW,
        method=method,
        directives=directives,
        rule_max_age=rule,
        request_changed=changed,
    )
    safe = method.upper() in ("GET", "HEAD")
    if mode is OFF:
        assert action in (SERVE, QUEUE, SERVE_Q)  # never the network
    else:
        assert action not in (QUEUE, SERVE_Q)  # queueing online happens only on failure
    if stored is None:
        assert action in (FETCH, QUEUE, UNAVAIL)  # nothing to serve or revalidate
    else:
        assert action not in (QUEUE, UNAVAIL)
    if action is REVAL:
        assert stored is not None and stored.has_validators and safe
    if action is SERVE_Q:
        assert force and safe
    if action is UNAVAIL:
        assert only_if_cached and safe and stored is None
    if only_if_cached and safe and mode is not OFF:
        assert action in (SERVE, UNAVAIL)
    if mode is ON and action is SERVE and not (only_if_cached and safe):
        assert stored is not None
        assert not force and safe and is_servable(status)
        exact_age = max(0.0, (NOW - stored.date).total_seconds())
        if rule is not None and is_good(status):
            assert exact_age < rule
        if max_age is not None:
            assert exact_age < max_age


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "post"])
@pytest.mark.parametrize("validators", [False, True])
def test_online_other_methods_always_go_upstream(method, validators):
    stored = copy(1, validators=validators)
    assert decide(ON, stored, NOW, rule_max_age=3600, method=method) is FETCH
    # offline and autodial still answer them from the cache
    assert decide(OFF, stored, NOW, method=method) is SERVE
    assert decide(AUTO, stored, NOW, method=method) is SERVE
    assert decide(OFF, None, NOW, method=method) is QUEUE


@pytest.mark.parametrize("method", ["GET", "HEAD", "get", "head"])
def test_online_get_and_head_use_the_cache(method):
    assert decide(ON, copy(1, **V), NOW, method=method) is REVAL
    assert decide(ON, copy(1), NOW, rule_max_age=60, method=method) is SERVE


def test_clock_skew_recorded_in_future_counts_as_new():
    future = Stored(NOW + timedelta(seconds=30), 200, ())
    assert decide(ON, future, NOW, rule_max_age=10) is SERVE
    assert current_age(future.date, NOW) == 0


# --- the one freshness boundary, shared by the proxy and the prefetcher ----------------------

LIFETIME_SOURCES = {
    # how the 60-second lifetime is given -> (copy keyword arguments, decide keyword arguments)
    "config rule": ({}, {"rule_max_age": 60}),
    "origin max-age": ({"cc": "max-age=60"}, {}),
    "request_changed": ({}, {"request_changed": 60}),
}


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (59.5, SERVE),
        (60, FETCH),  # "younger than", not "as young as"
        (60.4, FETCH),  # no rounding down to 60
    ],
)
@pytest.mark.parametrize("source", list(LIFETIME_SOURCES))
def test_fresh_only_below_the_lifetime(source, age, expected):
    copy_kwargs, rule_kwargs = LIFETIME_SOURCES[source]
    stored = copy(age, **copy_kwargs)
    assert decide(ON, stored, NOW, **rule_kwargs) is expected
    assert is_fresh(stored, NOW, **rule_kwargs) is (expected is SERVE)


@pytest.mark.parametrize(("age", "expected"), [(59.5, SERVE), (60, FETCH), (60.4, FETCH)])
def test_fresh_only_below_an_expires_lifetime(age, expected):
    recorded = NOW - timedelta(seconds=age)
    headers = (
        ("Date", http_date(recorded)),
        ("Expires", http_date(recorded + timedelta(seconds=60))),
    )
    stored = Stored(recorded, 200, headers)
    assert decide(ON, stored, NOW) is expected


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (59.5, SERVE),
        # RFC 9111 §5.2.1.1: request max-age=N means the client accepts a response whose
        # age is *less than or equal to* N (RFC 7234: "unwilling to accept ... greater than").
        # The copy is fresh (lifetime 3600), so an age of exactly 60 satisfies max-age=60.
        pytest.param(60, SERVE, id="age-equal-to-max-age"),
        (60.4, FETCH),
    ],
)
def test_request_max_age_accepts_an_age_equal_to_it(age, expected):
    stored = copy(age, cc="max-age=3600")
    assert decide(ON, stored, NOW, directives=RequestDirectives(max_age=60)) is expected


# --- freshness ------------------------------------------------------------------------------

REC = datetime(2025, 3, 1, 11, tzinfo=UTC)  # when the copy was recorded


def at(seconds: float) -> str:
    """An HTTP date ``seconds`` after REC."""
    return http_date(REC + timedelta(seconds=seconds))


DAY = 86400

# status, response headers -> lifetime, explicit, must_ask
FRESHNESS = [
    (200, [], 0, False, False),
    (200, [("Cache-Control", "max-age=60")], 60, True, False),
    (200, [("Cache-Control", "max-age=0")], 0, True, False),
    (200, [("Cache-Control", "MAX-AGE=60")], 60, True, False),
    (200, [("Cache-Control", 'max-age="60"')], 60, True, False),  # quoted form accepted
    (200, [("Cache-Control", "max-age=60, max-age=3600")], 60, True, False),  # first wins
    (200, [("Cache-Control", "max-age=abc")], 0, True, False),  # invalid: stale (§4.2.1)
    (200, [("Cache-Control", "max-age=-5")], 0, True, False),
    (200, [("Cache-Control", "max-age=99999999999")], 2**31, True, False),  # §1.2.2 cap
    (200, [("Cache-Control", "private, max-age=60")], 60, True, False),  # we are private
    (200, [("Cache-Control", "s-maxage=600")], 0, False, False),  # shared caches only
    (200, [("Cache-Control", "s-maxage=600, max-age=60")], 60, True, False),
    (200, [("Cache-Control", "s-maxage=600"), ("Expires", at(120))], 120, True, False),
    (200, [("Cache-Control", "no-cache")], 0, True, True),
    (200, [("Cache-Control", "no-store")], 0, True, True),
    (200, [("Cache-Control", "max-age=600, no-cache")], 0, True, True),
    (200, [("Cache-Control", "no-store, max-age=600")], 0, True, True),
    (200, [("Cache-Control", 'no-cache="Set-Cookie"')], 0, True, True),  # qualified as plain
    # several Cache-Control header lines are one list (RFC 9110 §5.3)
    (200, [("Cache-Control", "public"), ("cache-control", "max-age=60")], 60, True, False),
    (200, [("Cache-Control", "max-age=60"), ("Cache-Control", "no-cache")], 0, True, True),
    # Expires minus Date (not minus the recording time)
    (200, [("Date", at(-100)), ("Expires", at(3500))], 3600, True, False),
    (200, [("Expires", at(300))], 300, True, False),  # no Date: the recorded time
    (200, [("Date", "garbage"), ("Expires", at(300))], 300, True, False),  # bad Date: same
    (200, [("Date", at(0)), ("Expires", "0")], 0, True, False),  # invalid = already expired
    (200, [("Date", at(0)), ("Expires", "garbage")], 0, True, False),
    (200, [("Date", at(0)), ("Expires", "")], 0, True, False),
    (200, [("Date", at(0)), ("Expires", at(-3600))], 0, True, False),  # in the past
    (200, [("Date", at(0)), ("Expires", at(0))], 0, True, False),
    # max-age beats Expires (RFC 9111 §4.2.1), both ways
    (200, [("Cache-Control", "max-age=60"), ("Expires", at(3600))], 60, True, False),
    (200, [("Cache-Control", "max-age=0"), ("Expires", at(3600))], 0, True, False),
    (200, [("Cache-Control", "max-age=3600"), ("Expires", at(-60))], 3600, True, False),
    # heuristic: 10% of Date - Last-Modified, capped at a day, for §15.1 statuses
    (200, [("Date", at(0)), ("Last-Modified", at(-1000))], 100, False, False),
    (200, [("Last-Modified", at(-1000))], 100, False, False),  # no Date: the recorded time
    (200, [("Date", at(0)), ("Last-Modified", at(-100 * DAY))], DAY, False, False),  # capped
    (200, [("Date", at(0)), ("Last-Modified", at(-5 * DAY))], DAY / 2, False, False),
    (203, [("Date", at(0)), ("Last-Modified", at(-1000))], 100, False, False),
    (301, [("Date", at(0)), ("Last-Modified", at(-1000))], 100, False, False),
    (404, [("Date", at(0)), ("Last-Modified", at(-1000))], 100, False, False),  # §15.1 lists it
    (302, [("Date", at(0)), ("Last-Modified", at(-1000))], 0, False, False),  # not in §15.1
    (500, [("Date", at(0)), ("Last-Modified", at(-1000))], 0, False, False),
    (503, [("Date", at(0)), ("Last-Modified", at(-100 * DAY))], 0, False, False),
    (200, [("Date", at(0)), ("Last-Modified", at(3600))], 0, False, False),  # in the future
    (200, [("Date", at(0)), ("Last-Modified", at(0))], 0, False, False),  # modified just now
    (200, [("Date", at(0)), ("Last-Modified", "garbage")], 0, False, False),
    # explicit information beats the heuristic
    (200, [("Cache-Control", "max-age=60"), ("Last-Modified", at(-100 * DAY))], 60, True, False),
    (200, [("Expires", at(300)), ("Last-Modified", at(-100 * DAY))], 300, True, False),
    (200, [("Expires", "0"), ("Last-Modified", at(-100 * DAY))], 0, True, False),
    (200, [("Cache-Control", "no-cache"), ("Last-Modified", at(-100 * DAY))], 0, True, True),
]


@pytest.mark.parametrize(("status", "headers", "lifetime", "explicit", "must_ask"), FRESHNESS)
def test_freshness(status, headers, lifetime, explicit, must_ask):
    got = freshness(status, headers, REC)
    assert isinstance(got, Freshness)
    assert got.lifetime == pytest.approx(lifetime)
    assert (got.explicit, got.must_ask) == (explicit, must_ask)


# --- current_age ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resident", "header", "expected"),
    [
        (0, None, 0),
        (59.9, None, 59),  # whole seconds, rounded down
        (100, "20", 120),  # the Age the response arrived with counts too
        (100, " 20 ", 120),
        (100, "-5", 100),  # not a delta-seconds: ignored
        (100, "abc", 100),
        (100, "", 100),
        (100, "1.5", 100),
        (-10, None, 0),  # recorded in the future (clock skew): new
        (-10, "20", 20),
        (5, "99999999999", 2**31 + 5),  # delta-seconds saturate at 2**31 (RFC 9111 §1.2.2)
    ],
)
def test_current_age(resident, header, expected):
    assert current_age(NOW - timedelta(seconds=resident), NOW, header) == expected


# --- max_age_for and modes ------------------------------------------------------------------


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


# --- request_directives ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cache_control", "pragma", "expected"),
    [
        (None, None, RequestDirectives()),
        ("", "", RequestDirectives()),
        ("no-cache", None, RequestDirectives(force=True)),
        ("No-Cache", None, RequestDirectives(force=True)),
        ("max-age=0", None, RequestDirectives(max_age=0)),
        ("max-age=0, no-cache", None, RequestDirectives(force=True, max_age=0)),
        ("no-store, max-age=30", None, RequestDirectives(max_age=30, no_store=True)),  # no force
        ("no-store", None, RequestDirectives(no_store=True)),
        ('max-age="15"', None, RequestDirectives(max_age=15)),
        ("max-age=5, max-age=10", None, RequestDirectives(max_age=5)),  # first wins
        ("max-age=99999999999", None, RequestDirectives(max_age=2**31)),
        ("max-stale=10", None, RequestDirectives(max_stale=10)),  # not max-age
        ("s-maxage=5", None, RequestDirectives()),
        ("no-cache-please", None, RequestDirectives()),  # not the directive
        ("max-age=abc", None, RequestDirectives()),
        ("max-age=-1", None, RequestDirectives()),
        ("max-age=", None, RequestDirectives()),
        ("only-if-cached", None, RequestDirectives(only_if_cached=True)),
        (
            "only-if-cached, no-cache, max-age=9",
            None,
            RequestDirectives(force=True, max_age=9, only_if_cached=True),
        ),
        (None, "no-cache", RequestDirectives(force=True)),  # HTTP/1.0 reload
        (None, "No-Cache", RequestDirectives(force=True)),
        (None, "x-foo", RequestDirectives()),
        ("max-age=5", "no-cache", RequestDirectives(max_age=5)),  # Cache-Control wins (§5.4)
        ("no-cache", "no-cache", RequestDirectives(force=True)),
    ],
)
def test_request_directives(cache_control, pragma, expected):
    got = request_directives(cache_control, pragma)
    assert isinstance(got, RequestDirectives)
    assert got == expected


# --- parse_cache_control --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, {}),
        ("", {}),
        ("no-cache", {"no-cache": None}),
        ("No-Cache, MAX-AGE=60", {"no-cache": None, "max-age": "60"}),  # names lower-cased
        ("  max-age = 60 ,  no-store  ", {"max-age": "60", "no-store": None}),  # spaces
        ("\tmax-age=5\t", {"max-age": "5"}),
        ('max-age="60"', {"max-age": "60"}),  # quotes removed
        ('community="UCI"', {"community": "UCI"}),  # extensions kept, value case kept
        ("max-age=60, max-age=10", {"max-age": "60"}),  # the first occurrence wins
        ("no-cache, no-cache=x", {"no-cache": None}),
        (",, ,no-store,", {"no-store": None}),  # empty list elements
        ("max age=5, no-cache", {"no-cache": None}),  # malformed parts skipped
        ("=5, public", {"public": None}),
        ("max-age=5 6", {"max-age": "5 6"}),  # kept as is; _seconds rejects it later
    ],
)
def test_parse_cache_control(value, expected):
    assert parse_cache_control(value) == expected


def test_parse_cache_control_comma_inside_quotes_is_a_known_limit():
    # Splitting on commas first cuts a quoted list; what is promised is only that the
    # directives around it survive and no piece of the quoted list becomes a directive.
    cc = parse_cache_control('no-cache="Set-Cookie, X-Foo", max-age=5')
    assert set(cc) == {"no-cache", "max-age"}
    assert cc["max-age"] == "5"


# --- after_upstream_error -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "has_copy", "expected"),
    [
        (ON, True, SERVE),  # a stale copy (with a Warning) beats an error page
        (ON, False, None),
        (AUTO, True, SERVE),
        (AUTO, False, QUEUE),  # the dial failed: remember it for later
        (OFF, True, SERVE),
        (OFF, False, None),
    ],
    ids=_id,
)
def test_after_upstream_error(mode, has_copy, expected):
    assert after_upstream_error(mode, has_copy) is expected


# --- which captures stand for the resource --------------------------------------------------


@pytest.mark.parametrize(
    ("status", "servable", "good"),
    [
        (200, True, True),
        (203, True, True),
        (204, True, True),
        (206, False, False),  # only a part of the body
        (301, True, True),
        (304, False, False),  # no body of its own
        (400, True, False),
        (404, True, False),
        (410, True, False),
        (500, True, False),
        (503, True, False),
    ],
)
def test_is_servable_and_is_good(status, servable, good):
    assert is_servable(status) is servable
    assert is_good(status) is good


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ((), False),
        ((("Content-Type", "text/html"),), False),
        ((("ETag", '"a"'),), True),
        ((("etag", '"a"'),), True),
        ((("Last-Modified", "Sat, 01 Mar 2025 11:00:00 GMT"),), True),
        ((("ETag", '"a"'), ("Last-Modified", "Sat, 01 Mar 2025 11:00:00 GMT")), True),
    ],
)
def test_stored_has_validators(headers, expected):
    assert Stored(NOW, 200, headers).has_validators is expected


# --- validators and 304s --------------------------------------------------------------------

LM = http_date(NOW - timedelta(days=1))


@pytest.mark.parametrize(
    ("stored_headers", "expected"),
    [
        ([], []),
        ([("Content-Type", "text/html")], []),
        ([("ETag", '"a"')], [("If-None-Match", '"a"')]),
        ([("etag", 'W/"a"')], [("If-None-Match", 'W/"a"')]),  # weak tags are sent as they are
        ([("Last-Modified", LM)], [("If-Modified-Since", LM)]),
        (
            [("Last-Modified", LM), ("ETag", '"a"')],
            [("If-None-Match", '"a"'), ("If-Modified-Since", LM)],
        ),
        ([("ETag", "")], []),  # an empty ETag is no validator
    ],
)
def test_revalidation_headers(stored_headers, expected):
    assert revalidation_headers(stored_headers) == expected


OLD_DATE = http_date(NOW - timedelta(days=1))
NEW_DATE = http_date(NOW)


def test_merge_not_modified_replaces_what_the_304_says_and_keeps_the_body_framing():
    stored = [
        ("Content-Type", "text/html"),
        ("Content-Length", "1234"),
        ("Content-Encoding", "gzip"),
        ("ETag", '"old"'),
        ("Cache-Control", "max-age=60"),
        ("Date", OLD_DATE),
        ("Expires", OLD_DATE),
        ("X-Unrelated", "stays"),
    ]
    response_304 = [
        ("ETag", '"new"'),
        ("cache-control", "max-age=600"),  # names compare case-insensitively
        ("Date", NEW_DATE),
        ("Expires", NEW_DATE),
        ("Content-Length", "0"),  # the 304's own (empty) body, not the stored one's
        ("Content-Encoding", "br"),  # the stored body is still gzip
        ("Transfer-Encoding", "chunked"),  # hop-by-hop
        ("Connection", "close, X-Hop"),
        ("X-Hop", "1"),  # named by Connection: hop-by-hop too
    ]
    assert merge_not_modified(stored, response_304) == [
        ("Content-Type", "text/html"),
        ("Content-Length", "1234"),
        ("Content-Encoding", "gzip"),
        ("X-Unrelated", "stays"),
        ("ETag", '"new"'),
        ("cache-control", "max-age=600"),
        ("Date", NEW_DATE),
        ("Expires", NEW_DATE),
    ]


@pytest.mark.parametrize(
    ("stored", "response_304", "expected"),
    [
        ([("A", "1")], [], [("A", "1")]),  # an empty 304 changes nothing
        ([("A", "1"), ("B", "2")], [("a", "3")], [("B", "2"), ("a", "3")]),
        # each name the 304 carries replaces every stored line of that name
        (
            [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X", "x")],
            [("Set-Cookie", "c=3")],
            [("X", "x"), ("Set-Cookie", "c=3")],
        ),
        (
            [("Content-Range", "bytes 0-9/10")],
            [("Content-Range", "bytes 0-0/1")],
            [("Content-Range", "bytes 0-9/10")],
        ),
        (
            [("Connection", "keep-alive")],
            [("Keep-Alive", "timeout=5")],
            [("Connection", "keep-alive")],
        ),
    ],
)
def test_merge_not_modified_table(stored, response_304, expected):
    assert merge_not_modified(stored, response_304) == expected


IMS_EQUAL = http_date(NOW - timedelta(days=1))  # the response's Last-Modified
IMS_OLDER = http_date(NOW - timedelta(days=2))
IMS_NEWER = http_date(NOW)
RESPONSE = [("ETag", '"v1"'), ("Last-Modified", IMS_EQUAL), ("Content-Type", "text/html")]
NO_ETAG = [("Last-Modified", IMS_EQUAL)]
WEAK = [("ETag", 'W/"v1"')]

# method, request headers, response status, response headers -> 304?
CONDITIONALS = [
    ("GET", [], 200, RESPONSE, False),
    # If-None-Match: weak comparison (RFC 9110 §13.1.2)
    ("GET", [("If-None-Match", '"v1"')], 200, RESPONSE, True),
    ("GET", [("If-None-Match", '"v2"')], 200, RESPONSE, False),
    ("GET", [("If-None-Match", '"V1"')], 200, RESPONSE, False),  # opaque: case counts
    ("GET", [("If-None-Match", 'W/"v1"')], 200, RESPONSE, True),  # weak matches strong
    ("GET", [("If-None-Match", '"v1"')], 200, WEAK, True),  # strong matches weak
    ("GET", [("If-None-Match", 'W/"v1"')], 200, WEAK, True),
    ("GET", [("if-none-match", '  "v1"  ')], 200, RESPONSE, True),
    ("GET", [("If-None-Match", '"x", "v1", "y"')], 200, RESPONSE, True),  # a list
    ("GET", [("If-None-Match", '"x","y"')], 200, RESPONSE, False),
    ("GET", [("If-None-Match", "*")], 200, RESPONSE, True),
    # RFC 9110 §13.1.2: "*" is false whenever a current representation exists, ETag or not;
    # for GET/HEAD a false condition is a 304 (§13.2.2 step 3).
    pytest.param("GET", [("If-None-Match", "*")], 200, NO_ETAG, True, id="INM-star-no-etag"),
    ("GET", [("If-None-Match", '"v1"')], 200, NO_ETAG, False),  # nothing to match
    # If-Modified-Since (RFC 9110 §13.1.3): not modified since = modified <= the date
    ("GET", [("If-Modified-Since", IMS_EQUAL)], 200, RESPONSE, True),
    ("GET", [("If-Modified-Since", IMS_NEWER)], 200, RESPONSE, True),
    ("GET", [("If-Modified-Since", IMS_OLDER)], 200, RESPONSE, False),
    ("GET", [("If-Modified-Since", "garbage")], 200, RESPONSE, False),  # invalid: ignored
    ("GET", [("If-Modified-Since", IMS_NEWER)], 200, [("ETag", '"v1"')], False),  # no date
    # If-None-Match present: If-Modified-Since is not looked at (§13.2.2 step 4)
    ("GET", [("If-None-Match", '"v2"'), ("If-Modified-Since", IMS_NEWER)], 200, RESPONSE, False),
    ("GET", [("If-None-Match", '"v1"'), ("If-Modified-Since", IMS_OLDER)], 200, RESPONSE, True),
    ("GET", [("If-None-Match", '"v1"'), ("If-Modified-Since", IMS_NEWER)], 200, NO_ETAG, False),
    # methods and statuses
    ("HEAD", [("If-None-Match", '"v1"')], 200, RESPONSE, True),
    ("get", [("If-None-Match", '"v1"')], 200, RESPONSE, True),
    ("POST", [("If-None-Match", '"v1"')], 200, RESPONSE, False),  # never for POST
    ("POST", [("If-Modified-Since", IMS_NEWER)], 200, RESPONSE, False),
    ("GET", [("If-None-Match", '"v1"')], 204, RESPONSE, True),
    ("GET", [("If-None-Match", '"v1"')], 404, RESPONSE, False),  # only 2xx (§13.2.1)
    ("GET", [("If-Modified-Since", IMS_NEWER)], 404, RESPONSE, False),
    ("GET", [("If-None-Match", '"v1"')], 301, RESPONSE, False),
    ("GET", [("If-None-Match", '"v1"')], 500, RESPONSE, False),
]


@pytest.mark.parametrize(
    ("method", "request_headers", "status", "headers", "expected"), CONDITIONALS
)
def test_not_modified(method, request_headers, status, headers, expected):
    assert not_modified(method, request_headers, status, headers) is expected


def test_not_modified_headers_keep_only_the_rfc_9110_15_4_5_set():
    response = [
        ("Content-Type", "text/html"),
        ("Cache-Control", "max-age=60"),
        ("Content-Length", "1234"),
        ("Content-Location", "/index.html"),
        ("Content-Encoding", "gzip"),
        ("Date", NEW_DATE),
        ("etag", '"v1"'),
        ("Expires", NEW_DATE),
        ("Set-Cookie", "a=1"),
        ("Server", "nginx"),
        ("Transfer-Encoding", "chunked"),
        ("Vary", "Accept-Encoding"),
        ("Vary", "Accept-Language"),
        ("Last-Modified", OLD_DATE),  # allowed by §15.4.5 as a guide to cache updates
        ("X-Custom", "1"),
    ]
    assert not_modified_headers(response) == [
        ("Cache-Control", "max-age=60"),
        ("Content-Location", "/index.html"),
        ("Date", NEW_DATE),
        ("etag", '"v1"'),
        ("Expires", NEW_DATE),
        ("Vary", "Accept-Encoding"),
        ("Vary", "Accept-Language"),
        ("Last-Modified", OLD_DATE),
    ]


REQUEST = [
    ("Host", "example.com"),
    ("If-None-Match", '"a"'),
    ("if-modified-since", OLD_DATE),
    ("If-Match", '"a"'),
    ("If-Unmodified-Since", OLD_DATE),
    ("If-Range", '"a"'),
    ("Range", "bytes=0-99"),
    ("Accept", "*/*"),
]


@pytest.mark.parametrize(
    ("keep_range", "expected"),
    [
        (False, [("Host", "example.com"), ("Accept", "*/*")]),
        # Range survives with the If-Range that goes with it; the other conditions do not
        (
            True,
            [
                ("Host", "example.com"),
                ("If-Range", '"a"'),
                ("Range", "bytes=0-99"),
                ("Accept", "*/*"),
            ],
        ),
    ],
)
def test_without_conditionals(keep_range, expected):
    assert without_conditionals(REQUEST, keep_range=keep_range) == expected


def test_without_conditionals_default_drops_range():
    assert without_conditionals([("RANGE", "bytes=0-1"), ("X", "1")]) == [("X", "1")]


# --- Vary -----------------------------------------------------------------------------------

AL_EN = [("Accept-Language", "en")]
AL_FR = [("Accept-Language", "fr")]
VARY_AL = [("Vary", "Accept-Language")]

# stored response headers, recorded request headers, this request's headers -> fits?
VARY = [
    ([], None, [], True),
    ([], AL_EN, AL_FR, True),  # no Vary: anything goes
    ([("Vary", "Accept-Encoding")], [("Accept-Encoding", "gzip")], [], True),  # left to codings
    ([("Vary", "accept-encoding")], None, [("Accept-Encoding", "br")], True),
    ([("Vary", "*")], AL_EN, AL_EN, False),  # never fits
    ([("Vary", "Accept-Language, *")], AL_EN, AL_EN, False),
    (VARY_AL, AL_EN, AL_EN, True),
    (VARY_AL, AL_EN, AL_FR, False),
    (VARY_AL, None, [], True),  # missing on both
    (VARY_AL, [], [("Host", "x")], True),
    (VARY_AL, None, AL_EN, False),  # missing on one
    (VARY_AL, AL_EN, [], False),
    # RFC 9111 §4.1: a field absent from a request only matches one where it is also absent;
    # an empty field line is present.
    pytest.param(VARY_AL, [("Accept-Language", "")], [], False, id="empty-is-not-absent"),
    # normalization: case and whitespace in names and values (language tags ignore case)
    (
        VARY_AL,
        [("Accept-Language", "en-US, fr;q=0.5")],
        [("accept-language", "en-us,fr;q=0.5")],
        True,
    ),
    ([("Vary", " ACCEPT-LANGUAGE ")], AL_EN, [("Accept-Language", " EN ")], True),
    ([("vary", "Accept-Language")], AL_EN, AL_FR, False),
    # several field lines are one list, on both sides
    ([("Vary", "Accept-Encoding"), ("Vary", "Accept-Language")], AL_EN, AL_FR, False),
    ([("Vary", "Accept-Encoding"), ("Vary", "Accept-Language")], AL_EN, AL_EN, True),
    ([("Vary", " , Accept-Language ,, ")], AL_EN, AL_FR, False),
    (
        VARY_AL,
        [("Accept-Language", "en"), ("Accept-Language", "fr")],
        [("Accept-Language", "en, fr")],
        True,
    ),
    (
        [("Vary", "Accept-Encoding, Accept-Language")],
        [("Accept-Encoding", "gzip"), *AL_EN],
        [("Accept-Encoding", "br"), *AL_EN],
        True,  # Accept-Encoding does not count
    ),
    ([("Vary", "Cookie")], [("Cookie", "a=1")], [("Cookie", "a=2")], False),
    # RFC 9111 §4.1 allows case-normalization only "where values are defined to be
    # case-insensitive"; cookie values are not: two sessions must not share a copy.
    pytest.param(
        [("Vary", "Cookie")],
        [("Cookie", "session=ABC")],
        [("Cookie", "session=abc")],
        False,
        id="cookie-value-case-counts",
    ),
]


@pytest.mark.parametrize(("stored", "recorded", "request_headers", "expected"), VARY)
def test_vary_matches(stored, recorded, request_headers, expected):
    assert vary_matches(stored, recorded, request_headers) is expected


# --- content codings ------------------------------------------------------------------------

# Accept-Encoding, Content-Encoding -> may the copy be sent as it is?
CODINGS = [
    (None, None, True),  # no coding: always
    (None, "", True),
    (None, "identity", True),
    ("", None, True),
    ("gzip;q=0", "identity", True),
    ("gzip, deflate, br", "gzip", True),
    ("deflate, br", "gzip", False),
    ("GZIP", "Gzip", True),  # codings ignore case
    ("gzip;q=0", "gzip", False),  # q=0: "not acceptable"
    ("gzip; q=0.000", "gzip", False),
    ("gzip; q=0.5", "gzip", True),
    ("br;q=1.0, gzip;q=0.8", "br", True),
    ("*", "br", True),
    ("*;q=0", "gzip", False),
    ("*;q=0, gzip", "gzip", True),  # the named coding beats *
    ("gzip;q=0, *", "gzip", False),
    (None, "gzip", False),  # no Accept-Encoding: identity only (curl, scripts)
    ("", "gzip", False),  # empty: "no content coding wanted" (RFC 9110 §12.5.3)
    ("identity", "gzip", False),
    ("gzip", "x-gzip", True),  # x-gzip is gzip (RFC 9110 §8.4.1.3), both ways
    ("x-gzip", "gzip", True),
    ("x-gzip", "x-gzip", True),
    ("x-gzip;q=0", "gzip", False),
    ("gzip", "gzip, br", False),  # stacked codings: each must be accepted
    ("gzip, br", "gzip, br", True),
    ("br, gzip", "gzip,br", True),
    ("gzip, br", "identity, gzip", True),  # identity is no coding
]


@pytest.mark.parametrize(("accept_encoding", "content_encoding", "expected"), CODINGS)
def test_accepts_coding(accept_encoding, content_encoding, expected):
    assert accepts_coding(accept_encoding, content_encoding) is expected


# --- replay headers -------------------------------------------------------------------------


def test_replay_headers_drop_hops_and_renamed_transfer_headers():
    recorded = [
        ("Content-Type", "text/html"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", "keep-alive, X-Hop"),
        ("Keep-Alive", "timeout=5"),
        ("X-Hop", "1"),
        ("X-Archive-Orig-Transfer-Encoding", "chunked"),  # a hop the replay does not repeat
        ("x-archive-orig-connection", "close"),
        ("X-Archive-Orig-Server", "nginx"),  # end-to-end: kept
        ("Content-Length", "5"),
        ("Server", "nginx"),
    ]
    assert replay_headers(recorded) == [
        ("Content-Type", "text/html"),
        ("X-Archive-Orig-Server", "nginx"),
        ("Content-Length", "5"),
        ("Server", "nginx"),
    ]


def test_replay_headers_leave_set_cookie_out_unless_asked():
    recorded = [("Content-Type", "text/html"), ("Set-Cookie", "a=1"), ("set-cookie", "b=2")]
    assert replay_headers(recorded) == [("Content-Type", "text/html")]
    assert replay_headers(recorded, set_cookie=True) == recorded


# --- credentials -----------------------------------------------------------------------------

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
AUTH_A = [("Authorization", "Basic YTph")]
AUTH_B = [("Authorization", "Basic Yjpi")]
COOKIE_1 = [("Cookie", "s=1")]
COOKIE_2 = [("Cookie", "s=2")]
PRIVATE = [("Cache-Control", "private, max-age=60")]
PUBLIC = [("Cache-Control", "max-age=60")]


def test_recorded_request_headers_keep_digests_not_credentials():
    sent = [("Host", "example.com"), *AUTH_A, ("Accept", "*/*"), *COOKIE_1]
    recorded = recorded_request_headers(sent, KEY)
    assert recorded[:2] == [("Host", "example.com"), ("Accept", "*/*")]
    name, value = recorded[2]
    assert name == CREDENTIALS_HEADER and len(recorded) == 3
    assert "YTph" not in value and "s=1" not in value
    tags = credential_tags(sent, KEY)
    assert value == f"authorization={tags['authorization']}; cookie={tags['cookie']}"
    # with record_credentials: the credentials too, and the digests beside them
    kept = recorded_request_headers(sent, KEY, keep_credentials=True)
    assert kept == [*sent, (CREDENTIALS_HEADER, value)]
    # nothing to hide: unchanged; a digest header the browser sent is not believed
    assert recorded_request_headers([("Host", "h")], KEY) == [("Host", "h")]
    assert recorded_request_headers([(CREDENTIALS_HEADER, "authorization=x")], KEY) == []


def test_credential_digests_depend_on_key_value_and_name():
    a = credential_tags(AUTH_A, KEY)["authorization"]
    assert a == credential_tags([("authorization", " Basic YTph ")], KEY)["authorization"]
    assert a != credential_tags(AUTH_B, KEY)["authorization"]
    assert a != credential_tags(AUTH_A, OTHER_KEY)["authorization"]
    assert a != credential_tags([("Cookie", "Basic YTph")], KEY)["cookie"]
    assert credential_tags([("Accept", "x")], KEY) == {}


def _recorded(request, keep=False):
    return recorded_request_headers([("Host", "example.com"), *request], KEY, keep_credentials=keep)


# stored response headers, the request that fetched it, a later request -> served?
CREDENTIAL_CASES = [
    # fetched with Authorization: only the same Authorization
    (PUBLIC, AUTH_A, AUTH_A, True),
    (PUBLIC, AUTH_A, [], False),
    (PUBLIC, AUTH_A, AUTH_B, False),
    (PUBLIC, AUTH_A, [*AUTH_A, *COOKIE_2], True),  # cookies do not matter for a public copy
    (PUBLIC, [*AUTH_A, *COOKIE_1], AUTH_A, True),
    # fetched without: anyone (a public page, whoever asks)
    (PUBLIC, [], AUTH_B, True),
    (PUBLIC, COOKIE_1, [], True),
    ([], COOKIE_1, COOKIE_2, True),
    # private: the same Authorization and the same Cookie, or the same absence of them
    (PRIVATE, COOKIE_1, COOKIE_1, True),
    (PRIVATE, COOKIE_1, COOKIE_2, False),
    (PRIVATE, COOKIE_1, [], False),
    (PRIVATE, COOKIE_1, [*COOKIE_1, *AUTH_A], False),
    (PRIVATE, [*COOKIE_1, *AUTH_A], [*AUTH_A, *COOKIE_1], True),
    (PRIVATE, [*COOKIE_1, *AUTH_A], AUTH_A, False),
    (PRIVATE, [], [], True),  # nobody's: still nobody's
    (PRIVATE, [], COOKIE_1, False),
    ([("Cache-Control", 'private="Set-Cookie"')], COOKIE_1, COOKIE_2, False),  # qualified too
    ([("cache-control", "max-age=5"), ("Cache-Control", "PRIVATE")], COOKIE_1, [], False),
    # Vary names a credential: compared as digests (the values are not in the archive)
    ([("Vary", "Cookie")], COOKIE_1, COOKIE_1, True),
    ([("Vary", "Cookie")], COOKIE_1, COOKIE_2, False),
    ([("Vary", "Accept-Language, cookie")], COOKIE_1, [], False),
    ([("Vary", "Cookie")], [], COOKIE_1, False),
    ([("Vary", "Accept-Language")], COOKIE_1, COOKIE_2, True),
]


@pytest.mark.parametrize("keep", [False, True], ids=["digests", "record_credentials"])
@pytest.mark.parametrize(("stored", "fetched_with", "asked_with", "expected"), CREDENTIAL_CASES)
def test_credential_check(stored, fetched_with, asked_with, expected, keep):
    recorded = _recorded(fetched_with, keep)
    check = credential_check(stored, recorded, KEY)
    asked = [("Host", "example.com"), ("Accept", "*/*"), *asked_with]
    assert check.admits(asked, KEY) is expected
    # the Vary rule, which cannot read digests, never refuses what the check admits
    if expected:
        assert vary_matches(stored, recorded, asked)


@pytest.mark.parametrize(("stored", "fetched_with", "asked_with", "expected"), CREDENTIAL_CASES)
def test_credential_check_of_a_recording_without_digests(
    stored, fetched_with, asked_with, expected
):
    """An older recording keeps the credentials themselves: they are compared the same way."""
    recorded = [("Host", "example.com"), *fetched_with]
    check = credential_check(stored, recorded, KEY)
    assert check.admits([("Host", "example.com"), *asked_with], KEY) is expected


def test_a_digest_made_with_another_key_never_admits():
    check = credential_check(PUBLIC, _recorded(AUTH_A), OTHER_KEY)
    assert check.needed == {"authorization"}
    assert not check.admits(AUTH_A, OTHER_KEY)


# --- the recorded request a copy kept in memory holds ----------------------------------------


@pytest.mark.parametrize(("stored", "recorded", "request_headers", "expected"), VARY)
def test_request_headers_for_reuse_keep_every_vary_answer(
    stored, recorded, request_headers, expected
):
    kept = request_headers_for_reuse(stored, recorded or ())  # None: no request recorded
    assert vary_matches(stored, kept, request_headers) is expected
    assert set(kept) <= set(recorded or ())


@pytest.mark.parametrize("keep", [False, True], ids=["digests", "record_credentials"])
@pytest.mark.parametrize(("stored", "fetched_with", "asked_with", "expected"), CREDENTIAL_CASES)
def test_request_headers_for_reuse_keep_every_credential_answer(
    stored, fetched_with, asked_with, expected, keep
):
    recorded = _recorded(fetched_with, keep)
    kept = request_headers_for_reuse(stored, recorded)
    asked = [("Host", "example.com"), ("Accept", "*/*"), *asked_with]
    assert credential_check(stored, kept, KEY).admits(asked, KEY) is expected
    assert ("Host", "example.com") not in kept  # what no rule reads is let go


_NAMES = st.sampled_from(
    [
        "Accept-Language",
        "accept-language",
        "Cookie",
        "Authorization",
        "X-Mode",
        "Host",
        "Accept-Encoding",
        "User-Agent",
        CREDENTIALS_HEADER,
        "wwwproxy-credentials",
    ]
)
_VALUES = st.sampled_from(["en", "fr", "a=1", "a=2", "", "Basic YTph", "gzip", "x"])
_HEADERS = st.lists(st.tuples(_NAMES, _VALUES), max_size=6)


@settings(max_examples=400, deadline=None)
@given(
    vary=st.lists(st.sampled_from(["Accept-Language", "cookie", "X-Mode", "*", "Accept-Encoding"])),
    other=_HEADERS,
    fetched_with=_HEADERS,
    asked=_HEADERS,
)
def test_request_headers_for_reuse_decide_as_the_whole_request(vary, other, fetched_with, asked):
    stored = [("Vary", ", ".join(vary)), *other] if vary else other
    for recorded in (fetched_with, _recorded(fetched_with), _recorded(fetched_with, True)):
        kept = request_headers_for_reuse(stored, recorded)
        assert vary_matches(stored, kept, asked) == vary_matches(stored, recorded, asked)
        assert credential_check(stored, kept, KEY) == credential_check(stored, recorded, KEY)


# --- abort limits ----------------------------------------------------------------------------

K = 1024
# received, expected length, max_bytes, percent -> finish the download the browser left?
ABANDONED = [
    (10, 1000, None, None, True),  # no limit: always (finish_on_disconnect as it was)
    (10, None, None, None, True),
    (10, 100 * K, 100 * K, None, True),  # at most the size: finished
    (10, 100 * K + 1, 100 * K, None, False),
    (10, None, 100 * K, None, True),  # no length: while what came is under the size
    (100 * K, None, 100 * K, None, True),
    (100 * K + 1, None, 100 * K, None, False),
    (79, 100, None, 80, False),  # below the percentage: cut
    (80, 100, None, 80, True),
    (100, 100, None, 80, True),
    (0, 0, None, 80, True),  # an empty body has all of itself
    (10**9, None, None, 80, False),  # no length, no percentage: cut
    (10, 1000, None, 0, True),  # 0%: every download
    (900, 1000, 100, 90, True),  # either rule finishes it
    (10, 50, 100, 90, True),
    (10, 1000, 100, 90, False),  # neither does
    (10, 1000, 0, None, False),  # 0 KiB: only empty bodies
    (0, 0, 0, None, True),
]


@pytest.mark.parametrize(("received", "expected", "max_bytes", "percent", "finish"), ABANDONED)
def test_finish_abandoned(received, expected, max_bytes, percent, finish):
    assert finish_abandoned(received, expected, max_bytes=max_bytes, percent=percent) is finish


@given(
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.one_of(st.none(), st.integers(0, 10**7)),
    st.one_of(st.none(), st.integers(0, 100)),
)
@settings(max_examples=300)
def test_finish_abandoned_once_true_stays_true_for_a_known_length(
    received, more, max_bytes, percent
):
    """With a length, more bytes never turn a decision to finish into a cut."""
    total = received + more
    if finish_abandoned(received, total, max_bytes=max_bytes, percent=percent):
        assert finish_abandoned(total, total, max_bytes=max_bytes, percent=percent)


# --- a stored copy's freshness facts, worked out once ------------------------------------

ONCE_CASES = [
    ((), 0.0, 0),
    ((("Cache-Control", "max-age=60"),), 60.0, 0),
    ((("Cache-Control", "max-age=60"), ("Age", "50")), 60.0, 50),
    ((("Cache-Control", "no-cache, max-age=60"),), 0.0, 0),
    ((("Expires", http_date(NOW + timedelta(seconds=90))), ("Date", http_date(NOW))), 90.0, 0),
    ((("Last-Modified", http_date(NOW - timedelta(days=1))), ("Age", "x")), 8640.0, 0),
]


@pytest.mark.parametrize(("headers", "lifetime", "initial"), ONCE_CASES)
def test_a_stored_copy_judged_again_and_again_is_judged_as_the_first_time(
    headers, lifetime, initial
):
    """Stored keeps its origin freshness and initial Age (a memory hit is judged per hit):
    the same as worked out afresh, and is_fresh still counts the time that passes."""
    stored = Stored(NOW, 200, headers)
    assert stored.origin_freshness == freshness(200, headers, NOW)
    assert stored.origin_freshness.lifetime == lifetime
    assert stored.initial_age == initial
    for later in (0, 5, 9, 10, 11, 59, 60, 61, 100_000):
        when = NOW + timedelta(seconds=later)
        fresh = Stored(NOW, 200, headers)  # never asked before
        assert is_fresh(stored, when) == is_fresh(fresh, when)
        assert is_fresh(stored, when) == (later + initial < lifetime), later


# --- RFC 9111 rows from the public HTTP caching test suite -----------------------------------
# Each row names the suite test (suite/tests/*.mjs) it stands for; "pause" is the suite's
# pause_after (about 3 s).

PAUSE = 3


def suite_copy(cc: str | None = None, age: float = PAUSE, **kwargs) -> Stored:
    return copy(age, cc=cc, **kwargs)


# stored copy, request directives, shared, request_changed -> online action
RFC9111 = [
    (suite_copy(), PLAIN, False, 0, FETCH),  # freshness-none
    (suite_copy("max-age=3600"), PLAIN, False, 0, SERVE),  # freshness-max-age
    (suite_copy("max-age=2"), PLAIN, False, 0, FETCH),  # freshness-max-age-stale
    (suite_copy("max-age=0"), PLAIN, False, 0, FETCH),  # freshness-max-age-0
    (suite_copy("max-age=2, must-revalidate", validators=True), PLAIN, False, 0, REVAL),
    (suite_copy("max-age=10000, must-revalidate"), PLAIN, False, 0, SERVE),  # -fresh
    (suite_copy(extra=(("Expires", http_date(NOW - timedelta(days=30))),)), PLAIN, False, 0, FETCH),
    # shared caches (RFC 9111 §5.2.2.10, §5.2.2.7)
    (suite_copy("s-maxage=3600"), PLAIN, True, 0, SERVE),  # freshness-s-maxage-shared
    (suite_copy("s-maxage=3600"), PLAIN, False, 0, FETCH),
    (suite_copy("max-age=3600, s-maxage=1"), PLAIN, True, 0, FETCH),  # -shared-longer
    (suite_copy("max-age=1, s-maxage=3600"), PLAIN, True, 0, SERVE),  # -shared-shorter
    (suite_copy("s-maxage=3600, max-age=1"), PLAIN, False, 0, FETCH),  # -private
    (suite_copy("private, max-age=3600"), PLAIN, True, 0, FETCH),  # cc-resp-private-shared
    (suite_copy("private, max-age=3600", validators=True), PLAIN, True, 0, FETCH),  # not asked
    (suite_copy("private, max-age=3600"), PLAIN, False, 0, SERVE),  # cc-resp-private-private
    (suite_copy("private, max-age=3600"), OIC, True, 0, UNAVAIL),  # not for another client
    # request directives (RFC 9111 §5.2.1)
    (suite_copy("max-age=100000"), request_directives("max-age=0"), False, 0, FETCH),  # ma0
    (suite_copy("max-age=100000"), request_directives("max-age=1"), False, 0, FETCH),  # ma1
    (  # ccreq-magreaterage
        suite_copy("max-age=100000", extra=(("Age", "1800"),)),
        request_directives("max-age=600"),
        False,
        0,
        FETCH,
    ),
    (suite_copy("max-age=2"), request_directives("max-stale=1000"), False, 0, SERVE),  # max-stale
    (suite_copy("max-age=2"), request_directives("max-stale"), False, 0, SERVE),  # any staleness
    (suite_copy("max-age=2"), request_directives("max-stale=0"), False, 0, FETCH),
    (  # ccreq-max-stale-age
        suite_copy("max-age=1500", age=0, extra=(("Age", "2000"),)),
        request_directives("max-stale=1000"),
        False,
        0,
        SERVE,
    ),
    (suite_copy("max-age=2, must-revalidate"), request_directives("max-stale"), False, 0, FETCH),
    (suite_copy("max-age=2, no-cache"), request_directives("max-stale"), False, 0, FETCH),
    (suite_copy("max-age=2, proxy-revalidate"), request_directives("max-stale"), True, 0, FETCH),
    (suite_copy("max-age=2, proxy-revalidate"), request_directives("max-stale"), False, 0, SERVE),
    (suite_copy("s-maxage=2"), request_directives("max-stale"), True, 0, FETCH),
    (suite_copy("max-age=1500", age=0), request_directives("min-fresh=2000"), False, 0, FETCH),
    (  # ccreq-min-fresh-age
        suite_copy("max-age=1500", age=0, extra=(("Age", "1000"),)),
        request_directives("min-fresh=1000"),
        False,
        0,
        FETCH,
    ),
    (suite_copy("max-age=1500", age=0), request_directives("min-fresh=1000"), False, 0, SERVE),
    (suite_copy("max-age=3600"), request_directives("no-cache"), False, 0, FETCH),  # no-cache
    (suite_copy("max-age=3600", validators=True), FORCE, False, 0, REVAL),  # -no-cache-etag
    (None, request_directives("only-if-cached"), False, 0, UNAVAIL),  # ccreq-oic
    # Age (RFC 9111 §4.2.3, §5.1)
    (suite_copy("max-age=3600", age=0, extra=(("Age", "7200, 0"),)), PLAIN, False, 0, FETCH),
    (suite_copy("max-age=3600", age=0, extra=(("Age", "0, 7200"),)), PLAIN, False, 0, SERVE),
    (suite_copy("max-age=3600", age=0, extra=(("Age", "abc"),)), PLAIN, False, 0, SERVE),
    (suite_copy("max-age=3600", age=0, extra=(("Age", "-7200"),)), PLAIN, False, 0, SERVE),
    (suite_copy("max-age=3600", age=0, extra=(("Age", "7200.0"),)), PLAIN, False, 0, SERVE),
    (suite_copy("max-age=3600", age=0, extra=(("Age", "2147483648"),)), PLAIN, False, 0, FETCH),
    # request_changed > 0: WWWOFFLE's minimum age before asking again
    (suite_copy(), PLAIN, False, 60, SERVE),  # no freshness information: reused
    (suite_copy("max-age=0"), PLAIN, False, 60, FETCH),  # expired: request_expired is on
    (suite_copy("max-age=2, must-revalidate"), PLAIN, False, 60, FETCH),
    (suite_copy("max-age=2, must-revalidate"), PLAIN, True, 60, FETCH),  # never when shared
    (suite_copy("no-store"), PLAIN, False, 60, FETCH),  # never overrides no-store
    (suite_copy("no-cache"), PLAIN, False, 60, FETCH),
    (suite_copy("s-maxage=1"), PLAIN, True, 60, FETCH),  # nor s-maxage in a shared cache
    (suite_copy("max-age=2, proxy-revalidate"), PLAIN, True, 60, FETCH),
    (suite_copy("private, max-age=3600"), PLAIN, True, 60, FETCH),  # nor private
]


@pytest.mark.parametrize(
    ("stored", "directives", "shared", "changed", "expected"), RFC9111, ids=_id
)
def test_decide_rfc9111(stored, directives, shared, changed, expected):
    action = decide(ON, stored, NOW, directives=directives, shared=shared, request_changed=changed)
    assert action is expected


@pytest.mark.parametrize(
    ("stored", "directives", "shared", "changed", "expected"), RFC9111, ids=_id
)
def test_shared_is_never_looked_at_offline(stored, directives, shared, changed, expected):
    """Offline, a private copy is still its owner's to read (the credential check guards it)."""
    for flag in (False, True):
        action = decide(OFF, stored, NOW, directives=directives, shared=flag)
        assert action in (SERVE, SERVE_Q, QUEUE)
        assert action is decide(OFF, stored, NOW, directives=directives)


def test_expires_in_the_past_with_validators_revalidates():
    past = (("Expires", http_date(NOW - timedelta(days=30))),)
    assert decide(ON, suite_copy(extra=past, validators=True), NOW) is REVAL  # expires-past


# stored copy, has_copy, mode, shared -> what a failed fetch gives
STALE_ON_ERROR = [
    (suite_copy("max-age=2"), ON, False, SERVE),  # stale-close
    (suite_copy("max-age=2, must-revalidate"), ON, False, None),  # stale-close-must-revalidate
    (suite_copy("max-age=2, proxy-revalidate"), ON, True, None),  # stale-close-proxy-revalidate
    (suite_copy("max-age=2, proxy-revalidate"), ON, False, SERVE),  # private: not for us
    (suite_copy("max-age=2, no-cache"), ON, False, None),  # stale-close-no-cache
    (suite_copy("max-age=2, s-maxage=2"), ON, True, None),  # stale-close-s-maxage=2
    (suite_copy("max-age=2, s-maxage=2"), ON, False, SERVE),
    (suite_copy("max-age=2, stale-if-error=60"), ON, False, SERVE),  # stale-sie-close
    (suite_copy("no-store"), ON, False, None),
    (suite_copy("max-age=3600, must-revalidate"), ON, False, SERVE),  # still fresh
    (suite_copy("s-maxage=3600"), ON, True, SERVE),
    (suite_copy("private, max-age=3600"), ON, True, None),  # not for another client
    (suite_copy("private, max-age=3600"), ON, False, SERVE),
    (suite_copy("max-age=2, must-revalidate"), AUTO, False, QUEUE),  # as if none: queued
    (suite_copy("max-age=2"), AUTO, False, SERVE),
    (suite_copy(), ON, False, SERVE),  # no freshness information: WWWOFFLE's stale copy
]


@pytest.mark.parametrize(("stored", "mode", "shared", "expected"), STALE_ON_ERROR, ids=_id)
def test_after_upstream_error_with_the_copy(stored, mode, shared, expected):
    assert after_upstream_error(mode, True, stored, NOW, shared=shared) is expected
    assert may_serve_stale(stored, NOW, shared=shared) is (expected is SERVE)
    assert after_upstream_error(mode, False, None, NOW, shared=shared) is after_upstream_error(
        mode, False
    )


def test_without_the_moment_a_must_revalidate_copy_counts_as_stale():
    fresh = suite_copy("max-age=3600, must-revalidate")
    assert may_serve_stale(fresh, NOW)
    assert not may_serve_stale(fresh)
    assert may_serve_stale(suite_copy("max-age=2"))


@pytest.mark.parametrize(
    ("cache_control", "expected"),
    [
        ("max-stale", RequestDirectives(max_stale=ANY_STALENESS)),  # RFC 9111 §5.2.1.2
        ("max-stale=1000", RequestDirectives(max_stale=1000)),
        ('max-stale="5"', RequestDirectives(max_stale=5)),
        ("max-stale=abc", RequestDirectives()),  # malformed: as if absent
        ("min-fresh=2000", RequestDirectives(min_fresh=2000)),  # RFC 9111 §5.2.1.3
        ("min-fresh", RequestDirectives()),  # needs a value
        ("MIN-FRESH=5, Max-Stale", RequestDirectives(max_stale=ANY_STALENESS, min_fresh=5)),
        ("no-store", RequestDirectives(no_store=True)),  # RFC 9111 §5.2.1.5
    ],
)
def test_request_directives_rfc9111(cache_control, expected):
    assert request_directives(cache_control) == expected


@settings(max_examples=200, deadline=None)
@given(
    age=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    max_age=st.integers(min_value=0, max_value=10**6),
    max_stale=st.none() | st.integers(min_value=0, max_value=10**6),
    min_fresh=st.none() | st.integers(min_value=0, max_value=10**6),
    revalidate=st.booleans(),
    shared=st.booleans(),
)
def test_max_stale_and_min_fresh_bounds(age, max_age, max_stale, min_fresh, revalidate, shared):
    cc = f"max-age={max_age}" + (", must-revalidate" if revalidate else "")
    stored = copy(age, cc=cc)
    fresh = is_fresh(stored, NOW, shared=shared, max_stale=max_stale, min_fresh=min_fresh)
    real_age = stored.age(NOW)
    if fresh:
        if min_fresh is not None:
            assert max_age - real_age >= min_fresh
        if real_age >= max_age:  # served stale: only as far as the browser allowed
            assert max_stale is not None and not revalidate
            assert real_age - max_age <= max_stale
    elif max_stale is None and min_fresh is None:
        assert real_age >= max_age


# the suite's header list (suite/tests/lib/header-list.mjs) -> does a 304 update the stored
# value (RFC 9111 §3.2)?  304-etag-update-response-<name>; None: never stored from a 304
UPDATE_304 = [
    ("Test-Header", True),
    ("X-Test-Header", True),
    ("Content-Foo", True),
    ("X-Content-Foo", True),
    ("Cache-Control", True),
    ("Content-Location", True),
    ("Content-MD5", True),
    ("Content-Security-Policy", True),
    ("Content-Type", True),
    ("Clear-Site-Data", True),
    ("ETag", True),
    ("Expires", True),
    ("Public-Key-Pins", True),
    ("Set-Cookie", True),
    ("Set-Cookie2", True),
    ("X-Frame-Options", True),
    ("X-XSS-Protection", True),
    ("Content-Length", False),  # must not: the body is the stored one
    # a check only: the archive keeps the coded body, which another coding would misdescribe
    # (§3.2 lets a cache keep fields its stored body depends on)
    ("Content-Encoding", False),
    ("Content-Range", False),
    ("Connection", None),
    ("Keep-Alive", None),
    ("Proxy-Authenticate", None),
    ("Proxy-Authentication-Info", None),  # headers-store-Proxy-Authentication-Info
    ("Proxy-Authorization", None),
    ("Proxy-Connection", None),
    ("TE", None),
    ("Transfer-Encoding", None),
    ("Upgrade", None),
]


@pytest.mark.parametrize(("name", "updated"), UPDATE_304)
def test_merge_not_modified_suite_header_list(name, updated):
    stored = [("Date", "a"), ("Last-Modified", "b")]
    if updated is not None:
        stored.append((name, "value-A"))
    merged = merge_not_modified(stored, [(name, "value-B"), ("Last-Modified", "b")])
    values = [v for n, v in merged if n.lower() == name.lower()]
    if updated is None:
        assert values == []
    else:
        assert values == (["value-B"] if updated else ["value-A"])


# WWWOFFLE's saving rules: stored copy, request_changed, request_expired, request_no_cache,
# shared -> online action.  Shipped off (0, True, True): the server's word holds.
SAVING = [
    (copy(10), 0, True, True, False, FETCH),  # freshness-none: asked every time
    (copy(10), 60, True, True, False, SERVE),  # no lifetime given: request_changed applies
    (copy(70), 60, True, True, False, FETCH),  # ... while younger than it
    (copy(10, cc="max-age=5"), 60, True, True, False, FETCH),  # expired: asked again
    (copy(10, cc="max-age=5"), 60, False, True, False, SERVE),  # request_expired: false
    (
        copy(10, extra=(("Expires", http_date(NOW - timedelta(days=1))),)),
        60,
        False,
        True,
        False,
        SERVE,
    ),
    (copy(10, cc="max-age=5, must-revalidate"), 60, False, True, False, SERVE),  # private cache
    (copy(10, cc="max-age=5, must-revalidate"), 60, False, True, True, FETCH),  # never shared
    (copy(10, cc="no-cache"), 60, False, True, False, FETCH),  # request_no_cache on
    (copy(10, cc="no-cache"), 60, True, False, False, SERVE),  # request_no_cache: false
    (copy(10, cc="no-store"), 60, False, False, False, FETCH),  # never no-store
    (copy(10, 500), 60, False, False, False, FETCH),  # never an error answer
    (copy(10, cc="s-maxage=1"), 60, False, False, True, FETCH),
]


@pytest.mark.parametrize(("stored", "changed", "expired", "no_cache", "shared", "expected"), SAVING)
def test_saving_rules(stored, changed, expired, no_cache, shared, expected):
    action = decide(
        ON,
        stored,
        NOW,
        request_changed=changed,
        request_expired=expired,
        request_no_cache=no_cache,
        shared=shared,
    )
    assert action is expected


@pytest.mark.parametrize(
    ("mode", "keep", "expected"),
    [
        (ON, True, False),
        (ON, False, False),
        (OFF, True, True),
        (OFF, False, False),
        (AUTO, True, True),
        (AUTO, False, False),
    ],
)
def test_good_copy_is_preferred_where_the_cache_answers_for_the_origin(mode, keep, expected):
    assert prefers_good(mode, keep) is expected


@pytest.mark.parametrize(("mode", "expected"), [(ON, REVAL), (AUTO, SERVE), (OFF, SERVE)])
def test_an_invalidated_copy_is_revalidated_online_and_still_served_offline(mode, expected):
    stored = copy(10, cc="max-age=3600", **V)
    assert decide(mode, stored, NOW) is SERVE
    assert decide(mode, stored, NOW, invalidated=True) is expected


# CDN-Cache-Control (RFC 9213): obeyed in place of Cache-Control and Expires by a shared cache
CDN = [
    ((("CDN-Cache-Control", "max-age=3600"),), True, SERVE),  # cdn-max-age
    ((("CDN-Cache-Control", "max-age=3600"),), False, FETCH),  # a private cache ignores it
    ((("CDN-Cache-Control", "max-age=3600"), ("Age", "7200")), True, FETCH),  # -age
    ((("CDN-Cache-Control", "max-age=0"),), True, FETCH),  # cdn-max-age-0
    (
        (("CDN-Cache-Control", "max-age=0"), ("Expires", http_date(NOW + timedelta(hours=3)))),
        True,
        FETCH,
    ),  # -0-expires
    ((("CDN-Cache-Control", "max-age=3600"), ("Expires", "0")), True, SERVE),
    ((("Cache-Control", "max-age=3600"), ("CDN-Cache-Control", "max-age=1")), True, FETCH),
    ((("CDN-Cache-Control", "private"), ("Cache-Control", "max-age=10000")), True, FETCH),
    ((("CDN-Cache-Control", "no-cache"), ("Cache-Control", "max-age=10000")), True, FETCH),
    ((("Cache-Control", "max-age=10000"), ("CDN-Cache-Control", "no-store")), True, FETCH),
    ((("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=10000")), True, SERVE),
    (
        (("CDN-Cache-Control", "max-age=10000, &&&&&"), ("Cache-Control", "no-store")),
        True,
        FETCH,
    ),  # not a Structured-Field Dictionary: Cache-Control governs
    ((("CDN-Cache-Control", 'max-age="10000"'), ("Cache-Control", "no-store")), True, FETCH),
    ((("CDN-Cache-Control", "foobar, max-age=3600"),), True, SERVE),  # extensions ignored
    ((("CDN-Cache-Control", "MaX-aGe=3600"),), True, FETCH),  # keys are lower case
]


@pytest.mark.parametrize(("extra", "shared", "expected"), CDN)
def test_cdn_cache_control_governs_a_shared_cache(extra, shared, expected):
    assert decide(ON, copy(3, extra=extra), NOW, shared=shared) is expected


@settings(max_examples=300, deadline=None)
@given(
    age=st.floats(min_value=0, max_value=1e7, allow_nan=False),
    status=st.sampled_from([200, 301, 404, 500]),
    cc=st.sampled_from([None, "max-age=60", "no-cache", "no-store", "private", "s-maxage=5"]),
    validators=st.booleans(),
    method=st.sampled_from(["GET", "HEAD", "POST"]),
    force=st.booleans(),
    later=st.floats(min_value=0, max_value=1e7, allow_nan=False),
    rule=st.none() | st.integers(min_value=0, max_value=10**6),
    changed=st.integers(min_value=0, max_value=10**6),
    expired=st.booleans(),
    no_cache=st.booleans(),
    invalidated=st.booleans(),
)
def test_a_timeless_decision_reads_nothing_that_changes_with_time_or_the_store(
    age, status, cc, validators, method, force, later, rule, changed, expired, no_cache, invalidated
):
    """What the fast front keeps per memory copy and request head (front._action) may depend
    only on the copy, the request and the mode: in a timeless mode the moment, the freshness
    rules, the saving rules and the store's invalidations change nothing."""
    stored = copy(age, status, cc=cc, validators=validators)
    directives = RequestDirectives(force=force)
    for mode in (m for m in Mode if timeless(m)):
        for shared in (False, True):
            plain = decide(mode, stored, NOW, method=method, directives=directives, shared=shared)
            varied = decide(
                mode,
                stored,
                NOW + timedelta(seconds=later),
                method=method,
                directives=directives,
                shared=shared,
                rule_max_age=rule,
                request_changed=changed,
                request_expired=expired,
                request_no_cache=no_cache,
                invalidated=invalidated,
            )
            assert varied is plain
