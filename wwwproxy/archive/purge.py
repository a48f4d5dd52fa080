"""Cache size and history limits (WWWOFFLE's Purge): which captures and cache files go, and
removing them without losing anything else.

The decisions are pure functions in :mod:`.purge_plan`, tested by tables: ``keep_members``
(which records of one cache file stay under ``keep_captures``) and ``plan_files`` (which files
go under ``purge_after_days`` and ``max_size``); they are named here too, for callers.
:func:`purge` gathers the facts and carries the plan out:

- a page with more than ``keep_captures`` captures has its file rewritten with the records it
  keeps, under the file's lock (an append waits, then goes to the new file): the kept gzip
  members are copied byte for byte into a temporary file beside it, which is fsynced, given
  the old file's modification time (its last fetch) and renamed over it.  The newest capture,
  the one served (keep-the-good-copy), the response a kept revisit refers to and the requests
  of kept captures always stay;
- pages over their ``purge_after_days`` rule, then the least recently used while the cache
  files take more than ``max_size``, are removed (down to :data:`LOW_WATER` of it);
- the index follows: the moved records' new lines in one journal append, then one compaction
  (lines of removed and moved records go), and the store's listeners (the search index) hear
  of it.  A file that changed also changes its (size, mtime) stamp, so the memory cache and
  ``Store.located`` drop what they held of it on their next hit.

A purge killed midway loses nothing it did not mean to remove: every file is the old one or
the new one.  ``index/purge.pending`` names the files it was changing; the next purge (or
``wwwproxy index rebuild``) puts their index lines right first.

"Recently used" is the later of a file's modification time (its newest capture) and the last
time the proxy served it: :class:`~wwwproxy.archive.store.Store` notes served keys in a dict
(no I/O on the hit path), and :func:`flush_used` appends them to ``index/used.log`` (every
minute under ``wwwproxy serve``: at most a minute of use is forgotten by a crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..fsutil import atomic_write, fsync_dir, lock_if_still_at
from ..url import surt, url_hash
from .cdxj import CDXJRecord
from .cdxj.index import _open_locked_journal  # the one locked append: the used log is a journal
from .purge_plan import (
    CAPTURES,
    DAY,
    LOW_WATER,
    Limits,
    Member,
    PageFacts,
    Removal,
    keep_members,
    plan_files,
)
from .store import WARC_SUFFIX, Moved, Store, StoreError
from .warc import StoredRecord, WARCFormatError, read_records

__all__ = [
    "LOW_WATER",
    "Limits",
    "Member",
    "PageFacts",
    "PurgeResult",
    "Removal",
    "Trimmed",
    "flush_used",
    "keep_members",
    "plan_files",
    "purge",
    "purge_loop",
    "read_used",
    "trim_file",
]

log = logging.getLogger(__name__)

USED_LOG = "used.log"  # in <cache>/index/: "<epoch seconds> <proto>/<host>/<hash>.warc.gz"
PENDING = "purge.pending"  # in <cache>/index/: the files a purge is changing
LAST_PURGE = "purged"  # in <cache>/index/: its modification time is the last purge's end
PURGE_LOCK = ".purge.lock"  # in <cache>/index/: held by the purge under way
_TEMP_SUFFIX = ".purge"
_COPY_CHUNK = 1 << 20


# --- when pages were served ------------------------------------------------------------------


def _used_path(store: Store) -> Path:
    return store.index.directory / USED_LOG


def flush_used(store: Store) -> int:
    """Append the keys served since the last flush to ``index/used.log`` (one line each, no
    fsync: losing the last lines in a crash costs only a little precision); how many."""
    served, store.served = store.served, {}
    lines = []
    for key, when in served.items():
        try:
            path = store.resolve_warcfile(url_hash(key) + WARC_SUFFIX, key)
        except StoreError:
            continue
        lines.append(f"{when:.0f} {path.relative_to(store.root).as_posix()}\n")
    if not lines:
        return 0
    fd = _open_locked_journal(_used_path(store))
    try:
        os.write(fd, "".join(lines).encode())
    finally:
        os.close(fd)
    return len(lines)


def read_used(store: Store) -> dict[str, float]:
    """Cache file (``<proto>/<host>/<hash>.warc.gz``) -> when it was last served."""
    used: dict[str, float] = {}
    try:
        with open(_used_path(store), "rb") as f:
            for raw in f:
                when, _, name = raw.decode("utf-8", "replace").rstrip("\n").partition(" ")
                try:
                    moment = float(when)
                except ValueError:
                    continue  # a torn or foreign line
                if name and moment > used.get(name, 0.0):
                    used[name] = moment
    except FileNotFoundError:
        pass
    return used


def _compact_used(store: Store, existing: set[str]) -> None:
    """Rewrite the log with one line per cache file still there (under its lock: a flush
    waits, then appends to the new file)."""
    path = _used_path(store)
    if not path.exists():
        return
    fd = _open_locked_journal(path)
    try:
        used = read_used(store)
        text = "".join(f"{t:.0f} {n}\n" for n, t in sorted(used.items()) if n in existing)
        atomic_write(path, text, new_mode=0o600)
    finally:
        os.close(fd)


# --- carrying it out ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Trimmed:
    """Old captures dropped (or, in a dry run, to drop) from one cache file."""

    name: str
    url: str
    captures: int
    freed: int
    moved: Moved | None = None


@dataclass
class PurgeResult:
    """What a purge removed (or, with ``dry_run``, would remove)."""

    dry_run: bool
    files_before: int = 0
    bytes_before: int = 0
    removed: list[tuple[Removal, int]] = field(default_factory=list)  # with its captures
    trimmed: list[Trimmed] = field(default_factory=list)
    healed: int = 0  # files whose index lines a killed purge had left wrong

    @property
    def files_removed(self) -> int:
        return len(self.removed)

    @property
    def captures_removed(self) -> int:
        return sum(n for _, n in self.removed) + sum(t.captures for t in self.trimmed)

    @property
    def bytes_freed(self) -> int:
        return sum(r.page.size for r, _ in self.removed) + sum(t.freed for t in self.trimmed)

    @property
    def bytes_after(self) -> int:
        return self.bytes_before - self.bytes_freed

    def summary(self) -> str:
        """One line: files, captures and bytes freed, and what is left."""
        verb, take = ("would free", "would take") if self.dry_run else ("freed", "now take")
        return (
            f"{verb} {_size(self.bytes_freed)} ({self.bytes_freed} bytes): "
            f"{self.files_removed} file(s) removed, {self.captures_removed} capture(s) in all "
            f"({len(self.trimmed)} file(s) trimmed); the cache files {take} "
            f"{_size(self.bytes_after)} in {self.files_before - self.files_removed} file(s)"
        )


def _size(n: int) -> str:
    size: float = n
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError


@contextlib.contextmanager
def _locked(path: Path):  # noqa: ANN202 (a context manager of an int)
    """The cache file's exclusive lock (None when the file is gone)."""
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            yield None
            return
        try:
            if lock_if_still_at(fd, path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _records(path: Path) -> list[StoredRecord] | None:
    """Every record of the file, or None if any is damaged (a damaged file is left to
    ``index rebuild``: a purge never cuts what it cannot read)."""
    problems: list[WARCFormatError] = []
    try:
        records = list(read_records(path, problems))
    except FileNotFoundError:
        return None
    if problems:
        log.warning("purge: %s left as it is: %s", path, problems[0])
        return None
    return records


def _key_of(records: Sequence[StoredRecord]) -> str:
    return next((r.archive_key or r.target_uri or "" for r in records), "")


def _remove_temps(path: Path) -> None:
    """Temporary files of a rewrite of ``path`` killed midway (we hold its lock)."""
    for temp in path.parent.glob(f".{path.name}.*{_TEMP_SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def _copy_members(src: int, path: Path, members: Sequence[Member], st: os.stat_result) -> None:
    """Write ``members`` (byte ranges of ``src``) into a new file that replaces ``path``:
    temporary file, fsync, the old mode and times, rename."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for m in members:
                done = 0
                while done < m.length:
                    chunk = os.pread(src, min(_COPY_CHUNK, m.length - done), m.offset + done)
                    if not chunk:
                        raise OSError(f"{path}: ends inside the record at {m.offset}")
                    out.write(chunk)
                    done += len(chunk)
            out.flush()
            os.fchmod(out.fileno(), st.st_mode & 0o7777)
            os.fsync(out.fileno())
        os.utime(temp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(temp, path)  # made durable with the folder's fsync at the end of the purge
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def trim_file(
    store: Store,
    path: Path,
    keep_captures: int,
    *,
    dry_run: bool,
    indexed: int | None = None,
) -> Trimmed | None:
    """Drop the captures of one cache file beyond ``keep_captures`` (:func:`keep_members`):
    rewrite it under its lock; the index lines it needs now are in the result's ``moved``
    (:func:`purge` adds them, and fsyncs the folder, for all files at once).  None when
    nothing is to go (or the file is gone or damaged), or when the file holds more captures
    than the ``indexed`` lines the purge read: a recording appends its records under the
    file's lock but writes their index lines just after, and those would point at records
    the rewrite moved (the next purge trims it)."""
    with _locked(path) as fd:
        if fd is None:
            return None
        if not dry_run:
            _remove_temps(path)
        records = _records(path)
        if not records:
            return None
        members = [Member.of(r) for r in records]
        if indexed is not None and sum(m.rec_type in CAPTURES for m in members) > indexed:
            return None  # a recording's index lines are still to come
        kept = keep_members(members, keep_captures)
        if len(kept) == len(members):
            return None
        name = store.warcfile_name(path)
        url = _key_of(records)
        kept_at = {m.offset for m in kept}
        dropped = [m for m in members if m.offset not in kept_at]
        captures = sum(1 for m in dropped if m.rec_type in CAPTURES)
        freed = sum(m.length for m in dropped)
        if dry_run:
            return Trimmed(path.relative_to(store.root).as_posix(), url, captures, freed)
        st = os.fstat(fd)
        _copy_members(fd, path, kept, st)
        by_offset = {r.offset: r for r in records}
        lines, new_places, offset = [], set(), 0
        for m in kept:
            record = by_offset[m.offset]
            if m.rec_type in CAPTURES:
                key = record.archive_key or record.target_uri or url
                lines.append(store.index_line(key, record, name, offset, m.length))
                new_places.add((offset, m.record_id))
            offset += m.length
        old_places = {(m.offset, m.record_id) for m in members if m.rec_type in CAPTURES}
        moved = Moved(name, url, tuple(lines), frozenset(old_places - new_places))
        return Trimmed(path.relative_to(store.root).as_posix(), url, captures, freed, moved)


def _heal(store: Store, relpath: str) -> tuple[str | None, Moved | None]:
    """Put right the index lines of a file a killed purge was changing: ``(name, None)`` if
    it is gone (its lines go), else its lines as the file is now (under its lock: lines for
    records appended later are not touched)."""
    parts = relpath.split("/")
    if len(parts) != 3 or not parts[2].endswith(WARC_SUFFIX) or {"", ".", ".."} & set(parts):
        return None, None  # not a cache file's name: a foreign line
    path = store.root / relpath
    with _locked(path) as fd:
        if fd is None:
            return path.name, None
        _remove_temps(path)
        records = _records(path)
        if not records:
            return None, None
        key = _key_of(records)
        name = store.warcfile_name(path)
        lines = [
            store.index_line(r.archive_key or r.target_uri or key, r, name, r.offset, r.length)
            for r in records
            if r.rec_type in CAPTURES
        ]
        actual = {(r.offset, r.record_id) for r in records if r.rec_type in CAPTURES}
        indexed = set()
        for line in store.index.captures(surt(key)):
            ref = line.warcfile
            rid = line.fields.get("rid")
            if ref is not None and ref[0] == name and isinstance(rid, str):
                indexed.add((ref[1], rid))
        return None, Moved(name, key, tuple(lines), frozenset(indexed - actual))


def _index_facts(store: Store) -> tuple[dict[str, str], Counter[str]]:
    """From the index: each cache file's (``warcfile:`` name's) key, and its captures."""
    keys: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for line in store.list_prefix(""):
        ref = line.warcfile
        if ref is not None:
            keys[ref[0]] = line.uri
            counts[ref[0]] += 1
    return keys, counts


def _first_key(path: Path) -> str:
    """The key of a file the index does not know (its first record's)."""
    with contextlib.suppress(OSError, WARCFormatError):
        for record in read_records(path):
            return record.archive_key or record.target_uri or ""
    return ""


def purge(
    store: Store, limits: Limits, *, dry_run: bool = False, now: float | None = None
) -> PurgeResult:
    """Enforce ``limits`` on the cache (see the module's docstring); with ``dry_run`` only
    say what would go.  One purge at a time (a second, of any process, waits for the first).
    Blocks: run it in a thread."""
    if dry_run:
        return _purge(store, limits, dry_run=True, now=now)
    fd = os.open(store.index.directory / PURGE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _purge(store, limits, dry_run=False, now=now)
    finally:
        os.close(fd)


def _purge(store: Store, limits: Limits, *, dry_run: bool, now: float | None) -> PurgeResult:
    now = time.time() if now is None else now
    result = PurgeResult(dry_run)
    pending = store.index.directory / PENDING
    gone: list[str] = []
    moved: list[Moved] = []
    if not dry_run and pending.exists():  # a purge was killed midway: its files first
        for relpath in pending.read_text("utf-8", "replace").splitlines():
            name, healed = _heal(store, relpath)
            if name is not None:
                gone.append(name)
            if healed is not None:
                moved.append(healed)
            result.healed += 1
    keys, counts = _index_facts(store)
    used = read_used(store)
    pages: dict[str, PageFacts] = {}
    for path in store.warc_files():
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        relpath = path.relative_to(store.root).as_posix()
        url = keys.get(path.name) or _first_key(path)
        pages[relpath] = PageFacts(relpath, url, st.st_size, st.st_mtime, used.get(relpath))
    result.files_before = len(pages)
    result.bytes_before = sum(p.size for p in pages.values())
    if limits.keep_captures > 0:
        over = [n for n, p in pages.items() if counts[Path(n).name] > limits.keep_captures]
        if over and not dry_run:
            atomic_write(pending, "".join(f"{n}\n" for n in over), new_mode=0o600)
        for relpath in over:
            trimmed = trim_file(
                store,
                store.root / relpath,
                limits.keep_captures,
                dry_run=dry_run,
                indexed=counts[Path(relpath).name],
            )
            if trimmed is None:
                continue
            result.trimmed.append(trimmed)
            page = pages[relpath]
            pages[relpath] = PageFacts(
                relpath, page.url, page.size - trimmed.freed, page.fetched, page.served
            )
            if trimmed.moved is not None:
                moved.append(trimmed.moved)
    removals = plan_files(pages.values(), limits, now)
    if removals and not dry_run:
        touched = [t.name for t in result.trimmed] + [r.page.name for r in removals]
        atomic_write(pending, "".join(f"{n}\n" for n in touched), new_mode=0o600)
    for removal in removals:
        path = store.root / removal.page.name
        if not dry_run:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            gone.append(path.name)
        result.removed.append((removal, counts[path.name]))
    if dry_run:
        return result
    for folder in {(store.root / t.name).parent for t in result.trimmed}:
        fsync_dir(folder)  # the renames, before the index says where records are now
    store.index.add([line for m in moved for line in m.lines])
    store.apply_purge(gone, moved)
    for folder in {(store.root / r.page.name).parent for r in removals}:
        store.remove_empty_host_dir(folder)
    with contextlib.suppress(FileNotFoundError):
        pending.unlink()
    _compact_used(store, set(pages) - {r.page.name for r in removals})
    return result


# --- under wwwproxy serve ----------------------------------------------------------------------


#: what a recording's request record is counted as (its index lines give the length of the
#: response only): an overestimate at worst, which purges a little early
REQUEST_ESTIMATE = 1024


class _Growth:
    """A store listener adding up the bytes recorded since the last purge measured the cache
    (this process's recordings: another process's are seen at the next daily purge)."""

    def __init__(self) -> None:
        self.total: int | None = None  # None: not measured yet

    def on_put(self, url: object, key: str, lines: list[CDXJRecord]) -> None:
        if self.total is not None:
            lengths = (line.fields.get("rle") for line in lines)
            self.total += REQUEST_ESTIMATE + sum(n for n in lengths if isinstance(n, int))

    def on_delete(self, keys: list[str], files: list[str]) -> None:
        """Deletes free space: the next measurement says how much."""


def _last_purge(store: Store) -> float:
    try:
        return (store.index.directory / LAST_PURGE).stat().st_mtime
    except FileNotFoundError:
        return 0.0


async def purge_loop(
    store: Store,
    limits: Callable[[], Limits],
    *,
    tick: float = 60.0,
    every: float = DAY,
    on_purge: Callable[[PurgeResult], None] | None = None,
) -> None:
    """``wwwproxy serve``'s purging: every ``tick`` seconds it writes out which pages were
    served, and purges when the last purge (of any process) is ``every`` seconds old, or,
    with a ``max_size``, when what this process recorded since the last one may have crossed
    it (the size is measured by the first purge after start)."""
    growth = _Growth()
    store.listeners.append(growth)
    try:
        while True:
            await asyncio.sleep(tick)
            try:
                await asyncio.to_thread(flush_used, store)
                current = limits()
                if not current.active:
                    continue
                over = current.max_size > 0 and (
                    growth.total is None or growth.total > current.max_size
                )
                if not over and time.time() - _last_purge(store) < every:
                    continue
                result = await asyncio.to_thread(purge, store, current)
                growth.total = result.bytes_after
                stamp = store.index.directory / LAST_PURGE
                await asyncio.to_thread(atomic_write, stamp, "", new_mode=0o600)
                if result.captures_removed or result.healed:
                    log.info("purge: %s", result.summary())
                if on_purge is not None:
                    on_purge(result)
            except Exception:  # noqa: BLE001 (never fatal: the next tick tries again)
                log.exception("purge failed; will retry")
    finally:
        store.listeners.remove(growth)
        with contextlib.suppress(OSError):
            flush_used(store)
