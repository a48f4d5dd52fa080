"""Tests for wwwproxy.archive.cdxj.line: record lines, timestamps, refs, validation, headers."""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import json
import pickle
import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.archive.cdxj import (
    CDXJError,
    CDXJRecord,
    append_journal,
    format_timestamp,
    iter_records,
    make_ref,
    normalize_timestamp,
    parse_header,
    parse_ref,
    read_journal,
)
from wwwproxy.archive.cdxj.line import (
    _KEY_ORDER,
    _check_key,
    _checked_line,
    _parse_bytes,
    _parse_canonical,
)

from .conftest import GOOD_JSON, SHA, TS, _with_json, rec

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


def test_parse_header() -> None:
    assert parse_header("!OpenWayback-CDXJ 1.0") == (1, 0)
    assert parse_header(b"!OpenWayback-CDXJ 1.12\n") == (1, 12)
    assert parse_header("!meta something") is None
    for bad in ["!OpenWayback-CDXJ", "!OpenWayback-CDXJ one", "!OpenWayback-CDXJ 1.0 x"]:
        with pytest.raises(CDXJError, match="malformed format header"):
            parse_header(bad)


# --------------------------------------------------------------------------------------------
# The fast path for canonical lines agrees with the full parser

_CHAR_LIST = list('a/#.:"\\ \x00\x1f\x7f\n\r\tä😀\u2028\u00a0-+_=0Z')
_CHARS = st.sampled_from(_CHAR_LIST)
_PLAIN = st.text(  # strings JSON writes as they are: the fast path's own ground
    st.characters(codec="utf-8", exclude_characters='"\\', exclude_categories=("Cc", "Cs")),
    min_size=1,
    max_size=8,
)
_TEXT = st.one_of(_PLAIN, _PLAIN, st.text(_CHARS, max_size=8))
_FIELD_VALUES = {
    "sha": st.one_of(st.just(SHA), st.just(SHA), _TEXT),
    "dig": st.one_of(st.just("sha256:AB+/="), st.just("x:a b"), _TEXT),
    "hsc": st.one_of(st.integers(0, 1200), st.sampled_from(["200", "2000", "abc"]), st.booleans()),
    "mct": st.one_of(st.just(""), _TEXT),
    "rid": _TEXT,
    "cle": st.one_of(st.integers(-2, 10**20), _TEXT),
    "ple": st.integers(0, 10),
    "rle": st.one_of(st.integers(0, 10**6), st.integers(0, 10**6), st.floats(allow_nan=False)),
    "rct": _TEXT,
    "rou": _TEXT,
    "rod": st.sampled_from(["2025", "2025-02-30T00:00:00Z", "x", TS]),
    "roi": _TEXT,
    "sts": st.just(TS),
    "extra": st.one_of(_TEXT, st.lists(st.integers(), max_size=2)),
}
_REFS = st.one_of(
    st.builds(lambda n, o: f"warcfile:{n}#{o}", _TEXT, st.integers(0, 10**6)),
    st.sampled_from(["warcfile:.#1", "warcfile:..#1", "warcfile:.a#1", "warcfile:a#b", "urn:x"]),
    _TEXT,
)


def _outcome(parse: Callable[[], CDXJRecord]) -> object:
    """Everything a parse yields, with value types (``1 == True`` would hide a difference)."""
    try:
        r = parse()
    except CDXJError as e:
        return ("error", str(e))
    fields = [(k, type(v), v) for k, v in r.fields.items()]
    return (r.key, r.timestamp, r.record_type, fields, r.sort_key, r.to_line(), hash(r))


