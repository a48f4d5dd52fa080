"""Tests for wwwproxy.archive.warc.read: the strict reader, on cut, damaged and malformed files."""

from __future__ import annotations

import contextlib
import gzip
import io
import random
import tempfile
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from wwwproxy.archive import warc as W

from .conftest import KEY, T0, URI, b32sha1, build_file, file_records, read_all, warcio_check, write

# ---------------------------------------------------------------------------------------------
# revisits: what the reader serves


def test_revisit_without_its_original_is_not_served(tmp_path):
    path = tmp_path / "orphan.warc.gz"
    write(path, b"old body")
    ghost = W.PreviousPayload(
        "<urn:uuid:00000000-0000-0000-0000-000000000000>",
        URI,
        "2020-01-01T00:00:00.000000Z",
        "sha1:" + b32sha1(b"gone"),
    )
    write(path, b"gone", previous=ghost)
    problems: list[W.WARCFormatError] = []
    cached = W.newest_response(path, problems=problems)
    assert read_all(cached.open_body()) == b"old body"  # the newest servable capture
    assert len(problems) == 1 and "original is not in the file" in str(problems[0])
    assert str(path) in str(problems[0])


def test_newest_response_matches_key_and_uri(tmp_path):
    path = tmp_path / "collide.warc.gz"
    write(path, b"for GET")
    post_key = KEY + "&__wb_method=post"
    write(path, b"for POST", method="POST", key=post_key)
    assert read_all(W.newest_response(path, archive_key=KEY).open_body()) == b"for GET"
    post = W.newest_response(path, archive_key=post_key)
    assert read_all(post.open_body()) == b"for POST" and post.request.method == "POST"
    assert W.newest_response(path, target_uri="http://example.com/other") is None
    assert W.newest_response(tmp_path / "missing.warc.gz") is None


# ---------------------------------------------------------------------------------------------
# crash safety: a file cut anywhere loses only the record being written


def assert_cut_behaviour(data: bytes, locations, cut: int, cut_path: Path):
    cut_path.write_bytes(data[:cut])
    stored, problems = file_records(cut_path)
    complete = [loc for loc in locations if loc.offset + loc.length <= cut]
    assert [(s.offset, s.length) for s in stored] == [tuple(c) for c in complete], cut
    boundary = cut in {0} | {loc.offset + loc.length for loc in locations}
    if boundary:
        assert problems == []
    else:
        assert len(problems) == 1, cut
        start = complete[-1].offset + complete[-1].length if complete else 0
        assert problems[0].torn and problems[0].offset == start
        assert str(cut_path) in str(problems[0])


def test_every_cut_position_of_a_small_file(tmp_path):
    path = tmp_path / "small.warc.gz"
    locations = build_file(path, [b"first", b"", b"third body " * 20])
    data = path.read_bytes()
    cut_path = tmp_path / "cut.warc.gz"
    for cut in range(len(data) + 1):
        assert_cut_behaviour(data, locations, cut, cut_path)


def test_sampled_cut_positions_of_a_large_file(tmp_path):
    path = tmp_path / "large.warc.gz"
    rng = random.Random(7)
    locations = build_file(path, [rng.randbytes(300_000), b"a" * 1_000_000, b"tail"])
    data = path.read_bytes()
    cuts = set(rng.sample(range(len(data)), 40))
    for loc in locations:
        cuts |= {loc.offset - 1, loc.offset, loc.offset + 1, loc.offset + loc.length - 1}
    for cut in sorted(c for c in cuts if 0 <= c <= len(data)):
        assert_cut_behaviour(data, locations, cut, tmp_path / "cut.warc.gz")


# ---------------------------------------------------------------------------------------------
# malformed files


