"""HTML link extraction: every link and requisite of a page, as a browser reads it (the
tokenizer's attribute rules, ``<base href>`` for the whole document, ``srcset``, meta refresh,
the ``<meta>`` charset prescan; ``<style>`` and ``style`` attributes through
:mod:`wwwproxy.fetch.css_links`).  Pure functions, no I/O; bad input never raises."""

from __future__ import annotations

import re
from html import unescape as _html_unescape
from html.entities import html5 as _HTML5
from html.parser import HTMLParser

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


def _tag_attributes(text: str, start: int = 0, *, decode: bool = True) -> dict[str, str]:
    """Attributes of the start tag at ``text[start]`` by the HTML tokenizer's rules (first of
    duplicates wins, names lower-cased); the stdlib's own unescaping is not attribute-aware."""
    n = len(text)
    i = start + 1
    while i < n and text[i] not in _ASCII_WS and text[i] not in "/>":
        i += 1
    attrs: dict[str, str] = {}
    while i < n:
        c = text[i]
        if c in _ASCII_WS or c == "/":
            i += 1
            continue
        if c == ">":
            break
        name_start = i
        i += 1  # a name may start with "="
        while i < n and text[i] not in _ASCII_WS and text[i] not in "/>=":
            i += 1
        name = text[name_start:i].lower()
        while i < n and text[i] in _ASCII_WS:
            i += 1
        value = ""
        if i < n and text[i] == "=":
            i += 1
            while i < n and text[i] in _ASCII_WS:
                i += 1
            if i < n and text[i] in "\"'":
                end = text.find(text[i], i + 1)
                if end < 0:
                    end = n
                value = text[i + 1 : end]
                i = end + 1
            else:
                value_start = i
                while i < n and text[i] not in _ASCII_WS and text[i] != ">":
                    i += 1
                value = text[value_start:i]
        if name not in attrs:
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


class _Collector(HTMLParser):
    """Collects raw URL attribute values in document order; resolution happens afterwards,
    because ``<base href>`` applies to the whole document, even to links before it."""

    # Raw-text and RCDATA elements: no tags inside (the stdlib knows only script and style).
    CDATA_CONTENT_ELEMENTS = (
        "script",
        "style",
        "title",
        "textarea",
        "xmp",
        "iframe",
        "noembed",
        "noframes",
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[tuple[str, str, bool, bool]] = []
        self.base_href: str | None = None
        self.style: list[str] | None = None

    def add(self, value: str | None, kind: str, requisite: bool = True) -> None:
        if value:
            self.items.append((value, kind, requisite, False))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text()
        if raw is None:
            return
        a = _tag_attributes(raw)
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
        elif tag == "style":
            self.style = []
        if tag in ("img", "source") and "srcset" in a:
            for url in parse_srcset(a["srcset"]):
                self.add(url, "srcset")
        if tag in ("body", "table", "tr", "td", "th"):
            self.add(get("background"), "img")
        if get("style"):
            self.items.extend(css_items(a["style"]))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag == "style":  # the stdlib parser saw no content for it
            self.style = None

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

    def handle_data(self, data: str) -> None:
        if self.style is not None:
            self.style.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self.end_style()

    def end_style(self) -> None:
        if self.style is not None:
            self.items.extend(css_items("".join(self.style)))
            self.style = None

    # The whole document is fed at once, so a construct the stdlib parser calls unfinished (-1)
    # runs to the end of the input. Saying so at once, as the HTML spec does (a comment closes
    # at EOF, a tag is dropped), also avoids the quadratic rescans of Pythons before 3.11.13.

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
        # "<![CDATA[" and "<![if ...]>" are bogus comments in HTML; the stdlib raises on some.
        return self.parse_bogus_comment(i, report)


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
    try:
        collector.feed(text.replace("\x00", "\ufffd"))  # as the HTML tokenizer does
        collector.close()
    except AssertionError:  # the stdlib parser's last-resort complaints: keep what was found
        pass
    if collector.style is not None:  # a style element left open runs to the end
        collector.style.append(collector.rawdata)
    collector.end_style()
    query_codec = None if is_utf(codec) else codec
    base = page_base(base_url)
    if collector.base_href is not None:
        base = canonical_link(collector.base_href, base, query_codec) or base
    return resolve_links(collector.items, base, query_codec)
