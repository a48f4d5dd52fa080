"""The URL database directory: files for hosts, cnames, case folding, https, bad files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wwwproxy.urldb import (
    DomainMeta,
    Entry,
    Record,
    URLDatabase,
    URLDBError,
    canonical_host,
    normalize_path,
    parse_db_url,
)

SHA = "fd3589aa8a72beb48939de884e3ee5324b510c145003f375c77cd4ecb1a79672"
CNAMES_EXAMPLE = "---\ncnames:\n  - www.example.com\n---\n_path: /\ncontent-type: text/html\n"


def native(text: str) -> bytes:
    return text.replace("\n", os.linesep).encode("utf-8")


def put(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(native(text))
    return path


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- building the spec's files through the API -------------------------------------------------


def test_add_writes_the_spec_minimal_example(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path / "urldb")
    entry = db.add("http://example.com/", "text/html")
    assert entry == Entry("example.com", DomainMeta(), Record("/", "text/html"))
    assert (tmp_path / "urldb" / "example.com.yaml").read_bytes() == native(
        "---\n---\n_path: /\ncontent-type: text/html\n"
    )


def test_adds_in_any_order_give_the_sorted_spec_records(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://example.com/robots.txt", "text/plain")
    db.add("http://example.com/m51.txt", "text/ascii", content_length=1650240, content_sha256=SHA)
    db.add("http://example.com/favicon.ico", "image/x-icon", ["graphics"])
    db.add("http://example.com/index.html?foo=bar", "text/html")
    db.add("http://example.com/favicon.ico", "image/x-icon", ["frontend"])
    db.add("http://example.com/about/", "text/html; charset=utf-8")
    assert (tmp_path / "example.com.yaml").read_bytes() == native(
        "---\n"
        "---\n_path: /about/\ncontent-type: text/html; charset=utf-8\n"
        "---\n_path: /favicon.ico\ncategories:\n  - frontend\n  - graphics\n"
        "content-type: image/x-icon\n"
        "---\n_path: /index.html?foo=bar\ncontent-type: text/html\n"
        f"---\n_path: /m51.txt\ncontent-length: 1650240\ncontent-sha256: {SHA}\n"
        "content-type: text/ascii\n"
        "---\n_path: /robots.txt\ncontent-type: text/plain\n"
    )


def test_re_adding_merges_categories_and_keeps_static_data(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://example.com/a", "text/plain", ["z", "m"], 3, SHA)
    entry = db.add("http://example.com/a", "text/html", ["a", "m"])
    assert entry.record == Record("/a", "text/html", ("a", "m", "z"), 3, SHA)
    entry = db.add("http://example.com/a", "text/html", content_length=5)
    assert entry.record == Record("/a", "text/html", ("a", "m", "z"), 5, None)
    assert db.lookup("http://example.com/a") == entry


def test_categories_must_be_a_list(tmp_path: Path) -> None:
    with pytest.raises(URLDBError, match="not one string"):
        URLDatabase(tmp_path).add("http://example.com/", "text/html", "frontend")
    assert files(tmp_path) == []


# --- which file a host belongs to -------------------------------------------------------------


def test_cname_resolves_to_the_primary_file(tmp_path: Path) -> None:
    put(tmp_path, "example.com.yaml", CNAMES_EXAMPLE)
    db = URLDatabase(tmp_path)
    assert db.domain_for("WWW.Example.COM") == "example.com"
    assert db.file_for("www.example.com") == tmp_path / "example.com.yaml"
    entry = db.add("http://www.example.com/x", "text/plain")
    assert entry.domain == "example.com"
    assert files(tmp_path) == ["example.com.yaml"]
    assert db.lookup("http://www.example.com/")
    assert db.lookup("http://example.com/x")
    assert list(db.urls()) == ["http://example.com/", "http://example.com/x"]
    assert (tmp_path / "example.com.yaml").read_bytes() == native(
        CNAMES_EXAMPLE + "---\n_path: /x\ncontent-type: text/plain\n"
    )
    assert db.remove("http://www.example.com/x") is True
    assert (tmp_path / "example.com.yaml").read_bytes() == native(CNAMES_EXAMPLE)


def test_host_without_a_cname_gets_its_own_file(tmp_path: Path) -> None:
    put(tmp_path, "example.org.yaml", "---\n---\n_path: /\ncontent-type: text/html\n")
    db = URLDatabase(tmp_path)
    assert db.domain_for("www.example.org") == "www.example.org"
    db.add("http://www.example.org/", "text/html")
    assert files(tmp_path) == ["example.org.yaml", "www.example.org.yaml"]


def test_international_host_names_are_idna(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://B\u00fccher.Example./Stra%C3%9Fe", "text/html")
    assert files(tmp_path) == ["xn--bcher-kva.example.yaml"]
    assert list(db.urls()) == ["http://xn--bcher-kva.example/Stra%C3%9Fe"]


def test_cname_conflicts_are_reported_and_resolved(tmp_path: Path) -> None:
    put(tmp_path, "a.example.yaml", "---\ncnames:\n  - shared.example\n  - b.example\n")
    put(tmp_path, "b.example.yaml", "---\n")
    put(tmp_path, "c.example.yaml", "---\ncnames:\n  - shared.example\n  - Upper.example\n")
    db = URLDatabase(tmp_path)
    assert db.domain_for("shared.example") == "a.example"
    assert db.domain_for("b.example") == "b.example"
    assert db.domain_for("upper.example") == "upper.example"
    reasons = [(Path(p.file or "").name, p.document, p.reason) for p in db.problems]
    assert reasons == [
        ("a.example.yaml", 1, "cname 'b.example' is ignored: b.example.yaml exists"),
        ("c.example.yaml", 1, "cname 'Upper.example' is ignored: write it as 'upper.example'"),
        ("c.example.yaml", 1, "cname 'shared.example' is ignored: a.example.yaml lists it too"),
    ]


def test_set_meta_checks_cnames_and_refreshes_the_map(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://example.com/", "text/html")
    db.add("http://other.example/", "text/html")
    db.set_meta("example.com", DomainMeta(cnames=("www.example.com",)))
    assert (tmp_path / "example.com.yaml").read_bytes() == native(CNAMES_EXAMPLE)
    assert db.domain_for("www.example.com") == "example.com"
    for meta, reason in [
        (DomainMeta(cnames=("www.example.com",)), "already a cname of example.com"),
        (DomainMeta(cnames=("example.com",)), "has its own file"),
        (DomainMeta(cnames=("other.example",)), "the domain itself"),
        (DomainMeta(cnames=("Www.Other.example",)), "not a canonical host name"),
    ]:
        with pytest.raises(URLDBError, match=reason):
            db.set_meta("other.example", meta)


def test_strict_resolution_refuses_when_metadata_is_unreadable(tmp_path: Path) -> None:
    put(tmp_path, "broken.example.yaml", "---\ncnames: [\n")
    put(tmp_path, "good.example.yaml", "---\n")
    db = URLDatabase(tmp_path)
    with pytest.raises(URLDBError, match=r"cannot tell whether www\.x\.example is a cname"):
        db.add("http://www.x.example/", "text/html")
    assert db.domain_for("www.x.example") == "www.x.example"
    db.add("http://good.example/", "text/html")
    with pytest.raises(URLDBError) as info:
        db.add("http://broken.example/", "text/html")
    assert (Path(info.value.file or "").name, info.value.document) == ("broken.example.yaml", 1)
    assert files(tmp_path) == ["broken.example.yaml", "good.example.yaml"]


# --- URLs the database cannot hold ------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://user:secret@example.com/", "user name or password"),
        ("ftp://example.com/", "only http and https"),
        ("http://example.com:8080/", "port 8080"),
        ("/index.html", "no host name"),
        ("http://exa mple.com/", "invalid URL"),
    ],
)
def test_urls_that_are_refused(tmp_path: Path, url: str, reason: str) -> None:
    db = URLDatabase(tmp_path)
    with pytest.raises(URLDBError, match=reason) as info:
        db.add(url, "text/html")
    assert "secret" not in str(info.value)
    with pytest.raises(URLDBError, match=reason):
        db.lookup(url)
    assert files(tmp_path) == []


def test_a_port_is_refused_with_the_reason_and_the_way_out() -> None:
    """A local test server is usually on some port: the message says why that cannot be held
    (a domain file names a host, not a port) and what to do instead."""
    with pytest.raises(URLDBError) as info:
        parse_db_url("http://127.0.0.1:8000/page.html")
    message = str(info.value)
    assert "port 8000" in message and "80 for http, 443 for https" in message
    assert "domain file names a host" in message and "port 80" in message


def test_fragment_default_port_and_spelling_are_canonicalized(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    entry = db.add("HTTP://Example.COM:80/a/./b/../%7ec?q=a%20b#frag", "text/html")
    assert entry.record.path == "/a/~c?q=a+b"
    assert db.lookup("http://example.com/a/~c?q=a+b") == entry
    assert parse_db_url("https://example.com:443/x#y") == ("https", "example.com", "/x")


def test_canonical_host() -> None:
    assert canonical_host("WWW.Example.COM.") == "www.example.com"
    assert canonical_host("[0:0::1]") == "[::1]"
    for bad in ("", "a/b", "a:80", "user@a", "a b"):
        with pytest.raises(URLDBError):
            canonical_host(bad)


# --- case-insensitive domains -----------------------------------------------------------------


def test_normalize_path() -> None:
    assert normalize_path("/A/B%2Fc;P=X?Q=Y", True) == "/A/B%2Fc;P=X?Q=Y"
    assert normalize_path("/A/B%2Fc;P=X?Q=Y", False) == "/a/b%2Fc;p=x?Q=Y"


def test_case_insensitive_domain_normalizes_add_and_lookup(tmp_path: Path) -> None:
    put(tmp_path, "iis.example.yaml", "---\ncase-sensitive-paths: false\n")
    db = URLDatabase(tmp_path)
    entry = db.add("http://iis.example/Docs/Index.HTML?Page=Two", "text/html")
    assert entry.record.path == "/docs/index.html?Page=Two"
    assert db.lookup("http://iis.example/DOCS/index.Html?Page=Two") == entry
    assert db.lookup("http://iis.example/docs/index.html?page=two") is None
    assert db.remove("http://iis.example/DOCS/INDEX.HTML?Page=Two") is True
    assert db.lookup("http://iis.example/docs/index.html?Page=Two") is None


def test_case_sensitive_domain_keeps_case(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://example.com/A", "text/html")
    assert db.lookup("http://example.com/a") is None
    assert db.lookup("http://example.com/A") is not None


def test_upper_case_path_in_case_insensitive_file_is_an_error(tmp_path: Path) -> None:
    path = put(
        tmp_path,
        "iis.example.yaml",
        "---\ncase-sensitive-paths: false\n---\n_path: /Index.html\ncontent-type: text/html\n",
    )
    with pytest.raises(URLDBError) as info:
        URLDatabase(tmp_path).lookup("http://iis.example/index.html")
    err = info.value
    assert (err.file, err.document, err.line) == (str(path), 2, 4)
    assert "write it as '/index.html'" in err.reason


def test_turning_case_sensitivity_off_folds_paths(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://example.com/B", "text/html")
    db.add("http://example.com/a", "text/html")
    db.set_meta("example.com", DomainMeta(case_sensitive_paths=False))
    assert [e.record.path for e in db.records()] == ["/a", "/b"]
    db.set_meta("example.com", DomainMeta())
    db.add("http://example.com/A", "text/html")
    with pytest.raises(URLDBError, match="would be the same record"):
        db.set_meta("example.com", DomainMeta(case_sensitive_paths=False))
    assert [e.record.path for e in db.records()] == ["/A", "/a", "/b"]


def test_non_canonical_path_in_a_file_is_an_error(tmp_path: Path) -> None:
    put(tmp_path, "example.com.yaml", "---\n---\n_path: /a/../b%7e\ncontent-type: text/html\n")
    with pytest.raises(URLDBError, match=r"write it as '/b~'") as info:
        URLDatabase(tmp_path).lookup("http://example.com/b~")
    assert info.value.document == 2


# --- https ------------------------------------------------------------------------------------


def test_https_domain_gives_https_urls(tmp_path: Path) -> None:
    put(
        tmp_path,
        "secure.example.yaml",
        "---\nhttps: true\n---\n_path: /\ncontent-type: text/html\n",
    )
    db = URLDatabase(tmp_path)
    db.add("http://plain.example/", "text/html")
    assert list(db.urls()) == ["http://plain.example/", "https://secure.example/"]
    assert db.lookup("http://secure.example/").url == "https://secure.example/"  # type: ignore[union-attr]


def test_adding_an_https_url_marks_the_domain(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://example.com/a", "text/html")
    entry = db.add("https://example.com/b", "text/html")
    assert entry.meta.https is True
    assert entry.url == "https://example.com/b"
    db.add("http://example.com/c", "text/html")
    assert list(db.urls()) == [f"https://example.com/{p}" for p in "abc"]
    text = (tmp_path / "example.com.yaml").read_bytes()
    assert text.startswith(native("---\nhttps: true\n---\n_path: /a\n"))


# --- listing, categories, bad files -----------------------------------------------------------


def test_records_and_urls_by_category(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path)
    db.add("http://b.example/1", "text/html", ["news"])
    db.add("http://a.example/2", "text/html", ["news", "daily"])
    db.add("http://a.example/1", "text/html")
    assert [e.url for e in db.records()] == [
        "http://a.example/1",
        "http://a.example/2",
        "http://b.example/1",
    ]
    assert list(db.urls("news")) == ["http://a.example/2", "http://b.example/1"]
    assert list(db.urls("daily")) == ["http://a.example/2"]
    assert list(db.urls("none")) == []


def test_bad_files_are_reported_and_the_rest_listed(tmp_path: Path) -> None:
    put(tmp_path, "a.example.yaml", "---\n---\n_path: /\ncontent-type: text/html\n")
    bad = put(
        tmp_path,
        "b.example.yaml",
        "---\n---\n_path: /z\ncontent-type: x/y\n---\n_path: /a\ncontent-type: x/y\n",
    )
    put(tmp_path, "Upper.example.yaml", "---\n")
    put(tmp_path, "c.example.yaml", "---\n---\n_path: /\ncontent-type: text/html\n")
    put(tmp_path, ".c.example.yaml.x1.tmp", "left over")
    put(tmp_path, "notes.txt", "not a domain file")
    db = URLDatabase(tmp_path)
    assert list(db.urls()) == ["http://a.example/", "http://c.example/"]
    problems = db.problems
    assert [(Path(p.file or "").name, p.document) for p in problems] == [
        ("Upper.example.yaml", None),
        ("b.example.yaml", 3),
    ]
    assert "upper.example.yaml" in problems[0].reason
    assert problems[1].file == str(bad)
    assert "not sorted" in problems[1].reason
    with pytest.raises(URLDBError, match="not sorted"):
        db.lookup("http://b.example/a")
    with pytest.raises(URLDBError, match="not sorted"):
        db.add("http://b.example/b", "text/html")
    assert bad.read_bytes() == native(
        "---\n---\n_path: /z\ncontent-type: x/y\n---\n_path: /a\ncontent-type: x/y\n"
    )


def test_check_reports_everything_and_clears_when_fixed(tmp_path: Path) -> None:
    put(tmp_path, "a.example.yaml", "---\ncnames:\n  - a.example\n")
    bad = put(tmp_path, "b.example.yaml", "---\n---\n_path: /#x\ncontent-type: x/y\n")
    db = URLDatabase(tmp_path)
    found = db.check()
    assert sorted(str(p).split(": ", 1)[1] for p in found) == [
        "document 1: cname 'a.example' is the file's own domain",
        "document 2, line 3: _path: '/#x' has a fragment ('#'), which a record cannot have",
    ]
    put(tmp_path, "a.example.yaml", "---\n")
    bad.write_bytes(native("---\n---\n_path: /x\ncontent-type: x/y\n"))
    assert db.check() == []


def test_problems_of_a_deleted_file_are_forgotten_by_the_next_listing(tmp_path: Path) -> None:
    bad = put(tmp_path, "b.example.yaml", "---\n---\n_path: x\ncontent-type: x/y\n")
    db = URLDatabase(tmp_path)
    assert list(db.records()) == []
    assert [p.file for p in db.problems] == [str(bad)]
    bad.unlink()
    assert list(db.records()) == []
    assert db.problems == []


def test_lookup_and_remove_of_unknown_urls(tmp_path: Path) -> None:
    db = URLDatabase(tmp_path / "missing")
    assert db.lookup("http://example.com/") is None
    assert db.remove("http://example.com/") is False
    assert list(db.records()) == []
    db.add("http://example.com/", "text/html")
    assert db.remove("http://example.com/other") is False
    assert db.remove("http://example.com/") is True
    assert (tmp_path / "missing" / "example.com.yaml").read_bytes() == native("---\n")


def test_comments_survive_an_add(tmp_path: Path) -> None:
    text = (
        "# Pages of example.com we want offline.\n---\n# primary site\ncnames:\n"
        "  - www.example.com  # old name\n---\n# home\n_path: /\ncontent-type: text/html\n"
    )
    put(tmp_path, "example.com.yaml", text)
    URLDatabase(tmp_path).add("http://www.example.com/b", "text/plain", ["x"])
    assert (tmp_path / "example.com.yaml").read_bytes() == native(
        text + "---\n_path: /b\ncategories:\n  - x\ncontent-type: text/plain\n"
    )


def test_failed_write_leaves_the_database_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = put(tmp_path, "example.com.yaml", CNAMES_EXAMPLE)
    db = URLDatabase(tmp_path)

    def fail(src: str, dst: str) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(URLDBError, match="Read-only file system"):
        db.add("http://example.com/new", "text/html")
    monkeypatch.undo()
    assert path.read_bytes() == native(CNAMES_EXAMPLE)
    assert files(tmp_path) == ["example.com.yaml"]
    assert db.lookup("http://example.com/new") is None
