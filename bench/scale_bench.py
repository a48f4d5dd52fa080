"""Issue 28's table for the project as it is: a synthetic cache of 100k, 1M or 10M captures,
its index, overview pages, `index check`/`rebuild` and search (not run in CI).

The cache: hosts with Zipf-distributed page counts (the host of rank r holds pages in
proportion to 1/r, about 60 captures a host), 1-5 captures a page (uniform), a capture after a
page's first a revisit half the time (so a third of all captures), 70 % of pages HTTPS.

With WARC files (``--warcs``, the default up to 1M captures), every capture is a real exchange
appended to its cache file in the store's layout (bench/scale_cache.py: ``build_exchange`` and
``append_exchange``, short HTML pages of Zipf-distributed words, small bodies of other types);
with ``--lines`` (the default past 1M) the cache is index lines only.  Either way each line is
the store's own (``index_lines.index_line``), sorted into ``index/index.cdxj`` by
``write_index``.

The steps, each in a child process (so its CPU and peak RSS are its own) and each with a time
cap, printing the issue's rows with its targets beside them:

- search index: ``SearchIndex.rebuild`` of the whole cache, as ``/search/``'s rebuild button
  (WARC files only);
- index: the first lookup on opening, 10,000 random exact lookups (per CPU-second), new
  captures of random pages until the journal holds ``app.COMPACT_BYTES`` (when recording
  compacts: written to the cache files with ``--warcs``), one ``Index.compact()`` (CPU, bytes
  written: ``wchar`` of ``/proc/self/io``), bytes rewritten per capture, the first lookup after;
  then another journal's worth compacted while a thread does exact lookups in a loop (the
  slowest lookup during and in the second after);
- pages (WARC files only): the proxy started on the cache (bench/scale_pages.py, 127.0.0.1,
  port 0) and asked over HTTP for the biggest host's first page, ``/``, ``/index/`` and three
  searches (a word in every page, one in half, a prefix), 20 results each: the server's CPU per
  request (its threads' and its children's schedstat), p50/p99 of 20 requests after the first;
- ``python -m wwwproxy index check`` and ``index rebuild``: wall and CPU time, peak RSS (from
  ``wait4``), files per second, cores busy (CPU time / wall time).

The 1-minute load average at each step is printed: the machine may be shared.

Run:  .venv/bin/python bench/scale_bench.py                 (100k with WARC files: ~15 minutes)
      .venv/bin/python bench/scale_bench.py --captures 1M --lines --dir /tmp/scale-1m --keep
      .venv/bin/python bench/scale_bench.py --dir /tmp/scale-100k --source /path/to/checkout
      (an existing --dir is measured again, not rebuilt, for before/after: --source, or
      PYTHONPATH, names the checkout every step runs; each measurement adds two journals of
      new captures to it)

Example output: bench/README.md.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import median

from index_bench import peak_rss_kb  # bench/index_bench.py (run from bench/)
from index_pages_bench import page_urls, pct  # bench/index_pages_bench.py
from scale_cache import Bodies, cache_files, write_capture  # bench/scale_cache.py
from scale_pages import measure_pages  # bench/scale_pages.py

import wwwproxy
from wwwproxy.archive.cdxj import CDXJRecord, Index, format_timestamp, write_index
from wwwproxy.archive.index_lines import index_line
from wwwproxy.archive.store import WARC_SUFFIX, Store
from wwwproxy.archive.warc import RecordInfo
from wwwproxy.url import canonicalize, surt
from wwwproxy.url.cachename import url_hash

CAPTURES_A_HOST = 60
TLDS = ["com", "org", "net", "de", "fr", "co.uk", "io", "jp", "nl", "info"]
TYPES = ["text/html"] * 6 + ["image/png", "image/jpeg", "text/css", "application/javascript"]
START = datetime(2023, 1, 1, tzinfo=UTC)
SPAN_S = 3 * 365 * 86400
LOOKUPS = 10_000
KEYS_NAME = "lookup-keys.json"
META_NAME = "scale-bench.json"


def parse_captures(text: str) -> int:
    """``100k``, ``1M``, ``10M`` or a plain integer."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def host_pages(captures: int) -> list[tuple[str, int]]:
    """(host, pages) for every host: pages in proportion to 1/rank, 3 captures a page on
    average."""
    hosts = max(1, captures // CAPTURES_A_HOST)
    pages = captures // 3
    harmonic = sum(1 / rank for rank in range(1, hosts + 1))
    return [
        (f"www.host{n}.{TLDS[n % len(TLDS)]}", max(1, round(pages / (n + 1) / harmonic)))
        for n in range(hosts)
    ]


def _digest(rng: random.Random) -> str:
    return "sha1:" + base64.b32encode(rng.randbytes(20)).decode()


def page_records(url: str, count: int, rng: random.Random, after: datetime) -> Iterator[CDXJRecord]:
    """The index lines of ``count`` captures of ``url`` after ``after``: the first a response,
    each later one a revisit half the time (else a changed response)."""
    key = canonicalize(url).file
    name = url_hash(key) + WARC_SUFFIX
    mime = rng.choice(TYPES)
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {mime}\r\n\r\n".encode()
    offset = 0
    when = after
    original: tuple[str, str, str] | None = None  # (digest, date, record id)
    for n in range(count):
        when += timedelta(seconds=rng.randrange(1, SPAN_S // 10))
        date = format_timestamp(when)
        record_id = f"<urn:uuid:{rng.getrandbits(128):032x}>"
        size = int(rng.lognormvariate(9, 1.5))
        offset += 400 + rng.randrange(200)  # the request record before it
        if n and original and rng.random() < 0.5:
            rec_type, payload = "revisit", 0
            headers: tuple[tuple[str, str], ...] = (
                ("WARC-Payload-Digest", original[0]),
                ("WARC-Refers-To-Target-URI", key),
                ("WARC-Refers-To-Date", original[1]),
                ("WARC-Refers-To", original[2]),
            )
        else:
            rec_type, payload = "response", size
            headers = (("WARC-Payload-Digest", _digest(rng)),)
            original = (headers[0][1], date, record_id)
        info = RecordInfo(
            rec_type=rec_type,
            record_id=record_id,
            date=date,
            target_uri=key,
            archive_key=key,
            warc_headers=headers,
            content_length=payload + len(head),
            http_head=head,
            http_headers=(("Content-Type", mime),),
            payload_length=payload,
        )
        length = 600 + payload // 3
        yield index_line(key, info, name, offset, length)
        offset += length


def cache_pages(
    captures: int, rng: random.Random, keys: list[str], counts: dict[str, int]
) -> Iterator[tuple[str, int, datetime]]:
    """(URL, captures, first capture's time) of every page, exactly ``captures`` in all;
    ``keys`` is filled with a uniform sample (reservoir) of LOOKUPS page URLs, for the lookups,
    and ``counts`` with the hosts and pages made."""
    made = seen = 0
    hosts = host_pages(captures)
    counts["hosts"] = len(hosts)
    rounds = 0
    while made < captures:  # the first round falls a little short: one more page a host
        rounds += 1
        for host, pages in hosts:
            for url in page_urls(rng, host, pages if rounds == 1 else 1):
                if made >= captures:
                    return
                if rng.random() < 0.7:
                    url = "https" + url[4:]
                seen += 1
                counts["pages"] = seen
                if len(keys) < LOOKUPS:
                    keys.append(url)
                elif (slot := rng.randrange(seen)) < LOOKUPS:
                    keys[slot] = url
                count = min(rng.randint(1, 5), captures - made)
                made += count
                yield url, count, START + timedelta(seconds=rng.randrange(SPAN_S))


def cache_records(
    captures: int, rng: random.Random, keys: list[str], counts: dict[str, int]
) -> Iterator[CDXJRecord]:
    """Exactly ``captures`` index lines, no files (see :func:`cache_pages`)."""
    for url, count, when in cache_pages(captures, rng, keys, counts):
        yield from page_records(url, count, rng, when)


def capture_times(rng: random.Random, count: int, after: datetime) -> Iterator[datetime]:
    """When the ``count`` captures of a page after ``after`` were made (as page_records)."""
    for _ in range(count):
        after += timedelta(seconds=rng.randrange(1, SPAN_S // 10))
        yield after


def warc_records(
    store: Store,
    captures: int,
    rng: random.Random,
    keys: list[str],
    counts: dict[str, int],
    bodies: Bodies,
) -> Iterator[CDXJRecord]:
    """Exactly ``captures`` captures written to real cache files; their index lines."""
    started = time.monotonic()
    for url, count, first in cache_pages(captures, rng, keys, counts):
        mime = rng.choice(TYPES)
        body = bodies.body(rng, mime, url)
        previous = None
        for n, when in enumerate(capture_times(rng, count, first)):
            if n and rng.random() >= 0.5:  # a changed page, else the same body (a revisit)
                body = bodies.body(rng, mime, url)
            lines, previous = write_capture(store, url, mime, body, when, previous)
            yield from lines
        if counts["pages"] % 20_000 == 0:
            rate = counts["pages"] / (time.monotonic() - started)
            print(f"  {counts['pages']:,} pages written ({rate:.0f}/s)", file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# Phases (each in its own child process, printing one JSON line)


def phase_build(directory: Path, captures: int, seed: int, warcs: bool) -> dict:
    rng = random.Random(seed)
    keys: list[str] = []
    counts = {"hosts": 0, "pages": 0}
    start, cpu = time.perf_counter(), time.process_time()
    (directory / "index").mkdir(parents=True, exist_ok=True)
    if warcs:
        store = Store(directory)
        records = warc_records(store, captures, rng, keys, counts, Bodies(seed))
    else:
        records = cache_records(captures, rng, keys, counts)
    lines = write_index(directory / "index" / "index.cdxj", records)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    (directory / KEYS_NAME).write_text(json.dumps(keys))
    big_host, big_pages = host_pages(captures)[0]
    meta = {"captures": captures, "warcs": warcs, "big_host": big_host, "big_pages": big_pages,
            "files": cache_files(directory) if warcs else 0, **counts}  # fmt: skip
    (directory / META_NAME).write_text(json.dumps(meta))
    return {"lines": lines, **meta, "seconds": seconds, "cpu": cpu, "rss_kb": peak_rss_kb(),
            "disk": disk_bytes(directory)}  # fmt: skip


def disk_bytes(directory: Path) -> int:
    """Bytes the cache takes on disk (blocks, as du counts them)."""
    total = 0
    for folder, _, names in os.walk(directory):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def phase_search(directory: Path) -> dict:
    """The search index made from the whole cache, as ``/search/``'s rebuild button does."""
    from wwwproxy.archive.search import SearchIndex

    store = Store(directory)
    start, cpu = time.perf_counter(), time.process_time()
    index = SearchIndex(directory)
    index.attach(store)
    count = index.rebuild(store)
    with_text = index.count()[1]
    index.close()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    helper = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"indexed": count, "with_text": with_text, "seconds": seconds, "cpu": cpu,
            "helper_cpu": helper.ru_utime + helper.ru_stime, "rss_kb": peak_rss_kb()}  # fmt: skip


def _wchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000


def new_captures(
    store: Store | None, urls: list[str], rng: random.Random, bodies: Bodies | None
) -> list[CDXJRecord]:
    """Recent captures of random pages, one a page, until their lines fill a journal
    (``app.COMPACT_BYTES``, when recording compacts): written to the cache files with
    ``store``, else lines only."""
    from wwwproxy.app import COMPACT_BYTES

    new: list[CDXJRecord] = []
    journal = 0
    now = START + timedelta(seconds=SPAN_S * 2)
    while journal < COMPACT_BYTES:
        url = rng.choice(urls)
        if store is not None and bodies is not None:
            lines, _ = write_capture(store, url, "text/html", bodies.html(rng), now, None)
        else:
            lines = [next(page_records(url, 1, rng, now))]
        new += lines
        journal += sum(len(line.to_bytes()) + 1 for line in lines)
    return new


def lookups_during_compaction(index: Index, keys: list[str]) -> dict:
    """One thread does exact lookups in a loop while this one runs ``Index.compact()``, and
    after it for at least a second and 1,000 lookups (at most 30 s): the slowest lookup during
    and right after, and the spread."""
    samples: list[tuple[float, float]] = []  # (started, seconds)
    stop = threading.Event()

    def lookups() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            key = rng.choice(keys)
            t0 = time.perf_counter()
            index.exact(key)
            samples.append((t0, time.perf_counter() - t0))

    thread = threading.Thread(target=lookups)
    thread.start()
    time.sleep(0.3)
    begin = time.perf_counter()
    count = index.compact()
    done = time.perf_counter()
    while time.perf_counter() < done + 30 and (
        time.perf_counter() < done + 1 or sum(t >= done for t, _ in samples[-1000:]) < 1000
    ):
        time.sleep(0.1)
    stop.set()
    thread.join()
    during = [s * 1000 for t, s in samples if t + s >= begin and t < done]
    after = [s * 1000 for t, s in samples if t >= done]
    quiet = [s * 1000 for t, s in samples if t + s < begin]
    return {"compacted": count, "compact_s": done - begin,
            "during": len(during), "during_max": max(during, default=0.0),
            "during_p50": median(during) if during else 0.0,
            "after": len(after), "after_max": max(after, default=0.0),
            "after_p99": pct(after, 99) if after else 0.0,
            "quiet_p50": median(quiet) if quiet else 0.0}  # fmt: skip


def phase_measure(directory: Path, seed: int) -> dict:
    rng = random.Random(seed + 1)
    urls = json.loads((directory / KEYS_NAME).read_text())
    warcs = read_meta(directory).get("warcs", False)
    keys = [surt(canonicalize(url).file) for url in urls]  # as Store.get asks
    store = Store(directory) if warcs else None
    bodies = Bodies(seed + 1) if warcs else None
    index = store.index if store is not None else Index(directory / "index", create=False)
    size = index.index_path.stat().st_size
    first_open = _timed(lambda: index.exact(keys[0]))
    picks = [rng.choice(keys) for _ in range(LOOKUPS)]
    start, cpu = time.perf_counter(), time.process_time()
    found = sum(len(index.exact(key)) for key in picks)
    lookup_s, lookup_cpu = time.perf_counter() - start, time.process_time() - cpu

    new = new_captures(store, urls, rng, bodies)
    index.add(new)
    journal = sum(len(line.to_bytes()) + 1 for line in new)
    wrote, start, cpu = _wchar(), time.perf_counter(), time.process_time()
    count = index.compact()
    compact_s, compact_cpu = time.perf_counter() - start, time.process_time() - cpu
    written = _wchar() - wrote
    first_after = _timed(lambda: index.exact(rng.choice(keys)))
    second_after = _timed(lambda: index.exact(rng.choice(keys)))
    amortized = amortized_writes(journal, size)
    captures = read_meta(directory).get("captures") or 0
    amortized_10m = amortized_writes(journal, size * 10_000_000 // captures) if captures else None
    more = new_captures(store, urls, rng, bodies)
    index.add(more)
    concurrent = lookups_during_compaction(index, keys)
    return {"bytes": size, "first_open": first_open, "found": found,
            "lookups_per_s": LOOKUPS / lookup_s, "lookups_per_cpu_s": LOOKUPS / lookup_cpu,
            "appended": len(new), "journal_bytes": journal, "compacted": count,
            "compact_s": compact_s, "compact_cpu": compact_cpu, "written": written,
            "first_after": first_after, "second_after": second_after,
            "concurrent": concurrent, "rss_kb": peak_rss_kb(),
            "amortized": amortized, "amortized_10m": amortized_10m}  # fmt: skip


def amortized_writes(journal: int, size: int) -> float | None:
    """Bytes the index writes for each byte of lines added while it grows to ``size`` in
    compactions of ``journal`` bytes, by the merge rule of the code measured (``None``: a
    version that rewrites the whole index every time, whose cost per capture at this size is
    the one compaction measured)."""
    try:
        from wwwproxy.archive.cdxj.runs import runs_to_merge
    except ImportError:
        return None
    runs: list[int] = []
    written = added = 0
    while added < size:
        added += journal
        merged = runs_to_merge(journal, runs)
        runs = [journal + sum(runs[:merged]), *runs[merged:]]
        written += runs[0]
    return written / added


def _amortized(m: dict, line: float) -> str:
    """The amortized cost of the merge rule, at this size and at ten million captures."""
    if m.get("amortized") is None:
        return ""
    text = f"; over the index's growth: {m['amortized'] * line / 1024:.1f} KB"
    if m.get("amortized_10m") is not None:
        text += f", to 10M captures {m['amortized_10m'] * line / 1024:.1f} KB"
    return text


def read_meta(directory: Path) -> dict:
    path = directory / META_NAME
    return json.loads(path.read_text()) if path.exists() else {}


# ----------------------------------------------------------------------------------------------
# Driver


def child_env(source: Path | None) -> dict[str, str]:
    """The environment of every child: PYTHONPATH names the checkout measured (``--source``,
    else the one this process imported)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(source or Path(wwwproxy.__file__).resolve().parent.parent)
    return env


def child(end: float, env: dict[str, str], *args: object) -> dict | None:
    """Run a phase in a child process; None when it did not finish within the budget."""
    cmd = [sys.executable, __file__, *map(str, args)]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=False, timeout=end - time.time(), env=env
        )
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_command(cmd: list[str], env: dict[str, str], cwd: Path, end: float) -> dict | None:
    """Run ``cmd`` to its end (None, and it is killed, past ``end``): its wall seconds, CPU
    seconds and peak RSS (its own and its waited-for children's, from ``wait4``), exit status
    and output lines."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.time() > end:
                proc.kill()
                os.wait4(proc.pid, 0)
                return None
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)  # (reaped here, not by Popen)
        seconds = time.perf_counter() - start
        out.seek(0)
        lines = out.read().decode(errors="replace").splitlines()
    return {"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_kb": usage.ru_maxrss, "status": proc.returncode, "lines": lines}  # fmt: skip


def wwwproxy_command(action: str, directory: Path, env: dict[str, str], end: float) -> dict | None:
    """``python -m wwwproxy index ACTION`` on the cache, in a child process."""
    cmd = [sys.executable, "-m", "wwwproxy", "index", action, "--cache", str(directory)]
    return run_command(cmd, env, directory, end)


def step_end(end: float, cap: float) -> float:
    return min(end, time.time() + cap)


# ----------------------------------------------------------------------------------------------
# The table

NA = "not measured"
#: the issue's targets (at 10M captures, on a 2-core machine), by row
TARGETS = {
    "bytes": "<= 30x its line (~11 KB)",
    "slowest": "<= 50 ms",
    "lookups": ">= 20,000",
    "root": "<= 50 ms CPU at 166k hosts",
    "index": "<= 50 ms CPU (100 hosts a page)",
    "host": "<= 300 ms",
    "check": "<= 500 MB peak RSS",
    "rebuild": "both cores busy; files/s",
    "search": "p50 <= 100 ms at 1M pages",
}


def served(page: dict | None) -> str:
    """A served page's figures: server CPU and wall time, p50/p99, first request, size."""
    if not page:
        return NA
    text = f"first {page['first_cpu_ms']:.0f} ms CPU ({page['first_ms']:.0f} ms)"
    if page.get("n"):
        text = (
            f"{page['p50_cpu_ms']:.1f} / {page['p99_cpu_ms']:.1f} ms CPU p50/p99 "
            f"({page['p50_ms']:.1f} / {page['p99_ms']:.1f} ms wall, n={page['n']}); " + text
        )
    return f"{text}; {page['bytes'] / 1024:,.0f} KB, HTTP {page['status']}"


def index_rows(m: dict | None) -> list[tuple[str, str, str]]:
    if m is None:
        return [("index rows", f"{NA} (over the budget)", "")]
    mb = 2**20
    line = m["journal_bytes"] / m["appended"]
    per_capture = m["written"] / m["appended"]
    c = m["concurrent"]
    return [
        ("index file", f"{m['bytes'] / mb:.1f} MB", ""),
        (
            f"one compaction ({m['appended']} captures, {m['journal_bytes'] / 1024:.0f} KB "
            "of journal)",
            f"{m['compact_cpu']:.2f} s CPU ({m['compact_s']:.2f} s), "
            f"{m['written'] / mb:.1f} MB written, {m['compacted']:,} lines",
            "",
        ),
        (
            "bytes rewritten per recorded capture",
            f"{per_capture / 1024:,.0f} KB ({per_capture / line:,.0f}x its {line:.0f}-byte line)"
            + _amortized(m, line),
            TARGETS["bytes"],
        ),
        (
            "first lookup after a compaction",
            f"{m['first_after'][0]:.0f} ms ({m['first_after'][1]:.0f} ms CPU); "
            f"the next {m['second_after'][0]:.2f} ms",
            "",
        ),
        (
            "slowest lookup during and right after index upkeep",
            f"{c['during_max']:.0f} ms during ({c['during']} lookups, p50 "
            f"{c['during_p50']:.2f} ms, compaction {c['compact_s']:.2f} s), "
            f"{c['after_max']:.0f} ms after ({c['after']} lookups, p99 "
            f"{c['after_p99']:.2f} ms); quiet p50 {c['quiet_p50']:.3f} ms",
            TARGETS["slowest"],
        ),
        (
            f"exact lookups per CPU-second ({LOOKUPS:,} random keys)",
            f"{m['lookups_per_cpu_s']:,.0f} ({m['lookups_per_s']:,.0f} per second, "
            f"{m['found']:,} records)",
            TARGETS["lookups"],
        ),
        ("first lookup on opening the index", f"{m['first_open'][0]:.0f} ms", ""),
    ]


def command_row(name: str, r: dict | None, files: int, target: str) -> tuple[str, str, str]:
    if r is None:
        return name, f"{NA} (over its time cap)", target
    text = (
        f"{r['cpu']:.1f} s CPU, {r['seconds']:.1f} s wall ({r['cpu'] / r['seconds']:.2f} cores "
        f"busy), peak RSS {r['rss_kb'] / 1024:.0f} MB"
    )
    if files:
        text += (
            f", {files / r['seconds']:,.0f} files/s ({r['cpu'] / files * 1000:.1f} ms CPU a file)"
        )
    return name, f"{text}; exit {r['status']}, {len(r['lines'])} output lines", target


def report(r: dict) -> None:
    meta, built = r["meta"], r.get("built")
    kind = "with WARC files" if meta.get("warcs") else "index lines only, no WARC files"
    print(f"captures: {meta.get('captures', 0):,} ({kind}); {meta.get('pages', 0):,} pages, "
          f"{meta.get('hosts', 0):,} hosts, {meta.get('files', 0):,} files")  # fmt: skip
    if built:
        print(
            f"  build: {built['lines']:,} lines in {built['seconds']:.0f} s "
            f"({built['cpu']:.0f} s CPU), peak RSS {built['rss_kb'] / 1024:.0f} MB, "
            f"{built['disk'] / 2**20:,.0f} MB on disk"
        )
    rows = index_rows(r.get("measure"))
    pages, files = r.get("pages"), meta.get("files", 0)
    if meta.get("warcs"):
        p = pages or {}
        host = f"first view of the biggest host ({meta['big_host']}, {meta['big_pages']:,} pages)"
        rows += [
            ("`/` every request", served(p.get("root")), TARGETS["root"]),
            ("`/index/` every request", served(p.get("index")), TARGETS["index"]),
            (host, served(p.get("host")), TARGETS["host"]),
            command_row("`index check`", r.get("check"), 0, TARGETS["check"]),
            command_row("`index rebuild`", r.get("rebuild"), files, TARGETS["rebuild"]),
        ]
        search, made = p.get("search", {}), r.get("search")
        with_text = f"{made['with_text']:,} pages with text" if made else "pages with text"
        for query, page in search.items():
            rows.append((f"search {query!r}, 20 results ({with_text})", served(page),
                         TARGETS["search"]))  # fmt: skip
        if not search:
            rows.append(("search", NA, TARGETS["search"]))
        if made:
            rows.append((
                "search index build (/search/'s rebuild)",
                f"{made['seconds']:.0f} s, {made['cpu']:.0f} s CPU + {made['helper_cpu']:.0f} s "
                f"in its text helper, {made['indexed']:,} pages",
                "",
            ))  # fmt: skip
        if pages:
            rows.append((
                "proxy start on the cache",
                f"{pages['start_s']:.1f} s to listen, settled after {pages['settle_s']:.0f} s "
                f"more, {pages['start_cpu_ms'] / 1000:.1f} s CPU, RSS {pages['start_rss_mb']:.0f} "
                f"MB; after the requests {pages['rss_mb']:.0f} MB (peak {pages['hwm_mb']:.0f})",
                "",
            ))  # fmt: skip
    else:
        rows += [(name, f"{NA} (needs WARC files: --warcs)", TARGETS[key]) for name, key in (
            ("`/` every request", "root"), ("`/index/` every request", "index"),
            ("first view of the biggest host", "host"), ("`index check` RSS", "check"),
            ("`index rebuild`", "rebuild"), ("search", "search"))]  # fmt: skip
    if r.get("measure"):
        rows.append(("peak RSS of the index measuring process",
                     f"{r['measure']['rss_kb'] / 1024:.0f} MB", ""))  # fmt: skip
    for name, value, target in rows:
        print(f"  {name:<58} {value}" + (f"  [target at 10M: {target}]" if target else ""))
    loads = ", ".join(f"{step} {load:.2f}" for step, load in r["load"].items())
    print(f"  load average (1 min) at each step, 2 cores shared: {loads}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=parse_captures, default=100_000, help="100k|1M|10M|N")
    parser.add_argument("--dir", type=Path, help="where the cache goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="leave the cache in --dir")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--warcs", action="store_true", help="WARC files (default up to 1M)")
    kind.add_argument("--lines", action="store_true", help="index lines only (default past 1M)")
    parser.add_argument(
        "--source", "--before", type=Path, help="the checkout whose wwwproxy the steps run"
    )
    parser.add_argument("--budget", type=float, default=3600, help="seconds for the whole run")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        warcs = args.warcs
        print(json.dumps({
            "build": lambda: phase_build(args.dir, args.captures, args.seed, warcs),
            "search": lambda: phase_search(args.dir),
            "measure": lambda: phase_measure(args.dir, args.seed),
        }[args.phase]()))  # fmt: skip
        return

    end = time.time() + args.budget
    env = child_env(args.source)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="scale-bench-"))
    made = args.dir is None or not (directory / KEYS_NAME).exists()
    load: dict[str, float] = {}
    r: dict = {"load": load}

    def step(name: str) -> None:
        load[name] = os.getloadavg()[0]
        print(f"[{time.strftime('%H:%M:%S')}] {name}", file=sys.stderr, flush=True)

    try:
        common = ["--captures", args.captures, "--dir", directory, "--seed", args.seed]
        if not (directory / KEYS_NAME).exists():
            warcs = args.warcs or (not args.lines and args.captures <= 1_000_000)
            step("build")
            r["built"] = child(end, env, "--phase", "build", *common, *["--warcs"] * warcs)
        r["meta"] = meta = read_meta(directory) or {"captures": args.captures}
        if r.get("built", True) is not None:
            if meta.get("warcs"):
                step("search index")
                r["search"] = child(step_end(end, 1800), env, "--phase", "search", *common)
            step("index")
            r["measure"] = child(step_end(end, 900), env, "--phase", "measure", *common)
            if meta.get("warcs"):
                step("pages")
                r["pages"] = measure_pages(directory, meta["big_host"], env, step_end(end, 900))
                step("check")
                r["check"] = wwwproxy_command("check", directory, env, step_end(end, 1200))
                step("rebuild")
                r["rebuild"] = wwwproxy_command("rebuild", directory, env, step_end(end, 1800))
        step("end")
        report(r)
    finally:
        if made and not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
        elif args.dir is None:
            print(f"cache kept in {directory}")
    print(f"wwwproxy from {env['PYTHONPATH']}")


if __name__ == "__main__":
    main()
