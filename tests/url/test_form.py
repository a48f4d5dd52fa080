"""Command-URL form arguments: '&' and ';' interchangeable, decoded exactly once."""

from __future__ import annotations

import pytest

from wwwproxy.url import InvalidURL
from wwwproxy.url.form import FormArgs, parse_form_args


def test_amp_and_semicolon_are_interchangeable() -> None:
    assert parse_form_args("a=1&b=2;c=3") == [("a", "1"), ("b", "2"), ("c", "3")]
    assert parse_form_args(b"a=1;b=2") == parse_form_args("a=1&b=2")


def test_decoded_exactly_once() -> None:
    assert parse_form_args("q=a+b%20c%2B%26%3D") == [("q", "a b c+&=")]
    # a double-encoded value comes out encoded once
    assert parse_form_args("q=%2541") == [("q", "%41")]
    assert parse_form_args("k%3Dx=v") == [("k=x", "v")]


def test_missing_values_and_empty_pairs() -> None:
    assert parse_form_args("a&&b=;=v;") == [("a", ""), ("b", ""), ("", "v")]
    assert parse_form_args("") == [] and parse_form_args(None) == []


def test_repeated_keys_keep_order() -> None:
    args = FormArgs.parse("x=1&y=2&x=3")
    assert args.get("x") == "1"
    assert args.getall("x") == ["1", "3"]
    assert "y" in args and "z" not in args
    assert args.get("z", "none") == "none"


def test_query_then_body() -> None:
    args = FormArgs.parse("a=query", b"a=body&b=2")
    assert args.getall("a") == ["query", "body"]


def test_url_argument_decoded_once_then_canonicalized() -> None:
    args = FormArgs.parse("url=http%3A%2F%2FWWW.Example.com%2Fa%2520b%3Fq%3Dx%2By")
    url = args.url()
    assert url is not None
    # %2520 decoded once is %20 (a space in the path), not a literal '%20' decoded twice
    assert url.canonical == "http://www.example.com/a%20b?q=x+y"
    assert FormArgs.parse("other=1").url() is None


def test_url_argument_with_non_utf8_bytes_round_trips() -> None:
    url = FormArgs.parse("url=http://h/%FF").url()
    assert url is not None and url.canonical == "http://h/%FF"


def test_bad_url_argument_raises_invalid_url() -> None:
    with pytest.raises(InvalidURL):
        FormArgs.parse("url=http%3A%2F%2Fa%20b%2F").url()


def test_hostile_text_is_returned_verbatim_for_escaping_by_the_page() -> None:
    assert parse_form_args("q=%3Cscript%3Ealert(1)%3C/script%3E") == [
        ("q", "<script>alert(1)</script>")
    ]
