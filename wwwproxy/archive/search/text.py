"""The text side of search, none of it stored: a page's bytes to its title and visible text,
a user's words to an FTS5 query, the terms that rank a page, and a hit's snippet.

FTS5's own tokenizer splits a query's words and marks a snippet's hits (a private in-memory
FTS5 database per thread, :class:`_Scratch`), so they split and fold words exactly as the index
does.  Only the ranking terms are counted in Python (twice as fast), with word boundaries that
FTS5 shares.
"""

from __future__ import annotations

import codecs
import hashlib
import html
import operator
import re
import sqlite3
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ...http.content import charset_param, decode_content

__all__ = [
    "CONTROL",
    "HIT_END",
    "HIT_START",
    "MAX_PAYLOAD",
    "MAX_TEXT",
    "MAX_TITLE",
    "TEXT_VERSION",
    "TOKENIZE",
    "clean",
    "clean_capped",
    "decode_text",
    "digest",
    "extract_text",
    "payload_document",
    "Query",
    "find_snippet",
    "fts_query",
    "rank_text",
    "segments",
]

#: the version of what goes into the index from a page (extract_text, rank_text): a change
#: makes an index rebuild, as terms can only be deleted with exactly what was inserted
TEXT_VERSION = 1
MAX_PAYLOAD = 8 * 1024 * 1024  # bytes of (decoded) payload looked at for text
MAX_TEXT = 256 * 1024  # characters of visible text kept per page
MAX_TITLE = 1000
RANK_TERMS = 64  # a page's most frequent terms that rank it (see rank_text)
RANK_REPEAT = 3  # ... each counted up to this many times (BM25 saturates anyway)
RANK_CHARS = 32 * 1024  # characters of a page's text its ranking terms are counted in
SNIPPET_CHUNK = 2000  # characters: a snippet comes from the best of a page's chunks
TOKENIZE = "tokenize = 'unicode61 remove_diacritics 2'"
HIT_START, HIT_END = "\x02", "\x03"  # snippet markers; never in page text (see clean)
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: CONTROL's characters, each to a space: str.translate does in a quarter of the time what
#: CONTROL.sub(" ", text) does (2.2 ms of a 300 KB page's text)
_CONTROL_TO_SPACE = {c: " " for c in [*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F]}
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.IGNORECASE
)


# --- decoding and text extraction (pure) --------------------------------------------------------


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def decode_text(data: bytes, content_type: str | None) -> str:
    """Bytes to text by BOM, Content-Type charset, ``<meta charset>``, else UTF-8 (bad bytes
    become U+FFFD)."""
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, "replace")
    declared = _codec(charset_param(content_type))
    if declared is None and "html" in (content_type or "").lower():
        m = _META_CHARSET.search(data[:2048])
        declared = _codec(m.group(1).decode("ascii")) if m else None
    return data.decode(declared or "utf-8", "replace")


