"""Render-crawl benchmark: ``wwwproxy fetch --render`` against the plain crawl of the same
pages (not run by CI).

The site is the Python 3.11 documentation from Debian's ``python3.11-doc``, served by nginx on
127.0.0.1, as in ``prefetch_bench.py`` (whose nginx and environment this reuses).  Rendering
needs Debian's Chromium (``apt-get install -y chromium``) and Playwright for Python (the
``render`` extra); no browser is downloaded.

example output: see docs/performance.md (figures change with the code).

What one run does, all on 127.0.0.1, in a temporary directory removed afterwards:

* **nginx** serves the tree on a free port.
* One untimed ``fetch --render --depth 0`` of the first page writes the bytecode and brings
  Chromium's files into the page cache.
* Then, interleaved, ``--runs`` times each, every crawl of ``--crawls`` into a fresh cache:
  **plain** ``python -m wwwproxy fetch -c CONFIG --depth D --requisites URL``; **render**
  ``... --render --depth D URL`` (the browser loads what the pages need); and, if asked,
  **render+req** ``... --render --requisites --depth D URL``.  The configuration keeps the
  browser and the crawl on loopback: ``render_browser_args`` maps every host name but
  127.0.0.1 to nothing, ``upstream_proxy`` is a closed port that ``no_proxy`` leaves
  127.0.0.1 out of.
* Per run: pages (HTML 200 responses in its WARCs; for a render crawl also how many were
  rendered, stopped at the time cap, or not rendered), URLs recorded (response records, via
  warcio), wall time, pages per second, and from /proc, sampled every 100 ms: CPU seconds of
  the wwwproxy process, of the browser (its processes: the descendants whose name starts
  with ``chrom``) and of all its descendants (helpers and Playwright's driver too; the
  rusage of ``wait4`` would miss most of the browser's, whose tab processes are not reaped
  under it); peak RSS of the wwwproxy process (its VmHWM), of the browser (the largest
  sampled sum of the resident sets of its processes; shared pages count once a process, so
  the sum overstates what they take together) and of the whole tree; and the render time of
  a page: p50 and p99 of how long a page held its tab.  That time is read from the fetch's
  own lines, stamped as they arrive: a page asks for a tab right after its ``fetched`` line,
  tabs are handed out first come first served, and its ``render  URL: ...`` line is written
  as it gives the tab back; the start of each page's render is replayed from those lines and
  the number of tabs (``--render-tabs``, default one a core, 2 to 4).
* Then the medians, the ratios render / plain for wall time and pages per second, and which
  canonical URLs the render crawl recorded that the plain one did not (and the reverse).

The machine's CPUs are shared with whatever else runs: compare the ratios of one run and the
CPU seconds, not the wall seconds of different runs.

Everything stops by itself: each child is started with PR_SET_PDEATHSIG and stopped by its
PID (SIGTERM, then SIGKILL) in ``finally``; a crawl that outlives ``--budget`` is stopped the
same way.  Stopping wwwproxy closes its browser; a browser process still there after it is
stopped by its PID too.

Run:  .venv/bin/python bench/render_bench.py                       (about 5 minutes)
      .venv/bin/python bench/render_bench.py --crawls plain,render,render+req --depth 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from prefetch_bench import ROOTS, Deadline, python_env, served_docs, source_label
from sbs.processes import die_with_parent, stop, tail
from sbs.servers import NGINX
from warcio.archiveiterator import ArchiveIterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from wwwproxy.url.canonical import InvalidURL, canonicalize  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_EVERY = 0.1  # seconds between samples of the process tree
RESCAN_EVERY = 5  # samples between scans of /proc for new descendants
LEFTOVER_GRACE = 3.0  # seconds a browser process may take to go once its crawl ended
#: the crawls, by name: the fetch's arguments besides the depth
CRAWLS = {
    "plain": ["--requisites"],
    "render": ["--render"],
    "render+req": ["--render", "--requisites"],
}
HERMETIC = {
    "upstream_proxy": "http://127.0.0.1:9",
    "no_proxy": ["127.0.0.1"],
    "render_browser_args": ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
}
FETCHED_LINE = re.compile(r"(?:fetched \d+ \S+ \S+ |fresh   (?:\d+ )?)(\S+)$")
RENDER_LINE = re.compile(r"render  (\S+): (.*)$")
#: lines of a fetch that say nothing unusual (the rest are shown)
USUAL_LINE = re.compile(r"(fetched|fresh  ) |render  \S+: \d+ requests? \([^)]*\)$")


# --- the process tree -------------------------------------------------------------------------


@dataclass
class ProcStat:
    ppid: int
    name: str
    cpu: float  # user + system seconds of the process itself
    rss: int  # bytes
    start: int  # clock ticks after boot: with the PID, the process


def proc_stat(pid: int) -> ProcStat | None:
    """One read of /proc/PID/stat; None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    return ProcStat(
        int(fields[1]),
        head.partition("(")[2],
        (int(fields[11]) + int(fields[12])) / TICK,
        int(fields[21]) * PAGE,
        int(fields[19]),
    )


