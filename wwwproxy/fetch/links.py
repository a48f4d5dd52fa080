"""Links for ``wwwproxy fetch --depth N --requisites``: the :class:`Link` and its kinds, how a
raw reference in a page becomes a canonical URL, character encodings, content types.  The
extraction itself is :mod:`wwwproxy.fetch.html_links` and :mod:`wwwproxy.fetch.css_links`.

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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urljoin

from wwwproxy.url.canonical import (
    InvalidURL,
    canonicalize,
    is_canonical_web_url,
    remove_dot_segments,
)

__all__ = [
    "REQUISITE_KINDS",
    "Link",
    "PageLinks",
    "canonical_link",
    "decode_bom",
    "decode_text",
    "is_css",
    "is_html",
    "is_utf",
    "page_base",
    "resolve_links",
    "web_codec",
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


class Link(NamedTuple):
    """One link: its canonical URL (``URL.file``: the GET archive key), where it came from, and
    whether the page needs it to display (a requisite) rather than merely pointing to it.  (A
    named tuple: one is made for each link of a page, far faster than a frozen dataclass.)"""

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


def _clean(ref: str) -> str:
    """Leading and trailing C0 controls and spaces stripped, tabs and newlines removed (WHATWG
    URL parsing); translate() only when there is one: it costs microseconds per URL."""
    ref = ref.strip(_C0_SPACE)
    if "\t" in ref or "\n" in ref or "\r" in ref:
        ref = ref.translate(_TAB_NEWLINE)
    return ref


@dataclass(frozen=True, slots=True)
class _Base:
    """A page's base URL (canonical, http(s)) and what resolving a reference against it
    reads, worked out once a page rather than once a link."""

    url: str
    scheme: str
    #: ``proto://[userinfo@]host[:port]``: what an absolute path is put after ("" if none)
    origin: str
    #: the URL without its query, what a ``?query`` is put after ("": left to urljoin, which
    #: drops an empty ``;`` parameter)
    path: str
    #: the URL up to its path's last ``/``, what a relative path is put after ("": left to
    #: urljoin, which merges ``//`` in it)
    directory: str

    @classmethod
    def of(cls, base: str | None) -> _Base | None:
        if not base:
            return None
        slashes = base.find("//")
        origin_end = base.find("/", slashes + 2) if slashes >= 0 else -1
        if origin_end < 0:
            return cls(base, base.partition(":")[0], "", "", "")
        path = base.partition("?")[0]
        directory = _directory(base) or ""
        plain = "//" not in directory[origin_end:] and "/." not in directory
        return cls(
            base,
            base.partition(":")[0],
            base[:origin_end],
            "" if path.endswith(";") else path,
            directory if plain else "",
        )


def _absolute(ref: str, base: _Base | None) -> str | None:
    """Resolve ``ref`` (cleaned: not empty, no fragment only) as a browser would; None unless
    the result is an http(s) URL."""
    base_scheme = base.scheme if base else None
    m = _SCHEME.match(ref) if ":" in ref else None
    if m:
        scheme = m.group(1).lower()
        if scheme not in _WEB:
            return None  # javascript:, data:, mailto:, tel:, about:, blob:, ftp:, ...
        rest = ref[m.end() :]
        if "\\" in rest:
            rest = _slashes(rest)
        if scheme != base_scheme or rest.startswith("//"):
            return f"{scheme}://{rest.lstrip('/')}"  # any number of slashes, as browsers
        ref = rest  # "http:foo" on an http page is relative (WHATWG)
    else:
        if base is None:
            return None
        if "\\" in ref:
            ref = _slashes(ref)
        if ref.startswith("//"):
            return f"{base_scheme}://{ref.lstrip('/')}"
    if base is None:
        return None  # (not reached: a scheme like the base's needs a base)
    joined = _join_plain(base, ref)
    if joined is not None:
        return joined
    try:
        return urljoin(base.url, ref)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return None


def _join_plain(base: _Base, ref: str) -> str | None:
    """``urljoin(base.url, ref)`` by putting strings together, for the references where that
    gives the same canonical URL (a property test compares them): a ``ref`` without scheme,
    authority or fragment that ``urljoin`` would not rewrite (it drops an empty ``;``
    parameter, merges ``//`` in a relative path, keeps the base's query for a lone ``?``,
    removes dot segments before escapes are decoded and after cutting off the last segment's
    ``;parameter``, so dot segments with ``%``, ``;`` or ``//`` are left to it).  None for any
    other: ``urljoin`` decides."""
    if not ref or "#" in ref or ref[0] <= " ":
        return None  # (urljoin strips a leading space or control, left after "http:")
    first = ref[0]
    if first == "?":
        return base.path + ref if base.path and ref != "?" else None
    qmark = ref.find("?")
    path, query = (ref, "") if qmark < 0 else (ref[:qmark], ref[qmark:])
    if query == "?":
        query = ""  # as urljoin drops it (and with it, "a ?" ends in a space, stripped)
    if first == ";" or path.endswith(";") or not base.origin:
        return None
    dotted = first == "." or "/." in path
    if dotted and ("%" in path or "//" in path or ";" in path):
        return None  # ("..;p" is ".." to urljoin, whose ".." above the root makes "//a" "/a")
    if first != "/":
        if not base.directory or "//" in path or ":" in path.partition("/")[0]:
            return None  # "//" merged, or "a:b" read as a scheme
        path = base.directory[len(base.origin) :] + path
    if dotted:
        path = remove_dot_segments(path)
    return base.origin + path + query


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


def canonical_link(ref: str, base: str | None, query_codec: str | None) -> str | None:
    """The canonical URL (``URL.file``) ``ref`` on a page at ``base`` leads to; None for
    nothing, the page itself or anything but an http(s) URL."""
    ref = _clean(ref)
    if not ref or ref[0] == "#":
        return None  # nothing, or this very page
    return _canonical(ref, _Base.of(base), query_codec)


def _canonical(ref: str, base: _Base | None, query_codec: str | None) -> str | None:
    """:func:`canonical_link` of a cleaned ``ref``, neither empty nor a fragment."""
    absolute = _absolute(ref, base)
    if absolute is None:
        return None
    if query_codec is not None:
        absolute = _encode_query(absolute, query_codec)
    if is_canonical_web_url(absolute):
        return absolute  # what canonicalize(absolute).file is, without the general parser
    try:
        url = canonicalize(absolute)
    except InvalidURL:
        return None
    if url.local or url.proto not in _WEB:
        return None  # an empty host would name the proxy itself
    return url.file


def page_base(base_url: str) -> str | None:
    try:
        url = canonicalize(base_url)
    except (InvalidURL, TypeError):
        return None
    return url.file if url.proto in _WEB and not url.local else None


# A reference whose link is the page's own canonical URL put together with it, canonical as
# it stands: a root-relative or relative path (maybe after ``./`` and ``../`` steps) of bytes
# that stay bare, but ``:`` and ``;``, or nothing but a query; a query of bytes that stay bare;
# any printable ASCII fragment.  Its segments must be neither empty nor start with ``.``
# (:meth:`_PlainBase.link` looks: a flat expression is matched faster).
_PLAIN_REF = re.compile(
    r"(/|(?:\.\.?/)*)"  # the root, or the steps up (maybe none)
    r"([A-Za-z0-9!$()*+,\-./=_~]*)"  # the path
    r"(\?[A-Za-z0-9!$()*,\-./:_|~&=;+?]+)?"  # the query
    r"(?:#[ -~]*)?"  # the fragment, which the link has not
)


class _PlainBase:
    """What a reference matching :data:`_PLAIN_REF` is put after on a page whose URL is
    canonical (http(s), not the proxy's own): the link is then canonical as put together, so
    neither ``urljoin`` nor the general parser need see it.  The table test compares it with
    them (tests/fetch/test_links_plain.py)."""

    __slots__ = ("directories", "known", "origin", "path")

    def __init__(self, page: _Base) -> None:
        self.origin = page.origin  # proto://[userinfo@]host[:port]
        self.path = page.path  # the page's URL without its query ("": left to the rules)
        #: the links of the references but queries alone, shared by the pages of a directory
        #: (which repeat their navigation): what was worked out before is looked up
        self.known = _known(page.origin, page.directory)
        #: the page's directory, its parent, ... up to the root (none: left to the rules)
        self.directories: list[str] = []
        if page.directory:
            directory = page.directory
            self.directories.append(directory)
            while len(directory) > len(page.origin) + 1:
                directory = directory[: directory.rfind("/", 0, -1) + 1]
                self.directories.append(directory)

    def link(self, ref: str) -> str | None:
        """The canonical URL ``ref`` (as written in the page) leads to, or None: not a
        reference this knows the link of (ask :func:`_canonical`)."""
        url = self.known.get(ref)
        if url is None:
            url = self._link(ref)
            if url is not None and ref[0] != "?":
                if len(self.known) >= _KNOWN_MAX:
                    self.known.clear()
                self.known[ref] = url
        return url

    def _link(self, ref: str) -> str | None:
        """:meth:`link`, worked out."""
        m = _PLAIN_REF.fullmatch(ref)
        if m is None:
            return _written(ref) if ref[:4] == "http" else None
        steps, path, query = m.groups()
        if path and (path[0] in "./" or "/." in path or "//" in path):
            return None  # "//" merged, or a dot segment maybe
        if query is None:
            query = ""
        elif "&amp;" in query:
            return None  # an entity the rules replace
        if steps == "/":
            return self.origin + "/" + path + query
        if steps or path:
            up = steps.count("../")
            if up >= len(self.directories):
                return None  # above the root, or no directory to go from
            return self.directories[up] + path + query
        if query and self.path:
            return self.path + query  # a query alone
        return None  # nothing, or a fragment alone


#: :attr:`_PlainBase.known` of each (origin, directory), and how many links each holds at most
_KNOWN: dict[tuple[str, str], dict[str, str]] = {}
_KNOWN_DIRECTORIES = 1024
_KNOWN_MAX = 16384


def _known(origin: str, directory: str) -> dict[str, str]:
    """The links known of the references on the pages of ``directory`` (at ``origin``)."""
    known = _KNOWN.get((origin, directory))
    if known is None:
        if len(_KNOWN) >= _KNOWN_DIRECTORIES:
            _KNOWN.clear()
        known = _KNOWN[origin, directory] = {}
    return known


def _written(ref: str) -> str | None:
    """An absolute http(s) ``ref`` canonical as written but for a printable ASCII fragment:
    its link is itself without the fragment (None: ask :func:`_canonical`)."""
    hash_at = ref.find("#")
    if hash_at >= 0:
        if _FRAGMENT.fullmatch(ref, hash_at + 1) is None:
            return None
        ref = ref[:hash_at]
    return ref if is_canonical_web_url(ref) else None


_FRAGMENT = re.compile(r"[ -~]*")


def _plain_base(base: str | None) -> _PlainBase | None:
    """The :class:`_PlainBase` of a page at ``base``, if its URL is canonical (else None)."""
    page = _Base.of(base)
    if page is None or not page.origin or base is None:
        return None
    try:
        url = canonicalize(base)
    except InvalidURL:
        return None
    if url.file != base or url.local or url.proto not in _WEB:
        return None
    return _PlainBase(page)


#: resolutions shared by all pages: (reference, base or its directory, query codec) -> URL
_SHARED: dict[tuple[str, str | None, str | None], str | None] = {}
_SHARED_MAX = 32768
_SPACE_OR_CONTROL = re.compile(r"[\x00- ]")
_UNRESOLVED = ""  # no URL is empty: a value not resolved yet


def _shared_key(ref: str, base: str | None, base_dir: str | None) -> tuple[str, str | None]:
    """``ref`` (cleaned) without its fragment, and what of ``base`` its resolution depends
    on: only the directory for a relative path, so a site's navigation links, repeated on
    every page of a folder, are resolved once.  The fragment is cut only where that cannot
    change the URL: canonicalize drops it, but a surrogate in it makes the URL invalid, and
    with it gone a space or control character before it would be stripped."""
    hash_at = ref.find("#")
    if hash_at > 0 and ref[hash_at:].isascii() and not _SPACE_OR_CONTROL.search(ref, 0, hash_at):
        ref = ref[:hash_at]
    if ":" in ref or ref[0] in "?;":
        return ref, base
    return ref, base_dir


def _directory(base: str | None) -> str | None:
    if base is None:
        return None
    path_end = base.find("?")
    return base[: base.rfind("/", 0, path_end if path_end >= 0 else len(base)) + 1]


class PageLinks(list[Link]):
    """The links of one page, first occurrence first; ``left_out``: how many more distinct
    references (values of ``href``, ``src``, ``url()`` ...) the page holds past the bound on
    the links taken from it, left unread."""

    def __init__(self, links: Iterable[Link] = (), left_out: int = 0) -> None:
        super().__init__(links)
        self.left_out = left_out


def resolve_links(
    items: list[tuple[str, str, bool, bool]],
    base: str | None,
    query_codec: str | None,
    max_links: int | None = None,
) -> PageLinks:
    """Resolve (value, kind, requisite, is_css) items; one Link per URL at its first place,
    made a requisite if any occurrence is one (an ``<a>`` to an image the page also shows).
    ``max_links``: once that many links are found, a reference not seen yet is left unread
    (a page of very many links would hold a crawl up), and counted in ``left_out``."""
    found: dict[str, Link] = {}
    # pages repeat their URLs a lot: what each value resolved to, in HTML and in CSS
    in_html: dict[str, str | None] = {}
    in_style: dict[str, str | None] = {}
    left_out: set[tuple[str, bool]] = set()
    page = _Base.of(base)
    base_dir = _directory(base)
    plain = _plain_base(base)
    for value, kind, requisite, in_css in items:
        resolved = in_style if in_css else in_html
        url = resolved.get(value, _UNRESOLVED)
        if url is _UNRESOLVED:
            if max_links is not None and len(found) >= max_links:
                ref = _clean(value)
                if ref and ref[0] != "#":  # (nothing, or the page itself: never a link)
                    left_out.add((value, in_css))
                continue
            url = plain.link(value) if plain is not None else None
            if url is None:
                url = _resolve(value, in_css, query_codec, page, base, base_dir)
            resolved[value] = url
        if url is None:
            continue
        prev = found.get(url)
        if prev is None or (requisite and not prev.requisite):
            found[url] = Link(url, kind, requisite)
    return PageLinks(found.values(), len(left_out))


def _resolve(
    value: str,
    in_css: bool,
    query_codec: str | None,
    page: _Base | None,
    base: str | None,
    base_dir: str | None,
) -> str | None:
    """A reference's link by the general rules (:func:`_canonical`), shared by all pages."""
    ref = _clean(value)
    if not ref or ref[0] == "#":
        return None  # nothing, or this very page
    if "#" in ref or ":" in ref or ref[0] in "?;":
        ref, context = _shared_key(ref, base, base_dir)
    else:
        context = base_dir  # a relative path (the most common case, at once)
    codec = None if in_css else query_codec
    key = (ref, context, codec)
    shared = _SHARED
    url = shared.get(key, _UNRESOLVED)
    if url is _UNRESOLVED:
        url = _canonical(ref, page, codec)
        if len(shared) >= _SHARED_MAX:
            shared.clear()
        shared[key] = url
    return url


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


def web_codec(label: str | None) -> str | None:
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


def is_utf(codec: str) -> bool:
    return codec.startswith(("utf-8", "utf-16", "utf-32", "utf_8", "utf_16", "utf_32"))


_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)


def decode_text(data: bytes, codec: str) -> str:
    try:
        return data.decode(codec, "replace")
    except (LookupError, UnicodeError):  # a codec that cannot decode at all
        return data.decode("utf-8", "replace")


def decode_bom(data: bytes) -> tuple[str, str] | None:
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return decode_text(data[len(bom) :], codec), codec
    return None


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
