"""Benchmark of the CDXJ index: lookup speed and memory as the sorted index grows.

Builds sorted indexes of 100,000 and 1,000,000 lines (synthetic SURT keys over 5,000 hosts,
realistic JSON blocks) in a temporary directory with ``write_index``, then, each in a fresh
child process, times 10,000 random exact lookups (10% misses) and 1,000 prefix scans (hosts,
domains, paths) through ``Index``, and prints lookups per second and the child's peak RSS
(``resource.getrusage(...).ru_maxrss``). Each phase runs in its own process so that a phase's
peak RSS is its own, not the build's. The first lookup (which samples the file into the sparse
index) is timed apart; the sparse index's size is printed with the build. ``write_index`` leaves
the note that every line was checked (``.index.cdxj.checked``), so lookups take the lines as they
are; ``--unchecked`` removes it, so that every line a lookup reads is checked (as for an index
written by another tool or edited since).

Baselines measured in the same run: ``bisect`` over an in-memory list of all lines (same
lookups, same record parsing), for both sizes, and a naive linear scan of the 100k file.
With ``--repeat N`` the lookup and baseline phases run N times, interleaved, and the medians
are printed (the machine may be shared).

Run:  .venv/bin/python bench/index_bench.py            (about two minutes)
      .venv/bin/python bench/index_bench.py --sizes 100000 --lookups 2000 --repeat 1
      .venv/bin/python bench/index_bench.py --sizes 1000000 --repeat 1 --unchecked
      PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/index_bench.py   (before/after)
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from wwwproxy.archive.cdxj import CDXJRecord, Index, IndexFile, make_ref, write_index

HOSTS = 5000
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
WORDS = [
    "a", "about", "api", "archive", "assets", "blog", "css", "docs", "en", "files", "img",
    "index.html", "js", "news", "p", "search", "static", "user", "v1", "wiki", "2024", "2025",
]  # fmt: skip
TLDS = ["com", "org", "net", "de", "fr", "uk,co", "io", "jp", "nl", "info"]
SUBS = ["www", "", "cdn", "static", "api", "m", "blog"]


def mix(x: int) -> int:
    """splitmix64: a deterministic pseudo-random number per integer, so a child process can
    name existing keys without the parent's data."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def host_parts(h: int) -> tuple[str, str, str]:
    """(SURT host, its domain prefix, URL authority) for host number h."""
    r = mix(h + 10**9)
    if h % 97 == 0:
        ip = f"10.{r % 256}.{(r >> 8) % 256}.{(r >> 16) % 256}"
        port = ":8080" if r % 3 == 0 else ""
        return f"({ip}{port})", f"({ip}", ip + port
    tld = TLDS[r % len(TLDS)]
    name = f"bücher{h}" if h % 53 == 0 else f"site{h}"
    sub = SUBS[(r >> 8) % len(SUBS)]
    port = ":8080" if (r >> 16) % 50 == 0 else ""
    labels = [*tld.split(","), name] + ([sub] if sub else [])
    surt = "(" + ",".join(labels) + "," + port + ")"
    domain = "(" + ",".join([*tld.split(","), name]) + ","
    authority = ".".join(reversed(labels)) + port
    return surt, domain, authority


HOST_TABLE = [host_parts(h) for h in range(HOSTS)]


def key_of(kid: int) -> tuple[str, str]:
    """(SURT key, URL) of key number kid."""
    r = mix(kid)
    surt_host, _, authority = HOST_TABLE[r % HOSTS]
    r >>= 13
    depth = r % 5
    r >>= 3
    segments = []
    for _ in range(depth):
        segments.append(WORDS[r % len(WORDS)])
        r >>= 5
    path = "/" + "/".join(segments)
    path += f"/{kid}" if depth else f"{kid}"
    if r % 4 == 0:
        path += f"?id={r % 1000}&lang=en"
    return surt_host + path.lower(), f"http://{authority}{path}"


def records(lines: int) -> Iterator[CDXJRecord]:
    made = 0
    kid = 0
    while made < lines:
        key, url = key_of(kid)
        r = mix(kid + 7 * 10**9)
        for capture in range(1 + r % 3):
            if made >= lines:
                return
            c = mix(r + capture)
            seconds = c % (6 * 365 * 86400)
            t = time.gmtime(1577836800 + seconds)
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{(c >> 32) % 10**6:06d}Z"
            rtype = "revisit" if c % 7 == 0 else "response"
            sha = "".join(B32[(c >> (5 * i)) % 32] for i in range(12)) + "A" * 20
            yield CDXJRecord.build(
                key,
                ts,
                rtype,
                uri=url,
                ref=make_ref(f"{c % 10**9:09d}XdxEfXQ8cgf.warc.gz", (c >> 20) % 10**6),
                sha=sha,
                hsc=200 if rtype == "response" else None,
                mct="text/html" if rtype == "response" else None,
                rid=f"<urn:uuid:{c:032x}>"[:48],
                rle=(c >> 40) % 100000,
            )
            made += 1
        kid += 1


