"""``wwwproxy import-wwwoffle SPOOL``: a WWWOFFLE spool brought into the cache.

WWWOFFLE keeps each cached page as two files in ``<spool>/<proto>/<host[:port]>/``: ``D<hash>``
holds the response as it came (status line, headers, a blank line, the body; a body WWWOFFLE
gzipped itself says so with ``Pragma: wwwoffle-compressed``) and ``U<hash>`` the URL; the
D file's modification time is when the page was fetched.  ``<spool>/outgoing/`` holds queued
requests the same way: ``O<hash>`` (the request: request line, headers, body) and ``U<hash>``.

Each page is recorded through :meth:`Store.put` at its own time with its own status, as if it
had just been fetched then; each queued request joins the outgoing queue.  Nothing is taken
on trust: a pair that cannot be read, parsed or stored is skipped and said why, and the spool
itself is only read.  A page already imported (same URL, same time) is not recorded twice.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shutil
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, BinaryIO

from ...http.headers import end_to_end
from ...http.policy import CONDITIONAL_HEADERS
from ...url import URL, InvalidURL, canonicalize
from ...url.requestkey import request_key
from ..cdxj import parse_timestamp
from ..outgoing import OutgoingQueue, QueuedRequest
from ..store import Store, StoreError
from ..warc import (
    HTTPRequest,
    HTTPResponse,
    WARCWriteError,
    fit_content_length,
    sanitize_headers,
)

__all__ = [
    "ImportReport",
    "Imported",
    "Skipped",
    "SpoolError",
    "import_spool",
    "parse_head",
]

#: the protocols whose pages are HTTP exchanges wwwproxy records
_RECORDED = ("http", "https")
#: WWWOFFLE's other folders: indexes of its own, not pages (nothing to say about them)
_OWN_FOLDERS = (
    frozenset({"lasttime", "lastout", "monitor", "temp", "html", "search", "local"})
    | {f"prevtime{n}" for n in range(1, 10)}
    | {f"prevout{n}" for n in range(1, 10)}
)
_HEAD_LIMIT = 64 * 1024
_STATUS_LINE = re.compile(rb"(HTTP/[0-9]\.[0-9]) +([0-9]{3})(?: (.*))?")
_REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) +(\S+) +(HTTP/[0-9]\.[0-9])")
_NOT_QUEUED = frozenset({"host", "content-length", "expect"}) | CONDITIONAL_HEADERS
_COMPRESSED = "wwwoffle-compressed"
_SPOOL = 1024 * 1024


class SpoolError(ValueError):
    """One spool file that cannot be imported; the message says why."""


@dataclass(frozen=True)
class Imported:
    url: str
    status: int
    date: datetime


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass
class ImportReport:
    """What an import did: pages recorded, requests queued, and what it left and why."""

    pages: list[Imported] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def skip(self, path: Path, reason: str) -> None:
        self.skipped.append(Skipped(str(path), reason))


@dataclass(frozen=True)
class Head:
    """A parsed message head: its first line's parts and its headers, in order."""

    first: tuple[str, str, str]
    headers: list[tuple[str, str]]
    length: int  #: bytes of the head, blank line included: where the body starts


def parse_head(data: bytes, *, request: bool = False) -> Head:
    """The head of a spooled response (``HTTP/1.1 200 OK``) or request (``GET /x HTTP/1.0``),
    up to its blank line; lines may end in CRLF or LF, and an indented line continues the
    header before it.  SpoolError says what is wrong."""
    ends = [
        at + len(sep) for sep in (b"\r\n\r\n", b"\n\n", b"\n\r\n") if (at := data.find(sep)) >= 0
    ]
    if not ends:
        if len(data) >= _HEAD_LIMIT:
            raise SpoolError(f"no end of the header within {_HEAD_LIMIT // 1024} KiB")
        raise SpoolError("the header has no blank line after it (a torn file?)")
    end = min(ends)
    lines = data[:end].replace(b"\r\n", b"\n").split(b"\n")
    while lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        raise SpoolError("empty header")
    pattern = _REQUEST_LINE if request else _STATUS_LINE
    match = pattern.fullmatch(lines[0].rstrip(b"\r"))
    if match is None:
        what = "request line" if request else "status line"
        raise SpoolError(f"bad {what} {lines[0][:80].decode('latin-1')!r}")
    # both patterns have three groups: method, target, version or version, status, reason
    one, two, three = ((g or b"").decode("latin-1") for g in match.groups())
    headers: list[tuple[str, str]] = []
    for n, line in enumerate(lines[1:], 2):
        if line[:1] in (b" ", b"\t") and headers:
            folded_name, folded = headers[-1]
            headers[-1] = (folded_name, folded + " " + line.strip().decode("latin-1"))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise SpoolError(f"header line {n} is not 'Name: value': {line[:80]!r}")
        headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
    return Head((one, two, three), headers, end)


