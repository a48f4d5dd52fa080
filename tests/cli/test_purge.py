"""``wwwproxy purge`` run as a user runs it, on a cache written by the real store."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

from .test_main import wwwproxy

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def put(store: Store, url_text: str, body: bytes, when: datetime) -> Path:
    url = canonicalize(url_text)
    rec = store.recorder(url, url.file, method="GET", request_headers=[], request_body=b"")
    rec.date = when
    rec.write(body)
    rec.finish(200, "OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return store.path_for(url)


def records(path: Path) -> list[str]:
    with open(path, "rb") as f:
        return [r.rec_type for r in ArchiveIterator(f)]


def make_cache(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A cache of three pages: one with four captures, an old picture, a fresh page."""
    cache = tmp_path / "cache"
    store = Store(cache)
    for i in range(4):
        history = put(store, "http://example.com/news", f"edition {i}".encode(), T0 + timedelta(i))
    old = put(store, "http://example.com/old.jpg", b"\xff\xd8" * 500, T0)
    os.utime(old, (0, time.time() - 40 * 86400))
    fresh = put(store, "http://example.com/fresh", b"fresh" * 100, T0)
    config = tmp_path / "wwwproxy.yaml"
    config.write_text(
        f"cache: {cache}\n"
        "keep_captures: 2\n"
        "purge_after_days:\n"
        "  - pattern: '\\.jpg$'\n"
        "    days: 30\n",
        encoding="utf-8",
    )
    return config, history, old, fresh


def test_dry_run_says_what_would_go_and_changes_nothing(tmp_path: Path) -> None:
    config, history, old, fresh = make_cache(tmp_path)
    before = {p: p.stat().st_size for p in (history, old, fresh)}
    result = wwwproxy("purge", "--dry-run", "-c", str(config))
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode().splitlines()
    assert out[0].startswith("would remove\thttp://example.com/old.jpg\t1 capture(s), ")
    assert "not used for 40 days (rule '\\.jpg$': 30)" in out[0]
    assert out[1].startswith("would trim\thttp://example.com/news\t2 old capture(s), ")
    freed = before[old] + int(out[1].split(", ")[1].split()[0])
    assert out[2].startswith("would free ") and f"({freed} bytes)" in out[2]
    assert "1 file(s) removed, 3 capture(s) in all (1 file(s) trimmed)" in out[2]
    assert {p: p.stat().st_size for p in (history, old, fresh)} == before


def test_purge_frees_what_it_says_and_leaves_a_clean_index(tmp_path: Path) -> None:
    config, history, old, fresh = make_cache(tmp_path)
    total = sum(p.stat().st_size for p in (history, old, fresh))
    dry = wwwproxy("purge", "--dry-run", "-c", str(config)).stdout.decode().splitlines()
    result = wwwproxy("purge", "-c", str(config))
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode().splitlines()
    assert [line.split("\t")[:2] for line in out[:2]] == [
        ["removed", "http://example.com/old.jpg"],
        ["trimmed", "http://example.com/news"],
    ]
    assert out[2].replace("freed", "would free").replace("now take", "would take") == dry[2]
    freed = int(out[2].split("(")[1].split()[0])
    assert not old.exists()
    assert records(history) == ["request", "response"] * 2
    assert total - sum(p.stat().st_size for p in (history, fresh)) == freed
    check = wwwproxy("index", "check", "--cache", str(tmp_path / "cache"))
    assert check.returncode == 0, check.stdout
    again = wwwproxy("purge", "-c", str(config))
    assert again.stdout.decode().startswith("freed 0 bytes (0 bytes): 0 file(s) removed")


def test_max_size_and_cache_override(tmp_path: Path) -> None:
    config, history, old, fresh = make_cache(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("keep_captures: 0\nmax_size: 1 KiB\n", encoding="utf-8")
    result = wwwproxy("purge", "-c", str(other), "--cache", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert all("over max_size" in line for line in lines[:-1]) and len(lines) >= 2
    left = sum(p.stat().st_size for p in (history, old, fresh) if p.exists())
    assert left <= 0.9 * 1024
    assert not old.exists()  # the least recently used went first


def test_bad_configuration_and_missing_cache(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_size: lots\n", encoding="utf-8")
    result = wwwproxy("purge", "-c", str(bad))
    assert result.returncode == 2
    assert f"{bad}:1: key 'max_size': expected a size" in result.stderr.decode()
    none = wwwproxy("purge", "--cache", str(tmp_path / "nowhere"), "-c", str(tmp_path / "x"))
    assert none.returncode == 2
    empty = tmp_path / "empty.yaml"
    empty.write_text(f"cache: {tmp_path}\nkeep_captures: 0\n", encoding="utf-8")
    nothing = wwwproxy("purge", "-c", str(empty))
    assert nothing.returncode == 0 and b"no limits configured" in nothing.stdout
