"""Tests for wwwproxy.archive.warc.build: records of an exchange, byte-exact headers, revisits;
every file written is read back by warcio as an independent reader."""

from __future__ import annotations

import hashlib
import io
import random
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive import warc as W
from wwwproxy.archive.warc import build

from .conftest import (
    KEY,
    T0,
    URI,
    Sent,
    b32sha1,
    file_records,
    head,
    read_all,
    warcio_check,
    warcio_records,
    write,
)

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
    assert not (tmp_path / "bad.warc.gz").exists()


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [("Content-Type", "text/html")],
        [("X-Blank", ""), ("X-Spaced", " \t padded\t "), ("X-Inner", "a  b\tc")],
        [(b"X-Raw", b"\xff\xfe "), ("X-Text", "h\u00e9"), ("x-lower", "v:w: x")],
        [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X-Transfer-Encoding-Not", "1")],
    ],
)
def test_the_recorded_fields_are_what_a_reader_parses_from_the_head(tmp_path, headers):
    """The fields a record built here carries (the index and the search read them) are those
    the reader parses back from its head in the file."""
    path = tmp_path / "fields.warc.gz"
    records, _ = write(path, resp_headers=headers, req_headers=headers)
    stored, problems = file_records(path)
    assert problems == []
    for built, read in zip(records, stored, strict=True):
        assert built.info.http_head == read.http_head
        assert built.info.http_headers == read.http_headers
    assert len(stored[1].http_headers) == len(headers)


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


def test_record_ids_are_random_uuids_each_its_own() -> None:
    ids = [build._new_record_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for rid in ids[:200]:
        assert rid.startswith("<urn:uuid:") and rid.endswith(">")
        made = uuid.UUID(rid[len("<urn:uuid:") : -1])
        assert (made.version, made.variant) == (4, uuid.RFC_4122)
        assert str(made) == rid[len("<urn:uuid:") : -1]  # lower-case, dashed, as uuid4() writes
