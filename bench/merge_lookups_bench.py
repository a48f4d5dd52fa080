"""The slowest exact lookup while the index makes its largest merge: a thread looks keys up in
a loop while the main thread runs ``Index.compact(full=True)`` (every run and the journal into a
new ``index.cdxj``) on an index made by ``scale_bench.py`` (not run in CI).

Prints the merge's wall and CPU time, and the lookups' p50/p99/slowest during it and in the
second after it.

Run:  PYTHONPATH=$PWD .venv/bin/python bench/merge_lookups_bench.py --dir /tmp/scale-1m
      (a cache made by ``bench/scale_bench.py --captures 1M --lines --dir /tmp/scale-1m --keep``;
      the merge rewrites its index in place)
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from pathlib import Path

from wwwproxy.archive.cdxj import CDXJRecord, Index, make_ref
from wwwproxy.url import canonicalize, surt

KEYS_NAME = "lookup-keys.json"  # (as scale_bench.py writes it)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="a scale_bench.py cache")
    parser.add_argument("--keys", type=int, default=5000)
    args = parser.parse_args()
    index = Index(args.dir / "index", create=False)
    urls = json.loads((args.dir / KEYS_NAME).read_text())
    rng = random.Random(1)
    keys = [surt(canonicalize(rng.choice(urls)).file) for _ in range(args.keys)]
    index.exact(keys[0])
    times: list[float] = []
    stop = threading.Event()

    def look() -> None:
        n = 0
        while not stop.is_set():
            start = time.perf_counter()
            index.exact(keys[n % len(keys)])
            times.append(time.perf_counter() - start)
            n += 1

    thread = threading.Thread(target=look)
    thread.start()
    time.sleep(0.5)
    index.add([CDXJRecord.build("(zz,bench,)/", "2026", "response", uri="u", ref=make_ref("f", 0))])
    start, cpu = time.perf_counter(), time.process_time()
    index.compact(full=True)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    during = len(times)
    time.sleep(1)
    stop.set()
    thread.join()
    print(f"full merge: {wall:.1f} s ({cpu:.1f} s CPU, both threads)")
    for name, part in (("during", sorted(times[:during])), ("after", sorted(times[during:]))):
        if part:
            p50, p99 = part[len(part) // 2], part[int(len(part) * 0.99)]
            print(
                f"lookups {name}: {len(part)}, p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms,"
                f" slowest {part[-1] * 1000:.1f} ms"
            )


if __name__ == "__main__":
    main()
