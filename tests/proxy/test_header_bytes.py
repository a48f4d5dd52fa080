"""Request header bytes reach the origin as the browser sent them (issue 12, finding 9).

aiohttp's parser holds a header that is not UTF-8 as text with surrogate escapes, and its
serializer used to drop those (``caf\\xe9`` arrived as ``caf``).  A raw origin records the head
it received, byte for byte.
"""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from tests.proxy.conftest import wait_until
from wwwproxy.recording.upstream import serialize_head

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


def _head(value: str) -> CIMultiDict[str]:
    return CIMultiDict([("Host", "example.com"), ("X-Test", value)])


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("plain", b"plain"),
        ("caf\u00e9", "café".encode()),  # text: UTF-8, as aiohttp writes it
        (b"caf\xe9".decode("utf-8", "surrogateescape"), b"caf\xe9"),  # bytes as they came
        (b"\xff\xfe\x80".decode("utf-8", "surrogateescape"), b"\xff\xfe\x80"),
        (b"a\xe9\tb".decode("utf-8", "surrogateescape"), b"a\xe9\tb"),  # HTAB is allowed
    ],
)
def test_serialize_head_keeps_bytes(value: str, wire: bytes) -> None:
    head = serialize_head("GET / HTTP/1.1", _head(value))
    assert head == b"GET / HTTP/1.1\r\nHost: example.com\r\nX-Test: " + wire + b"\r\n\r\n"


def test_serialize_head_text_beside_bytes() -> None:
    """One header text (UTF-8 on the wire), another raw bytes: each as it is."""
    head = CIMultiDict([("A", "caf\u00e9"), ("B", b"caf\xe9".decode("utf-8", "surrogateescape"))])
    wire = serialize_head("GET / HTTP/1.1", head)
    assert wire == b"GET / HTTP/1.1\r\nA: caf\xc3\xa9\r\nB: caf\xe9\r\n\r\n"


@pytest.mark.parametrize("control", ["\r", "\n", "\x00", "\x7f", "\r\nX-Evil: 1"])
@pytest.mark.parametrize("escaped", [False, True])
def test_serialize_head_refuses_controls(control: str, escaped: bool) -> None:
    value = "a" + control + "b"
    if escaped:  # the slow path (bytes that are not UTF-8) refuses them as aiohttp's does
        value += b"\xe9".decode("utf-8", "surrogateescape")
    with pytest.raises(ValueError, match="Forbidden control character"):
        serialize_head("GET / HTTP/1.1", _head(value))


async def test_non_utf8_header_reaches_origin_as_it_came(make_proxy, raw_origin) -> None:
    origin = await raw_origin(OK)
    proxy = await make_proxy()
    url = origin.url("/latin1")
    answer = await proxy.raw(
        f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n".encode()
        + b"X-Test: caf\xe9\r\nX-Other: \xff\xfe and text\r\nConnection: close\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert len(origin.requests) == 1
    head = origin.requests[0]
    assert b"\r\nX-Test: caf\xe9\r\n" in head, head
    assert b"\r\nX-Other: \xff\xfe and text\r\n" in head, head
    # and the WARC request record holds the same bytes
    records = await proxy.recorded(url)
    request = next(r for r in records if r.rec_type == "request")
    # warcio reads a head that is not UTF-8 as ISO-8859-1: one character per byte
    assert dict(request.http_headers)["X-Test"].encode("latin-1") == b"caf\xe9"


@pytest.mark.parametrize("bad", [b"a\x00b", b"a\rb", b"a\x01b"])
async def test_control_bytes_never_reach_origin(make_proxy, raw_origin, bad: bytes) -> None:
    origin = await raw_origin(OK)
    proxy = await make_proxy()
    answer = await proxy.raw(
        f"GET {origin.url('/ctl')} HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n".encode()
        + b"X-Test: "
        + bad
        + b"\xe9\r\nConnection: close\r\n\r\n"
    )
    assert answer.split(b" ", 2)[1] == b"400", answer
    assert not await wait_until(lambda: bool(origin.requests), 0.3)
