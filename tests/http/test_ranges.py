"""Range requests answered from a stored response, as tables (one row per rule, citing the
section of RFC 9110 it comes from) and properties: any plan, carried out on a body in memory or
read from a stream, sends exactly the body's bytes it says it sends."""

from __future__ import annotations

import email.parser
import email.policy
import io
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.http.headers import get_header, set_header
from wwwproxy.http.ranges import (
    ACCEPT_RANGES,
    COALESCE_GAP,
    MAX_RANGES,
    RangePlan,
    RangeSpec,
    Span,
    body_parts,
    combine_partials,
    file_reads,
    if_range_holds,
    parse_content_range,
    parse_range,
    plan_ranges,
    ranges_apply,
    resolve_ranges,
    upstream_range,
)

R = RangeSpec

# --- parsing Range ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "specs"),
    [
        # §14.1.2's examples
        ("bytes=0-499", (R(0, 499),)),
        ("bytes=500-999", (R(500, 999),)),
        ("bytes=-500", (R(None, 500),)),
        ("bytes=9500-", (R(9500, None),)),
        ("bytes=0-0,-1", (R(0, 0), R(None, 1))),
        ("bytes=500-600,601-999", (R(500, 600), R(601, 999))),
        ("bytes=0-999,4500-5499,-1000", (R(0, 999), R(4500, 5499), R(None, 1000))),
        # §14.1: range unit names are case-insensitive
        ("Bytes=0-1", (R(0, 1),)),
        ("BYTES=0-1", (R(0, 1),)),
        # §5.5: white space around the field value is not part of it
        ("  bytes=0-1\t", (R(0, 1),)),
        # §5.6.1: OWS around the commas, empty list elements
        ("bytes=0-1 , 3-4", (R(0, 1), R(3, 4))),
        ("bytes=0-1,\t3-4", (R(0, 1), R(3, 4))),
        ("bytes=,0-1,,3-4,", (R(0, 1), R(3, 4))),
        # §14.1.1: the same position twice is one byte; 0 is a suffix-length (unsatisfiable)
        ("bytes=7-7", (R(7, 7),)),
        ("bytes=-0", (R(None, 0),)),
        # leading zeros are digits
        ("bytes=007-010", (R(7, 10),)),
        # ranges in any order, overlapping or not: parsed as given (resolve_ranges judges)
        ("bytes=5-9,0-4,0-", (R(5, 9), R(0, 4), R(0, None))),
    ],
)
def test_parse_range(value, specs):
    assert parse_range(value) == specs


@pytest.mark.parametrize(
    "value",
    [
        None,  # no Range
        "",
        "0-499",  # no unit
        "items=0-1",  # §14.2: a unit the server does not support: ignore the header
        "none=0-1",
        "bytes =0-1",  # §14.1.1: no white space around "="
        "by tes=0-1",
        "bytes",
        "bytes=",  # §14.1.1: 1#range-spec: at least one
        "bytes=,",
        "bytes= , ",
        "bytes=1-0",  # §14.1.1: last-pos before first-pos is invalid
        "bytes=0-1,5-2",  # one invalid range-spec makes the whole ranges-specifier invalid
        "bytes=0 -1",  # no white space inside a range-spec
        "bytes=0- 1",
        "bytes=- 1",
        "bytes=-",
        "bytes=--1",
        "bytes=+1-2",
        "bytes=0x10-0x20",
        "bytes=a-b",
        "bytes=1",
        "bytes=0-1;q=1",
        "bytes=\u0661-\u0662",  # DIGIT is ASCII only
        "bytes=0-1, bytes=2-3",  # two Range fields joined: not a range-set
    ],
)
def test_parse_range_ignores_what_is_not_a_byte_range_set(value):
    assert parse_range(value) is None


def test_parse_range_ignores_more_than_max_ranges():
    # §14.2: a server MAY ignore a set of many small ranges (a broken client or an attack)
    many = ",".join(f"{i}-{i}" for i in range(MAX_RANGES))
    assert len(parse_range("bytes=" + many) or ()) == MAX_RANGES
    assert parse_range("bytes=" + many + ",500-500") is None
    # empty list elements are not range-specs and do not count
    assert parse_range("bytes=" + "," * 1000 + "0-1") == (R(0, 1),)


