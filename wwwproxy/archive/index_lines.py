"""The store's CDXJ index lines: which records are indexed, the line a record gets, and the
whole index rebuilt or checked against the cache files (``wwwproxy index rebuild|check``).
Apart from :mod:`.store` because this upkeep reads every cache file and serves no request;
the store calls it through :meth:`.Store.rebuild_index` and :meth:`.Store.check_index`, with
its CDXJ index and itself as the :class:`CacheFiles` to read."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import tempfile
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..url import surt
from .cdxj import CDXJError, CDXJRecord, Index, make_ref
from .cdxj.merge import DEFAULT_RUN_LINES, _external_sort
from .errors import StoreError
from .warc import (
    RecordInfo,
    WARCFormatError,
    read_record_at,
    read_records,
    repair_file,
    sha1_base32,
)

__all__ = [
    "INDEXED_TYPES",
    "CacheFiles",
    "ScanTally",
    "check_index",
    "index_line",
    "rebuild_index",
    "scan",
    "scan_workers",
]

#: the record types the index has lines for
INDEXED_TYPES = ("response", "revisit")
HEADER_VALUE_LIMIT = 1024


class CacheFiles(Protocol):
    """The cache files the index is made from and checked against (a
    :class:`~.store.Store`): every file, the ``warcfile:`` name of one, and the file a name
    in a key's line refers to (StoreError if none of ours)."""

    def warc_files(self) -> Iterator[Path]: ...

    def warcfile_name(self, path: Path) -> str: ...

    def resolve_warcfile(self, name: str, key: str) -> Path: ...


def index_line(key: str, info: RecordInfo, name: str, offset: int, length: int) -> CDXJRecord:
    """The index line of the record ``info`` for archive key ``key``, ``length`` bytes at
    ``offset`` in the cache file ``name`` (a put, a rebuild, a purge's rewrite)."""
    mime = info.http_header("Content-Type")
    optional: dict[str, object] = {
        "sha": sha1_base32(info.payload_digest),
        "hsc": info.status,
        "mct": mime.split(";", 1)[0].strip()[:HEADER_VALUE_LIMIT] if mime else None,
        "rid": info.record_id,
        "rle": length,
    }
    if info.rec_type == "response":
        optional["ple"] = info.payload_length  # the page's size, for the host index
    if info.rec_type == "revisit":
        optional["rou"] = info.refers_to_target_uri
        optional["rod"] = info.refers_to_date
        optional["roi"] = info.refers_to
    return CDXJRecord.build(
        surt(key),
        info.date,
        info.rec_type,
        uri=key,
        ref=make_ref(name, offset),
        **optional,
    )


def scan(
    files: CacheFiles, problems: list[str], repaired: list[str] | None = None
) -> Iterator[CDXJRecord]:
    """Index lines for every complete record in every cache file; with ``repaired``, torn
    tails are cut off each file first (:func:`repair_file`) and said there."""
    for _, line in _scan_files(files, problems, repaired):
        yield line


def _scan_files(
    files: CacheFiles, problems: list[str], repaired: list[str] | None = None
) -> Iterator[tuple[Path, CDXJRecord]]:
    """:func:`scan`'s lines, each with the cache file it was read from."""
    for path in files.warc_files():
        for line in _scan_file(path, files.warcfile_name(path), problems, repaired):
            yield path, line


