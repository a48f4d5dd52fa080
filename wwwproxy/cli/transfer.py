"""``wwwproxy export`` (a WACZ, or a pywb collection), ``wwwproxy import`` (WARC, WACZ and
pywb collections into the cache) and ``wwwproxy import-wwwoffle`` (a WWWOFFLE spool into the
cache): argument parsing and the report each prints.

The work is in :mod:`wwwproxy.archive.transfer`; the WWWOFFLE import goes through the services
``serve`` builds, so the pages it records are in the search index too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from ..archive.cdxj import CDXJError
from ..archive.store import Store, StoreError
from ..archive.transfer import ExportError, Selection, export_pywb, export_wacz, parse_since
from ..archive.transfer.warcs import ImportError_, WarcImport, import_warcs
from ..archive.transfer.wwwoffle import ImportReport, SpoolError, import_spool
from ..config import ConfigError
from .fetch import SubParsers, _config, add_config_options
from .loop import run as run_loop

__all__ = ["add_export_parser", "add_import_parser", "add_import_warcs_parser"]


def _err(command: str, message: object) -> int:
    print(f"wwwproxy {command}: {message}", file=sys.stderr)
    return 2


def _since(text: str) -> object:
    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _size(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def cmd_export(args: argparse.Namespace) -> int:
    """Write the cache (or the chosen hosts, since a time) as a WACZ or a pywb collection."""
    try:
        root = _config(args).cache
    except ConfigError as exc:
        return _err("export", exc)
    if not root.is_dir():
        return _err("export", f"{root}: no such cache directory")
    selection = Selection(tuple(args.host or ()), args.since)
    try:
        store = Store(root)
        if args.wacz:
            done = export_wacz(store, Path(args.wacz), selection, title=args.title or "")
            copied, where = done.copied, done.path
        else:
            pywb = export_pywb(store, Path(args.pywb), selection)
            copied, where = pywb.copied, pywb.directory
    except ExportError as exc:
        return _err("export", exc)
    except (OSError, StoreError, CDXJError) as exc:
        return _err("export", f"{exc}; nothing was written")
    for problem in copied.problems:
        print(f"warning: {problem}", file=sys.stderr)
    print(
        f"{where}: {_size(len(copied.lines), 'capture')} ({_size(copied.records, 'record')}) "
        f"in {_size(len(copied.warcs), 'WARC file')}, {_size(len(copied.pages), 'page')}"
    )
    if not copied.lines:
        print("nothing matched: the export is empty", file=sys.stderr)
    return 0


def add_export_parser(sub: SubParsers) -> argparse.ArgumentParser:
    """``wwwproxy export``."""
    p = sub.add_parser(
        "export",
        help="write the cache as a WACZ (ReplayWeb.page) or a pywb collection",
        description="Copy the cache's captures (every one, or those of --host, recorded at or "
        "after --since) into a WACZ file that ReplayWeb.page opens, or into a pywb collection "
        "folder (archive/ and indexes/index.cdxj) that pywb's wayback serves without "
        "re-indexing. The records are copied byte for byte. FILE or DIR must not exist yet "
        "(an empty DIR is fine); an export that fails leaves nothing behind.",
    )
    add_config_options(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--wacz", metavar="FILE", help="write a WACZ file")
    what.add_argument("--pywb", metavar="DIR", help="write a pywb collection folder")
    p.add_argument(
        "--host",
        action="append",
        metavar="H",
        help="only this host (host or host:port; without a port, every port); repeatable",
    )
    p.add_argument(
        "--since",
        type=_since,
        metavar="T",
        help="only captures recorded at or after T (2026-11-24, 2026-11-24T02:15, "
        "20261124021500; UTC unless it says)",
    )
    p.add_argument("--title", metavar="TEXT", help="the WACZ's title (default 'wwwproxy export')")
    p.set_defaults(func=cmd_export)
    return p


def _print_report(report: ImportReport, spool: Path) -> None:
    for page in report.pages:
        print(f"imported\t{page.status}\t{page.date:%Y-%m-%dT%H:%M:%SZ}\t{page.url}")
    for url in report.queued:
        print(f"queued\t{url}")
    for skipped in report.skipped:
        print(f"skipped\t{skipped.path}\t{skipped.reason}")
    print(
        f"{spool}: {_size(len(report.pages), 'page')} imported, "
        f"{_size(len(report.queued), 'request')} queued, {len(report.skipped)} skipped",
        file=sys.stderr,
    )


def cmd_import_wwwoffle(args: argparse.Namespace) -> int:
    """Import a WWWOFFLE spool's pages into the cache and its queue into the outgoing queue."""
    from ..recording import wiring

    try:
        config = _config(args)
    except ConfigError as exc:
        return _err("import-wwwoffle", exc)
    spool = Path(args.spool)

    async def run() -> ImportReport:
        async with wiring.open_services(config) as services:
            return await asyncio.to_thread(import_spool, services.store, services.queue, spool)

    try:
        report = run_loop(run())
    except SpoolError as exc:
        return _err("import-wwwoffle", exc)
    except (OSError, StoreError, CDXJError) as exc:
        return _err("import-wwwoffle", f"cannot use the cache {config.cache}: {exc}")
    _print_report(report, spool)
    return 1 if report.skipped and not (report.pages or report.queued) else 0


