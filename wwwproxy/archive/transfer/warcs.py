"""``wwwproxy import FILE|DIR...``: WARC files other tools wrote (wget's ``--warc-file``,
Webrecorder's crawlers, ArchiveWeb.page, an earlier ``wwwproxy export``) brought into the cache.

What is read: ``.warc`` and ``.warc.gz`` files, WACZ files (their ``archive/*.warc[.gz]``) and
directories, searched recursively for those (a pywb collection's ``archive/`` among them).
Records are read strictly (:func:`~wwwproxy.archive.warc.read_records`: lengths and digests
checked) and streamed: no WARC is ever held whole.

Each ``response`` (or ``revisit``) with an HTTP(S) URI becomes one exchange of the cache,
recorded at its own WARC-Date under the key the proxy would look it up by: the canonical URL's,
or for a non-GET request recorded beside it (``WARC-Concurrent-To``) pywb's non-GET key.  A
chunked body is stored de-chunked.  A revisit gets the payload of the record it refers to
(imported before it, or already in the cache): the cache file of its key then holds what
serving it needs, a full response or a revisit of the same key's copy.

The writing is in bulk: exchanges are gathered in batches (bounded in count and bytes), each
batch's are appended one cache file at a time and flushed together, and their index lines go
into the index journal in one append per batch; the index is compacted once, at the end.
A capture already in the cache (same key, time and payload) is not recorded again.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, BinaryIO

from ...http.policy import is_servable
from ...url import URL, InvalidURL, canonicalize
from ...url.requestkey import request_key
from ..cdxj import CDXJRecord
from ..index_lines import index_line
from ..recorder import compress_level_for
from ..store import Store, StoreError
from ..warc import (
    HTTPRequest,
    HTTPResponse,
    PendingRecord,
    PreviousPayload,
    RecordLocation,
    StoredRecord,
    WARCFormatError,
    WARCWriteError,
    append_exchange,
    build_exchange,
    fit_content_length,
    format_warc_date,
    newest_response,
    open_payload,
    parse_warc_date,
    read_record_at,
    read_records,
    sanitize_headers,
)
from ..warc.read import read_payload
from ..warc.record import b32encode

__all__ = ["ImportError_", "WarcImport", "find_inputs", "import_warcs"]

#: what an input file's name ends with, and what it is
WARC_SUFFIXES = (".warc", ".warc.gz")
WACZ_SUFFIX = ".wacz"
#: exchanges and payload bytes gathered before a batch is written
BATCH_EXCHANGES = 2000
BATCH_BYTES = 64 * 1024 * 1024
#: a body larger than this goes to a temporary file while its batch gathers
_SPOOL_MEMORY = 1024 * 1024
#: request records kept to pair a response with (they come just before or after it)
_RECENT_REQUESTS = 256
#: record IDs of imported responses kept for the revisits that name them
_KNOWN_ORIGINALS = 100_000
#: records of a kind that are no capture: not skipped, not errors
_NOT_CAPTURES = frozenset(
    {"warcinfo", "request", "metadata", "resource", "conversion", "continuation"}
)
_CHUNK = 64 * 1024
_MAX_CHUNK_LINE = 1024


class ImportError_(ValueError):  # noqa: N801 (ImportError is Python's own)
    """An input that cannot be imported at all (nothing is imported then)."""


@dataclass
class WarcImport:
    """What an import did: files and records read, captures recorded, and what it left and
    why (``skipped``: reason -> how many, with the first few places; ``damaged``: files it
    could read only in part)."""

    inputs: int = 0
    files: int = 0
    records: int = 0
    imported: int = 0
    payload_bytes: int = 0
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)

    def skip(self, where: str, reason: str) -> None:
        self.skipped[reason] += 1
        places = self.examples.setdefault(reason, [])
        if len(places) < 3:
            places.append(where)


@dataclass(frozen=True)
class _Input:
    """One WARC to read: ``path`` on disk, or ``member`` of the WACZ at ``path``."""

    path: Path
    member: str | None = None

    def __str__(self) -> str:
        return f"{self.path}!{self.member}" if self.member else str(self.path)


def _is_warc(name: str) -> bool:
    return name.endswith(WARC_SUFFIXES)


def find_inputs(paths: Iterable[Path]) -> list[_Input]:
    """The WARCs to import from the files and directories named: ImportError_ (before anything
    is read) for a name that is missing, a file that is neither a WARC nor a WACZ, a WACZ with
    no WARC in it, or a directory with neither in it."""
    found: list[_Input] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and (_is_warc(p.name) or p.name.endswith(WACZ_SUFFIX))
            )
            if not inside:
                raise ImportError_(f"{path}: no WARC (.warc, .warc.gz) or WACZ file in it")
            for p in inside:
                found.extend(_file_inputs(p))
        elif path.is_file():
            found.extend(_file_inputs(path))
        elif path.exists():
            raise ImportError_(f"{path}: not a file or a directory")
        else:
            raise ImportError_(f"{path}: no such file or directory")
    return found


def _file_inputs(path: Path) -> list[_Input]:
    if _is_warc(path.name):
        with open(path, "rb") as f:
            start = f.read(5)
        if start and start[:2] != b"\x1f\x8b" and start != b"WARC/":
            raise ImportError_(f"{path}: not a WARC file (it starts with {start!r})")
        return [_Input(path)]
    if path.name.endswith(WACZ_SUFFIX):
        try:
            with zipfile.ZipFile(path) as zf:
                names = sorted(n for n in zf.namelist() if n.startswith("archive/") and _is_warc(n))
        except (zipfile.BadZipFile, OSError) as exc:
            raise ImportError_(f"{path}: not a WACZ (ZIP) file: {exc}") from None
        if not names:
            raise ImportError_(f"{path}: a WACZ with no archive/*.warc[.gz] in it")
        return [_Input(path, name) for name in names]
    raise ImportError_(f"{path}: not a WARC (.warc, .warc.gz) or WACZ (.wacz) file")


@contextlib.contextmanager
def _on_disk(source: _Input, tmp_dir: Path) -> Iterator[Path]:
    """The WARC as a file (a WACZ's member copied out, for the time it is read)."""
    if source.member is None:
        yield source.path
        return
    suffix = ".warc.gz" if source.member.endswith(".gz") else ".warc"
    with tempfile.TemporaryDirectory(dir=tmp_dir, prefix="import-") as tmp:
        out = Path(tmp) / ("member" + suffix)
        with (
            zipfile.ZipFile(source.path) as zf,
            zf.open(source.member) as src,
            open(out, "wb") as dst,
        ):
            shutil.copyfileobj(src, dst, _CHUNK)
        yield out


# --- bodies -----------------------------------------------------------------------------------


class _BadChunks(ValueError):
    """A body that says it is chunked but is not (stored de-chunked already)."""


def _dechunk(stream: BinaryIO) -> Iterator[bytes]:
    """The data of a chunked body (RFC 9112 §7.1), trailers dropped; _BadChunks if it is not."""
    while True:
        line = stream.readline(_MAX_CHUNK_LINE)
        if not line.endswith(b"\n"):
            raise _BadChunks("a chunk size line")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadChunks("a chunk size") from None
        if size < 0:
            raise _BadChunks("a chunk size")
        if size == 0:
            return
        while size:
            data = stream.read(min(size, _CHUNK))
            if not data:
                raise _BadChunks("a chunk cut off")
            size -= len(data)
            yield data
        if stream.readline(_MAX_CHUNK_LINE).strip(b"\r\n"):
            raise _BadChunks("no line end after a chunk")


def _header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    return next((v for n, v in headers if n.lower() == name), None)


@dataclass
class _Body:
    """A payload as it will be stored: in memory or spooled, with its length and SHA-1."""

    data: IO[bytes]
    length: int
    digest: str

    @classmethod
    def read(cls, record: StoredRecord, chunked: bool, tmp_dir: Path) -> _Body:
        spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY, dir=str(tmp_dir))  # noqa: SIM115
        if chunked:
            with open_payload(record) as stream:
                try:
                    return cls._fill(spool, _dechunk(stream))
                except _BadChunks:  # a body stored de-chunked with its header kept
                    spool.seek(0)
                    spool.truncate()
        with open_payload(record) as stream:
            return cls._fill(spool, iter(lambda: stream.read(_CHUNK), b""))

    def copy(self, tmp_dir: Path) -> _Body:
        """The same body in a spool of its own."""
        self.data.seek(0)
        return _Body._fill(
            tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY, dir=str(tmp_dir)),  # noqa: SIM115
            iter(lambda: self.data.read(_CHUNK), b""),
        )

    @classmethod
    def _fill(cls, spool: IO[bytes], chunks: Iterator[bytes]) -> _Body:
        sha, length = hashlib.sha1(), 0
        for chunk in chunks:
            spool.write(chunk)
            sha.update(chunk)
            length += len(chunk)
        spool.seek(0)
        return cls(spool, length, "sha1:" + b32encode(sha.digest()))


