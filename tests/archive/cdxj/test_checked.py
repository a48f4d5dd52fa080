"""Tests for the note that a sorted index was checked whole when written (``.checked``): which
writers leave it, that lookups answer alike with and without it, and that any change to the
file afterwards makes its lines checked again; and for lookups in a directory that does not
change (the index's descriptor is ``fstat``-ed instead of its path ``stat``-ed)."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from wwwproxy.archive.cdxj import (
    HEADER_LINE,
    Index,
    IndexFile,
    merge_files,
    write_index,
)
from wwwproxy.archive.cdxj.checked import is_checked
from wwwproxy.archive.cdxj.index import _settled

from .conftest import SHA, TS, lines_of, random_record, rec, write
from .test_sparse import naive_exact

NOTE = ".index.cdxj.checked"


def noted(path: Path) -> bool:
    """Whether the note beside ``path`` says the file as it is now was checked."""
    with open(path, "rb") as f:
        return is_checked(path, os.fstat(f.fileno()))


def settle(directory: Path) -> None:
    """Make the directory's mtime old, so that lookups trust its listing (and the index's
    descriptor) while it does not change."""
    old = time.time_ns() - 60 * 10**9
    os.utime(directory, ns=(old, old))


def test_writers_note_a_checked_index(tmp_path: Path) -> None:
    records = [rec(f"(a,)/{n}") for n in range(5)]
    write_index(tmp_path / "index.cdxj", records)
    assert noted(tmp_path / "index.cdxj")
    assert (tmp_path / NOTE).stat().st_mode & 0o777 == 0o600
    merge_files([tmp_path / "index.cdxj"], tmp_path / "out.cdxj")  # checks every line
    assert noted(tmp_path / "out.cdxj")
    index = Index(tmp_path)
    index.add([rec("(b,)/")])
    assert index.compact(full=True) == 6 and noted(index.index_path)
    assert index.compact(keep=lambda r: r.key != "(b,)/") == 5 and noted(index.index_path)
    assert index.rebuild(records[:2]) == 2 and noted(index.index_path)
    assert index.exact("(a,)/1") == [records[1]] and index.exact("(a,)/3") == []


def test_a_file_written_otherwise_has_no_note_and_compaction_checks_it(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write(index.index_path, HEADER_LINE + "\n" + lines_of([rec("(a,)/"), rec("(c,)/")]))
    assert not noted(index.index_path)
    index.add([rec("(b,)/")])
    assert index.compact() == 3
    assert noted(index.index_path)  # its lines were all checked on the way
    # a bad line: kept (the lookups report it) and the new file has no note, nor the old note
    bad = f"(a,)/ {TS} response {{broken"
    write(index.index_path, HEADER_LINE + "\n" + rec("(a,)/").to_line() + bad + "\n")
    index.add([rec("(d,)/")])
    assert index.compact() == 3
    assert not noted(index.index_path) and not (tmp_path / NOTE).exists()
    assert index.exact("(a,)/") == [rec("(a,)/")]
    assert [p for p in index.problems if "(byte " in p] == [
        f"{index.index_path} (byte {len(HEADER_LINE) + 1 + len(rec('(a,)/').to_line())}): "
        "invalid JSON block: Expecting property name enclosed in double quotes (column 2)"
    ]


@pytest.mark.parametrize("settled", [False, True])
def test_an_edit_in_place_is_checked_again(tmp_path: Path, settled: bool) -> None:
    """Same size, mtime put back: the ctime still differs, so the note no longer holds."""
    index = Index(tmp_path)
    good = [rec("(a,)/"), rec("(b,)/", uri="http://b/")]
    write_index(index.index_path, good)
    if settled:
        settle(tmp_path)
    assert index.exact("(b,)/") == [good[1]] and noted(index.index_path)
    before = index.index_path.stat()
    data = index.index_path.read_bytes()
    broken = data.replace(b'"ref":', b'"rex":', 1).replace(b'/","ref":', b'/","ref" ')
    assert len(broken) == len(data) and broken.count(b'"ref":') == 0  # both lines bad now
    with open(index.index_path, "r+b") as f:
        f.write(broken)
    os.utime(index.index_path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert index.index_path.stat().st_mtime_ns == before.st_mtime_ns
    assert not noted(index.index_path)
    assert index.exact("(a,)/") == [] and index.exact("(b,)/") == []
    assert len([p for p in index.problems if "(byte " in p]) == 2
    assert list(IndexFile(index.index_path).lines(b"(b,)/ "))  # the lines are there


def test_lookups_in_a_settled_directory_see_every_change(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write_index(index.index_path, [rec("(a,)/"), rec("(c,)/")])
    settle(tmp_path)
    assert index.exact("(a,)/") == [rec("(a,)/")] and index.exact("(b,)/") == []
    assert index.exact("(a,)/") == [rec("(a,)/")]  # (now through the descriptor)
    lines = [rec("(a,)/"), rec("(b,)/"), rec("(c,)/")]
    with open(index.index_path, "wb") as f:  # rewritten in place, longer
        f.write((HEADER_LINE + "\n" + lines_of(lines)).encode())
    assert index.exact("(b,)/") == [rec("(b,)/")]
    settle(tmp_path)
    assert index.exact("(b,)/") == [rec("(b,)/")]
    with open(index.index_path, "ab") as f:  # appended to in place
        f.write(rec("(d,)/").to_bytes())
    assert index.exact("(d,)/") == [rec("(d,)/")]
    write_index(index.index_path, [rec("(e,)/")])  # renamed over it
    assert index.exact("(e,)/") == [rec("(e,)/")] and index.exact("(a,)/") == []
    settle(tmp_path)
    assert index.exact("(e,)/") == [rec("(e,)/")]
    index.index_path.unlink()
    assert index.exact("(e,)/") == []
    write_index(tmp_path / "other.cdxj", [rec("(f,)/")])
    settle(tmp_path)
    os.rename(tmp_path / "other.cdxj", index.index_path)  # renamed into a settled directory
    assert index.exact("(f,)/") == [rec("(f,)/")]


def test_a_note_written_after_a_search_opened_the_file_is_seen(tmp_path: Path) -> None:
    """A writer notes the file just after renaming it in; a search may open it between."""
    index = Index(tmp_path)
    write_index(index.index_path, [rec("(a,)/")])
    note = (tmp_path / NOTE).read_bytes()
    (tmp_path / NOTE).unlink()
    settle(tmp_path)
    assert index.exact("(a,)/") == [rec("(a,)/")]
    assert index._file.search(b"(a,)/ ")[0] is False
    (tmp_path / NOTE).write_bytes(note)  # (the directory changes: its listing is made again)
    assert index.exact("(a,)/") == [rec("(a,)/")]  # (not settled yet: the path is stat-ed)
    settle(tmp_path)
    assert index.exact("(a,)/") == [rec("(a,)/")]
    assert index._file.search(b"(a,)/ ", index._listing().token)[0] is True


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lookups_answer_alike_with_and_without_the_note(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    records = [random_record(rng) for _ in range(400)]
    records += [  # lines the fast parser does not take: escapes, extra keys, a revisit's rod
        rec("(com,a,)/q", uri='http://a/"q"\\', sha=SHA),
        rec("(com,a,)/q", "2027", extra=[1, 2], mct="a\u2028b"),
        rec("(com,a,)/q", "2028", "revisit", rou="http://a/", rod="2025-01-01T00:00:00Z"),
        rec("(com,a,)/q", "2029", hsc="304"),
    ]
    write_index(tmp_path / "index.cdxj", records)
    lines = sorted({r.sort_key for r in records})
    by_line = {r.sort_key: r for r in records}
    keys = sorted({r.key for r in records}) + ["(", "(com,a", "(com,a,)/a/", "~"]
    answers = {}
    for with_note in (True, False):
        if not with_note:
            (tmp_path / NOTE).unlink()
        assert noted(tmp_path / "index.cdxj") == with_note
        index = Index(tmp_path, block_size=rng.choice([1, 64, 4096]))
        found = []
        for key in keys:
            expected = [by_line[line] for line in naive_exact(lines, key)]
            exact = index.exact(key)
            assert exact == expected, key
            assert [r.fields for r in exact] == [r.fields for r in expected]
            assert index.newest(key) == (expected[-1] if expected else None)
            responses = index.exact(key, record_types={"response"})
            assert responses == [r for r in expected if r.record_type == "response"]
            found.append([(r.key, r.timestamp, r.record_type, r.fields, r.sort_key) for r in exact])
        assert list(index.prefix("(com,a,)/")) == [
            by_line[line] for line in lines if line.startswith(b"(com,a,)/")
        ]
        answers[with_note] = found
        assert index.problems == []
    assert answers[True] == answers[False]


S = 1_000_000_000


@pytest.mark.parametrize(
    ("mtime_ns", "now_ns", "settled"),
    [
        (100 * S + 123_456_789, 100 * S + 123_456_789 + 51_000_000, True),  # sub-second: 50 ms
        (100 * S + 123_456_789, 100 * S + 123_456_789 + 49_000_000, False),
        (100 * S + 1, 100 * S + 60_000_000, True),
        (100 * S, 100 * S + 60_000_000, False),  # on the whole second: maybe a coarse clock
        (100 * S, 101 * S + 500_000_000, False),
        (100 * S, 102 * S, False),  # (FAT keeps even seconds)
        (100 * S, 102 * S + 1, True),
        (100 * S + 5, 100 * S, False),  # in the future (a clock set back): never
    ],
)
def test_a_directory_is_settled_once_older_than_its_timestamps_granularity(
    mtime_ns: int, now_ns: int, settled: bool
) -> None:
    assert _settled(mtime_ns, now_ns) == settled
