"""Links and escaping: what :func:`href` writes, :class:`FormArgs` reads back unchanged."""

from __future__ import annotations

import html

from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.commands.template import button_form, clean, esc, fmt_size, href, layout, link
from wwwproxy.url.form import FormArgs

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=200)
@given(st.lists(st.tuples(text.filter(bool), text), max_size=4))
def test_href_arguments_come_back_exactly_once_decoded(pairs):
    url = href("/page/", pairs)
    path, _, query = url.partition("?")
    assert path == "/page/"
    assert FormArgs.parse(query).pairs == pairs


def test_a_url_argument_keeps_its_own_escapes():
    target = "http://e.example/a%20b?x=1&y=%26&z=a+b#f"
    url = href("/history/", {"url": target})
    assert (
        url == "/history/?url=http%3A%2F%2Fe.example%2Fa%2520b%3Fx%3D1%26y%3D%2526%26z%3Da%2Bb%23f"
    )
    assert FormArgs.parse(url.split("?", 1)[1]).get("url") == target


def test_escaping_text_attributes_and_bad_bytes():
    assert esc('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert clean(bad) == "caf\ufffd" and esc(bad) == "caf\ufffd"
    assert href("/s/", {"q": bad}) == "/s/?q=caf%E9"  # the original byte, not U+FFFD
    a = link("/x/", "<b>", {"u": 'a"b'}, title="<t>")
    assert a == '<a href="/x/?u=a%22b" title="&lt;t&gt;">&lt;b&gt;</a>'


def test_forms_carry_the_token_and_fields_escaped():
    form = button_form("/delete/", "tok", "Go <now>", {"url": 'http://e/"x"', "skip": None})
    assert 'method="post" action="/delete/"' in form
    assert '<input type="hidden" name="token" value="tok">' in form
    assert 'value="http://e/&quot;x&quot;"' in form and "skip" not in form
    assert "Go &lt;now&gt;" in form


def test_layout_escapes_title_and_marks_the_mode():
    page = layout("<T>", "<p>body</p>", mode="offline", active="/index/", query='"q"')
    assert "<title>&lt;T&gt; - wwwproxy</title>" in page and "<h1>&lt;T&gt;</h1>" in page
    assert '<span class="badge offline"' in page and '<a href="/index/" class=here>' in page
    assert 'value="&quot;q&quot;"' in page and "<script" not in page
    assert html.unescape("&lt;T&gt;") == "<T>"


def test_fmt_size():
    assert [fmt_size(n) for n in (0, 1023, 1024, 1536 * 1024, 5 * 2**30)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 MiB",
        "5.0 GiB",
    ]


def test_tab_titles() -> None:
    assert "<title>wwwproxy</title>" in layout("wwwproxy", "", mode="online")
    assert "<title>Search - wwwproxy</title>" in layout("Search", "", mode="online")
    page = layout("<x>", "", mode="online")
    assert "<title>&lt;x&gt; - wwwproxy</title>" in page and "<x>" not in page
