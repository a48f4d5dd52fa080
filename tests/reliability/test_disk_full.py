"""A full disk: recording stops with one clear log line per burst, browsers still get their
pages online, offline hits keep working, nothing recorded is damaged, offline misses get a
clear answer instead of a traceback, and recording resumes once there is space again.

The cache lives on a small tmpfs the test mounts (root, as in CI, or a user allowed to mount);
where that is impossible the test is skipped with the reason."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from ..proxy.conftest import LARGE_BODY

FS_BYTES = 4 * 1024 * 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES},mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> Path:
    """Take every free byte of the file system."""
    filler = directory / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


def every_record_reads(cache: Path) -> int:
    """warcio reads every WARC file whole; the number of files (none empty)."""
    files = sorted(cache.rglob("*.warc.gz"))
    for path in files:
        assert path.stat().st_size > 0, f"{path} is empty"
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                record.content_stream().read()
    return len(files)


async def test_a_full_disk_loses_nothing_and_recording_resumes(
    make_proxy, origin, small_fs, caplog
):
    caplog.set_level(logging.INFO)
    cache = small_fs / "cache"
    proxy = await make_proxy(cache=cache, memory_cache_mb=0)
    kept = origin.url("/page.html?kept")
    await proxy.get(kept)
    await proxy.recorded(kept)

    # 1. a body larger than the room left: the browser gets all of it, it is not recorded
    reply = await proxy.get(origin.url("/large"))
    assert (reply.status, len(reply.body)) == (200, len(LARGE_BODY))
    assert reply.body == LARGE_BODY

    # 2. no room at all: pages are relayed whole; one log line for the whole burst
    filler = fill(small_fs)
    for n in range(5):
        reply = await proxy.get(origin.url(f"/page.html?full={n}"))
        assert (reply.status, reply.body) == (200, origin.HTML)
    lines = [r.getMessage() for r in caplog.records if "recording stopped" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "disk is full" in lines[0]

    # 3. offline: the copy recorded before is served; a miss is a clear 507, not a 500
    await proxy.control(mode="offline")
    reply = await proxy.get(kept)
    assert (reply.status, reply.body, reply.header("X-Cache")) == (200, origin.HTML, "HIT")
    reply = await proxy.get(origin.url("/page.html?never"))
    assert reply.status == 507 and b"could not be queued" in reply.body

    # 4. nothing recorded is damaged, and no empty file was left by the failed appends
    assert every_record_reads(cache) >= 1

    # 5. space again: recording resumes
    os.unlink(filler)
    await proxy.control(mode="online")
    after = origin.url("/page.html?after")
    assert (await proxy.get(after)).status == 200
    assert len(await proxy.recorded(after)) == 2
    every_record_reads(cache)
    # the errors logged are the two expected ones, each once, without a traceback
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [r for r in errors if r.exc_info], [r.getMessage() for r in errors]
    messages = sorted(r.getMessage() for r in errors)
    assert len(messages) == 2, messages
    assert messages[0].startswith(f"could not queue {origin.url('/page.html?never')}: ")
    assert messages[1].startswith("recording stopped: the cache's disk is full")
    caplog.clear()  # expected: the proxy fixture's check for errors is done here
