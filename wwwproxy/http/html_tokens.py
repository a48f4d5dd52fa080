"""The HTML tokenizer the link extractor (:mod:`wwwproxy.fetch.html_links`) and offline
reading's rewrite (:mod:`wwwproxy.proxy.replay`) both read pages with: the start tags of a
page, where they are, their names and attributes.  One copy of the rules, so that the links
the prefetcher follows are the links a page served from the cache marks.  Pure functions, no
I/O; bad input never raises, and no expression backtracks without bound (possessive and
atomic patterns).

The rules are those of Python 3.11's html.parser, which the extractor used to run on (and
which the tests pin): a tag runs to the ``>`` its attribute grammar allows, comments end at
the first ``--`` + spaces + ``>``, ``<!`` and ``<?`` at the next ``>``, and a construct left
unfinished runs to the end of the document (as the HTML spec says: a comment closes at EOF, a
tag is dropped).  Text inside ``<script>``, ``<style>``, ``<textarea>``, ``<title>``... is text,
up to its end tag.  The scan is driven by regular expressions: text and the tags the caller
does not ask for (``<span>``, ``<p>``, ``</a>`` ...) are passed over inside one match, without
a Python step each.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from html import unescape as _html_unescape
from html.entities import html5 as _HTML5

__all__ = ["RAW_TEXT", "Token", "raw_text_end", "start_tags", "tag_attributes"]

#: a start tag: where it starts and ends in the text, its lower-cased name, its attributes
#: (decoded, names lower-cased, the first of duplicates), and where the raw text of a
#: ``<script>``, ``<style>``... that it opens ends (its content is ``text[end:text_end]``;
#: ``text_end == end`` for every other tag)
Token = tuple[int, int, str, dict[str, str], int]

#: raw-text and RCDATA elements: no tags inside, up to their end tag (the stdlib parser knows
#: only script and style)
RAW_TEXT = frozenset(
    {"script", "style", "title", "textarea", "xmp", "iframe", "noembed", "noframes"}
)

# --- attributes ---------------------------------------------------------------------------

_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")


def _attr_charref(m: re.Match[str]) -> str:
    s = m.group(1)
    if s[0] == "#":
        return _html_unescape(m.group(0))
    if s in _HTML5:
        return _HTML5[s]
    for x in range(len(s) - 1, 1, -1):
        if s[:x] in _HTML5:
            # In an attribute a legacy entity without ";" is left alone before "=" or an
            # alphanumeric (HTML spec), so "?a=1&copy=2" and "&region=" keep their names.
            nxt = s[x]
            if nxt == "=" or (nxt.isascii() and nxt.isalnum()):
                return m.group(0)
            return _HTML5[s[:x]] + s[x:]
    return m.group(0)


def _unescape_attr(value: str) -> str:
    return _CHARREF.sub(_attr_charref, value) if "&" in value else value


_TAG_NAME = re.compile(r"(?s:.)[^ \t\n\f\r/>]*+")
#: one step of the tokenizer's attribute states: ``>`` (the end), or a name with its value
_ATTRIBUTE = re.compile(
    r"[ \t\n\f\r/]*+(?:(>)|([^ \t\n\f\r/>][^ \t\n\f\r/>=]*+)[ \t\n\f\r]*+"
    r"(?:=[ \t\n\f\r]*+(?:\"([^\"]*+)\"?|'([^']*+)'?|([^ \t\n\f\r>]*+)))?)"
)


def tag_attributes(text: str, start: int = 0, *, decode: bool = True) -> dict[str, str]:
    """Attributes of the start tag at ``text[start]`` by the HTML tokenizer's rules (first of
    duplicates wins, names lower-cased); the stdlib's own unescaping is not attribute-aware.
    A name may start with ``=``; an unclosed quote runs to the end.  ``decode`` False keeps
    character references as written (the charset prescan, which runs before decoding)."""
    attrs: dict[str, str] = {}
    pos = start
    if start < len(text):
        tag_name = _TAG_NAME.match(text, start)
        assert tag_name is not None  # any character begins a name
        pos = tag_name.end()
    match = _ATTRIBUTE.match
    while m := match(text, pos):
        end, name, dq, sq, bare = m.groups()
        if end is not None:
            break
        pos = m.end()
        name = name.lower()
        if name not in attrs:
            value = dq if dq is not None else sq if sq is not None else bare or ""
            attrs[name] = _unescape_attr(value) if decode else value
    return attrs


# --- the stdlib's expressions (Python 3.11's html.parser) ---------------------------------

_LOCATE_START_TAG_END = re.compile(
    r"""<[a-zA-Z][^\t\n\r\f />\x00]*(?:[\s/]*(?:(?<=['"\s/])[^\s/>][^\s/=>]*"""
    r"""(?:\s*=+\s*(?:'[^']*'|"[^"]*"|(?!['"])[^>\s]*)\s*)?(?:\s|/(?!>))*)*)?\s*"""
)
_TAG_FIND = re.compile(r"([a-zA-Z][^\t\n\r\f />\x00]*)(?:\s|/(?!>))*")
_ATTR_FIND = re.compile(
    r"""((?<=['"\s/])[^\s/>][^\s/=>]*)(\s*=+\s*('[^']*'|"[^"]*"|(?!['"])[^>\s]*))?(?:\s|/(?!>))*"""
)
_END_TAG_FIND = re.compile(r"</\s*([a-zA-Z][-.a-zA-Z0-9:_]*)\s*>")
_COMMENT_CLOSE = re.compile(r"--\s*>")
_RAW_TEXT_END = {name: re.compile(rf"</\s*{name}\s*>", re.IGNORECASE) for name in RAW_TEXT}

# A tag whose every part is plain (ASCII names, quoted or simple values, single spaces or
# more): for it the stdlib's rules above give the same end, name and "/>" as this one match.
_WS = r"[ \t\n\r\f]"
_NAME = r"[a-zA-Z][a-zA-Z0-9-]*+"
_ATTR_NAME = r"[a-zA-Z_:][-a-zA-Z0-9_:.]*+"
_ATTR_VALUE = r"""(?:"[^"]*+"|'[^']*+'|[^\s"'=<>`]++)"""
_NOT_STYLE = r"(?![sS][tT][yY][lL][eE](?![-a-zA-Z0-9_:.]))"


def _plain_attributes(guard: str = "") -> str:
    return rf"(?:{_WS}++{guard}{_ATTR_NAME}(?:{_WS}*+={_WS}*+{_ATTR_VALUE})?+)*+{_WS}*+"


_PLAIN_TAG = re.compile(rf"<({_NAME})({_plain_attributes()})(/?)>")
_PLAIN_ATTRIBUTE = re.compile(
    rf"""{_WS}++({_ATTR_NAME})(?:{_WS}*+={_WS}*+(?:"([^"]*+)"|'([^']*+)'|([^\s"'=<>`]++)))?+"""
)


def _name_trie(names: list[str]) -> str:
    """An expression for these (ASCII) names, ignoring case, that fails at the first letter:
    sre tries the alternatives of a plain list one by one."""
    by_first: dict[str, list[str]] = {}
    for name in names:
        by_first.setdefault(name[0], []).append(name[1:])
    parts = []
    for first, rests in sorted(by_first.items()):
        alternatives = sorted(rests, key=len, reverse=True)
        inner = "|".join("".join(f"[{c}{c.upper()}]" for c in rest) for rest in alternatives)
        parts.append(f"[{first}{first.upper()}](?:{inner})")
    return "(?:" + "|".join(parts) + ")"


_PLAIN_NAME = re.compile(_NAME)


@functools.lru_cache(maxsize=16)
def _pass_over(names: frozenset[str] | None) -> re.Pattern[str]:
    """A run of what yields no token: text, end tags, comments, declarations, processing
    instructions, a "<" that starts nothing, and (``names`` given) plain tags not among
    ``names`` (nor raw-text ones) and without a ``style`` attribute."""
    plain_tags = ""
    if names is not None:
        wanted = sorted(n for n in names | RAW_TEXT if _PLAIN_NAME.fullmatch(n))
        wanted_name = _name_trie(wanted) + r"[ \t\n\r\f/>]"
        plain_tags = rf"|<(?!{wanted_name}){_NAME}{_plain_attributes(_NOT_STYLE)}/?>"
    return re.compile(
        r"(?:[^<]++"
        r"|</[^>]*+>"
        r"|<!--.*?--\s*+>"
        r"|<(?:!(?!--)|\?)[^>]*+>"
        r"|<(?![a-zA-Z/!?])"
        rf"{plain_tags})*+",
        re.DOTALL,
    )


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _start_tag(text: str, i: int) -> tuple[int, str | None, bool]:
    """The start tag at ``text[i]`` ("<" and a letter) that is not plain, by the stdlib's
    rules: where it ends (-1: at the end of the document, unfinished), its lower-cased name
    (None: the stdlib takes it as text), and whether it ends with "/>"."""
    located = _LOCATE_START_TAG_END.match(text, i)
    assert located is not None  # "<" and a letter, as the caller found
    j = located.end()
    after = text[j : j + 1]
    if after == ">":
        end = j + 1
    elif after == "/":
        if not text.startswith("/>", j):
            return -1, None, False
        end = j + 2
    elif not after or after in _LETTERS or after == "=":
        return -1, None, False
    else:
        end = j if j > i else i + 1
    name = _TAG_FIND.match(text, i + 1)
    assert name is not None  # "<" and a letter
    k = name.end()
    while k < end and (attr := _ATTR_FIND.match(text, k)):
        k = attr.end()
    rest = text[k:end].strip()
    if rest not in (">", "/>"):
        return end, None, False
    return end, name.group(1).lower(), rest == "/>"


def raw_text_end(text: str, tag: str, i: int) -> tuple[int, int]:
    """Where the content of raw-text element ``tag`` (one of :data:`RAW_TEXT`) starting at
    ``i`` ends, and where its end tag ends (both the document's length if never closed)."""
    close = _RAW_TEXT_END[tag]
    while m := close.search(text, i):
        end = _END_TAG_FIND.match(text, m.start())
        if end is not None and end.group(1).lower() == tag:
            return m.start(), m.end()
        i = m.end()  # e.g. "</\u017ftyle>": text, as in the stdlib
    return len(text), len(text)


def start_tags(
    text: str, names: frozenset[str] | None = None, *, pass_over: bool = True
) -> Iterator[Token]:
    """The start tags of ``text`` in document order, as :data:`Token` s.  Never raises.

    ``names`` (lower-case) lets the scan pass over other tags unread when they are plain and
    carry no ``style`` attribute (a ``style`` may hold links); the caller still sees some
    others and picks by name.  None: every start tag.  ``pass_over`` False takes every token
    one by one (the same tags, slower: for the tests).  NULs should already be replaced (by
    U+FFFD, one character for one, as the HTML tokenizer does)."""
    n = len(text)
    i = 0
    skip = _pass_over(names).match
    find = text.find
    plain_tag, plain_attributes, raw_text = _PLAIN_TAG.match, _PLAIN_ATTRIBUTE.findall, RAW_TEXT
    while i < n:
        if pass_over:
            passed = skip(text, i)
            assert passed is not None  # the expression matches the empty string too
            i = passed.end()
        else:
            i = find("<", i)
        if i < 0 or i >= n:
            return
        m = plain_tag(text, i)
        if m is not None:  # the usual tag, read by one match (the same as the rules below)
            tag, body, slash = m.groups()
            tag, end, closed = tag.lower(), m.end(), slash == "/"
            attrs: dict[str, str] = {}
            if body:
                for name, dq, sq, bare in plain_attributes(body):
                    name = name.lower()
                    if name not in attrs:
                        value = dq or sq or bare
                        attrs[name] = _unescape_attr(value) if "&" in value else value
        else:
            c = text[i + 1 : i + 2]
            if c.isascii() and c.isalpha():
                end, name_or_text, closed = _start_tag(text, i)
                if end < 0:
                    return
                if name_or_text is None:
                    i = end
                    continue
                tag, attrs = name_or_text, tag_attributes(text[i:end])
            elif c == "/" or (c in ("!", "?") and not text.startswith("<!--", i)):
                end = find(">", i + 2)
                if end < 0:
                    return
                i = end + 1
                continue
            elif text.startswith("<!--", i):
                comment = _COMMENT_CLOSE.search(text, i + 4)
                if comment is None:
                    return
                i = comment.end()
                continue
            else:
                i += 1
                continue
        if not closed and tag in raw_text:
            content_end, close_end = raw_text_end(text, tag, end)
            yield i, end, tag, attrs, content_end
            end = close_end
        else:
            yield i, end, tag, attrs, end
        i = end