# --- exchanges --------------------------------------------------------------------------------


@dataclass
class _Exchange:
    """One capture to record: where, when, the request and response, and its body."""

    url: URL
    key: str
    date: datetime
    request: HTTPRequest
    status: int
    reason: str
    version: str
    headers: list[tuple[str, str]]
    body: _Body
    source_id: str
    where: str

    @property
    def identity(self) -> tuple[str, str]:
        """What makes two captures of a key the same one: their time and payload."""
        return format_warc_date(self.date), self.body.digest

    def response(self) -> HTTPResponse:
        self.body.data.seek(0)
        return HTTPResponse(self.status, self.reason, self.headers, self.body.data, self.version)


class _Skip(Exception):
    """A record that is not imported; the message says why."""


def _status_line(record: StoredRecord) -> tuple[str, int, str]:
    line = record.http_start_line
    parts = line.split(" ", 2) if line else []
    if len(parts) < 2 or not parts[1].isdigit():
        raise _Skip("no HTTP status line (not an HTTP response)")
    return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""


def _request_of(request: StoredRecord | None, url: URL) -> tuple[HTTPRequest, str]:
    """The request to record (the one recorded beside the response, else a plain GET) and
    the archive key it gives."""
    if request is None or not request.http_start_line:
        return HTTPRequest("GET", [("Host", url.hostport)], b"", target=url.path_args), url.file
    method, target, version = (request.http_start_line.split(" ") + ["", ""])[:3]
    body = read_payload(request) if method.upper() not in ("GET", "HEAD") else b""
    try:
        key = request_key(url.file, method, _header(request.http_headers, "content-type"), body)
    except ValueError as exc:
        raise _Skip(f"its request: {exc}") from None
    headers = sanitize_headers(request.http_headers)
    return HTTPRequest(method, headers, body, target=target or url.path_args, version=version), key