def _scan_file(
    path: Path, name: str, problems: list[str], repaired: list[str] | None
) -> Iterator[CDXJRecord]:
    """The index lines of one cache file (``warcfile:`` ``name``), its torn tail cut off
    first if ``repaired`` is given; what cannot be read or indexed is said in ``problems``."""
    if repaired is not None:
        try:
            end = repair_file(path)
        except OSError as exc:
            problems.append(f"{path}: cannot repair: {exc.strerror or exc}")
        else:
            if end == 0:
                repaired.append(f"{path}: held only a torn record: removed")
                return
            if end is not None:
                repaired.append(f"{path}: torn tail cut off at offset {end}")
    found: list[WARCFormatError] = []
    try:
        for rec in read_records(path, found):
            if rec.rec_type not in INDEXED_TYPES:
                continue
            key = rec.archive_key or rec.target_uri
            if not key:
                problems.append(f"{path}: at offset {rec.offset}: record has no key or URI")
                continue
            try:
                yield index_line(key, rec, name, rec.offset, rec.length)
            except (CDXJError, ValueError) as exc:
                problems.append(f"{path}: at offset {rec.offset}: {exc}")
    except OSError as exc:  # unreadable (permissions) or gone: the other files still count
        problems.append(f"{path}: cannot read: {exc.strerror or exc}")
    problems.extend(str(p) for p in found)


#: cache files a worker process scans per task (:func:`rebuild_index`)
SCAN_CHUNK_FILES = 256
#: chunks given out to the workers and not yet taken back, per worker: the bound on the
#: scanned lines held in memory, whatever the size of the cache
CHUNKS_IN_FLIGHT = 2

#: a worker's task: cache files and their ``warcfile:`` names
_Chunk = list[tuple[Path, str]]
#: what a worker gives back for a chunk: its lines' bytes, problems and repairs
_ChunkScan = tuple[list[bytes], list[str], list[str]]


@dataclass
class ScanTally:
    """How a rebuild's scan went: the cache files it read, and the processes that read them
    (1: the calling process alone)."""

    files: int = 0
    workers: int = 1


def scan_workers() -> int:
    """The worker processes a rebuild's scan uses by default: one per usable CPU."""
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return max(1, count or 1)


def rebuild_index(
    index: Index,
    files: CacheFiles,
    repaired: list[str] | None = None,
    *,
    workers: int | None = None,
    tally: ScanTally | None = None,
) -> tuple[int, list[str]]:
    """Rebuild the whole ``index`` from the cache files, cutting torn tails off them first
    (what was cut is added to ``repaired``); returns (lines, problems).

    The files are read by ``workers`` processes (default :func:`scan_workers`), in chunks
    of :data:`SCAN_CHUNK_FILES` taken in walk order, so the lines, problems and repairs are
    those of a scan in one process; a cache of fewer than two chunks is read in this process
    (starting workers would cost more). ``tally`` is told the files read and the workers."""
    problems: list[str] = []
    lines = _rebuild_lines(
        files,
        problems,
        repaired if repaired is not None else [],
        workers if workers is not None else scan_workers(),
        tally if tally is not None else ScanTally(),
    )
    count = index.rebuild(lines)
    return count, problems


def _rebuild_lines(
    files: CacheFiles, problems: list[str], repaired: list[str], workers: int, tally: ScanTally
) -> Iterator[CDXJRecord]:
    """The rebuild's lines in walk order: read here, or by up to ``workers`` processes."""
    chunks = _chunks(files, tally)
    ahead = list(itertools.islice(chunks, max(workers, 2)))
    if workers < 2 or sum(map(len, ahead)) < 2 * SCAN_CHUNK_FILES:
        tally.workers = 1
        for chunk in itertools.chain(ahead, chunks):
            for path, name in chunk:
                yield from _scan_file(path, name, problems, repaired)
        return
    tally.workers = min(workers, len(ahead))
    yield from _scan_in_workers(itertools.chain(ahead, chunks), tally.workers, problems, repaired)


def _chunks(files: CacheFiles, tally: ScanTally) -> Iterator[_Chunk]:
    """The cache files with their ``warcfile:`` names, in walk order, a chunk at a time."""
    walk = ((path, files.warcfile_name(path)) for path in files.warc_files())
    while chunk := list(itertools.islice(walk, SCAN_CHUNK_FILES)):
        tally.files += len(chunk)
        yield chunk


