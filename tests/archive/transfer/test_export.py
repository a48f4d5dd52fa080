"""Exports of a cache the real proxy recorded from a real origin: a WACZ that the ``wacz``
package's validator accepts, and a pywb collection; each index line read back with warcio at
its offset in the exported WARC files."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import subprocess
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive.store import Store
from wwwproxy.archive.transfer import ExportError, Selection, export_pywb, export_wacz

from .conftest import Origin, Proxy

PATHS = ["/page.html", "/image.png", "/missing", "/page.html?lang=en&a=1"]


async def _recorded(origin: Origin, proxy: Proxy) -> list[str]:
    """The origin's page (twice: a revisit), image, a 404 and a query URL, through the proxy."""
    urls = [origin.url(p) for p in PATHS]
    for url in [*urls, urls[0]]:
        reply = await proxy.get(url)
        assert reply.status in (200, 404), url
    for url in urls:
        await proxy.recorded(url, 4 if url == urls[0] else 2)
    return urls


def _record_at(data: bytes, offset: int, length: int):  # noqa: ANN202 (a warcio record)
    """The one record at ``offset`` of an exported WARC, as warcio reads it."""
    member = data[offset : offset + length]
    assert gzip.decompress(member).startswith(b"WARC/1.1\r\n")  # exactly one whole member
    record = next(iter(ArchiveIterator(io.BytesIO(member))))
    return record, record.content_stream().read()


