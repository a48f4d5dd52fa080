"""Tests for wwwproxy.archive.warc.record: WARC-Date formatting and parsing, digests."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime, timedelta, timezone

import pytest

from wwwproxy.archive import warc as W
from wwwproxy.archive.warc import record

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


# ---------------------------------------------------------------------------------------------
# digests

_RAW = hashlib.sha1(b"payload").digest()
_B32 = base64.b32encode(_RAW).decode()


@pytest.mark.parametrize(
    ("digest", "expected"),
    [
        (f"sha1:{_B32}", _B32),  # as this cache writes it: taken as it is
        (f"sha1:{_B32.lower()}", _B32),
        (f"SHA-1:{_B32}", _B32),
        (f"sha1:{_RAW.hex()}", _B32),
        (f"sha1:{base64.b64encode(_RAW).decode()}", _B32),
        (f"sha1: {_B32} ", _B32),
        (f"sha1:{_B32[:-1]}", None),  # too short for a SHA-1
        (f"sha1:{_B32[:-1]}1", None),  # not Base32
        (f"md5:{base64.b32encode(hashlib.md5(b'x').digest()).decode()}", None),
        (f"sha256:{_B32}", None),
        ("nonsense", None),
        ("", None),
        (None, None),
    ],
)
def test_sha1_base32_is_the_cdxj_sha_field(digest, expected):
    assert W.sha1_base32(digest) == expected


def test_digests_decode_as_base64_would_decode_them() -> None:
    """The quick path for ``sha1:`` + 32 base32 digits gives what ``base64.b32decode`` gives,
    and every other form still decodes (or is refused) as before."""
    import random

    from wwwproxy.archive.warc.record import _decode_digest

    rng = random.Random(5)
    for _ in range(2000):
        raw = rng.randbytes(20)
        text = base64.b32encode(raw).decode()
        assert _decode_digest("sha1:" + text) == ("sha1", raw)
        assert _decode_digest("SHA-1: " + text.lower()) == ("sha1", raw)  # casefold, spaces
        assert _decode_digest("sha1:" + raw.hex()) == ("sha1", raw)
        assert _decode_digest("sha1:" + base64.b64encode(raw).decode()) == ("sha1", raw)
    sha256 = hashlib.sha256(b"x").digest()
    assert _decode_digest("sha256:" + base64.b32encode(sha256).decode()) == ("sha256", sha256)
    for bad in ("sha1:" + "0" * 32, "sha1:" + "A" * 31, "sha1:" + "A" * 33, "sha1:", "md9:AAAA"):
        assert _decode_digest(bad) is None, bad


@pytest.mark.parametrize("size", [0, 1, 4, 5, 10, 16, 20, 21, 32, 64])
def test_b32encode_is_rfc_4648_base32(size: int) -> None:
    for seed in range(50):
        raw = hashlib.sha256(b"%d %d" % (size, seed)).digest() * 3
        raw = raw[:size]
        assert record.b32encode(raw) == base64.b32encode(raw).decode("ascii")
