"""Tests for wwwproxy.archive.cdxj.index: journal appends, lookups against brute force,
compaction and crash safety, concurrent writers."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wwwproxy.archive.cdxj import (
    HEADER_LINE,
    CDXJError,
    CDXJRecord,
    CDXJVersionError,
    Index,
    IndexFile,
    append_journal,
    check,
    format_timestamp,
    iter_records,
    read_journal,
    write_index,
)
from wwwproxy.archive.cdxj import index as cdxj_index
from wwwproxy.archive.cdxj import merge as cdxj_merge

from .conftest import GOOD_JSON, HOSTS, TS, lines_of, random_record, rec, write

# --------------------------------------------------------------------------------------------
# Journal


def test_journal_starts_with_one_header(tmp_path: Path) -> None:
    journal = tmp_path / "journal.cdxj"
    append_journal(journal, [rec("(b,)/")])
    append_journal(journal, [rec("(a,)/"), rec("(c,)/")])
    append_journal(journal, [])
    text = journal.read_text()
    assert text == HEADER_LINE + "\n" + lines_of([rec("(b,)/"), rec("(a,)/"), rec("(c,)/")])
    assert read_journal(tmp_path / "absent.cdxj") == []


def test_journal_torn_tail_is_ignored_reported_and_repaired(tmp_path: Path) -> None:
    journal = tmp_path / "journal.cdxj"
    records = [rec(f"(com,a,)/{n}") for n in range(3)]
    append_journal(journal, records)
    torn = rec("(com,torn,)/").to_bytes()[:40]
    with open(journal, "ab") as f:  # what kill -9 in the middle of a write leaves
        f.write(torn)
    problems: list[str] = []
    assert read_journal(journal, problems) == records
    assert problems == [
        f"{journal}:5: torn last line ignored (40 bytes without a newline; interrupted write)"
    ]
    assert check(journal) != []
    # the next append cuts the torn fragment so it cannot swallow the new line
    append_journal(journal, [rec("(com,b,)/")])
    problems = []
    assert read_journal(journal, problems) == [*records, rec("(com,b,)/")]
    assert problems == []
    assert check(journal) == []


def test_journal_made_only_of_a_torn_line(tmp_path: Path) -> None:
    journal = write(tmp_path / "journal.cdxj", b"!OpenWay")
    problems: list[str] = []
    assert read_journal(journal, problems) == [] and len(problems) == 1
    append_journal(journal, [rec("(a,)/")])
    assert journal.read_text() == HEADER_LINE + "\n" + rec("(a,)/").to_line()


# --------------------------------------------------------------------------------------------
# Generated data and brute force


def brute_prefix(records: list[CDXJRecord], prefix: str) -> list[CDXJRecord]:
    """The answer by definition: unique lines in byte order, filtered by a scan."""
    unique = {r.sort_key: r for r in records}
    return [unique[k] for k in sorted(unique) if unique[k].key.startswith(prefix)]


_EXACT_CACHE: dict[int, dict[str, list[CDXJRecord]]] = {}


def brute_exact(records: list[CDXJRecord], key: str) -> list[CDXJRecord]:
    if id(records) not in _EXACT_CACHE:
        groups: dict[str, list[CDXJRecord]] = {}
        for r in brute_prefix(records, ""):
            groups.setdefault(r.key, []).append(r)
        _EXACT_CACHE[id(records)] = groups
    return _EXACT_CACHE[id(records)].get(key, [])


def brute_closest(records: list[CDXJRecord], key: str, when: datetime) -> CDXJRecord | None:
    found = brute_exact(records, key)
    if not found:
        return None
    return min(found, key=lambda r: (abs(r.as_datetime() - when), r.as_datetime()))


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, list[CDXJRecord]]:
    rng = random.Random(1234)
    records = [random_record(rng) for _ in range(3000)]
    in_index, in_journal = records[:2100], records[2100:]
    in_journal += rng.sample(in_index, 100)  # the same lines in both (a compaction crash)
    directory = tmp_path_factory.mktemp("populated")
    write_index(directory / "index.cdxj", in_index)
    index = Index(directory)
    for n in range(0, len(in_journal), 150):
        index.add(in_journal[n : n + 150])
    return index, records


def all_keys(records: list[CDXJRecord]) -> list[str]:
    present = sorted({r.key for r in records}, key=str.encode)
    absent = ["(", "(aaa,)/", "(zzz,)/", "(com,a,)/a/c", "(com,a,)/a/b/c/d", "(com,a", "~"]
    return present + absent


def test_exact_newest_and_captures_against_brute_force(
    populated: tuple[Index, list[CDXJRecord]],
) -> None:
    index, records = populated
    keys = all_keys(records)
    sorted_keys = sorted({r.key for r in records}, key=str.encode)
    assert index.exact(sorted_keys[0]) and index.exact(sorted_keys[-1])  # ends of the file
    for key in keys:
        expected = brute_exact(records, key)
        assert index.exact(key) == expected, key
        assert list(index.captures(key)) == expected
        assert index.newest(key) == (expected[-1] if expected else None)
        times = [r.timestamp for r in expected]
        assert times == sorted(times)
    responses = [r for r in brute_exact(records, "(com,a,)/a") if r.record_type == "response"]
    assert index.exact("(com,a,)/a", record_types={"response"}) == responses
    assert index.newest("(com,a,)/a", record_types=("response",)) == responses[-1]


def test_closest_against_brute_force(populated: tuple[Index, list[CDXJRecord]]) -> None:
    index, records = populated
    rng = random.Random(99)
    for key in all_keys(records):
        for _ in range(3):
            when = datetime(2023, 6, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(4 * 10**8))
            assert index.closest(key, when) == brute_closest(records, key, when), key
            assert index.closest(key, format_timestamp(when)) == brute_closest(records, key, when)
    some = brute_exact(records, "(com,a,)/")[5]
    assert index.closest("(com,a,)/", some.timestamp) == some
    assert index.closest("(com,a,)/", some.timestamp[:4]) == brute_closest(
        records, "(com,a,)/", datetime(int(some.timestamp[:4]), 1, 1, tzinfo=UTC)
    )


def test_closest_tie_goes_to_the_earlier_capture(tmp_path: Path) -> None:
    index = Index(tmp_path)
    early, late = rec("(a,)/", "2026-01-01T00:00:00Z"), rec("(a,)/", "2026-01-03T00:00:00Z")
    index.add([late, early])
    assert index.closest("(a,)/", "2026-01-02") == early
    assert index.closest("(a,)/", "2026-01-02T00:00:00.000001Z") == late
    plus1 = timezone(timedelta(hours=1))
    assert index.closest("(a,)/", datetime(2026, 1, 2, 1, 0, 1, tzinfo=plus1)) == late
    with pytest.raises(CDXJError, match="naive"):
        index.closest("(a,)/", datetime(2026, 1, 2))
    with pytest.raises(CDXJError, match="invalid timestamp"):
        index.closest("(a,)/", "yesterday")


def test_prefix_against_brute_force(populated: tuple[Index, list[CDXJRecord]]) -> None:
    index, records = populated
    prefixes = ["", "(", "(com,a,", "(com,a,)/", "(com,a,)/a", "(com,a,)/a/", "(com,a,b,)/"]
    prefixes += ["(de,b", "(de,bücher,)/", "(127.0.0.1", "([", "(zzz", "(com,a,)/a?x=1"]
    prefixes += [h + "/" for h in HOSTS]
    for prefix in prefixes:
        assert list(index.prefix(prefix)) == brute_prefix(records, prefix), prefix
    assert len(list(index.prefix(""))) == len({r.sort_key for r in records})
    # a domain prefix covers its subdomains and ports, a host prefix does not
    domain_keys = {r.key.split(")")[0] + ")" for r in index.prefix("(com,a,")}
    assert domain_keys == {"(com,a,)", "(com,a,b,)", "(com,a,:8080)"}
    assert {r.key.split(")")[0] for r in index.prefix("(com,a,)/")} == {"(com,a,"}


def test_lookups_after_compaction_are_the_same(
    populated: tuple[Index, list[CDXJRecord]], tmp_path: Path
) -> None:
    index, records = populated
    copy = tmp_path / "copy"
    shutil.copytree(index.directory, copy)
    compacted = Index(copy)
    assert compacted.compact() == len({r.sort_key for r in records})
    assert compacted.journal_bytes() == 0 and not compacted.journal_path.exists()
    assert compacted.check() == []
    assert list(compacted.prefix("")) == list(index.prefix(""))
    for key in all_keys(records)[::7]:
        assert compacted.exact(key) == index.exact(key)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    keys=st.lists(st.text(alphabet="(),/ab:ä😀", min_size=1, max_size=12), max_size=40),
    probes=st.lists(st.text(alphabet="(),/ab:ä😀", max_size=6), max_size=10),
    pad=st.integers(0, 300),
)
def test_binary_search_matches_a_scan(
    tmp_path_factory: pytest.TempPathFactory, keys: list[str], probes: list[str], pad: int
) -> None:
    keys = [k for k in keys if k[0] not in "!{"]
    records = [rec(k, padding="x" * ((i * pad) % 301)) for i, k in enumerate(keys)]
    path = tmp_path_factory.mktemp("bs") / "index.cdxj"
    write_index(path, records)
    file = IndexFile(path)
    lines = sorted({r.sort_key for r in records})
    for probe in probes + keys + [k + " " for k in keys]:
        target = probe.encode()
        assert [line for _, line in file.lines(target)] == [
            x for x in lines if x.startswith(target)
        ]


# --------------------------------------------------------------------------------------------
# The Index: empty, journal and compaction


def test_lookups_on_missing_empty_and_header_only_index(tmp_path: Path) -> None:
    for content in [None, b"", (HEADER_LINE + "\n").encode(), HEADER_LINE.encode()]:
        directory = tmp_path / f"d{len(content) if content is not None else 'none'}"
        index = Index(directory)
        if content is not None:
            write(index.index_path, content)
        assert index.exact("(com,a,)/") == []
        assert index.newest("(com,a,)/") is None
        assert index.closest("(com,a,)/", TS) is None
        assert list(index.prefix("")) == []
        assert index.compact() is None  # nothing to merge
        index.add([rec("(com,a,)/")])
        assert index.exact("(com,a,)/") == [rec("(com,a,)/")]
        assert index.compact() == 1
        assert index.exact("(com,a,)/") == [rec("(com,a,)/")]
    never_created = Index(tmp_path / "nothing", create=False)
    assert never_created.exact("(a,)/") == [] and list(never_created.prefix("")) == []


def test_lines_longer_than_the_read_buffer(tmp_path: Path) -> None:
    rng = random.Random(3)
    records = [
        rec(f"(com,long,)/{n:02d}", padding="x" * rng.randrange(9000, 30000)) for n in range(30)
    ]
    records += [rec(f"(com,long,)/{n:02d}/short") for n in range(30)]
    index = Index(tmp_path)
    write_index(index.index_path, records)
    for r in records:
        assert index.exact(r.key) == [r]
    assert list(index.prefix("(com,long,)/1")) == brute_prefix(records, "(com,long,)/1")


def test_index_without_header_or_final_newline(tmp_path: Path) -> None:
    index = Index(tmp_path)
    records = [rec(k) for k in sorted(["(a,)/", "(b,)/", "(c,)/"])]
    write(index.index_path, lines_of(records).rstrip("\n"))
    for r in records:
        assert index.exact(r.key) == [r]
    assert list(index.prefix("")) == records


def test_lookup_arguments_are_checked(tmp_path: Path) -> None:
    index = Index(tmp_path)
    for bad in ["", "a b", "!x", "{x"]:
        with pytest.raises(CDXJError):
            index.exact(bad)
    with pytest.raises(CDXJError, match="spaces"):
        list(index.prefix("(com, a"))


def test_journal_is_cached_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/")])
    reads = []
    real_scan = cdxj_index._scan

    def counting_scan(*args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(args[1])
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(cdxj_index, "_scan", counting_scan)
    for _ in range(5):
        assert index.exact("(a,)/") == [rec("(a,)/")]
    assert reads == [str(index.journal_path)]
    index.add([rec("(a,)/", "2027")])
    assert index.exact("(a,)/") == [rec("(a,)/"), rec("(a,)/", "2027")]
    assert index.newest("(a,)/") == rec("(a,)/", "2027")
    assert len(reads) == 2


def test_a_grown_journal_is_read_on_from_where_it_was_read_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every capture appends to the journal: the next lookup reads only the lines appended,
    not the whole journal again (a quarter of a megabyte between compactions)."""
    index = Index(tmp_path)
    index.add([rec(f"(a,)/{n}") for n in range(200)])
    assert len(list(index.prefix(""))) == 200
    read: list[int] = []
    real_scan = cdxj_index._scan

    def measuring_scan(f, *args, **kwargs):  # type: ignore[no-untyped-def]
        read.append(len(f.getvalue()))
        return real_scan(f, *args, **kwargs)

    monkeypatch.setattr(cdxj_index, "_scan", measuring_scan)
    for n in range(3):
        added = rec(f"(b,)/{n}")
        index.add([added])
        assert index.exact(f"(b,)/{n}") == [added]
        assert read[-1] == len(added.to_bytes())
    assert [r.key for r in index.prefix("(b,)/")] == ["(b,)/0", "(b,)/1", "(b,)/2"]
    assert len(list(index.prefix(""))) == 203