def test_parse_range_takes_huge_numbers_without_converting_them():
    # int() refuses strings past 4,300 digits: a huge position is just larger than any length
    huge = "9" * 5000
    (first,) = parse_range(f"bytes={huge}-") or ()
    assert first.first is not None and first.first > 10**18
    (suffix,) = parse_range(f"bytes=-{huge}") or ()
    assert resolve_ranges([suffix], 10) == (Span(0, 9),)
    (capped,) = parse_range(f"bytes=3-{huge}") or ()
    assert resolve_ranges([capped], 10) == (Span(3, 9),)


# --- resolving against a length -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "spans"),
    [
        # §14.1.2's examples on a 10000-byte representation
        ("bytes=0-499", ((0, 499),)),
        ("bytes=500-999", ((500, 999),)),
        ("bytes=-500", ((9500, 9999),)),
        ("bytes=9500-", ((9500, 9999),)),
        ("bytes=0-0,-1", ((0, 0), (9999, 9999))),
        ("bytes=0-999,4500-5499,-1000", ((0, 999), (4500, 5499), (9000, 9999))),
        # §14.2: ranges that overlap or touch may be coalesced
        ("bytes=500-600,601-999", ((500, 999),)),
        ("bytes=500-700,601-999", ((500, 999),)),
        # §14.1.1: a last-pos past the end means the end; a longer suffix, all of it
        ("bytes=9000-20000", ((9000, 9999),)),
        ("bytes=-20000", ((0, 9999),)),
        ("bytes=0-", ((0, 9999),)),  # Chromium's first media request
        # §14.1.1: unsatisfiable: a first-pos at or past the end, a suffix of 0
        ("bytes=10000-", ()),
        ("bytes=10000-10005", ()),
        ("bytes=-0", ()),
        ("bytes=10000-,-0,20000-30000", ()),
        # the satisfiable ones of a mixed set
        ("bytes=20000-,0-9", ((0, 9),)),
        # §15.3.7.2: parts in the order the request gave them
        ("bytes=5000-5099,0-99", ((5000, 5099), (0, 99))),
        # a coalesced range takes the place of the first of those it joins
        ("bytes=5000-5099,50-150,0-99", ((5000, 5099), (0, 150))),
        ("bytes=0-99,5000-5099,50-150", ((0, 150), (5000, 5099))),
        # §14.2: "separated by a gap that is smaller than the overhead of sending multiple parts"
        (f"bytes=0-99,{100 + COALESCE_GAP - 1}-300", ((0, 300),)),
        (f"bytes=0-99,{100 + COALESCE_GAP}-300", ((0, 99), (100 + COALESCE_GAP, 300))),
        # the same range a hundred times is sent once (no amplification)
        ("bytes=" + ",".join(["0-"] * MAX_RANGES), ((0, 9999),)),
        (
            "bytes=" + ",".join(f"{9000 - 1000 * i}-{9999 - 1000 * i}" for i in range(10)),
            ((0, 9999),),
        ),
    ],
)
def test_resolve_ranges(value, spans):
    specs = parse_range(value)
    assert specs is not None
    assert resolve_ranges(specs, 10000) == tuple(Span(*s) for s in spans)


def test_resolve_ranges_of_an_empty_representation_is_empty():
    # §14.1.1 calls a suffix of an empty representation satisfiable, but no Content-Range can
    # describe a part of it: the caller sends it whole
    assert resolve_ranges([R(None, 5), R(0, None)], 0) == ()


# --- If-Range -------------------------------------------------------------------------------

MODIFIED = "Mon, 01 Jan 2024 00:00:00 GMT"
STORED = (
    ("Date", "Mon, 01 Jan 2024 00:00:10 GMT"),
    ("Last-Modified", MODIFIED),
    ("ETag", '"v1"'),
)