def _scan_in_workers(
    chunks: Iterator[_Chunk], workers: int, problems: list[str], repaired: list[str]
) -> Iterator[CDXJRecord]:
    """The chunks scanned by a pool of ``workers`` processes, a few chunks ahead, their
    results taken back in order. Spawned, not forked: the caller may have threads."""
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        pending: deque[Future[_ChunkScan]] = deque()
        for chunk in chunks:
            pending.append(pool.submit(_scan_chunk, chunk))
            if len(pending) >= workers * CHUNKS_IN_FLIGHT:
                yield from _taken(pending.popleft().result(), problems, repaired)
        while pending:
            yield from _taken(pending.popleft().result(), problems, repaired)
    finally:  # (a rebuild that failed, or stopped reading: what is left is not wanted)
        pool.shutdown(cancel_futures=True)


def _scan_chunk(chunk: _Chunk) -> _ChunkScan:
    """In a worker: a chunk of cache files scanned as the rebuild's scan does (torn tails
    cut off): its lines' bytes, problems and repairs."""
    problems: list[str] = []
    repaired: list[str] = []
    lines = [
        line.sort_key for path, name in chunk for line in _scan_file(path, name, problems, repaired)
    ]
    return lines, problems, repaired


def _taken(scanned: _ChunkScan, problems: list[str], repaired: list[str]) -> Iterator[CDXJRecord]:
    """A worker's chunk: its problems and repairs said, its lines as records."""
    lines, chunk_problems, chunk_repaired = scanned
    problems.extend(chunk_problems)
    repaired.extend(chunk_repaired)
    for raw in lines:
        yield CDXJRecord.parse_line(raw)


#: index refs held in memory per sorted run while ``check`` sorts them (:func:`check_index`)
CHECK_RUN_LINES = DEFAULT_RUN_LINES
#: what separates the fields of a sorted ref (none of them holds it)
_SEP = b"\x00"


def _place_key(path: Path, offset: int) -> bytes:
    """(cache file, offset) as bytes that sort as :meth:`CacheFiles.warc_files` walks the
    files (folder by folder: a path's parts joined by a byte below any other) and then by
    offset."""
    return os.fsencode(path).replace(b"/", _SEP) + _SEP + _SEP + b"%020d" % offset


@dataclass(frozen=True)
class _Ref:
    """An index line's claim: at ``offset`` in ``path`` is a ``record_type`` record of ``uri``
    (``where``: the line's file and number; ``ref``: as the line writes it)."""

    place: bytes
    path: Path
    offset: int
    where: str
    record_type: str
    uri: str
    ref: str

    def encode(self) -> bytes:
        fields = (self.where, self.record_type, self.uri, self.ref)
        return self.place + _SEP + _SEP.join(os.fsencode(f) for f in fields)

    @classmethod
    def decode(cls, line: bytes) -> _Ref:
        head, _, rest = line.partition(_SEP + _SEP)
        offset, where, record_type, uri, ref = rest.split(_SEP, 4)
        path = Path(os.fsdecode(head.replace(_SEP, b"/")))
        return cls(
            head + _SEP + _SEP + offset,
            path,
            int(offset),
            *(os.fsdecode(f) for f in (where, record_type, uri, ref)),
        )