def plain_warc() -> bytes:
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=False, warc_version="1.1")
    rec = writer.create_warc_record(
        URI,
        "response",
        payload=io.BytesIO(b"hi"),
        length=2,
        http_headers=StatusAndHeaders("200 OK", [], protocol="HTTP/1.1"),
    )
    writer.write_record(rec)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("content", "kind", "words"),
    [
        (random.Random(1).randbytes(3000), "corrupt", "not valid gzip"),
        (b"WARC/1.1\r\n", "corrupt", "not valid gzip"),
        (plain_warc(), "corrupt", "not valid gzip"),
        (gzip.compress(b"just some text\r\n\r\n", mtime=0), "record", "not a WARC/1.0 or WARC/1.1"),
        (gzip.compress(b"hello", mtime=0), "record", "no WARC header block"),
        (gzip.compress(b"", mtime=0)[:12], "torn", "torn write"),
        (
            gzip.compress(
                b"WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 0\r\n\r\n\r\n\r\n", mtime=0
            ),
            "record",
            "lacks Warc-Record-Id",
        ),
    ],
)
def test_malformed_file_reports_file_and_offset(tmp_path, content, kind, words):
    path = tmp_path / "bad.warc.gz"
    path.write_bytes(content)
    stored, problems = file_records(path)
    assert stored == []
    assert len(problems) == 1
    assert problems[0].kind == kind and problems[0].offset == 0
    assert words in str(problems[0]) and str(path) in str(problems[0])
    with pytest.raises(W.WARCFormatError, match=words) as err:
        W.read_record_at(path, 0)
    assert err.value.path == str(path)
    assert W.newest_response(path) is None


def test_zero_length_file_is_empty_not_an_error(tmp_path):
    path = tmp_path / "empty.warc.gz"
    path.write_bytes(b"")
    assert file_records(path) == ([], [])
    assert W.newest_response(path) is None
    with pytest.raises(W.WARCFormatError, match="outside the file"):
        W.read_record_at(path, 0)
    write(path)
    assert warcio_check(path) == 2


def test_read_record_at_a_bad_offset_names_it(tmp_path):
    path = tmp_path / "f.warc.gz"
    _, locs = write(path)
    with pytest.raises(W.WARCFormatError, match=f"{path}: at offset 5: not valid gzip"):
        W.read_record_at(path, 5)
    with pytest.raises(W.WARCFormatError, match="outside the file"):
        W.read_record_at(path, 10**6)
    assert W.read_record_at(path, locs[1].offset).rec_type == "response"


def test_garbage_in_the_middle_stops_reading_there(tmp_path):
    path = tmp_path / "m.warc.gz"
    _, first = write(path, b"one")
    good = path.read_bytes()
    other = tmp_path / "o.warc.gz"
    write(other, b"two")
    path.write_bytes(good + b"JUNK" + other.read_bytes())
    stored, problems = file_records(path)
    assert [(s.offset, s.length) for s in stored] == [tuple(x) for x in first]
    assert problems[0].kind == "corrupt" and problems[0].offset == len(good)
    assert read_all(W.newest_response(path).open_body()) == b"one"


def recompress_member(data: bytes, loc: W.RecordLocation, edit) -> bytes:
    member = gzip.decompress(data[loc.offset : loc.offset + loc.length])
    return data[: loc.offset] + gzip.compress(edit(member)) + data[loc.offset + loc.length :]


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda m: m.replace(b"precious", b"Precious"), "WARC-Payload-Digest mismatch"),
        (lambda m: m.replace(b"HTTP/1.1 200 OK", b"HTTP/1.1 201 OK"), "WARC-Block-Digest mismatch"),
        (lambda m: m.replace(b"Content-Length: ", b"Content-Length: 1"), "more bytes than"),
        (lambda m: m[:-4] + b"XX\r\n\r\n", "does not end with CRLF CRLF"),
        (lambda m: m + b"more", "more data in the gzip member"),
        (lambda m: m.replace(b"WARC-Date", b"WARC-Date\xff"), "malformed line"),
        (lambda m: m.replace(b"HTTP/1.1 200 OK", b"HTTP/1.1 2000 K"), "bad HTTP start line"),
        (lambda m: m.replace(b"\r\n\r\nHTTP", b"\r\nJunk-No-Colon\r\n\r\nHTTP"), "malformed"),
    ],
)
def test_invalid_record_in_a_whole_member_is_skipped(tmp_path, edit, words):
    path = tmp_path / "t.warc.gz"
    _, first = write(path, b"precious data")
    _, second = write(path, b"later", date=T0 + timedelta(seconds=1))
    data = recompress_member(path.read_bytes(), first[1], edit)
    path.write_bytes(data)
    stored, problems = file_records(path)
    assert [s.rec_type for s in stored] == ["request", "request", "response"]
    assert len(problems) == 1
    assert problems[0].kind == "record" and problems[0].offset == first[1].offset
    assert words in str(problems[0])
    with pytest.raises(W.WARCFormatError, match=words):
        W.read_record_at(path, first[1].offset)
    # framing is intact, so the next append keeps everything and adds after it
    # (warcio check would rightly flag the damaged record, so it is not run here)
    write(path, b"newest", date=T0 + timedelta(seconds=2), check=False)
    stored, problems = file_records(path)
    assert len(stored) == 5 and len(problems) == 1
    assert read_all(W.newest_response(path).open_body()) == b"newest"


