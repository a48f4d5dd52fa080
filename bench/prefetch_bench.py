"""Prefetch benchmark: ``wwwproxy fetch --depth 3 --requisites`` against ``wget -r -l 3 -p
--warc-file`` on a real static site, side by side (not run by CI).

The site is the Python 3.11 documentation from Debian's ``python3.11-doc`` (``apt-get install
-y python3.11-doc``: /usr/share/doc/python3.11/html; ``--root`` for another tree), served by
nginx on 127.0.0.1.  Issue 11's target: wwwproxy at least twice as fast as wget.

example output: see docs/performance.md (figures change with the code).

What one run does, all on 127.0.0.1, in a temporary directory removed afterwards:

* **nginx** (Debian's ``/usr/sbin/nginx``, ``daemon off``, one worker, access log off, the
  system's mime.types, sendfile) serves the tree on a free port.
* Then, interleaved (wget, wwwproxy, wget, wwwproxy, ...), ``--runs`` times each:
  **wget** ``-r -l 3 -p --no-verbose --warc-file=... -P ...`` from the site's index.html into a
  fresh directory (wget compresses its WARC, as wwwproxy does); and **wwwproxy**
  ``python -m wwwproxy fetch -c CONFIG --depth 3 --requisites`` from the same URL into a fresh
  cache (the config names only the cache: defaults otherwise; it runs without a server,
  through the same recording path, and returns once its pages are recorded: their search text
  is made afterwards by the search index of the proxy, or of the next process to start, which
  catches up in the background).  That catch-up is measured apart, after the run and outside
  the crawl's figures: a process opens the cache's search index as the proxy's start does and
  waits until it has caught up ("search catch-up": its wall time, Python's start included;
  about that alone with a ``--source`` whose fetch indexed the pages itself).  Its bytecode is
  kept in the temporary directory and written by one untimed fetch first, as an installed
  package has it (PYTHONDONTWRITEBYTECODE, set on the test machine, would make every start
  compile every module: half a second).  Both honour robots.txt (the site has none: a 404
  each), stay on the host and record the one broken link (a 404) as it is.
* Each figure is the median of the runs: wall time (from start to exit), CPU seconds and peak
  RSS of the process (``os.wait4``'s rusage: the process, its threads, and the helper
  processes it ran and waited for, which read pages' links (and, in older versions, made
  their search text): their CPU is added, the peak RSS is the largest of them; "with
  helpers" is the largest sum of the resident sets of the process and its children, sampled
  every 50 ms), the URLs fetched (response records in its WARC files: the same count for
  both, and the same URLs, which the output checks), the WARC bytes, and for wwwproxy the rest
  of its cache (CDXJ index, search database once caught up).  The last line is the ratio
  wget time / wwwproxy time (target >= 2.0).

The machine's CPUs are shared: nginx, the client and whatever else runs.  The runs are
interleaved so that noise hits both alike; the ratio within one run is the figure to trust.

Everything stops by itself: each child is started with PR_SET_PDEATHSIG (SIGTERM when this
process dies) and is stopped by its PID in ``finally`` (SIGTERM, then SIGKILL); a run that
outlives ``--budget`` is stopped the same way.  ``--source DIR`` runs the wwwproxy of another
checkout (e.g. a ``git worktree`` of an older commit) for before/after figures.

Run:  .venv/bin/python bench/prefetch_bench.py                  (about 2 minutes)
      .venv/bin/python bench/prefetch_bench.py --runs 5 --source /tmp/wwwproxy-before
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from procs import free_port, nginx_preamble, wait_for_port  # bench/procs.py (run from bench/)
from sbs.processes import die_with_parent, spawn, stop, tail
from sbs.servers import NGINX
from warcio.archiveiterator import ArchiveIterator

REPO = Path(__file__).resolve().parent.parent
WGET = "/usr/bin/wget"
ROOTS = (Path("/usr/share/doc/python3.11-doc/html"), Path("/usr/share/doc/python3.11/html"))
MIME_TYPES = Path("/etc/nginx/mime.types")
START_TIMEOUT = 20.0
TARGET = 2.0  # wget's wall time over wwwproxy's
PAGE = os.sysconf("SC_PAGE_SIZE")


class Deadline(Exception):
    """The run's budget is spent (or SIGTERM came)."""