@pytest.mark.parametrize("seed", range(6))
def test_a_journal_followed_line_by_line_reads_as_a_fresh_one(tmp_path: Path, seed: int) -> None:
    """One long-lived index, asked after each change, answers as an index opened afresh:
    appends, torn lines left by a crash (then cut by the next append), compactions (a new
    journal, which may get the old one's inode number), and a journal rewritten in place with
    other lines (the bytes it was read to are no longer there)."""
    rng = random.Random(seed)
    index = Index(tmp_path)
    journal = tmp_path / "journal.cdxj"
    made: list[CDXJRecord] = []
    for step in range(40):
        action = rng.choice(["add", "add", "add", "torn", "compact", "rewrite"])
        if action == "add":
            batch = [random_record(rng) for _ in range(rng.randrange(1, 5))]
            index.add(batch)
            made += batch
        elif action == "torn" and journal.exists():
            with journal.open("ab") as f:
                f.write(random_record(rng).to_bytes()[: rng.randrange(1, 30)])
        elif action == "compact":
            index.compact()
        elif action == "rewrite" and journal.exists():
            # the same inode, longer, and other bytes where it was read to: a line gone
            head, *lines = journal.read_bytes().splitlines(keepends=True)
            lines = [line for line in lines if line.endswith(b"\n")]
            if lines:
                gone = lines.pop(rng.randrange(len(lines)))
                made = [r for r in made if r.to_bytes() != gone]
            batch = [random_record(rng) for _ in range(3)]
            made += batch
            lines[len(lines) // 2 : len(lines) // 2] = [r.to_bytes() for r in batch]
            with journal.open("r+b") as f:
                f.write(head + b"".join(lines))
                f.truncate()
        fresh = Index(tmp_path)
        assert list(index.prefix("")) == list(fresh.prefix("")), (step, action)
        for key in {r.key for r in rng.sample(made, min(5, len(made)))}:
            assert index.exact(key) == fresh.exact(key), (step, action)


def test_bad_journal_and_index_lines_are_reported_not_fatal(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write(
        index.index_path,
        HEADER_LINE + "\n" + rec("(a,)/").to_line() + f"(a,)/ {TS} response {{broken\n",
    )
    write(index.journal_path, HEADER_LINE + "\n" + "junk\n" + rec("(a,)/", "2027").to_line())
    assert index.exact("(a,)/") == [rec("(a,)/"), rec("(a,)/", "2027")]
    problems = index.problems
    assert any(p.startswith(f"{index.index_path} (byte ") for p in problems), problems
    assert f"{index.journal_path}:2: expected 4 space-separated fields" in "\n".join(problems)
    assert len(index.check()) == 2


def test_newest_reads_back_from_the_newest_line_past_bad_ones(tmp_path: Path) -> None:
    index = Index(tmp_path)
    old, mid, new = rec("(a,)/", "2025"), rec("(a,)/", "2026", "revisit"), rec("(a,)/", "2027")
    broken = "(a,)/ 2028-01-01T00:00:00.000000Z response {broken\n"
    write(index.index_path, HEADER_LINE + "\n" + lines_of([old, mid, new]) + broken)
    assert index.newest("(a,)/") == new  # the newest line is malformed: the one before it
    assert [p for p in index.problems if "(byte " in p] == [
        f"{index.index_path} (byte {len(HEADER_LINE) + 1 + len(lines_of([old, mid, new]))}): "
        "invalid JSON block: Expecting property name enclosed in double quotes (column 2)"
    ]
    assert index.newest("(a,)/", record_types={"revisit"}) == mid
    assert index.newest("(a,)/", record_types={"request"}) is None
    # a newer capture in the journal, and the index's newest line there again (a compaction
    # crash): the journal's wins, each line counts once
    newer = rec("(a,)/", "2029")
    index.add([new, newer])
    assert index.newest("(a,)/") == newer
    assert index.exact("(a,)/") == [old, mid, new, newer]
    assert index.newest("(a,)/", record_types={"revisit"}) == mid
    assert index.newest("(b,)/") is None and index.newest("(a,)") is None


def test_unsupported_index_version_is_a_clear_error(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write(index.index_path, "!OpenWayback-CDXJ 2.0\n" + rec("(a,)/").to_line())
    with pytest.raises(CDXJVersionError, match=f"{index.index_path}:1: unsupported"):
        index.exact("(a,)/")


def test_compact_keeps_old_index_readable_until_replaced(tmp_path: Path) -> None:
    index = Index(tmp_path)
    old = [rec(f"(com,a,)/{n:03d}") for n in range(50)]
    index.add(old)
    index.compact()
    old_bytes = index.index_path.read_bytes()
    new = [rec(f"(com,b,)/{n:03d}") for n in range(50)]
    index.add(new)
    seen = []

    def observe(record: CDXJRecord) -> bool:
        if not seen:  # in the middle of the merge, before the rename
            other = Index(tmp_path)
            seen.append((index.index_path.read_bytes(), len(list(other.prefix("(com,")))))
        return True

    assert index.compact(keep=observe) == 100
    assert seen == [(old_bytes, 100)]  # old index intact, and the sealed journal still visible
    assert index.index_path.read_bytes() != old_bytes
    assert list(index.prefix("(com,")) == old + new
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".compact")) == [
        ".index.cdxj.checked",
        ".index.cdxj.keys",
        "index.cdxj",
    ]


def test_compact_failure_before_rename_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/")])
    index.compact()
    before = index.index_path.read_bytes()
    index.add([rec("(b,)/")])

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cdxj_merge.os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        index.compact()
    monkeypatch.undo()
    assert index.index_path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert list(index.prefix("")) == [rec("(a,)/"), rec("(b,)/")]  # from the sealed journal
    index.add([rec("(c,)/")])
    assert list(index.prefix("")) == [rec("(a,)/"), rec("(b,)/"), rec("(c,)/")]
    assert index.compact() == 3
    assert list(iter_records(index.index_path)) == [rec("(a,)/"), rec("(b,)/"), rec("(c,)/")]


def test_crash_between_rename_and_journal_removal_duplicates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = Index(tmp_path)
    records = [rec(f"(a,)/{n}") for n in range(10)]
    index.add(records)

    def crash(self: Index, sealed: list[Path]) -> None:
        raise KeyboardInterrupt  # the process dies after the rename, before the deletions

    monkeypatch.setattr(Index, "_drop", crash)
    with pytest.raises(KeyboardInterrupt):
        index.compact()
    monkeypatch.undo()
    assert list(iter_records(index.index_path)) == records
    assert index.journal_bytes() > 0  # the sealed journal survived ...
    (sealed,) = tmp_path.glob("*.sealed")
    assert index.files() == [index.index_path]  # ... superseded by the new index: not read
    fresh = Index(tmp_path)  # as after a restart
    assert list(fresh.prefix("")) == records
    fresh.add([rec("(b,)/")])
    assert fresh.files() == [fresh.index_path, fresh.journal_path]
    assert fresh.exact("(a,)/3") == [records[3]]
    assert fresh.compact() == 1  # the journal's run; the superseded journal removed first
    assert not sealed.exists()
    assert list(fresh.prefix("")) == [*records, rec("(b,)/")]
    assert fresh.compact(full=True) == 11
    assert list(iter_records(index.index_path)) == [*records, rec("(b,)/")]
    assert fresh.journal_bytes() == 0
    assert fresh.files() == [fresh.index_path]


def test_compact_removes_leftovers_of_a_killed_compaction(tmp_path: Path) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/")])
    write(tmp_path / ".index.cdxj.abc123.tmp", "half a file")
    (tmp_path / ".cdxj-sort-xyz").mkdir()
    write(tmp_path / ".cdxj-sort-xyz" / "run-1.cdxj", "x\n")
    assert index.compact() == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".compact.lock",
        ".index.cdxj.checked",
        ".index.cdxj.keys",
        "index.cdxj",
    ]


