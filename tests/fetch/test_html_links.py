"""HTML link extraction: what a browser would load or follow from a page, canonicalized."""

from __future__ import annotations

import pytest

from wwwproxy.fetch.html_links import extract_html_links, parse_refresh, parse_srcset

from .conftest import triples, urls

PAGE_URL = "http://www.example.com/news/2024/story.html"
LINK_KINDS = {"a", "area", "link", "meta-refresh"}

REALISTIC_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Refresh" content="300; url=/news/2024/story.html?refresh=1">
<title>Story &amp; more <a href="not-in-title.html"></title>
<link rel="stylesheet" href="/static/site.css">
<link rel="alternate stylesheet" href="/static/contrast.css" title="High contrast">
<link rel="Shortcut Icon" href="/favicon.ico">
<link rel="apple-touch-icon" href="/apple-touch-icon.png">
<link rel="preload" href="/static/font.woff2" as="font" crossorigin>
<link rel="modulepreload" href="/static/app.mjs">
<link rel="alternate" type="application/rss+xml" href="/feed.xml">
<link rel="next" href="story-2.html">
<link rel="dns-prefetch" href="//cdn.example.net">
<style>
@import url("print.css") print;
@import 'theme.css';
body { background: url(img/bg.png) }
/* .old { background: url(img/old.png) } */
</style>
<script src="/static/app.js"></script>
<script>var s = "<img src='not-a-link.png'>";</script>
</head>
<body background="img/paper.gif">
<a href="../index.html">Up</a>
<a href="story.html?page=2&amp;lang=en#comments">Page 2</a>
<a href="https://Other.Example.org:443/">Other</a>
<a href="mailto:editor@example.com">Mail</a>
<a href="javascript:void(0)">JS</a>
<a href="#top">Top</a>
<img src="img/photo.jpg" srcset="img/photo-2x.jpg 2x, img/photo-3x.jpg 3x" alt="A photo">
<picture>
  <source srcset="img/wide.webp 1200w, img/narrow.webp 600w" type="image/webp">
  <img src="img/photo.jpg">
</picture>
<video src="media/clip.mp4" poster="media/poster.jpg">
  <source src="media/clip.webm" type="video/webm"><track src="media/subs.vtt">
</video>
<audio src="media/sound.ogg"></audio>
<map name="m"><area href="/map/north.html" shape="rect" coords="0,0,10,10"></map>
<iframe src="https://embed.example.com/widget?id=7"></iframe>
<frame src="frame1.html">
<embed src="media/anim.swf">
<object data="media/doc.pdf"></object>
<form action="/search">
  <input type="IMAGE" src="img/go.png"><input type="text" src="img/not-an-image.png">
