"""CSS link extraction: every URL a style sheet loads (``@import`` and ``url()``, strings in
``image-set()``), by just enough of CSS Syntax 3, for style sheets, ``<style>`` elements and
``style`` attributes.  Pure functions, no I/O; bad input never raises."""

from __future__ import annotations

import re

from .links import (
    PageLinks,
    decode_bom,
    decode_text,
    is_utf,
    page_base,
    resolve_links,
    web_codec,
)

__all__ = ["css_items", "extract_css_links"]

_CSS_CHARSET = re.compile(rb'@charset "([^"]{1,40})";')


def _decode_css(data: bytes, encoding: str | None) -> str:
    bom = decode_bom(data)
    if bom is not None:
        return bom[0]
    codec = web_codec(encoding)
    if codec is None:
        m = _CSS_CHARSET.match(data)
        if m:
            codec = web_codec(m.group(1).decode("latin-1"))
            if codec is not None and is_utf(codec):
                codec = "utf-8"
    return decode_text(data, codec or "utf-8")


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
        out: list[str] = []
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
        out: list[str] = []
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
        out: list[str] = []
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


def css_items(css: str) -> list[tuple[str, str, bool, bool]]:
    return [(value, kind, True, True) for value, kind in _CSSScanner(css).links()]


def extract_css_links(
    css: str | bytes,
    base_url: str,
    *,
    encoding: str | None = None,
    max_links: int | None = None,
) -> PageLinks:
    """Every URL a style sheet loads (``@import`` and ``url()``), all requisites.

    Bytes are decoded by BOM, then ``encoding`` (the Content-Type charset), then a leading
    ``@charset``, else UTF-8. ``max_links``: at most that many, the rest counted. Never
    raises on bad input.
    """
    if isinstance(css, (bytes, bytearray, memoryview)):
        text = _decode_css(bytes(css), encoding)
    else:
        text = css
    return resolve_links(css_items(text), page_base(base_url), None, max_links)
