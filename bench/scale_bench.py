"""Issue 28's table for the project as it is: the CDXJ index of a synthetic cache of 100k, 1M or
10M captures (not run in CI).

The cache is index lines only, no WARC files: hosts with Zipf-distributed page counts (the
host of rank r holds pages in proportion to 1/r, about 60 captures a host), 1-5 captures a page
(uniform), a capture after a page's first a revisit half the time (so a third of all captures),
70 % of pages HTTPS.  Each line is the store's own: a ``RecordInfo`` such as the WARC writer
makes, through ``index_lines.index_line``, keyed by ``canonicalize(url).file``, naming the cache
file ``url_hash(key) + WARC_SUFFIX``, sorted into ``index/index.cdxj`` with ``write_index``.

Then, in a fresh child process (so its peak RSS is its own): the first lookup on opening the
index, 10,000 random exact lookups (exact lookups per CPU-second), new captures of random pages
appended to the journal until it holds ``app.COMPACT_BYTES`` (when recording compacts), one
``Index.compact()`` (CPU seconds, bytes written: ``wchar`` of ``/proc/self/io``), bytes
rewritten per capture, and the first lookup after it.  Rows that need cache files (``/``,
``/index/``, a host's first view, ``index check``/``rebuild``, search) print "not measured".

Run:  .venv/bin/python bench/scale_bench.py                      (100k: about a minute)
      .venv/bin/python bench/scale_bench.py --captures 1M --dir /tmp/scale-1m --keep
      PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/scale_bench.py --dir /tmp/scale-1m
      (an existing --dir is measured again, not rebuilt, for before/after; the first
      measurement compacts some 770 new lines into it, later ones the same lines again)

Example output: see docs/performance.md, "Scale (issue 28)".
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from index_bench import peak_rss_kb  # bench/index_bench.py (run from bench/)
from index_pages_bench import page_urls  # bench/index_pages_bench.py

from wwwproxy.archive.cdxj import CDXJRecord, Index, format_timestamp, write_index
from wwwproxy.archive.index_lines import index_line
from wwwproxy.archive.store import WARC_SUFFIX
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


def cache_records(
    captures: int, rng: random.Random, keys: list[str], counts: dict[str, int]
) -> Iterator[CDXJRecord]:
    """Exactly ``captures`` index lines; ``keys`` is filled with a uniform sample (reservoir) of
    LOOKUPS page URLs, for the lookups, and ``counts`` with the hosts and pages made."""
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
                when = START + timedelta(seconds=rng.randrange(SPAN_S))
                yield from page_records(url, count, rng, when)


# ----------------------------------------------------------------------------------------------
# Phases (each in its own child process, printing one JSON line)


def phase_build(directory: Path, captures: int, seed: int) -> dict:
    rng = random.Random(seed)
    keys: list[str] = []
    counts = {"hosts": 0, "pages": 0}
    start, cpu = time.perf_counter(), time.process_time()
    (directory / "index").mkdir(parents=True, exist_ok=True)
    lines = write_index(
        directory / "index" / "index.cdxj", cache_records(captures, rng, keys, counts)
    )
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    (directory / KEYS_NAME).write_text(json.dumps(keys))
    return {"lines": lines, **counts, "seconds": seconds, "cpu": cpu, "rss_kb": peak_rss_kb()}


def _wchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000


def phase_measure(directory: Path, seed: int) -> dict:
    from wwwproxy.app import COMPACT_BYTES

    rng = random.Random(seed + 1)
    urls = json.loads((directory / KEYS_NAME).read_text())
    keys = [surt(canonicalize(url).file) for url in urls]  # as Store.get asks
    index = Index(directory / "index", create=False)
    size = index.index_path.stat().st_size
    first_open = _timed(lambda: index.exact(keys[0]))
    picks = [rng.choice(keys) for _ in range(LOOKUPS)]
    start, cpu = time.perf_counter(), time.process_time()
    found = sum(len(index.exact(key)) for key in picks)
    lookup_s, lookup_cpu = time.perf_counter() - start, time.process_time() - cpu

    new: list[CDXJRecord] = []
    journal = 0
    now = START + timedelta(seconds=SPAN_S * 2)
    while journal < COMPACT_BYTES:  # recent captures of random pages, one a page
        record = next(page_records(rng.choice(urls), 1, rng, now))
        new.append(record)
        journal += len(record.to_bytes()) + 1
    index.add(new)
    wrote, start, cpu = _wchar(), time.perf_counter(), time.process_time()
    count = index.compact()
    compact_s, compact_cpu = time.perf_counter() - start, time.process_time() - cpu
    written = _wchar() - wrote
    first_after = _timed(lambda: index.exact(rng.choice(keys)))
    second_after = _timed(lambda: index.exact(rng.choice(keys)))
    return {"bytes": size, "first_open": first_open, "found": found,
            "lookups_per_s": LOOKUPS / lookup_s, "lookups_per_cpu_s": LOOKUPS / lookup_cpu,
            "appended": len(new), "journal_bytes": journal, "compacted": count,
            "compact_s": compact_s, "compact_cpu": compact_cpu, "written": written,
            "first_after": first_after, "second_after": second_after,
            "rss_kb": peak_rss_kb()}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Driver


def child(budget_end: float, *args: object) -> dict | None:
    """Run a phase in a child process; None when it did not finish within the budget."""
    cmd = [sys.executable, __file__, *map(str, args)]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=False, timeout=budget_end - time.time()
        )
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(captures: int, built: dict | None, m: dict | None) -> None:
    mb, na = 2**20, "not measured"
    print(f"captures: {captures:,} (index lines only, no WARC files)")
    if built:
        print(
            f"  build: {built['lines']:,} lines, {built['pages']:,} pages, "
            f"{built['hosts']:,} hosts in {built['seconds']:.1f} s ({built['cpu']:.1f} s CPU), "
            f"peak RSS {built['rss_kb'] / 1024:.0f} MB"
        )
    if m is None:
        print(f"  measurements: {na} (over the budget)")
        return
    per_capture = m["written"] / m["appended"]
    rows = [
        ("index file", f"{m['bytes'] / mb:.1f} MB"),
        (
            f"one compaction ({m['appended']} captures, {m['journal_bytes'] / 1024:.0f} KB "
            "of journal)",
            f"{m['compact_cpu']:.2f} s CPU ({m['compact_s']:.2f} s), "
            f"{m['written'] / mb:.1f} MB written, {m['compacted']:,} lines",
        ),
        ("bytes rewritten per recorded capture", f"{per_capture / 1024:,.0f} KB"),
        (
            "first lookup after a compaction",
            f"{m['first_after'][0]:.0f} ms ({m['first_after'][1]:.0f} ms CPU); "
            f"the next {m['second_after'][0]:.2f} ms",
        ),
        ("first lookup on opening the index", f"{m['first_open'][0]:.0f} ms"),
        (
            f"exact lookups per CPU-second ({LOOKUPS:,} random keys)",
            f"{m['lookups_per_cpu_s']:,.0f} ({m['lookups_per_s']:,.0f} per second, "
            f"{m['found']:,} records)",
        ),
        ("`/` every request", f"{na} (needs cache files)"),
        ("`/index/` every request", f"{na} (needs cache files)"),
        ("first view of the biggest host", na),
        ("`index check` RSS, `index rebuild`", f"{na} (need WARC files)"),
        ("search", na),
        ("peak RSS of the measuring process", f"{m['rss_kb'] / 1024:.0f} MB"),
    ]
    for name, value in rows:
        print(f"  {name:<52} {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=parse_captures, default=100_000, help="100k|1M|10M|N")
    parser.add_argument("--dir", type=Path, help="where the cache goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="leave the cache in --dir")
    parser.add_argument("--budget", type=float, default=900, help="seconds for the whole run")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase == "build":
        print(json.dumps(phase_build(args.dir, args.captures, args.seed)))
        return
    if args.phase == "measure":
        print(json.dumps(phase_measure(args.dir, args.seed)))
        return

    end = time.time() + args.budget
    directory = args.dir or Path(tempfile.mkdtemp(prefix="scale-bench-"))
    made = args.dir is None or not (directory / KEYS_NAME).exists()
    try:
        common = ["--captures", args.captures, "--dir", directory, "--seed", args.seed]
        built = None
        if not (directory / KEYS_NAME).exists():
            built = child(end, "--phase", "build", *common)
            if built is None:
                report(args.captures, None, None)
                return
        report(args.captures, built, child(end, "--phase", "measure", *common))
    finally:
        if made and not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
        elif args.dir is None:
            print(f"cache kept in {directory}")
    print(f"wwwproxy from {os.path.dirname(os.path.dirname(url_hash.__code__.co_filename))}")


if __name__ == "__main__":
    main()
