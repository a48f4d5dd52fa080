"""The buffered access log: lines reach the stream within a second, at exit, and in bulk."""

from __future__ import annotations

import asyncio
import io
import logging
import re

import pytest

from wwwproxy.proxy.accesslog import FLUSH_EVERY, MAX_BUFFERED_LINES, AccessLog

LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} aiohttp\.access INFO 127\.0\.0\.1 "
    r'"GET http://example\.com/a" 200 1024 0\.002s HIT$'
)


@pytest.fixture
def info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiohttp.access")


def add(log: AccessLog, peer: str | None = "127.0.0.1") -> None:
    log.add(peer, "GET", "http://example.com/a", 200, 1024, 0.0021, "HIT")


async def test_a_line_waits_at_most_a_second_then_is_written(info):
    stream = io.StringIO()
    log = AccessLog(stream)
    add(log)
    assert stream.getvalue() == ""  # buffered
    await asyncio.sleep(FLUSH_EVERY + 0.5)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]), lines


async def test_close_writes_what_is_buffered(info):
    stream = io.StringIO()
    log = AccessLog(stream)
    for _ in range(3):
        add(log)
    log.close()
    assert len(stream.getvalue().splitlines()) == 3
    log.close()  # twice is harmless
    assert len(stream.getvalue().splitlines()) == 3


async def test_a_full_buffer_is_written_at_once(info):
    stream = io.StringIO()
    log = AccessLog(stream)
    for _ in range(MAX_BUFFERED_LINES):
        add(log)
    assert len(stream.getvalue().splitlines()) == MAX_BUFFERED_LINES
    log.close()


async def test_nothing_is_logged_when_the_access_logger_is_off(caplog):
    caplog.set_level(logging.WARNING, logger="aiohttp.access")
    stream = io.StringIO()
    log = AccessLog(stream)
    add(log)
    log.close()
    assert stream.getvalue() == ""


def test_without_a_loop_a_line_is_written_at_once(info):
    stream = io.StringIO()
    log = AccessLog(stream)
    add(log, peer=None)
    assert stream.getvalue().splitlines()[0].split(" INFO ")[1].startswith('- "GET ')


async def test_a_broken_stream_loses_lines_with_a_warning_not_an_exception(info, caplog):
    stream = io.StringIO()
    log = AccessLog(stream)
    add(log)
    stream.close()
    log.close()
    assert "access log lines lost" in caplog.text


SECONDS = [
    (0.0, "0.000s"),
    (0.0000123, "0.000s"),
    (0.00039, "0.000s"),
    (0.00051, "0.001s"),
    (0.0021, "0.002s"),
    (0.0123456, "0.012s"),
    (1.5, "1.500s"),
    (12.3456, "12.346s"),
]


@pytest.mark.parametrize(("seconds", "written"), SECONDS)
def test_the_time_taken_is_written_in_milliseconds_as_formatted(info, seconds, written):
    """Quick answers are written without formatting a float, the same as formatted."""
    stream = io.StringIO()
    AccessLog(stream).add("127.0.0.1", "GET", "http://example.com/a", 200, 1024, seconds, "HIT")
    line = stream.getvalue()
    assert line.endswith(f" 200 1024 {written} HIT\n"), line
    assert f"{seconds:.3f}s" == written
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} aiohttp\.access ", line), line


#: (when a line was added, the milliseconds its stamp shows)
MOMENTS = [
    (1_700_000_000.0, "000"),
    (1_700_000_000.0009, "000"),
    (1_700_000_000.5, "500"),
    (1_700_000_001.999, "999"),
    (1_700_003_600.25, "250"),
]


async def test_each_line_keeps_the_moment_it_was_added_at_though_written_later(info):
    """Lines are made into text when written, a batch at a time: each still carries its own
    time stamp, as a line written at once would."""
    import time

    stream = io.StringIO()
    log = AccessLog(stream)
    for now, _ in MOMENTS:
        log.add("127.0.0.1", "GET", "http://example.com/a", 200, 1024, 0.0021, "HIT", now)
    assert stream.getvalue() == ""
    log.close()
    stamps = [line.split(" aiohttp.access ")[0] for line in stream.getvalue().splitlines()]
    assert stamps == [
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(now))) + f",{millis}"
        for now, millis in MOMENTS
    ]
    for line in stream.getvalue().splitlines():
        assert LINE.match(line), line
