"""The ``wwwproxy`` command line: argument parsing and one function per sub-command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence

from . import __version__
from .url import InvalidURL, cache_name, canonicalize, surt

__all__ = ["main"]


def _canon_inputs(urls: Sequence[str]) -> Iterator[str | bytes]:
    """Command-line URLs in order; ``-`` stands for stdin's lines, read as bytes."""
    for url in urls:
        if url != "-":
            yield url
            continue
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\r\n")
            if line.strip():
                yield line


def _display(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def cmd_canon(args: argparse.Namespace) -> int:
    """Print each URL's canonical form, cache file name and SURT key."""
    status = 0
    out = sys.stdout
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
        key = url.file
        row = {
            "input": shown,
            "canonical": url.canonical,
            "file": url.file,
            "cache_name": cache_name(url, key),
            "surt": surt(key),
        }
        if args.json:
            out.write(json.dumps(row) + "\n")
        else:
            out.write(f"{row['canonical']}\t{row['cache_name']}\t{row['surt']}\n")
    out.flush()
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wwwproxy",
        description="An offline caching web proxy that records into WARC files.",
    )
    parser.add_argument("--version", action="version", version=f"wwwproxy {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    canon = sub.add_parser(
        "canon",
        help="show the canonical URL, cache file name and SURT key of URLs",
        description="Print, per URL, the canonical URL, the cache file name and the CDXJ "
        "SURT key, tab-separated. '-' reads URLs from stdin, one per line. Exit status 1 "
        "if any URL is invalid (the others still print).",
    )
    canon.add_argument("urls", nargs="+", metavar="URL", help="a URL, or - for stdin")
    canon.add_argument("--json", action="store_true", help="one JSON object per input")
    canon.add_argument(
        "--local-host",
        default="localhost:8080",
        metavar="HOST:PORT",
        help="the proxy's own host[:port], used for path-only URLs (default %(default)s)",
    )
    canon.set_defaults(func=cmd_canon)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