def vm_hwm(pid: int) -> int:
    """The peak resident set of one process (VmHWM), bytes; 0 if it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def is_browser(name: str) -> bool:
    return name.startswith("chrom")


@dataclass
class TreeSampler:
    """Peaks of a process and its descendants, from /proc: the descendants are found by a scan
    of every process's parent every few samples; between scans only the known ones are read."""

    root: int
    known: set[int] = field(default_factory=set)
    samples: int = 0
    proxy_hwm: int = 0
    proxy_cpu: float = 0.0
    other_cpu: dict[tuple[int, int], float] = field(default_factory=dict)
    browser_peak: int = 0
    tree_peak: int = 0
    browser_cpu: dict[int, float] = field(default_factory=dict)  # the last seen, per process
    browser_pids: set[tuple[int, int]] = field(default_factory=set)

    def _scan(self) -> dict[int, ProcStat]:
        stats: dict[int, ProcStat] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                stat = proc_stat(int(entry))
                if stat is not None:
                    stats[int(entry)] = stat
        children: dict[int, list[int]] = {}
        for pid, stat in stats.items():
            children.setdefault(stat.ppid, []).append(pid)
        tree, todo = set(), [self.root]
        while todo:
            pid = todo.pop()
            tree.add(pid)
            todo += children.get(pid, [])
        self.known = tree
        return {pid: stats[pid] for pid in tree if pid in stats}

    def sample(self) -> None:
        if self.samples % RESCAN_EVERY == 0:
            stats = self._scan()
        else:
            stats = {pid: s for pid in self.known if (s := proc_stat(pid)) is not None}
        self.samples += 1
        self.proxy_hwm = max(self.proxy_hwm, vm_hwm(self.root))
        if self.root in stats:
            self.proxy_cpu = stats[self.root].cpu
        browser = 0
        for pid, stat in stats.items():
            if pid != self.root and is_browser(stat.name):
                browser += stat.rss
                self.browser_cpu[pid] = stat.cpu
                self.browser_pids.add((pid, stat.start))
            elif pid != self.root:
                self.other_cpu[pid, stat.start] = stat.cpu
        self.browser_peak = max(self.browser_peak, browser)
        self.tree_peak = max(self.tree_peak, sum(s.rss for s in stats.values()))


def stop_leftovers(seen: set[tuple[int, int]]) -> list[str]:
    """Browser processes of a crawl (PID, start time) still there a few seconds after it ended
    (its crash handlers take a moment to go): SIGTERM, then SIGKILL, by PID; what was found."""

    def alive(candidates: set[tuple[int, int]]) -> set[tuple[int, int]]:
        return {(p, t) for p, t in candidates if (s := proc_stat(p)) is not None and s.start == t}

    left = alive(seen)
    waited = time.monotonic() + LEFTOVER_GRACE
    while left and time.monotonic() < waited:
        time.sleep(0.1)
        left = alive(left)
    found = [f"browser process {p} outlived its crawl: stopped by its PID" for p, _ in left]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in left:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        if left:
            time.sleep(1.0)
        left = alive(left)
    return found + [f"browser process {p} still there after SIGKILL" for p, _ in left]


# --- the fetch's lines ------------------------------------------------------------------------


class LineLog(threading.Thread):
    """The fetch's output, line by line, each stamped (``time.monotonic``) as it arrives, and
    kept in ``log`` with its time since the start."""

    def __init__(self, stream: IO[bytes], log: Path) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.log = log
        self.start_time = time.monotonic()
        self.lines: list[tuple[float, str]] = []

    def run(self) -> None:
        with self.log.open("w", encoding="utf-8") as out:
            for raw in self.stream:
                stamp = time.monotonic()
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self.lines.append((stamp, line))
                out.write(f"{stamp - self.start_time:9.3f} {line}\n")


