"""Tests for wwwproxy.archive.cdxj.merge: byte-order sorting, merging files, writing an index."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from wwwproxy.archive.cdxj import (
    HEADER_LINE,
    CDXJError,
    CDXJVersionError,
    check,
    iter_records,
    merge_files,
    merge_sorted,
    sort_lines,
    write_index,
)
from wwwproxy.archive.cdxj import merge as cdxj_merge
from wwwproxy.archive.cdxj import read as cdxj_read

from .conftest import lines_of, random_record, rec, write

# --------------------------------------------------------------------------------------------
# Sorting and merging

SORT_KEYS = [
    "(com,example,)/b",
    "(com,example,)/a",
    "(com,example,)/A",
    "(com,example,)/ä",
    "(com,example,)/z",
    "(com,example,)/",
    "(com,example,)/a/b",
    "(com,example,www,)/",
    "(com,example,:8080)/",
    "(de,bücher,)/",
    "(de,bucher,)/",
    "(de,b\U0001f600,)/",
    "([::1])/",
    "(127.0.0.1:8080)/",
]


def test_sort_lines_is_byte_order() -> None:
    lines = [rec(k).to_line() for k in SORT_KEYS]
    ordered = sort_lines(lines)
    keys = [line.split(b" ", 1)[0].decode() for line in ordered]
    assert keys == sorted(SORT_KEYS, key=lambda k: k.encode())
    assert keys.index("(com,example,)/A") < keys.index("(com,example,)/a")
    assert keys.index("(com,example,)/z") < keys.index("(com,example,)/ä")
    assert keys.index("(de,bucher,)/") < keys.index("(de,bücher,)/") < keys.index("(de,b😀,)/")
    # a key sorts before every longer key it is a prefix of (space is below all key bytes)
    assert keys.index("(com,example,)/a") < keys.index("(com,example,)/a/b")
    assert sort_lines(lines + lines) == ordered
    assert len(sort_lines(lines + lines, unique=False)) == 2 * len(lines)


@pytest.mark.skipif(shutil.which("sort") is None, reason="no sort(1)")
def test_sort_lines_agrees_with_lc_all_c_sort(tmp_path: Path) -> None:
    rng = random.Random(5)
    records = [
        rec(
            rng.choice(SORT_KEYS) + rng.choice(["", "x", "X", "é", "-", "~"]),
            f"20{rng.randint(10, 30)}",
        )
        for _ in range(300)
    ]
    data = lines_of(records).encode()
    env = dict(os.environ, LC_ALL="C")
    gnu = subprocess.run(["sort", "-u"], input=data, capture_output=True, env=env, check=True)
    assert b"\n".join(sort_lines(data.split(b"\n")[:-1])) + b"\n" == gnu.stdout


def test_merge_sorted_streams() -> None:
    a = [b"a", b"c", b"e"]
    b = [b"b", b"c", b"d"]
    assert list(merge_sorted(a, b)) == [b"a", b"b", b"c", b"d", b"e"]
    assert list(merge_sorted(a, b, unique=False)) == [b"a", b"b", b"c", b"c", b"d", b"e"]
    # it streams: infinite sorted inputs still give their first lines
    evens = (b"%08d" % n for n in itertools.count(0, 2))
    threes = (b"%08d" % n for n in itertools.count(0, 3))
    first = list(itertools.islice(merge_sorted(evens, threes), 6))
    assert first == [b"%08d" % n for n in (0, 2, 3, 4, 6, 8)]


def test_merge_files_headers_minor_versions_and_duplicates(tmp_path: Path) -> None:
    r1, r2, r3 = rec("(b,)/"), rec("(a,)/", "2026"), rec("(c,)/")
    a = write(
        tmp_path / "a.cdxj",
        "!OpenWayback-CDXJ 1.0\n!OpenWayback-CDXJ 1.0\n" + lines_of([r3, r1, r2]),
    )
    b = write(
        tmp_path / "b.cdxj",
        "!OpenWayback-CDXJ 1.1\n!OpenWayback-CDXJ 1.0\n"
        + r1.to_line()
        + f"(a,)/ 2026-01-01T00:00:00Z response {r2.to_line().split(' ', 3)[3]}",
    )
    out = tmp_path / "out.cdxj"
    assert merge_files([a, b], out) == 3
    assert out.read_text() == "!OpenWayback-CDXJ 1.1\n" + lines_of([r2, r1, r3])
    assert check(out, index=True) == []
    dotted = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert dotted == [".out.cdxj.checked", ".out.cdxj.keys"]  # no temp file: its notes


def test_merge_files_refuses_mixed_major_versions(tmp_path: Path) -> None:
    a = write(tmp_path / "a.cdxj", "!OpenWayback-CDXJ 1.0\n" + rec("(a,)/").to_line())
    b = write(tmp_path / "b.cdxj", "!OpenWayback-CDXJ 2.0\n" + rec("(b,)/").to_line())
    out = tmp_path / "out.cdxj"
    with pytest.raises(CDXJVersionError, match=f"{b}:1: unsupported major version 2.0"):
        merge_files([a, b], out)
    c = write(tmp_path / "c.cdxj", "!OpenWayback-CDXJ 1.0\n!OpenWayback-CDXJ 2.1\n")
    with pytest.raises(CDXJVersionError, match=f"^{c}:2: mixed major versions"):
        merge_files([a, c], out)
    assert not out.exists()


def test_merge_files_across_majors_is_refused_even_if_one_were_supported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # if a later release learns 2.x, files of different majors still may not be merged
    a = write(tmp_path / "a.cdxj", "!OpenWayback-CDXJ 1.0\n")
    b = write(tmp_path / "b.cdxj", "!OpenWayback-CDXJ 2.0\n")
    for module in (cdxj_read, cdxj_merge):
        monkeypatch.setattr(module, "SUPPORTED_MAJOR", 2)
    monkeypatch.setattr(cdxj_merge, "file_version", lambda p: (1, 0) if p == a else (2, 0))
    with pytest.raises(CDXJVersionError, match=f"cannot merge {b} .* with {a} .*major"):
        merge_files([a, b], tmp_path / "out.cdxj")


def test_merge_files_external_runs_match_brute_force(tmp_path: Path) -> None:
    rng = random.Random(11)
    records = [random_record(rng) for _ in range(2000)]
    inputs = []
    for n in range(3):
        part = records[n::3] + rng.sample(records, 50)  # overlaps: duplicates across inputs
        rng.shuffle(part)
        inputs.append(write(tmp_path / f"in{n}.cdxj", lines_of(part)))
    out = tmp_path / "out.cdxj"
    count = merge_files(inputs, out, run_lines=97)
    expected = sorted({r.sort_key for r in records})
    assert count == len(expected)
    assert out.read_bytes() == HEADER_LINE.encode() + b"\n" + b"".join(x + b"\n" for x in expected)
    dotted = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert dotted == [".out.cdxj.checked", ".out.cdxj.keys"]  # no temp file: its notes


def test_merge_files_strict_error_leaves_output_untouched(tmp_path: Path) -> None:
    out = write(tmp_path / "out.cdxj", HEADER_LINE + "\n" + rec("(old,)/").to_line())
    before = out.read_bytes()
    bad = write(tmp_path / "bad.cdxj", rec("(a,)/").to_line() + "garbage\n")
    with pytest.raises(CDXJError, match=f"^{bad}:2: "):
        merge_files([out, bad], out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.cdxj", "out.cdxj"]
    problems: list[str] = []
    assert merge_files([out, bad], out, tolerant=True, problems=problems) == 2
    assert problems == [f"{bad}:2: expected 4 space-separated fields "
                        "(key, timestamp, type, JSON), found 1"]  # fmt: skip
    assert list(iter_records(out)) == [rec("(a,)/"), rec("(old,)/")]


def test_write_index(tmp_path: Path) -> None:
    records = [rec(k) for k in SORT_KEYS]
    path = tmp_path / "i.cdxj"
    assert write_index(path, records + records[:3], run_lines=4) == len(records)
    assert check(path, index=True) == []
    assert sorted(iter_records(path), key=lambda r: r.sort_key) == list(iter_records(path))
