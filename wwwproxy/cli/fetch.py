"""``wwwproxy fetch`` and ``wwwproxy urldb``: argument parsing and the thin command functions
(the crawler is :mod:`wwwproxy.fetch.prefetch`, the database :mod:`wwwproxy.urldb`).  They
fetch through the services :func:`wwwproxy.recording.wiring.open_services` builds: the same
recording engine, cache policy and queue as ``wwwproxy serve`` (``fetch`` without the search
index: the proxy's, or the next one to start, catches up with its pages); ``--render``
also through a proxy of those services for the browser (:func:`wwwproxy.app.browser_recorder`).

Exit status: 0 all done, 1 something failed (a URL, a record, a database file), 2 usage or
configuration errors (nothing was fetched).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from ..archive.store import Store
    from ..config import Config
    from ..fetch.prefetch import Prefetcher
    from ..fetch.probe import Probe
    from ..fetch.progress import Progress
    from ..fetch.render import RenderOptions
    from ..fetch.tasks import FetchOptions, Summary
    from ..recording.services import Services
    from ..urldb import Entry, URLDatabase

SubParsers = argparse._SubParsersAction  # noqa: SLF001 - argparse has no public name for it

__all__ = [
    "CONFIG_HELP",
    "ListError",
    "add_config_options",
    "add_fetch_parser",
    "add_urldb_parser",
    "cmd_fetch",
    "cmd_urldb",
    "compare_record",
    "parse_url_list",
    "read_lists",
]


class ListError(Exception):
    """A LIST argument that cannot be read at all (a usage error)."""


# --- URL lists --------------------------------------------------------------------------------


def parse_url_list(text: str, source: str) -> tuple[list[str], list[str]]:
    """URLs of a list (one a line; blank lines and lines starting with ``#`` skipped), as
    canonical URLs, and a ``source:line: problem`` for every line that is not a URL."""
    from ..url import InvalidURL, canonicalize

    urls: list[str] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        try:
            url = canonicalize(item)
        except InvalidURL as exc:
            problems.append(f"{source}:{number}: {item!r} is not a URL: {exc.reason}")
            continue
        if url.local or url.proto not in ("http", "https"):
            problems.append(f"{source}:{number}: {item!r} is not an http or https URL")
            continue
        urls.append(url.file)
    return urls, problems


def _looks_like_url(arg: str) -> bool:
    return arg.lower().startswith(("http://", "https://"))


def read_lists(
    args: Sequence[str], categories: Sequence[str] = (), stdin: TextIO | None = None
) -> tuple[list[str], list[str]]:
    """The URLs of LIST arguments (a file of URLs, ``-`` for stdin, a URL database
    directory, or a URL itself) in order without repeats, and the problems found.
    :class:`ListError` for an argument that is none of these."""
    from ..urldb import URLDatabase, URLDBError

    urls: list[str] = []
    problems: list[str] = []
    for arg in args:
        path = Path(arg)
        if arg == "-":
            found, bad = parse_url_list((stdin or sys.stdin).read(), "<stdin>")
        elif path.is_dir():
            db = URLDatabase(path)
            found = []
            wanted: Sequence[str | None] = categories or [None]  # None: every category
            try:
                for category in wanted:
                    found += db.urls(category)
            except URLDBError as exc:
                raise ListError(str(exc)) from None
            bad = [str(p) for p in db.problems]
        elif path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ListError(f"{arg}: cannot read: {exc}") from None
            found, bad = parse_url_list(text, arg)
        elif _looks_like_url(arg):
            found, bad = parse_url_list(arg, "argument")
        else:
            raise ListError(f"{arg}: no such file or directory (and not an http(s) URL)")
        urls += found
        problems += bad
    return list(dict.fromkeys(urls)), problems


# --- shared -----------------------------------------------------------------------------------


#: where the configuration is looked for (:func:`wwwproxy.config.find_config`)
CONFIG_HELP = (
    "configuration file (default ./conf/wwwproxy.yaml, else "
    "$XDG_CONFIG_HOME/wwwproxy/wwwproxy.yaml, ~/.config by default)"
)


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """``-c/--config`` and ``--cache``, as every command that reads the cache has them."""
    parser.add_argument("-c", "--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument("--cache", metavar="DIR", help="cache directory (overrides the config)")


def _config(args: argparse.Namespace) -> Config:
    """The configuration with ``--cache`` applied; ConfigError to the caller."""
    from ..config import load_config

    config = load_config(getattr(args, "config", None))
    if getattr(args, "cache", None):
        config = dataclasses.replace(config, cache=Path(args.cache))
    return config


def _store(config: Config) -> Store:
    """The cache; :class:`ListError` (a usage error) if it cannot be made or used."""
    from ..archive.store import Store

    try:
        return Store(config.cache)
    except OSError as exc:
        raise ListError(f"cannot use the cache {config.cache}: {exc.strerror or exc}") from None


def _services(
    config: Config, store: Store, per_host: int, *, search: bool = True
) -> AbstractAsyncContextManager[Services]:
    """The services a sub-command fetches through (not listening): the store it has
    opened, at most ``per_host`` connections to one host; ``search`` False: no search index
    (the crawler has the next process with one index its pages)."""
    from ..recording import wiring  # not ..app: a crawl needs neither the server nor its pages

    return wiring.open_services(config, store=store, limit_per_host=per_host, search=search)


def _err(command: str, message: object) -> None:
    print(f"wwwproxy {command}: {message}", file=sys.stderr)


def _whole_number(text: str, low: int, limit: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{text} must be {limit}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, 1, "at least 1")


def _non_negative_int(text: str) -> int:
    return _whole_number(text, 0, "0 or more")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more seconds")
    return value


# --- wwwproxy fetch ---------------------------------------------------------------------------


def add_fetch_parser(sub: SubParsers) -> argparse.ArgumentParser:
    """``wwwproxy fetch``."""
    p = sub.add_parser(
        "fetch",
        help="fetch the outgoing queue and lists of URLs into the cache",
        description="Fetch the outgoing queue (requests made while offline) and the URLs of "
        "each LIST into the cache, through the proxy's recording path; wwwproxy serve may be "
        "running or not. LIST is a text file of URLs (one a line, # comments), - for stdin, "
        "a URL database directory (--category selects records), or a URL. A cached copy the "
        "proxy would serve without asking (the server's lifetime for it, at least "
        "request_changed seconds, or the first matching freshness rule's max_age) is not "
        "fetched again, so running it again resumes; a stale copy is revalidated if it can "
        "be, an error copy is always asked again, and queued requests are always fetched. "
        "The queue is fetched when no LIST is given (or with --queue). When a proxy using the "
        "same cache runs offline (asked at the configuration's listen address), nothing is "
        "fetched unless --online. Exit status 1 if any URL failed, 2 for a usage error or an "
        "offline proxy.",
    )
    p.add_argument("lists", nargs="*", metavar="LIST", help="URL list file, -, URL db dir, URL")
    add_config_options(p)
    p.add_argument(
        "--category",
        action="append",
        default=[],
        metavar="C",
        help="only URL database records in category C (repeatable)",
    )
    p.add_argument(
        "--depth",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="follow links N levels deep (default 0: only the listed URLs)",
    )
    p.add_argument(
        "--requisites",
        action="store_true",
        help="also fetch what pages need: images, style sheets (and their @import "
        "and url()), scripts, frames, iframes, srcset, icons",
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--same-host",
        dest="scope",
        action="store_const",
        const="host",
        help="follow links on the listed URL's host only (default)",
    )
    scope.add_argument(
        "--same-domain",
        dest="scope",
        action="store_const",
        const="domain",
        help="follow links within the listed URL's domain",
    )
    scope.add_argument(
        "--any-host",
        dest="scope",
        action="store_const",
        const="any",
        help="follow links to any host",
    )
    scope.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="PREFIX",
        help="follow only links under this URL prefix (repeatable)",
    )
    p.add_argument(
        "--concurrency",
        type=_positive_int,
        default=4,
        metavar="N",
        help="fetches at once (default %(default)s)",
    )
    p.add_argument(
        "--per-host",
        type=_positive_int,
        default=2,
        metavar="N",
        help="fetches at once to one host (default %(default)s)",
    )
    p.add_argument(
        "--delay",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait between two requests to one host (default 0)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="fetch everything again, fresh or not, without revalidating",
    )
    p.add_argument(
        "--ignore-robots", action="store_true", help="do not honour robots.txt when following links"
    )
    queue = p.add_mutually_exclusive_group()
    queue.add_argument(
        "--queue",
        dest="queue",
        action="store_true",
        default=None,
        help="fetch the outgoing queue too (the default without LIST)",
    )
    queue.add_argument(
        "--no-queue",
        dest="queue",
        action="store_false",
        help="leave the outgoing queue alone (the default with LIST)",
    )
    p.add_argument(
        "--online",
        action="store_true",
        help="fetch even when the running proxy using this cache is offline",
    )
    p.add_argument(
        "--render",
        action="store_true",
        help="load every page in headless Chromium through the recording proxy, so what its "
        "scripts fetch is recorded too, and follow the links of the DOM they leave (slower; "
        "needs the chromium package and the Playwright library)",
    )
    p.add_argument(
        "--render-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="seconds one rendered page may take (default: render_timeout, 30)",
    )
    p.add_argument(
        "--render-tabs",
        type=_positive_int,
        metavar="N",
        help="pages rendered at once (default: render_tabs, one a core, 2 to 4)",
    )
    p.set_defaults(func=cmd_fetch, scope="host")
    return p


def cmd_fetch(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..fetch.progress import Progress, format_summary
    from ..fetch.render import RenderUnavailable
    from ..fetch.tasks import FetchOptions
    from .control import offline_proxy

    try:
        config = _config(args)
        options = FetchOptions(
            depth=args.depth,
            requisites=args.requisites,
            scope="prefix" if args.limit else args.scope,
            limits=tuple(args.limit),
            concurrency=args.concurrency,
            per_host=args.per_host,
            delay=args.delay,
            force=args.force,
            robots=not args.ignore_robots,
        )
        urls, problems = read_lists(args.lists, args.category)
        render = _render_options(config, args) if args.render else None
        offline_at = None if args.online else offline_proxy(config)
        if offline_at is not None:
            _err(
                "fetch",
                f"the proxy at {offline_at} (cache {config.cache.resolve()}) is offline: "
                "nothing fetched. Switch it online (wwwproxy online) or give --online.",
            )
            return 2
        store = _store(config)
    except (ConfigError, ValueError, ListError, RenderUnavailable) as exc:
        _err("fetch", exc)
        return 2
    for problem in problems:
        _err("fetch", problem)
    queue = args.queue if args.queue is not None else not args.lists
    progress = Progress(sys.stderr)
    prefetcher: list[Prefetcher] = []
    try:
        summary = asyncio.run(
            _fetch(config, store, urls, options, progress, queue, prefetcher, render)
        )
    except RenderUnavailable as exc:
        progress.close()
        _err("fetch", exc)
        return 2
    except KeyboardInterrupt:
        progress.close()
        if prefetcher:
            print(format_summary(prefetcher[0].summary), file=sys.stderr)
        _err("fetch", "interrupted; run it again to carry on where it stopped")
        return 130
    print(format_summary(summary), file=sys.stderr)
    return 1 if summary.failed or problems else 0


async def _fetch(
    config: Config,
    store: Store,
    urls: list[str],
    options: FetchOptions,
    progress: Progress,
    queue: bool,
    holder: list[Prefetcher],
    render: RenderOptions | None = None,
) -> Summary:
    from ..fetch.prefetch import Prefetcher

    if render is None:
        async with _services(config, store, options.per_host, search=False) as services:
            holder.append(Prefetcher(services, options, progress))
            return await holder[0].run(urls, queue=queue)
    from ..app import browser_recorder
    from ..fetch.render import rendering

    # the browser's requests go through a proxy of the crawl's own services: what the pages'
    # scripts fetch is recorded as the crawl's pages are
    async with _services(config, store, options.per_host, search=False) as services:
        services.browser_recorder = functools.partial(browser_recorder, services)
        async with rendering(services, render) as renderer:
            holder.append(Prefetcher(services, options, progress, renderer))
            return await holder[0].run(urls, queue=queue)


def _render_options(config: Config, args: argparse.Namespace) -> RenderOptions:
    """The render settings of the config with ``--render-*`` applied, once the browser and
    its driver are known to be there (:class:`RenderUnavailable`: exit status 2)."""
    from ..fetch.render import check_available, render_options

    options = render_options(config, timeout=args.render_timeout, tabs=args.render_tabs)
    check_available(options)
    return options


# --- wwwproxy urldb ---------------------------------------------------------------------------


def add_urldb_parser(sub: SubParsers) -> argparse.ArgumentParser:
    """``wwwproxy urldb add|remove|list|check|import``."""
    p = sub.add_parser(
        "urldb",
        help="manage a URL database (per-domain YAML files of URLs to keep)",
        description="A URL database is a directory of per-domain YAML files (see "
        "urldb-format.txt). add and import fetch each URL (into the cache, too) to learn its "
        "content type, and with --static its length and SHA-256; check fetches every record "
        "and reports each whose status is not 2xx/3xx or whose content type, length or "
        "SHA-256 differs (exit status 1). A domain file names a host, not a port, so the "
        "database holds only URLs on the default port (80 for http, 443 for https).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    add_config_options(common)
    common.add_argument(
        "--db", metavar="DIR", help="the URL database directory (default: the config's urldb)"
    )
    categories = argparse.ArgumentParser(add_help=False)
    categories.add_argument(
        "--category", action="append", default=[], metavar="C", help="category (repeatable)"
    )

    add = actions.add_parser(
        "add",
        parents=[common, categories],
        help="add or update a URL",
        description="Fetch URL and add (or update) its record.",
    )
    add.add_argument("url", metavar="URL")
    add.add_argument(
        "--static", action="store_true", help="record the content's length and SHA-256 too"
    )
    remove = actions.add_parser("remove", parents=[common], help="remove a URL")
    remove.add_argument("url", metavar="URL")
    lst = actions.add_parser(
        "list",
        parents=[common],
        help="list the URLs",
        description="Print the URLs (https for https domains), one a line.",
    )
    lst.add_argument("--category", metavar="C", help="only records in category C")
    lst.add_argument(
        "-l",
        "--long",
        action="store_true",
        help="also show content type and categories (tab-separated)",
    )
    check = actions.add_parser("check", parents=[common], help="fetch and verify every record")
    check.add_argument("--category", metavar="C", help="only records in category C")
    check.add_argument("--concurrency", type=_positive_int, default=4, metavar="N")
    imp = actions.add_parser(
        "import",
        parents=[common, categories],
        help="add every URL of a list",
        description="Add every URL of FILE (one a line, # comments; - "
        "for stdin), fetching each as add does.",
    )
    imp.add_argument("file", metavar="FILE")
    imp.add_argument(
        "--static", action="store_true", help="record each content's length and SHA-256 too"
    )
    p.set_defaults(func=cmd_urldb)
    return p


def cmd_urldb(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..urldb import URLDatabase, URLDBError

    try:
        config = _config(args)
    except ConfigError as exc:
        _err("urldb", exc)
        return 2
    db = URLDatabase(Path(args.db) if args.db else config.urldb)
    try:
        if args.action == "remove":
            return _urldb_remove(db, args.url)
        if args.action == "list":
            return _urldb_list(db, args.category, args.long)
        try:
            store = _store(config)
        except ListError as exc:
            _err(f"urldb {args.action}", exc)
            return 2
        if args.action == "check":
            return asyncio.run(_urldb_check(config, store, db, args.category, args.concurrency))
        if args.action == "add":
            return asyncio.run(
                _urldb_add(config, store, db, [args.url], args.category, args.static)
            )
        if args.file == "-":
            urls, problems = parse_url_list(sys.stdin.read(), "<stdin>")
        else:
            try:
                text = Path(args.file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                _err("urldb import", f"{args.file}: cannot read: {exc}")
                return 2
            urls, problems = parse_url_list(text, args.file)
        for problem in problems:
            _err("urldb import", problem)
        status = asyncio.run(_urldb_add(config, store, db, urls, args.category, args.static))
        return 1 if problems else status
    except URLDBError as exc:
        _err(f"urldb {args.action}", exc)
        return 1


def _urldb_remove(db: URLDatabase, url: str) -> int:
    from ..urldb import URLDBError, parse_db_url

    try:
        parse_db_url(url)
    except URLDBError as exc:
        _err("urldb remove", exc)
        return 2
    if db.remove(url):
        print(f"removed {url}")
        return 0
    _err("urldb remove", f"{url} is not in {db.directory}")
    return 1


def _urldb_list(db: URLDatabase, category: str | None, long: bool) -> int:
    for entry in db.records(category):
        if long:
            cats = ",".join(entry.record.categories)
            print(f"{entry.url}\t{entry.record.content_type}\t{cats}")
        else:
            print(entry.url)
    for problem in db.problems:
        _err("urldb list", problem)
    return 1 if db.problems else 0


async def _urldb_add(
    config: Config,
    store: Store,
    db: URLDatabase,
    urls: Iterable[str],
    categories: list[str],
    static: bool,
) -> int:
    from ..fetch.probe import probe
    from ..urldb import URLDBError, parse_db_url

    command = "urldb add"
    checked = []
    status = 0
    for url in urls:
        try:
            _, host, _ = parse_db_url(url)
            # a malformed domain file fails here, before any fetching
            db.domain_for(host, strict=True)
            db.lookup(url)
        except URLDBError as exc:
            _err(command, exc)
            status = max(status, 2 if exc.file is None else 1)
            continue
        checked.append(url)
    if not checked:
        return status
    async with _services(config, store, 2) as services:
        for url in checked:
            result = await probe(services, url, digest=static)
            if not result.ok:
                why = result.error or f"HTTP {result.status} {result.reason}".rstrip()
                _err(command, f"{url}: not added: {why}")
                status = max(status, 1)
                continue
            content_type = result.content_type
            if not content_type or not content_type.strip():
                content_type = "application/octet-stream"
                _err(command, f"{url}: the server sent no Content-Type; recorded as {content_type}")
            try:
                entry = db.add(
                    url,
                    content_type,
                    categories,
                    result.length if static else None,
                    result.sha256 if static else None,
                )
            except URLDBError as exc:
                _err(command, exc)
                status = max(status, 1)
                continue
            print(f"added {entry.url} ({entry.record.content_type}) to {db.path_for(entry.domain)}")
    return status


def _media(content_type: str | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A content type for comparing: type lower-cased, parameters with lower-case names
    (and charset value), quotes and spaces removed."""
    if not content_type:
        return "", ()
    head, *params = content_type.split(";")
    out = []
    for param in params:
        name, _, value = param.partition("=")
        name = name.strip().lower()
        value = value.strip().strip('"')
        if name == "charset":
            value = value.lower()
        if name:
            out.append((name, value))
    return head.strip().lower(), tuple(out)


def compare_record(entry: Entry, result: Probe) -> list[str]:
    """What ``urldb check`` reports for one record: status, content type, length, digest."""
    record = entry.record
    if result.error is not None:
        return [result.error]
    if result.status is None or not 200 <= result.status < 400:
        return [f"status {result.status} {result.reason}".rstrip()]
    problems = []
    if _media(result.content_type) != _media(record.content_type):
        problems.append(
            f"content-type {result.content_type!r} (the database says {record.content_type!r})"
        )
    if record.content_length is not None and result.length != record.content_length:
        problems.append(
            f"content-length {result.length} (the database says {record.content_length})"
        )
    if record.content_sha256 is not None and result.sha256 != record.content_sha256:
        problems.append(
            f"content-sha256 {result.sha256} (the database says {record.content_sha256})"
        )
    return problems


async def _urldb_check(
    config: Config, store: Store, db: URLDatabase, category: str | None, concurrency: int
) -> int:
    from ..fetch.probe import probe

    entries = list(db.records(category))
    bad = 0
    limit = asyncio.Semaphore(concurrency)
    async with _services(config, store, concurrency) as services:

        async def one(entry: Entry) -> tuple[Entry, list[str]]:
            static = entry.record.content_length is not None or (
                entry.record.content_sha256 is not None
            )
            async with limit:
                return entry, compare_record(entry, await probe(services, entry.url, digest=static))

        for entry, problems in await asyncio.gather(*(one(e) for e in entries)):
            if problems:
                bad += 1
                where = db.path_for(entry.domain).name
                for problem in problems:
                    print(f"{entry.url}: {problem} [{where}]")
    for unusable in db.problems:
        print(f"{unusable}")
    print(
        f"{len(entries)} record{'s' if len(entries) != 1 else ''} checked, {bad} with problems"
        + (f", {len(db.problems)} unusable database file(s)" if db.problems else ""),
        file=sys.stderr,
    )
    return 1 if bad or db.problems else 0