def add_import_parser(sub: SubParsers) -> argparse.ArgumentParser:
    """``wwwproxy import-wwwoffle``."""
    p = sub.add_parser(
        "import-wwwoffle",
        help="import a WWWOFFLE spool (its cached pages and its queue) into the cache",
        description="Record every page of a WWWOFFLE spool (http/ and https/: D and U file "
        "pairs) into the cache at the time WWWOFFLE fetched it (the D file's time), with its "
        "status and headers, and queue its outgoing requests (outgoing/: O and U files). "
        "Prints one line per page imported, request queued and file skipped (with the "
        "reason: a missing U file, a bad status line, ftp pages ...). The spool is only read; "
        "importing it again records nothing twice. Exit status 1 if nothing could be imported "
        "and something was skipped.",
    )
    add_config_options(p)
    p.add_argument("spool", metavar="SPOOL_DIR", help="the spool (e.g. /var/spool/wwwoffle)")
    p.set_defaults(func=cmd_import_wwwoffle)
    return p


def _progress(report: WarcImport, seconds: float) -> None:
    """The progress line: rewritten in place on a terminal, a line at a time otherwise."""
    rate = report.payload_bytes / 1e6 / seconds if seconds > 0 else 0.0
    line = (
        f"{report.files}/{report.inputs} files, {report.records} records, "
        f"{report.imported} captures recorded, {rate:.1f} MB/s"
    )
    end = "\r" if sys.stderr.isatty() else "\n"
    print(line, end=end, file=sys.stderr, flush=True)


def _print_import(report: WarcImport) -> None:
    if sys.stderr.isatty():
        print(file=sys.stderr)
    for reason, count in sorted(report.skipped.items(), key=lambda item: -item[1]):
        places = ", ".join(report.examples.get(reason, []))
        print(f"skipped\t{count}\t{reason}\t(e.g. {places})")
    for problem in report.damaged:
        print(f"damaged\t{problem}")
    print(
        f"{_size(report.imported, 'capture')} imported from {_size(report.records, 'record')} "
        f"in {_size(report.files, 'WARC file')}, {sum(report.skipped.values())} skipped, "
        f"{_size(len(report.damaged), 'damaged file')}",
        file=sys.stderr,
    )


def cmd_import_warcs(args: argparse.Namespace) -> int:
    """Import WARC files, WACZ files and pywb collections into the cache."""
    try:
        root = _config(args).cache
    except ConfigError as exc:
        return _err("import", exc)
    try:
        report = import_warcs(Store(root), [Path(p) for p in args.paths], _progress)
    except ImportError_ as exc:
        return _err("import", f"{exc}; nothing was imported")
    except (OSError, StoreError, CDXJError) as exc:
        return _err("import", f"cannot use the cache {root}: {exc}")
    _print_import(report)
    return 1 if report.damaged else 0


def add_import_warcs_parser(sub: SubParsers) -> argparse.ArgumentParser:
    """``wwwproxy import``."""
    p = sub.add_parser(
        "import",
        help="import WARC files, WACZ files and pywb collections into the cache",
        description="Record every HTTP(S) response of the WARC files (.warc, .warc.gz), WACZ "
        "files and directories named (searched recursively: a pywb collection, a folder of "
        "WARCs) into the cache, each at its own time under the key the proxy looks it up "
        "by, so that it is served offline. Revisits get their original's payload; chunked "
        "bodies are stored de-chunked. Prints a progress line, then one line per kind of "
        "record skipped (with how many and where) and per damaged file. Importing the same "
        "files again records nothing twice. Exit status 2 (nothing imported) if a name is "
        "missing, not a WARC or WACZ, or a directory without any; 1 if a file could be read "
        "only in part (truncated or corrupt: what it held before the damage is imported); "
        "0 otherwise.",
    )
    add_config_options(p)
    p.add_argument("paths", nargs="+", metavar="FILE|DIR", help="WARC, WACZ, or a directory")
    p.set_defaults(func=cmd_import_warcs)
    return p
