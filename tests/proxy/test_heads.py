"""Heads the proxy writes itself (:mod:`wwwproxy.proxy.heads`), as bytes."""

from __future__ import annotations

import pytest

from wwwproxy.proxy.heads import interim_head


@pytest.mark.parametrize(
    ("status", "reason", "headers", "head"),
    [
        (
            103,
            "Early Hints",
            [("Link", "</styles.css>; rel=preload; as=style"), ("X-My-Header", "test")],
            b"HTTP/1.1 103 Early Hints\r\n"
            b"Link: </styles.css>; rel=preload; as=style\r\n"
            b"X-My-Header: test\r\n"
            b"\r\n",
        ),
        (102, "Processing", [], b"HTTP/1.1 102 Processing\r\n\r\n"),
        (199, "", [("Via", "1.1 wwwproxy")], b"HTTP/1.1 199 \r\nVia: 1.1 wwwproxy\r\n\r\n"),
        # a reason phrase that is not printable ASCII is left out
        (103, "Fr\u00fche Hinweise", [], b"HTTP/1.1 103 \r\n\r\n"),
        # a value that was not UTF-8 goes out as its bytes read as ISO-8859-1, as every head
        (
            103,
            "Early Hints",
            [("X-Name", "caf\udce9")],
            b"HTTP/1.1 103 Early Hints\r\nX-Name: caf\xc3\xa9\r\n\r\n",
        ),
    ],
)
def test_interim_head(status, reason, headers, head):
    assert interim_head(status, reason, headers) == head
