"""Helpers shared by the CDXJ tests; the test modules import them from here."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wwwproxy.archive.cdxj import CDXJRecord, format_timestamp, make_ref

SHA = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
TS = "2026-11-22T05:04:30.123456Z"
GOOD_JSON = '{"uri":"http://example.com/","ref":"warcfile:a.warc.gz#0"}'


def rec(
    key: str, ts: str = TS, rtype: str = "response", *, offset: int = 0, **extra: object
) -> CDXJRecord:
    uri = extra.pop("uri", "http://example.com/")
    return CDXJRecord.build(key, ts, rtype, uri=uri, ref=make_ref("f.warc.gz", offset), **extra)


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def lines_of(records: list[CDXJRecord]) -> str:
    return "".join(r.to_line() for r in records)


def _with_json(block: str, rtype: str = "response") -> str:
    return f"(com,a,)/ {TS} {rtype} {block}"


# --------------------------------------------------------------------------------------------
# Generated data and brute force

HOSTS = [
    "(com,a,)",
    "(com,a,b,)",
    "(com,a,:8080)",
    "(com,ab,)",
    "(com,a-b,)",
    "(de,bücher,)",
    "(de,bucher,)",
    "(127.0.0.1:8080)",
    "(127.0.0.10)",
    "([::1])",
    "(,com,a,)",
]
PATHS = ["/", "/a", "/a/", "/a/b", "/a/b/c", "/ab", "/A", "/a?x=1", "/a?x=10", "/ä", "/a%20b"]


def random_record(rng: random.Random) -> CDXJRecord:
    key = rng.choice(HOSTS) + rng.choice(PATHS)
    seconds = rng.randrange(0, 3 * 365 * 86400)
    when = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds, microseconds=rng.random())
    rtype = rng.choice(["response", "response", "response", "revisit", "request"])
    return CDXJRecord.build(
        key,
        format_timestamp(when),
        rtype,
        uri="http://" + key,
        ref=make_ref(f"h{rng.randrange(50)}.warc.gz", rng.randrange(10**6)),
        sha=SHA if rtype != "request" else None,
        hsc=200 if rtype == "response" else None,
    )
