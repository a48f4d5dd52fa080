"""Tests for the index's sorted runs (wwwproxy.archive.cdxj.runs and Index.compact): when runs
are merged, the sparse index kept beside a run, lookups across runs, what a compaction writes,
and crash safety (a merge killed before it removed what it merged, a kill -9 at any moment)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from wwwproxy.archive.cdxj import Index, IndexFile, write_index
from wwwproxy.archive.cdxj.read import NOT_HELD
from wwwproxy.archive.cdxj.runs import (
    RATIO,
    RUN_RE,
    Bloom,
    bloom_for,
    keys_path,
    read_keys,
    runs_to_merge,
)

from .conftest import random_record, rec

# --------------------------------------------------------------------------------------------
# When runs are merged: a table


@pytest.mark.parametrize(
    ("new", "runs", "ratio", "merged"),
    [
        (100, [], 4, 0),  # nothing to merge with: the journal alone (a first index.cdxj)
        (100, [10_000], 4, 0),  # small beside the index: a new run
        (100, [400], 4, 0),  # exactly 1/4: stays apart
        (101, [400], 4, 1),  # more than 1/4: merged into it
        (100, [50, 10_000], 4, 1),  # the newest run is small beside it: merged; then stops
        (100, [50, 500, 10_000], 4, 2),  # 150 * 4 > 500: that one too; 650 * 4 <= 10000
        (100, [50, 500, 2_000], 4, 3),  # 650 * 4 > 2000: all, a new index.cdxj
        (100, [50, 500, 2_000], 2, 1),  # a smaller ratio merges less often
        (0, [10], 4, 0),
    ],
)
def test_runs_to_merge(new: int, runs: list[int], ratio: int, merged: int) -> None:
    assert runs_to_merge(new, runs, ratio) == merged


def _simulate(journal: int, total: int, ratio: int) -> tuple[float, int]:
    """(bytes written per byte added, most runs at once) for compactions of ``journal``
    bytes until ``total``, as Index.compact applies the rule."""
    runs: list[int] = []  # newest first
    written = added = most = 0
    while added < total:
        added += journal
        merged = runs_to_merge(journal, runs, ratio)
        size = journal + sum(runs[:merged])
        runs = [size, *runs[merged:]]
        written += size
        most = max(most, len(runs))
    return written / added, most


def test_the_rule_writes_a_line_a_few_times_and_keeps_runs_few() -> None:
    """At ten million captures (3.7 GB of lines, a compaction every 256 KiB of journal): a
    line is written about 14 times over its life (a full rewrite each time: 7,000 times), and
    there are at most 7 runs."""
    factor, most = _simulate(256 * 1024, 3_700_000_000, RATIO)
    assert factor < 20 and most <= 7
    full, _ = _simulate(256 * 1024, 3_700_000_000, 10**12)  # (always everything)
    assert full > 1000


# --------------------------------------------------------------------------------------------
# The sparse index kept beside a run


@pytest.mark.parametrize("block_size", [1, 64, 300, 8192])
def test_kept_samples_are_those_the_file_gives(tmp_path: Path, block_size: int) -> None:
    rng = random.Random(block_size)
    records = [random_record(rng) for _ in range(500)]
    path = tmp_path / "index.cdxj"
    from wwwproxy.archive.cdxj import merge

    merge._atomic_write(
        path,
        "!OpenWayback-CDXJ 1.0",
        sorted({r.sort_key for r in records}),
        checked=True,
        block_size=block_size,
    )
    kept = IndexFile(path, block_size=block_size)
    assert kept.from_keys()
    os.unlink(keys_path(path))
    sampled = IndexFile(path, block_size=block_size)
    assert not sampled.from_keys()
    assert kept._current().keys == sampled._current().keys  # type: ignore[union-attr]
    assert kept._current().offsets == sampled._current().offsets  # type: ignore[union-attr]
    for record in records[:50]:
        target = record.key.encode() + b" "
        assert list(kept.lines(target)) == list(sampled.lines(target))


def test_kept_samples_of_another_file_or_block_size_are_not_used(tmp_path: Path) -> None:
    path = tmp_path / "index.cdxj"
    write_index(path, [rec(f"(a,)/{n}") for n in range(300)])
    st = os.stat(path)
    assert read_keys(path, st, 8192) is not None
    assert read_keys(path, st, 4096) is None  # sampled at another spacing
    with open(path, "r+b") as f:  # an edit in place (same size, a new mtime)
        f.seek(st.st_size - 30)
        f.write(b"x")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert read_keys(path, os.stat(path), 8192) is None
    assert not IndexFile(path).from_keys()
    keys_path(path).write_bytes(b"not a summary")
    assert read_keys(path, os.stat(path), 8192) is None


# --------------------------------------------------------------------------------------------
# Compaction into runs


def _grow(index: Index, rng: random.Random, compactions: int, lines: int) -> list[str]:
    keys = []
    for c in range(compactions):
        batch = [rec(f"(org,r{c},)/{n}") for n in range(lines)]
        keys += [r.key for r in batch]
        index.add(batch)
        index.compact()
    return keys


def test_a_small_journal_becomes_a_run_and_the_index_stays(tmp_path: Path) -> None:
    index = Index(tmp_path)
    base = [rec(f"(com,base,)/{n:05d}") for n in range(3000)]
    write_index(index.index_path, base)
    before = os.stat(index.index_path)
    new = [rec(f"(com,new,)/{n}") for n in range(10)]
    index.add(new)
    assert index.compact() == 10  # the run it wrote
    after = os.stat(index.index_path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    runs = [p for p in tmp_path.iterdir() if RUN_RE.match(p.name)]
    assert len(runs) == 1 and keys_path(runs[0]).exists()
    assert index.journal_bytes() == 0
    assert index.exact("(com,new,)/3") == [new[3]]
    assert index.exact("(com,base,)/00007") == [base[7]]
    assert list(index.prefix("(com,")) == sorted(base + new, key=lambda r: r.sort_key)
    assert index.newest("(com,new,)/9") == new[9]
    # and everything merged into one index.cdxj on demand
    assert index.compact(full=True) == 3010
    assert not [p for p in tmp_path.iterdir() if RUN_RE.match(p.name) or ".run-" in p.name]
    assert list(index.prefix("(com,")) == sorted(base + new, key=lambda r: r.sort_key)


def test_runs_stay_few_and_lines_are_written_a_few_times(tmp_path: Path) -> None:
    """Growing an index by many small compactions writes each line a handful of times (a
    rewrite of the whole index each time would write it hundreds of times)."""
    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:05d}") for n in range(2000)])
    line = len(rec("(org,r10,)/10").to_bytes())
    written = 0
    keys: list[str] = []
    for c in range(150):
        batch = [rec(f"(org,r{c},)/{n}") for n in range(10)]
        keys += [r.key for r in batch]
        index.add(batch)
        before = _wchar()
        index.compact()
        written += _wchar() - before
        runs = [p for p in tmp_path.iterdir() if RUN_RE.match(p.name)]
        assert len(runs) <= 6
    assert written / len(keys) < 40 * line  # (each compaction's journal read and file notes too)
    for key in random.Random(1).sample(keys, 100):
        assert [r.key for r in index.exact(key)] == [key]
    assert len(list(index.prefix(""))) == 2000 + len(keys)


def _wchar() -> int:
    with open("/proc/self/io") as f:
        for row in f:
            if row.startswith("wchar:"):
                return int(row.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


def test_a_merge_killed_before_it_removed_its_inputs_duplicates_nothing(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:04d}") for n in range(2000)])
    new = [rec(f"(com,new,)/{n}") for n in range(5)]
    index.add(new)
    index.compact()
    (run,) = [p for p in tmp_path.iterdir() if RUN_RE.match(p.name)]
    # what a merge killed between renaming its output in and removing its inputs leaves: the
    # same lines in two runs (here, the run's lines also in index.cdxj)
    shutil.copy(run, tmp_path / "journal-00000000000000000001-1.sealed")
    index.compact(full=True)
    shutil.copy(tmp_path / "index.cdxj", tmp_path / "run-00000000000000000002.cdxj")
    fresh = Index(tmp_path)
    assert fresh.exact("(com,new,)/2") == [new[2]]
    assert len(list(fresh.prefix(""))) == 2005
    fresh.compact(full=True)
    assert len(list(fresh.prefix(""))) == 2005
    assert len(index.index_path.read_bytes().splitlines()) == 2006  # (the header)


def test_a_lookup_whose_runs_are_merged_away_under_it_finds_everything(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:04d}") for n in range(2000)])
    keys = _grow(index, random.Random(2), 3, 5)
    listing = index._listing()  # a lookup lists the runs ...
    assert len(listing.files) > 1
    other = Index(tmp_path)  # ... then another process merges them all
    other.compact(full=True)
    found = [item[0] for item in index._from_index(b"(org,", listing)]
    assert len(found) == len(keys)


def test_stale_notes_of_runs_are_removed(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:04d}") for n in range(2000)])
    (tmp_path / ".run-00000000000000000005.cdxj.keys").write_bytes(b"x")
    (tmp_path / ".run-00000000000000000005.cdxj.checked").write_bytes(b"x")
    (tmp_path / ".run-00000000000000000005.cdxj.x.tmp").write_bytes(b"x")
    index.add([rec("(b,)/")])
    index.compact()
    left = sorted(p.name for p in tmp_path.iterdir() if "00000000000000000005" in p.name)
    assert left == []


KILLED = """
import sys
from wwwproxy.archive.cdxj import CDXJRecord, Index, make_ref
index = Index(sys.argv[1])
n = 0
while True:
    index.add([CDXJRecord.build(f"(com,k,)/{n + i}", "2026", "response", uri="u",
                                ref=make_ref("f.warc.gz", i)) for i in range(20)])
    n += 20
    print(n, flush=True)  # acknowledged
    if n % 60 == 0:
        index.compact()