class _Originals:
    """Where the payloads of imported responses went, by their record ID in the input (the
    newest :data:`_KNOWN_ORIGINALS`), for the revisits that refer to them."""

    def __init__(self) -> None:
        self._by_id: collections.OrderedDict[str, tuple[str, int]] = collections.OrderedDict()

    def note(self, source_id: str, path: Path, offset: int) -> None:
        self._by_id[source_id] = (str(path), offset)
        if len(self._by_id) > _KNOWN_ORIGINALS:
            self._by_id.popitem(last=False)

    def find(self, store: Store, revisit: StoredRecord) -> StoredRecord | None:
        """The stored response holding the revisit's payload: the one imported from the
        record it names, else in the cache file of the URL it refers to, one with its payload
        digest."""
        place = self._by_id.get(revisit.refers_to or "")
        if place is not None:
            with contextlib.suppress(OSError, WARCFormatError):
                return read_record_at(*place)
        uri = revisit.refers_to_target_uri or revisit.target_uri
        try:
            url = canonicalize(uri or "")
        except InvalidURL:
            return None
        path = store.path_for(url, url.file)
        digest = revisit.payload_digest
        with contextlib.suppress(OSError):
            for record in read_records(path):
                if record.rec_type == "response" and record.payload_digest == digest:
                    return record
        return None


# --- writing in batches -----------------------------------------------------------------------


class _NoFlush:
    """Stands for the store's GroupSync while a batch is appended: the batch's files are
    flushed together once it is written (:meth:`_Batches.flush`)."""

    def sync(self, paths: Iterable[object]) -> None:
        return None


