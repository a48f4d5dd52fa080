"""``wwwproxy purge``: enforce the cache's size and history limits now (``max_size``,
``keep_captures``, ``purge_after_days``), or with ``--dry-run`` only say what would go.

The same purge ``wwwproxy serve`` runs by itself (:mod:`wwwproxy.archive.purge`); both may
run at once, and beside a ``wwwproxy fetch``: every file changes under its lock.
"""

from __future__ import annotations

import argparse
import sys

from ..archive.cdxj import CDXJError
from ..archive.purge import Limits, PurgeResult, purge
from ..archive.store import Store, StoreError
from ..config import ConfigError
from .fetch import SubParsers, _config, add_config_options

__all__ = ["add_purge_parser", "cmd_purge"]


def _lines(result: PurgeResult) -> list[str]:
    """One line per file removed or trimmed, then the totals."""
    removed = "would remove" if result.dry_run else "removed"
    trimmed = "would trim" if result.dry_run else "trimmed"
    lines = []
    for removal, captures in result.removed:
        page = removal.page
        lines.append(
            f"{removed}\t{page.url or page.name}\t{captures} capture(s), {page.size} bytes: "
            f"{removal.reason}"
        )
    for trim in result.trimmed:
        lines.append(
            f"{trimmed}\t{trim.url or trim.name}\t{trim.captures} old capture(s), "
            f"{trim.freed} bytes"
        )
    if result.healed:
        lines.append(f"put right the index lines of {result.healed} file(s) of a killed purge")
    lines.append(result.summary())
    return lines


def cmd_purge(args: argparse.Namespace) -> int:
    """Purge the cache by the configuration's limits; exit 2 on a configuration or cache
    that cannot be used."""
    try:
        config = _config(args)
    except ConfigError as exc:
        print(f"wwwproxy purge: {exc}", file=sys.stderr)
        return 2
    limits = Limits.from_config(config)
    if not config.cache.is_dir():
        print(f"wwwproxy purge: {config.cache}: no such cache directory", file=sys.stderr)
        return 2
    if not limits.active:
        print("wwwproxy purge: no limits configured (max_size, keep_captures, purge_after_days)")
        return 0
    try:
        result = purge(Store(config.cache), limits, dry_run=args.dry_run)
    except (OSError, CDXJError, StoreError) as exc:
        print(f"wwwproxy purge: {config.cache}: {exc}", file=sys.stderr)
        return 2
    for line in _lines(result):
        print(line)
    return 0


def add_purge_parser(sub: SubParsers) -> argparse.ArgumentParser:
    """``wwwproxy purge``."""
    p = sub.add_parser(
        "purge",
        help="remove what the cache's size and history limits exclude",
        description="Enforce the configuration's limits on the cache now, as wwwproxy serve "
        "does once a day and when the cache grows past max_size: keep_captures old captures "
        "per URL are dropped (the newest, the one served and what they need stay), pages "
        "not used for their purge_after_days rule's days are removed, then the least "
        "recently used while the cache files take more than max_size (down to 90%). "
        "Prints what it frees: files, captures, bytes.",
    )
    add_config_options(p)
    p.add_argument(
        "--dry-run", action="store_true", help="only print what would be removed; change nothing"
    )
    p.set_defaults(func=cmd_purge)
    return p
