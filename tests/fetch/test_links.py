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


# --- the bound on the links taken from one page ------------------------------------------------

BOUNDED_PAGE = """<link rel=stylesheet href=s.css><a href=a.html>a</a> <a href=b.png>b</a>
<a href='#top'>top</a> <a href=a.html>a again</a> <img src=c.png> <a href=d.html>d</a>
<a href=c.png>the image</a> <a href=e.html>e</a> <a href=e.html>e again</a> <a href=''>self</a>
<a href=f.html#x>f</a> <img src=b.png>"""


def test_a_page_yields_at_most_max_links_and_counts_the_references_left_unread() -> None:
    base = "http://example.com/d/index.html"
    every = extract_html_links(BOUNDED_PAGE, base)
    assert [link.url.rsplit("/", 1)[1] for link in every] == [
        "s.css",
        "a.html",
        "b.png",
        "c.png",
        "d.html",
        "e.html",
        "f.html",
    ]
    assert every.left_out == 0
    assert every[2] == Link("http://example.com/d/b.png", "img", True)  # (the last <img>)
    bounded = extract_html_links(BOUNDED_PAGE, base, max_links=3)
    # an occurrence past the bound of a link taken still makes it a requisite: b.png
    assert bounded == every[:3]
    # c.png, d.html, e.html (once), f.html#x: "#top", "" and a.html again are no more links
    assert bounded.left_out == 4
    bounded = extract_html_links(BOUNDED_PAGE, base, max_links=4)
    assert bounded == every[:4] and bounded.left_out == 3
    assert extract_html_links(BOUNDED_PAGE, base, max_links=7) == every
    assert extract_html_links(BOUNDED_PAGE, base, max_links=7).left_out == 0


def test_a_style_sheet_yields_at_most_max_links() -> None:
    css = "@import 'a.css'; b { background: url(b.png) } i { background: url(c.png) }"
    bounded = extract_css_links(css, "http://example.com/s.css", max_links=1)
    assert [link.url for link in bounded] == ["http://example.com/a.css"]
    assert bounded.left_out == 2
