"""Pure parts of the upstream client: credentials from the URL."""

from __future__ import annotations

import base64

import pytest

from wwwproxy.recording.upstream import basic_authorization
from wwwproxy.url import canonicalize


@pytest.mark.parametrize(
    ("url", "credentials"),
    [
        ("http://user:pw@example.com/", b"user:pw"),
        ("http://user@example.com/", b"user:"),
        ("http://us%3Aer:p%40ss@example.com/", b"us:er:p@ss"),  # decoded exactly once
        ("http://%E2%82%AC:x@example.com/", "€:x".encode()),  # UTF-8, as browsers send it
        ("http://%FF:x@example.com/", b"\xff:x"),  # the URL's bytes, whatever they are
    ],
)
def test_basic_authorization_from_url(url, credentials):
    value = basic_authorization(canonicalize(url))
    assert value is not None and value.startswith("Basic ")
    assert base64.b64decode(value.removeprefix("Basic ")) == credentials


def test_no_credentials_no_authorization():
    assert basic_authorization(canonicalize("http://example.com/")) is None
