"""Content-Encoding and the charset parameter: one decoder (streaming, bounded) for every body
the proxy reads, and one charset rule."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.http.content import (
    PIECE,
    ContentDecoder,
    DecodedTooLarge,
    charset_param,
    decode_content,
    decodes,
)

DATA = b"<a href='/x'>x</a> hello " * 1000


def _raw_deflate(data: bytes) -> bytes:
    raw = zlib.compressobj(wbits=-15)
    return raw.compress(data) + raw.flush()


ENCODINGS: list[tuple[str | None, Callable[[bytes], bytes]]] = [
    ("gzip", gzip.compress),
    ("x-gzip", gzip.compress),
    ("GZip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", _raw_deflate),  # raw deflate, as some servers send
    ("deflate", lambda d: zlib.compress(d)[2:-4]),
    ("br", brotli.compress),
    ("gzip, br", lambda d: brotli.compress(gzip.compress(d))),  # applied in order
    ("br, deflate", lambda d: zlib.compress(brotli.compress(d))),
    ("gzip, gzip", lambda d: gzip.compress(gzip.compress(d))),
    ("identity, gzip", gzip.compress),
    ("identity", lambda d: d),
    ("", lambda d: d),
    (None, lambda d: d),
]
IDS = [f"{c}-{i}" for i, (c, _) in enumerate(ENCODINGS)]


def _streamed(decoder: ContentDecoder, encoded: bytes, step: int) -> bytes:
    out = b"".join(decoder.feed(encoded[i : i + step]) for i in range(0, len(encoded), step))
    return out + decoder.flush()


@pytest.mark.parametrize(("coding", "encode"), ENCODINGS, ids=IDS)
def test_decode_whole_buffer(coding: str | None, encode: Callable[[bytes], bytes]) -> None:
    assert decode_content(encode(DATA), coding, 1 << 30) == DATA
    assert decodes(coding)


@pytest.mark.parametrize("step", [1, 7, 4096])
@pytest.mark.parametrize(("coding", "encode"), ENCODINGS, ids=IDS)
def test_decode_piecewise_equals_whole(
    coding: str | None, encode: Callable[[bytes], bytes], step: int
) -> None:
    assert _streamed(ContentDecoder(coding), encode(DATA), step) == DATA


@pytest.mark.parametrize(("coding", "encode"), ENCODINGS, ids=IDS)
def test_empty_body(coding: str | None, encode: Callable[[bytes], bytes]) -> None:
    assert decode_content(encode(b""), coding, 100) == b""
    assert ContentDecoder(coding).flush() == b""  # nothing fed at all


@pytest.mark.parametrize("limit", [0, 1, 10, 24_999, 25_000, 25_001])
@pytest.mark.parametrize(("coding", "encode"), ENCODINGS, ids=IDS)
def test_limit_cuts_the_output(
    coding: str | None, encode: Callable[[bytes], bytes], limit: int
) -> None:
    encoded = encode(DATA)
    assert decode_content(encoded, coding, limit) == DATA[:limit]
    decoder = ContentDecoder(coding, limit)
    assert _streamed(decoder, encoded, 333) == DATA[:limit]
    assert decoder.full == (limit <= len(DATA))


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", _raw_deflate),
        ("br", brotli.compress),
        ("gzip, br", lambda d: brotli.compress(gzip.compress(d))),
    ],
)
def test_a_decompression_bomb_stays_small(coding: str, encode: Callable[[bytes], bytes]) -> None:
    bomb = encode(b"\0" * (10 * 1024 * 1024))
    assert len(bomb) < 100_000
    limit = 100_000
    tracemalloc.start()
    try:
        out = decode_content(bomb, coding, limit)
        decoder = ContentDecoder(coding, limit)
        streamed = b"".join(decoder.feed(bomb[i : i + 1000]) for i in range(0, len(bomb), 1000))
        streamed += decoder.flush()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out == streamed == b"\0" * limit
    assert peak < 2 * 1024 * 1024  # never the 10 MB


def _read_out(decoder: ContentDecoder, encoded: bytes, step: int) -> list[bytes]:
    """The pieces :meth:`ContentDecoder.read` gives for ``encoded`` put ``step`` bytes at a
    time, as a server writes them."""
    pieces = []
    for i in range(0, len(encoded), step):
        decoder.put(encoded[i : i + step])
        while piece := decoder.read():
            pieces.append(piece)
    while piece := decoder.read():
        pieces.append(piece)
    decoder.end()
    return pieces


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=3000)
    | st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=50), st.integers(1, 9000)),
    coding=st.sampled_from(range(len(ENCODINGS))),
    step=st.integers(1, 5000),
)
def test_pieces_equal_one_shot_decoding(data: bytes, coding: int, step: int) -> None:
    name, encode = ENCODINGS[coding]
    encoded = encode(data)
    pieces = _read_out(ContentDecoder(name, max_size=len(data)), encoded, step)
    assert b"".join(pieces) == decode_content(encoded, name, 1 << 30) == data
    assert all(0 < len(p) <= PIECE for p in pieces)


@pytest.mark.parametrize(("coding", "encode"), ENCODINGS, ids=IDS)
def test_max_size_gives_the_bytes_up_to_it_then_raises(
    coding: str | None, encode: Callable[[bytes], bytes]
) -> None:
    encoded = encode(DATA)
    for max_size in (0, 1, len(DATA) - 1):
        decoder = ContentDecoder(coding, max_size=max_size)
        decoder.put(encoded)
        out = b""
        with pytest.raises(DecodedTooLarge, match=f"larger than {max_size} bytes"):
            while piece := decoder.read():
                out += piece
            decoder.end()
        assert out == DATA[:max_size]
    # exactly the bound, or more room: no error
    for max_size in (len(DATA), len(DATA) + 1):
        assert _streamed(ContentDecoder(coding, max_size=max_size), encoded, 999) == DATA


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("br", brotli.compress),
        ("gzip, gzip", lambda d: gzip.compress(gzip.compress(d))),
        ("gzip, br", lambda d: brotli.compress(gzip.compress(d))),
    ],
)
def test_a_bomb_read_in_pieces_holds_one_piece_at_a_time(
    coding: str, encode: Callable[[bytes], bytes]
) -> None:
    """Without a limit, the whole of a bomb's output comes out, one piece in memory at once."""
    size = 32 * 1024 * 1024
    bomb = encode(b" " * size)
    decoder = ContentDecoder(coding)
    tracemalloc.start()
    try:
        decoder.put(bomb)
        total = 0
        while piece := decoder.read():
            assert len(piece) <= PIECE
            total += len(piece)
        decoder.end()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == size
    assert peak < 2 * 1024 * 1024  # never the 32 MB