def test_compact_keep_filter_purges(tmp_path: Path) -> None:
    index = Index(tmp_path)
    index.add([rec("(a,)/"), rec("(b,)/"), rec("(b,)/x")])
    index.compact()
    assert index.compact(keep=lambda r: not r.key.startswith("(b,)/")) == 1
    assert list(index.prefix("")) == [rec("(a,)/")]


def test_compact_resorts_an_unsorted_index(tmp_path: Path) -> None:
    index = Index(tmp_path)
    write(
        index.index_path,
        "!OpenWayback-CDXJ 1.1\n" + lines_of([rec("(c,)/"), rec("(a,)/")])
        + f"(b,)/ 2026 response {GOOD_JSON}\n",
    )  # fmt: skip
    index.add([rec("(d,)/")])
    assert index.compact() == 4
    assert check(index.index_path, index=True) == []
    assert index.index_path.read_text().startswith("!OpenWayback-CDXJ 1.1\n(a,)/ ")


def test_compact_refuses_a_corrupt_index_and_keeps_everything(tmp_path: Path) -> None:
    index = Index(tmp_path)
    content = HEADER_LINE + "\n" + lines_of([rec("(c,)/"), rec("(a,)/")]) + "garbage\n"
    write(index.index_path, content)
    index.add([rec("(d,)/")])
    with pytest.raises(CDXJError, match=f"^{index.index_path}:4: expected 4"):
        index.compact()
    assert index.index_path.read_text() == content
    assert index.exact("(d,)/") == [rec("(d,)/")]


