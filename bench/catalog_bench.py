"""The catalog's costs (:mod:`wwwproxy.archive.catalog`): what it adds to a recorded capture,
and what ``/``'s totals, a page of ``/index/`` and a large host's first page view cost, on a
synthetic cache made with the project's own WARC writer and index lines.

    python bench/catalog_bench.py [--hosts 2000] [--big 20000] [--dir DIR]

``--dir`` keeps the cache, so that another version can be measured on it (the old listing:
``PYTHONPATH=<other tree> python bench/catalog_bench.py --dir DIR --old``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wwwproxy.archive.store import Store
from wwwproxy.archive.warc import HTTPRequest, HTTPResponse, append_exchange, build_exchange
from wwwproxy.url import canonicalize

T0 = datetime(2024, 1, 1, tzinfo=UTC)


class _NoFlush:
    def sync(self, paths: object) -> None:
        pass


def _lines(store: Store, url: str, i: int):  # noqa: ANN202
    u = canonicalize(url)
    records = build_exchange(
        target_uri=u.canonical,
        archive_key=u.file,
        request=HTTPRequest("GET", [("Host", u.hostport)]),
        response=HTTPResponse(200, "OK", [("Content-Type", "text/html")], b"x" * (i % 900)),
        date=T0 + timedelta(seconds=i),
    )
    path = store.path_for(u)
    locations = append_exchange(path, records, sync=_NoFlush())  # type: ignore[arg-type]
    return [
        Store._index_line(u.file, rec.info, path.name, loc.offset, loc.length)  # noqa: SLF001
        for rec, loc in zip(records, locations, strict=True)
        if rec.info.rec_type == "response"
    ]


def make(root: Path, hosts: int, big: int) -> None:
    store = Store(root)
    lines = []
    n = 0
    for h in range(hosts):
        for p in range(2):
            n += 1
            lines += _lines(store, f"http://h{h:05d}.example/p{p}", n)
    for p in range(big):
        n += 1
        lines += _lines(store, f"http://big.example/page/{p:06d}", n)
    store.index.add(lines)
    store.index.compact()


def cpu(call, repeat: int = 5) -> float:  # noqa: ANN001
    """The least CPU seconds of ``repeat`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def measure_new(root: Path) -> None:
    from wwwproxy.commands.listing import host_totals, host_window, hosts_window

    store = Store(root)
    start = time.process_time()
    store.open_catalog()
    print(f"catalog made from the index: {time.process_time() - start:.2f} s CPU")
    print(f"/ totals: {cpu(lambda: host_totals(store)) * 1e3:.2f} ms CPU")
    for sort in ("name", "pages"):
        took = cpu(lambda s=sort: hosts_window(store, sort=s, number=5))
        print(f"/index/ page 5 by {sort}: {took * 1e3:.2f} ms CPU")
    for sort, number in (("name", 1), ("time", 1), ("size", 1), ("name", 10**6)):
        fresh = Store(root)  # a first view: nothing kept in this process
        took = cpu(lambda s=sort, n=number, f=fresh: host_window(f, "http", "big.example",
                                                                 sort=s, number=n), 1)  # fmt: skip
        print(f"big host first view, {sort} page {min(number, 999)}: {took * 1e3:.1f} ms CPU")
    puts = 2000
    extra = [_lines(store, f"http://new.example/p{i}", i) for i in range(puts)]
    start = time.process_time()
    for lines in extra:
        store.catalog.add(lines)
    print(f"catalog per capture: {(time.process_time() - start) / puts * 1e6:.0f} µs CPU")


def measure_old(root: Path) -> None:
    from wwwproxy.commands.listing import host_window, list_hosts

    store = Store(root)
    print(f"/ (list_hosts, first): {cpu(lambda: list_hosts(store), 1) * 1e3:.1f} ms CPU")
    print(f"/ (list_hosts, kept): {cpu(lambda: list_hosts(store)) * 1e3:.1f} ms CPU")
    took = cpu(lambda: host_window(store, "http", "big.example"), 1)
    print(f"big host first view: {took * 1e3:.1f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--big", type=int, default=20000)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--old", action="store_true", help="measure the old listing")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="catalog-bench-")) / "cache"
    if not (root / "index").exists():
        start = time.monotonic()
        make(root, args.hosts, args.big)
        print(f"cache made in {time.monotonic() - start:.0f} s: {root}")
    (measure_old if args.old else measure_new)(root)


if __name__ == "__main__":
    main()
