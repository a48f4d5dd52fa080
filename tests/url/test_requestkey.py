"""Non-GET archive keys (cdx-non-get-requests.txt, non-get-notes.md).

Expected keys are worked out by hand from the spec text; Base64 of bodies longer than a few
bytes is taken from the standard library, which is the RFC 4648 encoding the spec names.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.url.requestkey import (
    MAX_BODY_CHARS,
    MAX_JSON_DEPTH,
    encode_body,
    percent_plus,
    request_key,
)

URL = "http://example.org/p"
POST = URL + "?__wb_method=POST"


def post(content_type: str | None, body: bytes) -> str:
    return request_key(URL, "POST", content_type, body)


def b64(body: bytes) -> str:
    return "&__wb_post_data=" + base64.b64encode(body).decode("ascii")


# --- the spec's examples --------------------------------------------------------------------


def test_spec_json_example() -> None:
    body = b"""{
   "type": "event",
   "id": 44.0,
   "values": [true, false, null],
   "source": {
      "type": "component",
      "id": "a+b&c= d",
      "values": [3, 4]
   }
}"""
    expected = (
        "http://example.org/events?__wb_method=POST&type=event&id=44.0&values=True"
        "&values.2_=False&values.3_=None&type.2_=component&id.2_=a%2Bb%26c%3D+d"
        "&values.4_=3&values.5_=4"
    )
    assert request_key("http://example.org/events", "POST", "application/json", body) == expected


def test_spec_binary_example() -> None:
    key = request_key("http://example.org/chat", "POST", None, b"hello")
    assert key == "http://example.org/chat?__wb_method=POST&__wb_post_data=aGVsbG8="


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.org/", "http://example.org/?__wb_method=POST"),
        ("http://example.org/?page=1", "http://example.org/?page=1&__wb_method=POST"),
        ("http://example.org/?foo&", "http://example.org/?foo&&__wb_method=POST"),
        ("http://example.org/search?", "http://example.org/search?&__wb_method=POST"),  # notes
    ],
)
def test_method_separator(url: str, expected: str) -> None:
    assert request_key(url, "POST") == expected


# --- methods --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "get", "Get"])
def test_get_key_is_the_file_string(method: str) -> None:
    assert request_key(URL, method, "text/plain", b"ignored") == URL


def test_method_upper_cased() -> None:
    assert request_key(URL, "post", None, b"hello") == POST + "&__wb_post_data=aGVsbG8="
    assert request_key(URL, "mkCol") == URL + "?__wb_method=MKCOL"


def test_put_folds_the_body_in() -> None:
    assert (
        request_key(URL, "PUT", None, b"hello") == URL + "?__wb_method=PUT&__wb_post_data=aGVsbG8="
    )


@pytest.mark.parametrize("method", ["DELETE", "PATCH", "HEAD", "OPTIONS", "PROPFIND"])
def test_other_methods_add_only_the_method(method: str) -> None:
    key = request_key(URL, method, "application/x-www-form-urlencoded", b"a=1")
    assert key == f"{URL}?__wb_method={method}"


def test_empty_body_adds_nothing() -> None:
    assert post("application/octet-stream", b"") == POST
    assert request_key(URL, "PUT", "application/json") == URL + "?__wb_method=PUT"


@pytest.mark.parametrize("method", ["", "PO ST", "GET\n", "P\u00d6ST", "a/b", "(x)", "A:B"])
def test_bad_method_is_a_value_error(method: str) -> None:
    with pytest.raises(ValueError, match="not an HTTP token"):
        request_key(URL, method)


# --- binary -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [None, "", "application/octet-stream", "image/png", "text/html; charset=utf-8", "x"],
)
def test_other_types_are_binary(content_type: str | None) -> None:
    # 0x00 0x03 -> 000000 000000 0011(00) -> "AAM="
    assert post(content_type, b"\x00\x03") == POST + "&__wb_post_data=AAM="


def test_amf_is_binary() -> None:
    assert post("application/x-amf", b"\x00\x03") == POST + "&__wb_post_data=AAM="


# --- JSON ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # numbers as Python prints them after json.loads
        (
            b'{"n": [1e5, 1E-7, -0, -0.0, 44.0, 10, 1e16]}',
            "&n=100000.0&n.2_=1e-07&n.3_=0&n.4_=-0.0&n.5_=44.0&n.6_=10&n.7_=1e%2B16",
        ),
        (b'{"big": 1e400, "nan": NaN, "neg": -Infinity}', "&big=inf&nan=nan&neg=-inf"),
        # a repeated name: last value, first place
        (b'{"a": 1, "b": 2, "a": 3}', "&a=3&b=2"),
        # empty names are dropped, but an object under one still gives its members
        (b'{"": 1, "x": {"": [2]}, "y": 3, "": {"z": 4}}', "&z=4&y=3"),
        # arrays of objects: names count across the whole document
        (b'[{"a": "x y"}, {"a": "~*"}]', "&a=x+y&a.2_=~%2A"),
        (b'{"\xc3\xbc": "\xe2\x82\xac x"}', "&%C3%BC=%E2%82%AC+x"),
        (b'{"e": ""}', "&e="),
        # a generated name is counted like any other name (notes)
        (b'{"a": [1, 2], "a.2_": [3, 4]}', "&a=1&a.2_=2&a.2_.2_=3&a.2_.3_=4"),
        # where pywb's dict overwrote "a.2_=x" in place, the spec only appends
        (b'{"a.2_": "x", "a": [1, 2]}', "&a.2_=x&a=1&a.2_=2"),
        # top-level scalars and empty containers add nothing
        (b'"hello"', ""),
        (b"42", ""),
        (b"{}", ""),
        (b"[[], {}]", ""),
    ],
)
def test_json(body: bytes, expected: str) -> None:
    assert post("application/json", body) == POST + expected
    assert encode_body("application/json", body) == expected


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON;charset=UTF-8", " application/json"],
)
def test_json_content_type_variants(content_type: str) -> None:
    assert post(content_type, b'{"k": true}') == POST + "&k=True"


def test_json_in_utf16_is_detected_as_json_loads_does() -> None:
    assert post("application/json", '{"k": "\u00e9"}'.encode("utf-16")) == POST + "&k=%C3%A9"


def test_json_integer_past_pythons_digit_limit() -> None:
    digits = "1" + "0" * 4999
    key = post("application/json", b'{"a": ' + digits.encode() + b"}")
    assert key == POST + "&a=" + digits[: MAX_BODY_CHARS - 2]
    # the same rendering of the other numbers in such a document
    key = post("application/json", b'{"z": [-0, 7, 1.5], "a": ' + digits.encode() + b"}")
    assert key == POST + "&z=0&z.2_=7&z.3_=1.5&a=" + digits[: MAX_BODY_CHARS - 22]


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": ',
        b"{'a': 1}",
        b'{"a": 1} x',
        b"\xff\xfe\xfd",
        b'{"a": "\xff"}',
        b'{"a": "\\ud800"}',  # a lone surrogate: not UTF-8
        b'{"\\udfff": 1}',
        b"[" * 100_000,
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_unparseable_json_adds_nothing_but_text_plain_is_binary(body: bytes) -> None:
    assert post("application/json", body) == POST
    assert post("text/plain", body) == POST + b64(body)[: MAX_BODY_CHARS + 1]


def test_json_depth_limit() -> None:
    deepest = b'{"k": ' + b"[" * (MAX_JSON_DEPTH - 1) + b"1" + b"]" * (MAX_JSON_DEPTH - 1) + b"}"
    assert post("application/json", deepest) == POST + "&k=1"
    too_deep = b"[" + deepest + b"]"
    assert post("application/json", too_deep) == POST
    assert post("text/plain", too_deep) == POST + b64(too_deep)


# --- text/plain -----------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", "TEXT/PLAIN"])
def test_text_plain(content_type: str) -> None:
    assert post(content_type, b'{"a": "b c"}') == POST + "&a=b+c"
    assert post(content_type, b"hello") == POST + "&__wb_post_data=aGVsbG8="
    assert post(content_type, b"42") == POST  # JSON with no fields adds nothing


# --- application/x-www-form-urlencoded ------------------------------------------------------

FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"a=1&b=two", "&a=1&b=two"),
        # decoded once, then percent-plus encoded: "*" -> %2A, "+" -> space -> "+",
        # %2B -> "+" -> %2B, %7E -> "~", lower-case hex -> upper
        (b"q=a*b+c%2B%7e%2a", "&q=a%2Ab+c%2B~%2A"),
        # spec over pywb: structure kept, an encoded "&" stays encoded
        (b"a=b%26c%3Dd", "&a=b%26c%3Dd"),
        # raw UTF-8 and its escaped form give the same key
        (b"name=J\xc3\xbcrgen K", "&name=J%C3%BCrgen+K"),
        (b"name=J%C3%BCrgen+K", "&name=J%C3%BCrgen+K"),
        # empty pairs, bare names, empty names, a second "=" inside a value
        (b"a=1&&x&=y&e=&k=v=w", "&a=1&&x&=y&e=&k=v%3Dw"),
        # a byte that is not UTF-8 once decoded stays that byte; a broken escape is literal
        (b"z=%FF%zz%4", "&z=%FF%25zz%254"),
        (b"&", "&&"),
    ],
)
def test_urlencoded(body: bytes, expected: str) -> None:
    assert post(FORM, body) == POST + expected


def test_urlencoded_with_charset_and_case() -> None:
    assert post(FORM + "; charset=UTF-8", b"a=%20") == POST + "&a=+"
    assert post("Application/X-WWW-Form-URLEncoded", b"a=%20") == POST + "&a=+"


def test_urlencoded_not_utf8_is_binary() -> None:
    # 61 3D FF -> 011000 010011 110111 111111 -> "YT3/"
    assert post(FORM, b"a=\xff") == POST + "&__wb_post_data=YT3/"
    # the charset parameter is not read: Latin-1 bytes are still not UTF-8
    # 61 3D E9 -> 011000 010011 110111 101001 -> "YT3p"
    assert post(FORM + "; charset=ISO-8859-1", b"a=\xe9") == POST + "&__wb_post_data=YT3p"


# --- multipart ------------------------------------------------------------------------------

MULTIPART = (
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="title"\r\n'
    b"\r\n"
    b"Hi there\r\n"
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="file"; filename="a.bin"\r\n'
    b"Content-Type: application/octet-stream\r\n"
    b"\r\n"
    b"\x00\xff a\r\n"
    b"--XyZ--\r\n"
)


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/form-data; boundary=XyZ",
        'multipart/form-data; boundary="XyZ"',
        "Multipart/Form-Data;charset=utf-8;BOUNDARY=XyZ",
        "multipart/mixed; boundary=XyZ",
    ],
)
def test_multipart_with_a_file_part(content_type: str) -> None:
    assert post(content_type, MULTIPART) == POST + "&title=Hi+there&file=%00%FF+a"


def mp(*parts: bytes, boundary: bytes = b"B") -> bytes:
    return b"".join(b"--" + boundary + b"\r\n" + p + b"\r\n" for p in parts) + (
        b"--" + boundary + b"--"
    )


def field(name: bytes, value: bytes) -> bytes:
    return b'Content-Disposition: form-data; name="' + name + b'"\r\n\r\n' + value


MP = "multipart/form-data; boundary=B"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (mp(field(b"a", b"")), "&a="),
        (mp(field(b"\xc3\xbc", b"x"), field(b"a b", b"1+1")), "&%C3%BC=x&a+b=1%2B1"),
        (
            mp(field(b"t", b"line1\r\nline2 --B not a delimiter")),
            "&t=line1%0D%0Aline2+--B+not+a+delimiter",
        ),
        # parameter parsing as Python's cgi did it
        (mp(field(b"a;b", b"1")), "&a%3Bb=1"),
        (mp(field(b'a\\"b', b"1")), "&a%22b=1"),
        (mp(b"content-disposition: FORM-DATA; NAME=tok\r\n\r\nv"), "&tok=v"),
        (mp(b"Content-Disposition: form-data;\r\n name=folded\r\n\r\nv"), "&folded=v"),
        # preamble, transport padding and epilogue
        (b"preamble\r\n--B  \r\n" + field(b"a", b"1") + b"\r\n--B--\r\nepilogue", "&a=1"),
        # a body with no fields adds nothing
        (b"--B--\r\n", ""),
    ],
)
def test_multipart(body: bytes, expected: str) -> None:
    assert post(MP, body) == POST + expected


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data", MULTIPART),  # no boundary
        ("multipart/form-data; boundary=", MULTIPART),
        ("multipart/form-data; boundary=XyZ; boundary=XyZ", MULTIPART),
        ("multipart/form-data; boundary=" + "x" * 71, MULTIPART),
        ("multipart/form-data; boundary=Other", MULTIPART),  # boundary not in the body
        ("multipart/form-data; boundary=XyZ", MULTIPART[:-9]),  # no closing delimiter
        ("multipart/form-data; boundary=XyZ", MULTIPART.replace(b"\r\n", b"\n")),  # bare LF
        (MP, mp(b"Content-Type: text/plain\r\n\r\nv")),  # no Content-Disposition
        (MP, mp(b"Content-Disposition: form-data\r\n\r\nv")),  # no name
        (MP, mp(b"Content-Disposition: attachment; name=a\r\n\r\nv")),
        (MP, mp(b"Content-Disposition: form-data; name=a\r\n" + field(b"b", b"v"))),  # two
        (MP, mp(field(b"a", b"1").replace(b"\r\n\r\n", b"\r\n"))),  # no blank line
        (MP, mp(b"no colon here\r\n" + field(b"a", b"1"))),
        (MP, mp(field(b"a", b"1") + b"\r\n--Bx")),  # a delimiter followed by junk
        (MP, b"--B\r\n" + field(b"a", b"1") + b"\r\n--B\r\n" + field(b"a", b"1")),
        (MP, b"--B"),
    ],
)
def test_malformed_multipart_is_binary(content_type: str, body: bytes) -> None:
    assert post(content_type, body) == POST + b64(body)[: MAX_BODY_CHARS + 1]


# --- the 4096 cut ---------------------------------------------------------------------------


def test_cut_binary() -> None:
    key = post(None, b"\x00" * 4000)  # 5336 Base64 characters, all "A"
    assert key == POST + "&__wb_post_data=" + "A" * (MAX_BODY_CHARS - len("__wb_post_data="))
    assert len(key) == len(POST) + 1 + 4096


def test_no_cut_below_the_limit() -> None:
    # 3060 bytes -> 4080 characters; with "__wb_post_data=" 4095 < 4096
    key = post(None, b"\x00" * 3060)
    assert key == POST + "&__wb_post_data=" + "A" * 4080


def test_cut_may_split_an_escape() -> None:
    key = post(FORM, b"v=" + "\u00e9".encode() * 3000)
    assert key == POST + "&v=" + ("%C3%A9" * 682) + "%C"


def test_cut_after_percent_decoding() -> None:
    # 3 characters of body per output character: the whole first 12,000 are needed
    key = post(FORM, b"v=" + b"%41" * 5000)
    assert key == POST + "&v=" + "A" * 4094


def test_cut_json_and_multipart() -> None:
    body = json.dumps({"k": "a" * 5000}).encode()
    assert post("application/json", body) == POST + "&k=" + "a" * 4094
    assert post(MP, mp(field(b"f", b"\x01" * 2000))) == POST + "&f=" + "%01" * 1364 + "%0"


# --- percent plus encoding ------------------------------------------------------------------


def test_percent_plus() -> None:
    keep = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-._~"
    assert percent_plus(keep) == keep
    assert percent_plus(" ") == "+"
    assert percent_plus("+&=%/?*!") == "%2B%26%3D%25%2F%3F%2A%21"
    assert percent_plus(b"\x00\x7f\x80\xff") == "%00%7F%80%FF"
    assert percent_plus("\u00fc\u20ac") == "%C3%BC%E2%82%AC"
    assert percent_plus(b"") == ""


def test_percent_plus_lone_surrogate_raises() -> None:
    with pytest.raises(UnicodeEncodeError):
        percent_plus("\ud800")


def test_encode_body() -> None:
    assert encode_body(None, b"hello") == "&__wb_post_data=aGVsbG8="
    assert encode_body("application/json", b"{}") == ""
    assert encode_body("text/plain", b"") == ""
    long = encode_body(None, b"\x00" * 4000)
    assert len(long) == 1 + len("__wb_post_data=") + 5336  # not cut


# --- properties -----------------------------------------------------------------------------

CONTENT_TYPES = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.builds(
        lambda head, tail: head + tail,
        st.sampled_from(
            [
                "application/json",
                "application/x-amf",
                FORM,
                "multipart/form-data",
                "multipart/form-data; boundary=B",
                "multipart/form-data; boundary=",
                "text/plain",
                "TEXT/PLAIN; charset=utf-8",
            ]
        ),
        st.text(max_size=20),
    ),
)

BODIES = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda v: json.dumps(v).encode(),
        st.recursive(
            st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
            max_leaves=20,
        ),
    ),
    st.builds(
        lambda parts: mp(*(field(n, v) for n, v in parts)),
        st.lists(st.tuples(st.binary(max_size=8), st.binary(max_size=20)), max_size=4),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["POST", "PUT", "post", "DELETE", "GET"]),
    content_type=CONTENT_TYPES,
    body=BODIES,
    url=st.sampled_from([URL, URL + "?a=1", URL + "?"]),
)
def test_key_never_raises_and_is_a_cdxj_field(
    method: str, content_type: str | None, body: bytes, url: str
) -> None:
    key = request_key(url, method, content_type, body)
    assert key.startswith(url)
    assert all("!" <= c <= "~" for c in key), key
    assert len(key) <= len(url) + len("?__wb_method=POST&") + MAX_BODY_CHARS


@settings(max_examples=200, deadline=None)
@given(content_type=CONTENT_TYPES, body=BODIES, limit=st.integers(1, 400))
def test_limit_only_drops_what_the_cut_drops(
    content_type: str | None, body: bytes, limit: int
) -> None:
    assert (
        encode_body(content_type, body, limit=limit)[:limit]
        == encode_body(content_type, body)[:limit]
    )


NAME_BYTES = st.binary(max_size=8).filter(lambda b: b'"' not in b and b"\\" not in b)
VALUE_BYTES = st.binary(max_size=30).filter(lambda b: b"\r\n--B" not in b)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(NAME_BYTES.filter(lambda b: b"\r" not in b and b"\n" not in b), VALUE_BYTES),
        max_size=5,
    )
)
def test_multipart_fields_round_trip(fields: list[tuple[bytes, bytes]]) -> None:
    body = mp(*(field(n, v) for n, v in fields))
    expected = "".join(f"&{percent_plus(n)}={percent_plus(v)}" for n, v in fields)
    assert encode_body(MP, body) == expected
