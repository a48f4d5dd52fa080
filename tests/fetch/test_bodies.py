"""Reading cached bodies: decoded payloads and the digest of the decoded content."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import brotli

from wwwproxy.archive.store import Store
from wwwproxy.fetch.bodies import decoded_digest, read_decoded
from wwwproxy.url import canonicalize


def test_read_decoded_undoes_br_and_keeps_to_its_limit(tmp_path: Path) -> None:
    page = b"<html><a href='/next.html'>next</a></html>" * 100
    store = Store(tmp_path / "cache")
    url = canonicalize("http://www.example.com/br.html")
    recorder = store.recorder(url, url.file, method="GET", request_headers=[], request_body=b"")
    recorder.write(brotli.compress(page))
    recorder.finish(200, "OK", [("Content-Type", "text/html"), ("Content-Encoding", "br")])
    entry = store.get(url)
    assert entry is not None
    assert read_decoded(entry) == page
    assert read_decoded(entry, 100) == page[:100]


def test_digest_is_of_the_decoded_content() -> None:
    data = b"static content\n" * 500
    length, sha = decoded_digest(io.BytesIO(gzip.compress(data)), "gzip")
    assert length == len(data)
    import hashlib

    assert sha == hashlib.sha256(data).hexdigest()
