"""HTML link extraction: every link and requisite of a page, as a browser reads it (the
tokenizer's attribute rules, ``<base href>`` for the whole document, ``srcset``, meta refresh,
the ``<meta>`` charset prescan; ``<style>`` and ``style`` attributes through
:mod:`wwwproxy.fetch.css_links`).  Pure functions, no I/O; bad input never raises."""

from __future__ import annotations

import re
from html import unescape as _html_unescape
from html.entities import html5 as _HTML5

from .css_links import css_items
from .links import (
    Link,
    canonical_link,
    decode_bom,
    decode_text,
    is_utf,
    page_base,
    resolve_links,
    web_codec,
)

__all__ = ["extract_html_links", "parse_refresh", "parse_srcset"]

_META = re.compile(r"<meta(?=[\s/])", re.IGNORECASE)
_CONTENT_CHARSET = re.compile(
    r"charset\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s;\"']+))", re.IGNORECASE
)


def _charset_param(content: str) -> str | None:
    m = _CONTENT_CHARSET.search(content)
    if not m:
        return None
    return next(g for g in m.groups() if g is not None)


def _prescan(data: bytes) -> str | None:
    """The HTML prescan, simplified: the first ``<meta>`` in 1024 bytes naming a charset."""
    head = data[:1024].decode("latin-1")
    parts, pos = [], 0
    while True:  # drop comments; an unfinished one hides the rest
        start = head.find("<!--", pos)
        if start < 0:
            parts.append(head[pos:])
            break
        parts.append(head[pos:start])
        end = head.find("-->", start + 4)
        if end < 0:
            break
        pos = end + 3
    head = "".join(parts)
    for m in _META.finditer(head):
        attrs = _tag_attributes(head, m.start(), decode=False)
        label = attrs.get("charset")
        if label is None and attrs.get("http-equiv", "").strip().lower() == "content-type":
            label = _charset_param(attrs.get("content", ""))
        if label is None:
            continue
        codec = web_codec(label)
        if codec is not None:
            return "utf-8" if is_utf(codec) else codec  # a meta cannot really say UTF-16
    return None


def _decode_html(data: bytes, encoding: str | None) -> tuple[str, str]:
    bom = decode_bom(data)
    if bom is not None:
        return bom
    codec = web_codec(encoding) or _prescan(data) or "utf-8"
    return decode_text(data, codec), codec


# --- HTML attributes ------------------------------------------------------------------------

_ASCII_WS = " \t\n\f\r"
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


def _tag_attributes(text: str, start: int = 0, *, decode: bool = True) -> dict[str, str]:
    """Attributes of the start tag at ``text[start]`` by the HTML tokenizer's rules (first of
    duplicates wins, names lower-cased); the stdlib's own unescaping is not attribute-aware.
    A name may start with ``=``; an unclosed quote runs to the end."""
    attrs: dict[str, str] = {}
    pos = _TAG_NAME.match(text, start).end()  # type: ignore[union-attr]
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


# --- srcset and meta refresh ----------------------------------------------------------------

_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"-?(?:[0-9]+|[0-9]*\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _valid_descriptors(descriptors: list[str]) -> bool:
    width = density = height = False
    for d in descriptors:
        value, unit = d[:-1], d[-1:]
        if unit == "w" and _INT.fullmatch(value):
            if width or density or int(value) == 0:
                return False
            width = True
        elif unit == "x" and _FLOAT.fullmatch(value):
            if width or density or height or float(value) < 0:
                return False
            density = True
        elif unit == "h" and _INT.fullmatch(value):
            if height or density or int(value) == 0:
                return False
            height = True
        else:
            return False
    return not (height and not width)