def _without(headers, name):
    return tuple((n, v) for n, v in headers if n.lower() != name.lower())


@pytest.mark.parametrize(
    ("if_range", "stored", "holds"),
    [
        (None, STORED, True),  # §13.1.5: no If-Range, no condition
        # §13.1.5: an entity-tag: a strong match only (§8.8.3.2)
        ('"v1"', STORED, True),
        ('  "v1" ', STORED, True),
        ('"v2"', STORED, False),
        ('W/"v1"', STORED, False),  # a client must not send a weak tag; it never matches
        ('"v1"', (*_without(STORED, "ETag"), ("ETag", 'W/"v1"')), False),  # stored one weak
        ('"v1"', _without(STORED, "ETag"), False),
        ('"v1", "v2"', STORED, False),  # one validator, not a list
        # §13.1.5: an HTTP-date: exactly the Last-Modified, and that a strong validator
        (MODIFIED, STORED, True),
        ("Monday, 01-Jan-24 00:00:00 GMT", STORED, True),  # the same date, obsolete format
        ("Mon, 01 Jan 2024 00:00:01 GMT", STORED, False),
        ("Sun, 31 Dec 2023 23:59:59 GMT", STORED, False),  # earlier is not equal
        (MODIFIED, _without(STORED, "Last-Modified"), False),
        # §8.8.2.2: strong only if at least a second before the Date the origin sent
        (MODIFIED, (*_without(STORED, "Date"), ("Date", "Mon, 01 Jan 2024 00:00:01 GMT")), True),
        (MODIFIED, (*_without(STORED, "Date"), ("Date", MODIFIED)), False),
        (MODIFIED, _without(STORED, "Date"), False),
        # a weak ETag: the origin's bytes may differ at the same Last-Modified
        (MODIFIED, (*_without(STORED, "ETag"), ("ETag", 'W/"v1"')), False),
        (MODIFIED, _without(STORED, "ETag"), True),
        # §13.1.5: neither an entity-tag nor a date: false
        ("yesterday", STORED, False),
        ("", STORED, False),
    ],
)
def test_if_range_holds(if_range, stored, holds):
    assert if_range_holds(if_range, stored) is holds


# --- plans ----------------------------------------------------------------------------------

BODY = bytes(range(256)) * 40  # 10240 bytes
MEDIA = (("Content-Type", "video/mp4"), *STORED, ("Content-Length", str(len(BODY))))


def _plan(value, **kwargs):
    kwargs.setdefault("boundary", "B0UNDARY")
    return plan_ranges(
        value,
        kwargs.pop("status", 200),
        kwargs.pop("stored", MEDIA),
        kwargs.pop("length", len(BODY)),
        **kwargs,
    )


def _sent(plan: RangePlan, body: bytes = BODY) -> bytes:
    return b"".join(bytes(p) for p in body_parts(plan.body, body))


@pytest.mark.parametrize(
    ("case", "kwargs", "status"),
    [
        ("no Range", {"value": None}, 200),
        ("Chromium's first media request", {"value": "bytes=0-"}, 206),
        ("a seek", {"value": "bytes=5000-"}, 206),
        ("§14.2: GET only", {"value": "bytes=0-", "method": "HEAD"}, 200),
        ("§14.2: GET only", {"value": "bytes=0-", "method": "POST"}, 200),
        ("§14.2: invalid: ignored", {"value": "bytes=5-1"}, 200),
        ("§14.2: another unit: ignored", {"value": "items=0-1"}, 200),
        ("§15.5.17: none satisfiable", {"value": "bytes=20000-"}, 416),
        ("§13.1.5: If-Range holds", {"value": "bytes=0-9", "if_range": '"v1"'}, 206),
        ("§13.1.5: If-Range fails: all of it", {"value": "bytes=0-9", "if_range": '"v0"'}, 200),
        # §13.2.2 step 5: If-Range before satisfiability: a changed copy is sent whole
        ("§13.2.2: If-Range first", {"value": "bytes=20000-", "if_range": '"v0"'}, 200),
        ("a stored 206 is a part", {"value": "bytes=0-", "status": 206}, 206),
        ("a stored 404", {"value": "bytes=0-", "status": 404}, 404),
        ("decoded or rewritten", {"value": "bytes=0-", "transformed": True}, 200),
        ("an empty body", {"value": "bytes=0-", "length": 0}, 200),
        ("an empty body", {"value": "bytes=5-", "length": 0}, 200),
    ],
)
def test_plan_status(case, kwargs, status):
    kwargs = dict(kwargs)
    stored_status = kwargs.get("status", 200)
    plan = _plan(kwargs.pop("value"), **kwargs)
    assert plan.status == status, case
    if not plan.ranged:  # the whole replay, its status as stored
        assert plan.status == stored_status and _sent(plan) == BODY[: kwargs.get("length")]


