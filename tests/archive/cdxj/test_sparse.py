"""Tests for the sparse index that searches a sorted CDXJ file (``IndexFile``): against a scan
on random files with many small blocks, and lookups that must see an index changed on disk."""

from __future__ import annotations

import bisect
import gc
import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wwwproxy.archive.cdxj import HEADER_LINE, Index, IndexFile, write_index
from wwwproxy.archive.cdxj.runs import SAMPLE_MAX

from .conftest import rec, write

BLOCK_SIZES = [1, 7, 64, 301, 4096]


def scan(data: bytes, target: bytes) -> list[tuple[int, bytes]]:
    """The answer by definition: every record line starting with ``target``, with its offset."""
    found = []
    pos = 0
    for raw in data.splitlines(keepends=True):
        line = raw.rstrip(b"\n")
        if not line.startswith(b"!") and line.startswith(target):
            found.append((pos, line))
        pos += len(raw)
    return found


def probes_for(lines: list[bytes]) -> list[bytes]:
    """Every key, key + space, each prefix of a few keys, and misses on both sides."""
    keys = sorted({line.split(b" ", 1)[0] for line in lines})
    probes = [b"", b"(", b"!", b"\x00", b"~", b"\xff", b"(zzz", b"(a", b"(aaa,)/"]
    for key in keys:
        probes += [key, key + b" ", key + b"x", key[:-1], key + b"  "]
    for key in keys[:: max(1, len(keys) // 5)]:
        probes += [key[:n] for n in range(0, len(key), max(1, len(key) // 7))]
    return probes


def check_all(path: Path, data: bytes, lines: list[bytes]) -> None:
    path.write_bytes(data)
    for block_size in BLOCK_SIZES:
        file = IndexFile(path, block_size=block_size)
        for probe in probes_for(lines):
            assert list(file.lines(probe)) == scan(data, probe), (block_size, probe)


_KEY_PARTS = st.sampled_from(["(com,a,)/", "(com,ab,)/", "(de,bücher,)/", "a", "b", "/", "é", "😀"])
_LONG = "(com,long,)/" + "x" * (SAMPLE_MAX + 20)  # keys whose samples are cut short


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    keys=st.lists(
        st.one_of(
            st.lists(_KEY_PARTS, min_size=1, max_size=4).map("".join),
            st.lists(_KEY_PARTS, max_size=2).map(lambda parts: _LONG + "".join(parts)),
        ),
        max_size=25,
    ),
    captures=st.lists(st.integers(1, 40), min_size=25, max_size=25),
    pad=st.integers(0, 400),
    header=st.booleans(),
    final_newline=st.booleans(),
)
def test_sparse_search_matches_a_scan(
    tmp_path_factory: pytest.TempPathFactory,
    keys: list[str],
    captures: list[int],
    pad: int,
    header: bool,
    final_newline: bool,
) -> None:
    lines = set()
    for n, key in enumerate(keys):  # runs of one key, often longer than a block
        for c in range(captures[n]):
            lines.add(
                f"{key} 2026-01-01T00:00:{c:02d}.000000Z response {{{'p' * (pad * c % 401)}}}"
            )
    encoded = sorted(line.encode() for line in lines)
    data = (HEADER_LINE + "\n").encode() if header else b""
    data += b"\n".join(encoded) + (b"\n" if final_newline and encoded else b"")
    check_all(tmp_path_factory.mktemp("sparse") / "index.cdxj", data, encoded)


def test_sparse_search_edges(tmp_path: Path) -> None:
    path = tmp_path / "index.cdxj"
    missing = IndexFile(path)
    assert list(missing.lines(b"")) == [] and missing.sample_count() == missing.sample_bytes() == 0
    path.write_bytes(b"".join(f"(a,)/{n:05d} x {{}}\n".encode() for n in range(2000)))
    small, large = IndexFile(path, block_size=64), IndexFile(path, block_size=4096)
    assert small.sample_count() > large.sample_count() > 1
    assert small.sample_bytes() > large.sample_bytes() > 0
    for data in [b"", HEADER_LINE.encode(), (HEADER_LINE + "\n").encode(), b"a 1\n", b"a 1"]:
        check_all(path, data, [b"a 1"])
    one_key = [f"(a,)/ {n:04d} {{}}".encode() for n in range(500)]  # a run over many blocks
    check_all(path, b"\n".join(one_key) + b"\n", one_key)
    longs = [f"{_LONG}{s} {n} {{}}".encode() for s in ["", "a", "b", "b/c"] for n in range(40)]
    check_all(path, b"\n".join(sorted(longs)) + b"\n", longs)
    # samples all cut to the same prefix: the first match is searched for over many windows
    huge = [f"{_LONG}{n:05d} 1 {{}}".encode() for n in range(400)]
    check_all(path, b"\n".join(huge) + b"\n", huge[::37] + huge[-3:])
    blank = [b"", b"a 1", b"b 2"]  # a blank line is yielded as it is (the reader reports it)
    check_all(path, b"\n".join(blank) + b"\n", blank)


def test_random_index_with_first_last_and_missing_keys(tmp_path: Path) -> None:
    rng = random.Random(7)
    keys = sorted({f"(com,h{rng.randrange(60)},)/p{rng.randrange(30)}" for _ in range(400)})
    records = [rec(k, f"20{20 + c}") for n, k in enumerate(keys) for c in range(1 + n % 4)]
    write_index(tmp_path / "index.cdxj", records)
    data = (tmp_path / "index.cdxj").read_bytes()
    for block_size in [1, 100, 1000, 8192, 1 << 20]:
        file = IndexFile(tmp_path / "index.cdxj", block_size=block_size)
        assert 0 < file.sample_count() <= len(records)
        for probe in [keys[0], keys[-1], "(", "(com,h0", "~", keys[-1] + "x", "", " "]:
            assert list(file.lines(probe.encode())) == scan(data, probe.encode())
        for key in keys:
            expected = [r.sort_key for r in records if r.key == key]
            assert [line for _, line in file.lines(key.encode() + b" ")] == expected
            assert list(file.lines(key.encode() + b" ")) == scan(data, key.encode() + b" ")


# --------------------------------------------------------------------------------------------
# An index that changes on disk


def test_lookups_see_the_index_changed_on_disk(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write_index(index.index_path, [rec("(a,)/"), rec("(c,)/")])
    assert index.exact("(a,)/") == [rec("(a,)/")] and index.exact("(b,)/") == []
    # replaced by a rename (as compact() does): another inode
    write_index(index.index_path, [rec("(a,)/"), rec("(b,)/"), rec("(c,)/")])
    assert index.exact("(b,)/") == [rec("(b,)/")]
    # rewritten in place, longer
    lines = [rec("(a,)/"), rec("(b,)/"), rec("(b,)/", "2027"), rec("(c,)/")]
    write(index.index_path, HEADER_LINE + "\n" + "".join(r.to_line() for r in lines))
    assert index.exact("(b,)/") == [rec("(b,)/"), rec("(b,)/", "2027")]
    # appended to in place
    with open(index.index_path, "ab") as f:
        f.write(rec("(d,)/").to_bytes())
    assert index.exact("(d,)/") == [rec("(d,)/")]
    assert list(index.prefix("")) == [*lines, rec("(d,)/")]
    # rewritten in place with the same size and another mtime
    same_size = index.index_path.read_bytes().replace(b"(d,)/", b"(e,)/")
    index.index_path.write_bytes(same_size)
    os.utime(index.index_path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert index.exact("(d,)/") == [] and index.exact("(e,)/") == [rec("(e,)/")]
    index.index_path.unlink()
    assert index.exact("(a,)/") == [] and list(index.prefix("")) == []


def test_lookups_see_other_writers_journals_and_compactions(tmp_path: Path) -> None:
    reader, writer = Index(tmp_path), Index(tmp_path)
    writer.add([rec("(a,)/")])
    writer.compact()
    old = time.time_ns() - 60 * 10**9
    os.utime(tmp_path, ns=(old, old))  # a settled directory: its listing is reused
    assert reader.exact("(a,)/") == [rec("(a,)/")] and reader.exact("(b,)/") == []
    assert reader.exact("(b,)/") == []
    writer.add([rec("(b,)/")])  # a new journal
    assert reader.exact("(b,)/") == [rec("(b,)/")]
    writer.add([rec("(b,)/", "2027")])  # appended to it
    assert reader.exact("(b,)/") == [rec("(b,)/"), rec("(b,)/", "2027")]
    writer.compact()  # into the index; no journal left
    os.utime(tmp_path, ns=(old, old))
    assert reader.exact("(b,)/") == [rec("(b,)/"), rec("(b,)/", "2027")]
    # a journal written and sealed by a compaction under way, between two lookups
    writer.add([rec("(c,)/")])
    writer._seal_journal()
    assert not writer.journal_path.exists() and writer.journal_bytes() > 0
    assert reader.exact("(c,)/") == [rec("(c,)/")]
    os.utime(tmp_path, ns=(old, old))
    assert reader.exact("(c,)/") == [rec("(c,)/")]
    writer.compact()
    assert reader.exact("(c,)/") == [rec("(c,)/")]
    assert [p.name for p in writer.files()] == ["index.cdxj"]


def test_a_scan_under_way_keeps_its_version(tmp_path: Path) -> None:
    index = Index(tmp_path)
    old = [rec(f"(a,)/{n:03d}") for n in range(300)]
    write_index(index.index_path, old)
    scan_under_way = index.prefix("(a,)/")
    assert next(scan_under_way) == old[0]
    write_index(index.index_path, [rec("(b,)/")])  # renamed over it meanwhile
    assert list(scan_under_way) == old[1:]
    assert list(index.prefix("")) == [rec("(b,)/")]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_replaced_versions_are_closed(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write_index(index.index_path, [rec("(a,)/")])
    assert index.exact("(a,)/")
    before = len(os.listdir("/proc/self/fd"))
    for n in range(30):
        write_index(index.index_path, [rec("(a,)/"), rec(f"(b,)/{n}")])
        assert index.exact(f"(b,)/{n}") == [rec(f"(b,)/{n}")]
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before
    del index
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) < before


# --------------------------------------------------------------------------------------------
# Lookups through Index against a naive sorted list, on random indexes and journals


def naive_exact(lines: list[bytes], key: str) -> list[bytes]:
    """The answer by definition: bisect a sorted list of every unique line, walk the run."""
    target = key.encode() + b" "
    i = bisect.bisect_left(lines, target)
    found = []
    while i < len(lines) and lines[i].startswith(target):
        found.append(lines[i])
        i += 1
    return found


_STEMS = ["(com,a,)/", "(com,a,)/a", "(com,a,)/a/b", "(com,a,)/ab", "(com,ab,)/", "(de,bücher,)/"]


def random_keys(rng: random.Random) -> list[str]:
    """Keys that are prefixes of one another (a, a/b, ab), and some long ones."""
    parts = [_STEMS, ["", "x", "x/y", "?q=1", "é", "😀"], ["", "1", "12", "2"]]
    keys = {"".join(map(rng.choice, parts)) for _ in range(150)}
    keys |= {_LONG + rng.choice(["", "a", "a/b"]) for _ in range(3)}
    return sorted(keys, key=str.encode)


@pytest.mark.parametrize(
    ("seed", "block_size", "journal"),
    [(1, 1, False), (2, 7, True), (3, 64, False), (4, 301, True), (5, 4096, True), (6, 1, True)],
)
def test_index_lookups_match_a_naive_sorted_list(
    tmp_path: Path, seed: int, block_size: int, journal: bool
) -> None:
    rng = random.Random(seed)
    keys = random_keys(rng)
    records = [  # several captures of most keys, often more than a block's worth
        rec(key, f"20{20 + rng.randrange(10)}-0{1 + rng.randrange(9)}-1{rng.randrange(10)}",
            rng.choice(["response", "revisit", "request"]), offset=rng.randrange(10**6))
        for key in keys
        for _ in range(rng.choice([1, 1, 2, 3, 12]))
    ]  # fmt: skip
    rng.shuffle(records)
    in_index = records if not journal else records[: len(records) // 2]
    in_journal = records[len(records) // 2 :] + rng.sample(in_index, 5) if journal else []
    write_index(tmp_path / "index.cdxj", in_index)
    index = Index(tmp_path, block_size=block_size)
    if in_journal:
        index.add(in_journal)
    by_line = {r.sort_key: r for r in records}
    lines = sorted(by_line)
    first, last = lines[0].split(b" ")[0].decode(), lines[-1].split(b" ")[0].decode()
    probes = [*keys, first, last, "(", "(com,a,)", "(com,a,)/a/", "~", last + "x", "(zzz,)/"]
    samples = IndexFile(tmp_path / "index.cdxj", block_size=block_size).sample_count()
    assert samples > 64 or block_size > 7  # (so the sparse index's top level has several keys)
    for key in probes:
        expected = [by_line[line] for line in naive_exact(lines, key)]
        assert index.exact(key) == expected, key
        assert index.newest(key) == (expected[-1] if expected else None), key
        responses = [r for r in expected if r.record_type == "response"]
        assert index.exact(key, record_types={"response"}) == responses, key
        assert index.newest(key, record_types={"response"}) == (
            responses[-1] if responses else None
        ), key
    assert index.exact(first) and index.exact(last) and index.problems == []