</form>
<div style="background-image: url('img/tile.png')">tiles</div>
<svg><image href="img/vector.svg"/></svg>
<img src="data:image/png;base64,iVBORw0KGgo=">
<a href="tel:+15555550100">Call</a>
<a href="img/photo.jpg">Full size</a>
</body>
</html>
"""

W = "http://www.example.com"
N = "http://www.example.com/news/2024"
REALISTIC_LINKS = [
    (f"{W}/news/2024/story.html?refresh=1", "meta-refresh", False),
    (f"{W}/static/site.css", "css", True),
    (f"{W}/static/contrast.css", "css", True),
    (f"{W}/favicon.ico", "icon", True),
    (f"{W}/apple-touch-icon.png", "icon", True),
    (f"{W}/static/font.woff2", "preload", True),
    (f"{W}/static/app.mjs", "preload", True),
    (f"{W}/feed.xml", "link", False),
    (f"{N}/story-2.html", "link", False),
    (f"{N}/print.css", "import", True),
    (f"{N}/theme.css", "import", True),
    (f"{N}/img/bg.png", "css-url", True),
    (f"{W}/static/app.js", "script", True),
    (f"{N}/img/paper.gif", "img", True),
    (f"{W}/news/index.html", "a", False),
    (f"{N}/story.html?page=2&lang=en", "a", False),
    ("https://other.example.org/", "a", False),
    (f"{N}/img/photo.jpg", "img", True),
    (f"{N}/img/photo-2x.jpg", "srcset", True),
    (f"{N}/img/photo-3x.jpg", "srcset", True),
    (f"{N}/img/wide.webp", "srcset", True),
    (f"{N}/img/narrow.webp", "srcset", True),
    (f"{N}/media/clip.mp4", "media", True),
    (f"{N}/media/poster.jpg", "poster", True),
    (f"{N}/media/clip.webm", "media", True),
    (f"{N}/media/subs.vtt", "media", True),
    (f"{N}/media/sound.ogg", "media", True),
    (f"{W}/map/north.html", "area", False),
    ("https://embed.example.com/widget?id=7", "iframe", True),
    (f"{N}/frame1.html", "frame", True),
    (f"{N}/media/anim.swf", "embed", True),
    (f"{N}/media/doc.pdf", "object", True),
    (f"{N}/img/go.png", "img", True),
    (f"{N}/img/tile.png", "css-url", True),
    (f"{N}/img/vector.svg", "img", True),
]


# --- HTML -------------------------------------------------------------------------------------


def test_realistic_page_gives_every_link_in_document_order() -> None:
    assert triples(extract_html_links(REALISTIC_PAGE, PAGE_URL)) == REALISTIC_LINKS


def test_realistic_page_as_bytes_gives_the_same() -> None:
    assert triples(extract_html_links(REALISTIC_PAGE.encode(), PAGE_URL)) == REALISTIC_LINKS


def test_base_href_applies_to_the_whole_document_and_only_the_first_counts() -> None:
    html = (
        '<a href="before.html">'
        '<base href="../assets/">'
        '<base href="http://elsewhere.example/">'
        '<img src="pic.png">'
    )
    assert urls(extract_html_links(html, "http://example.com/a/b/page.html")) == [
        "http://example.com/a/assets/before.html",
        "http://example.com/a/assets/pic.png",
    ]


def test_absolute_base_href_moves_links_to_another_host() -> None:
    html = '<base href="https://cdn.example.net/v2/index.html"><a href="x?y=1">'
    assert urls(extract_html_links(html, "http://example.com/")) == [
        "https://cdn.example.net/v2/x?y=1"
    ]


@pytest.mark.parametrize("base", ["javascript:alert(1)", "data:text/html,x", "", "http://"])
def test_unusable_base_href_leaves_the_page_url_as_base(base: str) -> None:
    html = f'<base href="{base}"><a href="x.html">'
    assert urls(extract_html_links(html, "http://example.com/d/p")) == [
        "http://example.com/d/x.html"
    ]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("?a=1&amp;b=2", "http://example.com/p?a=1&b=2"),
        ("?a=1&#38;b=2&#x26;c=3", "http://example.com/p?a=1&b=2&c=3"),
        # legacy entities without ";" before "=" or a letter stay as written in attributes
        ("?a=1&copy=2&region=3&notify=4", "http://example.com/p?a=1&copy=2&region=3&notify=4"),
        ("?a=1&amp", "http://example.com/p?a=1&"),
        ("caf&eacute;.html", "http://example.com/caf%C3%A9.html"),
        ("&lt;x&gt;", "http://example.com/%3Cx%3E"),
        ("?q=&unknown;", "http://example.com/p?q=&unknown;"),
    ],
)
def test_entities_in_attributes_are_decoded_as_browsers_do(href: str, expected: str) -> None:
    assert urls(extract_html_links(f'<a href="{href}">', "http://example.com/p")) == [expected]


@pytest.mark.parametrize(
    ("base", "ref", "expected"),
    [
        ("http://a.example/b/c/d.html", "../../x", "http://a.example/x"),
        ("http://a.example/b/c/d.html", "../../../../x", "http://a.example/x"),
        ("http://a.example/b/c/d.html", "./x/./y/../z", "http://a.example/b/c/x/z"),
        ("http://a.example/b/c/d.html", "//other.example/x", "http://other.example/x"),
        ("https://a.example/b/c/d.html", "//other.example/x", "https://other.example/x"),
        ("http://a.example/b/c/d.html?old=1", "?q=1", "http://a.example/b/c/d.html?q=1"),
        ("http://a.example/b/c/d.html?old=1", "#frag", None),
        ("http://a.example/b/c/d.html", "e.html#frag", "http://a.example/b/c/e.html"),
        ("http://a.example/b/c/d.html", "/abs/path", "http://a.example/abs/path"),
        ("http://a.example/b/c/d.html", "\\back\\slash?x\\y", "http://a.example/back/slash?x%5Cy"),
        ("http://a.example/b/c/d.html", "\\\\other.example\\x", "http://other.example/x"),
        ("http://a.example/b/c/d.html", "  e.html\n ", "http://a.example/b/c/e.html"),
        ("http://a.example/b/c/d.html", "e\n.ht\tml", "http://a.example/b/c/e.html"),
        ("http://a.example/b/c/d.html", "ht\ntp://x.example/", "http://x.example/"),
        ("http://a.example/b/c/d.html", "my file.html", "http://a.example/b/c/my%20file.html"),
        ("http://a.example/b/c/d.html", "http:e.html", "http://a.example/b/c/e.html"),
        ("http://a.example/b/c/d.html", "https:e.example/x", "https://e.example/x"),
        ("http://a.example/b/c/d.html", "http:///x.example/y", "http://x.example/y"),
        ("http://a.example/b/c/d.html", "HTTP://X.Example:80/%7Ey", "http://x.example/~y"),
        ("http://a.example/b/c/d.html", "http://u:p@x.example/", "http://u:p@x.example/"),
        ("http://a.example/b/", "%2e%2e/x", "http://a.example/x"),
        ("http://a.example/b/", "é/ü?ß", "http://a.example/b/%C3%A9/%C3%BC?%C3%9F"),
        ("http://a.example/b/", "http://bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://a.example/b/", "", None),
        ("http://a.example/b/", "   ", None),
    ],
)
def test_relative_references_resolve_like_a_browser(
    base: str, ref: str, expected: str | None
) -> None:
    got = urls(extract_html_links(f'<a href="{ref}">', base))
    assert got == ([] if expected is None else [expected])


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",
        " JavaScript:alert(1)",
        "java\nscript:alert(1)",
        "data:text/html,<b>x</b>",
        "mailto:someone@example.com",
        "tel:+1555",
        "about:blank",
        "blob:http://example.com/uuid",
        "ftp://ftp.example.com/file",
        "file:///etc/passwd",
        "ws://example.com/socket",
        "c:\\windows\\file.html",
    ],
)
def test_non_web_schemes_are_skipped(href: str) -> None:
    assert extract_html_links(f'<a href="{href}"><img src="{href}">', "http://example.com/") == []


@pytest.mark.parametrize(
    "href",
    [
        "http://exa mple.com/",
        "http://[::1/",
        "http://example.com:99999/",
        "http://example.com:port/",
        "http://",
        "http://:8080/x",
        "//",
        "http://ex%00ample.com/",
        "http://" + "a" * 64 + ".example/",
    ],
)
def test_invalid_urls_are_skipped_not_raised(href: str) -> None:
    html = f'<a href="{href}"><a href="ok.html">'
    assert urls(extract_html_links(html, "http://example.com/")) == ["http://example.com/ok.html"]


def test_no_usable_page_url_keeps_only_absolute_links() -> None:
    html = '<a href="rel.html"><a href="http://example.com/abs">'
    assert urls(extract_html_links(html, "not a url at all")) == ["http://example.com/abs"]


def test_duplicates_keep_the_first_place_and_a_requisite_wins() -> None:
    html = (
        '<a href="pic.png">big</a><a href="page.html#one"><a href="page.html#two">'
        '<img src="pic.png"><a href="pic.png">'
    )
    assert triples(extract_html_links(html, "http://example.com/")) == [
        ("http://example.com/pic.png", "img", True),
        ("http://example.com/page.html", "a", False),
    ]


@pytest.mark.parametrize(
    ("rel", "kind", "requisite"),
    [
        ("stylesheet", "css", True),
        ("STYLESHEET", "css", True),
        ("alternate stylesheet", "css", True),
        ("icon", "icon", True),
        ("shortcut icon", "icon", True),
        ("apple-touch-icon-precomposed", "icon", True),
        ("mask-icon", "icon", True),
        ("preload", "preload", True),
        ("modulepreload", "preload", True),
        ("manifest", "manifest", True),
        ("alternate", "link", False),
        ("next", "link", False),
        ("canonical", "link", False),
        ("prefetch", "link", False),
        ("", "link", False),
    ],
)
def test_link_rel_decides_kind(rel: str, kind: str, requisite: bool) -> None:
    got = triples(extract_html_links(f'<link rel="{rel}" href="/r">', "http://example.com/"))
    assert got == [("http://example.com/r", kind, requisite)]


@pytest.mark.parametrize("rel", ["dns-prefetch", "preconnect", "preconnect dns-prefetch"])
def test_link_rels_that_name_no_resource_are_skipped(rel: str) -> None:
    assert extract_html_links(f'<link rel="{rel}" href="//cdn.example/">', "http://e.com/") == []


# --- srcset and refresh ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("srcset", "expected"),
    [
        ("a.jpg", ["a.jpg"]),
        ("a.jpg 1x, b.jpg 2x", ["a.jpg", "b.jpg"]),
        ("a.jpg?x=1,2 1x, b.jpg 2x", ["a.jpg?x=1,2", "b.jpg"]),  # a comma inside a URL
        ("a.jpg,b.jpg", ["a.jpg,b.jpg"]),  # no whitespace: one URL (as the spec says)
        ("a.jpg, b.jpg", ["a.jpg", "b.jpg"]),  # trailing commas end a URL
        ("a.jpg,,, b.jpg 2x,", ["a.jpg", "b.jpg"]),
        (" ,, a.jpg 100w ,b.jpg 200w", ["a.jpg", "b.jpg"]),
        ("a.jpg 100w 50h", ["a.jpg"]),
        ("a.jpg 50h", []),  # a height needs a width
        ("a.jpg 0w, b.jpg -1x, c.jpg 1x 2x, d.jpg 1y, e.jpg 1.5x", ["e.jpg"]),
        ("a.jpg 1x (extra words), b.jpg 2x", ["b.jpg"]),  # "(extra words)" is one bad descriptor
        ("a.jpg 1e1x, b.jpg .5x", ["a.jpg", "b.jpg"]),
        ("data:image/png;base64,AAA= 1x, c.png 2x", ["data:image/png;base64,AAA=", "c.png"]),
        ("\ta.jpg\n1x,\nb.jpg\t2x", ["a.jpg", "b.jpg"]),
        ("", []),
        (" , ", []),
    ],
)
def test_srcset_is_split_by_the_spec_algorithm(srcset: str, expected: list[str]) -> None:
    assert parse_srcset(srcset) == expected


def test_srcset_urls_are_resolved_and_data_urls_dropped() -> None:
    html = '<img srcset="data:image/gif;base64,R0lG 1x, ../big.jpg?w=1,2 2x">'
    assert triples(extract_html_links(html, "http://example.com/a/b")) == [
        ("http://example.com/big.jpg?w=1,2", "srcset", True)
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("5; url=next.html", "next.html"),
        ("5;URL='next.html'", "next.html"),
        ('0; url="next.html" trailing', "next.html"),
        ("0,url=next.html", "next.html"),
        ("3 ; Url = next.html", "next.html"),
        ("0; next.html", "next.html"),
        ("1.5; url=next.html", "next.html"),
        (".5 url=next.html", "next.html"),
        ("0; urlx.html", "urlx.html"),
        ("0; u.html", "u.html"),
        ("0; 'quoted.html", "quoted.html"),
        ("5", None),
        ("5;", None),
        ("", None),
        ("soon; url=x.html", None),
        ("5x; url=x.html", None),
    ],
)
def test_meta_refresh_content_is_parsed_by_the_spec(content: str, expected: str | None) -> None:
    assert parse_refresh(content) == expected


# --- character encodings ---------------------------------------------------------------------


def test_latin1_page_with_a_meta_charset() -> None:
    page = b'<html><head><meta charset="iso-8859-1"></head><a href="caf\xe9.html?q=\xe9">'
    assert urls(extract_html_links(page, "http://example.com/")) == [
        # the path is always UTF-8; a query is sent in the page's encoding, as browsers do
        "http://example.com/caf%C3%A9.html?q=%E9"
    ]


def test_meta_http_equiv_content_type_sets_the_encoding() -> None:
    page = (
        b'<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">'
        b'<a href="/\x93\xfa\x96{?q=\x93\xfa">'
    )
    assert urls(extract_html_links(page, "http://example.com/")) == [
        "http://example.com/%E6%97%A5%E6%9C%AC?q=%93%FA"
    ]


def test_latin1_label_means_windows_1252_as_in_browsers() -> None:
    page = b'<meta charset=latin1><a href="/\x80?q=\x80">'
    assert urls(extract_html_links(page, "http://example.com/")) == [
        "http://example.com/%E2%82%AC?q=%80"
    ]


def test_characters_the_page_encoding_lacks_become_numeric_references() -> None:
    html = '<a href="?q=\u4e2d">'
    assert urls(extract_html_links(html, "http://example.com/", encoding="iso-8859-1")) == [
        "http://example.com/?q=%26%2320013%3B"
    ]


@pytest.mark.parametrize(
    ("page", "encoding", "expected_query"),
    [
        (b'<meta charset="latin1"><a href="?q=\xc3\xa9">', "utf-8", "%C3%A9"),  # header wins
        (b'<meta charset="utf-8"><a href="?q=\xe9">', "iso-8859-1", "%E9"),
        (b'\xef\xbb\xbf<meta charset="latin1"><a href="?q=\xc3\xa9">', "latin1", "%C3%A9"),  # BOM
        (b'<!-- <meta charset="latin1"> --><a href="?q=\xc3\xa9">', None, "%C3%A9"),
        (b" " * 1024 + b'<meta charset="latin1"><a href="?q=\xc3\xa9">', None, "%C3%A9"),
        (b'<meta charset="no-such-charset"><a href="?q=\xc3\xa9">', None, "%C3%A9"),
        (b'<meta charset="utf-16"><a href="?q=\xc3\xa9">', None, "%C3%A9"),
        (b'<meta charset="base64"><a href="?q=\xc3\xa9">', None, "%C3%A9"),
        (b'<meta charset="utf-7"><a href="?q=\xc3\xa9">', None, "%C3%A9"),
        (b'<a href="?q=\xe9">', None, "%EF%BF%BD"),  # not UTF-8: replaced, not raised
        (b'<a href="?q=\xe9">', "bogus-label", "%EF%BF%BD"),
    ],
)
def test_bytes_are_decoded_by_bom_then_header_then_meta_then_utf8(
    page: bytes, encoding: str | None, expected_query: str
) -> None:
    got = urls(extract_html_links(page, "http://example.com/", encoding=encoding))
    assert got == [f"http://example.com/?q={expected_query}"]


def test_utf16_page_with_bom() -> None:
    page = '<a href="é.html">'.encode("utf-16")
    assert urls(extract_html_links(page, "http://example.com/")) == [
        "http://example.com/%C3%A9.html"
    ]


# --- malformed HTML --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<a href="x.html">unclosed <b><i><img src=y.png', ["x.html"]),  # tag cut by EOF
        ("<a href=x.html><p><div></a></div></span></p></table>", ["x.html"]),
        ("<img src=y.png alt><a href>empty</a><a href=''>", ["y.png"]),
        ("<img src = y.png >", ["y.png"]),
        ("<IMG SRC=Y.PNG>", ["Y.PNG"]),
        ("<img src=a.png src=b.png>", ["a.png"]),  # the first duplicate attribute wins
        ('<a href="x.html" href="y.html" <img src=z.png>', ["x.html"]),
        ('<a href="unterminated><img src=z.png>', []),
        ("<!-- <a href=commented.html> --><a href=live.html>", ["live.html"]),
        ("<!-- never closed <a href=x.html>", []),
        ("<![CDATA[ x ]]><a href=after.html>", ["after.html"]),
        ("<![if !IE]><a href=ie.html><![endif]>", ["ie.html"]),
        ("<!DOCTYPE html [ <!ENTITY x 'y'> ]><a href=d.html>", ["d.html"]),
        ("<?xml version='1.0'?><a href=pi.html>", ["pi.html"]),
        ("</a </b <a href=x.html>", []),
        ("<a\x00 href=nul.html>", []),  # the tag is "a\ufffd", no link
        ("<a href=nul\x00.html>", ["nul%EF%BF%BD.html"]),
        ("<style>a { background: url(open.png)", ["open.png"]),  # style left open runs to EOF
        ("<style/>url(not-css.png)<a href=after.html>", ["after.html"]),
        ("<script>document.write('<img src=no.png>')</script><img src=yes.png>", ["yes.png"]),
        ("<a href=x.html/>", ["x.html/"]),
        ("<textarea><a href=t.html></textarea><a href=after.html>", ["after.html"]),
        ("<iframe src=f.html><img src=fallback.png></iframe>", ["f.html"]),
        ("<title>never closed <a href=x.html>", []),
        ('<<<>>><a href="q.html">&&&#;&#xZZ;', ["q.html"]),
    ],
)
def test_malformed_html_does_not_raise(html: str, expected: list[str]) -> None:
    got = urls(extract_html_links(html, "http://example.com/"))
    assert got == ["http://example.com/" + u for u in expected]


def test_garbage_bytes_do_not_raise() -> None:
    junk = bytes(range(256)) * 8 + b"<a href='\xff\xfe\x00'>" + b"\x00<img src=ok.png>"
    assert urls(extract_html_links(junk, "http://example.com/")) == [
        "http://example.com/%EF%BF%BD%EF%BF%BD%EF%BF%BD",  # not UTF-8, NUL: each is U+FFFD
        "http://example.com/ok.png",
    ]


def test_pathological_input_is_linear() -> None:
    # Pythons before 3.11.13 rescan an unfinished construct at every "<": quadratic time.
    import time

    start = time.perf_counter()
    for html in ("<!--" * 50_000, '<a href="x' * 50_000, "<a" * 100_000, "</a" * 100_000):
        assert extract_html_links(html, "http://example.com/") == []
    assert time.perf_counter() - start < 5


def test_css_in_html_resolves_against_the_document_base() -> None:
    html = (
        '<base href="/theme/"><style>@import "x.css"; a { b: url(y.png) }</style>'
        "<p style=\"background:url('z.png')\">"
    )
    assert triples(extract_html_links(html, "http://example.com/page")) == [
        ("http://example.com/theme/x.css", "import", True),
        ("http://example.com/theme/y.png", "css-url", True),
        ("http://example.com/theme/z.png", "css-url", True),
    ]


def test_style_element_content_is_not_entity_decoded() -> None:
    html = "<style>a { b: url(x.png?a=1&amp;b=2) }</style><p style='c: url(y.png?a&amp;b)'>"
    assert urls(extract_html_links(html, "http://example.com/")) == [
        "http://example.com/x.png?a=1&b=2",  # &amp; stays in CSS; the canonical query merges it
        "http://example.com/y.png?a&b",
    ]


REQUISITES_ONLY_PAGES = [
    REALISTIC_PAGE,
    # an <a> before the image it points to; a styled <a>, whose style holds a requisite
    '<a href="x.png">x</a><img src="x.png"><a href="p.html" style="background:url(bg.png)">p</a>',
    # an <a> whose attributes are not plain (passed over or not, the same requisites)
    "<a href=a.html title='<img src=no.png>'>a</a><a\nhref=b.html/><img src=yes.png>",
    '<base href="/other/"><area href="m.html"><a href=q.html><img src="in-other.png">',
    '<table background="t.png"><tr><td><a href="c.html"><img src="c.png"></a></table>',
]


@pytest.mark.parametrize("page", REQUISITES_ONLY_PAGES)
def test_requisites_only_are_the_requisites_of_the_whole_list(page: str) -> None:
    """A page at the crawl's last level is read for its requisites alone: the same ones,
    in the same order, as the whole list has."""
    every = extract_html_links(page, PAGE_URL)
    only = extract_html_links(page, PAGE_URL, hyperlinks=False)
    assert only == [link for link in every if link.requisite]
    assert any(link.requisite for link in only)
    assert any(not link.requisite for link in every)