def test_a_single_range_is_a_206_with_its_content_range():
    # §14.4, §15.3.7.1: one part: Content-Range, the part's length, the stored Content-Type
    plan = _plan("bytes=100-199")
    assert (plan.status, plan.reason) == (206, "Partial Content")
    headers = plan.apply(MEDIA)
    assert get_header(headers, "Content-Range") == f"bytes 100-199/{len(BODY)}"
    assert get_header(headers, "Content-Length") == "100" == str(plan.content_length)
    assert get_header(headers, "Content-Type") == "video/mp4"
    assert get_header(headers, "ETag") == '"v1"'  # the validators stay (§15.3.7)
    assert _sent(plan) == BODY[100:200]
    assert [n for n, _ in headers].count("Content-Length") == 1


def test_a_single_range_of_a_coded_copy_counts_coded_bytes():
    # §14.1: ranges are of the selected representation, coding included: as stored
    stored = (*MEDIA, ("Content-Encoding", "gzip"))
    plan = _plan("bytes=0-9", stored=stored)
    assert plan.status == 206
    assert get_header(plan.apply(stored), "Content-Encoding") == "gzip"
    assert _sent(plan) == BODY[:10]


def test_several_ranges_of_a_coded_copy_are_sent_whole():
    # a Content-Encoding on a multipart message would claim to code the multipart body
    stored = (*MEDIA, ("Content-Encoding", "br"))
    assert _plan("bytes=0-9,500-509", stored=stored).status == 200
    assert (
        _plan("bytes=0-9,500-509", stored=(*MEDIA, ("Content-Encoding", "identity"))).status == 206
    )


def test_unsatisfiable_is_416_with_the_length():
    # §15.5.17, §14.4: "bytes */length"; an empty body, so nothing to type or code
    stored = (*MEDIA, ("Content-Encoding", "gzip"))
    plan = _plan("bytes=10240-", stored=stored)
    assert (plan.status, plan.body) == (416, ())
    headers = plan.apply(stored)
    assert get_header(headers, "Content-Range") == "bytes */10240"
    assert get_header(headers, "Content-Length") == "0"
    assert get_header(headers, "Content-Type") is None
    assert get_header(headers, "Content-Encoding") is None
    assert get_header(headers, "ETag") == '"v1"'


@pytest.mark.parametrize(
    ("status", "transformed", "accept_ranges"),
    [
        (200, False, "bytes"),  # §14.3: a complete copy served as stored
        (200, True, None),  # decoded or rewritten: ranges ignored, so not advertised
        (206, False, None),
        (404, False, None),
    ],
)
def test_accept_ranges_on_replays(status, transformed, accept_ranges):
    recorded = (*MEDIA, ("Accept-Ranges", "bytes"))
    for method in ("GET", "HEAD"):  # §9.3.2: HEAD says what GET would
        plan = _plan(None, status=status, stored=recorded, transformed=transformed, method=method)
        assert get_header(plan.apply(recorded), "Accept-Ranges") == accept_ranges
    assert ranges_apply(status, transformed=transformed) is (accept_ranges is not None)