def queries(num_keys: int, lookups: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for n in range(lookups):
        key = key_of(rng.randrange(num_keys))[0]
        out.append(key + "-missing" if n % 10 == 9 else key)
    return out


def prefixes(scans: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for n in range(scans):
        surt, domain, _ = HOST_TABLE[rng.randrange(HOSTS)]
        out.append([surt + "/", domain, surt + "/a", surt + "/"][n % 4])
    return out


def peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux


# ----------------------------------------------------------------------------------------------
# Phases (each runs in its own child process and prints one JSON line)


def phase_build(directory: Path, lines: int, unchecked: bool) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    count = write_index(directory / "index.cdxj", records(lines))
    seconds = time.perf_counter() - start
    note = directory / ".index.cdxj.checked"
    if unchecked:
        note.unlink(missing_ok=True)
    num_keys = sum(1 for _ in _kids(lines))  # keys 0..num_keys-1 exist
    size = (directory / "index.cdxj").stat().st_size
    file = IndexFile(directory / "index.cdxj")
    start = time.perf_counter()
    samples = file.sample_count() if hasattr(file, "sample_count") else 0  # (older checkouts)
    sample_s = time.perf_counter() - start
    sample_bytes = file.sample_bytes() if samples else 0
    return {"lines": count, "keys": num_keys, "seconds": seconds, "bytes": size,
            "samples": samples, "sample_bytes": sample_bytes, "sample_s": sample_s,
            "checked": note.exists(), "rss_kb": peak_rss_kb()}  # fmt: skip


def _kids(lines: int) -> Iterator[int]:
    made = kid = 0
    while made < lines:
        made += 1 + mix(kid + 7 * 10**9) % 3
        yield kid
        kid += 1


def phase_lookup(directory: Path, num_keys: int, lookups: int, scans: int) -> dict:
    index = Index(directory, create=False)
    keys = queries(num_keys, lookups, seed=1)
    warm = queries(num_keys, 200, seed=2)
    start = time.perf_counter()
    index.exact(warm[0])  # the first lookup opens the file (and samples it)
    first_s = time.perf_counter() - start
    for key in warm:  # warm up the page cache and the code
        index.exact(key)
    start, cpu = time.perf_counter(), time.process_time()
    hits = sum(len(index.exact(key)) for key in keys)
    lookup_s, lookup_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    newest = sum(index.newest(key) is not None for key in keys[: lookups // 5])
    newest_s = time.perf_counter() - start
    start = time.perf_counter()
    scanned = sum(sum(1 for _ in index.prefix(p)) for p in prefixes(scans, seed=3))
    scan_s = time.perf_counter() - start
    return {"lookups_per_s": lookups / lookup_s, "hits": hits, "first_s": first_s,
            "lookups_per_cpu_s": lookups / lookup_cpu,
            "newest_per_s": (lookups // 5) / newest_s, "newest_found": newest,
            "scans_per_s": scans / scan_s, "scan_records": scanned,
            "scan_records_per_s": scanned / scan_s, "rss_kb": peak_rss_kb()}  # fmt: skip


def phase_bisect(directory: Path, num_keys: int, lookups: int) -> dict:
    """Baseline: every line in a Python list, bisect, the same parsing of the hits."""
    start = time.perf_counter()
    with open(directory / "index.cdxj", "rb") as f:
        lines = [line.rstrip(b"\n") for line in f if not line.startswith(b"!")]
    load_s = time.perf_counter() - start
    keys = queries(num_keys, lookups, seed=1)
    start, cpu = time.perf_counter(), time.process_time()
    hits = 0
    for key in keys:
        target = key.encode() + b" "
        i = bisect.bisect_left(lines, target)
        while i < len(lines) and lines[i].startswith(target):
            CDXJRecord.parse_line(lines[i])
            hits += 1
            i += 1
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"lookups_per_s": lookups / seconds, "hits": hits, "load_s": load_s,
            "lookups_per_cpu_s": lookups / cpu, "rss_kb": peak_rss_kb()}  # fmt: skip


def phase_scan(directory: Path, num_keys: int, lookups: int) -> dict:
    """Baseline: read the file from the top for every lookup."""
    keys = queries(num_keys, lookups, seed=1)
    start = time.perf_counter()
    hits = 0
    for key in keys:
        target = key.encode() + b" "
        with open(directory / "index.cdxj", "rb") as f:
            for line in f:
                if line.startswith(target):
                    CDXJRecord.parse_line(line)
                    hits += 1
    seconds = time.perf_counter() - start
    return {"lookups_per_s": lookups / seconds, "hits": hits, "rss_kb": peak_rss_kb()}


# ----------------------------------------------------------------------------------------------
# Driver


def _medians(results: list[dict]) -> dict:
    """Each figure's median over the runs (hit counts are the same in every run)."""
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def child(*args: object) -> dict:
    cmd = [sys.executable, __file__, *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--lookups", type=int, default=10_000)
    parser.add_argument("--scans", type=int, default=1_000)
    parser.add_argument("--scan-lookups", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3, help="lookup phases per size (median)")
    parser.add_argument(
        "--unchecked", action="store_true", help="remove the note that the lines were checked"
    )
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--keys", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        size = args.sizes[0]
        if args.phase == "build":
            result = phase_build(args.dir, size, args.unchecked)
        elif args.phase == "lookup":
            result = phase_lookup(args.dir, args.keys, args.lookups, args.scans)
        elif args.phase == "bisect":
            result = phase_bisect(args.dir, args.keys, args.lookups)
        else:
            result = phase_scan(args.dir, args.keys, args.scan_lookups)
        print(json.dumps(result))
        return

    mb = 1024
    rows = {}
    with tempfile.TemporaryDirectory(prefix="cdxj-bench-") as tmp:
        for size in args.sizes:
            d = Path(tmp) / str(size)
            common = ["--sizes", size, "--dir", d]
            built = child("--phase", "build", *common, *(["--unchecked"] * args.unchecked))
            keys = ["--keys", built["keys"], "--lookups", args.lookups]
            print(
                f"{size:>9,} lines  {built['bytes'] / 2**20:7.1f} MB  {built['keys']:>8,} keys  "
                f"build {built['seconds']:5.1f} s (peak RSS {built['rss_kb'] / mb:6.1f} MB)  "
                f"sparse index {built['samples']:,} keys, "
                f"{built['sample_bytes'] / 2**20:.1f} MB, sampled in {built['sample_s']:.2f} s; "
                f"lines checked when written: {'yes' if built.get('checked') else 'no'}",
                flush=True,
            )
            runs = []
            for _ in range(max(1, args.repeat)):  # interleaved, so that load hits both alike
                runs.append(child("--phase", "lookup", *common, *keys, "--scans", args.scans))
                runs.append(child("--phase", "bisect", *common, *keys))
            looked, base = _medians(runs[0::2]), _medians(runs[1::2])
            rows[size] = (built, looked, base)
            each = " ".join(f"{r['lookups_per_s']:,.0f}" for r in runs[0::2])
            print(
                f"    index:    {looked['lookups_per_s']:>9,.0f} exact lookups/s "
                f"({looked['lookups_per_cpu_s']:,.0f} per CPU-second; "
                f"{int(looked['hits']):,} records; runs {each})  {looked['newest_per_s']:>8,.0f} "
                f"newest/s  {looked['scans_per_s']:>7,.0f} prefix scans/s "
                f"({looked['scan_records_per_s']:,.0f} records/s)  "
                f"peak RSS {looked['rss_kb'] / mb:6.1f} MB  first lookup "
                f"{looked['first_s'] * 1000:.0f} ms",
                flush=True,
            )
            print(
                f"    baseline: {base['lookups_per_s']:>9,.0f} lookups/s "
                f"({base['lookups_per_cpu_s']:,.0f} per CPU-second) with bisect over an "
                f"in-memory list (load {base['load_s']:.1f} s)  "
                f"peak RSS {base['rss_kb'] / mb:6.1f} MB   "
                f"index/baseline speed {looked['lookups_per_s'] / base['lookups_per_s']:.2f}x "
                f"(CPU {looked['lookups_per_cpu_s'] / base['lookups_per_cpu_s']:.2f}x), "
                f"RSS {looked['rss_kb'] / base['rss_kb']:.2f}x",
                flush=True,
            )
            if looked["hits"] != base["hits"]:
                raise SystemExit(f"hit counts differ: {looked['hits']} vs {base['hits']}")
        small = min(args.sizes)
        d = Path(tmp) / str(small)
        scan_keys = ["--keys", rows[small][0]["keys"], "--scan-lookups", args.scan_lookups]
        scan = child("--phase", "scan", "--sizes", small, "--dir", d, *scan_keys)
        speedup = rows[small][1]["lookups_per_s"] / scan["lookups_per_s"]
        print(
            f"naive linear scan of the {small:,}-line file: {scan['lookups_per_s']:,.1f} "
            f"lookups/s; the index is {speedup:,.0f}x faster"
        )
    if len(rows) > 1:
        lo, hi = min(rows), max(rows)
        (_, l_lo, base_lo), (_, l_hi, base_hi) = rows[lo], rows[hi]
        print(
            f"growth {lo:,} -> {hi:,} lines ({hi / lo:.0f}x): index peak RSS "
            f"{l_hi['rss_kb'] / l_lo['rss_kb']:.2f}x, exact lookup rate "
            f"{l_hi['lookups_per_s'] / l_lo['lookups_per_s']:.2f}x; in-memory baseline RSS "
            f"{base_hi['rss_kb'] / base_lo['rss_kb']:.2f}x"
        )


if __name__ == "__main__":
    main()