@dataclass
class Run:
    tool: str
    seconds: float
    cpu: float  # user + system seconds of the process
    rss_mib: float  # peak resident set
    status: int
    urls: set[str] = field(default_factory=set)
    responses: int = 0
    warc_bytes: int = 0
    other_bytes: int = 0  # wwwproxy: index, search database, queue ...
    search_bytes: int = 0  # wwwproxy: the search database (search.sqlite3, after its close)
    load: float = 0.0  # the machine's 1-minute load average at the end of the run
    tree_rss_mib: float = 0.0  # the largest sampled sum of the process's and its children's
    catch_up: float = 0.0  # wwwproxy: seconds the search index took to catch up after the run


# --- nginx ------------------------------------------------------------------------------------


def nginx_conf(ngx: Path, port: int, root: Path) -> str:
    types = f"include {MIME_TYPES};" if MIME_TYPES.exists() else "types { text/html html; }"
    return (
        nginx_preamble(ngx, 1024)
        + f"""    {types}
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""
    )


def start_nginx(tmp: Path, root: Path) -> tuple[subprocess.Popen[bytes], int]:
    ngx = tmp / "nginx"
    ngx.mkdir()
    port = free_port()
    conf = ngx / "nginx.conf"
    conf.write_text(nginx_conf(ngx, port, root))
    # -e: the error log before the configuration is read (else /var/log/nginx/error.log)
    argv = [NGINX, "-p", f"{ngx}/", "-e", str(ngx / "error.log"), "-c", str(conf)]
    proc = spawn(argv, ngx / "stderr.log", ngx)
    asyncio.run(wait_for_port(port, proc, "nginx", START_TIMEOUT, lambda: tail(ngx / "error.log")))
    return proc, port


@contextlib.contextmanager
def served_docs(root: Path, prefix: str, keep: bool) -> Iterator[tuple[Path, str]]:
    """A temporary directory (``prefix``) and the URL of the index of ``root`` served by nginx
    from it, with a line about the machine and one about the site printed; SIGTERM raises
    :class:`Deadline`.  At the end nginx is stopped by its PID and the directory removed
    (``keep``: kept, and its path printed)."""

    def on_term(signum: int, frame: object) -> None:
        raise Deadline("stopped by SIGTERM")

    signal.signal(signal.SIGTERM, on_term)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    tmp.chmod(0o755)  # nginx's worker runs as "nobody" when this runs as root
    nginx: subprocess.Popen[bytes] | None = None
    try:
        nginx, port = start_nginx(tmp, root.resolve())
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        print(
            f"{now}, {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        )
        print(f"site {root} served by nginx on 127.0.0.1:{port} (pid {nginx.pid})")
        yield tmp, f"http://127.0.0.1:{port}/index.html"
    finally:
        print(stop(nginx, "nginx"))
        if keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


# --- the two crawlers -------------------------------------------------------------------------


def tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and its children (0 for what is gone meanwhile)."""
    pids = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    total = 0
    for p in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
    return total


def measure(proc: subprocess.Popen[bytes], what: str, deadline: float) -> Run:
    """Wait for ``proc`` (polling ``os.wait4``, which gives its own rusage, and sampling the
    resident set of it and its children); stop it by its PID if the deadline comes first."""
    started = time.monotonic()
    tree_peak = 0
    polls = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            stop(proc, what)
            raise Deadline(f"{what} was still running at the deadline")
        if polls % 5 == 0:
            tree_peak = max(tree_peak, tree_rss(proc.pid))
        polls += 1
        time.sleep(0.01)
    seconds = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen's own bookkeeping
    cpu = usage.ru_utime + usage.ru_stime
    run = Run(what, seconds, cpu, usage.ru_maxrss / 1024, proc.returncode)  # KiB on Linux
    run.tree_rss_mib = max(tree_peak / 2**20, run.rss_mib)
    run.load = os.getloadavg()[0]
    return run


def responses(paths: list[Path]) -> tuple[set[str], int]:
    """The target URIs of the response records in these WARC files, and how many there are."""
    urls: set[str] = set()
    count = 0
    for path in paths:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "response":
                    urls.add(record.rec_headers.get_header("WARC-Target-URI").strip("<>"))
                    count += 1
    return urls, count


def run_wget(work: Path, url: str, depth: int, deadline: float) -> Run:
    work.mkdir()
    argv = [WGET, "-r", "-l", str(depth), "-p", "--no-verbose"]
    argv += [f"--warc-file={work / 'site'}", "-P", str(work / "files"), url]
    proc = spawn(argv, work / "wget.log", work)
    run = measure(proc, "wget", deadline)
    if run.status not in (0, 8):  # 8: the server answered an error (the broken link's 404)
        raise RuntimeError(f"wget exited with status {run.status}:\n{tail(work / 'wget.log')}")
    warcs = sorted(work.glob("*.warc.gz"))
    run.urls, run.responses = responses(warcs)
    run.warc_bytes = sum(p.stat().st_size for p in warcs)
    return run


def python_env(source: Path, tmp: Path) -> dict[str, str]:
    """The environment wwwproxy runs in: that checkout's package first, and its bytecode kept
    (under ``tmp``), as an installed package has it: with PYTHONDONTWRITEBYTECODE set, as on
    the test machine, every start would compile every module again (half a second)."""
    env = dict(os.environ, PYTHONPATH=str(source), PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def start_wwwproxy(work: Path, url: str, source: Path, args: list[str]) -> subprocess.Popen[bytes]:
    """``python -m wwwproxy fetch`` into a fresh cache under ``work`` (spawn() takes no
    environment: the same, with one)."""
    work.mkdir()
    config = work / "wwwproxy.yaml"
    config.write_text(f"cache: {work / 'cache'}\n")
    argv = [sys.executable, "-m", "wwwproxy", "fetch", "-c", str(config), *args, url]
    with (work / "fetch.log").open("ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=work,
            env=python_env(source, work.parent),
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )


def warm_up(tmp: Path, url: str, source: Path, deadline: float) -> None:
    """One untimed ``wwwproxy fetch`` of the first page alone, which writes the bytecode."""
    measure(start_wwwproxy(tmp / "warm-up", url, source, []), "wwwproxy (warm-up)", deadline)
    shutil.rmtree(tmp / "warm-up", ignore_errors=True)


#: what the next start does with the search index: open it, attach it, wait till caught up
CATCH_UP = """
import sys
from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.store import Store
index = SearchIndex(sys.argv[1])
index.attach(Store(sys.argv[1]))
caught_up = index.flush(600)
index.close()
sys.exit(0 if caught_up else 1)
"""


def catch_up(work: Path, source: Path) -> float:
    """Wall seconds a process takes to open the search index of the cache under ``work`` as
    the proxy's start does and let it catch up with the pages recorded unindexed."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", CATCH_UP, str(work / "cache")],
        check=True,
        cwd=work,
        env=python_env(source, work.parent),
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # noqa: PLW1509
    )
    return time.monotonic() - started


def run_wwwproxy(
    work: Path, url: str, depth: int, deadline: float, source: Path, extra: list[str]
) -> Run:
    proc = start_wwwproxy(work, url, source, ["--depth", str(depth), "--requisites", *extra])
    run = measure(proc, "wwwproxy", deadline)
    if run.status not in (0, 1):  # 1: a URL failed (the broken link's 404)
        log = tail(work / "fetch.log")
        raise RuntimeError(f"wwwproxy fetch exited with status {run.status}:\n{log}")
    run.catch_up = catch_up(work, source)
    cache = work / "cache"
    warcs = sorted(cache.rglob("*.warc.gz"))
    run.urls, run.responses = responses(warcs)
    run.warc_bytes = sum(p.stat().st_size for p in warcs)
    every = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    run.other_bytes = every - run.warc_bytes
    search = cache / "search.sqlite3"
    run.search_bytes = search.stat().st_size if search.exists() else 0
    return run


# --- report -----------------------------------------------------------------------------------


def describe(run: Run, i: int, runs: int) -> str:
    rest = f"  + {run.other_bytes / 2**20:.1f} MiB index/search" if run.other_bytes else ""
    if run.search_bytes and run.warc_bytes:
        rest += f" (search {run.search_bytes / run.warc_bytes:.2f}x WARC)"
    if run.tool == "wwwproxy":
        rest += f"; search catch-up {run.catch_up:.2f} s"
    return (
        f"  run {i}/{runs} {run.tool:<9} {run.seconds:7.2f} s  cpu {run.cpu:6.2f} s  "
        f"peak RSS {run.rss_mib:5.0f} MiB (with helpers {run.tree_rss_mib:4.0f})  "
        f"{run.responses} URLs  "
        f"WARC {run.warc_bytes / 2**20:.1f} MiB{rest}  load {run.load:.1f}"
    )


def median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def summary(wget: list[Run], ours: list[Run]) -> list[str]:
    lines = [
        "",
        "  crawler     wall s   cpu s  peak RSS  with helpers   URLs  WARC MiB  other MiB",
        "  " + "-" * 78,
    ]
    for name, runs in (("wget", wget), ("wwwproxy", ours)):
        lines.append(
            f"  {name:<9} {median(runs, 'seconds'):8.2f} {median(runs, 'cpu'):7.2f} "
            f"{median(runs, 'rss_mib'):6.0f} MiB {median(runs, 'tree_rss_mib'):9.0f} MiB "
            f"{median(runs, 'responses'):6.0f} "
            f"{median(runs, 'warc_bytes') / 2**20:9.1f} {median(runs, 'other_bytes') / 2**20:10.1f}"
        )
    a, b = wget[-1].urls, ours[-1].urls
    if a == b:
        lines.append(f"  the same {len(a)} URLs crawled by both")
    else:
        lines.append(f"  URLs differ: {len(a - b)} only wget's, {len(b - a)} only wwwproxy's")
        lines += [f"    wget only: {u}" for u in sorted(a - b)[:10]]
        lines += [f"    wwwproxy only: {u}" for u in sorted(b - a)[:10]]
    ratio = median(wget, "seconds") / median(ours, "seconds")
    met = "yes" if ratio >= TARGET else "NO"
    lines.append(
        f"  wget time / wwwproxy time: {ratio:.2f}x (target >= {TARGET:.1f}: {met}); "
        f"CPU: {median(wget, 'cpu') / median(ours, 'cpu'):.2f}x"
    )
    lines.append(
        f"  then the search index's catch-up (as the next start's, apart): "
        f"{median(ours, 'catch_up'):.2f} s"
    )
    per_url = 1000 * median(ours, "cpu") / max(1.0, median(ours, "responses"))
    loads = [r.load for r in (*wget, *ours)]
    lines.append(
        f"  wwwproxy CPU per URL {per_url:.1f} ms; search database "
        f"{median(ours, 'search_bytes') / max(1.0, median(ours, 'warc_bytes')):.2f}x the WARC "
        f"bytes; load average {min(loads):.1f}-{max(loads):.1f} (other work on the machine: "
        "compare the ratios and CPU seconds, not the wall seconds of different runs)"
    )
    return lines


def source_label(source: Path) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(source), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    head = git("rev-parse", "--show-toplevel") == str(source.resolve()) and git(
        "rev-parse", "--short", "HEAD"
    )
    if not head:
        return f"{source} (not a git checkout)"
    dirty = " + uncommitted changes" if git("status", "--porcelain", "--", "wwwproxy") else ""
    return f"{source} at {head}{dirty}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per crawler")
    parser.add_argument("--depth", type=int, default=3, help="link levels (wget -l, --depth)")
    parser.add_argument("--root", type=Path, help="the site's directory (default: python3.11-doc)")
    parser.add_argument("--source", type=Path, default=REPO, help="the wwwproxy checkout to run")
    parser.add_argument(
        "--wwwproxy-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument for wwwproxy fetch (e.g. --wwwproxy-arg=--concurrency=8)",
    )
    parser.add_argument("--budget", type=float, default=900.0, help="deadline, seconds")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    root = args.root or next((r for r in ROOTS if (r / "index.html").exists()), None)
    if root is None or not (root / "index.html").exists():
        print("no site: apt-get install -y python3.11-doc (or give --root DIR)", file=sys.stderr)
        return 2
    for tool in (NGINX, WGET):
        if not Path(tool).exists():
            print(f"missing {tool}: apt-get install -y nginx wget", file=sys.stderr)
            return 2
    deadline = time.monotonic() + args.budget
    try:
        with served_docs(root, "wwwproxy-prefetch-", args.keep) as (tmp, url):
            print(
                f"wwwproxy: {source_label(args.source)}; runs {args.runs} each, depth {args.depth}"
            )
            warm_up(tmp, url, args.source, deadline)
            wget_runs: list[Run] = []
            our_runs: list[Run] = []
            for i in range(1, args.runs + 1):
                run = run_wget(tmp / f"wget-{i}", url, args.depth, deadline)
                wget_runs.append(run)
                print(describe(run, i, args.runs), flush=True)
                work = tmp / f"wwwproxy-{i}"
                run = run_wwwproxy(work, url, args.depth, deadline, args.source, args.wwwproxy_arg)
                our_runs.append(run)
                print(describe(run, i, args.runs), flush=True)
                for old in (tmp / f"wget-{i}", tmp / f"wwwproxy-{i}"):  # keep the disk small
                    if not args.keep:
                        shutil.rmtree(old, ignore_errors=True)
            print("\n".join(summary(wget_runs, our_runs)))
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            print(f"  (all children together: peak RSS {children.ru_maxrss / 1024:.0f} MiB)")
            return 0
    except Deadline as exc:
        print(f"stopped: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
