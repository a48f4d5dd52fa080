"""Offline reading's rewrite (wwwproxy.http.modify_html), by tables: which rule applies, what
each tag gets, the headers; and on hostile markup, that it never raises, only ever inserts, and
sees the tags the link extractor sees (its tokenizer, with positions: proxy.replay)."""

from __future__ import annotations

import random
import re

import pytest

from wwwproxy.config import ModifyHTMLRule
from wwwproxy.http.html_tokens import start_tags
from wwwproxy.http.modify_html import (
    REWRITTEN_TAGS,
    STYLE,
    is_plain_html,
    link_refs,
    modified_headers,
    rewrite,
    rule_for,
    with_charset,
)
from wwwproxy.proxy.replay import html_start_tags


def rule(
    pattern: str = ".*",
    *,
    mark: bool = True,
    scripts: bool = False,
    refresh: bool = False,
    popups: bool = False,
) -> ModifyHTMLRule:
    return ModifyHTMLRule(pattern, re.compile(pattern), mark, scripts, refresh, popups)


MARK = rule()
ALL = rule(scripts=True, refresh=True, popups=True)
NOTHING_BUT_SCRIPTS = rule(mark=False, scripts=True)


def changed(text: str, how: ModifyHTMLRule = MARK, cached: dict[str, bool] | None = None) -> str:
    return rewrite(text, list(html_start_tags(text)), how, cached or {})


# --- which rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "url", "expected"),
    [
        ((), "http://a.example/", None),
        ((rule("a\\.example"),), "http://a.example/x", 0),
        ((rule("a\\.example"),), "http://b.example/x", None),
        # the first match wins, and a rule that changes nothing exempts its URLs
        ((rule("/private/", mark=False), rule(".*")), "http://a.example/private/p", None),
        ((rule("/private/", mark=False), rule(".*")), "http://a.example/public/p", 1),
        ((rule("x", mark=False, popups=True), rule(".*")), "http://x.example/", 0),
        # searched, not matched from the start: like the freshness rules
        ((rule("\\.html$"),), "http://a.example/d/p.html", 0),
    ],
)
def test_rule_for(rules, url, expected):
    got = rule_for(rules, url)
    assert got is (None if expected is None else rules[expected])


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/html", True),
        ("Text/HTML; charset=UTF-8", True),
        (" text/html ;charset=iso-8859-1", True),
        ("application/xhtml+xml", False),  # XML: a repeated attribute is a fatal error
        ("text/plain", False),
        ("text/htmlx", False),
        ("", False),
        (None, False),
    ],
)
def test_is_plain_html(content_type, expected):
    assert is_plain_html(content_type) is expected


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/html", "text/html; charset=utf-8"),
        ("text/html; charset=iso-8859-1", "text/html; charset=utf-8"),
        ('text/html;CHARSET="Shift_JIS"; level=1', "text/html; level=1; charset=utf-8"),
        ("text/html;", "text/html; charset=utf-8"),
    ],
)
def test_with_charset(content_type, expected):
    assert with_charset(content_type, "utf-8") == expected


# --- what each tag gets --------------------------------------------------------------------------

UNCACHED = ' class="wwwproxy-uncached" title="not in the cache"'


