"""The ``wwwproxy`` command line: argument parsing and one function per sub-command.

The top of the package: it wires through :mod:`wwwproxy.app` and nothing imports it (the
console script ``wwwproxy.cli:main`` and ``python -m wwwproxy`` run it).  ``fetch``, ``urldb``
and ``monitor`` live in :mod:`.fetch`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from .. import __version__
from ..archive.cdxj import CDXJError
from ..archive.index_lines import ScanTally
from ..archive.store import Store, StoreError
from ..config import ConfigError, config_candidates, find_config, load_config, parse_hostport
from ..url import InvalidURL, cache_name, canonicalize, surt
from ..url.requestkey import request_key
from .control import ProxyRefused, ProxyUnreachable, ask_proxy, control_address
from .fetch import (
    CONFIG_HELP,
    add_config_options,
    add_fetch_parser,
    add_urldb_parser,
)
from .loop import run as run_loop
from .monitor import add_monitor_parser
from .purge import add_purge_parser
from .transfer import add_export_parser, add_import_parser, add_import_warcs_parser

__all__ = ["main"]


def _canon_inputs(urls: Sequence[str]) -> Iterator[str | bytes]:
    """Command-line URLs in order; ``-`` stands for stdin's lines, read as bytes.

    Every line is an input, blank ones too (they are invalid URLs), so the output has one
    row per input line and can be zipped with the input.
    """
    for url in urls:
        if url != "-":
            yield url
            continue
        for line in sys.stdin.buffer:
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            yield line


def _display(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _read_body(name: str | None) -> bytes:
    if name is None:
        return b""
    if name == "-":
        return sys.stdin.buffer.read()
    with open(name, "rb") as f:
        return f.read()


def cmd_canon(args: argparse.Namespace) -> int:
    """Print each URL's canonical form (or request key), cache file name and SURT key."""
    if args.body == "-" and "-" in args.urls:
        print("wwwproxy canon: --body - and URL - cannot both read stdin", file=sys.stderr)
        return 2
    method = (args.method or "GET").upper()
    try:
        body = _read_body(args.body)
        request_key("http://x/", method)  # validates the method once, before any output
    except OSError as exc:
        print(f"wwwproxy canon: cannot read --body {args.body}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"wwwproxy canon: --method: {exc}", file=sys.stderr)
        return 2
    show_key = args.method is not None or args.body is not None
    status = 0
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper):
        out.reconfigure(encoding="utf-8")  # whatever the locale: SURT keys show IDNA in Unicode
    for raw in _canon_inputs(args.urls):
        shown = _display(raw)
        try:
            url = canonicalize(raw, local_host=args.local_host)
        except InvalidURL as exc:
            status = 1
            if args.json:
                out.write(json.dumps({"input": shown, "error": exc.reason}) + "\n")
            else:
                out.flush()
                print(f"wwwproxy canon: {exc}", file=sys.stderr, flush=True)
            continue
        key = request_key(url.file, method, args.content_type, body)
        row = {
            "input": shown,
            "canonical": url.canonical,
            "file": url.file,
            "key": key,
            "cache_name": cache_name(url, key),
            "surt": surt(key),
        }
        if args.json:
            out.write(json.dumps(row) + "\n")
        else:
            first = key if show_key else url.canonical
            out.write(f"{first}\t{row['cache_name']}\t{row['surt']}\n")
    out.flush()
    return status


def _cache_dir(args: argparse.Namespace) -> Path:
    """``--cache`` if given, else the config file's ``cache`` (relative to the working dir)."""
    if getattr(args, "cache", None):
        return Path(args.cache)
    return load_config(getattr(args, "config", None)).cache


def cmd_index(args: argparse.Namespace) -> int:
    """Rebuild the CDXJ index from the WARC files, or check it line by line."""
    try:
        root = _cache_dir(args)
    except ConfigError as exc:
        print(f"wwwproxy index: {exc}", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"wwwproxy index: {root}: no such cache directory", file=sys.stderr)
        return 2
    try:
        store = Store(root)
        repaired: list[str] = []
        tally = ScanTally()
        started = time.monotonic()
        if args.action == "rebuild":
            count, problems = store.rebuild_index(repaired, tally=tally)
        else:
            problems = store.check_index()
    except (OSError, CDXJError, StoreError) as exc:
        # a cache that cannot be used at all (say, index/ is a file): what and where, no trace
        print(f"wwwproxy index {args.action}: {root}: {exc}", file=sys.stderr)
        return 2
    if args.action == "rebuild":
        for repair in repaired:
            print(f"repaired: {repair}", file=sys.stderr)
        for problem in problems:
            print(f"warning: {problem}", file=sys.stderr)
        took = time.monotonic() - started
        workers = f"{tally.workers} worker{'s' if tally.workers != 1 else ''}"
        print(
            f"{store.index.index_path}: {count} records from {root} ({tally.files} files in "
            f"{took:.1f} s: {tally.files / max(took, 1e-3):.0f} files/s, {workers})"
        )
        return 0
    for problem in problems:
        print(problem)
    print(
        f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {store.index.directory}",
        file=sys.stderr,
    )
    return 1 if problems else 0


