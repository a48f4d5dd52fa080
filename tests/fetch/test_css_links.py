"""CSS link extraction: ``@import`` and ``url()`` of style sheets, canonicalized."""

from __future__ import annotations

import pytest

from wwwproxy.fetch.css_links import extract_css_links

from .conftest import triples, urls

# --- CSS -------------------------------------------------------------------------------------


CSS = r"""
@charset "utf-8";
@import "plain.css";
@import url(bare.css) screen;
@import url( "quoted.css" ) print;
@IMPORT 'upper.css';
@import url('layered.css') layer(base) supports(display: grid);
/* @import "commented.css"; url(commented.png) */
.a { background: url(a.png) }
.b { background: url( "b.png" ) no-repeat }
.c { background: url('c.png') }
.d { background: URL(d.png) }
.e { background: url(e\26 f.png) }
.g { background: url("g\"q.png") }
.h { content: "url(not-a-url.png)"; background: url(h\).png) }
.i { background: u\72l(escaped-name.png) }
.j { background: url(bad url.png) url(ok-after-bad.png) }
.k { background: image-set("k1.png" 1x, url(k2.png) 2x) }
.l { background: -webkit-image-set('l1.png' 1x) }
.m { background: url(data:image/png;base64,AAAA) url() url(   ) }
@font-face { font-family: F; src: url(font.woff2) format("woff2"), local("F") }
.n { background: url("multi\
line.png") }
.o { background: src("src-fn.png") }
.p { background: url(https://cdn.example.net/p.png) url(//cdn.example.net/q.png) }
"""

CSS_LINKS = [
    ("plain.css", "import"),
    ("bare.css", "import"),
    ("quoted.css", "import"),
    ("upper.css", "import"),
    ("layered.css", "import"),
    ("a.png", "css-url"),
    ("b.png", "css-url"),
    ("c.png", "css-url"),
    ("d.png", "css-url"),
    ("e%26f.png", "css-url"),  # "\26 " is "&", which the canonical path escapes
    ("g%22q.png", "css-url"),
    ("h).png", "css-url"),
    ("escaped-name.png", "css-url"),
    ("ok-after-bad.png", "css-url"),
    ("k1.png", "css-url"),
    ("k2.png", "css-url"),
    ("l1.png", "css-url"),
    ("font.woff2", "css-url"),
    ("multiline.png", "css-url"),
    ("src-fn.png", "css-url"),
]


def test_css_imports_urls_escapes_and_comments() -> None:
    got = triples(extract_css_links(CSS, "http://example.com/css/site.css"))
    expected = [(f"http://example.com/css/{u}", kind, True) for u, kind in CSS_LINKS]
    expected += [
        ("https://cdn.example.net/p.png", "css-url", True),
        ("http://cdn.example.net/q.png", "css-url", True),
    ]
    assert got == expected


@pytest.mark.parametrize(
    ("css", "expected"),
    [
        ("a{b:url(x.png)}", ["x.png"]),
        ("a{b:url(x.png", ["x.png"]),  # EOF ends the url token
        ("a{b:url('x.png", ["x.png"]),  # and a string
        ("a{b:url('x\n.png')}", []),  # a newline makes a bad string
        ("a{b:url(x\\\n.png)}", []),  # an escaped newline is no escape in a URL
        ("a{b:url(x(y).png)}", []),
        ("a{b:1url(x.png)}", []),  # a dimension with the unit "url", not a function
        ("a{b:#url(x.png)}", []),
        ("a{b:x-url(x.png)}", []),
        ("a{b:url(\\78 .png)}", ["x.png"]),
        ("a{b:url(\\000078.png)}", ["x.png"]),
        ("a{b:url(\\0.png)}", ["%EF%BF%BD.png"]),
        ("a{b:url(\\110000.png)}", ["%EF%BF%BD.png"]),
        ("a{b:url(\\e9.png)}", ["%C3%A9.png"]),
        ("@import x.css;", []),
        ("@import /* c */ 'x.css';", ["x.css"]),
        ("@importx 'x.css';", []),
        ("@media print { @import 'x.css'; }", ["x.css"]),
        ("a{content:'x.png'}", []),
        ("/* unterminated url(x.png)", []),
        ("a{b:url(x.png)}/**/c{d:url(y.png)}", ["x.png", "y.png"]),
        ("a{b:url(x.png)} c{d:url(x.png#frag)}", ["x.png"]),
    ],
)
def test_css_edge_cases(css: str, expected: list[str]) -> None:
    got = urls(extract_css_links(css, "http://example.com/"))
    assert got == ["http://example.com/" + u for u in expected]


def test_css_bytes_use_bom_then_header_then_charset_rule() -> None:
    base = "http://example.com/"
    latin = b'@charset "iso-8859-1"; a{b:url(\xe9.png)}'
    assert urls(extract_css_links(latin, base)) == ["http://example.com/%C3%A9.png"]
    assert urls(extract_css_links(latin, base, encoding="utf-8")) == [
        "http://example.com/%EF%BF%BD.png"
    ]
    assert urls(extract_css_links(b"\xef\xbb\xbfa{b:url(\xc3\xa9.png)}", base)) == [
        "http://example.com/%C3%A9.png"
    ]
    assert urls(extract_css_links(b"a{b:url(\xe9.png?q=\xe9)}", base, encoding="latin1")) == [
        # CSS URLs are always UTF-8, whatever the sheet's encoding
        "http://example.com/%C3%A9.png?q=%C3%A9"
    ]
