"""Links in general: content types, and that extraction from HTML and CSS is total and
yields canonical, de-duplicated links of known kinds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wwwproxy.fetch.css_links import extract_css_links
from wwwproxy.fetch.html_links import extract_html_links
from wwwproxy.fetch.links import REQUISITE_KINDS, Link, is_css, is_html
from wwwproxy.url import canonicalize

LINK_KINDS = {"a", "area", "link", "meta-refresh"}

# --- content types and scope -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "html", "css"),
    [
        ("text/html", True, False),
        ("Text/HTML; charset=ISO-8859-1", True, False),
        ("application/xhtml+xml", True, False),
        (" text/css ;charset=utf-8", False, True),
        ("text/plain", False, False),
        ("text/html-sandboxed", False, False),
        ("", False, False),
        (None, False, False),
    ],
)
def test_content_type_helpers(content_type: str | None, html: bool, css: bool) -> None:
    assert (is_html(content_type), is_css(content_type)) == (html, css)


# --- properties ------------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "<a href=",
        "<img src=",
        "<img srcset=",
        "<base href=",
        "<link rel=stylesheet href=",
        "<meta http-equiv=refresh content=",
        "<style>",
        "</style>",
        "<script>",
        "</script>",
        "<!--",
        "-->",
        "<![CDATA[",
        " style=",
        '"',
        "'",
        ">",
        "/>",
        " ",
        "\n",
        "url(",
        ")",
        "@import ",
        "/*",
        "*/",
        "\\",
        "\\26 ",
        ",",
        " 1x",
        " 100w",
        "0;url=",
        "&amp;",
        "&copy",
        "&#",
        "http:",
        "https://",
        "//",
        "../",
        "?",
        "#",
        "%",
        "%2e",
        "[",
        "]",
        ":",
        "@",
        "é",
        "\u4e2d",
        "\x00",
        "\ud800",
        "javascript:",
        "data:",
        "x.example",
        "a",
        "b.png",
    ]
)
HTMLISH = st.one_of(st.text(max_size=80), st.lists(PIECES, max_size=30).map("".join))


def check_links(links: list[Link]) -> None:
    for link in links:
        assert canonicalize(link.url).file == link.url
        assert link.url.startswith(("http://", "https://"))
        assert "#" not in link.url
        assert link.requisite == (link.kind in REQUISITE_KINDS)
        assert link.kind in REQUISITE_KINDS | LINK_KINDS
    assert len({link.url for link in links}) == len(links)


@given(HTMLISH)
def test_html_extraction_is_total_and_canonical(text: str) -> None:
    check_links(extract_html_links(text, "http://example.com/dir/page.html"))


@given(HTMLISH)
def test_css_extraction_is_total_and_canonical(text: str) -> None:
    check_links(extract_css_links(text, "http://example.com/dir/sheet.css"))


@given(st.binary(max_size=200), st.sampled_from([None, "utf-8", "latin1", "shift_jis", "x?"]))
def test_byte_input_is_total_and_canonical(data: bytes, encoding: str | None) -> None:
    check_links(extract_html_links(data, "http://example.com/", encoding=encoding))
    check_links(extract_css_links(data, "http://example.com/", encoding=encoding))