def test_gzip_bomb_is_read_in_bounded_memory(tmp_path):
    path = tmp_path / "bomb.warc.gz"
    path.write_bytes(gzip.compress(b"\x00" * 60_000_000))
    tracemalloc.start()
    try:
        _, problems = file_records(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert problems[0].kind == "record" and "no WARC header block" in str(problems[0])
    assert peak < 8_000_000


def valid_file_bytes() -> tuple[bytes, list[W.StoredRecord], dict[str, bytes]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "v.warc.gz"
        write(path, b"alpha" * 50)
        write(path, b"beta", date=T0 + timedelta(seconds=1))
        stored, _ = file_records(path)
        bodies = {s.record_id: read_all(W.open_payload(s)) for s in stored}
        return path.read_bytes(), stored, bodies


VALID_DATA, VALID_RECORDS, VALID_BODIES = valid_file_bytes()


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(VALID_DATA) - 1), st.integers(0, 255)), min_size=1, max_size=4
    ),
    cut=st.one_of(st.none(), st.integers(0, len(VALID_DATA))),
    tail=st.binary(max_size=40),
)
def test_damaged_files_never_crash_and_never_yield_damaged_records(tmp_path, edits, cut, tail):
    data = bytearray(VALID_DATA)
    for pos, byte in edits:
        data[pos] = byte
    damaged = bytes(data[:cut]) + tail
    path = tmp_path / "fuzz.warc.gz"
    path.write_bytes(damaged)
    originals = {(r.offset, r.record_id): r for r in VALID_RECORDS}
    stored, problems = file_records(path)
    for rec in stored:  # whatever survives is exactly an original record
        orig = originals[(rec.offset, rec.record_id)]
        assert rec.warc_headers == orig.warc_headers and rec.http_head == orig.http_head
        assert read_all(W.open_payload(rec)) == VALID_BODIES[rec.record_id]
    for p in problems:
        assert isinstance(p, W.WARCFormatError) and str(path) in str(p)
    with contextlib.suppress(W.WARCFormatError):
        W.read_record_at(path, 0)
    W.newest_response(path)


# ---------------------------------------------------------------------------------------------
# newest_response parses only what it needs: the same answer as parsing every record


def _newest_parsing_everything(path, *, archive_key=None, accept=None, at_or_before=None):
    """The answer of the reader that parsed every record of the file (as it did before)."""
    from wwwproxy.archive.warc.read import _find_payload

    records = list(W.read_records(path))
    for rec in reversed(records):
        if rec.rec_type not in ("response", "revisit"):
            continue
        if archive_key is not None and rec.archive_key != archive_key:
            continue
        if accept is not None and not accept(rec):
            continue
        if at_or_before is not None and W.parse_warc_date(rec.date) > at_or_before:
            continue
        payload = rec if rec.rec_type == "response" else _find_payload(records, rec)
        if payload is None:
            continue
        request = next(
            (
                r
                for r in reversed(records)
                if r.rec_type == "request"
                and (r.record_id in rec.concurrent_to or rec.record_id in r.concurrent_to)
            ),
            None,
        )
        return rec.offset, payload.offset, request.offset if request else None
    return None