@pytest.mark.parametrize(
    ("html", "how", "cached", "expected"),
    [
        # a marked link, cached or not; the style block once, before the first marked link
        (
            '<p><a href="a.html">A</a><a href=b.html>B</a>',
            MARK,
            {"a.html": True, "b.html": False},
            f'<p>{STYLE}<a class="wwwproxy-cached" href="a.html">A</a>'
            f"<a{UNCACHED} href=b.html>B</a>",
        ),
        # the page's own classes kept (the inserted class, first, is the one that counts)
        (
            "<A HREF=x class='nav  top'>",
            MARK,
            {"x": True},
            f"{STYLE}<A class=\"nav top wwwproxy-cached\" HREF=x class='nav  top'>",
        ),
        # the page's own title kept on an uncached link
        (
            '<a title="T" href=x>',
            MARK,
            {"x": False},
            f'{STYLE}<a class="wwwproxy-uncached" title="T" href=x>',
        ),
        # a class that needs escaping is escaped
        (
            '<a class="&quot;&lt;" href=x>',
            MARK,
            {"x": True},
            f'{STYLE}<a class="&quot;&lt; wwwproxy-cached" class="&quot;&lt;" href=x>',
        ),
        # <area> and SVG's xlink:href are links too
        (
            "<area href=m><a xlink:href=s>",
            MARK,
            {"m": False, "s": True},
            f'{STYLE}<area{UNCACHED} href=m><a class="wwwproxy-cached" xlink:href=s>',
        ),
        # a link the caller did not resolve (mailto:, #top, javascript:) is left as it is
        ("<a href=mailto:x>m</a><a href=#top>", MARK, {}, "<a href=mailto:x>m</a><a href=#top>"),
        # links inside comments, scripts, textareas and titles are text
        (
            "<!-- <a href=x> --><script>'<a href=x>'</script><textarea><a href=x></textarea>",
            MARK,
            {"x": False},
            "<!-- <a href=x> --><script>'<a href=x>'</script><textarea><a href=x></textarea>",
        ),
        # marking off: links untouched, no style block
        ("<a href=x>", NOTHING_BUT_SCRIPTS, {"x": False}, "<a href=x>"),
        # scripts become data blocks, whatever their type; other elements are not touched
        (
            "<script src=a.js></script><SCRIPT type=module>x()</SCRIPT><noscript>n</noscript>",
            NOTHING_BUT_SCRIPTS,
            {},
            '<script type="text/x-wwwproxy-disabled" src=a.js></script>'
            '<SCRIPT type="text/x-wwwproxy-disabled" type=module>x()</SCRIPT>'
            "<noscript>n</noscript>",
        ),
        # meta refresh made inert; other metas left alone
        (
            '<meta http-equiv=" Refresh " content="0;url=x"><meta charset=utf-8>',
            ALL,
            {},
            '<meta http-equiv="x-wwwproxy-disabled-refresh" http-equiv=" Refresh " '
            'content="0;url=x"><meta charset=utf-8>',
        ),
        (
            '<meta http-equiv="refresh" content="5">',
            MARK,
            {},
            '<meta http-equiv="refresh" content="5">',
        ),
        # new-window targets (links, areas, base) become _self; same-window ones stay
        (
            "<base target=_blank><a href=x target=_BLANK><a href=y target=_top><a href=z target=w>",
            rule(mark=False, popups=True),
            {},
            '<base target="_self" target=_blank><a target="_self" href=x target=_BLANK>'
            '<a href=y target=_top><a target="_self" href=z target=w>',
        ),
        # everything at once on one tag
        (
            "<a href=x target=_blank>",
            ALL,
            {"x": False},
            f'{STYLE}<a{UNCACHED} target="_self" href=x target=_blank>',
        ),
        # a page with nothing to change is returned as it is
        ("<p>plain</p>", ALL, {}, "<p>plain</p>"),
        ("", ALL, {}, ""),
    ],
)
def test_rewrite(html, how, cached, expected):
    assert changed(html, how, cached) == expected


def test_link_refs_takes_the_first_base_and_every_link_as_written():
    text = (
        "<a href=' a.html '><base href=/b/><base href=/c/><area href=m>"
        "<a xlink:href=s><a>no href</a><a href=a.html>"
    )
    assert link_refs(list(html_start_tags(text))) == ("/b/", [" a.html ", "m", "s", "a.html"])


# --- headers -----------------------------------------------------------------------------------