def check_index(index: Index, files: CacheFiles) -> list[str]:
    """Every index problem: malformed or unsorted lines, refs to missing files or to
    offsets that hold no matching record, and cache records the index lacks.

    In memory that does not grow with the index: the lines' refs are sorted (externally,
    spilled to a temporary dot-folder beside the index's folder, which no scan of the cache
    files enters) by cache file and offset, and merged
    with one scan of the cache files in that order (the scan a rebuild makes); only a line
    whose ref the scan did not find is looked up on its own, to say what is wrong with it."""
    problems = index.check()
    with tempfile.TemporaryDirectory(prefix=".check-", dir=Path(index.directory).parent) as tmp:
        refs = _external_sort(_refs(index, files, problems), tmp, CHECK_RUN_LINES)
        scan_problems: list[str] = []
        claims = _Claims(_Ref.decode(line) for line in refs)
        for path, line in _scan_files(files, scan_problems):
            ref = line.warcfile
            if ref is None:
                continue
            place = _place_key(path, ref[1])
            for claim in claims.before(place):
                problems.extend(_unmatched(claim))
            found = claims.at(place)
            if not found:
                problems.append(f"{ref[0]}#{ref[1]}: record not in the index ({line.uri})")
            for claim in found:
                if line.record_type != claim.record_type:
                    problems.append(
                        f"{claim.where}: ref {claim.ref} is a {line.record_type} record, "
                        f"the line says {claim.record_type}"
                    )
                if line.uri != claim.uri:
                    problems.append(
                        f"{claim.where}: ref {claim.ref} holds another URL ({line.uri})"
                    )
        for claim in claims.rest():  # no indexed record there: read it to say why
            problems.extend(_unmatched(claim))
    return problems + scan_problems


class _Claims:
    """The sorted refs, taken in order as the scan passes their places."""

    def __init__(self, refs: Iterator[_Ref]) -> None:
        self._refs = refs
        self._next: _Ref | None = next(refs, None)

    def _take(self) -> _Ref:
        assert self._next is not None
        taken, self._next = self._next, next(self._refs, None)
        return taken

    def before(self, place: bytes) -> Iterator[_Ref]:
        while self._next is not None and self._next.place < place:
            yield self._take()

    def at(self, place: bytes) -> list[_Ref]:
        found = []
        while self._next is not None and self._next.place == place:
            found.append(self._take())
        return found

    def rest(self) -> Iterator[_Ref]:
        while self._next is not None:
            yield self._take()


def _refs(index: Index, files: CacheFiles, problems: list[str]) -> Iterator[bytes]:
    """Every index line's ref as a sortable :class:`_Ref`; lines whose ref names no cache
    file of ours are said in ``problems``."""
    for source, lineno, record in _index_lines(index):
        where = f"{source}:{lineno}"
        ref = record.warcfile
        if ref is None:
            problems.append(f"{where}: ref {record.ref!r} is not a warcfile: reference")
            continue
        try:
            path = files.resolve_warcfile(ref[0], record.uri)
        except StoreError as exc:
            problems.append(f"{where}: ref {record.ref}: {exc}")
            continue
        place = _place_key(path, ref[1])
        yield _Ref(place, path, ref[1], where, record.record_type, record.uri, record.ref).encode()


def _unmatched(claim: _Ref) -> list[str]:
    """What is wrong with an index line whose ref the scan found no indexed record at."""
    where = claim.where
    try:
        stored = read_record_at(claim.path, claim.offset)
    except (WARCFormatError, OSError) as exc:
        return [f"{where}: ref {claim.ref}: {exc}"]
    if stored.rec_type != claim.record_type:
        return [
            f"{where}: ref {claim.ref} is a {stored.rec_type} record, "
            f"the line says {claim.record_type}"
        ]
    if (stored.archive_key or stored.target_uri) != claim.uri:
        return [f"{where}: ref {claim.ref} holds another URL ({stored.target_uri})"]
    return [f"{where}: ref {claim.ref}: the record there could not be indexed"]


def _index_lines(index: Index) -> Iterator[tuple[str, int, CDXJRecord]]:
    """Valid lines of the index and journals with their places (``check`` reports the
    invalid ones)."""
    for path in index.files():
        try:
            f = open(path, "rb")  # noqa: SIM115 (closed below)
        except OSError:  # gone, or unreadable: Index.check reports the latter
            continue
        with f:
            for lineno, raw in enumerate(f, 1):
                if raw.startswith(b"!") or not raw.endswith(b"\n"):
                    continue
                with contextlib.suppress(CDXJError):
                    yield str(path), lineno, CDXJRecord.parse_line(raw)
