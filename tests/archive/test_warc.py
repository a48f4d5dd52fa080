"""WARC layer tests against real files, checked with warcio as an independent reader."""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import os
import random
import subprocess
import sys
import tempfile
import threading
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from wwwproxy.archive import warc as W

URI = "http://example.com/page?q=1"
KEY = "http://example.com/page?q=1"
T0 = datetime(2026, 11, 22, 5, 4, 30, 123456, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# helpers


@dataclass
class Sent:
    """What a test put into one exchange, spelled out independently of the module."""

    req_head: bytes
    req_body: bytes
    resp_head: bytes
    resp_body: bytes


def head(start: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    return start + b"\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in headers) + b"\r\n"


def b32sha1(data: bytes) -> str:
    return base64.b32encode(hashlib.sha1(data).digest()).decode()


def write(
    path: Path,
    body: bytes | io.IOBase = b"<html>hello</html>",
    *,
    resp_headers: list | None = None,
    status: int = 200,
    reason: str = "OK",
    method: str = "GET",
    req_headers: list | None = None,
    req_body: bytes | io.IOBase = b"",
    uri: str = URI,
    key: str = KEY,
    date: datetime = T0,
    previous: W.PreviousPayload | None = None,
    check: bool = True,
) -> tuple[list[W.PendingRecord], list[W.RecordLocation]]:
    """Write one exchange; by default every file written is then checked by warcio."""
    if resp_headers is None:
        resp_headers = [("Content-Type", "text/html; charset=utf-8")]
    if req_headers is None:
        req_headers = [("Host", "example.com"), ("Accept", "*/*")]
    records = W.build_exchange(
        target_uri=uri,
        archive_key=key,
        request=W.HTTPRequest(method, req_headers, req_body),
        response=W.HTTPResponse(status, reason, resp_headers, body),
        date=date,
        previous=previous,
    )
    locations = W.append_exchange(path, records)
    if check:
        warcio_check(path)
    return records, locations


def warcio_check(*paths: Path) -> int:
    """Run warcio's checker; demand exit 0, no warnings, and every digest actually checked."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = Checker(SimpleNamespace(inputs=[str(p) for p in paths], verbose=True)).process_all()
    text = out.getvalue()
    assert rc == 0, text
    assert err.getvalue() == "", err.getvalue()
    lines = text.splitlines()
    checked = 0
    for i, line in enumerate(lines):
        if line.strip().startswith("offset "):
            rec_type = line.split()[-1]
            verdict = lines[i + 1].strip()
            want = (
                "digest present but not checked (revisit)"
                if rec_type == "revisit"
                else "digest pass"
            )
            assert verdict == want, text
            checked += 1
    return checked


def warcio_records(path: Path) -> list[dict]:
    """Each record as warcio reads it: raw block bytes, offsets, and parsed headers."""
    raw = []
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh, no_record_parse=True)
        for rec in it:
            block = rec.raw_stream.read()
            raw.append(
                dict(
                    protocol=rec.rec_headers.protocol,
                    warc=rec.rec_headers,
                    type=rec.rec_type,
                    block=block,
                    offset=it.get_record_offset(),
                    length=it.get_record_length(),
                )
            )
    with open(path, "rb") as fh:
        for i, rec in enumerate(ArchiveIterator(fh)):
            raw[i]["http"] = rec.http_headers
            raw[i]["payload"] = rec.raw_stream.read()
    return raw


def file_records(path: Path) -> tuple[list[W.StoredRecord], list[W.WARCFormatError]]:
    problems: list[W.WARCFormatError] = []
    return list(W.read_records(path, problems)), problems


def read_all(stream) -> bytes:
    with stream:
        return b"".join(iter(lambda: stream.read(7000), b""))


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
# writing: every file passes warcio check and reads back byte for byte


BINARY = bytes(range(256)) * 3


@pytest.mark.parametrize(
    ("name", "kwargs", "sent"),
    [
        (
            "small",
            {},
            Sent(
                head(b"GET /page?q=1 HTTP/1.1", [(b"Host", b"example.com"), (b"Accept", b"*/*")]),
                b"",
                head(b"HTTP/1.1 200 OK", [(b"Content-Type", b"text/html; charset=utf-8")]),
                b"<html>hello</html>",
            ),
        ),
        (
            "empty",
            {"body": b"", "status": 204, "reason": "No Content", "resp_headers": []},
            Sent(
                head(b"GET /page?q=1 HTTP/1.1", [(b"Host", b"example.com"), (b"Accept", b"*/*")]),
                b"",
                head(b"HTTP/1.1 204 No Content", []),
                b"",
            ),
        ),
        (
            "binary",
            {
                "body": io.BytesIO(BINARY),
                "resp_headers": [
                    (b"Content-Type", b"application/octet-stream"),
                    (b"X-Latin1", b"caf\xe9"),  # not UTF-8: kept as the raw byte
                    ("X-Utf8", "h\u00e9llo \u2603"),
                    ("Content-Encoding", "gzip"),  # kept: the body is stored as received
                ],
            },
            Sent(
                head(b"GET /page?q=1 HTTP/1.1", [(b"Host", b"example.com"), (b"Accept", b"*/*")]),
                b"",
                head(
                    b"HTTP/1.1 200 OK",
                    [
                        (b"Content-Type", b"application/octet-stream"),
                        (b"X-Latin1", b"caf\xe9"),
                        (b"X-Utf8", "h\u00e9llo \u2603".encode()),
                        (b"Content-Encoding", b"gzip"),
                    ],
                ),
                BINARY,
            ),
        ),
        (
            "post-bytes",
            {
                "method": "POST",
                "req_body": b"a=1&b=%20",
                "req_headers": [("Host", "example.com"), ("Content-Length", "9")],
                "key": KEY + "&__wb_method=post&a=1&b=+",
            },
            Sent(
                head(
                    b"POST /page?q=1 HTTP/1.1",
                    [(b"Host", b"example.com"), (b"Content-Length", b"9")],
                ),
                b"a=1&b=%20",
                head(b"HTTP/1.1 200 OK", [(b"Content-Type", b"text/html; charset=utf-8")]),
                b"<html>hello</html>",
            ),
        ),
        (
            "put-file",
            {
                "method": "PUT",
                "req_body": io.BytesIO(b"\x00\x01payload\xff"),
                "req_headers": [],
                "reason": "",
            },
            Sent(
                head(b"PUT /page?q=1 HTTP/1.1", []),
                b"\x00\x01payload\xff",
                head(b"HTTP/1.1 200 ", [(b"Content-Type", b"text/html; charset=utf-8")]),
                b"<html>hello</html>",
            ),
        ),
    ],
)
def test_exchange_round_trips_through_warcio(tmp_path, name, kwargs, sent):
    path = tmp_path / "http" / "example.com" / f"{name}.warc.gz"
    records, locations = write(path, **kwargs)
    key = kwargs.get("key", KEY)

    assert warcio_check(path) == 2
    got = warcio_records(path)
    assert [r["type"] for r in got] == ["request", "response"]
    assert all(r["protocol"] == "WARC/1.1" for r in got)
    req, resp = got
    # exact bytes: the whole block, HTTP headers included
    assert req["block"] == sent.req_head + sent.req_body
    assert resp["block"] == sent.resp_head + sent.resp_body
    assert resp["payload"] == sent.resp_body
    assert req["payload"] == sent.req_body
    # record fields
    for r in got:
        assert r["warc"]["WARC-Target-URI"] == URI
        assert r["warc"]["WARC-Date"] == "2026-11-22T05:04:30.123456Z"
        assert r["warc"][W.ARCHIVE_KEY_HEADER] == key
        assert r["warc"]["WARC-Record-ID"].startswith("<urn:uuid:")
    assert req["warc"]["WARC-Concurrent-To"] == resp["warc"]["WARC-Record-ID"]
    assert resp["warc"]["WARC-Concurrent-To"] == req["warc"]["WARC-Record-ID"]
    assert resp["warc"]["WARC-Payload-Digest"] == "sha1:" + b32sha1(sent.resp_body)
    assert resp["warc"]["WARC-Block-Digest"] == "sha1:" + b32sha1(sent.resp_head + sent.resp_body)
    assert resp["warc"]["Content-Type"] == "application/http; msgtype=response"
    # offsets and lengths the index will use are the ones warcio sees
    assert [(r["offset"], r["length"]) for r in got] == [tuple(loc) for loc in locations]
    assert locations[1].offset + locations[1].length == path.stat().st_size

    # our own reader agrees, and the built records' metadata matches what was stored
    stored, problems = file_records(path)
    assert problems == []
    assert [s.record_id for s in stored] == [p.info.record_id for p in records]
    assert [(s.offset, s.length) for s in stored] == [tuple(loc) for loc in locations]
    for s, p in zip(stored, records, strict=True):
        assert s.warc_headers == p.info.warc_headers
        assert s.http_head == p.info.http_head
        assert s.http_headers == p.info.http_headers
        assert s.payload_length == p.info.payload_length
    assert read_all(W.open_payload(stored[1])) == sent.resp_body
    assert read_all(W.open_payload(stored[0])) == sent.req_body
    assert stored[1].sha1 == b32sha1(sent.resp_body)
    assert stored[1].http_head == sent.resp_head


def test_header_text_round_trips_as_aiohttp_decodes_it(tmp_path):
    path = tmp_path / "h.warc.gz"
    write(path, resp_headers=[(b"X-Raw", b"\xff\xfe"), ("X-Text", "h\u00e9")])
    stored, _ = file_records(path)
    headers = dict(stored[1].http_headers)
    assert headers["X-Raw"].encode("utf-8", "surrogateescape") == b"\xff\xfe"
    assert headers["X-Text"] == "h\u00e9"
    assert stored[1].mime_type is None
    assert stored[1].status == 200 and stored[0].method == "GET"


def test_five_megabyte_body_from_a_file(tmp_path):
    path = tmp_path / "big.warc.gz"
    rng = random.Random(5)
    body = tempfile.SpooledTemporaryFile(max_size=256 * 1024)  # noqa: SIM115
    digest = hashlib.sha1()
    for _ in range(5):
        chunk = rng.randbytes(1024 * 1024)
        digest.update(chunk)
        body.write(chunk)
    body.seek(0)
    records, locations = write(path, body, resp_headers=[("Content-Type", "video/mp4")])
    assert records[1].info.payload_length == 5 * 1024 * 1024
    assert warcio_check(path) == 2
    got = warcio_records(path)
    assert hashlib.sha1(got[1]["payload"]).digest() == digest.digest()
    rec = W.read_record_at(path, locations[1].offset)
    assert rec.length == locations[1].length and rec.mime_type == "video/mp4"
    assert hashlib.sha1(read_all(W.open_payload(rec))).digest() == digest.digest()


def test_body_is_read_from_its_current_position(tmp_path):
    path = tmp_path / "pos.warc.gz"
    body = io.BytesIO(b"SKIPPED-the body")
    body.seek(8)
    write(path, body)
    assert warcio_records(path)[1]["payload"] == b"the body"


def test_warcio_console_script_accepts_the_files(tmp_path):
    paths = []
    for i, body in enumerate([b"", b"x" * 100_000, BINARY]):
        paths.append(tmp_path / f"f{i}.warc.gz")
        write(paths[-1], body)
        write(paths[-1], body, previous=W.newest_response(paths[-1]).previous())
    script = Path(sys.executable).with_name("warcio")  # the installed console script
    warcio = [str(script)] if script.exists() else [sys.executable, "-m", "warcio.cli"]
    res = subprocess.run(
        [*warcio, "check", "-v", *map(str, paths)], capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("digest pass") == 9  # 3 files x (2 requests + 1 response)
    assert res.stdout.count("(revisit)") == 3


# ---------------------------------------------------------------------------------------------
# Transfer-Encoding (pywb#584, warcio#74)


def test_chunked_origin_is_stored_dechunked_under_a_renamed_header(tmp_path):
    path = tmp_path / "chunked.warc.gz"
    upstream = [("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")]
    body = b"5\r\nhello\r\n0\r\n\r\n looks like chunking but is the real body"
    write(path, body, resp_headers=W.sanitize_headers(upstream))
    assert warcio_check(path) == 2
    resp = None
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response":
                assert rec.http_headers.get_header("Transfer-Encoding") is None
                assert rec.http_headers.get_header("X-Archive-Orig-Transfer-Encoding") == "chunked"
                # warcio's replay stream does not try to de-chunk again: exact body back
                resp = rec.content_stream().read()
    assert resp == body


def test_transfer_encoding_header_is_refused_unsanitized(tmp_path):
    with pytest.raises(ValueError, match="sanitize_headers"):
        write(tmp_path / "x.warc.gz", resp_headers=[("transfer-encoding", "chunked")])
    assert not (tmp_path / "x.warc.gz").exists()


def test_sanitize_headers():
    given_headers = [
        (b"Transfer-Encoding", b"chunked"),
        ("Content-Encoding", "gzip"),
        ("Content-Length", "10"),
        ("ETag", "x"),
    ]
    assert W.sanitize_headers(given_headers) == [
        (b"X-Archive-Orig-Transfer-Encoding", b"chunked"),
        ("Content-Encoding", "gzip"),
        ("Content-Length", "10"),
        ("ETag", "x"),
    ]
    assert W.sanitize_headers(given_headers, content_decoded=True) == [
        (b"X-Archive-Orig-Transfer-Encoding", b"chunked"),
        ("X-Archive-Orig-Content-Encoding", "gzip"),
        ("X-Archive-Orig-Content-Length", "10"),
        ("ETag", "x"),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"resp_headers": [("X-A", "1\r\nX-Injected: 2")]}, "control character"),
        ({"resp_headers": [("Bad Name", "1")]}, "invalid header name"),
        ({"req_headers": [("X", "a\nb")]}, "control character"),
        ({"method": "GE T"}, "bad method"),
        ({"uri": "ftp://example.com/"}, "http or https"),
        ({"uri": "http://example.com/a b"}, "no spaces"),
        ({"key": ""}, "archive key"),
        ({"status": 42}, "3-digit"),
        ({"status": True}, "3-digit"),
        ({"reason": "OK\r\n"}, "reason phrase"),
        ({"date": datetime(2026, 1, 1)}, "timezone-aware"),
    ],
)
def test_builder_rejects_bad_input(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        write(tmp_path / "bad.warc.gz", **change)


def test_body_must_be_binary_and_seekable(tmp_path):
    with pytest.raises(TypeError, match="seekable binary file"):
        write(tmp_path / "bad.warc.gz", body="text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="binary"):
        write(tmp_path / "bad.warc.gz", body=io.StringIO("text"))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# revisits


def test_same_payload_becomes_an_identical_payload_digest_revisit(tmp_path):
    path = tmp_path / "r.warc.gz"
    first, _ = write(path, b"same body", resp_headers=[("X-Version", "1")])
    cached = W.newest_response(path, archive_key=KEY, target_uri=URI)
    assert cached is not None and not cached.is_revisit
    t1 = T0 + timedelta(seconds=5)
    second, locs = write(
        path,
        b"same body",
        status=203,
        reason="Cached",
        resp_headers=[("X-Version", "2")],
        date=t1,
        previous=cached.previous(),
    )
    assert [p.info.rec_type for p in second] == ["request", "revisit"]
    assert warcio_check(path) == 4
    got = warcio_records(path)
    revisit = got[3]
    assert revisit["type"] == "revisit"
    original_id = first[1].info.record_id
    assert revisit["warc"]["WARC-Profile"] == (
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    )
    assert revisit["warc"]["WARC-Refers-To"] == original_id
    assert revisit["warc"]["WARC-Refers-To-Target-URI"] == URI
    assert revisit["warc"]["WARC-Refers-To-Date"] == "2026-11-22T05:04:30.123456Z"
    assert revisit["warc"]["WARC-Payload-Digest"] == "sha1:" + b32sha1(b"same body")
    # headers only: the body is not written again
    assert revisit["block"] == head(b"HTTP/1.1 203 Cached", [(b"X-Version", b"2")])

    cached = W.newest_response(path, archive_key=KEY)
    assert cached.is_revisit
    assert cached.status == 203 and dict(cached.headers) == {"X-Version": "2"}
    assert read_all(cached.open_body()) == b"same body"
    assert cached.payload_record.record_id == original_id
    assert cached.request.record_id == second[0].info.record_id
    assert cached.date == t1
    assert cached.response.sha1 == b32sha1(b"same body")
    assert W.resolve_payload(path, cached.response).record_id == original_id

    # a third identical capture still refers to the full response, not to the revisit
    third, _ = write(path, b"same body", previous=cached.previous())
    assert third[1].info.rec_type == "revisit"
    assert third[1].info.refers_to == original_id
    cached = W.newest_response(path)
    assert cached.response.record_id == third[1].info.record_id
    assert read_all(cached.open_body()) == b"same body"


def test_different_payload_is_written_in_full(tmp_path):
    path = tmp_path / "d.warc.gz"
    write(path, b"version one")
    records, _ = write(path, b"version two", previous=W.newest_response(path).previous())
    assert records[1].info.rec_type == "response"
    # back to version one: compared with the newest (two), so a full response again
    records, _ = write(path, b"version one", previous=W.newest_response(path).previous())
    assert records[1].info.rec_type == "response"
    assert warcio_check(path) == 6
    cached = W.newest_response(path)
    assert read_all(cached.open_body()) == b"version one"
    assert cached.response.record_id == records[1].info.record_id


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


def build_file(path: Path, bodies: list[bytes]) -> list[W.RecordLocation]:
    locations = []
    for i, body in enumerate(bodies):
        _, locs = write(path, body, date=T0 + timedelta(seconds=i))
        locations += locs
    return locations


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


def test_append_after_a_cut_keeps_earlier_records_and_adds_the_new_ones(tmp_path):
    path = tmp_path / "base.warc.gz"
    locations = build_file(path, [b"first", b"second body " * 30, b"third"])
    data = path.read_bytes()
    ends = {loc.offset + loc.length for loc in locations}
    cuts = sorted(set(range(0, len(data), 23)) | ends | {e - 1 for e in ends} | {len(data) - 3})
    for cut in cuts:
        target = tmp_path / f"cut{cut}.warc.gz"
        target.write_bytes(data[:cut])
        before = [loc for loc in locations if loc.offset + loc.length <= cut]
        new, new_locs = write(target, b"after the crash", date=T0 + timedelta(days=1))
        start = before[-1].offset + before[-1].length if before else 0
        assert new_locs[0].offset == start
        assert warcio_check(target) == len(before) + 2
        stored, problems = file_records(target)
        assert problems == []
        assert [(s.offset, s.length) for s in stored] == [tuple(x) for x in before + new_locs]
        assert target.stat().st_size == new_locs[1].offset + new_locs[1].length
        assert read_all(W.newest_response(target).open_body()) == b"after the crash"
        assert not list(tmp_path.glob(f"cut{cut}.warc.gz.corrupt-*"))  # torn, not corrupt
        target.unlink()


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
        (gzip.compress(b"just some text\r\n\r\n"), "record", "not a WARC/1.0 or WARC/1.1"),
        (gzip.compress(b"hello"), "record", "no WARC header block"),
        (gzip.compress(b"")[:12], "torn", "torn write"),
        (
            gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 0\r\n\r\n\r\n\r\n"),
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


def test_garbage_tail_is_reported_then_quarantined_on_append(tmp_path):
    path = tmp_path / "g.warc.gz"
    _, locs = write(path, b"good")
    end = path.stat().st_size
    garbage = b"\x00garbage after a power cut" * 10
    with open(path, "ab") as fh:
        fh.write(garbage)
    stored, problems = file_records(path)
    assert [s.offset for s in stored] == [loc.offset for loc in locs]
    assert problems[0].kind == "corrupt" and problems[0].offset == end
    assert read_all(W.newest_response(path).open_body()) == b"good"

    write(path, b"newer")
    side = tmp_path / f"g.warc.gz.corrupt-{end}"
    assert side.read_bytes() == garbage  # nothing is destroyed
    assert warcio_check(path) == 4
    assert file_records(path)[1] == []
    assert read_all(W.newest_response(path).open_body()) == b"newer"


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
# failed and concurrent appends


def test_body_changed_after_build_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "u.warc.gz"
    write(path, b"kept")
    before = path.read_bytes()
    body_file = tmp_path / "body"
    body_file.write_bytes(b"0123456789" * 1000)
    with open(body_file, "r+b") as body:
        records = W.build_exchange(
            target_uri=URI,
            archive_key=KEY,
            request=W.HTTPRequest("GET", []),
            response=W.HTTPResponse(200, "OK", [], body),
            date=T0,
        )
        body.truncate(5000)
        with pytest.raises(W.WARCWriteError, match="shrank"):
            W.append_exchange(path, records)
        assert path.read_bytes() == before
        body.seek(0)
        body.write(b"X")  # same length, other bytes
        records = W.build_exchange(
            target_uri=URI,
            archive_key=KEY,
            request=W.HTTPRequest("GET", []),
            response=W.HTTPResponse(200, "OK", [], body),
            date=T0,
        )
        body.seek(1)
        body.write(b"Y")
        with pytest.raises(W.WARCWriteError, match="changed"):
            W.append_exchange(path, records)
    assert path.read_bytes() == before
    assert warcio_check(path) == 2


def test_a_pending_record_is_written_once(tmp_path):
    records, _ = write(tmp_path / "once.warc.gz")
    with pytest.raises(W.WARCWriteError, match="only once"):
        W.append_exchange(tmp_path / "once.warc.gz", records)
    assert warcio_check(tmp_path / "once.warc.gz") == 2


def test_concurrent_appends_do_not_interleave(tmp_path):
    path = tmp_path / "c.warc.gz"
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(8):
                write(path, f"thread {n} item {i}".encode() * 200, check=False)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert warcio_check(path) == 64
    stored, problems = file_records(path)
    assert len(stored) == 64 and problems == []


def test_parent_directories_are_created(tmp_path):
    path = tmp_path / "cache" / "https" / "example.com:8443" / "h.warc.gz"
    write(path, uri="https://example.com:8443/x", key="https://example.com:8443/x")
    assert warcio_check(path) == 2


# ---------------------------------------------------------------------------------------------
# memory: a 50 MB body is never held in memory


def test_fifty_megabyte_body_in_bounded_memory(tmp_path):
    path = tmp_path / "huge.warc.gz"
    rng = random.Random(50)
    body = tempfile.SpooledTemporaryFile(max_size=1024 * 1024, dir=tmp_path)  # noqa: SIM115
    digest = hashlib.sha1()
    for _ in range(50):
        chunk = rng.randbytes(1024 * 1024)
        digest.update(chunk)
        body.write(chunk)
    body.seek(0)
    del chunk
    tracemalloc.start()
    try:
        records, _ = write(path, body, check=False)
        write_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        cached = W.newest_response(path)
        got = hashlib.sha1()
        with cached.open_body() as stream:
            while block := stream.read(256 * 1024):
                got.update(block)
        read_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert records[1].info.payload_length == 50 * 1024 * 1024
    assert got.digest() == digest.digest()
    assert write_peak < 5_000_000, write_peak
    assert read_peak < 5_000_000, read_peak
    assert os.path.getsize(path) > 50 * 1024 * 1024  # random data: really stored, not elided
    assert warcio_check(path) == 2
