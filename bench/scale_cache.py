"""The WARC files of scale_bench.py's synthetic cache: real cache files in the store's layout,
written with the project's own ``build_exchange`` and ``append_exchange`` (no fsync: scratch
data), and their index lines as ``Store.put`` makes them.

HTML bodies are short pages (100-300 words) drawn from search_bench.py's vocabulary with a
Zipf distribution, so a common word is in most pages and the search index has real text;
other types get a few hundred bytes to a few KB.  A page's later captures are a revisit half
the time (the same body again: ``build_exchange`` turns it into a revisit), else a changed body.
Each file's mtime is its newest capture's, as recording leaves it.
"""

from __future__ import annotations

import os
import random
from datetime import datetime
from pathlib import Path

from search_bench import make_vocabulary  # bench/search_bench.py (run from bench/)

from wwwproxy.archive.cdxj import CDXJRecord
from wwwproxy.archive.recorder import compress_level_for
from wwwproxy.archive.store import Store
from wwwproxy.archive.warc import HTTPRequest, HTTPResponse, append_exchange, build_exchange
from wwwproxy.archive.warc.record import PreviousPayload
from wwwproxy.url import canonicalize

VOCABULARY = 40_000


class NoSync:
    """Stands in for the store's GroupSync: the cache is scratch data, so no fsync per file."""

    def sync(self, paths: object) -> None:
        pass


NOSYNC = NoSync()


class Bodies:
    """Deterministic response bodies: Zipf-worded HTML, filler for the other types."""

    def __init__(self, seed: int) -> None:
        self.words = make_vocabulary(random.Random(seed), VOCABULARY)
        total = 0.0
        self.cum: list[float] = []
        for rank in range(len(self.words)):
            total += 1.0 / (rank + 2.7) ** 1.05
            self.cum.append(total)

    def html(self, rng: random.Random) -> bytes:
        words = rng.choices(self.words, cum_weights=self.cum, k=rng.randint(100, 300))
        title = " ".join(words[:4]).title()
        paragraphs = "".join(
            f"<p>{' '.join(words[start : start + 40])}.</p>\n" for start in range(4, len(words), 40)
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{title}</title></head><body><h1>{title}</h1>\n{paragraphs}</body></html>\n"
        ).encode()

    def body(self, rng: random.Random, mime: str, url: str) -> bytes:
        if mime == "text/html":
            return self.html(rng)
        if mime.startswith("image/"):
            return rng.randbytes(rng.randint(200, 4000))
        return f"/* {url} */\n".encode() * rng.randint(5, 60)


def write_capture(
    store: Store,
    url: str,
    mime: str,
    body: bytes,
    when: datetime,
    previous: PreviousPayload | None,
    status: int = 200,
) -> tuple[list[CDXJRecord], PreviousPayload | None]:
    """Append one exchange of ``url`` to its cache file (a revisit when ``body`` is
    ``previous``'s payload, and the status 200); its index lines and the payload later
    captures compare with."""
    u = canonicalize(url)
    key = u.file
    path = store.path_for(u, key)
    name = store.warcfile_name(path)
    request = HTTPRequest("GET", [("Host", u.hostport), ("User-Agent", "scale-bench")])
    response = HTTPResponse(
        status, "OK", [("Content-Type", mime), ("Content-Length", str(len(body)))], body
    )
    records = build_exchange(
        target_uri=u.canonical,
        archive_key=key,
        request=request,
        response=response,
        date=when,
        previous=previous,
    )
    locations = append_exchange(
        path,
        records,
        compress_level=compress_level_for(response),
        sync=NOSYNC,  # type: ignore[arg-type]
    )
    lines = []
    for rec, loc in zip(records, locations, strict=True):
        if rec.info.rec_type in ("response", "revisit"):
            lines.append(store.index_line(key, rec.info, name, loc.offset, loc.length))
            if rec.info.rec_type == "response":
                previous = PreviousPayload.from_record(rec.info)
    os.utime(path, (when.timestamp(), when.timestamp()))
    return lines, previous


def cache_files(root: Path) -> int:
    """How many WARC files the cache holds."""
    return sum(1 for _ in Store(root).warc_files())
