"""The plain join (:class:`wwwproxy.fetch.links._PlainBase`: a reference put after the page's
canonical URL, its directory or one of its parents, or taken as written) leads to exactly the
link the full rules give (``urljoin`` and the general ``canonicalize``), over a large table of
references and pages, tricky ones included: dot segments, escapes in either case, IDN hosts,
ports, fragments, queries with odd characters, backslashes, white space."""

from __future__ import annotations

import itertools
import random

import pytest

from wwwproxy.fetch import links
from wwwproxy.fetch.links import Link, _plain_base, page_base, resolve_links

from .test_html_tokenizer import REF_PIECES
from .test_links_join import general_only

#: pages, canonical or not (a page whose URL is not canonical gets no plain join)
BASES = [
    "http://h.example/",
    "http://h.example/d/p.html",
    "http://h.example/d/e/",
    "http://h.example/d/e/f/g.html?x=1/2",
    "http://h.example/d;x/p.html",
    "http://h.example/d/p.html;q",
    "http://h.example/d/p.html;",
    "http://h.example/a//b/c.html",
    "http://h.example/.well-known/x",
    "http://h.example/%2e%2e/a%2Fb/c",
    "http://h.example/~u/a(b)/c!d",
    "https://h.example/d/p.html",
    "https://h.example:8443/d/",
    "http://u:p@h.example:8080/d/p.html",
    "http://127.0.0.1:8080/library/os.html",
    "http://127.1/x/",
    "http://[::1]:8080/a/b",
    "http://xn--bcher-kva.example/d/p.html",
    "http://bücher.example/d/p.html",  # not canonical: no plain join
    "HTTP://H.example/d/",  # not canonical
    "http://h.example:80/d/",  # not canonical
    "http://h.example/d/./p.html",  # not canonical
    "http://h.example/d/p.html#top",  # not canonical
    "ftp://h.example/d/",
    "/d/p.html",
    "",
    None,
]

#: pieces references are made of, beside the link extraction tests' own
PIECES = [
    *REF_PIECES,
    "library/", "os.html", "#os.path", "../", "../../", "../../../../../", "./", "..", ".",
    "/.", "/..", ".x", "x.", "...", "%2e", "%2E%2e", "%7e", "%7E", "%41", "%2F", "%3f",
    "%", "%zz", "~", "!", "$", "(", ")", "*", "+", ",", "-", "=", "_", "'", '"', "<", ">",
    "^", "`", "{", "}", "|", "[", "]", ":", ";", "@", "&amp;", "&amp;amp;", "&", "?", "??",
    "?q=a b", "?q=%20", "?q=%7e", "?x=1;y=2", "?a=ü", "#", "#f g", "#é", "#\x01", "\\",
    "\\\\", " ", "\t", "\r\n", "\x00", "\x7f", "\u00a0", "\u3000", "é", "ü", "\ud800",
    "http://", "https://", "HTTP://", "http:", "https:", "//", "///", "h.example",
    "xn--bcher-kva.example", "bücher.example", "B\u00fccher.example", "127.0.0.1", "127.1",
    "0x7f.1", "[::1]", ":8080", ":80", ":443", ":0", ":65536", ":", "u:p@", "@",
    "x.example.", "a_b.example", "-x.example", "mailto:a@b", "javascript:", "data:,",
]  # fmt: skip

ABSOLUTE = [
    "http://h.example/a",
    "https://h.example/a?q=1#f",
    "http://x.example:8080/a/b.html?x=1&y=2#s",
    "http://X.example/a",
    "http://x.example:80/a",
    "https://x.example:443/",
    "http://x.example:65536/",
    "http://x.example/a/../b",
    "http://x.example/a/./b",
    "http://x.example/%7Ea",
    "http://x.example/a?b=&amp;c",
    "http://x.example/a?b=1#\x01",
    "http://x.example/a?b=1#é",
    "http://127.0.0.1/a",
    "http://1.2.3.4.5/a",
    "http://x.example./a",
    "http://" + "a" * 64 + ".example/",
    "http://" + ".".join(["a" * 60] * 5) + "/",
    "http:/x.example/a",
    "http:x.example/a",
    "https:///x.example/a",
    "http://u@x.example/a",
    "http://x.example?q",
    "http://x.example",
    "http://x.example/a b",
    "http://x.example/a\\b?c\\d",
]


