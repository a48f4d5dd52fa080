"""Tests for wwwproxy.archive.cdxj.read: file versions, strict and tolerant reading, journals,
checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from wwwproxy.archive.cdxj import (
    HEADER_LINE,
    CDXJError,
    CDXJVersionError,
    check,
    file_version,
    iter_records,
    read_journal,
)

from .conftest import GOOD_JSON, _with_json, rec, write

# --------------------------------------------------------------------------------------------
# Files and headers


def test_file_version(tmp_path: Path) -> None:
    h10, h11, h20 = "!OpenWayback-CDXJ 1.0\n", "!OpenWayback-CDXJ 1.1\n", "!OpenWayback-CDXJ 2.0\n"
    body = rec("k").to_line()
    assert file_version(write(tmp_path / "a", h10 + h11 + h10 + body)) == (1, 1)
    assert file_version(write(tmp_path / "b", body)) == (1, 0)
    path = write(tmp_path / "c", h10 + h20 + body)
    with pytest.raises(CDXJVersionError, match=f"^{path}:2: mixed major versions 1.0 and 2.0"):
        file_version(path)
    path = write(tmp_path / "d", h20 + body)
    with pytest.raises(CDXJVersionError, match=f"^{path}:1: unsupported major version 2.0"):
        file_version(path)


def test_file_errors_name_the_path_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "x.cdxj",
        HEADER_LINE + "\n" + rec("(a,)/").to_line() + "k bad\n" + rec("(b,)/").to_line() + "\n",
    )
    with pytest.raises(CDXJError, match=f"^{path}:3: expected 4"):
        list(iter_records(path))
    problems: list[str] = []
    good = list(iter_records(path, tolerant=True, problems=problems))
    assert good == [rec("(a,)/"), rec("(b,)/")]
    assert problems == [
        f"{path}:3: expected 4 space-separated fields (key, timestamp, type, JSON), found 2",
        f"{path}:5: empty line",
    ]
    assert check(path) == problems


def test_header_after_records_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "x.cdxj", rec("(a,)/").to_line() + HEADER_LINE + "\n")
    with pytest.raises(CDXJError, match=f"^{path}:2: header line .* after records"):
        list(iter_records(path))
    assert len(check(path)) == 1


def test_unknown_bang_lines_at_the_top_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path / "x.cdxj", "!meta hello\n" + HEADER_LINE + "\n" + rec("(a,)/").to_line())
    assert list(iter_records(path)) == [rec("(a,)/")]
    assert check(path, index=True) == []


def test_check_as_index(tmp_path: Path) -> None:
    unsorted = write(
        tmp_path / "u.cdxj",
        rec("(b,)/").to_line()
        + rec("(a,)/").to_line()
        + f"(c,)/ 2026-11-22T05:04:30Z response {GOOD_JSON}\n"
        + rec("(d,)/").to_line().rstrip("\n"),
    )
    assert check(unsorted) == [f"{unsorted}:4: last line has no newline (torn write?)"]
    assert check(unsorted, index=True) == [
        f"{unsorted}:2: out of order (sorts before the previous line)",
        f"{unsorted}:3: timestamp not in the index form YYYY-MM-DDTHH:MM:SS.ffffffZ",
        f"{unsorted}:4: last line has no newline (torn write?)",
    ]
    missing = tmp_path / "missing.cdxj"
    assert check(missing) == [f"{missing}: cannot read: No such file or directory"]


# --------------------------------------------------------------------------------------------
# Reading journals


def test_journal_malformed_lines_reported_and_skipped(tmp_path: Path) -> None:
    journal = write(
        tmp_path / "journal.cdxj",
        HEADER_LINE + "\n" + rec("(a,)/").to_line() + "nonsense\n" + rec("(b,)/").to_line()
        + _with_json('{"uri":"u"}') + "\n",
    )  # fmt: skip
    problems: list[str] = []
    assert read_journal(journal, problems) == [rec("(a,)/"), rec("(b,)/")]
    assert [p.split(": ", 1)[0] for p in problems] == [f"{journal}:3", f"{journal}:5"]
    assert check(journal) == problems


def test_journal_with_other_major_version_is_skipped_not_fatal(tmp_path: Path) -> None:
    journal = write(tmp_path / "j.cdxj", "!OpenWayback-CDXJ 2.0\n" + rec("(a,)/").to_line())
    problems: list[str] = []
    assert read_journal(journal, problems) == []
    assert problems == [
        f"{journal}:1: unsupported major version 2.0 (this reader knows 1.x) (rest of file skipped)"
    ]