@pytest.mark.parametrize("seed", range(12))
def test_newest_response_is_what_parsing_every_record_finds(tmp_path, seed):
    """Captures of two keys, revisits of earlier bodies among them, 404s and 304s, asked with
    each filter: the lazy reader picks the same capture, original and request."""
    rng = random.Random(seed)
    path = tmp_path / "f.warc.gz"
    keys = [(KEY, URI), ("com,example)/other", "http://example.com/other")]
    dates = []
    for n in range(rng.randrange(1, 25)):
        key, uri = rng.choice(keys)
        status = rng.choice([200, 200, 200, 404, 304])
        body = rng.choice([b"one", b"two", b"three"]) if status != 304 else b""
        newest = W.newest_response(path, archive_key=key) if path.exists() else None
        date = T0 + timedelta(seconds=n)
        dates.append(date)
        write(
            path,
            body,
            status=status,
            key=key,
            uri=uri,
            date=date,
            previous=newest.previous() if newest is not None and rng.random() < 0.8 else None,
            check=False,
        )
    warcio_check(path)
    for key, _ in [*keys, (None, None)]:
        for accept in (None, lambda r: r.status == 200, lambda r: r.status != 304):
            for at in (None, rng.choice(dates)):
                got = W.newest_response(path, archive_key=key, accept=accept, at_or_before=at)
                found = (
                    None
                    if got is None
                    else (
                        got.response.offset,
                        got.payload_record.offset,
                        got.request.offset if got.request else None,
                    )
                )
                assert found == _newest_parsing_everything(
                    path, archive_key=key, accept=accept, at_or_before=at
                )


def test_newest_response_leaves_older_records_unparsed(tmp_path):
    """A page fetched again and again holds a capture per fetch: a lookup parses the newest
    (and what it needs), not every one, so an invalid record among the older ones is not even
    read as a record (``read_records`` and ``index check`` still report it)."""
    path = tmp_path / "f.warc.gz"
    write(path, b"first")
    with path.open("ab") as f:
        f.write(gzip.compress(b"not a WARC record\r\n\r\n"))  # a whole member, not a record
    write(path, b"second", date=T0 + timedelta(seconds=1), check=False)  # warcio refuses it
    problems: list[W.WARCFormatError] = []
    cached = W.newest_response(path, problems=problems)
    assert read_all(cached.open_body()) == b"second" and problems == []
    every: list[W.WARCFormatError] = []
    assert len(list(W.read_records(path, every))) == 4 and len(every) == 1


# ---------------------------------------------------------------------------------------------
# WARC files other tools wrote: uncompressed (.warc), URIs in angle brackets (WARC 1.0)


@pytest.mark.parametrize(
    ("value", "bare"),
    [
        ("<http://example.com/>", "http://example.com/"),
        ("http://example.com/", "http://example.com/"),
        ("<>", ""),
        ("<", "<"),
        ("<metadata://x>", "metadata://x"),
        (None, None),
    ],
)
def test_bare_uri(value, bare):
    assert W.bare_uri(value) == bare


def test_an_uncompressed_warc_is_read_record_by_record(tmp_path):
    data = plain_warc() * 2
    path = tmp_path / "two.warc"
    path.write_bytes(data)
    stored, problems = file_records(path)
    assert problems == [] and [s.offset for s in stored] == [0, len(data) // 2]
    assert [read_all(W.open_payload(s)) for s in stored] == [b"hi", b"hi"]
    assert W.read_record_at(path, len(data) // 2).target_uri == URI
    # the same bytes named .warc.gz are not gzip: refused as before
    gz = tmp_path / "two.warc.gz"
    gz.write_bytes(data)
    assert file_records(gz)[1][0].kind == "corrupt"
    # cut: the first record is read, the second is torn
    path.write_bytes(data[:-3])
    stored, problems = file_records(path)
    assert len(stored) == 1 and problems[0].kind == "torn" and problems[0].offset == len(data) // 2
    path.write_bytes(b"not a warc at all\r\n\r\n")
    assert file_records(path)[1][0].kind == "corrupt"


def test_a_target_uri_in_angle_brackets_is_read_and_its_digest_checks(tmp_path):
    """wget writes ``WARC-Target-URI: <http://...>``: not taken as an HTTP record, its HTTP
    head counted as payload, every payload digest failed."""
    raw = plain_warc().replace(
        f"WARC-Target-URI: {URI}".encode(), f"WARC-Target-URI: <{URI}>".encode()
    )
    path = tmp_path / "wget.warc"
    path.write_bytes(raw)
    stored, problems = file_records(path)
    assert problems == []
    assert stored[0].target_uri == URI and stored[0].status == 200
    assert read_all(W.open_payload(stored[0])) == b"hi"
