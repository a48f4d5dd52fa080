"""Canonicalization throughput on 100,000 mixed URLs (not run by CI).

Prints URLs per second for ``canonicalize`` + cache name + SURT, against a baseline measured in
the same run: ``urllib.parse.urlsplit`` on the same URLs (parsing only, no canonicalization), so
the ratio says what our rules cost over the standard library's bare split.

    python bench/canon_bench.py [COUNT]
"""

from __future__ import annotations

import random
import sys
import time
import urllib.parse

from wwwproxy.url import InvalidURL, cache_name, canonicalize, surt
from wwwproxy.url.canonical import _canonicalize

HOSTS = ["www.example.com", "Example.ORG", "bücher.example", "127.1", "[::1]", "cdn.a-b.net:8080"]
PATHS = ["/", "/a/./b/../c", "/%7euser/x%20y;p=1", "/img/logo.png", "/a%2fb", "/ü/ö", "/50%"]
QUERIES = ["", "?q=a%20b&amp;r=%2b", "?id=42", "?x=1;y=2", "?s=caf%C3%A9+au+lait"]


def make_urls(count: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    urls = []
    for i in range(count):
        scheme = rng.choice(["http://", "https://", "HTTP://", ""])
        host = rng.choice(HOSTS)
        path = rng.choice(PATHS) + f"/p{i}"
        urls.append(scheme + host + path + rng.choice(QUERIES) + rng.choice(["", "#frag"]))
    return urls


def run_ours(urls: list[str]) -> tuple[float, int]:
    _canonicalize.cache_clear()  # measure the work, not the memo
    bad = 0
    start = time.perf_counter()
    for u in urls:
        try:
            url = canonicalize(u)
        except InvalidURL:
            bad += 1
            continue
        cache_name(url)
        surt(url.file)
    return time.perf_counter() - start, bad


def run_baseline(urls: list[str]) -> float:
    start = time.perf_counter()
    for u in urls:
        urllib.parse.urlsplit(u)
    return time.perf_counter() - start


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    urls = make_urls(count)
    base = min(run_baseline(urls) for _ in range(3))
    ours, bad = min(run_ours(urls) for _ in range(3))
    print(f"urls: {count} ({bad} invalid)")
    print(f"baseline urllib.parse.urlsplit: {count / base:,.0f} URLs/s")
    print(f"wwwproxy canonicalize+cache_name+surt: {count / ours:,.0f} URLs/s")
    print(f"ratio (ours / baseline time): {ours / base:.2f}x")


if __name__ == "__main__":
    main()
