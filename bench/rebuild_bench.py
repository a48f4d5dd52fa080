"""Benchmark of ``index rebuild``'s scan over worker processes: the same cache rebuilt with 1
worker (the scan in one process) and with more, each run in a fresh process.

The cache is index_pages_bench.py's (real WARC files written by the project's writer, a tenth
of the pages with a second capture), built once and reused.  Printed per run: wall time, CPU
time of the process and its workers (and of the process alone), files per second and the
index lines; the index file of every run must be the same bytes.

Run:  PYTHONPATH=$PWD .venv/bin/python bench/rebuild_bench.py --pages 5000 --workers 1 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rebuild(cache: Path, workers: int) -> None:
    """One rebuild in this process; its figures printed as JSON."""
    from wwwproxy.archive.index_lines import ScanTally
    from wwwproxy.archive.store import Store

    store = Store(cache)
    tally = ScanTally()
    wall, cpu = time.monotonic(), time.process_time()
    count, problems = store.rebuild_index(workers=workers, tally=tally)
    wall = time.monotonic() - wall
    cpu = time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    digest = hashlib.sha256(store.index.index_path.read_bytes()).hexdigest()
    figures = {"workers": tally.workers, "files": tally.files, "lines": count, "wall": wall}
    figures |= {"cpu": cpu + children.ru_utime + children.ru_stime, "own_cpu": cpu}
    figures["sha256"] = digest
    print(json.dumps(figures | {"problems": len(problems)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=2, help="runs of each, interleaved")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.gettempdir()) / f"wwwproxy-rebuild-{args.pages}"
    if args.run is not None:
        rebuild(cache, args.run)
        return
    if not (cache / ".bench-complete").exists():
        from index_pages_bench import build  # bench/index_pages_bench.py

        print(f"building {args.pages} pages in {cache} ...")
        build(cache, args.pages, hosts=max(1, args.pages // 100), big=args.pages // 5)
    digests = set()
    for _ in range(args.runs):
        for workers in args.workers:
            command = [sys.executable, __file__, "--cache", str(cache), "--run", str(workers)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            r = json.loads(out)
            digests.add(r["sha256"])
            print(
                f"{r['workers']} worker(s): {r['files']} files, {r['lines']} lines in "
                f"{r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU ({r['own_cpu']:.2f} s in the "
                f"calling process): {r['files'] / r['wall']:.0f} files/s ({r['problems']} problems)"
            )
    print("index files identical" if len(digests) == 1 else f"INDEX FILES DIFFER: {digests}")


if __name__ == "__main__":
    main()
