"""What a disk lookup and a new capture cost as a page's captures pile up (not run in CI).

A page fetched again and again keeps every capture in its cache file.  This makes a store
whose pages hold 2, 15 and 30 captures each (bodies that change, so revisits and full
responses both), half a journal of index lines not yet compacted (as between two
compactions), and times, in CPU per call, ``Store.get`` with the memory caches off (the
lookup a disk hit makes) and ``Store.put`` (the capture: the revisit decision, the append,
the index line; its flush is real, so the machine's fsync is in it).

    .venv/bin/python bench/captures_bench.py [--pages 300] [--captures 2 15 30]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable

from wwwproxy.archive.memory import MemoryCache
from wwwproxy.archive.store import Store
from wwwproxy.archive.warc import HTTPRequest, HTTPResponse
from wwwproxy.url import URL, canonicalize

REQUEST = HTTPRequest("GET", [("Host", "127.0.0.1:9"), ("Accept-Encoding", "gzip")])


def response(page: int, version: int) -> HTTPResponse:
    body = f"page {page} version {version % 3} ".encode() * 400  # about 8 KB
    return HTTPResponse(200, "OK", [("Content-Type", "text/html")], body)


def cpu_per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def run(pages: int, captures: int) -> tuple[float, float]:
    root = tempfile.mkdtemp(prefix="captures-bench-")
    try:
        store = Store(root)
        store.located = MemoryCache(0, bodies=False)  # every lookup reads the disk
        urls = [canonicalize(f"http://127.0.0.1:9/p/{i}.html") for i in range(pages)]
        for version in range(captures):
            for i, url in enumerate(urls):
                store.put(url, url.file, REQUEST, response(i, version))
        store.index.compact()
        for i, url in enumerate(urls[: pages // 2]):  # a journal as between compactions
            store.put(url, url.file, REQUEST, response(i, captures))
        rng = random.Random(1)
        picks: list[URL] = [rng.choice(urls) for _ in range(2000)]
        asked = iter(picks)
        get = cpu_per_call(lambda: store.get(next(asked), keep=False), len(picks))
        asked = iter(picks[:500])

        def capture() -> None:
            url = next(asked)
            store.put(url, url.file, REQUEST, response(0, 1))

        put = cpu_per_call(capture, 500)
        return get, put
    finally:
        shutil.rmtree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--captures", type=int, nargs="+", default=[2, 15, 30])
    args = parser.parse_args()
    print(f"{'captures a page':>16} {'lookup (us CPU)':>16} {'capture (us CPU)':>17}")
    for captures in args.captures:
        get, put = run(args.pages, captures)
        print(f"{captures:>16} {get:>16.0f} {put:>17.0f}")


if __name__ == "__main__":
    main()
