"""``wwwproxy fetch``, ``wwwproxy urldb`` and ``wwwproxy monitor`` from the command line."""

from __future__ import annotations

import argparse
import hashlib
import io
import os
from pathlib import Path

import pytest

from wwwproxy.archive.outgoing import OutgoingQueue, QueuedRequest
from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.store import Store
from wwwproxy.cli import main
from wwwproxy.cli.fetch import (
    add_fetch_parser,
    add_urldb_parser,
    parse_url_list,
)
from wwwproxy.cli.monitor import add_monitor_parser
from wwwproxy.config import Config
from wwwproxy.recording.wiring import build_services
from wwwproxy.url import canonicalize
from wwwproxy.urldb import URLDatabase

from .conftest import STATIC, Site


def native(text: str) -> bytes:
    return text.replace("\n", os.linesep).encode()


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="wwwproxy")
    sub = parser.add_subparsers(dest="command", required=True)
    add_fetch_parser(sub)
    add_urldb_parser(sub)
    add_monitor_parser(sub)
    args = parser.parse_args([str(a) for a in argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


# --- URL lists ---------------------------------------------------------------------------------


def test_parse_url_list() -> None:
    text = (
        "# my list\n"
        "\n"
        "  http://Example.COM/a  \n"
        "http://exa mple.com/\n"
        "ftp://example.com/file\n"
        "https://example.com/b#frag\n"
        "   # indented comment\n"
    )
    urls, problems = parse_url_list(text, "list.txt")
    assert urls == ["http://example.com/a", "https://example.com/b"]
    assert problems == [
        "list.txt:4: 'http://exa mple.com/' is not a URL: host 'exa mple.com' contains a space",
        "list.txt:5: 'ftp://example.com/file' is not an http or https URL",
    ]


# --- wwwproxy fetch ----------------------------------------------------------------------------


def test_fetch_a_list_file(tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    listing = tmp_path / "list.txt"
    listing.write_text(f"# pages\n{site.url('/a.html')}\n\n{site.url('/deep/d.html')}\n")
    saving = tmp_path / "saving.yaml"  # WWWOFFLE's saving rule: ten minutes without asking
    saving.write_text("request_changed: 600\n")
    code, out, err = run(capsys, "fetch", "-c", saving, "--cache", cache, listing)
    assert code == 0, err
    assert f"fetched 200 75 B {site.url('/a.html')}\n" in err  # plain lines: not a terminal
    assert "2 URLs: 2 fetched" in err
    assert sorted(site.take_hits()) == ["/a.html", "/deep/d.html"]
    # again: nothing is fetched, and it says so
    code, out, err = run(capsys, "fetch", "-c", saving, "--cache", cache, listing)
    assert code == 0
    assert "2 URLs: 0 fetched" in err and "2 already fresh" in err
    assert site.take_hits() == []


def test_fetched_pages_are_in_the_search_index(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    """The proxy's /search/ finds what ``wwwproxy fetch`` recorded, like what it recorded
    itself: the fetch ends with its pages recorded, not indexed, and the services of the next
    start (the proxy's) catch up with them."""
    cache = tmp_path / "cache"
    code, _, err = run(capsys, "fetch", "--cache", cache, site.url("/deep/d.html"))
    assert code == 0, err
    unattached = SearchIndex(cache)  # the fetch indexed nothing
    try:
        assert unattached.count() == (0, 0)
    finally:
        unattached.close()
    services = build_services(Config(cache=cache))  # as `wwwproxy serve` starts
    index = services.search
    assert index is not None
    try:
        assert index.flush(60)  # caught up in the background (a search waits but a while)
        hits = index.search("end").hits
    finally:
        index.close()
    assert [h.url for h in hits] == [site.url("/deep/d.html")]


def test_fetch_failures_give_exit_status_1(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = tmp_path / "list.txt"
    listing.write_text(f"{site.url('/')}\nhttp://exa mple.com/\n")
    code, _, err = run(
        capsys, "fetch", "--cache", tmp_path / "cache", "--depth", "1", "--delay", "0", listing
    )
    assert code == 1
    assert f"{listing}:2: 'http://exa mple.com/' is not a URL" in err
    assert f"FAILED  404 {site.url('/missing.html')}: HTTP 404 Not Found" in err
    assert f"robots  {site.url('/private/secret.html')}: disallowed by robots.txt" in err
    assert "failed:\n" in err and "redirect loop" in err


def test_fetch_urls_from_stdin_and_arguments(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(site.url("/deep/c.html") + "\n"))
    code, _, err = run(capsys, "fetch", "--cache", tmp_path / "c", "-", site.url("/frame2.html"))
    assert code == 0, err
    assert sorted(site.take_hits()) == ["/deep/c.html", "/frame2.html"]


def test_fetch_a_url_database_by_category(
    tmp_path: Path, named: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    db = URLDatabase(tmp_path / "urldb")
    db.add("http://example.com/about/", "text/html; charset=utf-8", ["docs"])
    db.add("http://example.com/m51.txt", "text/ascii", ["data"])
    db.add("http://example.com/favicon.ico", "image/x-icon", ["docs", "graphics"])
    code, _, err = run(
        capsys, "fetch", "--cache", tmp_path / "cache", "--category", "docs", tmp_path / "urldb"
    )
    assert code == 0, err
    assert sorted(named.take_hits()) == ["example.com:/about/", "example.com:/favicon.ico"]


def test_fetch_the_outgoing_queue_by_default(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    page = canonicalize(site.url("/frame2.html")).file
    OutgoingQueue(cache / "outgoing").add(QueuedRequest(page, page))
    code, _, err = run(capsys, "fetch", "--cache", cache, "--no-queue")
    assert code == 0 and site.take_hits() == []
    code, _, err = run(capsys, "fetch", "--cache", cache)
    assert code == 0, err
    assert site.take_hits() == ["/frame2.html"]
    assert len(OutgoingQueue(cache / "outgoing")) == 0


def test_a_queued_url_is_fetched_even_when_its_copy_is_fresh(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    """What was queued (a reload offline, /refresh/ offline) is what the user asked for: the
    next ``wwwproxy fetch`` fetches it, rather than calling the copy fresh and dropping it."""
    cache = tmp_path / "cache"
    page = canonicalize(site.url("/frame2.html")).file
    code, _, err = run(capsys, "fetch", "--cache", cache, page)
    assert code == 0, err
    assert len(Store(cache).captures(page)) == 1
    OutgoingQueue(cache / "outgoing").add(QueuedRequest(page, page))
    code, _, err = run(capsys, "fetch", "--cache", cache)
    assert code == 0, err
    assert f"fetched 200 14 B {page}" in err
    assert len(Store(cache).captures(page)) == 2
    assert site.take_hits() == ["/frame2.html", "/frame2.html"]
    assert len(OutgoingQueue(cache / "outgoing")) == 0


def test_fetch_takes_the_cache_from_the_config(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "wwwproxy.yaml"
    conf.write_text(f"cache: {tmp_path / 'from-config'}\n")
    code, _, err = run(capsys, "fetch", "-c", conf, site.url("/frame2.html"))
    assert code == 0, err
    assert Store(tmp_path / "from-config").get(canonicalize(site.url("/frame2.html")))


def test_fetch_takes_at_most_max_links_per_page_and_says_what_it_left(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "wwwproxy.yaml"
    conf.write_text(f"cache: {tmp_path / 'cache'}\nmax_links_per_page: 7\n")
    code, _, err = run(capsys, "fetch", "-c", conf, "--depth", "1", site.url("/"))
    assert code == 0, err
    assert f"links   {site.url('/')}: 9 references past max_links_per_page (7) unread\n" in err
    assert "3 URLs: 3 fetched" in err
    assert "9 link references not read on 1 page with more links than max_links_per_page:" in err
    assert sorted(site.take_hits()) == ["/", "/a.html", "/robots.txt"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-list.txt"], "no-such-list.txt: no such file or directory"),
        (["--limit", "ftp://x/", "http://example.com/"], "limit 'ftp://x/'"),
        (["-c", "missing.yaml", "http://example.com/"], "missing.yaml: cannot read"),
        (["--cache", "/dev/null/cache", "http://example.com/"], "cannot use the cache"),
    ],
)
def test_fetch_usage_errors_give_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = run(capsys, "fetch", "--cache", tmp_path / "cache", *args)
    assert code == 2
    assert message in err


def test_bad_option_values_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--depth", "-1"], ["--concurrency", "0"], ["--delay", "soon"]):
        with pytest.raises(SystemExit) as info:
            run(capsys, "fetch", *bad)
        assert info.value.code == 2
    for clash in (["--same-host", "--any-host"], ["--same-domain", "--limit", "http://x/"]):
        with pytest.raises(SystemExit):
            run(capsys, "fetch", *clash)


def test_main_runs_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["monitor", "list", "--cache", str(tmp_path)])
    assert code == 0


# --- wwwproxy urldb ----------------------------------------------------------------------------

SPEC_FILE = """---
---
_path: /
content-type: text/html
---
_path: /about/
content-type: text/html; charset=utf-8
---
_path: /favicon.ico
categories:
  - frontend
  - graphics
content-type: image/x-icon
---
_path: /index.html?foo=bar
content-type: text/html
---
_path: /m51.txt
content-length: {length}
content-sha256: {sha}
content-type: text/ascii
---
_path: /robots.txt
content-type: text/plain
"""


def urldb(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    action, *rest = argv
    return run(
        capsys, "urldb", action, "--db", tmp_path / "db", "--cache", tmp_path / "cache", *rest
    )


def test_urldb_says_it_holds_default_ports_only(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["urldb", "--help"])
    out, _ = capsys.readouterr()
    assert "only URLs on the default port (80 for http, 443 for https)" in " ".join(out.split())
    code, _, err = run(
        capsys,
        "urldb",
        "add",
        "--cache",
        tmp_path / "cache",
        "--db",
        tmp_path / "db",
        site.url("/a.html"),
    )
    assert code == 2 and f"has port {site.port}" in err and "serve the site on port 80" in err
    assert not (tmp_path / "db").exists()


def test_urldb_add_writes_the_spec_examples_byte_for_byte(
    tmp_path: Path, named: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "db" / "example.com.yaml"
    code, out, err = urldb(capsys, tmp_path, "add", "http://example.com/")
    assert code == 0, err
    assert "added http://example.com/ (text/html)" in out
    assert path.read_bytes() == native("---\n---\n_path: /\ncontent-type: text/html\n")
    for argv in (
        ["http://example.com/robots.txt"],
        ["http://example.com/m51.txt", "--static"],
        ["http://example.com/favicon.ico", "--category", "graphics"],
        ["http://example.com/index.html?foo=bar"],
        ["http://example.com/favicon.ico", "--category", "frontend"],
        ["http://EXAMPLE.com/about/#team"],
    ):
        code, _, err = urldb(capsys, tmp_path, "add", *argv)
        assert code == 0, err
    expected = SPEC_FILE.format(length=len(STATIC), sha=hashlib.sha256(STATIC).hexdigest())
    assert path.read_bytes() == native(expected)
    assert sorted(p.name for p in path.parent.iterdir()) == ["example.com.yaml"]


def test_urldb_static_describes_the_content_not_its_encoding(
    tmp_path: Path, named: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.com/m51.gz", "--static")
    assert code == 0, err
    record = URLDatabase(tmp_path / "db").lookup("http://example.com/m51.gz")
    assert record is not None
    assert record.record.content_length == len(STATIC)
    assert record.record.content_sha256 == hashlib.sha256(STATIC).hexdigest()


def test_urldb_add_follows_redirects_and_refuses_failures(
    tmp_path: Path, named: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.com/moved")
    assert code == 0, err
    entry = URLDatabase(tmp_path / "db").lookup("http://example.com/moved")
    assert entry is not None and entry.record.content_type == "text/html; charset=utf-8"
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.com/gone")
    assert code == 1 and "http://example.com/gone: not added: HTTP 404 Not Found" in err
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.com/loop")
    assert code == 1 and "redirect loop" in err
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.com:8080/")
    assert code == 2 and "port 8080" in err
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.com/bare")
    assert code == 0 and "no Content-Type; recorded as application/octet-stream" in err
    assert URLDatabase(tmp_path / "db").lookup("http://example.com/gone") is None


def test_urldb_cnames_and_case_insensitive_paths(
    tmp_path: Path, named: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    db.mkdir()
    (db / "example.com.yaml").write_bytes(native("---\ncnames:\n  - www.example.com\n"))
    (db / "example.net.yaml").write_bytes(native("---\ncase-sensitive-paths: false\n"))
    code, _, err = urldb(capsys, tmp_path, "add", "http://www.example.com/")
    assert code == 0, err
    assert (db / "example.com.yaml").read_bytes() == native(
        "---\ncnames:\n  - www.example.com\n---\n_path: /\ncontent-type: text/html\n"
    )
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.net/HELLO")
    assert code == 0, err
    assert (db / "example.net.yaml").read_bytes() == native(
        "---\ncase-sensitive-paths: false\n---\n_path: /hello\ncontent-type: text/plain\n"
    )
    assert sorted(p.name for p in db.iterdir()) == ["example.com.yaml", "example.net.yaml"]
    assert named.take_hits() == ["www.example.com:/", "example.net:/HELLO"]


def test_urldb_list_remove_and_import(
    tmp_path: Path, named: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = tmp_path / "urls.txt"
    listing.write_text(
        "# to keep\nhttp://example.com/about/\nhttp://example.org/robots.txt\nnot a url\n"
    )
    code, out, err = urldb(capsys, tmp_path, "import", str(listing), "--category", "kept")
    assert code == 1  # the bad line
    assert f"{listing}:4: 'not a url' is not a URL" in err
    assert out.count("added ") == 2
    code, out, _ = urldb(capsys, tmp_path, "list")
    assert (code, out) == (0, "http://example.com/about/\nhttp://example.org/robots.txt\n")
    code, out, _ = urldb(capsys, tmp_path, "list", "--category", "nope")
    assert (code, out) == (0, "")
    code, out, _ = urldb(capsys, tmp_path, "list", "--long")
    assert out.splitlines()[0] == "http://example.com/about/\ttext/html; charset=utf-8\tkept"
    code, out, _ = urldb(capsys, tmp_path, "remove", "http://example.org/robots.txt")
    assert code == 0
    code, _, err = urldb(capsys, tmp_path, "remove", "http://example.org/robots.txt")
    assert code == 1 and "is not in" in err
    code, out, _ = urldb(capsys, tmp_path, "list")
    assert out == "http://example.com/about/\n"


def test_urldb_check_reports_every_difference(
    tmp_path: Path, named: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    db = URLDatabase(tmp_path / "db")
    sha = hashlib.sha256(STATIC).hexdigest()
    db.add("http://example.com/", "text/html")
    db.add("http://example.com/about/", "TEXT/HTML;Charset=UTF-8")  # the same, spelled otherwise
    db.add(
        "http://example.com/m51.txt", "text/ascii", content_length=len(STATIC), content_sha256=sha
    )
    db.add("http://example.com/favicon.ico", "image/png", ["icons"])
    db.add("http://example.com/changing", "text/plain", content_length=10, content_sha256="0" * 64)
    db.add("http://example.com/gone", "text/html")
    db.add("http://example.com/moved", "text/html; charset=utf-8")
    (tmp_path / "db" / "example.org.yaml").write_text(
        "---\nhttps: true\n---\n_path: /secure\ncontent-type: text/html\n"
    )
    code, out, err = urldb(capsys, tmp_path, "check")
    assert code == 1
    lines = out.splitlines()
    text = out
    assert "http://example.com/changing: content-sha256 " in text
    assert (
        "(the database says 0000000000000000000000000000000000000000000000000000000000000000)"
        in text
    )
    assert (
        "http://example.com/favicon.ico: content-type 'image/x-icon' "
        "(the database says 'image/png') [example.com.yaml]"
    ) in lines
    assert "http://example.com/gone: status 404 Not Found [example.com.yaml]" in lines
    assert any(line.startswith("https://example.org/secure: ") for line in lines)  # over TLS
    for fine in ("/", "/about/", "/m51.txt", "/moved"):
        assert not any(line.startswith(f"http://example.com{fine}:") for line in lines), fine
    assert "8 records checked, 4 with problems" in err
    code, out, err = urldb(capsys, tmp_path, "check", "--category", "icons")
    assert code == 1 and "1 record checked, 1 with problems" in err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("---\n---\n_path: /a\ncontent-type: [unclosed\n", "example.com.yaml: document 2"),
        (
            "---\n---\ncontent-type: text/html\n",
            "example.com.yaml: document 2, line 3: record has no _path",
        ),
        (
            "---\n---\n_path: /b\ncontent-type: text/html\n"
            "---\n_path: /a\ncontent-type: text/html\n",
            "example.com.yaml: document 3, line 6: records are not sorted",
        ),
        (
            "---\n---\n_path: /a#frag\ncontent-type: text/html\n",
            "example.com.yaml: document 2, line 3: _path: '/a#frag' has a fragment",
        ),
    ],
    ids=["bad-yaml", "no-path", "unsorted", "fragment"],
)
def test_malformed_domain_files_are_named_and_never_overwritten(
    tmp_path: Path,
    named: Site,
    capsys: pytest.CaptureFixture[str],
    text: str,
    where: str,
) -> None:
    db = tmp_path / "db"
    db.mkdir()
    bad = db / "example.com.yaml"
    bad.write_text(text)
    (db / "example.org.yaml").write_text("---\n---\n_path: /\ncontent-type: text/html\n")
    code, out, err = urldb(capsys, tmp_path, "list")
    assert code == 1
    assert out == "http://example.org/\n"  # the sound file is still listed
    assert str(bad) in err and where in err
    code, _, err = urldb(capsys, tmp_path, "add", "http://example.com/c")
    assert code == 1 and where in err
    assert named.take_hits() == []  # refused before fetching anything
    assert bad.read_text() == text
    assert sorted(p.name for p in db.iterdir()) == ["example.com.yaml", "example.org.yaml"]
    code, _, err = run(capsys, "fetch", "--cache", tmp_path / "cache", db)
    assert code == 1 and where in err  # fetching the database names it too


# --- wwwproxy monitor --------------------------------------------------------------------------


def test_monitor_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = ["--cache", str(tmp_path / "cache")]
    code, out, _ = run(capsys, "monitor", "add", "http://Example.com/news", "--every", "6", *cache)
    assert (code, out) == (0, "monitoring http://example.com/news every 6 hours\n")
    code, out, _ = run(
        capsys,
        "monitor",
        "add",
        "http://example.com/w",
        "--weekdays",
        "mon,thu",
        "--hours",
        "6",
        *cache,
    )
    assert code == 0 and "mon, thu at 06:00" in out
    code, out, _ = run(capsys, "monitor", "list", *cache)
    assert out.splitlines() == [
        "http://example.com/news\tevery 6 hours\tlast never\tdue now",
        "http://example.com/w\tmon, thu at 06:00\tlast never\tdue now",
    ]
    assert (tmp_path / "cache" / "monitor.yaml").is_file()
    code, _, _ = run(capsys, "monitor", "remove", "http://example.com/news", *cache)
    assert code == 0
    code, _, err = run(capsys, "monitor", "remove", "http://example.com/news", *cache)
    assert code == 1 and "not monitored" in err
    code, _, err = run(
        capsys, "monitor", "add", "http://example.com/x", "--every", "6", "--hours", "3", *cache
    )
    assert code == 2 and "not both" in err
    code, _, err = run(capsys, "monitor", "add", "http://example.com/x", *cache)
    assert code == 2 and "needs" in err
    (tmp_path / "cache" / "monitor.yaml").write_text("- url: http://example.com/\n  every: x\n")
    code, _, err = run(capsys, "monitor", "list", *cache)
    assert code == 2 and "monitor.yaml: line 1" in err


def test_monitor_add_render(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--render`` is stored as ``render: true`` and listed; with no browser to render with,
    the entry is added all the same and a warning says how to install one."""
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"cache: {tmp_path / 'cache'}\nrender_browser: /nonexistent/chromium\n")
    code, out, err = run(
        capsys, "monitor", "add", "http://example.com/app", "--every", "6", "--render", "-c", conf
    )
    assert code == 0
    assert out == "monitoring http://example.com/app every 6 hours, rendered in a browser\n"
    assert "warning: its fetches fail until this is done: render_browser" in err
    assert "apt-get install chromium" in err
    assert "  render: true\n" in (tmp_path / "cache" / "monitor.yaml").read_text()
    run(capsys, "monitor", "add", "http://example.com/plain", "--every", "6", "-c", conf)
    code, out, _ = run(capsys, "monitor", "list", "-c", conf)
    assert out.splitlines() == [
        "http://example.com/app\tevery 6 hours, rendered\tlast never\tdue now",
        "http://example.com/plain\tevery 6 hours\tlast never\tdue now",
    ]