def test_a_whole_plan_is_the_whole_body():
    plan = _plan(None)
    assert ACCEPT_RANGES == ("Accept-Ranges", "bytes")
    assert plan.apply(MEDIA) == [*MEDIA, ACCEPT_RANGES]
    assert _sent(plan) == BODY and plan.content_length == len(BODY)
    assert _plan(None, length=0).body == ()


def test_multipart_parses_back_with_the_email_parser():
    # §14.6: multipart/byteranges, a Content-Type and Content-Range in each part
    text = b"".join(b"line %05d of the text\n" % i for i in range(500))[:10240]
    plan = _plan("bytes=5000-5009,0-9,-10")
    headers = plan.apply(MEDIA)
    content_type = get_header(headers, "Content-Type")
    assert content_type == "multipart/byteranges; boundary=B0UNDARY"
    sent = _sent(plan, text)
    assert get_header(headers, "Content-Length") == str(len(sent))
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + sent
    )
    assert message.is_multipart()
    parts = list(message.iter_parts())
    assert [p["Content-Range"] for p in parts] == [
        "bytes 5000-5009/10240",
        "bytes 0-9/10240",
        "bytes 10230-10239/10240",
    ]
    assert {p["Content-Type"] for p in parts} == {"video/mp4"}
    for part, (first, last) in zip(parts, [(5000, 5009), (0, 9), (10230, 10239)], strict=True):
        assert part.get_payload().encode("ascii") == text[first : last + 1]


def test_multipart_without_a_stored_content_type_has_none_in_its_parts():
    stored = _without(MEDIA, "Content-Type")
    parts = _parts(_plan("bytes=0-9,100-109", stored=stored), BODY)
    assert [heads for heads, _ in parts] == [
        [("Content-Range", f"bytes {r}/10240")] for r in ("0-9", "100-109")
    ]


def test_the_default_boundary_is_random():
    one, two = (plan_ranges("bytes=0-1,500-501", 200, MEDIA, 10240) for _ in range(2))
    b1, b2 = (get_header(p.headers, "Content-Type") for p in (one, two))
    assert b1 != b2 and re.fullmatch(r"multipart/byteranges; boundary=[0-9a-f]{32}", b1 or "")


# --- file_reads ------------------------------------------------------------------------------


def test_file_reads_splits_spans_into_chunks():
    pieces = (b"head", Span(10, 34), b"tail", Span(0, 3))
    assert list(file_reads(pieces, 10)) == [b"head", (10, 10), (20, 10), (30, 5), b"tail", (0, 4)]


def _read_from_stream(plan: RangePlan, body: bytes, chunk: int) -> bytes:
    """What the server's disk path does: a forward-only stream, reopened to go back."""
    out, stream, position = [], io.BytesIO(body), 0
    for step in file_reads(plan.body, chunk):
        if isinstance(step, bytes):
            out.append(step)
            continue
        offset, size = step
        assert 0 < size <= chunk
        if offset < position:
            stream, position = io.BytesIO(body), 0
        stream.read(offset - position)
        out.append(stream.read(size))
        position = offset + size
    return b"".join(out)


# --- properties -----------------------------------------------------------------------------

_PART = re.compile(rb"--(?P<b>[0-9A-Za-z]+)\r\n(?P<heads>(?:[^\r\n]+\r\n)*)\r\n")


def _parts(plan: RangePlan, body: bytes) -> list[tuple[list[tuple[str, str]], bytes]]:
    """A strict reading of a multipart/byteranges body (RFC 2046 §5.1.1 as RFC 9110 §14.6
    uses it): each part's heads and content, checked against the plan's boundary."""
    boundary = (get_header(plan.headers, "Content-Type") or "").split("boundary=")[1].encode()
    sent = _sent(plan, body)
    assert sent.endswith(b"\r\n--" + boundary + b"--\r\n")
    sections = sent[: -len(b"\r\n--" + boundary + b"--\r\n")].split(b"\r\n--" + boundary + b"\r\n")
    out = []
    for i, section in enumerate(sections):
        if i == 0:
            assert section.startswith(b"--" + boundary + b"\r\n")
            section = section[len(boundary) + 4 :]
        heads, sep, content = section.partition(b"\r\n\r\n")
        assert sep
        pairs = [line.split(b": ", 1) for line in heads.split(b"\r\n")]
        out.append(([(n.decode(), v.decode()) for n, v in pairs], content))
    return out


