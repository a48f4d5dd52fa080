"""The HTML tokenizer both the link extractor and offline reading's rewrite read pages with
(wwwproxy.http.html_tokens): what each kind of markup gives, by a table; that passing tags over
unread changes nothing about the tags asked for; that the fast path for plain tags reads
attributes as the general one does; and that hostile markup, however large, is read through
to its end without raising."""

from __future__ import annotations

import random

import pytest

from wwwproxy.http.html_tokens import RAW_TEXT, raw_text_end, start_tags, tag_attributes


def tokens(text: str, names: frozenset[str] | None = None) -> list[tuple]:
    return list(start_tags(text, names))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("just text", []),
        ("<a href=x.html>", [(0, 15, "a", {"href": "x.html"}, 15)]),
        # names lower-cased, the first of two attributes wins, values decoded
        (
            "<A HREF='q?a=1&amp;b=2' href=no ID=\"i\">",
            [(0, 39, "a", {"href": "q?a=1&b=2", "id": "i"}, 39)],
        ),
        # a legacy entity without ";" before "=" or a letter stays as written
        ("<a href='?a=1&copy=2&copy x'>", [(0, 29, "a", {"href": "?a=1&copy=2\u00a9 x"}, 29)]),
        ("<br/><img src=i.png />", [(0, 5, "br", {}, 5), (5, 22, "img", {"src": "i.png"}, 22)]),
        # comments, doctypes and end tags are no start tags; "<?" and "<![CDATA[" end at the
        # first ">" (Python 3.11's rules: the "<a" and "<b" are inside them); an unclosed
        # comment hides the rest
        (
            "<!doctype html><!-- <a href=c> --><?pi <a>?><![CDATA[<b>]]><i></i>",
            [(59, 62, "i", {}, 62)],
        ),
        ("<!-- a -- ><p>", [(11, 14, "p", {}, 14)]),
        ("<p><!-- <a href=x>", [(0, 3, "p", {}, 3)]),
        # raw text: no tags inside, up to the element's own end tag; its end is given
        ("<script>if (a<b) x='<a href=s>'</script><a>", [
            (0, 8, "script", {}, 31), (40, 43, "a", {}, 43),
        ]),
        ("<title><a></title><textarea><b></TEXTAREA ><i>", [
            (0, 7, "title", {}, 10), (18, 28, "textarea", {}, 31), (43, 46, "i", {}, 46),
        ]),
        ("<style>a</\u017ftyle>b</style><p>", [(0, 7, "style", {}, 17), (25, 28, "p", {}, 28)]),
        ("<style>never closed <a>", [(0, 7, "style", {}, 23)]),
        ("<style/><a>", [(0, 8, "style", {}, 8), (8, 11, "a", {}, 11)]),
        # a tag left unfinished at the end is dropped, as is what follows a stray "<"
        ("<p><a href='x", [(0, 3, "p", {}, 3)]),
        ("a < b <3 <p>", [(9, 12, "p", {}, 12)]),
        # not plain: an attribute without a space before it, a name with a colon
        ("<a b='c'd=e href=f>", [(0, 19, "a", {"b": "c", "d": "e", "href": "f"}, 19)]),
        ("<svg:image xlink:href=x.png>", [(0, 28, "svg:image", {"xlink:href": "x.png"}, 28)]),
        ("<a\nhref=nl\tclass=c>", [(0, 19, "a", {"href": "nl", "class": "c"}, 19)]),
    ],
)  # fmt: skip
def test_what_markup_gives(text: str, expected: list[tuple]) -> None:
    assert tokens(text) == expected
    assert list(start_tags(text, pass_over=False)) == expected


def test_tags_not_asked_for_are_passed_over_unless_styled_or_raw_text() -> None:
    text = "<p class=x><span style='b:url(s.png)'><a href=h><td><title>t</title><img src=i>"
    got = [t[2] for t in start_tags(text, frozenset({"a", "img"}))]
    assert got == ["span", "a", "title", "img"]
    assert [t[2] for t in start_tags(text)] == ["p", "span", "a", "td", "title", "img"]


@pytest.mark.parametrize(
    ("tag", "text", "expected"),
    [
        ("style", "a{}</style>b", (3, 11)),
        ("style", "a</STYLE >", (1, 10)),
        ("script", "x</scripts></script>", (11, 20)),
        ("title", "no end", (6, 6)),
    ],
)
def test_raw_text_ends_at_its_own_end_tag(tag: str, text: str, expected: tuple) -> None:
    assert raw_text_end(text, tag, 0) == expected


