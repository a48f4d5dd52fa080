"""Tests for wwwproxy.archive.warc.record: WARC-Date formatting and parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from wwwproxy.archive import warc as W

from .conftest import T0

# ---------------------------------------------------------------------------------------------
# dates


def test_warc_date_always_has_six_fraction_digits_in_utc():
    assert W.format_warc_date(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.000000Z"
    )
    plus2 = timezone(timedelta(hours=2))
    assert W.format_warc_date(datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=plus2)) == (
        "2026-01-02T01:04:05.000007Z"
    )


def test_naive_datetime_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        W.format_warc_date(datetime(2026, 1, 2))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T05:04:30.123456Z", T0),
        ("2026-11-22T05:04:30.123456789Z", T0),
        ("2026-11-22T05:04:30.1Z", datetime(2026, 11, 22, 5, 4, 30, 100000, tzinfo=UTC)),
        ("2026-11-22T05:04Z", datetime(2026, 11, 22, 5, 4, tzinfo=UTC)),
        ("2026", datetime(2026, 1, 1, tzinfo=UTC)),
    ],
)
def test_parse_warc_date(text, expected):
    assert W.parse_warc_date(text) == expected


@pytest.mark.parametrize("text", ["2026-11-22 05:04:30Z", "2026-13-01T00:00:00Z", "yesterday"])
def test_parse_warc_date_rejects(text):
    with pytest.raises(ValueError, match="WARC-Date"):
        W.parse_warc_date(text)
