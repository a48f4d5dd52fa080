"""Benchmark of the full-text search index: its size against the WARC data it indexes, the
time to build it, and query latency (issue 11: the index must be at most 0.5x the WARC bytes).

Records a corpus through the real :class:`~wwwproxy.archive.store.Store` API into a temporary
cache: by default 2,000 synthetic HTML pages of 5-60 KB (a site layout shared by all pages:
head, navigation, footer; a body of headings, paragraphs, lists and code with English-like text:
common English words and a Zipf-distributed vocabulary of 40,000 made-up words, so the word
statistics, and so gzip's and FTS5's work, look like a real site's).  With ``--real DIR`` it
records the ``*.html`` files under DIR instead (for example the Rust or Python documentation).
Then it runs 200 queries through :meth:`SearchIndex.search` (common words, rare words, two
words, prefixes, hyphenated words, misses), snippets included, as the ``/search/`` page does.

The pages are indexed twice: as the proxy does while they are recorded (a store listener,
in the background), and by a rebuild from the archive afterwards (timed).  Prints WARC bytes,
index bytes (``search.sqlite3`` after closing: the WAL folded in) and their ratio (target
<= 0.5) for both, the rebuild time and the query p50/p99.

With ``--direct N`` it skips the WARC files: N pages' rows and text (a title and a few hundred
words of the same Zipf vocabulary, on 1,000 hosts) go straight into the index through
:meth:`SearchIndex.add`, the index's own write path, so 1M pages build in minutes; it then
prints the query p50/p99 by kind of query (no snippets: what is timed is finding and ranking).
``--db PATH`` keeps that database (built once, measured again on later runs).

Run:  .venv/bin/python bench/search_bench.py                    (about a minute)
      .venv/bin/python bench/search_bench.py --pages 500
      .venv/bin/python bench/search_bench.py --real /usr/share/doc/python3.11/html
      .venv/bin/python bench/search_bench.py --direct 1000000 --db /tmp/s1m/search.sqlite3
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wwwproxy.archive.search import SEARCH_DB, SearchIndex
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

_COMMON = (
    "the of and to a in is it you that he was for on are with as his they be at one have this "
    "from or had by hot word but what some we can out other were all there when up use your how "
    "said an each she which do their time if will way about many then them write would like so "
    "these her long make thing see him two has look more day could go come did number sound no "
    "most people my over know water than call first who may down side been now find any new work "
    "part take get place made live where after back little only round man year came show every "
    "good me give our under name very through just form sentence great think say help low line "
    "differ turn cause much mean before move right boy old too same tell does set three want air "
    "well also play small end put home read hand port large spell add even land here must big "
    "high such follow act why ask men change went light kind off need house picture try us again "
    "animal point mother world near build self earth father head stand own page should country "
    "found answer school grow study still learn plant cover food sun four between state keep eye "
    "never last let thought city tree cross farm hard start might story saw far sea draw left "
    "late run while press close night real life few north open seem together next white children "
    "begin got walk example ease paper group always music those both mark often letter until mile "
    "river car feet care second book carry took science eat room friend began idea fish mountain "
    "stop once base hear horse cut sure watch color face wood main enough plain girl usual young "
    "ready above ever red list though feel talk bird soon body dog family direct pose leave song "
    "measure door product black short numeral class wind question happen complete ship area half "
    "rock order fire south problem piece told knew pass since top whole king space heard best "
    "hour better true during hundred five remember step early hold west ground interest reach "
    "fast verb sing listen six table travel less morning ten simple several vowel toward war lay "
    "against pattern slow center love person money serve appear road map rain rule govern pull "
    "cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan "
    "figure star box noun field rest correct able pound done beauty drive stood contain front "
    "teach week final gave green quick develop ocean warm free minute strong special mind behind "
    "clear tail produce fact street inch multiply nothing course stay wheel full force blue object "
    "decide surface deep moon island foot system busy test record boat common gold possible plane"
)
_ONSETS = (
    "b bl br c ch cl cr d dr f fl fr g gl gr h j k l m n p ph pl pr qu r s sc sh sl sm sn sp st "
    "str t th tr v w wh y z"
)
_VOWELS = "a e i o u ai ea ee io ou oa y ia ue"
_CODAS = "n r s t l nd nt st ng ck m rd rt ll ss x ct sh th tion ment ness able ing ed er"
COMMON, ONSETS, VOWELS, CODAS = (text.split() for text in (_COMMON, _ONSETS, _VOWELS, _CODAS))
ACCENTED = ["café", "naïve", "résumé", "über", "señor", "façade", "jalapeño", "coöperate"]
CODE = ["def", "return", "import", "class", "self", "None", "async", "await", "lambda", "yield"]


def make_vocabulary(rng: random.Random, size: int) -> list[str]:
    """Common English first, then made-up words (unique), ranked for a Zipf distribution."""
    words = list(dict.fromkeys(COMMON))
    seen = set(words)
    while len(words) < size:
        parts = [rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(rng.choice((1, 2, 2, 3)))]
        word = "".join(parts) + rng.choice(CODAS)
        if word not in seen:
            seen.add(word)
            words.append(word)
    rest = words[len(COMMON) :]
    rng.shuffle(rest)
    return words[: len(COMMON)] + ACCENTED + rest


class Corpus:
    """Deterministic synthetic pages of one site."""

    def __init__(self, seed: int = 1, vocabulary: int = 40_000) -> None:
        self.rng = random.Random(seed)
        self.words = make_vocabulary(self.rng, vocabulary)
        weights = [1.0 / (rank + 2.7) ** 1.05 for rank in range(len(self.words))]
        total = 0.0
        self.cum = []
        for w in weights:
            total += w
            self.cum.append(total)
        self.nav = self._nav()

    def sample(self, n: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cum, k=n)

    def sentence(self) -> str:
        words = self.sample(self.rng.randint(5, 24))
        if self.rng.random() < 0.1:
            words.insert(self.rng.randrange(len(words)), "-".join(self.sample(2)))
        if self.rng.random() < 0.05:
            words.insert(self.rng.randrange(len(words)), f"{self.rng.randint(1, 9999)}")
        text = " ".join(words)
        return text[0].upper() + text[1:] + self.rng.choice(".....?!;")

    def _nav(self) -> str:
        items = "".join(
            f'<li><a href="/{w}/index.html" class="nav-link">{w.title()}</a></li>'
            for w in self.words[400:440]
        )
        return (
            '<header class="site-header"><div class="logo"><a href="/">Example Docs</a></div>'
            f'<nav class="main-nav" role="navigation"><ul class="menu">{items}</ul></nav>'
            '<form class="search" action="/search"><input type="text" name="q"></form></header>'
        )

    def page(self, n: int, size: int) -> tuple[str, bytes]:
        """(path, HTML bytes of about ``size`` bytes)."""
        rng = self.rng
        title = " ".join(self.sample(rng.randint(2, 6))).title()
        path = f"/{'/'.join(self.sample(rng.randint(0, 2)))}/page-{n}.html".replace("//", "/")
        parts = [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f"<title>{title} &mdash; Example Docs</title>",
            '<link rel="stylesheet" href="/static/style.css"><script src="/static/app.js">'
            "</script><style>.x{color:red}</style></head>",
            f'<body class="page page-{n % 7}">',
            self.nav,
            f'<main id="content" class="content"><h1 id="top">{title}</h1>',
        ]
        length = sum(map(len, parts))
        section = 0
        while length < size:
            kind = rng.random()
            if kind < 0.1:
                section += 1
                chunk = f'<h2 id="s{section}">{self.sentence()[:-1]}</h2>'
            elif kind < 0.2:
                items = "".join(f"<li>{self.sentence()}</li>" for _ in range(rng.randint(2, 6)))
                chunk = f'<ul class="simple">{items}</ul>'
            elif kind < 0.27:
                lines = "\n".join(
                    f"    {rng.choice(CODE)} {'_'.join(self.sample(2))}({self.sample(1)[0]})"
                    for _ in range(rng.randint(2, 8))
                )
                chunk = f'<div class="highlight"><pre><code>{lines}</code></pre></div>'
            else:
                sentences = " ".join(self.sentence() for _ in range(rng.randint(2, 7)))
                link = self.sample(1)[0]
                chunk = (
                    f'<p>{sentences} See <a href="/{link}.html" class="reference internal">'
                    f"<em>{link}</em></a>.</p>"
                )
            parts.append(chunk + "\n")
            length += len(chunk) + 1
        parts.append(
            '</main><footer class="site-footer"><p>&copy; Example Docs. Built with care. '
            '<a href="/about.html">About</a> <a href="/license.html">License</a></p></footer>'
            "</body></html>\n"
        )
        return path, "".join(parts).encode("utf-8")


def put(store: Store, url: str, body: bytes, when: datetime) -> None:
    u = canonicalize(url)
    rec = store.recorder(
        u,
        u.file,
        method="GET",
        request_headers=[("User-Agent", "search-bench"), ("Accept", "text/html")],
        request_body=b"",
        date=when,
    )
    rec.write(body)
    rec.finish(
        200,
        "OK",
        [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Date", when.strftime("%a, %d %b %Y %H:%M:%S GMT")),
            ("Server", "nginx"),
        ],
    )


def record_synthetic(store: Store, pages: int, seed: int) -> list[str]:
    corpus = Corpus(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for n in range(pages):
        path, body = corpus.page(n, corpus.rng.randint(5_000, 60_000))
        put(store, f"http://docs.example{path}", body, start + timedelta(seconds=n))
    return corpus.words


def record_real(store: Store, root: Path) -> list[str]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for n, path in enumerate(sorted(root.rglob("*.html"))):
        url = "http://docs.example/" + path.relative_to(root).as_posix()
        put(store, url, path.read_bytes(), start + timedelta(seconds=n))
    return Corpus(1).words


KINDS = ("common", "mid", "mid", "rare", "two words", "prefix", "hyphenated", "miss")


def make_queries(words: list[str], count: int, seed: int) -> list[str]:
    """Common words, rare words, two words, prefixes, hyphenated words and misses."""
    return [query for _, query in make_kinded_queries(words, count, seed)]


def make_kinded_queries(words: list[str], count: int, seed: int) -> list[tuple[str, str]]:
    """``(kind, query)``: :data:`KINDS` in turn."""
    rng = random.Random(seed)
    common, mid, rare = words[:200], words[200:3000], words[3000:20000]
    out = []
    for n in range(count):
        kind = KINDS[n % len(KINDS)]
        if kind == "common":
            query = rng.choice(common)
        elif kind == "mid":
            query = rng.choice(mid)
        elif kind == "rare":
            query = rng.choice(rare)
        elif kind == "two words":
            query = f"{rng.choice(mid)} {rng.choice(common)}"
        elif kind == "prefix":
            query = rng.choice(mid)[:4] + "*"
        elif kind == "hyphenated":
            query = f"{rng.choice(mid)}-{rng.choice(mid)}"
        else:
            query = f"zzqx{n} {rng.choice(common)}"
        out.append((kind, query))
    return out


def add_direct(index: SearchIndex, pages: int, seed: int) -> list[str]:
    """``pages`` synthetic pages' rows and text straight into ``index`` (no WARC files): a
    title of 2-6 words and 100-400 words of text from :class:`Corpus`'s vocabulary, 1,000
    hosts, each page fetched a second after the one before.  The words are slices of one
    long Zipf-distributed sample at random places (sampling each page's words afresh took
    most of the time)."""
    corpus = Corpus(seed)
    rng = corpus.rng
    pool = corpus.sample(1 << 21)
    pool += pool[:500]
    start = datetime(2024, 1, 1, tzinfo=UTC)
    step = 5000
    t0 = time.perf_counter()
    for first in range(0, pages, step):
        with index.batch():
            for n in range(first, min(pages, first + step)):
                at = rng.randrange(1 << 21)
                title = " ".join(pool[at : at + rng.randint(2, 6)]).title()
                at = rng.randrange(1 << 21)
                text = " ".join(pool[at : at + rng.randint(100, 400)])
                url = f"http://host{n % 1000}.example/{n // 1000}/page-{n}.html"
                when = (start + timedelta(seconds=n)).strftime("%Y%m%d%H%M%S")
                index.add(
                    url, url, title=title, text=text, mime="text/html", status=200, fetched=when
                )
        if first // step % 20 == 19:
            rate = (first + step) / (time.perf_counter() - t0)
            print(f"  {first + step:,} pages added ({rate:,.0f}/s)", flush=True)
    index.flush(3600)
    index._tidy()  # noqa: SLF001 - merged into one b-tree each, as after a rebuild
    return corpus.words


def percentile(times: list[float], share: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def run_direct(pages: int, db: Path | None, queries: int, seed: int) -> None:
    """Build (or reuse) a database of ``pages`` pages added directly, and time queries by kind."""
    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        path = db or Path(tmp) / SEARCH_DB
        fresh = not path.exists()
        index = SearchIndex(path.parent, path=path)
        if fresh:
            t0 = time.perf_counter()
            words = add_direct(index, pages, seed)
            print(f"built {pages:,} pages in {time.perf_counter() - t0:.0f} s")
        else:
            words = Corpus(seed).words
        known, texts = index.count()
        by_kind: dict[str, list[float]] = {}
        cpu_by_kind: dict[str, list[float]] = {}
        totals: dict[str, list[int]] = {}
        for kind, query in make_kinded_queries(words, queries, seed):
            t0, c0 = time.perf_counter(), time.thread_time()
            results = index.search(query, 20, 0)
            by_kind.setdefault(kind, []).append(time.perf_counter() - t0)
            cpu_by_kind.setdefault(kind, []).append(time.thread_time() - c0)
            totals.setdefault(kind, []).append(results.total)
        index.close()
        size = file_bytes(path)
    print(f"pages {known:,} ({texts:,} with text), index {size / 2**20:.0f} MB")
    print("  (wall time; CPU: the searching thread's, which other processes do not inflate)")
    everything = [t for times in by_kind.values() for t in times]
    all_cpu = [t for times in cpu_by_kind.values() for t in times]
    for kind, times in [*by_kind.items(), ("all", everything)]:
        shown = totals.get(kind, [])
        cpu = cpu_by_kind.get(kind, all_cpu)
        print(
            f"  {kind:<11} p50 {statistics.median(times) * 1000:7.1f} ms   "
            f"p99 {percentile(times, 0.99) * 1000:7.1f} ms   CPU p50 "
            f"{statistics.median(cpu) * 1000:7.1f} ms   p99 {percentile(cpu, 0.99) * 1000:7.1f} ms"
            f"   ({len(times)} queries"
            + (f", median total {statistics.median(shown):.0f})" if shown else ")")
        )


def file_bytes(path: Path) -> int:
    return sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--real", type=Path, help="record the *.html files under this folder")
    parser.add_argument("--keep", type=Path, help="record into this folder and keep it")
    parser.add_argument("--direct", type=int, help="add this many pages without WARC files")
    parser.add_argument("--db", type=Path, help="with --direct: the database (kept, reused)")
    args = parser.parse_args()
    if args.direct:
        run_direct(args.direct, args.db, args.queries, args.seed)
        return

    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        root = args.keep or Path(tmp) / "cache"
        store = Store(root)
        (root / SEARCH_DB).unlink(missing_ok=True)
        live = SearchIndex(root)
        live.attach(store)  # as the proxy records: each page indexed in the background
        t0 = time.perf_counter()
        if args.real:
            words = record_real(store, args.real)
        else:
            words = record_synthetic(store, args.pages, args.seed)
        recorded = time.perf_counter() - t0
        live.flush(3600)
        caught_up = time.perf_counter() - t0
        live_count = live.count()[1]
        live.close()
        store.listeners.clear()
        live_size = file_bytes(root / SEARCH_DB)
        warc = sum(p.stat().st_size for p in store.warc_files())
        pages = sum(1 for _ in store.warc_files())

        (root / SEARCH_DB).unlink()
        index = SearchIndex(root)
        index.attach(store)
        t0, c0 = time.perf_counter(), time.process_time()
        indexed = index.rebuild(store)
        build, build_cpu = time.perf_counter() - t0, time.process_time() - c0

        times = []
        found = 0
        c0 = time.process_time()
        for query in make_queries(words, args.queries, args.seed):
            t0 = time.perf_counter()
            results = index.search(query, 20, 0)
            times.append(time.perf_counter() - t0)
            found += bool(results.hits)
        query_cpu = (time.process_time() - c0) / max(1, len(times))
        example = index.search(words[250], 3, 0)
        index.close()
        size = file_bytes(root / SEARCH_DB)

    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"pages recorded     {pages:>12,}   ({recorded:.1f} s; all indexed after {caught_up:.1f} s)"
    )
    print(f"WARC bytes         {warc:>12,}   ({warc / 2**20:.1f} MB)")
    print(
        f"index bytes        {live_size:>12,}   ({live_size / 2**20:.1f} MB) indexed while "
        f"recording, {live_count:,} pages with text"
    )
    print(f"ratio index/WARC   {live_size / warc:>12.3f}   (target <= 0.5)")
    print(f"index bytes        {size:>12,}   ({size / 2**20:.1f} MB) after a rebuild")
    print(f"ratio index/WARC   {size / warc:>12.3f}   (target <= 0.5)")
    print(
        f"index build        {build:>12.2f} s ({build / max(1, indexed) * 1000:.2f} ms/page, "
        f"CPU {build_cpu / max(1, indexed) * 1000:.2f} ms/page)"
    )
    print(
        f"query p50 / p99    {statistics.median(times) * 1000:>8.2f} ms / {p99 * 1000:.2f} ms"
        f"   (CPU {query_cpu * 1000:.2f} ms mean; {len(times)} queries, 20 hits a page, "
        f"{found} with hits)"
    )
    for hit in example.hits[:2]:
        marked = "".join(f"[{t}]" if m else t for t, m in hit.snippet)
        print(f"  {words[250]!r}: {hit.url}\n    {marked[:160]}")


if __name__ == "__main__":
    main()