@settings(max_examples=600, deadline=None)
@given(
    key=st.one_of(st.just("(com,a,)/x"), _PLAIN, st.text(_CHARS, min_size=0, max_size=6)),
    ts=st.sampled_from([TS, TS, TS, "2024-02-29T23:59:59.000000Z", "2023-02-29T00:00:00.000000Z",
                        "2024-01-01T24:00:00.000000Z", "2024-01-01T00:00:60.000000Z", "2024",
                        "0000-01-01T00:00:00.000000Z", "2024-01-01T00:00:00.0000000Z"]),
    rtype=st.sampled_from(["response", "revisit", "revisit", "request", "re vis", ""]),
    uri=st.one_of(st.just("http://example.com/"), _TEXT),
    ref=_REFS,
    optional=st.dictionaries(st.sampled_from(sorted(_FIELD_VALUES)), st.none(), max_size=5),
    data=st.data(),
    order=st.randoms(use_true_random=False),
    edit=st.tuples(st.integers(0, 400), st.integers(0, 3), st.text(_CHARS, max_size=3)),
)  # fmt: skip
def test_fast_path_agrees_with_the_full_parser(
    key: str, ts: str, rtype: str, uri: str, ref: str, optional: dict, data: st.DataObject,
    order: random.Random, edit: tuple[int, int, str],
) -> None:  # fmt: skip
    fields: dict[str, object] = {"uri": uri, "ref": ref}
    for name in optional:
        fields[name] = data.draw(_FIELD_VALUES[name], label=name)
    canonical = {name: n for n, name in enumerate(_KEY_ORDER)}
    items = sorted(fields.items(), key=lambda item: canonical.get(item[0], len(canonical)))
    if order.random() < 0.2:
        order.shuffle(items)
    block = json.dumps(dict(items), ensure_ascii=order.random() < 0.1, separators=(",", ":"))
    line = f"{key} {ts} {rtype} {block}"
    at, kind, text = edit
    if kind == 1:  # damage the line
        line = line[:at] + text + line[at + 1 :]
    for candidate in (line, line + "\n"):
        full = _outcome(lambda c=candidate: CDXJRecord._parse_text(c.removesuffix("\n")))
        assert _outcome(lambda c=candidate: CDXJRecord._parse(c)) == full
        assert _outcome(lambda c=candidate: CDXJRecord._parse(c.encode())) == full
        assert _outcome(lambda c=candidate: _parse_bytes(c.encode())) == full  # lookups' path
    if full[0] != "error":  # a checked file's line (what a record writes) is taken as it is
        raw = full[4]
        assert _outcome(lambda: _checked_line(raw)) == _outcome(lambda: CDXJRecord._parse(raw))


def test_lines_this_module_writes_take_the_fast_path() -> None:
    store_like = CDXJRecord.build(
        "(com,example,)/a?b=1", TS, "response", uri="http://example.com/a?b=1",
        ref=make_ref("x.warc.gz", 12), sha=SHA, hsc=200, mct="text/html",
        rid="<urn:uuid:1>", rle=123,
    )  # fmt: skip
    revisit = CDXJRecord.build(
        "(com,example,)/", TS, "revisit", uri="http://example.com/", ref=make_ref("y", 0),
        sha=SHA, hsc="304", rou="http://example.com/", rod="2025-01-01T00:00:00Z", roi="<x>",
    )  # fmt: skip
    for record in (store_like, revisit, rec("(a,)/")):
        fast = _parse_canonical(record.sort_key.decode(), record.sort_key)
        assert fast == record and fast is not None and fast.sort_key == record.sort_key
    with_escape = rec("(a,)/", uri='http://a/"q"')
    assert _parse_canonical(with_escape.sort_key.decode(), None) is None  # the full way
    assert CDXJRecord.parse_line(with_escape.to_line()) == with_escape


@pytest.mark.parametrize(
    "block",
    [
        '{"uri":"u","ref":"warcfile:.#1"}',
        '{"uri":"u","ref":"warcfile:..#1"}',
        '{"uri":"u","ref":"warcfile:a/b#1"}',
        '{"uri":"u","ref":"warcfile:#1"}',
        '{"uri":"u","ref":"warcfile:a#"}',
        '{"uri":"u","ref":"warcfile:a#1#2"}',
        '{"uri":"u","ref":"warcfile:a#1#b"}',
        '{"uri":"u","ref":"r","rou":"x"}',
        '{"uri":"u","ref":"r","rod":"2025-02-30"}',
        '{"uri":"u","ref":"r","roi":"x"}',
        '{"uri":"u","ref":"r","rle":01}',
        '{"uri":"u","ref":"r","rle":-1}',
        '{"uri":"u","ref":"r","cle":1.0}',
        '{"uri":"u","hsc":99,"ref":"r"}',
        '{"uri":"u","hsc":"20","ref":"r"}',
        '{"uri":"u","hsc":"200","ref":"r"}',
        '{"uri":"u","hsc":true,"ref":"r"}',
        '{"uri":"u","ref":"r","hsc":200}',
        '{"uri":"","ref":"r"}',
        '{"uri":"u","ref":""}',
        '{"uri":"u","mct":"","ref":"r"}',
        '{"uri":"u","mct":"a\\"b","ref":"r"}',
        '{"uri":"u","mct":"a\\nb","ref":"r"}',
        '{"uri":"u","mct":"a\x01b","ref":"r"}',
        '{"uri":"u\\u00e9","ref":"r"}',
        '{"uri":"a\\/b","ref":"r"}',
        '{"ref":"r","uri":"u"}',
        '{"uri":"u","uri":"u","ref":"r"}',
        '{"uri": "u","ref":"r"}',
        '{"uri":"u","ref":"r"} ',
        '{"uri":"u","dig":"sha1:a\u2028b","ref":"r"}',
        '{"uri":"u","dig":"sha1:a\u00a0b","ref":"r"}',
        '{"uri":"u","dig":"sha1:a\x1cb","ref":"r"}',
        '{"uri":"u","dig":"sha1:ab","ref":"r"}',
        '{"uri":"u\x7f\u2028","ref":"r"}',
    ],
)
@pytest.mark.parametrize("rtype", ["response", "revisit"])
@pytest.mark.parametrize("ts", [TS, "2023-02-29T00:00:00.000000Z", "2024-02-29T00:00:00.000000Z"])
@pytest.mark.parametrize("key", ["(a,)/", "!a", "{a", "a{", "a\x7fb", "ä\u2028", "a\tb"])
def test_fast_path_edge_cases(block: str, rtype: str, ts: str, key: str) -> None:
    line = f"{key} {ts} {rtype} {block}"
    full = _outcome(lambda: CDXJRecord._parse_text(line))
    assert _outcome(lambda: CDXJRecord._parse(line)) == full
    assert _outcome(lambda: CDXJRecord._parse(line.encode())) == full
    assert _outcome(lambda: _parse_bytes(line.encode())) == full
    if full[0] != "error":
        raw = full[4]
        assert _outcome(lambda: _checked_line(raw)) == _outcome(lambda: CDXJRecord._parse(raw))


