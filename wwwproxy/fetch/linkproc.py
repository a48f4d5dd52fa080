"""The crawler's link extraction in a helper process (:class:`LinkHelper`): reading a page for
its links is pure Python that holds the GIL, as long as
fetching and recording it; in a helper process (:mod:`wwwproxy.archive.search.helper`) it runs
on another core beside them.  The same function (:func:`~.bodies.page_links`) reads the page
there or, when the helper cannot, here.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import cast

from ..archive.search.helper import Helper, serve
from .bodies import Recorded, page_links
from .links import Link, PageLinks

__all__ = ["LinkHelper", "Page", "links_of"]

_MODULE = "wwwproxy.fetch.linkproc"

#: a recorded response's payload (as recorded, Content-Encoded), its headers, the page's URL,
#: and whether its hyperlinks are wanted (else its requisites only)
Page = tuple[bytes, Sequence[tuple[str, str]], str, bool]
#: pages as they cross the pipe to the helper (marshal keeps these types), each with the
#: bound on the links taken from it
_Wire = list[tuple[bytes, list[tuple[str, str]], str, bool, int | None]]


def links_of(pages: Sequence[Page], max_links: int | None = None) -> list[PageLinks | ValueError]:
    """The links of each page (:func:`~.bodies.page_links`, at most ``max_links`` of each),
    a failure in its place."""
    out: list[PageLinks | ValueError] = []
    for body, headers, base, hyperlinks in pages:
        entry = Recorded(200, "", tuple(headers), len(body), body)
        try:
            out.append(page_links(entry, base, hyperlinks=hyperlinks, max_links=max_links))
        except ValueError as exc:
            out.append(exc)
    return out


def _encode(pages: Sequence[Page], max_links: int | None = None) -> _Wire:
    return [
        (bytes(b), [(n, v) for n, v in hs], str(u), bool(f), max_links) for b, hs, u, f in pages
    ]


def _answer(request: object) -> object:
    """In the helper: each page's links as ``(url, kind, requisite)`` triples with the count
    left out past the bound, a failure as its message."""
    # what _encode sent: the helper's pipe hands it over untyped (object)
    wire = cast(_Wire, request)
    out: list[object] = []
    for body, headers, base, hyperlinks, max_links in wire:
        page = (bytes(body), [(n, v) for n, v in headers], base, hyperlinks)
        (r,) = links_of([page], max_links)
        if isinstance(r, ValueError):
            out.append(str(r))
        else:
            out.append(([(k.url, k.kind, k.requisite) for k in r], r.left_out))
    return out


def _decode(values: object, pages: Sequence[Page]) -> list[PageLinks | ValueError]:
    if not isinstance(values, list) or len(values) != len(pages):
        raise ValueError("the answer does not fit the request")
    out: list[PageLinks | ValueError] = []
    for value in values:
        if isinstance(value, str):
            out.append(ValueError(value))
            continue
        if not (
            isinstance(value, tuple)
            and len(value) == 2
            and isinstance(value[0], list)
            and isinstance(value[1], int)
        ):
            raise ValueError("the answer holds something that is no list of links")
        triples, left_out = value
        links = PageLinks(left_out=left_out)
        for triple in triples:
            if not (
                isinstance(triple, tuple)
                and len(triple) == 3
                and isinstance(triple[0], str)
                and isinstance(triple[1], str)
                and isinstance(triple[2], bool)
            ):
                raise ValueError("the answer holds something that is no link")
            links.append(Link(*triple))
        out.append(links)
    return out


class LinkHelper(Helper[Page, "PageLinks | ValueError"]):
    """The link helper of one crawl (its link-reading threads take turns), taking at most
    ``max_links`` links from a page."""

    def __init__(self, argv: Sequence[str] | None = None, *, max_links: int | None = None) -> None:
        super().__init__(
            "link",
            _MODULE,
            encode=functools.partial(_encode, max_links=max_links),
            decode=_decode,
            local=functools.partial(links_of, max_links=max_links),
            argv=argv,
        )

    def links(self, page: Page) -> PageLinks:
        """The links of one page; ValueError if its body cannot be decoded."""
        (result,) = self.call([page])
        if isinstance(result, ValueError):
            raise result
        return result


if __name__ == "__main__":
    serve(_answer, sys.stdin.buffer, sys.stdout.buffer)
