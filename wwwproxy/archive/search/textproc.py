"""A page's search text (:func:`page_text`), made in a helper process (:class:`TextHelper`).

Extracting a page's visible text and counting its ranking terms is pure Python that holds the
GIL, as long as the rest of recording and crawling it.  In the process that records, it
would take turns with the crawler on one core; in a helper process (:mod:`.helper`) it runs on
another core beside it.  The same function makes the text there
or, when the helper cannot, here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from .helper import HELPER_FAILURES, Helper, lower_priority, serve
from .schema import Text
from .text import extract_text, payload_document

__all__ = ["HELPER_FAILURES", "PageError", "TextHelper", "page_text", "page_texts"]

_MODULE = "wwwproxy.archive.search.textproc"
#: how much lower the helper runs than its caller: a page's search text may wait (the index
#: lags, as it may), the recording and the browser's pages may not; on a busy machine the
#: text is made with the CPU left over (about half of what a miss of a 290 KB page costs on
#: the 2-core bench machine: 126 -> 151 misses a second with it, docs/performance.md)
TEXT_NICENESS = 19

Headers = Sequence[tuple[str, str]]
Page = tuple[bytes, Headers]


class PageError(ValueError):
    """A page whose text could not be made (bad Content-Encoding...): it is not indexed."""


def page_text(payload: bytes, headers: Headers) -> Text:
    """The text a recorded page is indexed with: its payload (as recorded, Content-Encoded)
    decoded, its title and visible text extracted, and its ranking terms (all empty if it has
    no text).  PageError if the payload cannot be decoded."""
    try:
        title, text = extract_text(*payload_document(payload, headers))
    except (ValueError, OSError, EOFError) as exc:  # what decoding the payload may raise
        raise PageError(str(exc)) from exc
    return Text.of(title, text) if title or text else Text("", "", "")


def page_texts(pages: Iterable[Page]) -> list[Text | PageError]:
    """:func:`page_text` of each page, a failure in its place."""
    out: list[Text | PageError] = []
    for payload, headers in pages:
        try:
            out.append(page_text(payload, headers))
        except PageError as exc:
            out.append(exc)
    return out


def _encode(pages: Sequence[Page]) -> object:
    return [(bytes(payload), [tuple(h) for h in headers]) for payload, headers in pages]


def _answer(request: object) -> object:
    """In the helper: the texts as built-in types (a text as a tuple, a failure as its
    message)."""
    pages = [(bytes(p), [tuple(h) for h in hs]) for p, hs in request]  # type: ignore[attr-defined]
    return [tuple(r) if isinstance(r, Text) else str(r) for r in page_texts(pages)]


def _decode(values: object, pages: Sequence[Page]) -> list[Text | PageError]:
    """The helper's answer back to results; ValueError if it is not one for these pages."""
    if not isinstance(values, list) or len(values) != len(pages):
        raise ValueError("the answer does not fit the request")
    out: list[Text | PageError] = []
    for value in values:
        if isinstance(value, str):
            out.append(PageError(value))
        elif (
            isinstance(value, tuple)
            and len(value) == 3
            and all(isinstance(part, str) for part in value)
        ):
            out.append(Text(*value))
        else:
            raise ValueError("the answer holds something that is no page text")
    return out


class TextHelper(Helper[Page, "Text | PageError"]):
    """The text helper of one search index (its one indexing thread calls it)."""

    def __init__(self, argv: Sequence[str] | None = None) -> None:
        super().__init__(
            "search text", _MODULE, encode=_encode, decode=_decode, local=page_texts, argv=argv
        )

    def texts(self, pages: Sequence[Page]) -> list[Text | PageError]:
        """:func:`page_text` of each page (a failure in its place), in the helper if it can."""
        return self.call(pages)


if __name__ == "__main__":
    lower_priority(TEXT_NICENESS)
    serve(_answer, sys.stdin.buffer, sys.stdout.buffer)
