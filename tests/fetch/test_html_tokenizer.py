"""The HTML tokenizer behind link extraction: the pass over uninteresting markup gives what
taking every token one by one gives, and both give what Python 3.11's ``html.parser`` (the
rules the extractor keeps) gives; and link resolution shared between pages gives what
resolving every reference on its own gives."""

from __future__ import annotations

import random
import sys
from html.parser import HTMLParser

import pytest

from wwwproxy.fetch import html_links
from wwwproxy.fetch.css_links import css_items
from wwwproxy.fetch.links import Link, canonical_link, resolve_links
from wwwproxy.http.html_tokens import RAW_TEXT, tag_attributes

# Pieces that meet every rule of the tokenizer: quotes, "/>", comments and bogus comments,
# raw-text elements and their (false) end tags, style attributes on any tag, wanted and
# unwanted tags, whitespace the stdlib and HTML disagree on, the Kelvin sign and long s.
PIECES = [
    "<", ">", "/", "/>", "<a", "<A", "<a href=x.html>", "<a href='q.html'", '<a href="d.html">',
    " href=", "href", "=", "==", "<img src=i.png>", "<img", " src=", "srcset=", '"', "'", " ",
    "\t", "\n", "\x0b", "\x0c", "\r", "\u00a0", "\u2028", "<!--", "-->", "--", "-- >", "--!>",
    "<!", "<!doctype html>", "<![CDATA[", "]]>", "<?", "?>", "</", "</a>", "</a ", "</>",
    "</style>", "</STYLE >", "</\u017ftyle>", "<style>", "<style/>", "<style >", "<script>",
    "<script src=s.js>", "</script>", "<title>", "</title>", "<textarea>", "</textarea>",
    "<xmp>", "<iframe src=f.html>", "</iframe>", "<noembed>", "<noframes>", "<span>",
    "<span class=x>", "<span style='background:url(st.png)'>", ' style="background:url(u.png)"',
    " STYLE=url(v.png)", "<p", "<div", "<br/>", "<br />", "<td background=bg.png>",
    "<body background=b.gif>", "url(c.png)", "@import 'imp.css';", "x", "&amp;", "&", "&#",
    "&copy=2", "<link rel=stylesheet href=l.css>", "<link", " rel=icon", "<base href=/b/>",
    "<meta http-equiv=refresh content='0;url=m.html'>", "<source srcset='s1.png 1x, s2.png 2x'>",
    "<video poster=p.png src=v.mp4>", "<object data=o.pdf>", "<input type=image src=in.png>",
    "<svg:image href=sv.png>", "<image href=im.png>", "<\u212aa>",
    "<lin\u212a rel=stylesheet href=k.css>", "<a\ufffd href=n.html>", "`", "<a href=x`y>",
    "<a b='c'd=e href=f.html>", '<a href="x"href=y>', "<td style=a:url(w.png)>", "<tr", "<sty",
    "le",
]  # fmt: skip


def soup(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40)))


def scanned(text: str, *, pass_over: bool) -> tuple[list[tuple[str, str, bool, bool]], str | None]:
    collector = html_links._Collector()  # noqa: SLF001 - the tokenizer's own output
    html_links._scan(text, collector, pass_over=pass_over)  # noqa: SLF001
    return collector.items, collector.base_href


def test_passing_over_markup_finds_what_every_token_one_by_one_finds() -> None:
    rng = random.Random(11)
    for _ in range(10_000):
        text = soup(rng)
        assert scanned(text, pass_over=True) == scanned(text, pass_over=False), text


class _Reference(HTMLParser):
    """The extractor as it was: Python 3.11's html.parser feeding the same collector."""

    CDATA_CONTENT_ELEMENTS = tuple(sorted(RAW_TEXT))

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.collector = html_links._Collector()  # noqa: SLF001
        self.style: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text()
        assert raw is not None
        self.collector.start_tag(tag, tag_attributes(raw))
        if tag == "style":
            self.style = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.style = None

    def handle_data(self, data: str) -> None:
        if self.style is not None:
            self.style.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style" and self.style is not None:
            self.collector.items.extend(css_items("".join(self.style)))
            self.style = None

    def _to_eof(self, k: int) -> int:
        return len(self.rawdata) if k < 0 else k

    def parse_starttag(self, i: int) -> int:
        return self._to_eof(super().parse_starttag(i))

    def parse_endtag(self, i: int) -> int:
        return self._to_eof(super().parse_endtag(i))

    def parse_comment(self, i: int, report: int = 1) -> int:
        return self._to_eof(super().parse_comment(i, report))

    def parse_bogus_comment(self, i: int, report: int = 1) -> int:
        return self._to_eof(super().parse_bogus_comment(i, report))

    def parse_html_declaration(self, i: int) -> int:
        return self._to_eof(super().parse_html_declaration(i))

    def parse_pi(self, i: int) -> int:
        return self._to_eof(super().parse_pi(i))

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        return self.parse_bogus_comment(i, report)


