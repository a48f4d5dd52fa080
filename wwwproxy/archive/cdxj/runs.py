"""The sorted runs of an index and when they are merged: the log-structured part of ``Index``.

An index is ``index.cdxj`` (the oldest, largest sorted run: what other tools read as the
index) plus newer sorted runs ``run-<time>.cdxj`` beside it, each made by a compaction from the
journals and maybe some of the newest runs. Rewriting the whole index on every compaction
costs what the index weighs for every few hundred captures: quadratic in its size over the
cache's life (5 MB written per capture at ten million). Merging only the newest runs while
they are small beside the next older one (:func:`runs_to_merge`, a geometric rule with ratio
:data:`RATIO`) writes each line a handful of times over its life and keeps the runs few (about
``log_RATIO(index / journal)``: 6–7 at ten million captures), so a lookup bisects a few sparse
indexes instead of one.

Each run written here gets a sidecar ``.<name>.keys`` holding its sparse index (the keys
sampled every ``block_size`` bytes and their offsets, :class:`Samples`), made while the run is
written, so that opening a run reads that summary, not the run; it names the run's device,
inode, size and mtime, and is ignored (and the run sampled as before) when they differ.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BLOOM_BITS",
    "RATIO",
    "Bloom",
    "bloom_for",
    "RUN_RE",
    "Samples",
    "keys_path",
    "read_keys",
    "run_name",
    "sample_key",
    "runs_to_merge",
    "write_keys",
]

#: a run is merged into the next older one once it is at least 1/RATIO of that one's size:
#: 4 gives about 14 writes of a line over its life and at most 7 runs at ten million captures
RATIO = 4
#: bits of a run's Bloom filter a line (with 4 hashes: about 1.2 % false "may hold")
BLOOM_BITS = 10
_BLOOM_HASHES = 4
RUN_RE = re.compile(r"run-[0-9]{20}\.cdxj\Z")
_MAGIC = b"wwwproxy-cdxj-keys 2"
#: a sample is a line's key and the space after it, cut at this many bytes (a longer key is
#: cut: searches stay right, only their reads get longer)
SAMPLE_MAX = 256


def sample_key(head: bytes) -> bytes:
    """What a sample keeps of the line ``head`` starts: its key and the space after it."""
    end = head.find(b"\n")
    if end >= 0:
        head = head[:end]
    space = head.find(b" ", 0, SAMPLE_MAX)
    return head[: space + 1] if space >= 0 else head[:SAMPLE_MAX]


def run_name(stamp_ns: int) -> str:
    """The file name of a run made at ``stamp_ns`` (names sort oldest first)."""
    return f"run-{stamp_ns:020d}.cdxj"


def runs_to_merge(new_bytes: int, runs: Sequence[int], ratio: int = RATIO) -> int:
    """How many of the existing runs (their sizes, newest first, ``index.cdxj`` last) a
    compaction of ``new_bytes`` of journal lines merges with them: the newest ones, for as
    long as what is merged so far is more than 1/``ratio`` of the next one's size.

    So the runs stay in sizes that grow at least ``ratio``-fold from the newest to the
    oldest, and a line is rewritten only when the runs newer than its own have grown to a
    fraction of it. ``len(runs)`` means all of them: the result is a new ``index.cdxj``."""
    merged = new_bytes
    count = 0
    for size in runs:
        if merged * ratio <= size:
            break
        merged += size
        count += 1
    return count


class Bloom:
    """Which keys a run may hold (a Bloom filter: never a false "no", about 1 % false "yes"
    at :data:`BLOOM_BITS` bits a line), so that looking up a key searches only the runs that
    may hold it, and a lookup stays one search however many runs there are."""

    __slots__ = ("bits", "size")

    def __init__(self, size: int, bits: bytearray | None = None) -> None:
        self.size = max(64, size)
        self.bits = bits if bits is not None else bytearray((self.size + 7) // 8)

    @staticmethod
    def hash(key: bytes) -> int:
        """The hash of ``key`` every filter uses (made once for a lookup in many runs)."""
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")

    def _places(self, h: int) -> Iterator[int]:
        first, step = h & 0xFFFFFFFF, (h >> 32) | 1
        return ((first + n * step) % self.size for n in range(_BLOOM_HASHES))

    def add(self, key: bytes) -> None:
        bits = self.bits
        for place in self._places(self.hash(key)):
            bits[place >> 3] |= 1 << (place & 7)

    def may_hold(self, h: int) -> bool:
        """Whether the key whose :meth:`hash` is ``h`` may be in the run (False: it is not)."""
        bits, size = self.bits, self.size
        first, step = h & 0xFFFFFFFF, (h >> 32) | 1
        for n in range(_BLOOM_HASHES):  # (_places, written out: every lookup asks each run)
            place = (first + n * step) % size
            if not bits[place >> 3] & (1 << (place & 7)):
                return False
        return True


@dataclass
class Samples:
    """A sorted run's sparse index: where its records start, and the key of the first line
    starting at or after every ``block_size`` bytes from there, with that line's offset
    (``keys[n]`` starts the line at ``offsets[n]``); its line count, and with ``bloom``, which
    keys it holds."""

    block_size: int
    start: int
    keys: list[bytes] = field(default_factory=list)
    offsets: array[int] = field(default_factory=lambda: array("q"))
    bloom: Bloom | None = None
    lines: int = 0
    _next: int = -1

    def feed(self, pos: int, line: bytes) -> None:
        """Every line of the run as it is written, with its offset (in order)."""
        self.lines += 1
        if self.bloom is not None:
            self.bloom.add(line[: line.find(b" ")])
        if pos >= self._next:
            self.keys.append(sample_key(line))
            self.offsets.append(pos)
            self._next = pos + self.block_size


def bloom_for(lines: int) -> Bloom:
    """An empty filter for a run of at most about ``lines`` lines."""
    return Bloom(lines * BLOOM_BITS)


def keys_path(path: str | os.PathLike[str]) -> Path:
    """The sidecar of the run at ``path``."""
    target = Path(path)
    return target.parent / f".{target.name}.keys"


def _fingerprint(st: os.stat_result, samples: Samples) -> bytes:
    # no ctime: a rename changes it, and the sidecar is written before its run is renamed in
    # (so that no reader ever opens the run without it); an edit in place changes the mtime
    fields = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    bloom = samples.bloom.size if samples.bloom is not None else 0
    numbers = (*fields, samples.block_size, samples.start, len(samples.keys), samples.lines, bloom)
    return _MAGIC + b" " + b" ".join(str(n).encode() for n in numbers) + b"\n"


def write_keys(path: str | os.PathLike[str], st: os.stat_result, samples: Samples) -> None:
    """Keep ``samples`` beside the run that will be at ``path`` (as ``st``, its descriptor's
    ``fstat``, describes it). Not fsynced: one lost in a crash is made again."""
    sidecar = keys_path(path)
    offsets = samples.offsets
    if sys.byteorder != "little":
        offsets = array("q", offsets)
        offsets.byteswap()
    fd, tmp = tempfile.mkstemp(prefix=f"{sidecar.name}.", suffix=".tmp", dir=sidecar.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_fingerprint(st, samples))
            f.write(offsets.tobytes())
            if samples.bloom is not None:
                f.write(samples.bloom.bits)
            f.write(b"\n".join(samples.keys))
        os.replace(tmp, sidecar)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_keys(path: str | os.PathLike[str], st: os.stat_result, block_size: int) -> Samples | None:
    """The samples kept beside the run at ``path`` if they describe exactly the file ``st``
    describes with ``block_size`` (else ``None``: the run is sampled instead)."""
    try:
        with open(keys_path(path), "rb") as f:
            data = f.read()
    except OSError:
        return None
    head, newline, rest = data.partition(b"\n")
    parts = head.split(b" ")
    if not newline or len(parts) != 11 or b" ".join(parts[:2]) != _MAGIC:
        return None
    try:
        numbers = [int(n) for n in parts[2:]]
    except ValueError:
        return None
    block, start, count, lines, bloom_size = numbers[4:]
    fields = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if tuple(numbers[:4]) != fields or block != block_size or count < 1:
        return None
    offsets = array("q")
    width = offsets.itemsize * count
    offsets.frombytes(rest[:width])
    if sys.byteorder != "little":
        offsets.byteswap()
    bloom = None
    if bloom_size:
        bloom = Bloom(bloom_size, bytearray(rest[width : width + (bloom_size + 7) // 8]))
        width += len(bloom.bits)
    keys = rest[width:].split(b"\n")
    if len(keys) != count or len(offsets) != count or (bloom and bloom.size != bloom_size):
        return None
    return Samples(block, start, keys, offsets, bloom, lines)


def forget_keys(path: str | os.PathLike[str]) -> None:
    """Remove the sidecar of ``path`` (its run is gone or replaced by an unsampled file)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(keys_path(path))
