"""The outgoing queue: one file per archive key, atomic, malformed files reported."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from wwwproxy.archive.outgoing import OutgoingQueue, QueuedRequest
from wwwproxy.url import url_hash


def test_add_is_once_per_key_and_named_by_hash(tmp_path: Path) -> None:
    queue = OutgoingQueue(tmp_path / "outgoing")
    first = QueuedRequest("http://a/", "http://a/", headers=(("Accept", "*/*"),))
    assert queue.add(first) is True
    assert queue.add(QueuedRequest("http://a/", "http://a/", queued="later")) is False
    assert [p.name for p in (tmp_path / "outgoing").iterdir()] == [f"{url_hash('http://a/')}.json"]
    assert "http://a/" in queue and len(queue) == 1
    assert queue.requests() == [first]


def test_a_queued_request_is_the_users_alone(tmp_path: Path) -> None:
    """It may hold the browser's Cookie or Authorization: 0600 whatever the umask."""
    queue = OutgoingQueue(tmp_path / "outgoing")
    queue.add(QueuedRequest("http://a/", "http://a/", headers=(("Cookie", "s=1"),)))
    (path,) = (tmp_path / "outgoing").iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_browsers_target_round_trips_and_old_files_have_none(tmp_path: Path) -> None:
    queue = OutgoingQueue(tmp_path)
    req = QueuedRequest("http://a/w?t=S:x", "http://a/w?t=S:x", target="/w?t=S%3Ax")
    queue.add(req)
    assert OutgoingQueue(tmp_path).requests() == [req]
    old = '{"url": "http://b/", "key": "http://b/"}'
    assert QueuedRequest.from_json(old, "old.json").target is None
    assert "target" not in QueuedRequest("http://b/", "http://b/").to_json()
    with pytest.raises(ValueError, match="target"):
        QueuedRequest.from_json('{"url": "http://b/", "key": "http://b/", "target": 1}', "x")


def test_body_and_method_round_trip(tmp_path: Path) -> None:
    queue = OutgoingQueue(tmp_path)
    req = QueuedRequest(
        "http://a/f", "http://a/f?__wb_method=POST&x=1", "POST", (("A", "b"),), b"\x00x=1\xff"
    )
    queue.add(req)
    assert OutgoingQueue(tmp_path).requests() == [req]
    assert queue.remove(req.key) is True
    assert queue.remove(req.key) is False
    assert len(queue) == 0


@pytest.mark.parametrize(
    "content", [b"", b"{", b'{"url": 1}', b'{"key": "k"}', b'{"url":"u","key":"k","body":"!!"}']
)
def test_malformed_files_are_reported_not_fatal(tmp_path: Path, content: bytes) -> None:
    queue = OutgoingQueue(tmp_path)
    queue.add(QueuedRequest("http://ok/", "http://ok/"))
    bad = tmp_path / "broken.json"
    bad.write_bytes(content)
    entries = dict(queue.entries())
    assert isinstance(entries[bad], ValueError)
    assert str(bad) in str(entries[bad])
    assert [r.url for r in queue.requests()] == ["http://ok/"]


def test_missing_directory_is_an_empty_queue(tmp_path: Path) -> None:
    queue = OutgoingQueue(tmp_path / "nope")
    assert len(queue) == 0 and queue.requests() == []


def test_a_request_failing_limit_times_leaves_the_queue(tmp_path: Path) -> None:
    queue = OutgoingQueue(tmp_path)
    req = QueuedRequest("http://a/", "http://a/", queued="t0")
    queue.add(req)
    assert "failures" not in queue.path_for("http://a/").read_text()
    assert queue.failed("http://a/", 3) is None
    assert queue.failed("http://a/", 3) is None
    assert queue.requests() == [QueuedRequest("http://a/", "http://a/", queued="t0", failures=2)]
    assert queue.add(req) is False  # asked again meanwhile: the count stays
    assert queue.failed("http://a/", 3) == 3
    assert "http://a/" not in queue and len(queue) == 0
    assert queue.failed("http://a/", 3) is None  # gone: nothing to count


def test_no_limit_keeps_a_failing_request(tmp_path: Path) -> None:
    queue = OutgoingQueue(tmp_path)
    queue.add(QueuedRequest("http://a/", "http://a/"))
    for _ in range(5):
        assert queue.failed("http://a/", 0) is None
    assert queue.requests()[0].failures == 5


@pytest.mark.parametrize("failures", ['"2"', "-1", "true", "1.5"])
def test_a_bad_failure_count_is_not_a_queued_request(failures: str) -> None:
    text = f'{{"url": "http://b/", "key": "http://b/", "failures": {failures}}}'
    with pytest.raises(ValueError, match="failures"):
        QueuedRequest.from_json(text, "bad.json")
