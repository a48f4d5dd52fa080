"""``wwwproxy monitor add|list|remove``: URLs the running proxy refetches on a schedule
(:mod:`wwwproxy.fetch.monitor`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .fetch import SubParsers, _config, _err, add_config_options

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["add_monitor_parser", "cmd_monitor"]


def add_monitor_parser(sub: SubParsers) -> argparse.ArgumentParser:
    """``wwwproxy monitor add|list|remove``."""
    p = sub.add_parser(
        "monitor",
        help="URLs the running proxy refetches on a schedule",
        description="Monitored URLs are kept in CACHE/monitor.yaml; the running proxy fetches "
        "each (with its requisites) when due and online or autodial. A new URL is due at once.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    add_config_options(common)
    add = actions.add_parser(
        "add",
        parents=[common],
        help="monitor a URL",
        description="Monitor URL every HOURS hours, or at --hours (0-23, local time; default "
        "0) on --weekdays (mon..sun; default every day); --render: load it in headless "
        "Chromium too, to record what its scripts load (as fetch --render). Adding a "
        "monitored URL again changes its schedule and --render.",
    )
    add.add_argument("url", metavar="URL")
    add.add_argument("--every", metavar="HOURS", help="fetch every HOURS hours")
    add.add_argument("--weekdays", metavar="DAYS", help="e.g. mon,thu")
    add.add_argument("--hours", metavar="HOURS", help="e.g. 6,18")
    add.add_argument(
        "--render",
        action="store_true",
        help="also load the page in headless Chromium when fetching it (render: true)",
    )
    actions.add_parser("list", parents=[common], help="list monitored URLs")
    remove = actions.add_parser("remove", parents=[common], help="stop monitoring a URL")
    remove.add_argument("url", metavar="URL")
    p.set_defaults(func=cmd_monitor)
    return p


def cmd_monitor(args: argparse.Namespace) -> int:
    from datetime import datetime

    from ..config import ConfigError
    from ..fetch import monitor

    try:
        config = _config(args)
        path = monitor.monitor_path(config.cache)
        if args.action == "add":
            if args.every is not None and (args.weekdays or args.hours):
                raise monitor.MonitorError("give --every, or --weekdays/--hours, not both")
            schedule = monitor.parse_schedule(args.every, args.weekdays, args.hours)
            entry = monitor.add(path, args.url, schedule, render=args.render)
            rendered = ", rendered in a browser" if entry.render else ""
            print(f"monitoring {entry.url} {monitor.describe(entry.schedule)}{rendered}")
            if entry.render:
                _warn_unrenderable(config)
            return 0
        if args.action == "remove":
            if monitor.remove(path, args.url):
                print(f"no longer monitoring {args.url}")
                return 0
            _err("monitor remove", f"{args.url} is not monitored")
            return 1
        now = datetime.now().astimezone()
        for row in monitor.page_rows(path, now):
            last = row["last"] or "never"
            nxt = "due now" if row["due"] else f"next {row['next']}"
            error = f"\tlast try failed: {row['error']}" if row["error"] else ""
            rendered = ", rendered" if row["render"] else ""
            print(f"{row['url']}\t{row['schedule']}{rendered}\tlast {last}\t{nxt}{error}")
        return 0
    except (ConfigError, monitor.MonitorError) as exc:
        _err(f"monitor {args.action}", exc)
        return 2


def _warn_unrenderable(config: Config) -> None:
    """Say so at once if the browser is missing: every fetch of the entry would fail."""
    from ..fetch.render import RenderUnavailable, check_available, render_options

    try:
        check_available(render_options(config))
    except RenderUnavailable as exc:
        _err("monitor add", f"warning: its fetches fail until this is done: {exc}")
