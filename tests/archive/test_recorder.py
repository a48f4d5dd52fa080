"""The recorder on its own: it spools a body into the folder it is given and hands the
response to the ``put`` it is given (no store)."""

from __future__ import annotations

import pytest

from wwwproxy.archive import recorder as recorder_module
from wwwproxy.archive.cdxj import CDXJRecord
from wwwproxy.archive.errors import StoreError
from wwwproxy.archive.recorder import Recorder
from wwwproxy.archive.warc import HTTPResponse


class NotedPut:
    """A ``put`` that notes each response, its body read whole (as the store would)."""

    def __init__(self) -> None:
        self.responses: list[tuple[HTTPResponse, bytes]] = []

    def __call__(self, response: HTTPResponse) -> list[CDXJRecord]:
        body = response.body if isinstance(response.body, bytes) else response.body.read()
        self.responses.append((response, body))
        return []


@pytest.mark.parametrize("chunks", [[b"one ", b"two"], [b"x" * 700_000, b"y" * 700_000]])
def test_the_body_streamed_in_is_handed_over_whole_with_the_exchange(tmp_path, chunks):
    """Small bodies stay in memory, large ones spool to a file in the folder given."""
    put = NotedPut()
    rec = Recorder(put, tmp_path)
    for chunk in chunks:
        rec.write(chunk)
    assert rec.size == sum(map(len, chunks))
    assert rec.finish(200, "OK", [("Content-Type", "text/plain")], "HTTP/1.0") == []
    ((response, body),) = put.responses
    assert (response.status, response.reason, response.version) == (200, "OK", "HTTP/1.0")
    assert list(response.headers) == [("Content-Type", "text/plain")]
    assert body == b"".join(chunks)


def test_a_finished_or_aborted_recorder_takes_nothing_more(tmp_path):
    put = NotedPut()
    rec = Recorder(put, tmp_path)
    rec.write(b"x")
    rec.finish(200, "OK", [])
    with pytest.raises(StoreError):
        rec.write(b"more")
    with pytest.raises(StoreError):
        rec.finish(200, "OK", [])
    torn = Recorder(put, tmp_path)
    torn.write(b"half")
    torn.abort()
    with pytest.raises(StoreError):
        torn.finish(200, "OK", [])
    assert len(put.responses) == 1  # the torn response was never handed over


def test_a_spool_that_cannot_be_written_is_noted_and_nothing_is_handed_over(tmp_path, monkeypatch):
    """A full disk while spooling: the browser's answer goes on, the exchange is dropped."""
    monkeypatch.setattr(recorder_module, "_SPOOL_MEMORY", 4)
    put = NotedPut()
    rec = Recorder(put, tmp_path / "missing")  # the spool's file cannot be made there
    rec.write(b"much more than four bytes")
    assert isinstance(rec.failed, OSError)
    with pytest.raises(OSError):
        rec.finish(200, "OK", [])
    assert put.responses == []


def test_a_small_body_never_touches_the_spool_folder(tmp_path):
    """Kept as its chunks in memory: a folder that cannot take a file does not matter."""
    put = NotedPut()
    rec = Recorder(put, tmp_path / "missing")
    rec.write(b"small ")
    rec.write(bytearray(b"page"))  # a buffer the caller may reuse is copied
    assert rec.failed is None
    rec.finish(200, "OK", [])
    ((response, body),) = put.responses
    assert isinstance(response.body, bytes)
    assert body == b"small page"


@pytest.mark.parametrize("extra", [0, 1])
def test_a_body_spools_to_a_file_from_the_byte_past_the_memory_limit(tmp_path, monkeypatch, extra):
    monkeypatch.setattr(recorder_module, "_SPOOL_MEMORY", 10)
    put = NotedPut()
    rec = Recorder(put, tmp_path)
    chunks = [b"abcd", b"efgh", b"ij", b"k" * extra, b"lmn" * extra]
    for chunk in chunks:
        rec.write(chunk)
    rec.finish(200, "OK", [])
    ((response, body),) = put.responses
    assert body == b"".join(chunks)
    assert isinstance(response.body, bytes) == (extra == 0)
    if extra:
        assert response.body.closed  # the spool's file, closed once put