def test_compact_reports_a_header_line_inside_the_index(tmp_path: Path) -> None:
    index = Index(tmp_path)
    content = HEADER_LINE + "\n" + rec("(a,)/").to_line() + HEADER_LINE + "\n"
    content += rec("(b,)/").to_line()
    write(index.index_path, content)
    index.add([rec("(c,)/")])
    with pytest.raises(CDXJError, match=f"^{index.index_path}:3: header line .* after records"):
        index.compact()
    assert index.index_path.read_text() == content


def test_rebuild(tmp_path: Path) -> None:
    index = Index(tmp_path)
    index.add([rec("(gone,)/")])
    assert index.rebuild(rec(k) for k in ["(b,)/", "(a,)/"]) == 2
    assert list(index.prefix("")) == [rec("(a,)/"), rec("(b,)/")]
    assert index.journal_bytes() == 0


WRITER = """
import sys
from wwwproxy.archive.cdxj import CDXJRecord, Index
index = Index(sys.argv[1])
for n in range(int(sys.argv[3])):
    index.add([CDXJRecord(f"({sys.argv[2]},)/{n}", "2026", "response", {"uri": "u", "ref": "r"})])
"""


def test_concurrent_writers_and_compaction_lose_nothing(tmp_path: Path) -> None:
    count = 200
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name, str(count)])
        for name in ("w1", "w2")
    ]
    compactions = 0
    while any(w.poll() is None for w in writers):
        compactions += Index(tmp_path).compact() is not None
    assert [w.returncode for w in writers] == [0, 0]
    assert compactions >= 1
    index = Index(tmp_path)
    for name in ("w1", "w2"):
        assert len(list(index.prefix(f"({name},)/"))) == count
    index.compact(full=True)
    assert len(list(iter_records(index.index_path))) == 2 * count
    assert index.check() == []
