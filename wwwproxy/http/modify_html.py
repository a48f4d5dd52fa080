"""Offline reading (WWWOFFLE's ModifyHTML), as pure functions: which rule applies to a page,
how its start tags change, and the answer's headers.

Every change is an *insertion* of attributes right after a tag's name: the HTML tokenizer
keeps the first of two attributes with one name, so an inserted ``class``, ``type``,
``http-equiv`` or ``target`` overrides the page's own, and no attribute of the page is ever cut
or re-quoted (nothing to get wrong on malformed markup).  The start tags come from a tokenizer
(:func:`wwwproxy.proxy.replay.html_start_tags`, on the link extractor's rules); which links are
cached is looked up by the caller.  The archive is never changed: this is applied on the way
out only.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .headers import Headers

__all__ = [
    "CACHED_CLASS",
    "MAX_HTML",
    "ModifyHTMLRule",
    "MAX_MARKED_LINKS",
    "SCRIPTS_OFF_POLICY",
    "STYLE",
    "UNCACHED_CLASS",
    "StartTag",
    "is_plain_html",
    "link_refs",
    "modified_headers",
    "rewrite",
    "rule_for",
    "with_charset",
]

#: a start tag: where it starts and ends in the text, its lower-cased name, its attributes
#: (decoded, names lower-cased, the first of duplicates)
StartTag = tuple[int, int, str, Mapping[str, str]]

CACHED_CLASS = "wwwproxy-cached"
UNCACHED_CLASS = "wwwproxy-uncached"
#: the one style block, put before the first marked link: links to pages not in the cache
#: are grey and dashed (and say so on hover: the title inserted with the class)
STYLE = (
    "<style>a.wwwproxy-uncached{color:GrayText!important;"
    "text-decoration:underline dashed!important}</style>"
)
UNCACHED_TITLE = "not in the cache"
#: what a script is made into: a data block, which browsers never run
INERT_SCRIPT_TYPE = "text/x-wwwproxy-disabled"
#: sent with a page whose scripts are disabled: also stops event-handler attributes
#: (``onclick``), ``javascript:`` links and scripts added by what is left
SCRIPTS_OFF_POLICY = "script-src 'none'"
INERT_REFRESH = "x-wwwproxy-disabled-refresh"
#: pages larger than this (decoded) are served as they are: the rewrite holds the page
MAX_HTML = 2 * 2**20
#: a page with more links than this is not marked (each is resolved and looked up: a hostile
#: page of a million links would take seconds of CPU on every hit); its other changes are made
MAX_MARKED_LINKS = 10_000


@dataclass(frozen=True)
class ModifyHTMLRule:
    """How HTML pages of URLs matching ``pattern`` are changed when served from the cache
    (the ``modify_html`` config key; WWWOFFLE's ModifyHTML): links marked cached / not cached,
    scripts, meta refresh and new-window targets made inert."""

    pattern: str
    regex: re.Pattern[str] = field(compare=False, repr=False)
    mark_links: bool = True
    disable_scripts: bool = False
    disable_meta_refresh: bool = False
    disable_popups: bool = False


_SAME_WINDOW = frozenset({"", "_self", "_parent", "_top"})
_LINKS = ("a", "area")
#: the start tags :func:`link_refs` and :func:`rewrite` read: a tokenizer may pass over the
#: others unread (a tag read here must be named here)
REWRITTEN_TAGS = frozenset({*_LINKS, "base", "script", "meta"})


def rule_for(rules: Iterable[ModifyHTMLRule], canonical: str) -> ModifyHTMLRule | None:
    """The first rule whose pattern is found in the canonical URL, if it changes anything (a
    rule with every change off exempts its URLs from the rules after it)."""
    for rule in rules:
        if rule.regex.search(canonical):
            changes = (
                rule.mark_links,
                rule.disable_scripts,
                rule.disable_meta_refresh,
                rule.disable_popups,
            )
            return rule if any(changes) else None
    return None


def is_plain_html(content_type: str | None) -> bool:
    """``text/html`` only: XHTML is XML, where a repeated attribute is a fatal error."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "text/html"


def link_refs(tags: Iterable[StartTag]) -> tuple[str | None, list[str]]:
    """The first ``<base href>`` and the ``href`` of every ``<a>`` and ``<area>``, as written:
    what the caller resolves and looks up in the cache (in one go)."""
    base: str | None = None
    refs: list[str] = []
    for _, _, name, attrs in tags:
        if name in _LINKS:
            ref = attrs.get("href") or attrs.get("xlink:href")
            if ref:
                refs.append(ref)
        elif name == "base" and base is None and "href" in attrs:
            base = attrs["href"]
    return base, refs


def _attr(name: str, value: str) -> str:
    return f' {name}="{html.escape(value, quote=True)}"'


def _inserted(
    name: str, attrs: Mapping[str, str], rule: ModifyHTMLRule, cached: bool | None
) -> str:
    """The attributes put first in one start tag ('' leaves it as it is)."""
    out = ""
    if name in _LINKS and rule.mark_links and cached is not None:
        mark = CACHED_CLASS if cached else UNCACHED_CLASS
        classes = attrs.get("class", "").split()
        out += _attr("class", " ".join([*classes, mark]))
        if not cached and "title" not in attrs:
            out += _attr("title", UNCACHED_TITLE)
    if name == "script" and rule.disable_scripts:
        out += _attr("type", INERT_SCRIPT_TYPE)
    if (
        name == "meta"
        and rule.disable_meta_refresh
        and attrs.get("http-equiv", "").strip().lower() == "refresh"
    ):
        out += _attr("http-equiv", INERT_REFRESH)
    if (
        rule.disable_popups
        and name in (*_LINKS, "base")
        and "target" in attrs
        and attrs["target"].strip().lower() not in _SAME_WINDOW
    ):
        out += _attr("target", "_self")
    return out


def rewrite(
    text: str, tags: Iterable[StartTag], rule: ModifyHTMLRule, cached: Mapping[str, bool]
) -> str:
    """``text`` with the rule's changes: ``cached`` says, for each link's ``href`` as written,
    whether its target is in the cache (a link missing from it, such as ``mailto:`` or
    ``#top``, is not marked).  :data:`STYLE` goes before the first marked link."""
    pieces: list[str] = []
    pos = 0
    styled = False
    for start, _end, name, attrs in tags:
        state = None
        if name in _LINKS:
            state = cached.get(attrs.get("href") or attrs.get("xlink:href") or "")
        added = _inserted(name, attrs, rule, state)
        if not added:
            continue
        at = start + 1 + len(name)
        if text[start + 1 : at].lower() != name:
            continue  # a name that lower-cases to another length: left alone
        pieces.append(text[pos:start])
        if state is not None and rule.mark_links and not styled:
            pieces.append(STYLE)
            styled = True
        pieces.append(text[start:at])
        pieces.append(added)
        pos = at
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def with_charset(content_type: str | None, charset: str) -> str:
    """The Content-Type with its ``charset`` parameter set (others kept)."""
    parts = (content_type or "text/html").split(";")
    params = [
        p for p in parts[1:] if p.partition("=")[0].strip().lower() != "charset" and p.strip()
    ]
    return "; ".join([parts[0].strip(), *(p.strip() for p in params), f"charset={charset}"])


#: what no longer describes the changed body: its coding, length, validators and ranges
_DROPPED = frozenset(
    {"content-encoding", "content-length", "etag", "last-modified", "accept-ranges", "content-md5"}
)


def modified_headers(
    headers: Sequence[tuple[str, str]], rule: ModifyHTMLRule, charset: str, length: int
) -> Headers:
    """The replay's headers for the changed page: sent decoded (no Content-Encoding), its new
    length and charset, no ETag or Last-Modified (they are the recorded body's: a browser
    revalidating with them would keep marks that are out of date), no Accept-Ranges (a range
    of the recorded body is not one of this); a ``Refresh`` header goes with meta refresh, and
    scripts off adds a Content-Security-Policy that runs none."""
    dropped = set(_DROPPED)
    if rule.disable_meta_refresh:
        dropped.add("refresh")
    out: Headers = []
    for name, value in headers:
        lower = name.lower()
        if lower in dropped:
            continue
        if lower == "content-type":
            value = with_charset(value, charset)
        out.append((name, value))
    out.append(("Content-Length", str(length)))
    if rule.disable_scripts:
        out.append(("Content-Security-Policy", SCRIPTS_OFF_POLICY))
    return out