_position = st.integers(0, 2500)
_bounded = st.builds(lambda first, size: R(first, first + size), _position, st.integers(0, 300))
_specs = st.lists(
    st.one_of(
        _bounded,
        _bounded,
        _bounded,
        _position.map(lambda first: R(first, None)),
        _position.map(lambda n: R(None, n)),
    ),
    min_size=1,
    max_size=8,
)
#: ranges far enough apart to make several parts of a body of at least 2,700 bytes
_spread = st.lists(
    st.builds(lambda k, size: R(400 * k, 400 * k + size), st.integers(0, 6), st.integers(0, 300)),
    min_size=2,
    max_size=6,
    unique_by=lambda s: s.first,
)


def _bodies(low: int, high: int) -> st.SearchStrategy[bytes]:
    """Bodies whose bytes are told apart from their neighbours (a slice off by one shows)."""
    return st.builds(
        lambda n, seed: random.Random(seed).randbytes(n), st.integers(low, high), st.integers()
    )


def _header(specs, spaces):
    items = [
        f"-{s.last}" if s.first is None else f"{s.first}-{'' if s.last is None else s.last}"
        for s in specs
    ]
    return "bytes=" + ("," + " " * spaces).join(items)


@settings(max_examples=300, deadline=None)
@given(specs=_specs | _spread, spaces=st.integers(0, 2))
def test_the_header_parses_back_to_its_specs(specs, spaces):
    assert parse_range(_header(specs, spaces)) == tuple(specs)


def _check_plan(body, specs, chunk, boundary):
    """Carry out the plan for ``specs`` on ``body`` as the server would, check that what is
    sent is what it says, and return its parts as (span, content)."""
    length = len(body)
    stored = (*_without(MEDIA, "Content-Length"), ("Content-Length", str(length)))
    plan = plan_ranges(_header(specs, 1), 200, stored, length, boundary=boundary)
    headers = plan.apply(stored)
    sent = _sent(plan, body)
    # the same bytes whether the body is in memory or read from a stream in chunks
    assert _read_from_stream(plan, body, chunk) == sent
    assert get_header(headers, "Content-Length") == str(len(sent)) == str(plan.content_length)
    wanted = {  # every satisfiable byte asked for (§14.1.1)
        i
        for s in specs
        for i in (
            range(max(0, length - (s.last or 0)), length if s.last else 0)
            if s.first is None
            else range(s.first, min(length, (s.last if s.last is not None else length) + 1))
        )
    }
    if not plan.ranged:
        assert length == 0 and sent == body
        return []
    if plan.status == 416:
        assert not wanted and sent == b""
        assert get_header(headers, "Content-Range") == f"bytes */{length}"
        return []
    assert plan.status == 206
    if get_header(headers, "Content-Range") is not None:
        parts = [([("Content-Range", get_header(headers, "Content-Range"))], sent)]
    else:
        parts = _parts(plan, body)
        assert len(parts) > 1  # §15.3.7.2: no multipart for one part
    out = []
    for heads, content in parts:
        span, total = parse_content_range(dict(heads)["Content-Range"]) or (None, None)
        assert span is not None and total == length
        assert content == body[span.first : span.stop]  # the part is the body's slice
        out.append((span, content))
    covered = [i for span, _ in out for i in range(span.first, span.stop)]
    assert len(covered) == len(set(covered))  # no byte sent twice (§14.2's coalescing)
    assert wanted <= set(covered)  # every byte asked for is there
    # and no more than the gaps coalescing closed
    assert len(set(covered) - wanted) < COALESCE_GAP * len(specs)
    return out


_chunks = st.integers(1, 300)
_boundaries = st.text("0123456789abcdef", min_size=1, max_size=32)