def reference(text: str) -> tuple[list[tuple[str, str, bool, bool]], str | None]:
    parser = _Reference()
    parser.feed(text)
    parser.close()
    if parser.style is not None:
        parser.style.append(parser.rawdata)
        parser.handle_endtag("style")
    return parser.collector.items, parser.collector.base_href


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11) or sys.version_info >= (3, 11, 13),
    reason="html.parser's rules changed in 3.11.13; the tokenizer keeps the earlier ones",
)
def test_the_tokenizer_keeps_the_rules_of_python_3_11_html_parser() -> None:
    rng = random.Random(12)
    for _ in range(5_000):
        text = soup(rng)
        assert scanned(text, pass_over=True) == reference(text), text


# --- resolution shared between pages ----------------------------------------------------------


def resolved_alone(
    items: list[tuple[str, str, bool, bool]], base: str | None, codec: str | None
) -> list[Link]:
    found: dict[str, Link] = {}
    for value, kind, requisite, in_css in items:
        url = canonical_link(value, base, None if in_css else codec)
        if url is None:
            continue
        prev = found.get(url)
        if prev is None or (requisite and not prev.requisite):
            found[url] = Link(url, kind, requisite)
    return list(found.values())


def test_a_relative_link_resolves_per_folder_not_per_page() -> None:
    items = [("../up.html#top", "a", False, False), ("img/x.png", "img", True, False)]
    one = resolve_links(items, "http://example.com/a/b/one.html", None)
    other = resolve_links(items, "http://example.com/a/b/two.html?q=/z/", None)
    elsewhere = resolve_links(items, "http://example.com/c/three.html", None)
    assert [link.url for link in one] == [
        "http://example.com/a/up.html",
        "http://example.com/a/b/img/x.png",
    ]
    assert other == one
    assert [link.url for link in elsewhere] == [
        "http://example.com/up.html",
        "http://example.com/c/img/x.png",
    ]


@pytest.mark.parametrize(
    ("value", "first", "second"),
    [
        ("?page=2", "http://example.com/d/one.html?page=2", "http://example.com/d/two.html?page=2"),
        (";", "http://example.com/d/one.html", "http://example.com/d/two.html"),
        ("http:?v", "http://example.com/d/one.html?v", "http://example.com/d/two.html?v"),
        ("a ;?#f", "http://example.com/d/a%20", "http://example.com/d/a%20"),
        ("a\x01;?#f", "http://example.com/d/a%01", "http://example.com/d/a%01"),
    ],
)
def test_what_depends_on_the_whole_page_url_or_the_fragment_is_not_shared(
    value: str, first: str, second: str
) -> None:
    items = [(value, "a", False, False)]
    for page, expected in (("one", first), ("two", second)):
        base = f"http://example.com/d/{page}.html"
        assert [link.url for link in resolve_links(items, base, None)] == [expected]
        assert canonical_link(value, base, None) == expected


def test_a_surrogate_in_the_fragment_still_makes_the_link_unusable() -> None:
    base = "http://example.com/d/one.html"
    assert resolve_links([("x.html#ok", "a", False, False)], base, None) != []
    assert resolve_links([("x.html#\ud800", "a", False, False)], base, None) == []


REF_PIECES = [
    "a", "b.html", "../", "./", ".", "..", "/", "//", "\\", "?", "q=1", "&", "#", "frag", ";",
    "p=2", ":", "http:", "https:", "HTTP://x.org", "mailto:", " ", "\t", "\n", "\x01", "%20",
    "é", "\ud800", "\u00a0", "[", "@", "x.example", "#top", "?#", "../../", "dir/", "\x7f",
    "%23", "?a#b?c", "\u3042",
]  # fmt: skip
BASES = [
    "http://h.example/",
    "http://h.example/d/p.html",
    "http://h.example/d/q.html",
    "http://h.example/d/e/",
    "http://h.example/d/p.html?x=1/2",
    "http://h.example/d;x/p.html",
    "https://h.example/d/p.html",
    "http://u:p@h.example:8080/d/p.html",
    "http://h.example/d/p.html;q",
    None,
]


def test_shared_resolution_equals_resolving_each_reference_alone() -> None:
    rng = random.Random(13)
    for _ in range(5_000):
        base = rng.choice(BASES)
        codec = rng.choice([None, "cp1252", "cp932"])
        items = [
            (
                "".join(rng.choice(REF_PIECES) for _ in range(rng.randint(1, 6))),
                "a",
                rng.random() < 0.3,
                rng.random() < 0.2,
            )
            for _ in range(rng.randint(1, 8))
        ]
        assert resolve_links(items, base, codec) == resolved_alone(items, base, codec), items