def parse_srcset(value: str) -> list[str]:
    """The URLs of a ``srcset``'s valid candidates (HTML "parse a srcset attribute")."""
    urls: list[str] = []
    n, i = len(value), 0
    while True:
        while i < n and (value[i] in _ASCII_WS or value[i] == ","):
            i += 1
        if i >= n:
            return urls
        start = i
        while i < n and value[i] not in _ASCII_WS:
            i += 1
        url = value[start:i]
        descriptors: list[str] = []
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            while i < n and value[i] in _ASCII_WS:
                i += 1
            current, state = "", "in"
            while True:
                c = value[i] if i < n else ""
                if state == "in":
                    if c and c in _ASCII_WS:
                        if current:
                            descriptors.append(current)
                            current = ""
                        state = "after"
                    elif c == ",":
                        i += 1
                        if current:
                            descriptors.append(current)
                        break
                    elif c == "(":
                        current += c
                        state = "parens"
                    elif not c:
                        if current:
                            descriptors.append(current)
                        break
                    else:
                        current += c
                elif state == "parens":
                    if c == ")":
                        current += c
                        state = "in"
                    elif not c:
                        descriptors.append(current)
                        break
                    else:
                        current += c
                elif not (c and c in _ASCII_WS):  # after a descriptor
                    if not c:
                        break
                    state = "in"
                    continue  # reconsume
                i += 1
        if url and _valid_descriptors(descriptors):
            urls.append(url)


def parse_refresh(content: str) -> str | None:
    """The URL of a ``<meta http-equiv=refresh>`` content (HTML "declarative refresh")."""
    s = content.lstrip(_ASCII_WS)
    i, n = 0, len(s)
    while i < n and s[i].isascii() and s[i].isdigit():
        i += 1
    if i == 0 and not s.startswith("."):
        return None
    while i < n and (s[i] == "." or (s[i].isascii() and s[i].isdigit())):
        i += 1
    if i >= n or s[i] not in _ASCII_WS + ";,":
        return None
    while i < n and s[i] in _ASCII_WS:
        i += 1
    if i < n and s[i] in ";,":
        i += 1
        while i < n and s[i] in _ASCII_WS:
            i += 1
    if i >= n:
        return None
    url = s[i:]
    if s[i] in "Uu":
        j = i + 1
        if s[j : j + 2].lower() == "rl":
            j += 2
            while j < n and s[j] in _ASCII_WS:
                j += 1
            if j < n and s[j] == "=":
                j += 1
                while j < n and s[j] in _ASCII_WS:
                    j += 1
                i = j
            else:
                return url
        else:
            return url
    quote = s[i] if i < n and s[i] in "\"'" else ""
    url = s[i + len(quote) :]
    if quote and quote in url:
        url = url[: url.index(quote)]
    return url


# --- HTML -----------------------------------------------------------------------------------

_ICON_RELS = {"icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon"}
_NO_RESOURCE_RELS = {"dns-prefetch", "preconnect"}
_SRC_KIND = {
    "script": "script",
    "frame": "frame",
    "iframe": "iframe",
    "embed": "embed",
    "audio": "media",
    "video": "media",
    "source": "media",
    "track": "media",
}
#: raw-text and RCDATA elements: no tags inside, up to their end tag (the stdlib parser knows
#: only script and style)
_RAW_TEXT = frozenset(
    {"script", "style", "title", "textarea", "xmp", "iframe", "noembed", "noframes"}
)
#: the start tags the collector looks at; any other matters only if it has a style attribute
_WANTED = frozenset(
    {"a", "area", "link", "base", "img", "input", "object", "image", "meta", "style"}
    | {"body", "table", "tr", "td", "th"}
    | set(_SRC_KIND)
    | _RAW_TEXT
)


