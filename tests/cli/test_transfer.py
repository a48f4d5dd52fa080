"""``wwwproxy export`` and ``wwwproxy import-wwwoffle`` from the command line: what they
print, their exit status, and that a refused command writes nothing."""

from __future__ import annotations

import json
import os
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wwwproxy.archive.outgoing import OutgoingQueue
from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.store import Store
from wwwproxy.archive.warc import HTTPRequest, HTTPResponse
from wwwproxy.cli import main
from wwwproxy.url import canonicalize

PAGE = b"<html><head><title>A page</title></head><body>hi</body></html>"


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _cache(root: Path) -> Path:
    """A cache with three pages on two hosts, recorded through the store."""
    store = Store(root)
    for url, when in [
        ("http://example.com/", datetime(2026, 1, 1, tzinfo=UTC)),
        ("http://example.com/new", datetime(2026, 6, 1, tzinfo=UTC)),
        ("http://example.org:8080/", datetime(2026, 6, 1, tzinfo=UTC)),
    ]:
        u = canonicalize(url)
        store.put(
            u,
            u.file,
            HTTPRequest("GET", [("Host", u.hostport)], b""),
            HTTPResponse(200, "OK", [("Content-Type", "text/html")], PAGE),
            date=when,
        )
    return root


def test_export_wacz_and_pywb(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cache = _cache(tmp_path / "cache")
    wacz = tmp_path / "all.wacz"
    code, out, err = _run(capsys, "export", "--cache", cache, "--wacz", wacz)
    assert code == 0, err
    assert out.strip() == f"{wacz}: 3 captures (6 records) in 1 WARC file, 3 pages"
    with zipfile.ZipFile(wacz) as zf:
        pages = zf.read("pages/pages.jsonl").decode().splitlines()
    assert len(pages) == 4 and json.loads(pages[1])["title"] == "A page"
    # the WACZ is the user's alone, like the cache (the CLI's umask)
    assert wacz.stat().st_mode & 0o077 == 0

    coll = tmp_path / "coll"
    code, out, err = _run(
        capsys, "export", "--cache", cache, "--pywb", coll, "--host", "example.com",
        "--since", "2026-03-01",
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith(f"{coll}: 1 capture (2 records)")
    index = (coll / "indexes" / "index.cdxj").read_text()
    assert index.startswith("com,example)/new 20260601000000 ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--wacz", "{tmp}/x.wacz", "--since", "yesterday"], "--since: 'yesterday' is not a date"),
        (["--wacz", "{tmp}/x.wacz", "--pywb", "{tmp}/d"], "not allowed with argument"),
        ([], "one of the arguments --wacz --pywb is required"),
    ],
)
def test_export_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    cache = _cache(tmp_path / "cache")
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--cache", str(cache), *(a.format(tmp=tmp_path) for a in argv)])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.wacz").exists()


def test_export_refusals(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "export", "--cache", tmp_path / "nope", "--wacz", tmp_path / "a")
    assert code == 2 and "no such cache directory" in err
    assert not (tmp_path / "nope").exists()  # not made by asking
    cache = _cache(tmp_path / "cache")
    taken = tmp_path / "taken.wacz"
    taken.write_bytes(b"mine")
    code, _, err = _run(capsys, "export", "--cache", cache, "--wacz", taken)
    assert code == 2 and "exists already" in err
    assert taken.read_bytes() == b"mine"
    code, out, err = _run(
        capsys, "export", "--cache", cache, "--wacz", tmp_path / "e.wacz", "--host", "nowhere"
    )
    assert code == 0 and "0 captures" in out and "nothing matched" in err


def _spool(root: Path) -> Path:
    host = root / "http" / "example.com"
    host.mkdir(parents=True)
    (host / "Dabc").write_bytes(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE)
    (host / "Uabc").write_bytes(b"http://example.com/from-wwwoffle")
    os.utime(host / "Dabc", (1_700_000_000, 1_700_000_000))
    (host / "Dlost").write_bytes(b"HTTP/1.1 200 OK\r\n\r\nx")
    out = root / "outgoing"
    out.mkdir()
    (out / "Oq").write_bytes(b"GET http://example.com/later HTTP/1.0\r\n\r\n")
    (out / "Uq").write_bytes(b"http://example.com/later")
    return root


def test_import_wwwoffle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spool = _spool(tmp_path / "spool")
    cache = tmp_path / "cache"
    code, out, err = _run(capsys, "import-wwwoffle", "--cache", cache, spool)
    assert code == 0, err
    lines = out.splitlines()
    assert "imported\t200\t2023-11-14T22:13:20Z\thttp://example.com/from-wwwoffle" in lines
    assert "queued\thttp://example.com/later" in lines
    assert any(
        line.startswith("skipped\t") and line.endswith("Dlost\tD file without its U file: its "
        "URL is unknown") for line in lines
    )  # fmt: skip
    assert err.strip() == f"{spool}: 1 page imported, 1 request queued, 1 skipped"
    entry = Store(cache).get(canonicalize("http://example.com/from-wwwoffle"))
    assert entry is not None and entry.status == 200
    index = SearchIndex(cache)  # imported through the services serve uses: searchable too
    try:
        hits = index.search("page").hits
    finally:
        index.close()
    assert [h.url for h in hits] == ["http://example.com/from-wwwoffle"]
    assert [r.url for r in OutgoingQueue(cache / "outgoing").requests()] == [
        "http://example.com/later"
    ]
    # again: nothing new, and so an exit status that says nothing was imported
    code, out, err = _run(capsys, "import-wwwoffle", "--cache", cache, spool)
    assert code == 1
    assert "0 pages imported, 0 requests queued, 3 skipped" in err


def test_import_wwwoffle_not_a_spool(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = _run(capsys, "import-wwwoffle", "--cache", tmp_path / "c", tmp_path / "empty")
    assert code == 2 and "not a WWWOFFLE spool" in err


def test_import_warcs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A WARC imported: the report, exit 0; again: all skipped as held already; a truncated
    one: what came before the tear, exit 1; not a WARC: exit 2 and nothing imported."""
    first = _cache(tmp_path / "first")
    warcs = tmp_path / "warcs"
    warcs.mkdir()
    whole = b"".join(p.read_bytes() for p in Store(first).warc_files())
    (warcs / "all.warc.gz").write_bytes(whole)
    cache = tmp_path / "cache"
    code, out, err = _run(capsys, "import", "--cache", cache, warcs)
    assert code == 0, err
    assert out == ""
    assert "3 captures imported from 6 records in 1 WARC file, 0 skipped, 0 damaged files" in err
    assert "1/1 files, 6 records, 3 captures recorded" in err  # the progress line

    code, out, err = _run(capsys, "import", "--cache", cache, warcs / "all.warc.gz")
    assert code == 0, err
    assert out.startswith("skipped\t3\ta capture the cache holds already\t(e.g. ")
    assert "0 captures imported" in err

    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(whole[:-7])
    code, out, err = _run(capsys, "import", "--cache", tmp_path / "other", cut)
    assert code == 1
    assert f"damaged\t{cut}: at offset " in out and "torn write" in out
    assert "2 captures imported" in err

    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    code, out, err = _run(capsys, "import", "--cache", tmp_path / "third", cut, notes)
    assert code == 2
    assert err == (
        f"wwwproxy import: {notes}: not a WARC (.warc, .warc.gz) or WACZ (.wacz) file; "
        "nothing was imported\n"
    )
    assert not list(Store(tmp_path / "third").warc_files())
