"""Link extraction rate of ``wwwproxy fetch``: references (``href``, ``src`` ...) read per
second, and the distinct links they give (not run by CI).

Three page sets, each read by :func:`~wwwproxy.fetch.html_links.extract_html_links` in each of
these ways, in a child process of its own (its own peak RSS, cold caches):

- ``before`` (with ``--before``): an older revision of the package;
- ``general``: every reference resolved by ``urljoin`` and canonicalized by the general parser
  (the way before the fast paths; the fast paths are switched off in the child);
- ``fast``: as ``wwwproxy fetch`` reads pages now, without a bound; and ``bounded``: with the
  default ``max_links_per_page``, as a crawl reads them.

The sets: a generated page of 200,000 distinct links (8 MB, the mix of a large index page:
root-relative, relative, absolute with a query, ``../`` with a fragment, query-only), and the
Python documentation (``apt-get install python3-doc``: /usr/share/doc/python3-doc/html, read as
served from https://docs.python.org/3/, and again as served from a loopback address and port,
as ``bench/prefetch_bench.py`` crawls it); without it, generated documentation-like pages, and
the output says so.  Both ways must give the same links (compared by digest).  Times are CPU
times (the machine may be busy); "resolving" is the rate of resolving and canonicalizing the
references alone (:func:`~wwwproxy.fetch.links.resolve_links`, the pages tokenized before),
measured first, with cold caches.

    python bench/links_bench.py [LINKS] [--before REV]

``--before REV`` also measures the package as it was at a git revision (its ``wwwproxy/``,
unpacked into a temporary directory): the time the page took before any of this.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DOCS = Path("/usr/share/doc/python3-doc/html")
DOCS_BASE = "https://docs.python.org/3/"
#: the documentation as bench/prefetch_bench.py crawls it: from nginx on a loopback address
CRAWL_BASE = "http://127.0.0.1:8080/"
BIG_BASE = "http://example.com/dir/index.html"


def big_page(count: int, seed: int = 1) -> bytes:
    """One page of ``count`` distinct links of the kinds a large index page has."""
    rng = random.Random(seed)
    parts = ["<!doctype html><html><head><title>index</title></head><body>\n"]
    for i in range(count):
        r = rng.random()
        if r < 0.4:
            href = f"/w/Item_{i}"
        elif r < 0.7:
            href = f"p/{i}.html"
        elif r < 0.85:
            href = f"https://example.org/x/{i}?id={i}&amp;p=2"
        elif r < 0.95:
            href = f"../up/{i}/#s{i % 7}"
        else:
            href = f"?page={i}"
        parts.append(f'<a href="{href}">{i}</a>\n')
    parts.append("</body></html>\n")
    return "".join(parts).encode()


def generated_docs(pages: int = 400, seed: int = 2) -> list[tuple[str, bytes]]:
    """Documentation-like pages: a shared navigation, relative links between sections with
    fragments, a few absolute links, style sheets, scripts and images."""
    rng = random.Random(seed)
    names = [f"library/mod{i}.html" for i in range(pages)]
    nav = "".join(f'<li><a href="../{n}">{n}</a></li>' for n in names[:60])
    head = (
        '<link rel="stylesheet" href="../_static/pydoctheme.css">'
        '<script src="../_static/doctools.js"></script>'
    )
    out = []
    for name in names:
        body = [f"<html><head>{head}</head><body><ul>{nav}</ul>"]
        for j in range(rng.randint(80, 300)):
            target = rng.choice(names).split("/")[1]
            kind = rng.random()
            if kind < 0.6:
                body.append(f'<a class="reference" href="{target}#func-{j}">f{j}</a>')
            elif kind < 0.75:
                body.append(f'<a href="#sec-{j}">s</a>')
            elif kind < 0.9:
                body.append(
                    f'<a href="https://github.com/python/cpython/blob/3.11/Lib/m{j}.py">src</a>'
                )
            else:
                body.append(f'<img src="../_images/fig{j % 40}.png">')
        body.append("</body></html>")
        out.append((DOCS_BASE + name, "".join(body).encode()))
    return out


def doc_pages(base: str = DOCS_BASE) -> tuple[str, list[tuple[str, bytes]]]:
    if DOCS.is_dir():
        files = sorted(DOCS.rglob("*.html"))
        pages = [(base + str(f.relative_to(DOCS)), f.read_bytes()) for f in files]
        return f"Python documentation ({DOCS}, {len(pages)} pages)", pages
    return "generated documentation-like pages (python3-doc not installed)", generated_docs()


def general_only() -> None:
    """Switch the fast paths off: references go through urljoin and the general parser."""
    from wwwproxy.fetch import links
    from wwwproxy.url import canonical

    links._join_plain = lambda base, ref: None  # type: ignore[assignment]
    links.is_canonical_web_url = lambda url: False  # type: ignore[assignment]
    links._plain_base = lambda base: None  # type: ignore[assignment]
    canonical._as_written = lambda url: None  # type: ignore[assignment]


def measure(which: str, mode: str, count: int) -> dict[str, object]:
    """In the child: read the set; the references and links read, CPU seconds, a digest of
    the links, peak RSS."""
    from wwwproxy.config import Config
    from wwwproxy.fetch import links as links_module
    from wwwproxy.fetch.html_links import _Collector, _decode_html, _scan, extract_html_links
    from wwwproxy.fetch.links import page_base, resolve_links
    from wwwproxy.url.canonical import _canonicalize

    if mode == "general":
        general_only()
    bound = {"max_links": Config().max_links_per_page} if mode == "bounded" else {}
    if which == "big":
        pages = [(BIG_BASE, big_page(count))]
    else:
        pages = doc_pages(CRAWL_BASE if which == "crawl" else DOCS_BASE)[1]
    # resolving alone: the references of each page, tokenized first, resolved against its URL
    read = []
    for base, data in pages:
        collector = _Collector(hyperlinks=True)
        _scan(_decode_html(data, None)[0], collector)
        read.append((page_base(base), collector.items))
    start = time.process_time()
    for base_url, items in read:
        resolve_links(items, base_url, None, *bound.values())
    resolving = time.process_time() - start
    links_module._SHARED.clear()
    _canonicalize.cache_clear()
    # the whole extraction, as the crawler does it
    digest = hashlib.sha256()
    links = left_out = 0
    start = time.process_time()
    for base, data in pages:
        found = extract_html_links(data, base, **bound)  # type: ignore[arg-type]
        links += len(found)
        left_out += getattr(found, "left_out", 0)
        for link in found:
            digest.update(f"{link.url} {link.kind} {link.requisite}\n".encode())
    seconds = time.process_time() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "references": sum(len(items) for _, items in read),
        "links": links,
        "left_out": left_out,
        "seconds": seconds,
        "resolving": resolving,
        "digest": digest.hexdigest(),
        "bytes": sum(len(d) for _, d in pages),
        "rss_mib": rss / 1024,
    }


def run_child(which: str, mode: str, count: int, source: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", which, mode, str(count)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": source},
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def show(mode: str, r: dict[str, Any]) -> None:
    rate = r["references"] / r["seconds"]
    resolving = r["references"] / r["resolving"]
    extra = f", {r['left_out']} left out" if r["left_out"] else ""
    print(
        f"  {mode:8} {r['links']:>6} links of {r['references']:>6} references in "
        f"{r['seconds']:5.2f} s: {rate:>8,.0f} refs/s (resolving {resolving:>8,.0f}/s), "
        f"peak RSS {r['rss_mib']:.0f} MiB{extra}"
    )


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        which, mode, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(json.dumps(measure(which, mode, count)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("links", nargs="?", type=int, default=200_000)
    parser.add_argument("--before", metavar="REV", help="also measure this git revision")
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as before_tree:
        if args.before:
            archive = subprocess.run(
                ["git", "-C", here, "archive", args.before, "wwwproxy"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", before_tree], input=archive, check=True)
        modes = [("general", here), ("fast", here), ("bounded", here)]
        if args.before:
            modes.insert(0, (f"before ({args.before})", before_tree))
        docs = doc_pages()[0]
        sets = [
            ("big", f"one page of {args.links} links"),
            ("docs", docs),
            ("crawl", f"{docs}, served from {CRAWL_BASE} (a loopback address, as crawled)"),
        ]
        for which, label in sets:
            got = {
                mode: run_child(which, mode.split()[0], args.links, source)
                for mode, source in modes
            }
            fast = got["fast"]
            print(f"{label}: {int(fast['bytes']) / 1e6:.1f} MB")  # type: ignore[call-overload]
            for mode, r in got.items():
                show(mode.split()[0], r)
            for mode, r in got.items():
                if mode in ("fast", "bounded"):
                    continue
                same = "same links" if r["digest"] == fast["digest"] else "DIFFERENT LINKS"
                ratio = r["seconds"] / fast["seconds"]  # type: ignore[operator]
                resolving = r["resolving"] / fast["resolving"]  # type: ignore[operator]
                print(f"  fast vs {mode}: {ratio:.1f}x faster, resolving {resolving:.1f}x ({same})")


if __name__ == "__main__":
    main()