class _Batches:
    """Exchanges gathered and written a batch at a time (see the module's docstring)."""

    def __init__(self, store: Store, report: WarcImport, originals: _Originals) -> None:
        self.store, self.report, self.originals = store, report, originals
        self.pending: list[_Exchange] = []
        #: the pending exchanges by the input's record ID of their response
        self.by_id: dict[str, _Exchange] = {}
        self.pending_bytes = 0

    def add(self, exchange: _Exchange) -> None:
        self.pending.append(exchange)
        self.by_id[exchange.source_id] = exchange
        self.pending_bytes += exchange.body.length
        if len(self.pending) >= BATCH_EXCHANGES or self.pending_bytes >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        batch, self.pending, self.pending_bytes = self.pending, [], 0
        self.by_id = {}
        by_file: dict[Path, list[_Exchange]] = {}
        for exchange in batch:
            by_file.setdefault(self.store.path_for(exchange.url, exchange.key), []).append(exchange)
        lines: list[CDXJRecord] = []
        touched: set[Path] = set()
        try:
            for path, exchanges in by_file.items():
                lines.extend(self._write_file(path, exchanges))
                touched.update((path, path.parent))
            self.store.sync.sync(p for p in touched if p.exists())
            if lines:
                self.store.index.add(lines)
        finally:
            for exchange in batch:
                exchange.body.data.close()

    def _write_file(self, path: Path, exchanges: list[_Exchange]) -> list[CDXJRecord]:
        """Append the exchanges of one cache file not in it already; their index lines."""
        key = exchanges[0].key
        seen = _captures_in(path, key)
        newest = newest_response(path, archive_key=key, accept=_servable)
        previous = newest.previous() if newest is not None else None
        lines: list[CDXJRecord] = []
        for exchange in exchanges:
            if exchange.identity in seen:
                self.report.skip(exchange.where, "a capture the cache holds already")
                continue
            seen.add(exchange.identity)
            response = exchange.response()
            try:
                records = build_exchange(
                    target_uri=exchange.url.canonical,
                    archive_key=key,
                    request=exchange.request,
                    response=response,
                    date=exchange.date,
                    previous=previous,
                )
                locations = append_exchange(
                    path,
                    records,
                    compress_level=compress_level_for(response),
                    sync=_NoFlush(),
                )
            except ValueError as exc:  # a header a WARC record cannot hold
                self.report.skip(exchange.where, f"cannot be recorded: {exc}")
                continue
            lines.extend(self._recorded(path, key, exchange, records, locations))
            if records[-1].info.rec_type == "response" and is_servable(exchange.status):
                previous = PreviousPayload.from_record(records[-1].info)
        return lines

    def _recorded(
        self,
        path: Path,
        key: str,
        exchange: _Exchange,
        records: list[PendingRecord],
        locations: Sequence[RecordLocation],
    ) -> list[CDXJRecord]:
        name = self.store.warcfile_name(path)
        self.report.imported += 1
        self.report.payload_bytes += exchange.body.length
        response, place = records[-1], locations[-1]
        if response.info.rec_type == "response":
            self.originals.note(exchange.source_id, path, place.offset)
        return [
            index_line(key, rec.info, name, loc.offset, loc.length)
            for rec, loc in zip(records, locations, strict=True)
            if rec.info.rec_type in ("response", "revisit")
        ]


def _servable(record: StoredRecord) -> bool:
    return is_servable(record.status or 200)


def _captures_in(path: Path, key: str) -> set[tuple[str, str]]:
    """(time, payload digest) of every capture of ``key`` in its cache file."""
    seen: set[tuple[str, str]] = set()
    with contextlib.suppress(FileNotFoundError):
        for record in read_records(path):
            if record.rec_type in ("response", "revisit") and record.archive_key == key:
                with contextlib.suppress(ValueError):
                    date = format_warc_date(parse_warc_date(record.date))
                    seen.add((date, record.payload_digest or ""))
    return seen


# --- reading one WARC -------------------------------------------------------------------------