@settings(max_examples=400, deadline=None)
@given(body=_bodies(0, 2400), specs=_specs, chunk=_chunks, boundary=_boundaries)
def test_any_plan_sends_the_body_slices_it_names(body, specs, chunk, boundary):
    _check_plan(body, specs, chunk, boundary)


@settings(max_examples=200, deadline=None)
@given(body=_bodies(2700, 3000), specs=_spread, chunk=_chunks, boundary=_boundaries)
def test_several_ranges_are_parts_in_the_request_order(body, specs, chunk, boundary):
    parts = _check_plan(body, specs, chunk, boundary)
    # §15.3.7.2: as many parts as ranges (none close enough to join), in the request's order
    assert [span.first for span, _ in parts] == [s.first for s in specs]


# --- Content-Range and combining parts (RFC 9111 §3.3, §3.4) ----------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("bytes 0-499/1234", (Span(0, 499), 1234)),  # §14.4's examples
        ("bytes 500-999/1234", (Span(500, 999), 1234)),
        ("bytes 734-1233/1234", (Span(734, 1233), 1234)),
        ("bytes 42-1233/*", (Span(42, 1233), None)),
        ("Bytes 0-0/1", (Span(0, 0), 1)),
        ("bytes */1234", None),  # the unsatisfied form: no part
        ("bytes 5-4/10", None),  # §14.4: invalid: last before first
        ("bytes 0-10/10", None),  # ... or at or past the complete length
        ("bytes=0-1/2", None),
        ("items 0-1/2", None),
        (None, None),
    ],
)
def test_parse_content_range(value, parsed):
    assert parse_content_range(value) == parsed


LATER = "Mon, 01 Jan 2024 00:05:00 GMT"


def _part(first, last, length=10240, etag='"v1"', date="Mon, 01 Jan 2024 00:00:10 GMT", **more):
    headers = [
        ("Content-Type", "video/mp4"),
        ("Date", date),
        ("Last-Modified", MODIFIED),
        ("Content-Range", f"bytes {first}-{last}/{length}"),
        ("Content-Length", str(last + 1 - first)),
    ]
    if etag is not None:
        headers.append(("ETag", etag))
    for name, value in more.items():
        headers = set_header(headers, name, value)
    return headers


@pytest.mark.parametrize(
    ("case", "parts", "pieces"),
    [
        ("one 206 of all of it (Chromium's bytes=0-)", [_part(0, 10239)], [(0, 0, 10240)]),
        ("two halves", [_part(0, 5119), _part(5120, 10239)], [(0, 0, 5120), (1, 0, 5120)]),
        ("in any order", [_part(5120, 10239), _part(0, 5119)], [(1, 0, 5120), (0, 0, 5120)]),
        ("overlapping", [_part(0, 6000), _part(4000, 10239)], [(0, 0, 6001), (1, 2001, 6240)]),
        (
            "the longest first",
            [_part(0, 99), _part(0, 9999), _part(9000, 10239)],
            [(1, 0, 10000), (2, 1000, 1240)],
        ),
        (
            "a strong Last-Modified",
            [_part(0, 99, etag=None), _part(100, 10239, etag=None)],
            [(0, 0, 100), (1, 0, 10140)],
        ),
        # not complete: the caller keeps the parts (or not), never a response
        ("a gap", [_part(0, 99), _part(101, 10239)], None),
        ("no start", [_part(1, 10239)], None),
        ("no end", [_part(0, 10238)], None),
        ("different lengths", [_part(0, 99), _part(100, 10239, length=10241)], None),
        ("unknown length", [[(n, v.replace("/10240", "/*")) for n, v in _part(0, 10239)]], None),
        # RFC 9111 §3.4: only with the same strong validator
        ("another ETag", [_part(0, 99), _part(100, 10239, etag='"v2"')], None),
        # weak ETags: the bytes may differ, so their Last-Modified is not strong either
        ("weak ETags", [_part(0, 99, etag='W/"v1"'), _part(100, 10239, etag='W/"v1"')], None),
        ("an ETag in one only", [_part(0, 99, etag=None), _part(100, 10239)], None),
        (
            "another Last-Modified",
            [_part(0, 99, etag=None), _part(100, 10239, etag=None, **{"Last-Modified": LATER})],
            None,
        ),
        # RFC 9110 §8.8.2.2: a Last-Modified less than a second before the Date is weak
        ("a weak Last-Modified", [_part(0, 10239, etag=None, date=MODIFIED)], None),
        (
            "a multipart 206 has no Content-Range",
            [_without(_part(0, 10239), "Content-Range")],
            None,
        ),
        ("nothing", [], None),
    ],
)
def test_combine_partials(case, parts, pieces):
    combined = combine_partials(parts)
    assert (combined.pieces if combined else None) == (tuple(pieces) if pieces else None), case


