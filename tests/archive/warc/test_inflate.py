"""Tests for the gzip inflater of wwwproxy.archive.warc.read: ISA-L's (the ``isal`` package,
for speed) gives the same bytes, member lengths and refusals as zlib's (the fall-back where
``isal`` cannot be imported), on real members of several sizes, several members, torn and
damaged ones."""

from __future__ import annotations

import dataclasses
import gzip
import io
import random
import zlib
from datetime import timedelta

import pytest

from wwwproxy.archive import warc as W
from wwwproxy.archive.warc import read as R

from .conftest import T0, read_all, write


def _text(n: int) -> bytes:
    """Text-like bytes (what pages are), not trivially compressible."""
    rnd = random.Random(n)
    words = [
        bytes(rnd.choices(b"abcdefghijklmnopqrstuvwxyz<>/=", k=rnd.randint(1, 9)))
        for _ in range(500)
    ]
    return b" ".join(rnd.choice(words) for _ in range(n // 3 + 1))[:n]


_SIZES = [0, 1, 1024, 100 * 1024, 300 * 1024]
#: one member per size, level 3 as the recorder writes them, plus random (stored) bytes
_MEMBERS = [gzip.compress(_text(n), 3, mtime=0) for n in _SIZES] + [
    gzip.compress(random.Random(7).randbytes(200 * 1024), 6, mtime=0)
]


def _libs() -> list[object]:
    isal = pytest.importorskip("isal.isal_zlib")  # a dependency: installed with the project
    return [zlib, isal]


def _run(lib: object, monkeypatch: pytest.MonkeyPatch, data: bytes, offset: int = 0):
    """What ``_inflate`` gives with ``lib``: (bytes out, member length, where the file is
    left) or the WARCFormatError's (kind, start of its message)."""
    monkeypatch.setattr(R, "_gunzip_lib", lib)
    fh = io.BytesIO(data)
    gen = R._inflate(fh, "f.warc.gz", offset)
    out = bytearray()
    try:
        while True:
            chunk = next(gen)
            assert len(chunk) <= R._OUT_CHUNK  # bounded: a gzip bomb is never held whole
            out += chunk
    except StopIteration as stop:
        return bytes(out), stop.value, fh.tell()
    except R.WARCFormatError as exc:
        return exc.kind, str(exc).split("(")[0]


@pytest.mark.parametrize("index", range(len(_MEMBERS)))
def test_each_member_inflates_to_the_same_bytes(monkeypatch, index):
    member = _MEMBERS[index]
    expected = gzip.decompress(member)
    for lib in _libs():
        assert _run(lib, monkeypatch, member) == (expected, len(member), len(member))


def _bad_crc(member: bytes) -> bytes:
    bad = bytearray(member)
    bad[-6] ^= 0x10  # in the CRC32 of the trailer
    return bytes(bad)


def _bad_size(member: bytes) -> bytes:
    bad = bytearray(member)
    bad[-1] ^= 0x01  # in ISIZE, the length of the trailer
    return bytes(bad)


_ONE, _BIG = _MEMBERS[2], _MEMBERS[3]


def _torn(offset: int, fed: int) -> tuple[str, str]:
    return "torn", f"f.warc.gz: at offset {offset}: gzip member cut off after {fed} bytes "


@pytest.mark.parametrize(
    ("data", "offset", "expected"),
    [
        # several members: each is read alone, the file left at the next one
        (_ONE + _BIG, 0, (gzip.decompress(_ONE), len(_ONE), len(_ONE))),
        (_ONE + _BIG, len(_ONE), (gzip.decompress(_BIG), len(_BIG), len(_ONE) + len(_BIG))),
        (_BIG + _MEMBERS[0] + _ONE, len(_BIG), (b"", len(_MEMBERS[0]), len(_BIG) + 20)),
        # torn: cut in the trailer, in the data, in the header: refused as torn, never short
        (_BIG[:-1], 0, _torn(0, len(_BIG) - 1)),
        (_BIG[: len(_BIG) // 2], 0, _torn(0, len(_BIG) // 2)),
        (_ONE[:5], 0, _torn(0, 5)),
        (_ONE + _BIG[:-8], len(_ONE), _torn(len(_ONE), len(_BIG) - 8)),
        # damaged: refused as corrupt
        (_bad_crc(_BIG), 0, ("corrupt", "f.warc.gz: at offset 0: not valid gzip data ")),
        (_bad_size(_ONE), 0, ("corrupt", "f.warc.gz: at offset 0: not valid gzip data ")),
        (b"WARC/1.1\r\n\r\n", 0, ("corrupt", "f.warc.gz: at offset 0: not valid gzip data ")),
    ],
)
def test_several_torn_and_damaged_members_as_zlib_says(monkeypatch, data, offset, expected):
    for lib in _libs():
        assert _run(lib, monkeypatch, data, offset) == expected, lib


# ---------------------------------------------------------------------------------------------
# read_payload: a hit's whole body in one read, the same bytes open_payload streams


def _bodies() -> list[bytes]:
    return [b"", b"x", _text(1024), _text(100 * 1024), random.Random(3).randbytes(300 * 1024)]


@pytest.mark.parametrize("body", _bodies(), ids=["empty", "1", "1k", "100k", "300k-random"])
def test_read_payload_is_what_open_payload_streams(tmp_path, body):
    path = tmp_path / "f.warc.gz"
    write(path, b"an older capture before it")
    write(path, body, date=T0 + timedelta(seconds=1))
    cached = W.newest_response(path)
    assert cached.read_body() == read_all(cached.open_body()) == body
    assert R.read_payload(cached.payload_record) == body


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda data, end: data[: end - 3], "cut off after"),  # torn
        (lambda data, end: _bad_crc(data[:end]) + data[end:], "not valid gzip data"),  # changed
    ],
)
def test_read_payload_refuses_a_member_cut_or_changed_since(tmp_path, damage, words):
    path = tmp_path / "f.warc.gz"
    write(path, _text(50 * 1024))
    record = W.newest_response(path).payload_record
    data = path.read_bytes()
    path.write_bytes(damage(data, record.offset + record.length))
    with pytest.raises(W.WARCFormatError, match=words) as err:
        R.read_payload(record)
    assert err.value.path == str(path) and err.value.offset == record.offset


@pytest.mark.parametrize(
    "change",
    [
        {"payload_length": -1},  # the member holds more than the index line says
        {"payload_length": +1},  # less
        {"payload_start": -1},  # the heads end elsewhere
        {"payload_start": +1},
        {"payload_start": -1, "payload_length": +1},  # same end, heads shorter
    ],
)
@pytest.mark.parametrize("body", [b"x", _text(1024), random.Random(4).randbytes(70 * 1024)])
def test_read_payload_refuses_a_whole_member_not_what_the_record_says(tmp_path, change, body):
    """Each stage of the inflate (heads, payload, CRLF CRLF) is checked against the record:
    a valid member whose parts are not where the index line puts them is refused, never
    served as a body cut or padded."""
    path = tmp_path / "f.warc.gz"
    write(path, body)
    record = W.newest_response(path).payload_record
    moved = {name: getattr(record, name) + by for name, by in change.items()}
    with pytest.raises(W.WARCFormatError, match="not what its index line says"):
        R.read_payload(dataclasses.replace(record, **moved))