def _config_named(path: str | None) -> str:
    """The configuration file a command reads, for a message: absolute, or where one goes."""
    found = Path(path) if path else find_config()
    if found is not None:
        return str(found.absolute())
    return "none yet; " + " or ".join(str(p.absolute()) for p in config_candidates())


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the proxy in the foreground until SIGTERM or SIGINT."""
    from ..app import CannotListen, serve
    from ..http.policy import Mode
    from ..proxy.accesslog import setup_logging

    overrides: dict[str, object] = {}
    try:
        if args.listen:
            overrides["listen_host"], overrides["listen_port"] = parse_hostport(args.listen)
    except ValueError as exc:
        print(f"wwwproxy serve: --listen {exc}", file=sys.stderr)
        return 2
    if args.cache:
        overrides["cache"] = Path(args.cache)
    if args.mode:
        overrides["mode"] = args.mode
    setup_logging(args.verbose)
    try:
        return run_loop(serve(args.config, overrides, mode=Mode(args.mode) if args.mode else None))
    except ConfigError as exc:
        print(
            f"wwwproxy serve: the configuration is not valid; not starting.\n{exc}", file=sys.stderr
        )
        return 2
    except CannotListen as exc:
        print(
            f"wwwproxy serve: {exc.strerror}.\nIs another wwwproxy (or another program) "
            f"listening there? Choose another address with --listen HOST:PORT, or with "
            f"listen: in the configuration ({_config_named(args.config)}).",
            file=sys.stderr,
        )
        return 1
    except OSError as exc:
        print(f"wwwproxy serve: {exc}", file=sys.stderr)
        return 1


def _asked_proxy(args: argparse.Namespace) -> tuple[str, str | None]:
    """The running proxy's address and password, from ``--proxy``/``--password`` or the
    configuration; ConfigError or ValueError for a bad one."""
    config = load_config(args.config)
    password = args.password if args.password is not None else config.password
    return control_address(config, args.proxy), password


#: what each command asks the running proxy's /control/ (None: only its state)
_CONTROL_FORMS: dict[str, dict[str, str] | None] = {
    "online": {"mode": "online"},
    "offline": {"mode": "offline"},
    "autodial": {"mode": "autodial"},
    "status": None,
    "reload": {"action": "reload"},
}


def cmd_control(args: argparse.Namespace) -> int:
    """Switch (online/offline/autodial) or show (status) the running proxy's mode, or make it
    re-read its configuration (reload)."""
    try:
        netloc, password = _asked_proxy(args)
    except (ConfigError, ValueError) as exc:
        print(f"wwwproxy {args.command}: {exc}", file=sys.stderr)
        return 2
    try:
        answer = ask_proxy(netloc, password, _CONTROL_FORMS[args.command])
    except (ProxyUnreachable, ProxyRefused) as exc:
        print(f"wwwproxy {args.command}: {exc}", file=sys.stderr)
        return 1
    if args.command == "reload":
        print(answer.get("message", "reloaded"))
        return 0
    print(f"mode: {answer.get('mode')}")
    print(f"queued: {answer.get('queued')}")
    if answer.get("fetching"):
        print("fetching the queue now (see /outgoing/)")
    return 0


def _test_cert(host: str, directory: Path) -> int:
    """``wwwproxy ca --test-cert HOST``: a self-signed certificate and key for a local HTTPS
    test server, in ``directory``, and how to use them."""
    from ..proxy.certs import CertificateError, local_server_help, self_signed_certificate

    try:
        cert, key = self_signed_certificate(host)
    except CertificateError as exc:
        print(f"wwwproxy ca --test-cert: {exc}", file=sys.stderr)
        return 2
    stem = host.strip("[]").replace(":", "_")
    cert_path = (directory / f"{stem}.cert.pem").absolute()
    key_path = (directory / f"{stem}.key.pem").absolute()
    try:
        for path, data in ((cert_path, cert), (key_path, key)):
            with open(path, "xb") as file:  # never over a file someone may still use
                file.write(data)
    except OSError as exc:
        print(
            f"wwwproxy ca --test-cert: {exc.filename}: {exc.strerror}"
            + (" (remove it first to make a new one)" if isinstance(exc, FileExistsError) else ""),
            file=sys.stderr,
        )
        return 2
    print(local_server_help(host.strip("[]"), cert_path, key_path))
    return 0


def cmd_ca(args: argparse.Namespace) -> int:
    """Print the local CA's certificate (made on first use), or how to trust it; or make a
    test server's certificate (--test-cert)."""
    from ..proxy.certs import CertificateAuthority, CertificateError, install_help

    if args.test_cert is not None:
        return _test_cert(args.test_cert, Path(args.out))
    try:
        root = _cache_dir(args)
        directory = root / "certificates"
        new = not (directory / "ca.cert.pem").exists()
        ca = CertificateAuthority.load_or_create(directory)
    except (ConfigError, CertificateError, OSError) as exc:
        print(f"wwwproxy ca: {exc}", file=sys.stderr)
        return 2
    if new:
        # a CA nobody trusts yet: say where, in case the proxy runs with another cache
        print(
            f"wwwproxy ca: made a new certificate authority in {directory.resolve()}; a proxy "
            "using another cache directory has its own (ask it: "
            "http://localhost:8080/certificates/)",
            file=sys.stderr,
        )
    if args.install_help:
        print(install_help(ca.cert_path.resolve()))
    else:
        sys.stdout.write(ca.cert_pem.decode("ascii"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wwwproxy",
        description="An offline caching web proxy that records into WARC files.",
    )
    parser.add_argument("--version", action="version", version=f"wwwproxy {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = sub.add_parser(
        "serve",
        help="run the proxy",
        description="Run the caching proxy (default 127.0.0.1:8080; the cache in ./cache in a "
        "checkout, where ./conf/wwwproxy.yaml is, else in $XDG_CACHE_HOME/wwwproxy, unless the "
        "configuration names one). wwwproxy reload (or SIGHUP) re-reads the configuration; "
        "SIGTERM finishes requests in flight and exits.",
    )
    add_config_options(serve)
    serve.add_argument("--listen", metavar="HOST:PORT", help="address to listen on")
    serve.add_argument("--mode", choices=("online", "offline", "autodial"), help="start mode")
    serve.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    serve.set_defaults(func=cmd_serve)

    for name, text in (
        ("online", "switch the running proxy online"),
        ("offline", "switch the running proxy offline"),
        ("autodial", "switch the running proxy to autodial"),
        ("status", "show the running proxy's mode and queue"),
        ("reload", "make the running proxy re-read its configuration file"),
    ):
        mode = sub.add_parser(name, help=text, description=text + ".")
        mode.add_argument(
            "--proxy", metavar="HOST:PORT", help="the proxy's address (default: the config's)"
        )
        mode.add_argument("-c", "--config", metavar="FILE", help=CONFIG_HELP)
        mode.add_argument("--password", help="the control password (default: the config's)")
        mode.set_defaults(func=cmd_control)

    add_fetch_parser(sub)
    ca = sub.add_parser(
        "ca",
        help="print the local certificate authority of HTTPS interception (PEM)",
        description="Print the certificate of the CA that signs the certificates wwwproxy shows "
        "browsers for intercepted HTTPS sites (made on first use in <cache>/certificates/; its "
        "private key never leaves that directory). Import it into each browser once.",
    )
    add_config_options(ca)
    ca.add_argument(
        "--install-help",
        action="store_true",
        help="print how to make Firefox, Chromium, curl and the system trust it",
    )
    ca.add_argument(
        "--test-cert",
        metavar="HOST",
        help="instead, write a self-signed certificate and key for an HTTPS test server at "
        "HOST (a name or an IP address) into --out, and print how to serve with them and "
        "make wwwproxy trust them (upstream_ca)",
    )
    ca.add_argument(
        "--out", metavar="DIR", default=".", help="where --test-cert writes (default: here)"
    )
    ca.set_defaults(func=cmd_ca)

    canon = sub.add_parser(
        "canon",
        help="show the canonical URL, cache file name and SURT key of URLs",
        description="Print, per URL, the canonical URL, the cache file name and the CDXJ "
        "SURT key, tab-separated. '-' reads URLs from stdin, one per line. With --method or "
        "--body, the first column is the request's archive key instead of the canonical URL. "
        "Exit status 1 if any URL is invalid (the others still print).",
    )
    canon.add_argument("urls", nargs="+", metavar="URL", help="a URL, or - for stdin")
    canon.add_argument("--json", action="store_true", help="one JSON object per input")
    canon.add_argument(
        "--local-host",
        default="localhost:8080",
        metavar="HOST:PORT",
        help="the proxy's own host[:port], used for path-only URLs (default %(default)s)",
    )
    canon.add_argument(
        "--method",
        metavar="M",
        help="show the archive key of a request with this method (the first column becomes "
        "the key: method and body folded in as pywb does)",
    )
    canon.add_argument("--content-type", metavar="T", help="the request body's Content-Type")
    canon.add_argument(
        "--body", metavar="FILE", help="the request body, read from FILE (- = stdin)"
    )
    canon.set_defaults(func=cmd_canon)

    index = sub.add_parser(
        "index",
        help="rebuild or check the CDXJ index of the cache",
        description="rebuild: write a new sorted index from every WARC file in the cache "
        "(atomic: the old index serves until the new one is in place). check: validate every "
        "index line and its reference, and report records the index lacks; prints "
        "file:line: problem and exits 1 if there are any.",
    )
    index.add_argument("action", choices=("rebuild", "check"))
    add_config_options(index)
    index.set_defaults(func=cmd_index)

    add_urldb_parser(sub)
    add_monitor_parser(sub)
    add_purge_parser(sub)
    add_export_parser(sub)
    add_import_parser(sub)
    add_import_warcs_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # the cache holds a person's browsing (and the CA's key): everything wwwproxy creates is
    # the user's alone, as the systemd unit's UMask=0077 makes it there
    os.umask(0o077)
    try:
        return args.func(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