class _Reader:
    """Turns the records of one WARC into exchanges, pairing each response with its request."""

    def __init__(self, batches: _Batches, name: str) -> None:
        self.store, self.report, self.originals = batches.store, batches.report, batches.originals
        self.batches, self.name = batches, name
        self.requests: collections.OrderedDict[str, StoredRecord] = collections.OrderedDict()

    def exchanges(self, path: Path) -> Iterator[_Exchange]:
        problems: list[WARCFormatError] = []
        waiting: StoredRecord | None = None  # a response whose request may come next
        for record in read_records(path, problems):
            self.report.records += 1
            if record.rec_type == "request":
                self.requests[record.record_id] = record
                if len(self.requests) > _RECENT_REQUESTS:
                    self.requests.popitem(last=False)
            if waiting is not None and (record.rec_type != "request" or _pairs(record, waiting)):
                yield from self._one(waiting)
                waiting = None
            if record.rec_type in ("response", "revisit"):
                if self._request_for(record) is None and record.concurrent_to:
                    waiting = record
                else:
                    yield from self._one(record)
            elif record.rec_type not in _NOT_CAPTURES:
                self.report.skip(self._where(record), f"a {record.rec_type} record")
        if waiting is not None:
            yield from self._one(waiting)
        for problem in problems:
            where = f"{self.name}: at offset {problem.offset}"
            if problem.kind == "record":
                self.report.skip(where, f"a damaged record: {problem.reason}")
            else:
                self.report.damaged.append(f"{where}: {problem.reason}; nothing after it is read")

    def _where(self, record: StoredRecord) -> str:
        return f"{self.name}#{record.offset}"

    def _request_for(self, response: StoredRecord) -> StoredRecord | None:
        for rid in response.concurrent_to:
            if rid in self.requests:
                return self.requests[rid]
        return next(
            (r for r in self.requests.values() if response.record_id in r.concurrent_to), None
        )

    def _one(self, record: StoredRecord) -> Iterator[_Exchange]:
        try:
            yield self._exchange(record)
        except _Skip as skip:
            self.report.skip(self._where(record), str(skip))
        except (OSError, WARCFormatError) as exc:
            self.report.skip(self._where(record), f"cannot be read: {exc}")

    def _exchange(self, record: StoredRecord) -> _Exchange:
        uri = record.target_uri
        if not uri or not uri.lower().startswith(("http://", "https://")):
            raise _Skip("no HTTP(S) URI")
        try:
            url = canonicalize(uri)
        except InvalidURL as exc:
            raise _Skip(f"its URI cannot be used: {exc}") from None
        payload = record
        twin = self.batches.by_id.get(record.refers_to or "")
        if record.rec_type == "revisit" and twin is not None and record.http_head:
            # its original is in the batch not written yet: the same body once more
            return self._made(record, url, record, twin.body.copy(self.store.tmp_dir))
        if record.rec_type == "revisit":
            original = self.originals.find(self.store, record)
            if original is None and self.batches.pending:  # in the batch not written yet?
                self.batches.flush()
                original = self.originals.find(self.store, record)
            if original is None:
                raise _Skip("a revisit whose original is neither in the import nor in the cache")
            payload = original
        heads = record if record.http_head or payload is record else payload
        chunked = (
            payload is record
            and "chunked" in (_header(heads.http_headers, "transfer-encoding") or "").lower()
        )
        return self._made(record, url, heads, _Body.read(payload, chunked, self.store.tmp_dir))

    def _made(self, record: StoredRecord, url: URL, heads: StoredRecord, body: _Body) -> _Exchange:
        """The exchange of ``record`` (its status and headers those of ``heads``) with ``body``."""
        try:
            return self._exchange_of(record, url, heads, body)
        except BaseException:
            body.data.close()
            raise

    def _exchange_of(
        self, record: StoredRecord, url: URL, heads: StoredRecord, body: _Body
    ) -> _Exchange:
        version, status, reason = _status_line(heads)
        if status < 200:
            raise _Skip("a 1xx interim answer")
        try:
            date = parse_warc_date(record.date)
        except ValueError as exc:
            raise _Skip(str(exc)) from None
        request, key = _request_of(self._request_for(record), url)
        headers = [(str(n), str(v)) for n, v in sanitize_headers(heads.http_headers)]
        headers = fit_content_length(headers, body.length)
        return _Exchange(
            url, key, date, request, status, reason, version, headers, body,
            record.record_id, self._where(record),
        )  # fmt: skip


def _pairs(request: StoredRecord, response: StoredRecord) -> bool:
    return (
        request.record_id in response.concurrent_to or response.record_id in request.concurrent_to
    )


# --- the whole import -------------------------------------------------------------------------


def import_warcs(
    store: Store,
    paths: Iterable[Path],
    progress: Callable[[WarcImport, float], None] | None = None,
) -> WarcImport:
    """Import every WARC in ``paths`` (files, WACZ files, directories) into ``store``;
    ImportError_ before anything is written if one of them names nothing importable.
    ``progress`` is called now and then (and at the end) with the report so far and the
    seconds since the start."""
    inputs = find_inputs([Path(p) for p in paths])
    report = WarcImport(inputs=len(inputs))
    originals = _Originals()
    batches = _Batches(store, report, originals)
    start = last = time.monotonic()
    for source in inputs:
        report.files += 1
        try:
            with _on_disk(source, store.tmp_dir) as path:
                reader = _Reader(batches, str(source))
                for exchange in reader.exchanges(path):
                    batches.add(exchange)
                    now = time.monotonic()
                    if progress is not None and now - last >= 1:
                        progress(report, now - start)
                        last = now
        except (OSError, zipfile.BadZipFile) as exc:
            report.damaged.append(f"{source}: cannot be read: {exc}")
    batches.flush()
    try:
        store.index.compact()
    except (OSError, StoreError, WARCWriteError) as exc:
        report.damaged.append(f"the index could not be compacted ({exc}); `index rebuild` will")
    if progress is not None:
        progress(report, time.monotonic() - start)
    return report