def _read_url(path: Path) -> URL:
    """The URL a U file names (WWWOFFLE writes it without a newline)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpoolError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    text = raw.strip(b"\r\n\t ")
    if not text:
        raise SpoolError(f"{path.name} is empty")
    try:
        return canonicalize(text)
    except InvalidURL as exc:
        raise SpoolError(f"{path.name}: {exc}") from None


def _without(
    headers: list[tuple[str, str]], name: str, value: str | None = None
) -> list[tuple[str, str]]:
    """``headers`` less ``name`` (only its ``value`` among comma-separated values, if given)."""
    out: list[tuple[str, str]] = []
    for n, v in headers:
        if n.lower() != name:
            out.append((n, v))
        elif value is not None:
            rest = [p.strip() for p in v.split(",") if p.strip().lower() != value]
            if rest:
                out.append((n, ", ".join(rest)))
    return out


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for n, v in headers if n.lower() == name), None)


class _Pages:
    """Imports the D/U pairs of one host folder."""

    def __init__(self, store: Store, report: ImportReport) -> None:
        self.store = store
        self.report = report

    def folder(self, proto: str, folder: Path) -> None:
        names = set()
        for p in folder.iterdir():
            if p.is_symlink():
                self.report.skip(p, "a symbolic link: not followed (a spool holds files)")
            elif p.is_file():
                names.add(p.name)
        for name in sorted(names):
            path = folder / name
            if name.startswith("U"):
                if "D" + name[1:] not in names:
                    self.report.skip(path, "U file without its D file (a page not fetched yet)")
            elif name.startswith("D") and name.endswith("~"):
                self.report.skip(path, "a backup copy WWWOFFLE kept while refetching")
            elif name.startswith("D"):
                if "U" + name[1:] not in names:
                    self.report.skip(path, "D file without its U file: its URL is unknown")
                    continue
                try:
                    self.page(proto, path, folder / ("U" + name[1:]))
                except SpoolError as exc:
                    self.report.skip(path, str(exc))
            elif not name.startswith("."):
                self.report.skip(path, "not a WWWOFFLE cache file (D or U)")

    def page(self, proto: str, d_path: Path, u_path: Path) -> None:
        url = _read_url(u_path)
        if url.proto != proto:
            raise SpoolError(f"its URL {url.canonical} is not {proto}")
        if _host_part(d_path.parent.name) != url.host.strip("[]").lower():
            raise SpoolError(
                f"its URL {url.canonical} is not of the host folder {d_path.parent.name}"
            )
        if "!POST:" in url.file or "!PUT:" in url.file:
            raise SpoolError("the answer to a POST or PUT: its request body is not in the spool")
        try:
            f = open(  # noqa: SIM115 (closed below); not through a link put there meanwhile
                os.open(d_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb"
            )
        except OSError as exc:
            raise SpoolError(f"cannot read: {exc.strerror or exc}") from None
        with f:
            stat = os.fstat(f.fileno())
            if stat.st_size == 0:
                raise SpoolError("empty D file (a fetch that never finished)")
            # a time in the future would keep the page fresh, and unasked, for years
            date = datetime.fromtimestamp(int(min(stat.st_mtime, time.time())), UTC)
            key = url.file
            if any(parse_timestamp(c.timestamp) == date for c in self.store.captures(key)):
                raise SpoolError(f"already imported ({url.canonical} at {date:%Y-%m-%d %H:%M:%S})")
            try:
                head = parse_head(f.read(_HEAD_LIMIT))
            except OSError as exc:
                raise SpoolError(f"cannot read: {exc.strerror or exc}") from None
            f.seek(head.length)
            version, status, reason = head.first
            headers = head.headers
            with self._body(f, headers) as (body, headers):
                self._store(url, key, int(status), reason, version, headers, body, date)
        self.report.pages.append(Imported(url.canonical, int(status), date))

    @contextlib.contextmanager
    def _body(
        self, f: BinaryIO, headers: list[tuple[str, str]]
    ) -> Iterator[tuple[IO[bytes], list[tuple[str, str]]]]:
        """The body to store (uncompressed if WWWOFFLE compressed it) and its headers."""
        pragma = _header(headers, "pragma") or ""
        if not (_COMPRESSED in pragma.lower() and _header(headers, "content-encoding")):
            yield f, fit_content_length(headers, os.fstat(f.fileno()).st_size - f.tell())
            return
        headers = _without(_without(headers, "pragma", _COMPRESSED), "content-encoding")
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL, dir=str(self.store.tmp_dir)) as spool:
            try:
                with gzip.GzipFile(fileobj=f, mode="rb") as z:
                    shutil.copyfileobj(z, spool)
            except (OSError, EOFError, zlib.error) as exc:
                raise SpoolError(f"its body, compressed by WWWOFFLE, is damaged: {exc}") from None
            size = spool.tell()
            spool.seek(0)
            yield spool, fit_content_length(headers, size)

    def _store(
        self,
        url: URL,
        key: str,
        status: int,
        reason: str,
        version: str,
        headers: list[tuple[str, str]],
        body: IO[bytes],
        date: datetime,
    ) -> None:
        request = HTTPRequest("GET", [("Host", url.hostport)], b"", target=url.path_args)
        response = HTTPResponse(status, reason, sanitize_headers(headers), body, version=version)
        try:
            self.store.put(url, key, request, response, date=date)
        except ValueError as exc:  # a header the WARC record cannot hold
            raise SpoolError(str(exc)) from None
        except (OSError, StoreError, WARCWriteError) as exc:
            raise SpoolError(f"cannot be recorded: {exc}") from None


def _queue_one(queue: OutgoingQueue, o_path: Path, u_path: Path) -> str:
    """Queue one O/U pair; returns its URL.  SpoolError if it cannot be."""
    url = _read_url(u_path)
    try:
        data = o_path.read_bytes()
    except OSError as exc:
        raise SpoolError(f"cannot read: {exc.strerror or exc}") from None
    head = parse_head(data[:_HEAD_LIMIT], request=True)
    method = head.first[0].upper()
    body = data[head.length :]
    length = _header(head.headers, "content-length")
    if length is not None and length.strip().isdigit() and int(length) < len(body):
        body = body[: int(length)]
    try:
        key = request_key(url.file, method, _header(head.headers, "content-type"), body)
    except ValueError as exc:
        raise SpoolError(f"method {method}: {exc}") from None
    headers = tuple((n, v) for n, v in end_to_end(head.headers) if n.lower() not in _NOT_QUEUED)
    request = QueuedRequest(url=url.file, key=key, method=method, headers=headers, body=body)
    try:
        added = queue.add(request)
    except OSError as exc:
        raise SpoolError(f"cannot be queued: {exc.strerror or exc}") from None
    if not added:
        raise SpoolError(f"{url.canonical} is queued already")
    return url.canonical


def _outgoing(queue: OutgoingQueue, folder: Path, report: ImportReport) -> None:
    names = {p.name for p in folder.iterdir() if p.is_file()}
    for name in sorted(names):
        path = folder / name
        if name.startswith("O"):
            if "U" + name[1:] not in names:
                report.skip(path, "queued request without its U file: its URL is unknown")
                continue
            try:
                report.queued.append(_queue_one(queue, path, folder / ("U" + name[1:])))
            except SpoolError as exc:
                report.skip(path, str(exc))
        elif name.startswith("U"):
            if "O" + name[1:] not in names:
                report.skip(path, "U file without its O file (no request to queue)")
        elif not name.startswith("."):
            report.skip(path, "not a WWWOFFLE queue file (O or U)")


def _host_part(folder: str) -> str:
    """The host of a spool host folder (``host``, ``host:port``, ``[v6]:port``)."""
    name = folder.lower()
    if name.startswith("["):
        return name[1 : name.find("]")] if "]" in name else name
    return name.split(":", 1)[0]


def _folders(spool: Path) -> Iterator[Path]:
    try:
        return iter(sorted(p for p in spool.iterdir() if p.is_dir() and not p.is_symlink()))
    except OSError as exc:
        raise SpoolError(f"{spool}: cannot list: {exc.strerror or exc}") from None


def import_spool(store: Store, queue: OutgoingQueue, spool: Path) -> ImportReport:
    """Import every page and queued request of the WWWOFFLE spool ``spool`` (read only)."""
    spool = Path(spool)
    if not spool.is_dir():
        raise SpoolError(f"{spool}: no such folder")
    if not any((spool / name).is_dir() for name in (*_RECORDED, "outgoing", "ftp")):
        raise SpoolError(
            f"{spool}: not a WWWOFFLE spool (no http/, https/ or outgoing/ folder in it)"
        )
    report = ImportReport()
    pages = _Pages(store, report)
    for folder in _folders(spool):
        name = folder.name
        if name == "outgoing":
            _outgoing(queue, folder, report)
        elif name in _RECORDED:
            for host in _folders(folder):
                pages.folder(name, host)
        elif name in _OWN_FOLDERS or name.startswith("."):
            continue
        else:
            count = sum(1 for _ in folder.rglob("D*"))
            report.skip(
                folder,
                f"{name} pages are not imported ({count} of them): wwwproxy records HTTP "
                "and HTTPS only",
            )
    return report