"""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_during_compactions_loses_nothing_acknowledged(tmp_path: Path, seed: int) -> None:
    write_index(tmp_path / "index.cdxj", [rec(f"(com,base,)/{n:04d}") for n in range(3000)])
    rng = random.Random(seed)
    acknowledged = 0
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        deadline = time.monotonic() + 10
        wanted = acknowledged + rng.randrange(100, 600)
        while acknowledged < wanted and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            acknowledged = max(acknowledged, int(line))
        time.sleep(rng.random() / 50)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        index = Index(tmp_path)
        found = {r.key for r in index.prefix("(com,k,)/")}
        missing = [n for n in range(acknowledged) if f"(com,k,)/{n}" not in found]
        assert missing == []
        assert index.check() == []
    assert acknowledged > 0


def test_the_compacting_process_takes_a_new_run_without_reading_it(tmp_path: Path) -> None:
    """The process that wrote a run or a new index.cdxj searches it with the samples it took
    as it wrote it: no search samples the file nor reads the samples kept beside it."""
    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:05d}") for n in range(3000)])
    assert index.exact("(com,base,)/00001")
    index.add([rec("(com,new,)/")])
    index.compact()
    index.add([rec("(com,newer,)/")])
    index.compact(full=True)
    for path in tmp_path.iterdir():
        if path.name.endswith(".keys"):
            path.unlink()
    assert index.exact("(com,newer,)/") == [rec("(com,newer,)/")]
    assert index._file.from_keys()  # (a file sampled afresh would say False)
    assert not IndexFile(index.index_path).from_keys()


def test_a_bloom_filter_never_says_no_to_a_key_it_holds() -> None:
    held = [f"(com,h{n},)/p".encode() for n in range(5000)]
    bloom = bloom_for(len(held))
    for key in held:
        bloom.add(key)
    assert all(bloom.may_hold(Bloom.hash(key)) for key in held)
    others = [f"(org,o{n},)/q".encode() for n in range(5000)]
    false_yes = sum(bloom.may_hold(Bloom.hash(key)) for key in others)
    assert false_yes < 0.03 * len(others)


def test_a_run_that_cannot_hold_a_key_is_not_read(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:05d}") for n in range(3000)])
    index.add([rec("(com,new,)/")])
    index.compact()
    (run,) = [p for p in tmp_path.iterdir() if RUN_RE.match(p.name)]
    file = IndexFile(run)
    assert list(file.search_existing(b"(com,new,)/ ", None, Bloom.hash(b"(com,new,)/"))[1])
    assert file.search_existing(b"(com,x,)/ ", None, Bloom.hash(b"(com,x,)/")) is NOT_HELD
    # the sidecar of another version (no filter) is not taken
    keys_path(run).write_bytes(keys_path(run).read_bytes().replace(b"keys 2", b"keys 1"))
    assert not IndexFile(run).from_keys()


def test_an_index_made_by_an_older_version_gets_its_samples_kept_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The upgrade of a cache made before runs: its index.cdxj (no samples beside it) is
    sampled on first opening, as before, and the samples are kept for the next openings."""
    from wwwproxy.archive.cdxj import read

    path = tmp_path / "index.cdxj"
    write_index(path, [rec(f"(com,old,)/{n:05d}") for n in range(3000)])
    keys_path(path).unlink()  # as an older version left it
    monkeypatch.setattr(read, "_KEEP_SAMPLES_OVER", 1024)  # (3000 lines are not 16 MB)
    caplog.set_level("INFO")
    first = IndexFile(path)
    assert not first.from_keys()
    assert "making its sparse index (once" in caplog.text
    assert keys_path(path).exists()
    again = IndexFile(path)
    assert again.from_keys()
    assert list(again.lines(b"(com,old,)/00042 ")) == list(first.lines(b"(com,old,)/00042 "))
    assert Index(tmp_path).exact("(com,old,)/02999") == [rec("(com,old,)/02999")]