# --------------------------------------------------------------------------------------------
# Fields built on first use (fast-path records)


def test_fields_of_a_parsed_line_are_built_on_first_use_and_kept() -> None:
    built = rec("(com,a,)/", sha=SHA, hsc=200, mct="", rle=7)
    parsed = CDXJRecord.parse_line(built.to_bytes())
    assert "fields" not in vars(parsed)  # not built yet: a lookup may never need them
    fields = parsed.fields
    typed = sorted((k, type(v), v) for k, v in fields.items())
    assert typed == sorted((k, type(v), v) for k, v in built.fields.items())
    assert parsed.fields is fields and "_match" not in vars(parsed)  # built once, then kept


@pytest.mark.parametrize(
    "copier", [copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))]
)
@pytest.mark.parametrize("read", [CDXJRecord.parse_line, lambda line: _checked_line(line.encode())])
def test_a_record_with_fields_not_yet_built_copies_and_pickles(
    copier: Callable[[CDXJRecord], CDXJRecord], read: Callable[[str], CDXJRecord]
) -> None:
    built = rec("(com,a,)/x", sha=SHA, hsc=404, rid="<urn:x>")
    copied = copier(read(built.to_line()[:-1]))
    assert copied == built and copied.fields == built.fields and copied.to_line() == built.to_line()
    assert dataclasses.replace(CDXJRecord.parse_line(built.to_line()), key="(com,b,)/") == (
        rec("(com,b,)/", sha=SHA, hsc=404, rid="<urn:x>")
    )


def test_fields_built_by_many_threads_at_once_are_equal() -> None:
    line = rec("(com,a,)/", sha=SHA, hsc=200, rle=1).to_line()
    for _ in range(50):
        record = CDXJRecord.parse_line(line)
        barrier = threading.Barrier(4)

        def read(record: CDXJRecord = record, barrier: threading.Barrier = barrier) -> dict:
            barrier.wait()
            return record.fields

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: read(), range(4)))
        assert all(r == rec("(com,a,)/", sha=SHA, hsc=200, rle=1).fields for r in results)


@settings(max_examples=300, deadline=None)
@given(
    key=st.one_of(
        st.sampled_from(["!a", "{a", "a!{", "", " ", "a b", "a\x7f", "\x00", "é", "a\u2028"]),
        st.text(st.sampled_from([*_CHAR_LIST, "!", "{"]), max_size=6),
        st.text(max_size=6),
        st.binary(max_size=3),
    )
)
def test_a_key_is_checked_alike_by_its_quick_match_and_the_rules(key: str | bytes) -> None:
    rules = (
        isinstance(key, str)
        and key != ""
        and key[0] not in "!{"
        and not any(c <= " " or c == "\x7f" for c in key)
    )
    try:
        _check_key(key)
        accepted = True
    except CDXJError:
        accepted = False
    assert accepted == rules
    if accepted:
        assert CDXJRecord.build(key, TS, "response", uri="u", ref="r").key == key