def payload_document(raw: bytes, headers: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """``(page source, mime type)`` of a payload with these HTTP headers: decoded from its
    Content-Encoding and charset (the first :data:`MAX_PAYLOAD` bytes).  ValueError if its
    Content-Encoding cannot be undone.  Here, not in :mod:`.capture`, which reads WARC files:
    the text helper (:mod:`.textproc`) needs this alone."""
    names = {n.lower(): v for n, v in headers}
    data = decode_content(raw[:MAX_PAYLOAD], names.get("content-encoding"), MAX_PAYLOAD)
    content_type = names.get("content-type")
    mime = (content_type or "text/html").split(";", 1)[0].strip().lower()
    return decode_text(data, content_type), mime


def clean(text: str) -> str:
    """Control characters (the snippet markers among them) and runs of space to one space."""
    return " ".join(text.translate(_CONTROL_TO_SPACE).split())  # faster than re.sub


def clean_capped(text: str, cap: int) -> str:
    """``clean(text)[:cap]``, cleaning no more of ``text`` than that needs: the cleaned
    text of a prefix is a prefix of the cleaned text (clean works a character and a word at
    a time; a word cut at the end is cut at the same place), so once a prefix gives ``cap``
    characters they are the answer.  A page of a megabyte of text is cleaned a quarter."""
    if len(text) > cap + cap // 4:
        head = clean(text[: cap + cap // 4])
        if len(head) >= cap:
            return head[:cap]
    return clean(text)[:cap]


_BLOCK_TAGS = (
    "p div br li tr td th h1 h2 h3 h4 h5 h6 section article header footer nav main aside "
    "blockquote pre table ul ol dl dt dd hr title option figure figcaption"
)
#: a tag's attributes, possessive (nothing to give back: ``>?`` always matches), a run of
#: plain characters at a time: a third faster than a character per step on real pages
_ATTRS = r"""(?:[^>"']++|"[^"]*+"|'[^']*+')*+>?"""
#: the look-ahead lets a tag that starts with none of their letters fail at once (a third less
#: time on real pages) instead of trying each name in turn; U+017F folds to "s" under re.I
_HIDDEN = re.compile(
    r"<(?=[sStTnN\u017f])(script|style|template|noframes)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.S | re.I
)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)|<![^>]*>|<\?[^>]*>", re.S)


def _either_case(letters: str) -> str:
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in letters)


def _by_first_letter(names: list[str]) -> str:
    """Alternatives grouped by their first letter (``d(?:iv|l|t|d)``), each letter in either
    case (``[dD]``): the regular expression engine tries each alternative in turn, so a tag
    that is none of them (most tags of a real page: ``span``, ``a``, ``code``) fails at one
    letter instead of forty; and explicit cases rather than ``re.IGNORECASE``, which made the
    pass a third slower (and matched the Kelvin sign for ``k``, which no browser does)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name[0], []).append(name[1:])
    parts = []
    for first, rests in sorted(groups.items()):
        longer = "|".join(
            _either_case(r) for r in sorted((r for r in rests if r), key=len, reverse=True)
        )
        if not longer:
            parts.append(_either_case(first))
        else:
            parts.append(f"{_either_case(first)}(?:{longer})" + ("?" if "" in rests else ""))
    return "|".join(parts)


_BLOCK_NAMES = _BLOCK_TAGS.split()
_BLOCK_FIRST = "".join(sorted({n[0] for n in _BLOCK_NAMES} | {n[0].upper() for n in _BLOCK_NAMES}))
#: block elements separate words, inline ones (``w<b>or</b>d``) do not: two passes of plain
#: substitution (a Python callback per tag made extraction twice as slow); the look-ahead for
#: a first letter lets most tags fail before the alternatives are tried
_BLOCK_TAG = re.compile(
    rf"</?(?=[{_BLOCK_FIRST}])(?:{_by_first_letter(_BLOCK_NAMES)})(?![a-zA-Z0-9-])" + _ATTRS
)
_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9-]*+" + _ATTRS)


def extract_text(document: str, mime: str = "text/html") -> tuple[str, str]:
    """``(title, visible text)`` of a page, whitespace collapsed and capped.

    Regular expressions rather than an HTML parser: for search text they agree on real pages
    and are much faster, which matters because every recorded page goes through
    here, and the few pages of a result list
    go through here again for their snippets."""
    if mime == "text/plain":
        return "", clean(document[: MAX_TEXT * 2])[:MAX_TEXT]
    # <title> holds text only (RCDATA): "<b>" in it is text, as a browser's tab shows it
    m = _TITLE.search(document, 0, 1024 * 1024)
    title = clean(html.unescape(m.group(1)) if m else "")[:MAX_TITLE]
    body = document[m.end() :] if m else document
    body = _COMMENT.sub(" ", body[:MAX_PAYLOAD])
    body = _HIDDEN.sub(" ", body)
    text = html.unescape(_TAG.sub("", _BLOCK_TAG.sub(" ", body)))
    return title, clean_capped(text, MAX_TEXT)


def digest(*parts: str) -> bytes:
    """What identifies the text a page was indexed with: its terms can only be taken out of
    the index again with the very same text (see SearchIndex), and this says whether a text
    read again from the archive is that text."""
    data = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).digest()


def segments(snippet: str) -> tuple[tuple[str, bool], ...]:
    """Snippet text with markers -> ``(text, highlighted)`` pieces."""
    out: list[tuple[str, bool]] = []
    for i, part in enumerate(re.split(f"[{HIT_START}{HIT_END}]", snippet)):
        if part:
            out.append((part, i % 2 == 1))
    return tuple(out)


# --- FTS5's tokenizer and snippets on text that is not stored -------------------------------------


class _Scratch:
    """A private in-memory FTS5 database (one per thread: no lock, no sharing)."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        for statement in (
            f"CREATE VIRTUAL TABLE terms USING fts5(body, content='', {TOKENIZE})",
            "CREATE VIRTUAL TABLE term_places USING fts5vocab(terms, instance)",
            # external content: emptied without tokenizing it all again, as DELETE would
            "CREATE TABLE chunk (id INTEGER PRIMARY KEY, body TEXT)",
            f"CREATE VIRTUAL TABLE snip USING fts5(body, content='chunk', content_rowid='id', "
            f"{TOKENIZE})",
        ):
            self.conn.execute(statement)

    def tokens(self, words: list[str]) -> list[list[str]]:
        """Each word's tokens, as FTS5 splits and folds them."""
        out: list[list[str]] = [[] for _ in words]
        try:
            self.conn.executemany(
                "INSERT INTO terms(rowid, body) VALUES (?, ?)", enumerate(words, start=1)
            )
            for doc, term in self.conn.execute(
                "SELECT doc, term FROM term_places ORDER BY doc, offset"
            ):
                out[doc - 1].append(term)
        finally:
            self.conn.execute("INSERT INTO terms(terms) VALUES ('delete-all')")
        return out

    def snippet(self, text: str, any_word: str) -> str | None:
        """FTS5's snippet of the chunk of ``text`` that best matches ``any_word`` (an OR
        query); None if no chunk has any of the words.  Chunks bound the work: FTS5 scores a
        window at every match, against every other match."""
        chunks = _chunks(text, SNIPPET_CHUNK)
        try:
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT INTO chunk(id, body) VALUES (?, ?)", enumerate(chunks, start=1)
            )
            self.conn.executemany(
                "INSERT INTO snip(rowid, body) VALUES (?, ?)", enumerate(chunks, start=1)
            )
            row = self.conn.execute(
                "SELECT rowid, snippet(snip, 0, ?, ?, '…', 16) FROM snip WHERE snip MATCH ? "
                "ORDER BY bm25(snip), rowid LIMIT 1",
                (HIT_START, HIT_END, any_word),
            ).fetchone()
        finally:
            self.conn.execute("ROLLBACK")  # nothing to keep: the cheapest way to empty both
        if row is None:
            return None
        number, snippet = row
        if number > 1 and not snippet.startswith("…"):
            snippet = "…" + snippet  # the chunk's start is not the text's
        if number < len(chunks) and not snippet.endswith("…"):
            snippet += "…"
        return snippet


