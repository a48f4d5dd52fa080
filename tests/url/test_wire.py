"""The request target sent upstream: the browser's bytes, only what a request line cannot carry
(controls, space, non-ASCII) encoded (wwwproxy.url.wire)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wwwproxy.url import canonicalize, wire_target

CASES = [
    # escapes keep their spelling: the canonical URL decodes %3A, the origin must not see it so
    (
        "http://wiki.example/w/index.php?title=Special%3ASearch",
        "/w/index.php?title=Special%3ASearch",
    ),
    ("http://h/w/index.php?title=Special:Search", "/w/index.php?title=Special:Search"),
    ("http://h/a%2Fb?x=%2F", "/a%2Fb?x=%2F"),
    ("http://h/%7euser/%7Ex", "/%7euser/%7Ex"),
    ("http://h/?q=%61%62", "/?q=%61%62"),
    # a plus is not a space to anyone but a form decoder
    ("http://h/search?q=a+b", "/search?q=a+b"),
    ("http://h/a+b", "/a+b"),
    # what a request line cannot carry, percent-encoded
    ("http://h/a b?q=c d", "/a%20b?q=c%20d"),
    ("http://h/caf\u00e9?q=\u00e9", "/caf%C3%A9?q=%C3%A9"),
    ("http://h/\u65e5\u672c", "/%E6%97%A5%E6%9C%AC"),
    (b"http://h/caf\xe9", "/caf%E9"),  # not UTF-8: the byte itself
    ("http://h/a\tb\x7f", "/a%09b%7F"),
    # printable ASCII goes as it came, even where RFC 3986 would encode it: it is what the
    # browser sent (a | in a query is kept by browsers and by the canonical form alike)
    ('http://h/q?a="<>\\^`{|}"', '/q?a="<>\\^`{|}"'),
    ("http://h/q?a[]=1|2", "/q?a[]=1|2"),
    ("http://h/100%?x=%zz&y=%4", "/100%?x=%zz&y=%4"),
    ("http://h/a;p=1,2/@me:x?k=v&l=(w)!*'$~-._", "/a;p=1,2/@me:x?k=v&l=(w)!*'$~-._"),
    ("http://h/?a?b/c", "/?a?b/c"),
    # dot segments go as sent (the browser has removed what it meant to)
    ("http://h/a/./b/../c", "/a/./b/../c"),
    ("http://h/%2e%2E/x", "/%2e%2E/x"),
    # the authority is the canonical URL's, the fragment is never sent, the root is /
    ("HTTP://User:pw@Example.COM:80/x?y#frag", "/x?y"),
    ("http://h", "/"),
    ("http://h?q=1", "/?q=1"),
    ("http://h#f", "/"),
    ("https://[::1]:8443/p", "/p"),
    # origin-form, as inside an intercepted tunnel
    (
        "/w/index.php?title=Special%3ASearch&search=a+b",
        "/w/index.php?title=Special%3ASearch&search=a+b",
    ),
    ("/", "/"),
    ("", "/"),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_wire_target(raw: str | bytes, expected: str) -> None:
    assert wire_target(raw) == expected


def test_the_cache_entry_is_the_canonical_one_for_either_spelling() -> None:
    """Sent as the browser wrote it, stored under the one canonical URL for both."""
    encoded = "http://wiki.example/w/index.php?title=Special%3ASearch&search=a+b"
    decoded = "http://wiki.example/w/index.php?title=Special:Search&search=a+b"
    assert wire_target(encoded) != wire_target(decoded)
    assert canonicalize(encoded).file == canonicalize(decoded).file


#: text a request target might hold: the allowed set, escapes, and what must be encoded
_TEXT = st.lists(
    st.sampled_from([*"aZ09-._~!$&'()*+,;=:@/?%", "%3A", "%zz", " ", '"', "\u00e9"]),
    max_size=30,
).map("".join)


@given(_TEXT)
def test_valid_targets_go_unchanged_and_encoding_is_idempotent(path: str) -> None:
    once = wire_target("http://h/" + path)
    assert once.isascii() and " " not in once
    assert wire_target("http://h" + once) == once  # a valid target is sent byte for byte
    # nothing is decoded: every escape the browser wrote is still there, spelled as written
    assert once.count("%3A") >= path.count("%3A")


@given(st.text(max_size=40))
def test_a_canonical_url_is_sent_as_it_is(tail: str) -> None:
    """A listed or monitored URL that is canonical already goes exactly as before."""
    try:
        url = canonicalize("http://h/" + tail)
    except ValueError:
        return
    assert wire_target(url.canonical) == url.path_args