@pytest.mark.parametrize(
    ("coding", "data", "bad"),
    [
        ("gzip", b"not gzip", "gzip"),
        ("gzip", b"this is not gzip at all", "gzip"),
        ("x-gzip", b"\x1f\x8b\x08\x00garbage garbage garbage", "x-gzip"),
        ("deflate", b"\x78\x9c garbage garbage", "deflate"),
        ("deflate", b"\xff\xff\xff\xff", "deflate"),
        ("deflate", b"x", "deflate"),  # too short to be anything
        ("br", b"this is not brotli at all", "br"),
        ("gzip, br", brotli.compress(b"plain, not gzip"), "gzip"),  # br undone, gzip fails
    ],
)
def test_corrupt_data_is_a_value_error(coding: str, data: bytes, bad: str) -> None:
    with pytest.raises(ValueError, match=f"bad compressed data: {bad}:"):
        decode_content(data, coding, 1000)
    with pytest.raises(ValueError, match=f"bad compressed data: {bad}:"):
        decoder = ContentDecoder(coding)
        for i in range(len(data)):
            decoder.feed(data[i : i + 1])
        decoder.flush()


@pytest.mark.parametrize("coding", ["zstd", "compress", "x-compress", "gzip, zstd", "bogus"])
def test_unknown_coding_is_a_value_error(coding: str) -> None:
    assert not decodes(coding)
    with pytest.raises(ValueError, match="unknown content encoding"):
        ContentDecoder(coding)
    with pytest.raises(ValueError, match="unknown content encoding"):
        decode_content(DATA, coding, 100)


def test_messages_name_the_coding() -> None:
    with pytest.raises(ValueError, match="unknown content encoding 'zstd'"):
        decode_content(DATA, "zstd", 100)
    with pytest.raises(ValueError, match="bad compressed data"):
        decode_content(b"not gzip", "gzip", 100)
    with pytest.raises(ValueError, match="gzip"):
        decoder = ContentDecoder("gzip")
        decoder.feed(b"this is not gzip at all")
        decoder.flush()


def test_a_truncated_stream_gives_what_it_holds() -> None:
    for coding, encoded in (("gzip", gzip.compress(DATA)), ("br", brotli.compress(DATA))):
        part = decode_content(encoded[: len(encoded) // 2], coding, 1 << 30)
        assert DATA.startswith(part)


def test_data_after_the_end() -> None:
    assert decode_content(gzip.compress(DATA) + b"junk", "gzip", 1 << 30) == DATA
    assert decode_content(zlib.compress(DATA) + b"junk", "deflate", 1 << 30) == DATA
    with pytest.raises(ValueError, match="br"):  # the brotli module cannot skip it
        decode_content(brotli.compress(DATA) + b"junk", "br", 1 << 30)


# moved from tests/archive/test_search.py (decode_content was archive.search's)
def test_decode_content_gzip_deflate_and_raw_deflate() -> None:
    data = b"hello " * 100
    big = 1 << 30
    assert decode_content(gzip.compress(data), "gzip", big) == data
    assert decode_content(zlib.compress(data), "deflate", big) == data
    raw = zlib.compressobj(wbits=-15)
    assert decode_content(raw.compress(data) + raw.flush(), "deflate", big) == data
    assert decode_content(data, None, big) == data and decode_content(data, "identity", big) == data
    assert decode_content(gzip.compress(gzip.compress(data)), "gzip, gzip", big) == data
    assert decode_content(gzip.compress(data), "gzip", limit=10) == data[:10]
    with pytest.raises(ValueError, match="unknown content encoding 'zstd'"):
        decode_content(data, "zstd", big)
    with pytest.raises(ValueError, match="bad compressed data"):
        decode_content(b"not gzip", "gzip", big)


# --- charset ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ('text/html; charset="utf-8"', "utf-8"),
        ("text/html; charset='latin1'", "latin1"),
        ("text/html; CHARSET = utf-8 ", "utf-8"),
        ("text/html;charset=ISO-8859-1", "ISO-8859-1"),
        ('text/html; charset=" utf-8 "', "utf-8"),
        ("text/html; boundary=x; charset=utf-8", "utf-8"),
        ("text/html; notcharset=utf-8", None),
        ("text/html", None),
        ("text/html; charset=", None),
        ('text/html; charset=""', None),
        ("", None),
        (None, None),
    ],
)
def test_charset_param(content_type: str | None, expected: str | None) -> None:
    assert charset_param(content_type) == expected
