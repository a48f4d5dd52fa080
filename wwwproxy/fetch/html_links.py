"""HTML link extraction: every link and requisite of a page, as a browser reads it (the
tokenizer's attribute rules, ``<base href>`` for the whole document, ``srcset``, meta refresh,
the ``<meta>`` charset prescan; ``<style>`` and ``style`` attributes through
:mod:`wwwproxy.fetch.css_links`).  Pure functions, no I/O; bad input never raises."""

from __future__ import annotations

import re

from ..http.html_tokens import start_tags, tag_attributes
from .css_links import css_items
from .links import (
    PageLinks,
    canonical_link,
    decode_bom,
    decode_text,
    is_utf,
    page_base,
    resolve_links,
    web_codec,
)

__all__ = ["extract_html_links", "parse_refresh", "parse_srcset", "prescan_charset"]

_META = re.compile(r"<meta(?=[\s/])", re.IGNORECASE)
_CONTENT_CHARSET = re.compile(
    r"charset\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s;\"']+))", re.IGNORECASE
)


def _charset_param(content: str) -> str | None:
    m = _CONTENT_CHARSET.search(content)
    if not m:
        return None
    return next(g for g in m.groups() if g is not None)


def prescan_charset(data: bytes) -> str | None:
    """The HTML prescan, simplified: the first ``<meta>`` in 1024 bytes naming a charset (the
    codec's name, UTF-8 for any UTF; None if none)."""
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
        attrs = tag_attributes(head, m.start(), decode=False)
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
    codec = web_codec(encoding) or prescan_charset(data) or "utf-8"
    return decode_text(data, codec), codec


_ASCII_WS = " \t\n\f\r"


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
#: the start tags the collector looks at; any other matters only if it has a style attribute
#: (the tokenizer gives those, and the raw-text ones it must read to pass their text over)
_WANTED = frozenset(
    {"a", "area", "link", "base", "img", "input", "object", "image", "meta", "style"}
    | {"body", "table", "tr", "td", "th"}
    | set(_SRC_KIND)
)
#: ... when only requisites are wanted: hyperlinks' tags are passed over unread (most of the
#: tags a page's scan stops at), unless a ``style`` attribute may hold a requisite
_WANTED_REQUISITES = _WANTED - {"a", "area"}


class _Collector:
    """Collects raw URL attribute values in document order; resolution happens afterwards,
    because ``<base href>`` applies to the whole document, even to links before it."""

    def __init__(self, *, hyperlinks: bool = True) -> None:
        self.items: list[tuple[str, str, bool, bool]] = []
        self.base_href: str | None = None
        self.hyperlinks = hyperlinks

    def add(self, value: str | None, kind: str, requisite: bool = True) -> None:
        if value and (requisite or self.hyperlinks):
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


def _scan(text: str, collector: _Collector, *, pass_over: bool = True) -> None:
    """Tokenize ``text`` (NULs already replaced) into ``collector``: the start tags it looks
    at, and the content of ``<style>`` elements.  ``pass_over`` False takes every token one
    by one (the same result, slower: for the tests)."""
    start_tag = collector.start_tag
    wanted = _WANTED if collector.hyperlinks else _WANTED_REQUISITES
    for _, end, tag, attrs, text_end in start_tags(text, wanted, pass_over=pass_over):
        start_tag(tag, attrs)
        if text_end > end and tag == "style":
            collector.style_element(text[end:text_end])


def extract_html_links(
    html: str | bytes,
    base_url: str,
    *,
    encoding: str | None = None,
    hyperlinks: bool = True,
    max_links: int | None = None,
) -> PageLinks:
    """Every link and requisite of an HTML page, canonical, first occurrence first.
    ``hyperlinks`` False: the requisites only (a page at the crawl's last level: its links
    are not followed), the same as those of the whole list, found in less time.

    ``base_url`` is the page's own URL; the first ``<base href>`` (resolved against it) takes
    over when it is an http(s) URL. ``encoding`` is the page's encoding as the Content-Type
    says: bytes are decoded by BOM, then ``encoding``, then a ``<meta>`` charset in the first
    1024 bytes, else UTF-8 (with replacement). For ``str`` input ``encoding`` only sets how a
    non-ASCII query is percent-encoded. ``max_links``: at most that many links, the
    references past them counted (:class:`~.links.PageLinks`). Never raises on bad input.
    """
    if isinstance(html, (bytes, bytearray, memoryview)):
        text, codec = _decode_html(bytes(html), encoding)
    else:
        text, codec = html, web_codec(encoding) or "utf-8"
    collector = _Collector(hyperlinks=hyperlinks)
    _scan(text.replace("\x00", "\ufffd"), collector)  # NUL as the HTML tokenizer does
    query_codec = None if is_utf(codec) else codec
    base = page_base(base_url)
    if collector.base_href is not None:
        base = canonical_link(collector.base_href, base, query_codec) or base
    return resolve_links(collector.items, base, query_codec, max_links)
