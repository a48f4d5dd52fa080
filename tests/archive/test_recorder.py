"""The recorder on its own: it spools a body into the folder it is given and hands the whole
exchange to the ``put`` it is given (no store)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from wwwproxy.archive import recorder as recorder_module
from wwwproxy.archive.cdxj import CDXJRecord
from wwwproxy.archive.errors import StoreError
from wwwproxy.archive.recorder import Recorder
from wwwproxy.archive.warc import HTTPRequest, HTTPResponse
from wwwproxy.url import URL, canonicalize

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class NotedPut:
    """A ``put`` that notes each exchange, its body read whole (as the store would)."""

    def __init__(self) -> None:
        self.exchanges: list[tuple[URL, str, HTTPRequest, HTTPResponse, bytes, datetime]] = []

    def __call__(
        self,
        url: URL,
        key: str,
        request: HTTPRequest,
        response: HTTPResponse,
        *,
        date: datetime | None = None,
    ) -> list[CDXJRecord]:
        body = response.body if isinstance(response.body, bytes) else response.body.read()
        assert date is not None
        self.exchanges.append((url, key, request, response, body, date))
        return []


def recorder(put: NotedPut, spool: Path) -> Recorder:
    url = canonicalize("http://r.example/a?b=1")
    return Recorder(
        put,
        spool,
        url,
        url.file,
        method="GET",
        request_headers=[("Accept", "*/*")],
        request_body=b"",
        date=WHEN,
    )


@pytest.mark.parametrize("chunks", [[b"one ", b"two"], [b"x" * 700_000, b"y" * 700_000]])
def test_the_body_streamed_in_is_handed_over_whole_with_the_exchange(tmp_path, chunks):
    """Small bodies stay in memory, large ones spool to a file in the folder given."""
    put = NotedPut()
    rec = recorder(put, tmp_path)
    for chunk in chunks:
        rec.write(chunk)
    assert rec.size == sum(map(len, chunks))
    assert rec.finish(200, "OK", [("Content-Type", "text/plain")]) == []
    ((url, key, request, response, body, date),) = put.exchanges
    assert (url.canonical, key) == ("http://r.example/a?b=1", url.file)
    assert (request.method, request.target, list(request.headers)) == (
        "GET",
        "/a?b=1",
        [("Accept", "*/*")],
    )
    assert (response.status, response.reason, body, date) == (200, "OK", b"".join(chunks), WHEN)


def test_a_finished_or_aborted_recorder_takes_nothing_more(tmp_path):
    put = NotedPut()
    rec = recorder(put, tmp_path)
    rec.write(b"x")
    rec.finish(200, "OK", [])
    with pytest.raises(StoreError):
        rec.write(b"more")
    with pytest.raises(StoreError):
        rec.finish(200, "OK", [])
    torn = recorder(put, tmp_path)
    torn.write(b"half")
    torn.abort()
    with pytest.raises(StoreError):
        torn.finish(200, "OK", [])
    assert len(put.exchanges) == 1  # the torn response was never handed over


def test_a_spool_that_cannot_be_written_is_noted_and_nothing_is_handed_over(tmp_path, monkeypatch):
    """A full disk while spooling: the browser's answer goes on, the exchange is dropped."""
    monkeypatch.setattr(recorder_module, "_SPOOL_MEMORY", 4)
    put = NotedPut()
    rec = recorder(put, tmp_path / "missing")  # the spool's file cannot be made there
    rec.write(b"much more than four bytes")
    assert isinstance(rec.failed, OSError)
    with pytest.raises(OSError):
        rec.finish(200, "OK", [])
    assert put.exchanges == []