# --- properties on random markup ---------------------------------------------------------------

PIECES = [
    "<", ">", "/", "/>", "<a", "<A", "<a href=x.html>", "<a href='q.html'", '<a href="d.html">',
    " href=", "href", "=", "==", "<img src=i.png>", "<img", " src=", '"', "'", " ", "\t", "\n",
    "\x0b", "\x0c", "\r", "\u00a0", "<!--", "-->", "--", "-- >", "--!>", "<!", "<!doctype html>",
    "<![CDATA[", "]]>", "<?", "?>", "</", "</a>", "</a ", "</>", "</style>", "</STYLE >",
    "</\u017ftyle>", "<style>", "<style/>", "<script>", "</script>", "<title>", "</title>",
    "<textarea>", "<xmp>", "<iframe src=f.html>", "</iframe>", "<span>", "<span class=x>",
    "<span style='x'>", ' style="y"', " STYLE=z", "<p", "<div", "<br/>", "<td background=b>",
    "&amp;", "&", "&#", "&copy=2", "<base href=/b/>", "<meta http-equiv=refresh content=0>",
    "<svg:image href=sv.png>", "<\u212aa>", "<lin\u212a rel=x>", "<a\ufffd href=n>", "`",
    "<a b='c'd=e href=f.html>", '<a href="x"href=y>', "<scrİpt>", "<a/href=s>", "x", "é",
    "<A HREF=Up.Html>", "<img SRC='Q.png' Alt=\"T&amp;T\">", " ID=Mixed", "<Meta Content='A'>",
]  # fmt: skip
NAMES = [None, frozenset({"a"}), frozenset({"a", "img", "meta"}), frozenset({"p", "svg:image"})]


def soup(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40)))


def test_passing_over_gives_the_tags_asked_for_as_reading_every_tag_does() -> None:
    rng = random.Random(21)
    for _ in range(5_000):
        text = soup(rng)
        every = tokens(text)
        assert list(start_tags(text, pass_over=False)) == every, text
        names = rng.choice(NAMES[1:])
        assert names is not None
        got = tokens(text, names)
        assert [t for t in got if t[2] in names] == [t for t in every if t[2] in names], text
        assert all(t in every for t in got), text


def test_every_token_is_a_start_tag_read_as_the_general_rules_read_it() -> None:
    """Positions start and end the tag; the fast path for plain tags gives the attributes the
    general attribute reader gives; raw text is where the element's end tag is."""
    rng = random.Random(22)
    for _ in range(5_000):
        text = soup(rng)
        last = 0
        for start, end, name, attrs, text_end in start_tags(text, rng.choice(NAMES)):
            assert last <= start < end <= text_end <= len(text), text
            assert text[start] == "<" and text[start + 1 : end].lower().startswith(name), text
            assert attrs == tag_attributes(text[start:end]), text
            if text_end > end:
                assert name in RAW_TEXT and raw_text_end(text, name, end)[0] == text_end, text
            last = end


HOSTILE = [
    ("<a " + "b=" * 100_000 + ">", 1),
    ("<a " + "b " * 100_000 + ">", 1),
    ('<a href="' + "x" * 1_000_000, 0),
    ("<a b='" * 20_000, 0),
    ("<" * 200_000, 0),
    ("<a" * 100_000 + ">", 1),
    ("<a>" * 100_000, 100_000),
    ("<!--" + "-" * 200_000 + " >", 0),
    ("<!--" * 50_000 + "-->" + "<a>", 1),
    ("<style>" + "</styl" * 50_000, 1),
    ("<script>" + "</script " * 50_000, 1),
    ("<a/" * 100_000 + ">", 1),
    ("<a " + "x='y'" * 100_000 + ">", 1),
    ("<p " + "\t" * 500_000 + "=>", 1),
    ("</" * 100_000, 0),
    ("<?" * 100_000, 0),
    ("<a " + "&" * 100_000 + ">", 1),
    ("<a b='" + "&amp" * 100_000 + "'>", 1),
]


@pytest.mark.parametrize(("text", "count"), HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_markup_is_read_to_the_end_without_raising(text: str, count: int) -> None:
    """Large pathological inputs: each is read through (the patterns cannot backtrack without
    bound) and gives what its rules say."""
    for names in (None, frozenset({"a"})):
        assert len(tokens(text, names)) == count
