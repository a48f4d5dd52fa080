"""Helpers shared by the WARC layer tests (real files, checked with warcio as an independent
reader); the test modules import them from here."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

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


def build_file(path: Path, bodies: list[bytes]) -> list[W.RecordLocation]:
    locations = []
    for i, body in enumerate(bodies):
        _, locs = write(path, body, date=T0 + timedelta(seconds=i))
        locations += locs
    return locations
