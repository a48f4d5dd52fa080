"""pywb's index keys and lines, and the export's choices (--host, --since): pure, by table.

The expected keys are what the ``surt`` package (pywb's, 0.3.1) gives for the same URLs: pywb
computes the key of every request that way, so a capture is found only under that key."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from wwwproxy.archive.transfer import host_matches, parse_since
from wwwproxy.archive.transfer.pywbcdx import pywb_line, pywb_surt, timestamp14
from wwwproxy.archive.warc import RecordInfo


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://example.com/", "com,example)/"),
        ("http://www.Example.com:80/A/b/?z=1&a=2", "com,example)/a/b?a=2&z=1"),
        ("https://www2.example.com/", "com,example)/"),
        ("https://example.com:443/x/", "com,example)/x"),
        ("http://example.com:8080/p;x=1?", "com,example:8080)/p;x=1"),
        ("http://127.0.0.1:8000/x/Y.html?b=2&a=1", "1,0,0,127:8000)/x/y.html?a=1&b=2"),
        ("http://[::1]:8080/a", "::1:8080)/a"),
        ("http://example.com/a%7Eb?q=a+b&c=%2F", "com,example)/a~b?c=/&q=a+b"),
        ("http://example.com/%C3%A9t%C3%A9/a%20b", "com,example)/%c3%a9t%c3%a9/a%20b"),
        ("http://example.com/a%2523b", "com,example)/a%23b"),
        ("http://example.com/a/?", "com,example)/a"),
        ("http://example.com/?a=&b=1", "com,example)/?a=&b=1"),
        ("http://example.com/?jsessionid=123&a=1", "com,example)/?a=1&jsessionid=123"),
        (
            "http://example.com/path?__wb_method=post&b=1&a=2",
            "com,example)/path?__wb_method=post&a=2&b=1",
        ),
        ("http://xn--bcher-kva.example/", "example,xn--bcher-kva)/"),
        ("http://user:pw@example.com/x#frag", "com,example)/x"),
    ],
)
def test_pywb_surt(url: str, key: str) -> None:
    assert pywb_surt(url) == key


def test_pywb_surt_refuses_a_relative_url() -> None:
    with pytest.raises(ValueError, match="not an absolute URL"):
        pywb_surt("/just/a/path")


def _record(rec_type: str, head: bytes, **extra: object) -> RecordInfo:
    fields = {
        "rec_type": rec_type,
        "record_id": "<urn:uuid:1>",
        "date": "2026-11-24T02:15:00.123456Z",
        "target_uri": "http://www.example.com/A?b=1&a=2",
        "archive_key": "http://www.example.com/A?b=1&a=2",
        "warc_headers": (("WARC-Payload-Digest", "sha1:ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),),
        "content_length": 10,
        "http_head": head,
        "http_headers": tuple(
            tuple(line.decode().split(": ", 1)) for line in head.split(b"\r\n")[1:] if line
        ),
        "payload_length": 0,
    }
    fields.update(extra)
    return RecordInfo(**fields)  # type: ignore[arg-type]


def test_pywb_line_of_a_response() -> None:
    record = _record("response", b"HTTP/1.1 200 OK\r\nContent-Type: Text/HTML; charset=utf-8\r\n")
    line = pywb_line(record, filename="f.warc.gz", offset=123, length=456)
    key, stamp, block = line.text.split(" ", 2)
    assert (key, stamp) == ("com,example)/a?a=2&b=1", "20261124021500")
    assert json.loads(block) == {
        "url": "http://www.example.com/A?b=1&a=2",
        "mime": "text/html",
        "status": "200",
        "digest": "sha1:ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
        "length": "456",
        "offset": "123",
        "filename": "f.warc.gz",
    }


def test_pywb_line_of_a_revisit_and_of_a_post() -> None:
    revisit = _record("revisit", b"HTTP/1.1 404 Not Found\r\n")
    fields = json.loads(pywb_line(revisit, filename="f", offset=0, length=1).text.split(" ", 2)[2])
    assert (fields["mime"], fields["status"]) == ("warc/revisit", "404")
    post = _record(
        "response",
        b"HTTP/1.1 200 OK\r\n",
        archive_key="http://example.com/f?__wb_method=post&x=1",
        target_uri="http://example.com/f",
    )
    line = pywb_line(post, filename="f", offset=0, length=1, method="post")
    key, _, block = line.text.split(" ", 2)
    assert key == "com,example)/f?__wb_method=post&x=1"
    assert json.loads(block)["method"] == "POST"
    assert json.loads(block)["mime"] == "unk"  # no Content-Type: pywb's word for unknown


def test_no_line_for_a_request_record() -> None:
    with pytest.raises(ValueError, match="a request record has no index line"):
        pywb_line(_record("request", b"GET / HTTP/1.1\r\n"), filename="f", offset=0, length=1)


def test_timestamp14() -> None:
    assert timestamp14("2026-01-02T03:04:05Z") == "20260102030405"
    assert timestamp14("2026-01-02T03:04:05.999999Z") == "20260102030405"


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("2026-11-24", datetime(2026, 11, 24, tzinfo=UTC)),
        ("2026-11-24T02:15", datetime(2026, 11, 24, 2, 15, tzinfo=UTC)),
        ("2026-11-24T02:15:00+02:00", datetime(2026, 11, 24, 0, 15, tzinfo=UTC)),
        ("2026-11-24T02:15:00Z", datetime(2026, 11, 24, 2, 15, tzinfo=UTC)),
        ("20261124021500", datetime(2026, 11, 24, 2, 15, tzinfo=UTC)),
        ("202611", datetime(2026, 11, 1, tzinfo=UTC)),
        ("2026", datetime(2026, 1, 1, tzinfo=UTC)),
    ],
)
def test_parse_since(text: str, when: datetime) -> None:
    assert parse_since(text) == when


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "20261399", "12345", ""])
def test_parse_since_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        parse_since(text)


@pytest.mark.parametrize(
    ("folder", "wanted", "match"),
    [
        ("example.com", "example.com", True),
        ("example.com", "EXAMPLE.com", True),
        ("example.com:8080", "example.com", True),
        ("example.com:8080", "example.com:8080", True),
        ("example.com:8080", "example.com:9090", False),
        ("example.com", "example.com:8080", False),
        ("www.example.com", "example.com", False),
        ("example.community", "example.com", False),
        ("[::1]:8080", "[::1]", True),
        ("[::1]", "[::1]:8080", False),
        ("127.0.0.1:8000", "127.0.0.1", True),
    ],
)
def test_host_matches(folder: str, wanted: str, match: bool) -> None:
    assert host_matches(folder, wanted) is match