def render_times(lines: list[tuple[float, str]], tabs: int) -> list[float]:
    """How long each rendered page held its tab: a page asks for one as its ``fetched`` line is
    written, waits first come first served for one of ``tabs``, and gives it back as its
    ``render`` line is written (the lines in the order the fetch wrote them)."""
    rendered = {m[1] for _, line in lines if (m := RENDER_LINE.match(line))}
    free = tabs
    waiting: list[str] = []
    started: dict[str, float] = {}
    held: list[float] = []
    asked: set[str] = set()
    for stamp, line in lines:
        if (asks := FETCHED_LINE.match(line)) and asks[1] in rendered and asks[1] not in asked:
            asked.add(asks[1])
            if free and not waiting:
                free -= 1
                started[asks[1]] = stamp
            else:
                waiting.append(asks[1])
        elif (gives := RENDER_LINE.match(line)) and gives[1] in started:
            held.append(stamp - started.pop(gives[1]))
            if waiting:
                started[waiting.pop(0)] = stamp
            else:
                free += 1
    return held


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` of 1) of ``values``; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


# --- one crawl --------------------------------------------------------------------------------


@dataclass
class Run:
    crawl: str
    seconds: float = 0.0
    cpu: float = 0.0  # user + system seconds of the process and its descendants, sampled
    proxy_cpu: float = 0.0  # of the wwwproxy process alone
    browser_cpu: float = 0.0  # of the browser's processes
    proxy_mib: float = 0.0
    browser_mib: float = 0.0
    tree_mib: float = 0.0
    status: int = 0
    pages: int = 0  # HTML 200 responses recorded
    responses: int = 0
    urls: set[str] = field(default_factory=set)
    rendered: int = 0
    capped: int = 0
    not_rendered: int = 0
    held: list[float] = field(default_factory=list)
    unusual: list[str] = field(default_factory=list)
    load: float = 0.0

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def p50(self) -> float:
        return percentile(self.held, 0.50)

    @property
    def p99(self) -> float:
        return percentile(self.held, 0.99)


def canonical(url: str) -> str:
    with contextlib.suppress(InvalidURL):
        return canonicalize(url).canonical
    return url


def recorded(paths: list[Path]) -> tuple[set[str], int, int]:
    """The canonical URLs of the response records in these WARC files, how many records there
    are, and how many distinct URLs were recorded as an HTML page with status 200."""
    urls: set[str] = set()
    pages: set[str] = set()
    count = 0
    for path in paths:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type != "response":
                    continue
                url = canonical(record.rec_headers.get_header("WARC-Target-URI").strip("<>"))
                urls.add(url)
                count += 1
                http = record.http_headers
                if (
                    http is not None
                    and http.get_statuscode() == "200"
                    and "html" in (http.get_header("Content-Type") or "")
                ):
                    pages.add(url)
    return urls, count, len(pages)


def write_config(work: Path, extra: dict[str, object]) -> Path:
    config = work / "wwwproxy.yaml"
    lines = [f"cache: {json.dumps(str(work / 'cache'))}"]
    lines += [f"{key}: {json.dumps(value)}" for key, value in {**HERMETIC, **extra}.items()]
    config.write_text("\n".join(lines) + "\n")
    return config


def crawl(
    work: Path,
    name: str,
    url: str,
    args: list[str],
    source: Path,
    deadline: float,
    tabs: int,
) -> Run:
    """One ``wwwproxy fetch`` into a fresh cache under ``work``, measured."""
    work.mkdir()
    config = write_config(work, {"render_tabs": tabs})
    argv = [sys.executable, "-m", "wwwproxy", "fetch", "-c", str(config), *args, url]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=work,
        env=python_env(source, work.parent),
        preexec_fn=die_with_parent,  # noqa: PLW1509
    )
    assert proc.stdout is not None
    lines = LineLog(proc.stdout, work / "fetch.log")
    lines.start()
    sampler = TreeSampler(proc.pid)
    started = time.monotonic()
    next_sample = started
    try:
        while True:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)  # Popen's own bookkeeping
                break
            now = time.monotonic()
            if now > deadline:
                raise Deadline(f"the {name} crawl was still running at the deadline")
            if now >= next_sample:
                sampler.sample()
                next_sample = now + SAMPLE_EVERY
            time.sleep(0.01)
    finally:
        if proc.returncode is None:
            print(stop(proc, f"wwwproxy fetch ({name})"), file=sys.stderr)
        lines.join(timeout=5)
        proc.stdout.close()
        for problem in stop_leftovers(sampler.browser_pids):
            print(problem, file=sys.stderr)
    run = Run(name, seconds=time.monotonic() - started)
    run.status = proc.returncode
    if run.status not in (0, 1):  # 1: a URL failed (reported among the unusual lines)
        raise RuntimeError(f"{name}: fetch exited with status {run.status}:\n{tail(lines.log)}")
    run.proxy_cpu = sampler.proxy_cpu
    run.browser_cpu = sum(sampler.browser_cpu.values())
    run.cpu = run.proxy_cpu + run.browser_cpu + sum(sampler.other_cpu.values())
    run.proxy_mib = max(sampler.proxy_hwm, 0) / 2**20
    run.browser_mib = sampler.browser_peak / 2**20
    run.tree_mib = sampler.tree_peak / 2**20
    run.load = os.getloadavg()[0]
    run.urls, run.responses, run.pages = recorded(sorted((work / "cache").rglob("*.warc.gz")))
    for _, line in lines.lines:
        match = RENDER_LINE.match(line)
        if match:
            if match[2].startswith("not rendered"):
                run.not_rendered += 1
            else:
                run.rendered += 1
                run.capped += "stopped at the time cap" in match[2]
        if not USUAL_LINE.match(line) and line.strip():
            run.unusual.append(line)
    run.held = render_times(lines.lines, tabs)
    return run


# --- report -----------------------------------------------------------------------------------


def describe(run: Run, i: int, runs: int) -> str:
    text = (
        f"  run {i}/{runs} {run.crawl:<10} {run.seconds:6.1f} s  {run.pages:3d} pages "
        f"{run.responses:4d} URLs {run.pages_per_second:5.2f} pages/s  cpu {run.cpu:5.1f} s "
        f"(proxy {run.proxy_cpu:4.1f}, browser {run.browser_cpu:4.1f})  peak RSS proxy "
        f"{run.proxy_mib:4.0f} MiB, browser {run.browser_mib:4.0f} MiB, "
        f"all {run.tree_mib:4.0f} MiB  load {run.load:.1f}"
    )
    if run.rendered or run.not_rendered:
        text += (
            f"\n      rendered {run.rendered} ({run.capped} at the time cap), "
            f"not rendered {run.not_rendered}; a page held its tab p50 {run.p50:.2f} s, "
            f"p99 {run.p99:.2f} s"
        )
    return text


def median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def summary(by_crawl: dict[str, list[Run]]) -> list[str]:
    lines = [
        "",
        "  crawl       wall s  pages  URLs  pages/s  cpu s  proxy cpu s  browser cpu s  "
        "proxy MiB  browser MiB  all MiB  tab p50 s  tab p99 s",
        "  " + "-" * 125,
    ]
    for name, runs in by_crawl.items():
        held = (
            f"{median(runs, 'p50'):10.2f} {median(runs, 'p99'):10.2f}"
            if any(r.held for r in runs)
            else f"{'-':>10} {'-':>10}"
        )
        lines.append(
            f"  {name:<10} {median(runs, 'seconds'):7.1f} {median(runs, 'pages'):6.0f} "
            f"{median(runs, 'responses'):5.0f} {median(runs, 'pages_per_second'):8.2f} "
            f"{median(runs, 'cpu'):6.1f} {median(runs, 'proxy_cpu'):12.1f} "
            f"{median(runs, 'browser_cpu'):14.1f} "
            f"{median(runs, 'proxy_mib'):10.0f} {median(runs, 'browser_mib'):12.0f} "
            f"{median(runs, 'tree_mib'):8.0f} {held}"
        )
    plain = by_crawl.get("plain")
    for name, runs in by_crawl.items():
        if name == "plain" or not plain:
            continue
        time_ratio = median(runs, "seconds") / median(plain, "seconds")
        rate_ratio = median(runs, "pages_per_second") / median(plain, "pages_per_second")
        cpu_ratio = median(runs, "cpu") / median(plain, "cpu")
        lines.append(
            f"  {name} / plain: wall time {time_ratio:.1f}x, pages/s {rate_ratio:.2f}x, "
            f"CPU {cpu_ratio:.1f}x"
        )
        a, b = runs[-1].urls, plain[-1].urls
        lines.append(
            f"  URLs recorded by {name} but not plain: {len(a - b)}; by plain but not "
            f"{name}: {len(b - a)} (last runs, canonical URLs)"
        )
        lines += [f"    {name} only: {u}" for u in sorted(a - b)[:8]]
        lines += [f"    plain only: {u}" for u in sorted(b - a)[:8]]
    for name, runs in by_crawl.items():
        if any(r.urls != runs[0].urls for r in runs):
            counts = ", ".join(str(len(r.urls)) for r in runs)
            lines.append(f"  {name}: its runs recorded different URL sets ({counts} URLs)")
    loads = [r.load for runs in by_crawl.values() for r in runs]
    lines.append(
        f"  load average {min(loads):.1f}-{max(loads):.1f} at the ends of the runs (other work "
        "on the machine: compare ratios and CPU seconds, not wall seconds of different runs)"
    )
    return lines


def unusual_lines(by_crawl: dict[str, list[Run]]) -> list[str]:
    """The fetches' lines that are not a page fetched or rendered as it should be."""
    lines: list[str] = []
    for name, runs in by_crawl.items():
        for i, run in enumerate(runs, 1):
            if run.unusual:
                lines.append(f"  {name} run {i}: {len(run.unusual)} other lines of the fetch:")
                lines += [f"    {line}" for line in run.unusual[:25]]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per crawl")
    parser.add_argument("--depth", type=int, default=1, help="link levels (--depth)")
    parser.add_argument(
        "--crawls",
        default="plain,render",
        help=f"the crawls to run, by name, comma-separated ({', '.join(CRAWLS)})",
    )
    parser.add_argument("--render-tabs", type=int, default=0, help="0: one a core, 2 to 4")
    parser.add_argument("--root", type=Path, help="the site's directory (default: python3.11-doc)")
    parser.add_argument("--source", type=Path, default=REPO, help="the wwwproxy checkout to run")
    parser.add_argument("--budget", type=float, default=900.0, help="deadline, seconds")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    names = [n.strip() for n in args.crawls.split(",") if n.strip()]
    unknown = [n for n in names if n not in CRAWLS]
    if unknown or not names:
        parser.error(f"unknown crawls {unknown}: choose from {', '.join(CRAWLS)}")
    root = args.root or next((r for r in ROOTS if (r / "index.html").exists()), None)
    if root is None or not (root / "index.html").exists():
        print("no site: apt-get install -y python3.11-doc (or give --root DIR)", file=sys.stderr)
        return 2
    if not Path(NGINX).exists():
        print(f"missing {NGINX}: apt-get install -y nginx", file=sys.stderr)
        return 2
    tabs = args.render_tabs or max(2, min(4, os.cpu_count() or 2))
    deadline = time.monotonic() + args.budget
    by_crawl: dict[str, list[Run]] = {name: [] for name in names}
    try:
        with served_docs(root, "wwwproxy-render-", args.keep) as (tmp, url):
            print(
                f"wwwproxy: {source_label(args.source)}; runs {args.runs} each, "
                f"depth {args.depth}, {tabs} tabs; load average {os.getloadavg()[0]:.1f} "
                "at the start"
            )
            warm_up = ["--render", "--depth", "0"]
            crawl(tmp / "warm-up", "warm-up", url, warm_up, args.source, deadline, tabs)
            shutil.rmtree(tmp / "warm-up", ignore_errors=True)
            for i in range(1, args.runs + 1):
                for name in names:
                    work = tmp / f"{name}-{i}"
                    fetch_args = [*CRAWLS[name], "--depth", str(args.depth)]
                    run = crawl(work, name, url, fetch_args, args.source, deadline, tabs)
                    by_crawl[name].append(run)
                    print(describe(run, i, args.runs), flush=True)
                    if not args.keep:
                        shutil.rmtree(work, ignore_errors=True)
            print("\n".join(summary(by_crawl) + unusual_lines(by_crawl)))
            used = os.times()
            print(f"  (this process, sampling included: {used.user + used.system:.1f} CPU s)")
            return 0
    except Deadline as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        for line in unusual_lines(by_crawl):
            print(line, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
