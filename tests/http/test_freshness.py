"""HTTP dates, Age and the shared-cache lifetime (RFC 9111 §4.2, §5.1, §5.3; RFC 9110 §5.6.7).

Row comments name the public HTTP caching test suite's test each row stands for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wwwproxy.http.freshness import (
    expires_time,
    freshness,
    http_date,
    initial_age,
    parse_age,
    parse_http_date,
    shared_reusable,
)

REC = datetime(2026, 3, 1, 11, tzinfo=UTC)
A2050 = datetime(2050, 8, 18, 2, 1, 18, tzinfo=UTC)


def at(seconds: float) -> str:
    return format_datetime(REC + timedelta(seconds=seconds), usegmt=True)


# --- parse_http_date: RFC 9110 §5.6.7 -------------------------------------------------------

HTTP_DATES = [
    ("Thu, 18 Aug 2050 02:01:18 GMT", A2050),  # IMF-fixdate
    ("THU, 18 Aug 2050 02:01:18 GMT", A2050),  # freshness-expires-wrong-case-weekday
    ("Thu, 18 AUG 2050 02:01:18 GMT", A2050),  # freshness-expires-wrong-case-month
    ("Thu, 18 Aug 2050 02:01:18 gMT", A2050),  # freshness-expires-wrong-case-tz
    ("Thursday, 18-Aug-50 02:01:18 GMT", A2050),  # freshness-expires-rfc850 (obsolete form)
    ("Sunday, 06-Nov-94 08:49:37 GMT", datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)),
    ("Thu Aug 18 02:01:18 2050", A2050),  # asctime
    ("Thu Aug  8 02:01:18 2050", A2050 - timedelta(days=10)),  # freshness-expires-ansi-c
    ("Tue, 19 Jan 2038 14:14:08 GMT", datetime(2038, 1, 19, 14, 14, 8, tzinfo=UTC)),  # -32bit
    ("Sun, 21 Nov 2286 04:46:39 GMT", datetime(2286, 11, 21, 4, 46, 39, tzinfo=UTC)),  # -far-future
    (" Thu, 18 Aug 2050 02:01:18 GMT\t", A2050),  # surrounding white space is not the value's
    ("Thu, 18 Aug 2050 23:59:60 GMT", datetime(2050, 8, 18, 23, 59, 59, tzinfo=UTC)),  # leap s
    # invalid: every one of these is "already expired" as an Expires (RFC 9111 §5.3)
    ("Thu, 18 Aug 2050 02:01:18 UTC", None),  # freshness-expires-invalid-utc
    ("Thu, 18 Aug 2050 02:01:18 AEST", None),  # freshness-expires-invalid-aest
    ("Thu, 18 Aug 2050 02:01:18 +0000", None),
    ("Thu, 18 Aug 50 02:01:18 GMT", None),  # freshness-expires-invalid-2-digit-year
    ("Thu 18 Aug 2050 02:01:18 GMT", None),  # freshness-expires-invalid-no-comma
    ("Thu, 18  Aug  2050 02:01:18 GMT", None),  # freshness-expires-invalid-multiple-spaces
    ("Thu, 18-Aug-2050 02:01:18 GMT", None),  # freshness-expires-invalid-date-dashes
    ("Thu, 18 Aug 2050 02.01.18 GMT", None),  # freshness-expires-invalid-time-periods
    ("Thu, 18 Aug 2050 2:01:18 GMT", None),  # freshness-expires-invalid-1-digit-hour
    ("Thu, 8 Aug 2050 02:01:18 GMT", None),  # a one-digit day
    ("Thu, 31 Feb 2050 02:01:18 GMT", None),  # no such day
    ("Thu, 18 Aug 2050 24:01:18 GMT", None),
    ("Thu, 18 Aug 2050 02:01:18 GMT, Fri, 19 Aug 2050 02:01:18 GMT", None),  # two values
    ("Thu Aug 8 02:01:18 2050", None),  # asctime pads the day with a space
    ("0", None),  # freshness-expires-invalid
    ("", None),
    ("garbage", None),
]


@pytest.mark.parametrize(("value", "expected"), HTTP_DATES)
def test_parse_http_date(value, expected):
    assert parse_http_date(value, now=REC) == expected


@pytest.mark.parametrize(
    ("value", "now", "year"),
    [
        # RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is the century before
        ("Thursday, 18-Aug-50 02:01:18 GMT", datetime(2026, 1, 1, tzinfo=UTC), 2050),
        ("Thursday, 18-Aug-76 02:01:18 GMT", datetime(2026, 1, 1, tzinfo=UTC), 2076),
        ("Thursday, 18-Aug-77 02:01:18 GMT", datetime(2026, 1, 1, tzinfo=UTC), 1977),
        ("Thursday, 18-Aug-94 02:01:18 GMT", datetime(2026, 1, 1, tzinfo=UTC), 1994),
        ("Thursday, 18-Aug-94 02:01:18 GMT", datetime(2060, 1, 1, tzinfo=UTC), 2094),
        ("Thursday, 18-Aug-10 02:01:18 GMT", datetime(2099, 1, 1, tzinfo=UTC), 2010),  # past
    ],
)
def test_rfc850_two_digit_years(value, now, year):
    parsed = parse_http_date(value, now=now)
    assert parsed is not None and parsed.year == year


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(9999, 12, 31)))
def test_every_imf_fixdate_and_asctime_reads_back(when):
    when = when.replace(microsecond=0, tzinfo=UTC)
    assert parse_http_date(format_datetime(when, usegmt=True)) == when
    asctime = when.strftime("%a %b ") + f"{when.day:2d}" + when.strftime(" %H:%M:%S ")
    assert parse_http_date(asctime + f"{when.year:04d}") == when


@given(st.text(max_size=40))
def test_parse_http_date_never_raises_and_is_aware(text):
    parsed = parse_http_date(text)
    assert parsed is None or parsed.tzinfo is UTC
    lenient = http_date(text)
    assert lenient is None or lenient.tzinfo is not None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Thu Aug  8 02:01:18 2050", A2050 - timedelta(days=10)),  # asctime, which email.utils
        # reads without a zone (so it was refused before)
        ("Thu, 18 Aug 2050 02:01:18 GMT", A2050),
        ("Thu, 18 Aug 2050 02:01:18 +0000", A2050),  # lenient: a Date may be sloppy
        ("Thu, 18 Aug 2050 02:01:18 AEST", None),  # no zone known: no date
        ("garbage", None),
        (None, None),
    ],
)
def test_http_date_for_other_date_headers(value, expected):
    assert http_date(value) == expected


# --- Expires (RFC 9111 §5.3) ----------------------------------------------------------------

# Expires lines, Date -> lifetime (in seconds after REC); 0 = already expired
EXPIRES = [
    ([at(30 * 86400)], at(0), 30 * 86400),  # freshness-expires-future
    ([at(-30 * 86400)], at(0), 0),  # freshness-expires-past
    ([at(0)], at(0), 0),  # freshness-expires-present
    ([at(300)], at(400), 0),  # freshness-expires-old-date
    (["0"], at(0), 0),  # freshness-expires-invalid
    ([at(10)], "foo", 10),  # freshness-expires-invalid-date: the recording time stands in
    (["Thu, 18 Aug 2050 02:01:18 UTC"], at(0), 0),  # freshness-expires-invalid-utc
    (["Thu, 18 Aug 2050 02:01:18 AEST"], at(0), 0),  # freshness-expires-invalid-aest
    (["Thu, 18 Aug 2050 02.01.18 GMT"], at(0), 0),  # freshness-expires-invalid-time-periods
    (["Thu, 18 Aug 2050 2:01:18 GMT"], at(0), 0),  # freshness-expires-invalid-1-digit-hour
    # freshness-expires-invalid-multiple-lines; two valid lines are stale too (RFC 9111 §4.2)
    (["Thu, 18 Aug 2050 2:01:18 GMT", "Thu, 18 Aug 2050 2:01:19 GMT"], at(0), 0),
    ([at(3600), at(3600)], at(0), 0),
    (["Thu Aug  8 02:01:18 2050"], at(0), (A2050 - timedelta(days=10) - REC).total_seconds()),
    (["Thursday, 18-Aug-50 02:01:18 GMT"], at(0), (A2050 - REC).total_seconds()),
]


@pytest.mark.parametrize(("expires", "date", "lifetime"), EXPIRES)
def test_expires_lifetime(expires, date, lifetime):
    headers = [("Date", date), *(("Expires", e) for e in expires)]
    got = freshness(200, headers, REC)
    assert got.explicit and not got.must_ask
    assert got.lifetime == pytest.approx(lifetime)


def test_expires_time_tells_nothing_from_absent_or_repeated():
    assert expires_time([], REC) is None
    assert expires_time([("Expires", at(5)), ("expires", at(5))], REC) is None
    assert expires_time([("Expires", at(5))], REC) == REC + timedelta(seconds=5)


# --- Age (RFC 9111 §5.1) --------------------------------------------------------------------

AGES = [
    ("7200", 7200),
    ("7200, 0", 7200),  # age-parse-suffix: the first member counts
    ("0, 7200", 0),  # age-parse-prefix
    ("0, 0", 0),  # age-parse-dup-0
    ("7200;foo=bar", 7200),  # age-parse-parameter: the parameter is cut off
    ("7200;foo=111", 7200),  # age-parse-numeric-parameter
    (" 20 ", 20),
    ("abc", None),  # age-parse-nonnumeric: ignored
    ("-7200", None),  # age-parse-negative
    ("7200.0", None),  # age-parse-float
    ("2147483647", 2147483647),  # age-parse-large-minus-one
    ("2147483648", 2**31),  # age-parse-large
    ("2147483649", 2**31),  # age-parse-larger: saturates (RFC 9111 §1.2.2)
    ("", None),
    (None, None),
]


@pytest.mark.parametrize(("value", "expected"), AGES)
def test_parse_age(value, expected):
    assert parse_age(value) == expected


@given(st.integers(min_value=0, max_value=10**12), st.text(max_size=10))
def test_parse_age_reads_the_first_member(age, rest):
    assert parse_age(f"{age}, {rest}") == min(age, 2**31)


@given(st.text(max_size=20))
def test_parse_age_never_raises(text):
    got = parse_age(text)
    assert got is None or 0 <= got <= 2**31


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([], 0),
        ([("Age", "30")], 30),
        ([("Age", "7200"), ("Age", "0")], 7200),  # age-parse-suffix-twoline: the first line
        ([("Age", "0"), ("Age", "7200")], 0),  # age-parse-prefix-twoline
        ([("Date", at(-7200))], 7200),  # freshness-max-age-date: the apparent age (§4.2.3)
        ([("Date", at(-100)), ("Age", "30")], 100),  # the larger of the two
        ([("Date", at(-10)), ("Age", "25")], 25),  # freshness-expires-age-slow-date
        ([("Date", at(60))], 0),  # a fast Date: not negative
        ([("Date", "foo")], 0),
    ],
)
def test_initial_age(headers, expected):
    assert initial_age(headers, REC) == expected


# --- shared caches (RFC 9111 §5.2.2.7, §5.2.2.8, §5.2.2.10) ---------------------------------

# Cache-Control lines, shared -> lifetime, must_revalidate
SHARED = [
    (["s-maxage=3600"], True, 3600, True),  # freshness-s-maxage-shared; implies revalidate
    (["s-maxage=3600"], False, 0, False),  # a private cache ignores it
    (["max-age=3600, s-maxage=1"], True, 1, True),  # ...-s-maxage-shared-longer
    (["s-maxage=1, max-age=3600"], True, 1, True),  # ...-s-maxage-shared-longer-reversed
    (["max-age=3600", "s-maxage=1"], True, 1, True),  # ...-s-maxage-shared-longer-multiple
    (["max-age=1, s-maxage=3600"], True, 3600, True),  # ...-s-maxage-shared-shorter
    (["s-maxage=3600, max-age=1"], False, 1, False),  # freshness-max-age-s-maxage-private
    (["s-maxage=3600", "max-age=1"], False, 1, False),  # ...-s-maxage-private-multiple
    (["s-maxage=abc, max-age=60"], True, 0, True),  # invalid: stale
    (["max-age=60, proxy-revalidate"], True, 60, True),  # stale-close-proxy-revalidate
    (["max-age=60, proxy-revalidate"], False, 60, False),
    (["max-age=60, must-revalidate"], False, 60, True),  # stale-close-must-revalidate
    (["max-age=60, must-revalidate"], True, 60, True),
    (["max-age=60"], True, 60, False),
]


@pytest.mark.parametrize(("cc", "shared", "lifetime", "must_revalidate"), SHARED)
def test_shared_freshness(cc, shared, lifetime, must_revalidate):
    headers = [("Cache-Control", v) for v in cc]
    got = freshness(200, headers, REC, shared=shared)
    assert (got.lifetime, got.must_revalidate) == (lifetime, must_revalidate)


def test_s_maxage_beats_a_past_expires_and_max_age_0_shared():
    # freshness-max-age-s-maxage-shared-shorter-expires
    headers = [("Expires", at(-10)), ("Cache-Control", "max-age=0, s-maxage=3600")]
    assert freshness(200, headers, REC, shared=True).lifetime == 3600
    assert freshness(200, headers, REC).lifetime == 0


@pytest.mark.parametrize(
    ("cc", "expected"),
    [
        ([], True),
        (["max-age=60"], True),
        (["private, max-age=3600"], False),  # cc-resp-private-shared
        (["PRIVATE"], False),
        (['private="Set-Cookie"'], False),  # the qualified form as the plain one (§5.2.2.7)
        (["public", "private"], False),
        (["privately"], True),
    ],
)
def test_shared_reusable(cc, expected):
    assert shared_reusable([("Cache-Control", v) for v in cc]) is expected