def _chunks(text: str, size: int) -> list[str]:
    """``text`` cut at spaces into pieces of about ``size`` characters."""
    out = []
    start = 0
    while start < len(text):
        end = text.find(" ", start + size)
        if end < 0:
            end = len(text)
        out.append(text[start:end])
        start = end + 1
    return out


_local = threading.local()


def _scratch() -> _Scratch:
    scratch = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = _Scratch()
    return scratch


@dataclass(frozen=True)
class Query:
    """A user's words as FTS5 tokens: ``(token, prefix)`` pairs, folded as the index folds."""

    tokens: tuple[tuple[str, bool], ...]

    @classmethod
    def parse(cls, query: str) -> Query:
        """Split by FTS5 itself: a query can never be a syntax error, nor split differently
        from the pages it is matched against."""
        query = query.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates
        words = [w for w in CONTROL.sub(" ", query).split() if w.rstrip("*")]
        out = []
        for word, tokens in zip(
            words, _scratch().tokens([w.rstrip("*") for w in words]), strict=True
        ):
            for n, token in enumerate(tokens):
                out.append((token, word.endswith("*") and n == len(tokens) - 1))
        return cls(tuple(out))

    def _parts(self) -> list[str]:
        return ['"' + t.replace('"', '""') + '"' + ("*" if p else "") for t, p in self.tokens]

    @property
    def match(self) -> str | None:
        """Every token must match (None if there is none)."""
        return " ".join(self._parts()) or None

    @property
    def any_token(self) -> str | None:
        return " OR ".join(self._parts()) or None

    def patterns(self, accented: bool) -> Iterator[re.Pattern[str]]:
        """Where the tokens may be in a page's lower-cased source: a cheap first look, which
        FTS5 then confirms.  Plain literals first (fast); then, for a page with non-ASCII
        letters, accented letters too, as FTS5 folds them to plain ones.  The start of a
        word is for the caller to check (a look-behind makes the search ten times slower)."""
        for fold in (False, True) if accented else (False,):
            alternatives = []
            for token, prefix in self.tokens:
                letters = "".join(
                    f"[{re.escape(c + _ACCENTED[c])}]" if fold and c in _ACCENTED else re.escape(c)
                    for c in token
                )
                alternatives.append(letters if prefix else letters + r"(?![^\W_])")
            yield re.compile("|".join(alternatives))