class _Collector:
    """Collects raw URL attribute values in document order; resolution happens afterwards,
    because ``<base href>`` applies to the whole document, even to links before it."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, bool, bool]] = []
        self.base_href: str | None = None

    def add(self, value: str | None, kind: str, requisite: bool = True) -> None:
        if value:
            self.items.append((value, kind, requisite, False))

    def start_tag(self, tag: str, a: dict[str, str]) -> None:
        """A start tag: its lower-cased name and its attributes."""
        get = a.get
        if tag in ("a", "area"):
            self.add(get("href") or get("xlink:href"), tag, False)
        elif tag == "link":
            self.link(a)
        elif tag == "base":
            if self.base_href is None and "href" in a:
                self.base_href = a["href"]
        elif tag == "img" or (tag == "input" and get("type", "").strip().lower() == "image"):
            self.add(get("src"), "img")
        elif tag in _SRC_KIND:
            self.add(get("src"), _SRC_KIND[tag])
            if tag == "video":
                self.add(get("poster"), "poster")
        elif tag == "object":
            self.add(get("data"), "object")
        elif tag == "image":  # SVG
            self.add(get("href") or get("xlink:href"), "img")
        elif tag == "meta" and get("http-equiv", "").strip().lower() == "refresh":
            self.add(parse_refresh(get("content", "")), "meta-refresh", False)
        if tag in ("img", "source") and "srcset" in a:
            for url in parse_srcset(a["srcset"]):
                self.add(url, "srcset")
        if tag in ("body", "table", "tr", "td", "th"):
            self.add(get("background"), "img")
        if get("style"):
            self.items.extend(css_items(a["style"]))

    def link(self, a: dict[str, str]) -> None:
        rels = set(a.get("rel", "").lower().split())
        if "stylesheet" in rels:
            self.add(a.get("href"), "css")
        elif rels & _ICON_RELS:
            self.add(a.get("href"), "icon")
        elif rels & {"preload", "modulepreload"}:
            self.add(a.get("href"), "preload")
        elif "manifest" in rels:
            self.add(a.get("href"), "manifest")
        elif not rels or not rels <= _NO_RESOURCE_RELS:
            self.add(a.get("href"), "link", False)

    def style_element(self, css: str) -> None:
        self.items.extend(css_items(css))


# The tokenizer.  Its rules are those of Python 3.11's html.parser, which this module used to
# run on (and which the tests pin): a tag runs to the ">" its attribute grammar allows,
# comments end at the first "--" + spaces + ">", "<!" and "<?" at the next ">", and a
# construct left unfinished runs to the end of the document (as the HTML spec says: a comment
# closes at EOF, a tag is dropped).  The stdlib's expressions are kept here, so that every
# Python finds the same links, and the scan is driven by regular expressions: text and the
# tags nobody looks at (<span>, <p>, </a> ...) are passed over inside one match, without a
# Python step each: the Python documentation's pages took 46 ms each, now 6 ms with their links
# resolved.

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
_RAW_TEXT_END = {name: re.compile(rf"</\s*{name}\s*>", re.IGNORECASE) for name in _RAW_TEXT}

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


_WANTED_NAME = _name_trie(sorted(_WANTED)) + r"[ \t\n\r\f/>]"
#: a run of what no link can come from: text, end tags, comments, declarations, processing
#: instructions, a "<" that starts nothing, and plain tags not wanted and without a style
_PASS_OVER = re.compile(
    r"(?:[^<]++"
    r"|</[^>]*+>"
    r"|<!--.*?--\s*+>"
    r"|<(?:!(?!--)|\?)[^>]*+>"
    r"|<(?![a-zA-Z/!?])"
    rf"|<(?!{_WANTED_NAME}){_NAME}{_plain_attributes(_NOT_STYLE)}/?>"
    r")*+",
    re.DOTALL,
)
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _start_tag(text: str, i: int) -> tuple[int, str | None, bool, dict[str, str] | None]:
    """The start tag at ``text[i]`` ("<" and a letter), by the stdlib's rules: where it ends
    (-1: at the end of the document, unfinished), its lower-cased name (None: the stdlib
    takes it as text), whether it ends with "/>", and for a plain tag its attributes."""
    m = _PLAIN_TAG.match(text, i)
    if m is not None:
        attrs: dict[str, str] = {}
        for name, dq, sq, bare in _PLAIN_ATTRIBUTE.findall(m.group(2)):
            name = name.lower()
            if name not in attrs:
                value = dq or sq or bare
                attrs[name] = _unescape_attr(value) if "&" in value else value
        return m.end(), m.group(1).lower(), m.group(3) == "/", attrs
    j = _LOCATE_START_TAG_END.match(text, i).end()  # type: ignore[union-attr]
    after = text[j : j + 1]
    if after == ">":
        end = j + 1
    elif after == "/":
        if not text.startswith("/>", j):
            return -1, None, False, None
        end = j + 2
    elif not after or after in _LETTERS or after == "=":
        return -1, None, False, None
    else:
        end = j if j > i else i + 1
    name = _TAG_FIND.match(text, i + 1)
    assert name is not None  # "<" and a letter
    k = name.end()
    while k < end and (attr := _ATTR_FIND.match(text, k)):
        k = attr.end()
    rest = text[k:end].strip()
    if rest not in (">", "/>"):
        return end, None, False, None
    return end, name.group(1).lower(), rest == "/>", None


def _raw_text_end(text: str, tag: str, i: int) -> tuple[int, int]:
    """Where the content of raw-text element ``tag`` starting at ``i`` ends, and where its
    end tag ends (both the document's length if it is never closed)."""
    close = _RAW_TEXT_END[tag]
    while m := close.search(text, i):
        end = _END_TAG_FIND.match(text, m.start())
        if end is not None and end.group(1).lower() == tag:
            return m.start(), m.end()
        i = m.end()  # e.g. "</\u017ftyle>": text, as in the stdlib
    return len(text), len(text)


def _scan(text: str, collector: _Collector, *, pass_over: bool = True) -> None:
    """Tokenize ``text`` (NULs already replaced) into ``collector``.  ``pass_over`` False
    takes every token one by one (the same result, slower: for the tests)."""
    n = len(text)
    i = 0
    skip = _PASS_OVER.match
    while i < n:
        i = skip(text, i).end() if pass_over else text.find("<", i)  # type: ignore[union-attr]
        if i < 0 or i >= n:
            return
        c = text[i + 1 : i + 2]
        if c.isascii() and c.isalpha():
            end, tag, closed, attrs = _start_tag(text, i)
            if end < 0:
                return
            if tag is not None:
                collector.start_tag(tag, _tag_attributes(text[i:end]) if attrs is None else attrs)
                if not closed and tag in _RAW_TEXT:
                    content_end, close_end = _raw_text_end(text, tag, end)
                    if tag == "style":
                        collector.style_element(text[end:content_end])
                    end = close_end
            i = end
        elif c == "/":
            end = text.find(">", i + 2)
            if end < 0:
                return
            i = end + 1
        elif text.startswith("<!--", i):
            m = _COMMENT_CLOSE.search(text, i + 4)
            if m is None:
                return
            i = m.end()
        elif c in ("!", "?"):
            end = text.find(">", i + 2)
            if end < 0:
                return
            i = end + 1
        else:
            i += 1


def extract_html_links(
    html: str | bytes, base_url: str, *, encoding: str | None = None
) -> list[Link]:
    """Every link and requisite of an HTML page, canonical, first occurrence first.

    ``base_url`` is the page's own URL; the first ``<base href>`` (resolved against it) takes
    over when it is an http(s) URL. ``encoding`` is the page's encoding as the Content-Type
    says: bytes are decoded by BOM, then ``encoding``, then a ``<meta>`` charset in the first
    1024 bytes, else UTF-8 (with replacement). For ``str`` input ``encoding`` only sets how a
    non-ASCII query is percent-encoded. Never raises on bad input.
    """
    if isinstance(html, (bytes, bytearray, memoryview)):
        text, codec = _decode_html(bytes(html), encoding)
    else:
        text, codec = html, web_codec(encoding) or "utf-8"
    collector = _Collector()
    _scan(text.replace("\x00", "\ufffd"), collector)  # NUL as the HTML tokenizer does
    query_codec = None if is_utf(codec) else codec
    base = page_base(base_url)
    if collector.base_href is not None:
        base = canonical_link(collector.base_href, base, query_codec) or base
    return resolve_links(collector.items, base, query_codec)
