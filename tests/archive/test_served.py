"""Where the served capture is in its cache file, found from the index lines alone
(:func:`wwwproxy.archive.served.place_served`): a table of lines and what it must say."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from wwwproxy.archive.cdxj import CDXJRecord, format_timestamp, make_ref
from wwwproxy.archive.served import CapturePlace, NotPlaced, place_served

KEY = "http://example.com/page"
SURT = "(com,example,)/page"
NAME = "Xq0bwLmpP3V1m0HnJqzG0w.warc.gz"
T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)


def ts(second: int) -> str:
    return format_timestamp(T0 + timedelta(seconds=second))


def line(
    second: int,
    offset: int,
    length: int | None = 100,
    *,
    status: int = 200,
    rtype: str = "response",
    rid: str | None = None,
    uri: str = KEY,
    name: str = NAME,
    refers: tuple[str, int] | None = None,
) -> CDXJRecord:
    """A capture's line: its record of ``length`` bytes at ``offset``; a revisit refers to
    ``refers`` (the original's rid and second)."""
    fields: dict[str, object] = {"hsc": status, "rid": rid or f"<urn:uuid:{second}>"}
    if length is not None:
        fields["rle"] = length
    if refers is not None:
        fields["roi"], fields["rod"] = refers[0], ts(refers[1])
    return CDXJRecord.build(SURT, ts(second), rtype, uri=uri, ref=make_ref(name, offset), **fields)


def sorted_lines(*lines: CDXJRecord) -> list[CDXJRecord]:
    return sorted(lines, key=lambda r: r.sort_key)  # as the index gives them


# Each exchange: a request of 50 bytes, then its response of 100 (so captures start at
# 50, 200, 350, ...; the file ends at 150 * n).
CASES = [
    ("one capture", [line(1, 50)], 150, True, CapturePlace(50, 0, None)),
    ("the newest of two", [line(1, 50), line(2, 200)], 300, True, CapturePlace(200, 150, None)),
    (
        "an error answer newest: the good copy before it is kept",
        [line(1, 50), line(2, 200), line(3, 350, status=503)],
        450,
        True,
        CapturePlace(200, 150, None),
    ),
    (
        "... unless prefer_good is off",
        [line(1, 50), line(2, 200), line(3, 350, status=503)],
        450,
        False,
        CapturePlace(350, 300, None),
    ),
    (
        "only error answers: the newest of them",
        [line(1, 50, status=404), line(2, 200, status=500)],
        300,
        True,
        CapturePlace(200, 150, None),
    ),
    (
        "a 304 and a 206 are never served",
        [line(1, 50), line(2, 200, status=304), line(3, 350, status=206)],
        450,
        True,
        CapturePlace(50, 0, None),
    ),
    ("nothing servable", [line(1, 50, status=304)], 150, True, None),
    (
        "a revisit and its original, found by its rid and date",
        [
            line(1, 50, rid="<urn:uuid:a>"),
            line(2, 200, rid="<urn:uuid:b>"),
            line(3, 350, rtype="revisit", refers=("<urn:uuid:a>", 1)),
        ],
        450,
        True,
        CapturePlace(350, 300, 50),
    ),
    (
        "a revisit whose original has no line: for the file to say",
        [line(1, 50), line(3, 200, rtype="revisit", refers=("<urn:uuid:gone>", 1))],
        300,
        True,
        CapturePlace(200, 150, None),
    ),
    (
        "lines of the other scheme (same SURT) and of other files are not this file's",
        [
            line(1, 50),
            line(2, 9000, uri="https://example.com/page", name="other.warc.gz"),
            line(3, 50, name="other.warc.gz"),
        ],
        150,
        True,
        CapturePlace(50, 0, None),
    ),
]


@pytest.mark.parametrize(
    ("lines", "size", "prefer_good", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_served_capture_is_placed_from_its_lines(lines, size, prefer_good, expected) -> None:
    got = place_served(sorted_lines(*lines), key=KEY, name=NAME, size=size, prefer_good=prefer_good)
    assert got == expected


NOT_PLACED = [
    ("no line at all", [], 150),
    ("no line into this file", [line(1, 50, name="other.warc.gz")], 150),
    ("bytes after the newest line (a record whose line was never written)", [line(1, 50)], 300),
    ("the file shorter than the lines say (changed behind the index)", [line(1, 50)], 120),
    ("a line without its record's length", [line(1, 50), line(2, 200, length=None)], 300),
    (
        "time order is not file order (a capture appended with an older date)",
        [line(2, 50), line(1, 200)],
        300,
    ),
    (
        "... found on the way back from a 503 to the good copy before it",
        [line(2, 50), line(1, 200), line(3, 350, status=503)],
        450,
    ),
    ("two lines at one place", [line(1, 200), line(2, 200)], 300),
]


@pytest.mark.parametrize(
    ("lines", "size"), [case[1:] for case in NOT_PLACED], ids=[case[0] for case in NOT_PLACED]
)
def test_lines_that_cannot_stand_for_the_file_say_so(lines, size) -> None:
    with pytest.raises(NotPlaced):
        place_served(sorted_lines(*lines), key=KEY, name=NAME, size=size)


class Counted(Sequence[CDXJRecord]):
    """Lines that note which of them were taken."""

    def __init__(self, lines: list[CDXJRecord]) -> None:
        self.lines, self.taken = lines, set()

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i):  # noqa: ANN001, ANN204
        self.taken.add(i)
        return self.lines[i]


@pytest.mark.parametrize("captures", [10, 1000])
def test_only_the_lines_it_needs_are_read(captures: int) -> None:
    """A page fetched again and again: of its lines only the newest few are read (and, for a
    revisit, the original's, looked up by its date), so a lookup costs the same at ten
    captures and at a thousand.  The newest capture is a 503: the good one before it is
    served, a revisit of the second."""
    lines = [line(i, 50 + 150 * i) for i in range(captures - 2)]
    lines.append(
        line(captures - 2, 50 + 150 * (captures - 2), rtype="revisit", refers=("<urn:uuid:1>", 1))
    )
    lines.append(line(captures - 1, 50 + 150 * (captures - 1), status=503))
    counted = Counted(sorted_lines(*lines))
    got = place_served(counted, key=KEY, name=NAME, size=150 * captures)
    assert got == CapturePlace(50 + 150 * (captures - 2), 150 * (captures - 2), 200)
    assert {captures - 1, captures - 2, captures - 3} <= counted.taken
    assert len(counted.taken) <= 3 + 2 + max(1, captures).bit_length()  # the walk + a bisect