def fts_query(query: str) -> str | None:
    """A user's words as an FTS5 query that cannot be a syntax error: every token a quoted
    string, all must match; a word ending in ``*`` matches its last token as a prefix.  None
    if there is no word.

    Tokens, not phrases: the index keeps no word positions (``detail=none``, for its size), so
    ``foo-bar`` finds pages with both ``foo`` and ``bar``."""
    return Query.parse(query).match


def _accented() -> dict[str, str]:
    """Each plain Latin letter and the lower-case letters that FTS5 folds to it."""
    out: dict[str, str] = {}
    for code in (*range(0xC0, 0x250), *range(0x1E00, 0x1F00)):
        char = chr(code).lower()
        parts = unicodedata.normalize("NFD", char)
        base = parts[0]
        plain = len(char) == 1 and len(parts) > 1 and base.isascii() and base.isalpha()
        if plain and all(unicodedata.category(c) == "Mn" for c in parts[1:]):
            out[base] = out.get(base, "") + char
    return {base: "".join(sorted(set(chars))) for base, chars in out.items()}


_ACCENTED = _accented()
SNIPPET_SPAN = 1500  # characters of page source each side of a possible hit
SNIPPET_TRIES = 8  # possible hits looked at, in the page's text, before giving up


def find_snippet(document: str, mime: str, query: Query) -> str | None:
    """About 16 words of a page around the query's words, the matched ones between
    :data:`HIT_START` and :data:`HIT_END`; None if its text has none of them.

    Cheap enough for a result list whatever the page's size or where the words are in it:
    a plain string search finds where they may be in the page's source, and only the text
    around there is extracted, for FTS5 to confirm and mark."""
    any_token = query.any_token
    if any_token is None:
        return None
    html_page = mime != "text/plain"
    if html_page:
        m = _TITLE.search(document, 0, 1024 * 1024)
        body = document[m.end() if m else 0 : MAX_PAYLOAD]
    else:
        body = document[: MAX_TEXT * 2]
    lower = body.lower()
    if len(lower) != len(body):  # a few letters lower-case to two characters: keep places
        lower = "".join(map(_lower_one, body))
    for pattern in query.patterns(accented=not lower.isascii()):
        snippet = _snippet_at(body, lower, pattern, any_token, html_page)
        if snippet is not None:
            return snippet
    return None


def _lower_one(char: str) -> str:
    """One character lower-cased to one (``İ`` to ``i``, as FTS5 folds it)."""
    lower = char.lower()
    return lower if len(lower) == 1 else unicodedata.normalize("NFD", char)[0].lower()


_HIDDEN_PARTS = (
    ("<script", "</script"),
    ("<style", "</style"),
    ("<template", "</template"),
    ("<noframes", "</noframes"),
    ("<!--", "-->"),
)
#: where a word is found last: it is also on every other page of the site
_BOILERPLATE_PARTS = (
    ("<nav", "</nav"),
    ("<header", "</header"),
    ("<footer", "</footer"),
    ("<aside", "</aside"),
)


def _inside(lower: str, at: int, parts: tuple[tuple[str, str], ...]) -> int:
    """Where the element of ``parts`` that ``at`` is in ends (``at`` if in none)."""
    for opening, closing in parts:
        start = lower.rfind(opening, 0, at)
        if start >= 0:
            end = lower.find(closing, start)
            if end < 0:
                return len(lower)
            if end >= at:
                after = lower.find(">", end + len(closing) - 1)  # the closing tag's own end
                return len(lower) if after < 0 else after + 1
    return at


