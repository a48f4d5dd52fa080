"""Link extraction from HTML and CSS, for ``wwwproxy fetch --depth N --requisites``.

The crawler follows what a browser would load or navigate to, so the rules here are the
browser's (WHATWG HTML, CSS Syntax 3, WHATWG URL) wherever it matters for which resource gets
fetched: entities in attributes are decoded as in an attribute (``&copy=2`` stays as written),
``<base href>`` applies to the whole document, ``srcset`` is split by the spec's algorithm,
backslashes and embedded tabs/newlines in URLs are treated as browsers do, and a non-ASCII query
in a non-UTF-8 page is percent-encoded in the page's encoding. Every URL is then canonicalized
(:func:`wwwproxy.url.canonicalize`), so the crawler's queue, the cache and the index agree.

Pure functions, no I/O. Bad input never raises: an unusable URL is left out.

Link kinds (``requisite`` in brackets):

- ``a``, ``area`` (no): hyperlinks; ``link`` (no): ``<link>`` with any other ``rel``
  (alternate, next, prev, canonical, prefetch, ...); ``meta-refresh`` (no): a redirect, so it is
  followed like a link, at the next depth.
- ``css`` (yes): ``<link rel=stylesheet>`` (also ``alternate stylesheet``); ``icon`` (yes):
  ``rel`` icon / shortcut icon / apple-touch-icon(-precomposed) / mask-icon; ``preload`` (yes):
  ``rel`` preload / modulepreload; ``manifest`` (yes).
- ``img`` (yes): ``<img src>``, ``<input type=image src>``, SVG ``<image href>``, legacy
  ``background`` attributes; ``srcset`` (yes): every valid candidate of ``srcset`` on ``<img>``
  and ``<source>``; ``poster`` (yes): ``<video poster>``; ``media`` (yes): ``src`` of
  ``<audio>``, ``<video>``, ``<source>``, ``<track>``.
- ``script``, ``frame``, ``iframe``, ``embed``, ``object`` (yes).
- ``import`` (yes): CSS ``@import``; ``css-url`` (yes): CSS ``url()`` (and strings in
  ``image-set()``), from style sheets, ``<style>`` elements and ``style`` attributes.

Not extracted: form actions (following one without its fields fetches nothing useful and may
change state), ``ping``, ``cite``, ``srcdoc`` contents and anything found only by running scripts.
``<noscript>`` content is read: the crawler runs no scripts, so it needs what it shows. Tags in
``<title>``, ``<textarea>``, ``<iframe>``, ``<xmp>``, ``<noembed>``, ``<noframes>`` are text.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from html import unescape as _html_unescape
from html.entities import html5 as _HTML5
from html.parser import HTMLParser
from urllib.parse import urljoin

from wwwproxy.url.canonical import InvalidURL, canonicalize

__all__ = [
    "REQUISITE_KINDS",
    "Link",
    "extract_css_links",
    "extract_html_links",
    "is_css",
    "is_html",
    "parse_refresh",
    "parse_srcset",
    "registrable_domain",
    "same_domain",
    "same_host",
    "under_prefix",
]

REQUISITE_KINDS = frozenset(
    {
        "css",
        "icon",
        "preload",
        "manifest",
        "img",
        "srcset",
        "poster",
        "media",
        "script",
        "frame",
        "iframe",
        "embed",
        "object",
        "import",
        "css-url",
    }
)


@dataclass(frozen=True, slots=True)
class Link:
    """One link: its canonical URL (``URL.file``: the GET archive key), where it came from, and
    whether the page needs it to display (a requisite) rather than merely pointing to it."""

    url: str
    kind: str
    requisite: bool


# --- URL resolution -------------------------------------------------------------------------

_C0_SPACE = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_WEB = ("http", "https")


def _slashes(ref: str) -> str:
    """Backslash is a slash in http(s) URLs, but only before the query and fragment."""
    if "\\" not in ref:
        return ref
    end = len(ref)
    for sep in "?#":
        at = ref.find(sep)
        if 0 <= at < end:
            end = at
    return ref[:end].replace("\\", "/") + ref[end:]


def _absolute(ref: str, base: str | None) -> str | None:
    """Resolve ``ref`` as a browser would; None unless the result is an http(s) URL."""
    ref = ref.strip(_C0_SPACE).translate(_TAB_NEWLINE)
    if not ref or ref.startswith("#"):
        return None  # nothing, or this very page
    base_scheme = base.partition(":")[0] if base else None
    m = _SCHEME.match(ref)
    if m:
        scheme = m.group(1).lower()
        if scheme not in _WEB:
            return None  # javascript:, data:, mailto:, tel:, about:, blob:, ftp:, ...
        rest = _slashes(ref[m.end() :])
        if scheme != base_scheme or rest.startswith("//"):
            return f"{scheme}://{rest.lstrip('/')}"  # any number of slashes, as browsers
        ref = rest  # "http:foo" on an http page is relative (WHATWG)
    else:
        if base is None:
            return None
        ref = _slashes(ref)
        if ref.startswith("//"):
            return f"{base_scheme}://{ref.lstrip('/')}"
    try:
        return urljoin(base or "", ref)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return None


def _encode_query(url: str, codec: str) -> str:
    """Browsers send a non-UTF-8 page's query characters in the page's encoding."""
    q = url.find("?")
    if q < 0 or url.isascii():
        return url
    hash_at = url.find("#", q)
    query = url[q + 1 :] if hash_at < 0 else url[q + 1 : hash_at]
    if query.isascii():
        return url
    out = []
    for ch in query:
        if ch < "\x80":
            out.append(ch)
            continue
        try:
            data = ch.encode(codec)
        except UnicodeError:
            out.append(f"%26%23{ord(ch)}%3B")  # "&#N;", as the URL encoder does
            continue
        out.append("".join(f"%{b:02X}" for b in data))
    return url[: q + 1] + "".join(out)


def _canonical(ref: str, base: str | None, query_codec: str | None) -> str | None:
    absolute = _absolute(ref, base)
    if absolute is None:
        return None
    if query_codec is not None:
        absolute = _encode_query(absolute, query_codec)
    try:
        url = canonicalize(absolute)
    except InvalidURL:
        return None
    if url.local or url.proto not in _WEB:
        return None  # an empty host would name the proxy itself
    return url.file


def _page_base(base_url: str) -> str | None:
    try:
        url = canonicalize(base_url)
    except (InvalidURL, TypeError):
        return None
    return url.file if url.proto in _WEB and not url.local else None


def _links(
    items: list[tuple[str, str, bool, bool]], base: str | None, query_codec: str | None
) -> list[Link]:
    """Resolve (value, kind, requisite, is_css) items; one Link per URL at its first place,
    made a requisite if any occurrence is one (an ``<a>`` to an image the page also shows)."""
    found: dict[str, Link] = {}
    resolved: dict[tuple[str, bool], str | None] = {}  # pages repeat their URLs a lot
    for value, kind, requisite, in_css in items:
        key = (value, in_css)
        if key in resolved:
            url = resolved[key]
        else:
            url = resolved[key] = _canonical(value, base, None if in_css else query_codec)
        if url is None:
            continue
        prev = found.get(url)
        if prev is None or (requisite and not prev.requisite):
            found[url] = Link(url, kind, requisite)
    return list(found.values())


# --- character encodings -------------------------------------------------------------------

# WHATWG Encoding labels whose meaning differs from Python's codec of the same name.
_LABEL_GROUPS = {
    "cp1252": "ascii us-ascii ansi_x3.4-1968 iso-8859-1 iso8859-1 iso88591 iso_8859-1 latin1 "
    "latin-1 l1 cp819 ibm819 csisolatin1 iso-ir-100 iso_8859-1:1987 x-cp1252 windows-1252 "
    "x-user-defined",
    "cp1254": "iso-8859-9 iso8859-9 latin5 l5 iso_8859-9 windows-1254",
    "gb18030": "gb2312 gbk x-gbk chinese csgb2312 gb_2312-80",
    "cp874": "tis-620 iso-8859-11 windows-874",
    "cp949": "euc-kr ks_c_5601-1987 korean csksc56011987 windows-949",
    "cp932": "shift_jis shift-jis sjis ms_kanji csshiftjis windows-31j",
    "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
}
_LABELS = {name: codec for codec, names in _LABEL_GROUPS.items() for name in names.split()}
_NOT_WEB = {"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape", "utf-7"}
_NOT_WEB |= {"mbcs", "oem", "charmap"}


def _codec(label: str | None) -> str | None:
    """A Python codec for an encoding label, or None for an unknown or non-web one."""
    if not label:
        return None
    label = label.strip().strip("\"'").strip().lower()
    label = _LABELS.get(label, label)
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError):
        return None
    if info.name in _NOT_WEB or not getattr(info, "_is_text_encoding", True):
        return None
    return info.name


def _is_utf(codec: str) -> bool:
    return codec.startswith(("utf-8", "utf-16", "utf-32", "utf_8", "utf_16", "utf_32"))


_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)


def _decode(data: bytes, codec: str) -> str:
    try:
        return data.decode(codec, "replace")
    except (LookupError, UnicodeError):  # a codec that cannot decode at all
        return data.decode("utf-8", "replace")


def _decode_bom(data: bytes) -> tuple[str, str] | None:
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _decode(data[len(bom) :], codec), codec
    return None


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
        codec = _codec(label)
        if codec is not None:
            return "utf-8" if _is_utf(codec) else codec  # a meta cannot really say UTF-16
    return None


def _decode_html(data: bytes, encoding: str | None) -> tuple[str, str]:
    bom = _decode_bom(data)
    if bom is not None:
        return bom
    codec = _codec(encoding) or _prescan(data) or "utf-8"
    return _decode(data, codec), codec


_CSS_CHARSET = re.compile(rb'@charset "([^"]{1,40})";')


def _decode_css(data: bytes, encoding: str | None) -> str:
    bom = _decode_bom(data)
    if bom is not None:
        return bom[0]
    codec = _codec(encoding)
    if codec is None:
        m = _CSS_CHARSET.match(data)
        if m:
            codec = _codec(m.group(1).decode("latin-1"))
            if codec is not None and _is_utf(codec):
                codec = "utf-8"
    return _decode(data, codec or "utf-8")


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


# --- CSS ------------------------------------------------------------------------------------

_CSS_WS = " \t\n"
_HEX = frozenset("0123456789abcdefABCDEF")
_NON_PRINTABLE = frozenset([chr(i) for i in range(9)] + ["\x0b", "\x7f"]) | frozenset(
    chr(i) for i in range(0x0E, 0x20)
)
_IMAGE_SET = {"image-set", "-webkit-image-set"}


def _name_start(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_") or (c != "" and not c.isascii())


def _name_char(c: str) -> bool:
    return _name_start(c) or c == "-" or ("0" <= c <= "9" and c != "")


class _CSSScanner:
    """Just enough of CSS Syntax 3 tokenization to find URLs, with escapes and comments."""

    def __init__(self, css: str) -> None:
        css = css.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")
        self.s = css.replace("\x00", "\ufffd")
        self.n = len(self.s)

    def at(self, i: int) -> str:
        return self.s[i] if i < self.n else ""

    def valid_escape(self, i: int) -> bool:
        return self.at(i) == "\\" and self.at(i + 1) != "\n"

    def starts_ident(self, i: int) -> bool:
        c = self.at(i)
        if c == "-":
            nxt = self.at(i + 1)
            return _name_start(nxt) or nxt == "-" or self.valid_escape(i + 1)
        return _name_start(c) or self.valid_escape(i)

    def escape(self, i: int) -> tuple[str, int]:
        """The escape whose backslash is at ``i - 1``: its character and the index after it."""
        if i >= self.n:
            return "\ufffd", i
        if self.s[i] in _HEX:
            j = i
            while j < self.n and j - i < 6 and self.s[j] in _HEX:
                j += 1
            code = int(self.s[i:j], 16)
            if j < self.n and self.s[j] in _CSS_WS:
                j += 1
            if code == 0 or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                return "\ufffd", j
            return chr(code), j
        return self.s[i], i + 1

    def ident(self, i: int) -> tuple[str, int]:
        out = []
        while i < self.n:
            c = self.s[i]
            if _name_char(c):
                out.append(c)
                i += 1
            elif self.valid_escape(i):
                ch, i = self.escape(i + 1)
                out.append(ch)
            else:
                break
        return "".join(out), i

    def string(self, i: int, quote: str) -> tuple[str | None, int]:
        out = []
        while i < self.n:
            c = self.s[i]
            if c == quote:
                return "".join(out), i + 1
            if c == "\n":
                return None, i  # a bad string
            if c == "\\":
                if i + 1 >= self.n:
                    i += 1
                elif self.s[i + 1] == "\n":
                    i += 2
                else:
                    ch, i = self.escape(i + 1)
                    out.append(ch)
                continue
            out.append(c)
            i += 1
        return "".join(out), i

    def url(self, i: int) -> tuple[str | None, int]:
        """An unquoted ``url(`` token's value (None if it is a bad URL) and the index after."""
        while i < self.n and self.s[i] in _CSS_WS:
            i += 1
        out = []
        while i < self.n:
            c = self.s[i]
            if c == ")":
                return "".join(out), i + 1
            if c in _CSS_WS:
                while i < self.n and self.s[i] in _CSS_WS:
                    i += 1
                if i >= self.n or self.s[i] == ")":
                    return "".join(out), i + 1
                break
            if c in "\"'(" or c in _NON_PRINTABLE:
                break
            if c == "\\":
                if not self.valid_escape(i):
                    break
                ch, i = self.escape(i + 1)
                out.append(ch)
                continue
            out.append(c)
            i += 1
        else:
            return "".join(out), i
        while i < self.n:  # the remnants of a bad URL
            if self.s[i] == ")":
                return None, i + 1
            i += 2 if self.valid_escape(i) else 1
        return None, i

    def number(self, i: int) -> int:
        if self.at(i) in "+-":
            i += 1
        while self.at(i) != "" and (self.at(i) in "0123456789."):
            i += 1
        if self.starts_ident(i):
            _, i = self.ident(i)
        return i

    def links(self) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        stack: list[str] = []  # names of open functions ("" for a plain parenthesis)
        pending_import = False  # just after "@import"
        url_string = False  # just after a quoted url( or src(
        i, s, n = 0, self.s, self.n
        while i < n:
            c = s[i]
            if c == "/" and self.at(i + 1) == "*":
                end = s.find("*/", i + 2)
                i = n if end < 0 else end + 2
                continue
            if c in _CSS_WS:
                i += 1
                continue
            if c in "\"'":
                value, i = self.string(i + 1, c)
                if value is not None:
                    if pending_import:
                        found.append((value, "import"))
                    elif url_string or (stack and stack[-1] in _IMAGE_SET):
                        found.append((value, "css-url"))
                pending_import = url_string = False
                continue
            keep_import = False
            url_string = False
            if c == "@" and self.starts_ident(i + 1):
                name, i = self.ident(i + 1)
                pending_import = name.lower() == "import"
                continue
            if c == "#" and (_name_char(self.at(i + 1)) or self.valid_escape(i + 1)):
                _, i = self.ident(i + 1)
            elif (c.isascii() and c.isdigit()) or (
                c in "+-." and (self.at(i + 1).isdigit() or self.at(i + 1) == ".")
            ):
                i = self.number(i)
            elif self.starts_ident(i):
                name, i = self.ident(i)
                if self.at(i) == "(":
                    i += 1
                    lname = name.lower()
                    if lname == "url":
                        j = i
                        while j < n and s[j] in _CSS_WS:
                            j += 1
                        if self.at(j) in ("'", '"'):
                            stack.append("url")
                            url_string = keep_import = True
                            i = j
                        else:
                            value, i = self.url(i)
                            if value is not None:
                                found.append((value, "import" if pending_import else "css-url"))
                    else:
                        stack.append(lname)
                        if lname == "src":
                            url_string = keep_import = True
            elif c == "(":
                stack.append("")
                i += 1
            elif c == ")":
                if stack:
                    stack.pop()
                i += 1
            else:
                i += 1
            if not keep_import:
                pending_import = False
        return found


def _css_items(css: str) -> list[tuple[str, str, bool, bool]]:
    return [(value, kind, True, True) for value, kind in _CSSScanner(css).links()]


def extract_css_links(
    css: str | bytes, base_url: str, *, encoding: str | None = None
) -> list[Link]:
    """Every URL a style sheet loads (``@import`` and ``url()``), all requisites.

    Bytes are decoded by BOM, then ``encoding`` (the Content-Type charset), then a leading
    ``@charset``, else UTF-8. Never raises on bad input.
    """
    if isinstance(css, (bytes, bytearray, memoryview)):
        text = _decode_css(bytes(css), encoding)
    else:
        text = css
    return _links(_css_items(text), _page_base(base_url), None)


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
            self.items.extend(_css_items(a["style"]))

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
            self.items.extend(_css_items("".join(self.style)))
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
        text, codec = html, _codec(encoding) or "utf-8"
    collector = _Collector()
    try:
        collector.feed(text.replace("\x00", "\ufffd"))  # as the HTML tokenizer does
        collector.close()
    except AssertionError:  # the stdlib parser's last-resort complaints: keep what was found
        pass
    if collector.style is not None:  # a style element left open runs to the end
        collector.style.append(collector.rawdata)
    collector.end_style()
    query_codec = None if _is_utf(codec) else codec
    base = _page_base(base_url)
    if collector.base_href is not None:
        base = _canonical(collector.base_href, base, query_codec) or base
    return _links(collector.items, base, query_codec)


# --- content types --------------------------------------------------------------------------


def _media_type(content_type: str | None) -> str:
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def is_html(content_type: str | None) -> bool:
    """Whether a Content-Type is a page to look for links in (HTML or XHTML)."""
    return _media_type(content_type) in ("text/html", "application/xhtml+xml")


def is_css(content_type: str | None) -> bool:
    """Whether a Content-Type is a style sheet, whose ``@import`` and ``url()`` are requisites."""
    return _media_type(content_type) == "text/css"


# --- crawl scope ----------------------------------------------------------------------------

# Second-level labels under which a country-code TLD registers names (co.uk, com.au, ac.jp).
_CC_SECOND_LEVELS = "ac co com edu gob gov go gv ltd mil ne net nhs nic nom or org plc sch"
_CC_SECOND_LEVEL = frozenset(_CC_SECOND_LEVELS.split())


def _host(url: str) -> str | None:
    try:
        parsed = canonicalize(url)
    except (InvalidURL, TypeError):
        return None
    return None if parsed.local else parsed.host.rstrip(".")


def registrable_domain(host: str) -> str:
    """An approximation of the registrable domain ("eTLD+1") without the Public Suffix List.

    The last two labels, or three when the TLD is a two-letter country code and the second
    label a usual registry label (``example.co.uk``, ``example.com.au``). It is wrong for the
    private suffixes (``a.github.io`` and ``b.github.io`` count as one domain) and for less
    usual registries (``city.kawasaki.jp``). IP addresses are returned whole.
    """
    host = host.rstrip(".").lower()
    if host.startswith("[") or host.replace(".", "").isdigit():
        return host
    labels = host.split(".")
    if len(labels) <= 2:
        return host
    if len(labels[-1]) == 2 and labels[-2] in _CC_SECOND_LEVEL:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def same_host(a: str, b: str) -> bool:
    """Whether two URLs are on the same host name (ports and http/https not compared)."""
    ha, hb = _host(a), _host(b)
    return ha is not None and ha == hb


def same_domain(a: str, b: str) -> bool:
    """Whether two URLs are under the same registrable domain (see :func:`registrable_domain`)."""
    ha, hb = _host(a), _host(b)
    return ha is not None and hb is not None and registrable_domain(ha) == registrable_domain(hb)


def under_prefix(url: str, prefix: str) -> bool:
    """Whether ``url`` is at or below ``prefix`` (both canonicalized; scheme, host and port
    must match). A prefix path not ending in ``/`` is a whole segment: ``/docs`` covers
    ``/docs``, ``/docs/x`` and ``/docs?x`` but not ``/docs2``."""
    try:
        u, p = canonicalize(url), canonicalize(prefix)
    except (InvalidURL, TypeError):
        return False
    if (u.proto, u.host, u.port) != (p.proto, p.host, p.port):
        return False
    target, want = u.path_args, p.path_args
    if not target.startswith(want):
        return False
    if len(target) == len(want) or want.endswith("/") or p.args is not None:
        return True
    return target[len(want)] in "/?"