RECORDED = [
    ("Content-Type", "text/html; charset=iso-8859-1"),
    ("Content-Encoding", "gzip"),
    ("Content-Length", "100"),
    ("ETag", '"v1"'),
    ("Last-Modified", "Tue, 01 Oct 2024 10:00:00 GMT"),
    ("Accept-Ranges", "bytes"),
    ("Refresh", "5; url=/next"),
    ("Cache-Control", "max-age=60"),
    ("X-Cache", "HIT"),
]


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        (
            MARK,
            [
                ("Content-Type", "text/html; charset=utf-8"),
                ("Refresh", "5; url=/next"),
                ("Cache-Control", "max-age=60"),
                ("X-Cache", "HIT"),
                ("Content-Length", "42"),
            ],
        ),
        (
            ALL,
            [
                ("Content-Type", "text/html; charset=utf-8"),
                ("Cache-Control", "max-age=60"),
                ("X-Cache", "HIT"),
                ("Content-Length", "42"),
                ("Content-Security-Policy", "script-src 'none'"),
            ],
        ),
    ],
)
def test_modified_headers(how, expected):
    assert modified_headers(RECORDED, how, "utf-8", 42) == expected


# --- hostile markup ------------------------------------------------------------------------------

PIECES = [
    "<", ">", "/", "/>", "<a", "<A", "<a href=x.html>", "<a href='q.html'", '<a href="d.html">',
    " href=", "href", "=", '"', "'", " ", "\t", "\n", "\x00", "\r", "\u00a0", "<!--", "-->",
    "--", "-- >", "--!>", "<!", "<!doctype html>", "<?", "?>", "</", "</a>", "</>", "<style>",
    "</style>", "<script>", "<script src=s.js>", "</script>", "</\u017fcript>", "<title>",
    "</title>", "<textarea>", "</textarea>", "<span class=x>", "<p", "<br/>", "<base href=/b/>",
    "<base target=_blank>", "<meta http-equiv=refresh content='0;url=m.html'>", "<area href=m>",
    "<a class='c' target=_new href=t>", "<\u212aa>", "<a\ufffd href=n.html>", "&amp;", "&",
    "<a b='c'd=e href=f.html>", '<a href="x"href=y>', "<scrİpt>", "<a/href=s>", "<a\nhref=nl>",
    " class", " class=", " target=", "<meta", " http-equiv=Refresh", "é", "\U0001f600",
]  # fmt: skip
_INSERTABLE = {"class", "title", "type", "http-equiv", "target"}


def soup(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40)))


def test_hostile_markup_never_raises_and_reads_as_the_same_tags():
    """Whatever the markup, the rewrite raises nothing, and the changed page reads as the same
    tags with the same attributes (but those it sets), and the style block."""
    rng = random.Random(13)
    for _ in range(5_000):
        text = soup(rng)
        tags = list(html_start_tags(text))
        _, refs = link_refs(tags)
        cached = {ref: rng.random() < 0.5 for ref in refs}
        out = rewrite(text, tags, ALL, cached)
        again = list(html_start_tags(out))
        styled = out.find(STYLE) if cached else -1
        again = [t for t in again if t[0] != styled]
        assert [t[2] for t in again] == [t[2] for t in tags], text
        for (_, _, name, before), (_, _, _, after) in zip(tags, again, strict=True):
            kept = {k: v for k, v in before.items() if k not in _INSERTABLE}
            assert {k: v for k, v in after.items() if k not in _INSERTABLE} == kept, text
            ref = before.get("href") or before.get("xlink:href")
            if name in ("a", "area") and ref in cached:
                mark = "wwwproxy-cached" if cached[ref] else "wwwproxy-uncached"
                assert after["class"].split()[-1] == mark, text
            if name == "script":
                assert after["type"] == "text/x-wwwproxy-disabled", text


def test_the_start_tags_are_every_tag_the_rewrite_reads():
    """html_start_tags passes tags over unread: what it gives is, for every tag the rewrite
    reads, what reading every tag (the link extractor's tokenizer) gives, positions included."""
    rng = random.Random(17)
    for _ in range(5_000):
        text = soup(rng).replace("\x00", "\ufffd")
        every = [t[:4] for t in start_tags(text)]
        got = list(html_start_tags(text))
        assert [t for t in got if t[2] in REWRITTEN_TAGS] == [
            t for t in every if t[2] in REWRITTEN_TAGS
        ], text
        assert all(t in every for t in got), text
