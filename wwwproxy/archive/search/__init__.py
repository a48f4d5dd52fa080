"""Full-text search of the cache: SQLite FTS5 (standard library) in ``<cache>/search.sqlite3``.

The index is derived data, like the CDXJ index: :meth:`SearchIndex.attach` makes it a
:class:`Store` listener, so it follows every page recorded, deleted or purged, and
:meth:`SearchIndex.rebuild` makes it again from the cache.  There is one per process, opened by
the wiring (:mod:`wwwproxy.app`) and handed to whoever needs it.
Every cached URL gets a row (so URLs can be searched by substring); text/html and text/plain
responses also get their title and visible text indexed (decoded from their Content-Encoding and
charset, size-capped).  The text itself is not kept: it is in the WARC files already, and
snippets are made from there when results are shown (:mod:`.searching`), which keeps the database
a fraction of the archive's size.  Text is never escaped here: escaping is the renderer's job.

A user's query never reaches FTS5's query syntax: each word's tokens are quoted, so no input
can raise a syntax error (:func:`fts_query`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .index import SEARCH_DB, SearchIndex
    from .searching import SearchHit, SearchResults
    from .text import decode_text, extract_text, fts_query

#: each name and the module it comes from, imported at first use: the helper processes
#: (:mod:`.textproc`, :mod:`wwwproxy.fetch.linkproc`) import modules of this package without
#: the index, SQLite and the cache policy behind it (a tenth of a second of each one's start)
_LAZY = {
    "SEARCH_DB": ".index",
    "SearchIndex": ".index",
    "SearchHit": ".searching",
    "SearchResults": ".searching",
    "decode_text": ".text",
    "extract_text": ".text",
    "fts_query": ".text",
}

__all__ = [
    "SEARCH_DB",
    "SearchHit",
    "SearchIndex",
    "SearchResults",
    "decode_text",
    "extract_text",
    "fts_query",
]


def __getattr__(name: str) -> object:
    """A name of :data:`__all__`, from its module (imported now, once)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