def _snippet_at(
    body: str, lower: str, pattern: re.Pattern[str], any_token: str, html_page: bool
) -> str | None:
    """The first place ``pattern`` finds in the text of ``body`` where FTS5 confirms a hit;
    places in navigation, headers, footers and asides only if there is none elsewhere."""
    tries = 0
    end = 0
    later: list[int] = []
    for hit in pattern.finditer(lower):
        at = hit.start()
        if at < end or (at > 0 and lower[at - 1].isalnum()):
            continue  # inside the span already tried, or not the start of a word
        if html_page:
            if lower.rfind("<", 0, at) > lower.rfind(">", 0, at):
                continue  # in a tag: an attribute, a URL
            if _inside(lower, at, _HIDDEN_PARTS) > at:
                continue  # in a script, a style or a comment
            if len(later) < SNIPPET_TRIES and _inside(lower, at, _BOILERPLATE_PARTS) > at:
                later.append(at)
                continue
        snippet, end = _snippet_around(body, lower, at, any_token, html_page)
        if snippet is not None:
            return snippet
        tries += 1
        if tries >= SNIPPET_TRIES:
            break
    for at in later:
        snippet, _ = _snippet_around(body, lower, at, any_token, html_page)
        if snippet is not None:
            return snippet
    return None


def _snippet_around(
    body: str, lower: str, at: int, any_token: str, html_page: bool
) -> tuple[str | None, int]:
    """FTS5's snippet of the text around ``at``, and where the span looked at ends."""
    start = max(0, at - SNIPPET_SPAN)
    end = min(len(body), at + SNIPPET_SPAN)
    if html_page:  # whole tags only, no script begun before the span, no navigation
        start = _inside(lower, max(0, lower.rfind(">", 0, start) + 1), _HIDDEN_PARTS)
        for _, closing in _BOILERPLATE_PARTS:  # the span starts after any that ends before
            ended = lower.rfind(closing, start, at)
            if ended >= 0:
                after = lower.find(">", ended)
                start = at if after < 0 else max(start, min(at, after + 1))
        after = lower.find("<", end)
        end = len(body) if after < 0 else after
        for opening, _ in _BOILERPLATE_PARTS:
            boilerplate = lower.find(opening, at, end)
            if boilerplate >= 0:
                end = boilerplate
        span = _HIDDEN.sub(" ", _COMMENT.sub(" ", body[start:end]))
        text = clean(html.unescape(_TAG.sub("", _BLOCK_TAG.sub(" ", span))))
    else:
        text = clean(body[start:end])
    snippet = _scratch().snippet(text, any_token)
    if snippet is not None:
        if start > 0 and not snippet.startswith("…"):
            snippet = "…" + snippet
        if end < len(body) and not snippet.endswith("…"):
            snippet += "…"
    return snippet, end


#: a run of what FTS5's unicode61 keeps in a token (letters, digits, private use; combining
#: marks join in after NFC): Python splits at nothing FTS5 does not, so every counted term
#: is made of the page's own FTS5 tokens.  Private use is rare, and slows the pattern down.
_TERM = re.compile(r"[^\W_]+")
_TERM_PRIVATE = re.compile(r"(?:[^\W_]|[\ue000-\uf8ff])+")
_PRIVATE = re.compile(r"[\ue000-\uf8ff]")
_COUNT = operator.itemgetter(1)


def rank_text(text: str) -> str:
    """What ranks a page: its most frequent terms, each repeated as often as it occurs (up to
    :data:`RANK_REPEAT`), once it occurs twice.  BM25 over this (with the title) ranks pages
    about a word above pages that mention it once, in a small part of the space that word
    positions for the whole text would take.  The same text always gives the same terms."""
    sample = unicodedata.normalize("NFC", text[:RANK_CHARS].lower())
    pattern = _TERM_PRIVATE if _PRIVATE.search(sample) else _TERM
    # most_common(RANK_TERMS) of the terms that occur twice (most occur once: not sorted)
    counts = Counter(pattern.findall(sample))
    repeated = [(term, n) for term, n in counts.items() if n >= 2]
    top = sorted(repeated, key=_COUNT, reverse=True)[:RANK_TERMS]
    return "".join((term + " ") * min(n, RANK_REPEAT) for term, n in top).rstrip()
