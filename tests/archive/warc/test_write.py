"""Tests for wwwproxy.archive.warc.write: appends after crashes, failed and concurrent appends,
bounded memory."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import random
import tempfile
import threading
import tracemalloc
import zlib
from datetime import timedelta

import pytest

from wwwproxy.archive import warc as W
from wwwproxy.fsutil import GroupSync

from .conftest import KEY, T0, URI, build_file, file_records, read_all, warcio_check, write

# ---------------------------------------------------------------------------------------------
# crash safety: appending after a cut


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


class FailingFlush(GroupSync):
    """A disk that fails the flush (EIO/ENOSPC at fsync time cannot be made to happen here)."""

    def _flush(self, batch: set[str]) -> None:
        raise OSError(28, "No space left on device")


def _exchange(body: bytes) -> list[W.PendingRecord]:
    return W.build_exchange(
        target_uri=URI,
        archive_key=KEY,
        request=W.HTTPRequest("GET", [("Host", "example.com")], b""),
        response=W.HTTPResponse(200, "OK", [("Content-Type", "text/plain")], body),
        date=T0 + timedelta(seconds=len(body)),
    )


def test_group_flushed_appends_are_whole_and_readable(tmp_path):
    path = tmp_path / "host" / "a.warc.gz"
    group = GroupSync(tmp_path)
    threads = [
        threading.Thread(
            target=lambda i=i: W.append_exchange(path, _exchange(b"x" * i), sync=group)
        )
        for i in range(1, 9)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    warcio_check(path)
    records, problems = file_records(path)
    assert len(records) == 16 and not problems and group.flushes <= 8


def test_a_failed_group_flush_cuts_the_records_back_off(tmp_path):
    path = tmp_path / "a.warc.gz"
    W.append_exchange(path, _exchange(b"kept"))
    size = path.stat().st_size
    with pytest.raises(OSError):
        W.append_exchange(path, _exchange(b"not acknowledged"), sync=FailingFlush(tmp_path))
    assert path.stat().st_size == size  # nothing unacknowledged stays behind
    warcio_check(path)


# ---------------------------------------------------------------------------------------------
# the bytes of a record: what warcio's own writer makes of the same record


def _warcio_bytes(record: W.PendingRecord, body: bytes) -> bytes:
    """The record as warcio's ``WARCWriter`` writes it (uncompressed), given its WARC headers,
    its HTTP head (written as it is, as warcio writes a header buffer) and its payload."""
    from warcio.recordbuilder import RecordBuilder
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    info = record.info
    http = StatusAndHeaders(info.http_head.split(b"\r\n", 1)[0].decode("latin-1"), [])
    http.headers_buff = info.http_head
    http.compute_headers_buffer = lambda header_filter=None: None
    built = RecordBuilder(warc_version="WARC/1.1").create_warc_record(
        info.target_uri,
        info.rec_type,
        payload=io.BytesIO(body) if info.rec_type != "revisit" else None,
        length=len(body) if info.rec_type != "revisit" else None,
        warc_headers=StatusAndHeaders("", list(info.warc_headers), protocol="WARC/1.1"),
        http_headers=http,
    )
    out = io.BytesIO()
    WARCWriter(out, gzip=False, warc_version="WARC/1.1").write_record(built)
    return out.getvalue()


@pytest.mark.parametrize(
    ("body", "req_body", "method"),
    [
        (b"<html>hello</html>", b"", "GET"),
        (b"", b"", "GET"),
        (bytes(range(256)) * 1000, b"a=1&b=\xff", "POST"),  # binary, over one read chunk
        ("é ü 中".encode() * 50_000, b"", "GET"),
    ],
)
def test_each_record_is_byte_for_byte_what_warcio_writes(tmp_path, body, req_body, method):
    """Each gzip member holds exactly the bytes warcio's writer makes of the same record
    (the records are serialised here, without warcio's generic machinery), and warcio reads
    them back with their digests checked; a revisit too."""
    path = tmp_path / "bytes.warc.gz"
    headers = [("Content-Type", "text/html; charset=utf-8"), ("X-Name", "caf\udcc3\udca9")]
    records, locations = write(path, body, resp_headers=headers, req_body=req_body, method=method)
    previous = W.PreviousPayload.from_record(records[1].info)
    revisit, revisit_locations = write(
        path, body, resp_headers=headers, date=T0 + timedelta(days=1), previous=previous
    )
    assert revisit[1].info.rec_type == "revisit"
    data = path.read_bytes()
    for record, location, payload in zip(
        records + revisit,
        locations + revisit_locations,
        [req_body, body, b"", b""],
        strict=True,
    ):
        member = data[location.offset : location.offset + location.length]
        raw = zlib.decompressobj(zlib.MAX_WBITS + 16)
        assert raw.decompress(member) == _warcio_bytes(record, payload)
        assert raw.eof and not raw.unused_data
    assert warcio_check(path) == 4


@pytest.mark.parametrize("use_isal", [True, False])
@pytest.mark.parametrize(
    ("level", "data"),
    [
        (0, b""),
        (0, bytes(range(256)) * 64),  # stored: no smaller, whoever deflates
        (3, b""),
        (3, b"<p>words words words</p>\n" * 4000),
        (3, random.Random(7).randbytes(100_000)),  # incompressible, deflated all the same
        (9, b"<p>x</p>" * 1000),
    ],
)
def test_a_member_is_gzip_that_zlib_reads_back_whoever_deflates(monkeypatch, use_isal, level, data):
    """A member from ISA-L (levels above 0) or from zlib (level 0, or without ISA-L) is one
    plain gzip member: zlib inflates it to the same bytes; level 0 stores, others deflate."""
    from wwwproxy.archive.warc import write as write_module

    if not use_isal:
        monkeypatch.setattr(write_module, "_deflate_lib", zlib)
    comp = write_module._deflater(level)
    member = comp.compress(data) + comp.flush()
    raw = zlib.decompressobj(zlib.MAX_WBITS + 16)
    assert raw.decompress(member) == data and raw.eof and not raw.unused_data
    assert type(comp).__module__ == ("isal_zlib" if use_isal and level else "zlib")
    if level == 0:
        assert len(member) > len(data)  # stored blocks
    elif data.startswith(b"<p>"):
        assert len(member) < len(data) // 10


# ---------------------------------------------------------------------------------------------
# known_end: where the caller knows the file's whole members end


def _end(path, offset: int | None = None) -> W.FileEnd:  # noqa: ANN001
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size if offset is None else offset)


def _damage_first_member(path) -> None:  # noqa: ANN001
    data = bytearray(path.read_bytes())
    data[30:38] = b"\xff" * 8  # inside the first member's deflate stream
    path.write_bytes(bytes(data))


def _torn(n: int = 4000) -> bytes:
    whole = gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\n" + os.urandom(n))
    return whole[: len(whole) // 2]


KNOWN_END_CASES = [
    # (what the caller says, what is after the known end, the records that must remain)
    ("the file's end", "nothing", "damaged first member left in place"),
    ("the file's end", "torn", "torn tail cut at the known end"),
    ("inside a member", "torn", "judged from the start: torn tail cut, nothing else"),
    ("another file's", "torn", "judged from the start: torn tail cut, nothing else"),
]


@pytest.mark.parametrize(("said", "after", "outcome"), KNOWN_END_CASES)
def test_an_append_frames_only_what_follows_the_known_end(tmp_path, said, after, outcome):
    """A page with many captures: the append frames only the members after the end its caller
    knows (the end of its newest indexed record), not every member from the start; a wrong
    guess costs a full framing, never a byte."""
    path = tmp_path / "k.warc.gz"
    W.append_exchange(path, _exchange(b"first " * 50))
    second = W.append_exchange(path, _exchange(b"second"))
    end = second[-1].offset + second[-1].length
    if outcome.startswith("damaged"):
        _damage_first_member(path)  # a full framing would stop there and move the rest aside
    known = {"the file's end": _end(path), "inside a member": _end(path, second[-1].offset + 7)}
    if after == "torn":
        with path.open("ab") as f:
            f.write(_torn())
    # another file (one since replaced) that ended where this one ends now, torn tail and all
    known["another file's"] = (0, 0, path.stat().st_size)
    known = known[said]
    third = W.append_exchange(path, _exchange(b"third"), known_end=known)
    assert third[0].offset == end
    assert path.stat().st_size == third[-1].offset + third[-1].length
    assert not list(tmp_path.glob("*.corrupt-*"))
    if outcome.startswith("damaged"):
        assert W.read_record_at(path, third[-1].offset).payload_length == 5
        assert W.read_record_at(path, second[-1].offset).payload_length == 6
    else:
        stored, problems = file_records(path)
        assert problems == [] and len(stored) == 6
        assert warcio_check(path) == 6