def test_a_large_file_let_go_is_closed_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a replaced file's last descriptor frees its cached pages (slow for a large
    file): done by a thread of its own, not by the lookup that let go of it, and never left
    open."""
    from wwwproxy.archive.cdxj import read

    monkeypatch.setattr(read, "_CLOSE_APART_OVER", 0)
    path = tmp_path / "index.cdxj"
    write_index(path, [rec(f"(com,a,)/{n}") for n in range(100)])
    file = IndexFile(path)
    fd = file._current().fd  # type: ignore[union-attr]
    os.fstat(fd)
    del file
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.fstat(fd)
        except OSError:
            break
        time.sleep(0.01)
    with pytest.raises(OSError):
        os.fstat(fd)
    assert any(t.name == "cdxj-closer" for t in threading.enumerate())


def test_a_prefix_over_several_runs_is_streamed(tmp_path: Path) -> None:
    """Reading the whole index (a catalog's build, an export) holds a few lines at a time,
    however many runs there are (a list of every line cost 589 MB at a million lines)."""
    import tracemalloc

    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:05d}") for n in range(20_000)])
    index.add([rec("(com,new,)/")])
    index.compact()
    assert len(index._listing().files) == 2
    tracemalloc.start()
    try:
        records = index.prefix("")
        first = next(records)
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first.key == "(com,base,)/00000"
    assert held < 1_000_000, held
    assert sum(1 for _ in records) == 20_000


class _Killed(Exception):
    pass


@pytest.mark.parametrize("how", ["keep", "rebuild"])
def test_a_delete_killed_before_it_removed_the_runs_brings_nothing_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A new index.cdxj without some lines (a delete's, a rebuild's) supersedes the runs it
    was made from: killed between its rename and their removal, the dropped lines stay gone,
    and the next compaction removes the runs."""
    index = Index(tmp_path)
    write_index(index.index_path, [rec(f"(com,base,)/{n:04d}") for n in range(2000)])
    index.add([rec("(com,gone,)/"), rec("(com,kept,)/")])
    index.compact()
    index.add([rec("(com,gone,)/x")])  # (a sealed journal too)
    runs = [p.name for p in tmp_path.iterdir() if RUN_RE.match(p.name)]
    assert runs

    def killed(merged: list[Path]) -> None:
        raise _Killed  # as kill -9 right after the rename

    monkeypatch.setattr(Index, "_drop", lambda self, merged: killed(merged))
    with pytest.raises(_Killed):
        if how == "keep":
            index.compact(keep=lambda r: not r.key.startswith("(com,gone,)"))
        else:
            index.rebuild(
                [rec(f"(com,base,)/{n:04d}") for n in range(2000)] + [rec("(com,kept,)/")]
            )
    monkeypatch.undo()
    assert set(runs) <= {p.name for p in tmp_path.iterdir()}  # left behind
    fresh = Index(tmp_path)
    assert fresh.exact("(com,gone,)/") == [] and fresh.exact("(com,gone,)/x") == []
    assert list(fresh.prefix("(com,gone,)")) == []
    assert fresh.exact("(com,kept,)/") == [rec("(com,kept,)/")]
    assert all(p.name not in runs for p in fresh.files())
    fresh.add([rec("(org,new,)/")])
    fresh.compact()
    names = {p.name for p in tmp_path.iterdir()}
    assert not set(runs) & names and ".superseded" not in names
    assert not [n for n in names if n.endswith(".sealed")]
    assert fresh.exact("(com,gone,)/") == [] and fresh.exact("(org,new,)/") == [rec("(org,new,)/")]