def test_combined_headers_are_updated_by_newer_parts():
    # RFC 9111 §3.4 (§3.2): the newer response's fields replace the stored ones, but for
    # Content-Range and the framing; the result is a complete 200's
    old = _part(0, 99, **{"Cache-Control": "max-age=60", "X-Old": "1"})
    new = _part(100, 10239, **{"Cache-Control": "max-age=600"})
    combined = combine_partials([old, new])
    assert combined is not None and combined.length == 10240
    headers = combined.headers
    assert get_header(headers, "Cache-Control") == "max-age=600"
    assert get_header(headers, "X-Old") == "1"
    assert get_header(headers, "Content-Range") is None
    assert [v for n, v in headers if n == "Content-Length"] == ["10240"]


@settings(max_examples=300, deadline=None)
@given(body=st.binary(min_size=1, max_size=500), data=st.data())
def test_combined_parts_are_the_body(body, data):
    cuts = sorted(
        data.draw(st.sets(st.integers(1, len(body) - 1), max_size=6)) if len(body) > 1 else []
    )
    bounds = list(zip([0, *cuts], [*cuts, len(body)], strict=True))
    # each part stretched back a little (overlaps) and given in a shuffled order
    spans = [(max(0, a - data.draw(st.integers(0, 5))), b - 1) for a, b in bounds]
    spans = data.draw(st.permutations(spans))
    parts = [_part(a, b, length=len(body)) for a, b in spans]
    combined = combine_partials(parts)
    assert combined is not None
    bodies = [body[a : b + 1] for a, b in spans]
    assert b"".join(bodies[i][start:stop] for i, start, stop in combined.pieces) == body


# --- what of a range goes upstream ------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "sent"),
    [
        # a media element's first request: the whole resource is fetched and recorded
        ([("Range", "bytes=0-")], []),
        ([("range", "Bytes=0-"), ("Accept", "*/*")], [("Accept", "*/*")]),
        ([("Range", " bytes=0- ")], []),
        ([("Range", "bytes=000-")], []),
        # its If-Range goes with it (RFC 9110 §13.1.5: no If-Range without a Range)
        ([("If-Range", '"v1"'), ("Range", "bytes=0-")], []),
        # other ranges go as asked (a seek: its 206 is relayed, recorded as history)
        ([("Range", "bytes=0-1")], [("Range", "bytes=0-1")]),
        ([("Range", "bytes=5-")], [("Range", "bytes=5-")]),
        ([("Range", "bytes=-5")], [("Range", "bytes=-5")]),
        ([("Range", "bytes=0-,5-")], [("Range", "bytes=0-,5-")]),
        (
            [("If-Range", '"v1"'), ("Range", "bytes=9-")],
            [("If-Range", '"v1"'), ("Range", "bytes=9-")],
        ),
        # not a bytes range, or none: as they are
        ([("Range", "items=0-")], [("Range", "items=0-")]),
        ([("If-Range", '"v1"')], [("If-Range", '"v1"')]),
        ([("Accept", "*/*")], [("Accept", "*/*")]),
        # two Range headers: not one range asking for every byte
        (
            [("Range", "bytes=0-"), ("Range", "bytes=0-")],
            [("Range", "bytes=0-"), ("Range", "bytes=0-")],
        ),
    ],
)
def test_upstream_range(headers, sent):
    assert upstream_range(headers) == sent
