"""Tests for wwwproxy.archive.cdxj: record lines, sorting, merging, journal, compaction, lookups."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wwwproxy.archive import cdxj
from wwwproxy.archive.cdxj import (
    HEADER_LINE,
    CDXJError,
    CDXJRecord,
    CDXJVersionError,
    Index,
    IndexFile,
    append_journal,
    check,
    file_version,
    format_timestamp,
    iter_records,
    make_ref,
    merge_files,
    merge_sorted,
    normalize_timestamp,
    parse_header,
    parse_ref,
    read_journal,
    sort_lines,
    write_index,
)

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


# --------------------------------------------------------------------------------------------
# Record lines


def test_line_round_trip_with_every_defined_key() -> None:
    record = CDXJRecord.build(
        "(com,example,www,)/a/b?x=1",
        "2026-11-22T05:04:30.5Z",
        "revisit",
        uri="http://www.example.com/a/B?x=1",
        ref=make_ref("8XdxEfXQ8cgf+gTedREo+g.warc.gz", 1234),
        sha=SHA,
        dig="sha256:ABCD",
        hsc=200,
        mct="text/html; charset=utf-8",
        rid="<urn:uuid:1>",
        cle=10,
        ple=5,
        rle=99,
        rct="<urn:uuid:2>",
        rou="http://www.example.com/a/B?x=1",
        rod="2025-01-01T00:00:00Z",
        roi="<urn:uuid:0>",
        customkey={"nested": [1, "two"]},
    )
    line = record.to_line()
    assert line.endswith("\n") and line.count("\n") == 1
    assert line.startswith("(com,example,www,)/a/b?x=1 2026-11-22T05:04:30.500000Z revisit {")
    assert CDXJRecord.parse_line(line) == record
    assert CDXJRecord.parse_line(line.encode()) == record
    assert CDXJRecord.parse_line(line).to_line() == line
    assert record.warcfile == ("8XdxEfXQ8cgf+gTedREo+g.warc.gz", 1234)
    assert record.as_datetime() == datetime(2026, 11, 22, 5, 4, 30, 500000, tzinfo=UTC)


def test_line_is_the_same_whatever_the_field_order() -> None:
    a = CDXJRecord("k", TS, "response", {"zz": 1, "ref": "r", "aa": 2, "uri": "u", "hsc": 200})
    b = CDXJRecord("k", TS, "response", {"hsc": 200, "aa": 2, "uri": "u", "zz": 1, "ref": "r"})
    assert a == b and hash(a) == hash(b)
    assert a.to_line() == b.to_line()
    # defined keys first in the spec's order, then the extra keys sorted
    assert a.to_line().split(" ", 3)[3] == '{"uri":"u","hsc":200,"ref":"r","aa":2,"zz":1}\n'


def test_non_ascii_is_written_raw_and_survives_a_file(tmp_path: Path) -> None:
    # U+2028 is a line break for str.splitlines() but not for CDXJ: only 0x0A ends a line.
    record = rec(
        "(example,bücher,)/ä", uri="http://xn--bcher-kva.example/ä", note="a\u2028b\u0085c"
    )
    line = record.to_line()
    assert "bücher" in line and "\u2028" in line and "\\u" not in line
    journal = tmp_path / "j.cdxj"
    append_journal(journal, [record, rec("(com,a,)/")])
    assert read_journal(journal) == [record, rec("(com,a,)/")]
    assert list(iter_records(journal)) == [record, rec("(com,a,)/")]


def test_newlines_in_values_never_reach_the_line() -> None:
    record = rec("(com,a,)/", uri="http://a.com/\n\r\x00")
    line = record.to_line()
    assert line.count("\n") == 1 and "\r" not in line and "\x00" not in line
    assert CDXJRecord.parse_line(line).uri == "http://a.com/\n\r\x00"


@pytest.mark.parametrize(
    ("given_ts", "written"),
    [
        ("2026", "2026-01-01T00:00:00.000000Z"),
        ("2026-11", "2026-11-01T00:00:00.000000Z"),
        ("2026-11-22", "2026-11-22T00:00:00.000000Z"),
        ("2026-11-22T05:04Z", "2026-11-22T05:04:00.000000Z"),
        ("2026-11-22T05:04:30Z", "2026-11-22T05:04:30.000000Z"),
        ("2026-11-22T05:04:30.1Z", "2026-11-22T05:04:30.100000Z"),
        ("2026-11-22T05:04:30.123456Z", "2026-11-22T05:04:30.123456Z"),
        ("2026-11-22T05:04:30.123456789Z", "2026-11-22T05:04:30.123456Z"),
        ("2024-02-29T23:59:59.999999Z", "2024-02-29T23:59:59.999999Z"),
    ],
)
def test_timestamp_granularities_are_written_with_microseconds(given_ts: str, written: str) -> None:
    assert normalize_timestamp(given_ts) == written
    line = f"k {given_ts} response {GOOD_JSON}"
    assert CDXJRecord.parse_line(line).timestamp == written


@pytest.mark.parametrize(
    "bad",
    [
        "2026-02-30",
        "2025-02-29T00:00Z",
        "2026-13",
        "2026-11-22T05:04:30",
        "2026-11-22T05:04:30+01:00",
        "2026-11-22T24:00Z",
        "2026-11-22T05:60Z",
        "2026-11-22T05:04:30.Z",
        "2026-11-22T05:04:30.1234567890Z",
        "20261122050430",
        "2026-11-22T05Z",
        "\u0662\u0660\u0662\u0666",  # Arabic-Indic digits are not ASCII digits
        "",
    ],
)
def test_bad_timestamps_are_refused(bad: str) -> None:
    with pytest.raises(CDXJError, match="invalid timestamp"):
        normalize_timestamp(bad)


def test_format_timestamp() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert format_timestamp(datetime(2026, 1, 1, 2, 0, 0, 7, tzinfo=plus2)) == (
        "2026-01-01T00:00:00.000007Z"
    )
    assert format_timestamp(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000000Z"
    with pytest.raises(CDXJError, match="naive"):
        format_timestamp(datetime(2026, 1, 1))
    built = CDXJRecord.build("k", datetime(2026, 1, 1, tzinfo=UTC), "response", uri="u", ref="r")
    assert built.timestamp == "2026-01-01T00:00:00.000000Z"


def _with_json(block: str, rtype: str = "response") -> str:
    return f"(com,a,)/ {TS} {rtype} {block}"


BAD_LINES = [
    ("one", "expected 4 space-separated fields"),
    (f"k {TS} response", "expected 4 space-separated fields"),
    (f"k  {TS} response {GOOD_JSON}", "empty timestamp field"),
    (f" k {TS} response {GOOD_JSON}", "empty key field"),
    (f"k {TS}  response {GOOD_JSON}", "empty record type field"),
    (f"k {TS} response  {GOOD_JSON}", "fourth field must be a JSON object"),
    (f"k {TS} response [1]", "fourth field must be a JSON object"),
    (f"!k {TS} response {GOOD_JSON}", "header line ('!') where a record was expected"),
    (f"{{k {TS} response {GOOD_JSON}", "may not begin with '{'"),
    (f"a\tb {TS} response {GOOD_JSON}", "space or control character"),
    (f"k 2026-11-22T05:04:30 response {GOOD_JSON}", "invalid timestamp"),
    (f"k {TS} resp<onse {GOOD_JSON}", "not a WARC-Type token"),
    (f"k {{{TS} response {GOOD_JSON}", "invalid timestamp"),
    (_with_json('{"uri":"u","ref":"r"'), "invalid JSON block"),
    (_with_json('{"uri":"u","ref":"r"} extra'), "invalid JSON block"),
    (_with_json('{"ref":"r"}'), "required key 'uri'"),
    (_with_json('{"uri":"u"}'), "required key 'ref'"),
    (_with_json('{"uri":5,"ref":"r"}'), "'uri' must be a non-empty string"),
    (_with_json('{"uri":"u","ref":""}'), "'ref' must be a non-empty string"),
    (_with_json('{"uri":"u","ref":"warcfile:d/a.warc.gz#1"}'), "bare file name"),
    (_with_json('{"uri":"u","ref":"warcfile:a.warc.gz#-1"}'), "offset is not a non-negative"),
    (_with_json('{"uri":"u","ref":"warcfile:a.warc.gz#1x"}'), "offset is not a non-negative"),
    (_with_json('{"uri":"u","ref":"warcfile:a.warc.gz"}'), "without '#OFFSET'"),
    (_with_json('{"uri":"u","ref":"warcfile:#3"}'), "non-empty string"),
    (_with_json(f'{{"uri":"u","ref":"r","sha":"sha1:{SHA}"}}'), "Base32 SHA-1"),
    (_with_json('{"uri":"u","ref":"r","dig":"ABC"}'), "'algorithm:digest'"),
    (_with_json('{"uri":"u","ref":"r","mct":7}'), "'mct' must be a string"),
    (_with_json('{"uri":"u","ref":"r","hsc":20}'), "3-digit HTTP status"),
    (_with_json('{"uri":"u","ref":"r","hsc":true}'), "3-digit HTTP status"),
    (_with_json('{"uri":"u","ref":"r","rle":-1}'), "'rle' must be a non-negative integer"),
    (_with_json('{"uri":"u","ref":"r","cle":"5"}'), "'cle' must be a non-negative integer"),
    (_with_json('{"uri":"u","ref":"r","rou":"u"}'), "only valid for revisit records"),
    (_with_json('{"uri":"u","ref":"r","rod":"yesterday"}', "revisit"), "JSON key 'rod'"),
    (_with_json('{"uri":"u","ref":"r","ssu":"(com,b,)/"}'), "'ssu'"),
    (_with_json('{"uri":"u","ref":"r","srt":"request"}'), "'srt'"),
    (_with_json('{"uri":"u","ref":"r","sts":"2020"}'), "'sts'"),
    (_with_json('{"uri":"u","uri":"v","ref":"r"}'), "repeats the key 'uri'"),
    (_with_json('{"uri":"u","ref":"r","x":NaN}'), "NaN"),
    (_with_json('{"uri":"u","ref":"r","x":' + "[" * 100000 + "]" * 100000 + "}"), "JSON"),
    (f"k {TS} response {GOOD_JSON}\r", "carriage return"),
    (f"k {TS} response {GOOD_JSON}\nk", "newline inside"),
    ("", "empty line"),
    (b"k\xff " + f"{TS} response {GOOD_JSON}".encode(), "not valid UTF-8 (byte 1)"),
    (_with_json('{"uri":"u","ref":"r","x":"\\ud800"}'), "cannot be serialised"),
]


@pytest.mark.parametrize(("line", "fragment"), BAD_LINES)
def test_each_validation_error_names_source_and_line(line: str | bytes, fragment: str) -> None:
    with pytest.raises(CDXJError) as info:
        CDXJRecord.parse_line(line, source="bad.cdxj", lineno=7)
    message = str(info.value)
    assert message.startswith("bad.cdxj:7: "), message
    assert fragment in message, message
    assert info.value.source == "bad.cdxj" and info.value.lineno == 7


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("!k", TS, "response", {"uri": "u", "ref": "r"}), "may not begin with '!'"),
        (("k", TS, "response", ["uri"]), "must be an object"),
        (("k", TS, "response", {"uri": "u", "ref": "r", 5: 1}), "JSON key must be a string"),
        (("k", TS, "response", {"uri": "u", "ref": "r", "x": object()}), "cannot be serialised"),
        (("k", TS, "response", {"uri": "u", "ref": "r", "x": float("inf")}), "serialised"),
        ((5, TS, "response", {"uri": "u", "ref": "r"}), "key must be a string"),
        (("k", 2026, "response", {"uri": "u", "ref": "r"}), "timestamp must be a string"),
    ],
)
def test_constructor_validates_too(args: tuple, fragment: str) -> None:
    with pytest.raises(CDXJError) as info:
        CDXJRecord(*args)
    assert fragment in str(info.value)


def test_refs() -> None:
    assert make_ref("a.warc.gz", 25523382) == "warcfile:a.warc.gz#25523382"
    assert parse_ref("warcfile:a.warc.gz#25523382") == ("a.warc.gz", 25523382)
    assert parse_ref("warcfile:odd#name.warc.gz#7") == ("odd#name.warc.gz", 7)
    for name, offset in [("a/b", 0), ("..", 0), ("", 0), ("a", -1), ("a", True), ("a", 1.0)]:
        with pytest.raises(CDXJError):
            make_ref(name, offset)  # type: ignore[arg-type]
    with pytest.raises(CDXJError, match="not a warcfile"):
        parse_ref("http://example.com/x.warc.gz")
    # other ref schemes are allowed in records, but have no warcfile meaning
    assert rec("k").warcfile == ("f.warc.gz", 0)
    assert CDXJRecord("k", TS, "response", {"uri": "u", "ref": "s3://b/k"}).warcfile is None


# --------------------------------------------------------------------------------------------
# Files and headers


def test_parse_header() -> None:
    assert parse_header("!OpenWayback-CDXJ 1.0") == (1, 0)
    assert parse_header(b"!OpenWayback-CDXJ 1.12\n") == (1, 12)
    assert parse_header("!meta something") is None
    for bad in ["!OpenWayback-CDXJ", "!OpenWayback-CDXJ one", "!OpenWayback-CDXJ 1.0 x"]:
        with pytest.raises(CDXJError, match="malformed format header"):
            parse_header(bad)


def test_file_version(tmp_path: Path) -> None:
    h10, h11, h20 = "!OpenWayback-CDXJ 1.0\n", "!OpenWayback-CDXJ 1.1\n", "!OpenWayback-CDXJ 2.0\n"
    body = rec("k").to_line()
    assert file_version(write(tmp_path / "a", h10 + h11 + h10 + body)) == (1, 1)
    assert file_version(write(tmp_path / "b", body)) == (1, 0)
    path = write(tmp_path / "c", h10 + h20 + body)
    with pytest.raises(CDXJVersionError, match=f"^{path}:2: mixed major versions 1.0 and 2.0"):
        file_version(path)
    path = write(tmp_path / "d", h20 + body)
    with pytest.raises(CDXJVersionError, match=f"^{path}:1: unsupported major version 2.0"):
        file_version(path)


def test_file_errors_name_the_path_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "x.cdxj",
        HEADER_LINE + "\n" + rec("(a,)/").to_line() + "k bad\n" + rec("(b,)/").to_line() + "\n",
    )
    with pytest.raises(CDXJError, match=f"^{path}:3: expected 4"):
        list(iter_records(path))
    problems: list[str] = []
    good = list(iter_records(path, tolerant=True, problems=problems))
    assert good == [rec("(a,)/"), rec("(b,)/")]
    assert problems == [
        f"{path}:3: expected 4 space-separated fields (key, timestamp, type, JSON), found 2",
        f"{path}:5: empty line",
    ]
    assert check(path) == problems


def test_header_after_records_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "x.cdxj", rec("(a,)/").to_line() + HEADER_LINE + "\n")
    with pytest.raises(CDXJError, match=f"^{path}:2: header line .* after records"):
        list(iter_records(path))
    assert len(check(path)) == 1


def test_unknown_bang_lines_at_the_top_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path / "x.cdxj", "!meta hello\n" + HEADER_LINE + "\n" + rec("(a,)/").to_line())
    assert list(iter_records(path)) == [rec("(a,)/")]
    assert check(path, index=True) == []


def test_check_as_index(tmp_path: Path) -> None:
    unsorted = write(
        tmp_path / "u.cdxj",
        rec("(b,)/").to_line()
        + rec("(a,)/").to_line()
        + f"(c,)/ 2026-11-22T05:04:30Z response {GOOD_JSON}\n"
        + rec("(d,)/").to_line().rstrip("\n"),
    )
    assert check(unsorted) == [f"{unsorted}:4: last line has no newline (torn write?)"]
    assert check(unsorted, index=True) == [
        f"{unsorted}:2: out of order (sorts before the previous line)",
        f"{unsorted}:3: timestamp not in the index form YYYY-MM-DDTHH:MM:SS.ffffffZ",
        f"{unsorted}:4: last line has no newline (torn write?)",
    ]
    missing = tmp_path / "missing.cdxj"
    assert check(missing) == [f"{missing}: cannot read: No such file or directory"]


# --------------------------------------------------------------------------------------------
# Sorting and merging

SORT_KEYS = [
    "(com,example,)/b",
    "(com,example,)/a",
    "(com,example,)/A",
    "(com,example,)/ä",
    "(com,example,)/z",
    "(com,example,)/",
    "(com,example,)/a/b",
    "(com,example,www,)/",
    "(com,example,:8080)/",
    "(de,bücher,)/",
    "(de,bucher,)/",
    "(de,b\U0001f600,)/",
    "([::1])/",
    "(127.0.0.1:8080)/",
]


def test_sort_lines_is_byte_order() -> None:
    lines = [rec(k).to_line() for k in SORT_KEYS]
    ordered = sort_lines(lines)
    keys = [line.split(b" ", 1)[0].decode() for line in ordered]
    assert keys == sorted(SORT_KEYS, key=lambda k: k.encode())
    assert keys.index("(com,example,)/A") < keys.index("(com,example,)/a")
    assert keys.index("(com,example,)/z") < keys.index("(com,example,)/ä")
    assert keys.index("(de,bucher,)/") < keys.index("(de,bücher,)/") < keys.index("(de,b😀,)/")
    # a key sorts before every longer key it is a prefix of (space is below all key bytes)
    assert keys.index("(com,example,)/a") < keys.index("(com,example,)/a/b")
    assert sort_lines(lines + lines) == ordered
    assert len(sort_lines(lines + lines, unique=False)) == 2 * len(lines)


@pytest.mark.skipif(shutil.which("sort") is None, reason="no sort(1)")
def test_sort_lines_agrees_with_lc_all_c_sort(tmp_path: Path) -> None:
    rng = random.Random(5)
    records = [
        rec(
            rng.choice(SORT_KEYS) + rng.choice(["", "x", "X", "é", "-", "~"]),
            f"20{rng.randint(10, 30)}",
        )
        for _ in range(300)
    ]
    data = lines_of(records).encode()
    env = dict(os.environ, LC_ALL="C")
    gnu = subprocess.run(["sort", "-u"], input=data, capture_output=True, env=env, check=True)
    assert b"\n".join(sort_lines(data.split(b"\n")[:-1])) + b"\n" == gnu.stdout


def test_merge_sorted_streams() -> None:
    a = [b"a", b"c", b"e"]
    b = [b"b", b"c", b"d"]
    assert list(merge_sorted(a, b)) == [b"a", b"b", b"c", b"d", b"e"]
    assert list(merge_sorted(a, b, unique=False)) == [b"a", b"b", b"c", b"c", b"d", b"e"]
    # it streams: infinite sorted inputs still give their first lines
    evens = (b"%08d" % n for n in itertools.count(0, 2))
    threes = (b"%08d" % n for n in itertools.count(0, 3))
    first = list(itertools.islice(merge_sorted(evens, threes), 6))
    assert first == [b"%08d" % n for n in (0, 2, 3, 4, 6, 8)]


def test_merge_files_headers_minor_versions_and_duplicates(tmp_path: Path) -> None:
    r1, r2, r3 = rec("(b,)/"), rec("(a,)/", "2026"), rec("(c,)/")
    a = write(
        tmp_path / "a.cdxj",
        "!OpenWayback-CDXJ 1.0\n!OpenWayback-CDXJ 1.0\n" + lines_of([r3, r1, r2]),
    )
    b = write(
        tmp_path / "b.cdxj",
        "!OpenWayback-CDXJ 1.1\n!OpenWayback-CDXJ 1.0\n"
        + r1.to_line()
        + f"(a,)/ 2026-01-01T00:00:00Z response {r2.to_line().split(' ', 3)[3]}",
    )
    out = tmp_path / "out.cdxj"
    assert merge_files([a, b], out) == 3
    assert out.read_text() == "!OpenWayback-CDXJ 1.1\n" + lines_of([r2, r1, r3])
    assert check(out, index=True) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_merge_files_refuses_mixed_major_versions(tmp_path: Path) -> None:
    a = write(tmp_path / "a.cdxj", "!OpenWayback-CDXJ 1.0\n" + rec("(a,)/").to_line())
    b = write(tmp_path / "b.cdxj", "!OpenWayback-CDXJ 2.0\n" + rec("(b,)/").to_line())
    out = tmp_path / "out.cdxj"
    with pytest.raises(CDXJVersionError, match=f"{b}:1: unsupported major version 2.0"):
        merge_files([a, b], out)
    c = write(tmp_path / "c.cdxj", "!OpenWayback-CDXJ 1.0\n!OpenWayback-CDXJ 2.1\n")
    with pytest.raises(CDXJVersionError, match=f"^{c}:2: mixed major versions"):
        merge_files([a, c], out)
    assert not out.exists()


def test_merge_files_across_majors_is_refused_even_if_one_were_supported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # if a later release learns 2.x, files of different majors still may not be merged
    a = write(tmp_path / "a.cdxj", "!OpenWayback-CDXJ 1.0\n")
    b = write(tmp_path / "b.cdxj", "!OpenWayback-CDXJ 2.0\n")
    monkeypatch.setattr(cdxj, "SUPPORTED_MAJOR", 2)
    monkeypatch.setattr(cdxj, "file_version", lambda p: (1, 0) if p == a else (2, 0))
    with pytest.raises(CDXJVersionError, match=f"cannot merge {b} .* with {a} .*major"):
        merge_files([a, b], tmp_path / "out.cdxj")


def test_merge_files_external_runs_match_brute_force(tmp_path: Path) -> None:
    rng = random.Random(11)
    records = [random_record(rng) for _ in range(2000)]
    inputs = []
    for n in range(3):
        part = records[n::3] + rng.sample(records, 50)  # overlaps: duplicates across inputs
        rng.shuffle(part)
        inputs.append(write(tmp_path / f"in{n}.cdxj", lines_of(part)))
    out = tmp_path / "out.cdxj"
    count = merge_files(inputs, out, run_lines=97)
    expected = sorted({r.sort_key for r in records})
    assert count == len(expected)
    assert out.read_bytes() == HEADER_LINE.encode() + b"\n" + b"".join(x + b"\n" for x in expected)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_merge_files_strict_error_leaves_output_untouched(tmp_path: Path) -> None:
    out = write(tmp_path / "out.cdxj", HEADER_LINE + "\n" + rec("(old,)/").to_line())
    before = out.read_bytes()
    bad = write(tmp_path / "bad.cdxj", rec("(a,)/").to_line() + "garbage\n")
    with pytest.raises(CDXJError, match=f"^{bad}:2: "):
        merge_files([out, bad], out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.cdxj", "out.cdxj"]
    problems: list[str] = []
    assert merge_files([out, bad], out, tolerant=True, problems=problems) == 2
    assert problems == [f"{bad}:2: expected 4 space-separated fields "
                        "(key, timestamp, type, JSON), found 1"]  # fmt: skip
    assert list(iter_records(out)) == [rec("(a,)/"), rec("(old,)/")]


def test_write_index(tmp_path: Path) -> None:
    records = [rec(k) for k in SORT_KEYS]
    path = tmp_path / "i.cdxj"
    assert write_index(path, records + records[:3], run_lines=4) == len(records)
    assert check(path, index=True) == []
    assert sorted(iter_records(path), key=lambda r: r.sort_key) == list(iter_records(path))


# --------------------------------------------------------------------------------------------
# Journal


def test_journal_starts_with_one_header(tmp_path: Path) -> None:
    journal = tmp_path / "journal.cdxj"
    append_journal(journal, [rec("(b,)/")])
    append_journal(journal, [rec("(a,)/"), rec("(c,)/")])
    append_journal(journal, [])
    text = journal.read_text()
    assert text == HEADER_LINE + "\n" + lines_of([rec("(b,)/"), rec("(a,)/"), rec("(c,)/")])
    assert read_journal(tmp_path / "absent.cdxj") == []


def test_journal_torn_tail_is_ignored_reported_and_repaired(tmp_path: Path) -> None:
    journal = tmp_path / "journal.cdxj"
    records = [rec(f"(com,a,)/{n}") for n in range(3)]
    append_journal(journal, records)
    torn = rec("(com,torn,)/").to_bytes()[:40]
    with open(journal, "ab") as f:  # what kill -9 in the middle of a write leaves
        f.write(torn)
    problems: list[str] = []
    assert read_journal(journal, problems) == records
    assert problems == [
        f"{journal}:5: torn last line ignored (40 bytes without a newline; interrupted write)"
    ]
    assert check(journal) != []
    # the next append cuts the torn fragment so it cannot swallow the new line
    append_journal(journal, [rec("(com,b,)/")])
    problems = []
    assert read_journal(journal, problems) == [*records, rec("(com,b,)/")]
    assert problems == []
    assert check(journal) == []


def test_journal_made_only_of_a_torn_line(tmp_path: Path) -> None:
    journal = write(tmp_path / "journal.cdxj", b"!OpenWay")
    problems: list[str] = []
    assert read_journal(journal, problems) == [] and len(problems) == 1
    append_journal(journal, [rec("(a,)/")])
    assert journal.read_text() == HEADER_LINE + "\n" + rec("(a,)/").to_line()


def test_journal_malformed_lines_reported_and_skipped(tmp_path: Path) -> None:
    journal = write(
        tmp_path / "journal.cdxj",
        HEADER_LINE + "\n" + rec("(a,)/").to_line() + "nonsense\n" + rec("(b,)/").to_line()
        + _with_json('{"uri":"u"}') + "\n",
    )  # fmt: skip
    problems: list[str] = []
    assert read_journal(journal, problems) == [rec("(a,)/"), rec("(b,)/")]
    assert [p.split(": ", 1)[0] for p in problems] == [f"{journal}:3", f"{journal}:5"]
    assert check(journal) == problems


def test_journal_with_other_major_version_is_skipped_not_fatal(tmp_path: Path) -> None:
    journal = write(tmp_path / "j.cdxj", "!OpenWayback-CDXJ 2.0\n" + rec("(a,)/").to_line())
    problems: list[str] = []
    assert read_journal(journal, problems) == []
    assert problems == [
        f"{journal}:1: unsupported major version 2.0 (this reader knows 1.x) (rest of file skipped)"
    ]


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


def brute_prefix(records: list[CDXJRecord], prefix: str) -> list[CDXJRecord]:
    """The answer by definition: unique lines in byte order, filtered by a scan."""
    unique = {r.sort_key: r for r in records}
    return [unique[k] for k in sorted(unique) if unique[k].key.startswith(prefix)]


_EXACT_CACHE: dict[int, dict[str, list[CDXJRecord]]] = {}


def brute_exact(records: list[CDXJRecord], key: str) -> list[CDXJRecord]:
    if id(records) not in _EXACT_CACHE:
        groups: dict[str, list[CDXJRecord]] = {}
        for r in brute_prefix(records, ""):
            groups.setdefault(r.key, []).append(r)
        _EXACT_CACHE[id(records)] = groups
    return _EXACT_CACHE[id(records)].get(key, [])


def brute_closest(records: list[CDXJRecord], key: str, when: datetime) -> CDXJRecord | None:
    found = brute_exact(records, key)
    if not found:
        return None
    return min(found, key=lambda r: (abs(r.as_datetime() - when), r.as_datetime()))


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, list[CDXJRecord]]:
    rng = random.Random(1234)
    records = [random_record(rng) for _ in range(3000)]
    in_index, in_journal = records[:2100], records[2100:]
    in_journal += rng.sample(in_index, 100)  # the same lines in both (a compaction crash)
    directory = tmp_path_factory.mktemp("populated")
    write_index(directory / "index.cdxj", in_index)
    index = Index(directory)
    for n in range(0, len(in_journal), 150):
        index.add(in_journal[n : n + 150])
    return index, records


def all_keys(records: list[CDXJRecord]) -> list[str]:
    present = sorted({r.key for r in records}, key=str.encode)
    absent = ["(", "(aaa,)/", "(zzz,)/", "(com,a,)/a/c", "(com,a,)/a/b/c/d", "(com,a", "~"]
    return present + absent


def test_exact_newest_and_captures_against_brute_force(
    populated: tuple[Index, list[CDXJRecord]],
) -> None:
    index, records = populated
    keys = all_keys(records)
    sorted_keys = sorted({r.key for r in records}, key=str.encode)
    assert index.exact(sorted_keys[0]) and index.exact(sorted_keys[-1])  # ends of the file
    for key in keys:
        expected = brute_exact(records, key)
        assert index.exact(key) == expected, key
        assert list(index.captures(key)) == expected
        assert index.newest(key) == (expected[-1] if expected else None)
        times = [r.timestamp for r in expected]
        assert times == sorted(times)
    responses = [r for r in brute_exact(records, "(com,a,)/a") if r.record_type == "response"]
    assert index.exact("(com,a,)/a", record_types={"response"}) == responses
    assert index.newest("(com,a,)/a", record_types=("response",)) == responses[-1]


def test_closest_against_brute_force(populated: tuple[Index, list[CDXJRecord]]) -> None:
    index, records = populated
    rng = random.Random(99)
    for key in all_keys(records):
        for _ in range(3):
            when = datetime(2023, 6, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(4 * 10**8))
            assert index.closest(key, when) == brute_closest(records, key, when), key
            assert index.closest(key, format_timestamp(when)) == brute_closest(records, key, when)
    some = brute_exact(records, "(com,a,)/")[5]
    assert index.closest("(com,a,)/", some.timestamp) == some
    assert index.closest("(com,a,)/", some.timestamp[:4]) == brute_closest(
        records, "(com,a,)/", datetime(int(some.timestamp[:4]), 1, 1, tzinfo=UTC)
    )


def test_closest_tie_goes_to_the_earlier_capture(tmp_path: Path) -> None:
    index = Index(tmp_path)
    early, late = rec("(a,)/", "2026-01-01T00:00:00Z"), rec("(a,)/", "2026-01-03T00:00:00Z")
    index.add([late, early])
    assert index.closest("(a,)/", "2026-01-02") == early
    assert index.closest("(a,)/", "2026-01-02T00:00:00.000001Z") == late
    plus1 = timezone(timedelta(hours=1))
    assert index.closest("(a,)/", datetime(2026, 1, 2, 1, 0, 1, tzinfo=plus1)) == late
    with pytest.raises(CDXJError, match="naive"):
        index.closest("(a,)/", datetime(2026, 1, 2))
    with pytest.raises(CDXJError, match="invalid timestamp"):
        index.closest("(a,)/", "yesterday")


def test_prefix_against_brute_force(populated: tuple[Index, list[CDXJRecord]]) -> None:
    index, records = populated
    prefixes = ["", "(", "(com,a,", "(com,a,)/", "(com,a,)/a", "(com,a,)/a/", "(com,a,b,)/"]
    prefixes += ["(de,b", "(de,bücher,)/", "(127.0.0.1", "([", "(zzz", "(com,a,)/a?x=1"]
    prefixes += [h + "/" for h in HOSTS]
    for prefix in prefixes:
        assert list(index.prefix(prefix)) == brute_prefix(records, prefix), prefix
    assert len(list(index.prefix(""))) == len({r.sort_key for r in records})
    # a domain prefix covers its subdomains and ports, a host prefix does not
    domain_keys = {r.key.split(")")[0] + ")" for r in index.prefix("(com,a,")}
    assert domain_keys == {"(com,a,)", "(com,a,b,)", "(com,a,:8080)"}
    assert {r.key.split(")")[0] for r in index.prefix("(com,a,)/")} == {"(com,a,"}


def test_lookups_after_compaction_are_the_same(
    populated: tuple[Index, list[CDXJRecord]], tmp_path: Path
) -> None:
    index, records = populated
    copy = tmp_path / "copy"
    shutil.copytree(index.directory, copy)
    compacted = Index(copy)
    assert compacted.compact() == len({r.sort_key for r in records})
    assert compacted.journal_bytes() == 0 and not compacted.journal_path.exists()
    assert compacted.check() == []
    assert list(compacted.prefix("")) == list(index.prefix(""))
    for key in all_keys(records)[::7]:
        assert compacted.exact(key) == index.exact(key)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    keys=st.lists(st.text(alphabet="(),/ab:ä😀", min_size=1, max_size=12), max_size=40),
    probes=st.lists(st.text(alphabet="(),/ab:ä😀", max_size=6), max_size=10),
    pad=st.integers(0, 300),
)
def test_binary_search_matches_a_scan(
    tmp_path_factory: pytest.TempPathFactory, keys: list[str], probes: list[str], pad: int
) -> None:
    keys = [k for k in keys if k[0] not in "!{"]
    records = [rec(k, padding="x" * ((i * pad) % 301)) for i, k in enumerate(keys)]
    path = tmp_path_factory.mktemp("bs") / "index.cdxj"
    write_index(path, records)
    file = IndexFile(path)
    lines = sorted({r.sort_key for r in records})
    for probe in probes + keys + [k + " " for k in keys]:
        target = probe.encode()
        assert [line for _, line in file.lines(target)] == [
            x for x in lines if x.startswith(target)
        ]


# --------------------------------------------------------------------------------------------
# The Index: empty, journal and compaction


def test_lookups_on_missing_empty_and_header_only_index(tmp_path: Path) -> None:
    for content in [None, b"", (HEADER_LINE + "\n").encode(), HEADER_LINE.encode()]:
        directory = tmp_path / f"d{len(content) if content is not None else 'none'}"
        index = Index(directory)
        if content is not None:
            write(index.index_path, content)
        assert index.exact("(com,a,)/") == []
        assert index.newest("(com,a,)/") is None
        assert index.closest("(com,a,)/", TS) is None
        assert list(index.prefix("")) == []
        assert index.compact() is None  # nothing to merge
        index.add([rec("(com,a,)/")])
        assert index.exact("(com,a,)/") == [rec("(com,a,)/")]
        assert index.compact() == 1
        assert index.exact("(com,a,)/") == [rec("(com,a,)/")]
    never_created = Index(tmp_path / "nothing", create=False)
    assert never_created.exact("(a,)/") == [] and list(never_created.prefix("")) == []


def test_lines_longer_than_the_read_buffer(tmp_path: Path) -> None:
    rng = random.Random(3)
    records = [
        rec(f"(com,long,)/{n:02d}", padding="x" * rng.randrange(9000, 30000)) for n in range(30)
    ]
    records += [rec(f"(com,long,)/{n:02d}/short") for n in range(30)]
    index = Index(tmp_path)
    write_index(index.index_path, records)
    for r in records:
        assert index.exact(r.key) == [r]
    assert list(index.prefix("(com,long,)/1")) == brute_prefix(records, "(com,long,)/1")


def test_index_without_header_or_final_newline(tmp_path: Path) -> None:
    index = Index(tmp_path)
    records = [rec(k) for k in sorted(["(a,)/", "(b,)/", "(c,)/"])]
    write(index.index_path, lines_of(records).rstrip("\n"))
    for r in records:
        assert index.exact(r.key) == [r]
    assert list(index.prefix("")) == records


def test_lookup_arguments_are_checked(tmp_path: Path) -> None:
    index = Index(tmp_path)
    for bad in ["", "a b", "!x", "{x"]:
        with pytest.raises(CDXJError):
            index.exact(bad)
    with pytest.raises(CDXJError, match="spaces"):
        list(index.prefix("(com, a"))


def test_journal_is_cached_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/")])
    reads = []
    real_scan = cdxj._scan

    def counting_scan(*args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(args[1])
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(cdxj, "_scan", counting_scan)
    for _ in range(5):
        assert index.exact("(a,)/") == [rec("(a,)/")]
    assert reads == [str(index.journal_path)]
    index.add([rec("(a,)/", "2027")])
    assert index.exact("(a,)/") == [rec("(a,)/"), rec("(a,)/", "2027")]
    assert index.newest("(a,)/") == rec("(a,)/", "2027")
    assert len(reads) == 2


def test_bad_journal_and_index_lines_are_reported_not_fatal(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write(
        index.index_path,
        HEADER_LINE + "\n" + rec("(a,)/").to_line() + f"(a,)/ {TS} response {{broken\n",
    )
    write(index.journal_path, HEADER_LINE + "\n" + "junk\n" + rec("(a,)/", "2027").to_line())
    assert index.exact("(a,)/") == [rec("(a,)/"), rec("(a,)/", "2027")]
    problems = index.problems
    assert any(p.startswith(f"{index.index_path} (byte ") for p in problems), problems
    assert f"{index.journal_path}:2: expected 4 space-separated fields" in "\n".join(problems)
    assert len(index.check()) == 2


def test_unsupported_index_version_is_a_clear_error(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write(index.index_path, "!OpenWayback-CDXJ 2.0\n" + rec("(a,)/").to_line())
    with pytest.raises(CDXJVersionError, match=f"{index.index_path}:1: unsupported"):
        index.exact("(a,)/")


def test_compact_keeps_old_index_readable_until_replaced(tmp_path: Path) -> None:
    index = Index(tmp_path)
    old = [rec(f"(com,a,)/{n:03d}") for n in range(50)]
    index.add(old)
    index.compact()
    old_bytes = index.index_path.read_bytes()
    new = [rec(f"(com,b,)/{n:03d}") for n in range(50)]
    index.add(new)
    seen = []

    def observe(record: CDXJRecord) -> bool:
        if not seen:  # in the middle of the merge, before the rename
            other = Index(tmp_path)
            seen.append((index.index_path.read_bytes(), len(list(other.prefix("(com,")))))
        return True

    assert index.compact(keep=observe) == 100
    assert seen == [(old_bytes, 100)]  # old index intact, and the sealed journal still visible
    assert index.index_path.read_bytes() != old_bytes
    assert list(index.prefix("(com,")) == old + new
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".compact")] == [
        "index.cdxj"
    ]


def test_compact_failure_before_rename_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/")])
    index.compact()
    before = index.index_path.read_bytes()
    index.add([rec("(b,)/")])

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cdxj.os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        index.compact()
    monkeypatch.undo()
    assert index.index_path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert list(index.prefix("")) == [rec("(a,)/"), rec("(b,)/")]  # from the sealed journal
    index.add([rec("(c,)/")])
    assert list(index.prefix("")) == [rec("(a,)/"), rec("(b,)/"), rec("(c,)/")]
    assert index.compact() == 3
    assert list(iter_records(index.index_path)) == [rec("(a,)/"), rec("(b,)/"), rec("(c,)/")]


def test_crash_between_rename_and_journal_removal_duplicates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = Index(tmp_path)
    records = [rec(f"(a,)/{n}") for n in range(10)]
    index.add(records)

    def crash(self: Index, sealed: list[Path]) -> None:
        raise KeyboardInterrupt  # the process dies after the rename, before the deletions

    monkeypatch.setattr(Index, "_drop", crash)
    with pytest.raises(KeyboardInterrupt):
        index.compact()
    monkeypatch.undo()
    assert list(iter_records(index.index_path)) == records
    assert index.journal_bytes() > 0  # the sealed journal survived
    files = index.files()
    assert files[0] == index.index_path and len(files) == 2 and files[1].suffix == ".sealed"
    fresh = Index(tmp_path)  # as after a restart
    assert list(fresh.prefix("")) == records
    fresh.add([rec("(b,)/")])
    assert fresh.files() == [fresh.index_path, fresh.journal_path, files[1]]
    assert fresh.exact("(a,)/3") == [records[3]]
    assert fresh.compact() == 11
    assert list(iter_records(index.index_path)) == [*records, rec("(b,)/")]
    assert fresh.journal_bytes() == 0
    assert fresh.files() == [fresh.index_path]


def test_compact_removes_leftovers_of_a_killed_compaction(tmp_path: Path) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/")])
    write(tmp_path / ".index.cdxj.abc123.tmp", "half a file")
    (tmp_path / ".cdxj-sort-xyz").mkdir()
    write(tmp_path / ".cdxj-sort-xyz" / "run-1.cdxj", "x\n")
    assert index.compact() == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".compact.lock", "index.cdxj"]


def test_compact_keep_filter_purges(tmp_path: Path) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/"), rec("(b,)/"), rec("(b,)/x")])
    index.compact()
    assert index.compact(keep=lambda r: not r.key.startswith("(b,)/")) == 1
    assert list(index.prefix("")) == [rec("(a,)/")]


def test_compact_resorts_an_unsorted_index(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write(
        index.index_path,
        "!OpenWayback-CDXJ 1.1\n" + lines_of([rec("(c,)/"), rec("(a,)/")])
        + f"(b,)/ 2026 response {GOOD_JSON}\n",
    )  # fmt: skip
    index.add([rec("(d,)/")])
    assert index.compact() == 4
    assert check(index.index_path, index=True) == []
    assert index.index_path.read_text().startswith("!OpenWayback-CDXJ 1.1\n(a,)/ ")


def test_compact_refuses_a_corrupt_index_and_keeps_everything(tmp_path: Path) -> None:
    index = Index(tmp_path)
    content = HEADER_LINE + "\n" + lines_of([rec("(c,)/"), rec("(a,)/")]) + "garbage\n"
    write(index.index_path, content)
    index.add([rec("(d,)/")])
    with pytest.raises(CDXJError, match=f"^{index.index_path}:4: expected 4"):
        index.compact()
    assert index.index_path.read_text() == content
    assert index.exact("(d,)/") == [rec("(d,)/")]


def test_compact_reports_a_header_line_inside_the_index(tmp_path: Path) -> None:
    index = Index(tmp_path)
    content = HEADER_LINE + "\n" + rec("(a,)/").to_line() + HEADER_LINE + "\n"
    content += rec("(b,)/").to_line()
    write(index.index_path, content)
    index.add([rec("(c,)/")])
    with pytest.raises(CDXJError, match=f"^{index.index_path}:3: header line .* after records"):
        index.compact()
    assert index.index_path.read_text() == content


def test_rebuild(tmp_path: Path) -> None:
    index = Index(tmp_path)
    index.add([rec("(gone,)/")])
    assert index.rebuild(rec(k) for k in ["(b,)/", "(a,)/"]) == 2
    assert list(index.prefix("")) == [rec("(a,)/"), rec("(b,)/")]
    assert index.journal_bytes() == 0


WRITER = """
import sys
from wwwproxy.archive.cdxj import CDXJRecord, Index
index = Index(sys.argv[1])
for n in range(int(sys.argv[3])):
    index.add([CDXJRecord(f"({sys.argv[2]},)/{n}", "2026", "response", {"uri": "u", "ref": "r"})])
"""


def test_concurrent_writers_and_compaction_lose_nothing(tmp_path: Path) -> None:
    count = 200
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name, str(count)])
        for name in ("w1", "w2")
    ]
    compactions = 0
    while any(w.poll() is None for w in writers):
        compactions += Index(tmp_path).compact() is not None
    assert [w.returncode for w in writers] == [0, 0]
    assert compactions >= 1
    index = Index(tmp_path)
    for name in ("w1", "w2"):
        assert len(list(index.prefix(f"({name},)/"))) == count
    index.compact()
    assert len(list(iter_records(index.index_path))) == 2 * count
    assert index.check() == []
