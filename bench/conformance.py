"""HTTP caching conformance beside Squid: the public cache-tests suite (cache-tests.fyi's) run
through wwwproxy as shipped (a private cache), wwwproxy as shipped plus ``shared_cache: true``
(a proxy for a household or an office), and Debian's Squid 5.7, in one run (not run by CI).

The suite and its runner are not part of this repository: give their folder with
``--suite DIR`` (default ``../shared/cache-tests`` beside the checkout, where the project's
developers have it).  It needs node and npm; the runner installs squid with apt if missing.

    python bench/conformance.py [--suite DIR]

prints, for each configuration, the required (conformance) and optimal tests passed, and the
required tests each wwwproxy run fails, with the suite's reason.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"cache-tests: (.*)$")
COUNTS = re.compile(r"(\S+) (\d+)/(\d+) passed \(optional (\d+)/(\d+)\)")
RUNS = (
    ("wwwproxy, shipped (private)", "wwwproxy-default", ""),
    ("wwwproxy, shipped + shared_cache: true", "wwwproxy-default", "shared_cache: true\n"),
    ("squid 5.7, memory cache", "squid", ""),
)


def run(suite: Path, runs: str, extra: str) -> tuple[str, list[str]]:
    """One run of the suite's runner: its summary line and the failures it lists."""
    env = dict(os.environ, CT_RUNS=runs, CT_EXTRA=extra.replace("\n", "\\n"))
    done = subprocess.run(
        ["bash", str(suite / "run.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    lines = done.stdout.splitlines()
    summary = next((m.group(1) for line in lines if (m := SUMMARY.search(line))), "")
    failures = [line.strip() for line in lines if line.startswith("  ") and "[" in line]
    if not summary:
        sys.exit(f"conformance: the runner said nothing usable:\n{done.stdout[-2000:]}")
    return summary, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=ROOT.parent / "shared" / "cache-tests")
    args = parser.parse_args()
    if not (args.suite / "run.sh").exists():
        sys.exit(f"conformance: no runner at {args.suite / 'run.sh'} (give --suite DIR)")
    rows = []
    for label, runs, extra in RUNS:
        summary, failures = run(args.suite, runs, extra)
        m = COUNTS.search(summary)
        assert m is not None, summary
        rows.append((label, int(m[2]), int(m[3]), int(m[4]), int(m[5])))
        print(f"{label}: {m[2]}/{m[3]} required, {m[4]}/{m[5]} optimal", flush=True)
        if runs != "squid":
            for failure in failures:
                print(f"    {failure}")
    squid = rows[-1][1]
    print("\n| configuration | required passed | optimal passed | required vs Squid |")
    print("|---|---|---|---|")
    for label, req, req_total, opt, opt_total in rows:
        print(f"| {label} | {req}/{req_total} | {opt}/{opt_total} | {req - squid:+d} |")


if __name__ == "__main__":
    main()