def _validate(python: Path, wacz: Path) -> subprocess.CompletedProcess[str]:
    """``wacz validate -f WACZ`` with the ``wacz`` package's own environment."""
    return subprocess.run(
        [str(python), "-c", "import sys; from wacz.main import main; sys.exit(main())"]
        + ["validate", "-f", str(wacz)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _lines(text: str) -> list[tuple[str, str, dict[str, str]]]:
    out = []
    for line in text.splitlines():
        key, stamp, block = line.split(" ", 2)
        out.append((key, stamp, json.loads(block)))
    return out


def _check_lines(lines: list[tuple[str, str, dict[str, str]]], warcs: dict[str, bytes]) -> None:
    """Every line points at its own record: same URL, status and payload digest."""
    for _key, stamp, fields in lines:
        record, _body = _record_at(
            warcs[fields["filename"]], int(fields["offset"]), int(fields["length"])
        )
        assert record.rec_headers.get_header("WARC-Target-URI") == fields["url"]
        assert record.rec_headers.get_header("WARC-Payload-Digest") == fields["digest"]
        assert record.http_headers.get_statuscode() == fields["status"]
        assert (
            record.rec_headers.get_header("WARC-Date")
            .replace("-", "")
            .replace(":", "")
            .replace("T", "")[:14]
            == stamp
        )
        expected = "revisit" if fields["mime"] == "warc/revisit" else "response"
        assert record.rec_type == expected


async def test_wacz_export_is_valid_and_complete(
    origin: Origin, proxy: Proxy, tmp_path: Path, wacz_venv: Path
) -> None:
    urls = await _recorded(origin, proxy)
    target = tmp_path / "out" / "cache.wacz"
    done = await asyncio.to_thread(export_wacz, proxy.store, target, Selection(), title="Mine")
    assert done.copied.problems == []

    with zipfile.ZipFile(target) as zf:
        names = zf.namelist()
        files = {name: zf.read(name) for name in names}
        infos = {i.filename: i for i in zf.infolist()}
    [warc_name] = [n for n in names if n.startswith("archive/")]
    assert warc_name.endswith(".warc.gz")
    assert infos[warc_name].compress_type == zipfile.ZIP_STORED  # read by offset when replayed
    assert {"indexes/index.cdx", "pages/pages.jsonl", "datapackage.json"} <= set(names)

    # datapackage.json: each file with its size and SHA-256, and its own digest beside it
    package = json.loads(files["datapackage.json"])
    assert package["wacz_version"] == "1.1.1" and package["title"] == "Mine"
    listed = {r["path"]: r for r in package["resources"]}
    assert set(listed) == set(names) - {"datapackage.json", "datapackage-digest.json"}
    for path, resource in listed.items():
        assert resource["bytes"] == len(files[path])
        assert resource["hash"] == "sha256:" + hashlib.sha256(files[path]).hexdigest()
    digest = json.loads(files["datapackage-digest.json"])
    assert digest["hash"] == "sha256:" + hashlib.sha256(files["datapackage.json"]).hexdigest()

    # the index: sorted, pywb's keys, one line per capture (the page's second one a revisit)
    raw = files["indexes/index.cdx"].decode()
    assert raw.splitlines() == sorted(raw.splitlines(), key=lambda s: s.encode())
    lines = _lines(raw)
    assert sorted(f["url"] for _, _, f in lines) == sorted([*urls, urls[0]])
    assert sum(f["mime"] == "warc/revisit" for _, _, f in lines) == 1
    assert {f["status"] for _, _, f in lines} == {"200", "404"}
    warc = files[warc_name]
    _check_lines(lines, {warc_name.removeprefix("archive/"): warc})
    records = list(ArchiveIterator(io.BytesIO(warc)))
    assert len(records) == 10  # five exchanges: request + response (or revisit) each

    # pages: a header, then the HTML pages answered 200 with their titles
    pages = [json.loads(line) for line in files["pages/pages.jsonl"].decode().splitlines()]
    assert pages[0]["format"] == "json-pages-1.0"
    assert sorted(p["url"] for p in pages[1:]) == sorted([urls[0], urls[3]])
    assert {p["title"] for p in pages[1:]} == {"Origin page"}
    assert all(datetime.fromisoformat(p["ts"].replace("Z", "+00:00")) for p in pages[1:])

    result = _validate(wacz_venv, target)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "succeeded" in result.stdout.lower(), result.stdout


def test_the_validator_refuses_a_wacz_that_lies(tmp_path: Path, wacz_venv: Path) -> None:
    """The acceptance check can fail: a package whose listed digest is wrong is refused."""
    store = Store(tmp_path / "cache")
    good = tmp_path / "empty.wacz"
    export_wacz(store, good, Selection())
    assert _validate(wacz_venv, good).returncode == 0  # an empty cache: valid, and empty
    bad = tmp_path / "bad.wacz"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(bad, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "pages/pages.jsonl":
                data += b'{"url": "http://tampered.example/", "ts": "2026-01-01T00:00:00Z"}\n'
            zout.writestr(info, data)
    result = _validate(wacz_venv, bad)
    assert result.returncode != 0, result.stdout


async def test_pywb_collection(origin: Origin, proxy: Proxy, tmp_path: Path) -> None:
    urls = await _recorded(origin, proxy)
    directory = tmp_path / "collections" / "mine"
    done = await asyncio.to_thread(export_pywb, proxy.store, directory, Selection())
    assert sorted(p.name for p in directory.iterdir()) == ["archive", "indexes"]
    [warc] = list((directory / "archive").iterdir())
    assert warc.name.endswith(".warc.gz") and warc.name == done.copied.warcs[0].name
    raw = (directory / "indexes" / "index.cdxj").read_text()
    assert raw.splitlines() == sorted(raw.splitlines(), key=lambda s: s.encode())
    lines = _lines(raw)
    assert sorted(f["url"] for _, _, f in lines) == sorted([*urls, urls[0]])
    _check_lines(lines, {warc.name: warc.read_bytes()})
    # the keys pywb computes for these URLs
    port = origin.port
    assert {k for k, _, _ in lines} == {
        f"1,0,0,127:{port})/page.html",
        f"1,0,0,127:{port})/image.png",
        f"1,0,0,127:{port})/missing",
        f"1,0,0,127:{port})/page.html?a=1&lang=en",
    }


async def test_host_and_since_choose_what_goes_out(
    origin: Origin, proxy: Proxy, tmp_path: Path
) -> None:
    urls = await _recorded(origin, proxy)
    store = proxy.store
    host = f"127.0.0.1:{origin.port}"
    other = export_pywb(store, tmp_path / "other", Selection(hosts=("example.org",)))
    assert other.copied.lines == [] and other.copied.records == 0
    same = export_pywb(store, tmp_path / "same", Selection(hosts=(host,)))
    assert len(same.copied.lines) == 5
    any_port = export_pywb(store, tmp_path / "any", Selection(hosts=("127.0.0.1",)))
    assert len(any_port.copied.lines) == 5

    future = datetime.now(UTC) + timedelta(days=1)
    assert export_pywb(store, tmp_path / "none", Selection(since=future)).copied.records == 0

    # since the page's second capture: that revisit, and the response it stands for
    [first, second] = sorted(store.captures(proxy.key_for(urls[0])), key=lambda r: r.timestamp)
    since = datetime.fromisoformat(second.timestamp.replace("Z", "+00:00"))
    later = export_pywb(store, tmp_path / "later", Selection(since=since))
    revisits = [ln for ln in later.copied.lines if '"warc/revisit"' in ln.text]
    assert len(revisits) == 1
    assert any(urls[0] in ln.text and '"text/html"' in ln.text for ln in later.copied.lines)
    warc = later.copied.warcs[0]
    records = list(
        ArchiveIterator(io.BytesIO((tmp_path / "later" / "archive" / warc).read_bytes()))
    )
    response_ids = {r.rec_headers.get_header("WARC-Record-ID") for r in records}
    [revisit] = [r for r in records if r.rec_type == "revisit"]
    assert revisit.rec_headers.get_header("WARC-Refers-To") in response_ids


def test_existing_targets_are_never_overwritten(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    wacz = tmp_path / "there.wacz"
    wacz.write_bytes(b"precious")
    with pytest.raises(ExportError, match="exists already"):
        export_wacz(store, wacz, Selection())
    assert wacz.read_bytes() == b"precious"
    folder = tmp_path / "coll"
    folder.mkdir()
    (folder / "mine.txt").write_text("precious")
    with pytest.raises(ExportError, match="not an empty folder"):
        export_pywb(store, folder, Selection())
    assert [p.name for p in folder.iterdir()] == ["mine.txt"]
    # an empty folder is taken, and nothing temporary is left beside it
    empty = tmp_path / "empty"
    empty.mkdir()
    export_pywb(store, empty, Selection())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cache",
        "coll",
        "empty",
        "there.wacz",
    ]