def general_link(ref: str, base: str | None) -> str | None:
    """The link by the full rules alone."""
    with general_only():
        found = resolve_links([(ref, "a", False, False)], base, None)
    return found[0].url if found else None


def plain_link(ref: str, base: str | None) -> str | None:
    plain = _plain_base(base)
    return plain.link(ref) if plain is not None else None


def references() -> list[str]:
    """Every piece, every pair of pieces, the absolute URLs alone and with pieces after them,
    and random strings of up to six pieces."""
    rng = random.Random(32)
    refs = set(PIECES) | set(ABSOLUTE)
    refs |= {a + b for a, b in itertools.product(PIECES, repeat=2)}
    refs |= {a + b for a in ABSOLUTE for b in rng.sample(PIECES, 40)}
    refs |= {"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6))) for _ in range(30_000)}
    return sorted(refs)


def test_the_plain_join_gives_the_links_of_the_full_rules() -> None:
    refs = references()
    taken = 0
    for base in BASES:
        plain = _plain_base(base)
        if plain is None:
            continue
        for ref in refs:
            fast = plain.link(ref)
            if fast is None:
                continue
            taken += 1
            assert fast == general_link(ref, base), (ref, base)
    assert taken > 20_000  # the plain join is not left untried


@pytest.mark.parametrize(
    ("ref", "base", "link"),
    [
        ("os.html", "http://127.0.0.1:8080/library/io.html", "http://127.0.0.1:8080/library/os.html"),
        ("../glossary.html#term-x", "http://h.example/library/io.html", "http://h.example/glossary.html"),
        ("../../a", "http://h.example/d/e/", "http://h.example/a"),
        ("./?q=1", "http://h.example/d/p.html", "http://h.example/d/?q=1"),
        ("?q=1#f", "http://h.example/d/p.html?x", "http://h.example/d/p.html?q=1"),
        ("/", "https://h.example:8443/d/", "https://h.example:8443/"),
        ("a+b/c,d.html", "http://u:p@h.example:8080/d/p.html", "http://u:p@h.example:8080/d/a+b/c,d.html"),
        ("https://x.example/a?b=1#f g", "http://h.example/", "https://x.example/a?b=1"),
    ],
)  # fmt: skip
def test_plain_references(ref: str, base: str, link: str) -> None:
    assert plain_link(ref, base) == link == general_link(ref, base)


@pytest.mark.parametrize(
    ("ref", "base"),
    [
        ("../../../a", "http://h.example/d/e/"),  # above the root
        ("a/./b", "http://h.example/d/"),
        ("a//b", "http://h.example/d/"),
        ("//x.example/a", "http://h.example/d/"),
        ("a%7eb", "http://h.example/d/"),
        ("a:b", "http://h.example/d/"),
        ("a;b", "http://h.example/d/"),
        ("?a=&amp;b", "http://h.example/d/"),
        ("?", "http://h.example/d/"),
        ("#f", "http://h.example/d/"),
        ("", "http://h.example/d/"),
        (" a", "http://h.example/d/"),
        ("a\\b", "http://h.example/d/"),
        ("a#é", "http://h.example/d/"),
        ("http://x.example:80/", "http://h.example/d/"),
        ("http://X.example/", "http://h.example/d/"),
        ("a", "http://h.example/a//b/c.html"),
        ("a", "http://bücher.example/d/"),
    ],
)
def test_references_left_to_the_full_rules(ref: str, base: str) -> None:
    assert plain_link(ref, base) is None


def test_pages_read_with_and_without_the_plain_join_give_the_same_links() -> None:
    """(The pages as the extraction hands them over: canonical, or none.)"""
    rng = random.Random(33)
    refs = references()
    bases = [None, *(b for b in BASES if b and page_base(b) == b)]
    for _ in range(300):
        base = rng.choice(bases)
        items = [(rng.choice(refs), "a", rng.random() < 0.3, rng.random() < 0.2) for _ in range(40)]
        with general_only():
            general = resolve_links(items, base, "cp1252")
        assert resolve_links(items, base, "cp1252") == general


def test_general_only_switches_the_plain_join_off() -> None:
    with general_only():
        assert links._plain_base("http://h.example/") is None
    assert resolve_links([("a", "img", True, False)], "http://h.example/", None) == [
        Link("http://h.example/a", "img", True)
    ]
