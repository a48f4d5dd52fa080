"""Resolving a page's links without the general parsers gives exactly what they give: a
reference put together with the page's base (instead of ``urljoin``) and a URL canonical as
written (instead of the general ``canonicalize``) lead to the very same link, over generated
references and bases and over every string of the link extraction tests."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.fetch import links
from wwwproxy.fetch.links import _Base, _clean, _join_plain, canonical_link
from wwwproxy.url import InvalidURL, canonicalize

from ..url.test_canonical_written import string_constants
from .test_html_tokenizer import BASES, REF_PIECES


@contextmanager
def general_only() -> Iterator[None]:
    """Every reference through urljoin and the general canonicalize, no resolution shared."""
    join, written, plain = links._join_plain, links.is_canonical_web_url, links._plain_base
    links._join_plain = lambda base, ref: None  # type: ignore[assignment]
    links.is_canonical_web_url = lambda url: False  # type: ignore[assignment]
    links._plain_base = lambda base: None  # type: ignore[assignment]
    links._SHARED.clear()  # (resolutions of the fast paths)
    try:
        yield
    finally:
        links._join_plain, links.is_canonical_web_url = join, written
        links._plain_base = plain
        links._SHARED.clear()


def same_link(ref: str, base: str | None, codec: str | None = None) -> bool:
    """The link is the general one; True if the plain join was taken."""
    fast = canonical_link(ref, base, codec)
    with general_only():
        general = canonical_link(ref, base, codec)
    assert fast == general, (ref, base, codec)
    cleaned = _clean(ref)
    page = _Base.of(base)
    return page is not None and bool(cleaned) and _join_plain(page, cleaned) is not None


MORE_BASES = [
    "http://h.example/a//b/c.html",  # "//" in the directory
    "http://h.example/a/b;/",
    "http://h.example/a/b.html;",  # an empty parameter
    "http://h.example/a/b.html;?q",
    "http://h.example/.well-known/x",
    "http://h.example/%2e%2e/a%2Fb/c",
    "http://[::1]:8080/a/b",
    "http://u:p@h.example/x?y=1",
]
MORE_PIECES = ["..;p", ".;.", "%2e", "%2e%2e", "a:b", "1:2", "//x", "/a//b", ";x;", "?", "x;"]


def test_random_references_lead_to_the_general_links() -> None:
    rng = random.Random(30)
    pieces = REF_PIECES + MORE_PIECES
    bases = BASES + MORE_BASES
    taken = 0
    for _ in range(20_000):
        ref = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        taken += same_link(ref, rng.choice(bases), rng.choice([None, None, "cp1252"]))
    assert taken > 2_000  # the plain join is not left untried


def _canonical_base(text: str) -> str | None:
    try:
        return canonicalize(text).file
    except InvalidURL:
        return None


ref_strategy = st.lists(st.sampled_from(REF_PIECES + MORE_PIECES), max_size=8).map("".join)
base_strategy = st.builds(
    lambda scheme, host, path, query: _canonical_base(scheme + host + path + query),
    st.sampled_from(["http://", "https://"]),
    st.sampled_from(["h.example", "u:p@h.example:8080", "[::1]", "127.1"]),
    st.lists(st.sampled_from(["/", "a", "b.html", ";", ";p", ".", "..", "%2e", "//", "%2F"])).map(
        lambda parts: "/" + "".join(parts)
    ),
    st.sampled_from(["", "?q=1", "?a/b", "?"]),
)


@settings(max_examples=2000)
@given(ref_strategy, base_strategy, st.sampled_from([None, "cp932"]))
def test_generated_references_and_bases_lead_to_the_general_links(
    ref: str, base: str | None, codec: str | None
) -> None:
    same_link(ref, base, codec)


def test_every_string_of_the_link_tests_leads_to_the_general_link() -> None:
    here = Path(__file__).parent
    names = ("test_links.py", "test_html_links.py", "test_css_links.py", "test_prefetch.py")
    refs = sorted(set().union(*(string_constants(here / name) for name in names)))
    bases = [b for b in BASES + MORE_BASES if b is not None]
    taken = sum(same_link(ref, base) for ref in refs for base in bases)
    assert taken > 500
