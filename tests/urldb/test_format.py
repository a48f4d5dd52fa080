"""Domain files (shared/specs/urldb-format.txt): the spec's examples byte for byte, the normal
form, comments, every malformed case, and the atomic write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wwwproxy.urldb.format import DomainFile, DomainMeta, Record, URLDBError, check_path

SHA = "fd3589aa8a72beb48939de884e3ee5324b510c145003f375c77cd4ecb1a79672"

# Every example of the spec, as a whole domain file.  Examples the spec shows as a single
# record document are completed with the (empty) metadata document and ``---`` they need.
SPEC_FILES = {
    "minimal": ("---\n---\n_path: /\ncontent-type: text/html\n"),
    "cnames": ("---\ncnames:\n  - www.example.com\n---\n_path: /\ncontent-type: text/html\n"),
    "query": ("---\n---\n_path: /index.html?foo=bar\ncontent-type: text/html\n"),
    "robots": ("---\n---\n_path: /robots.txt\ncontent-type: text/plain\n"),
    "content-type-params": ("---\n---\n_path: /about/\ncontent-type: text/html; charset=utf-8\n"),
    "categories": (
        "---\n---\n_path: /favicon.ico\ncategories:\n  - frontend\n  - graphics\n"
        "content-type: image/x-icon\n"
    ),
    "static": (
        "---\n---\n_path: /m51.txt\ncontent-length: 1650240\n"
        f"content-sha256: {SHA}\ncontent-type: text/ascii\n"
    ),
}

SPEC_RECORDS = {
    "minimal": (DomainMeta(), [Record("/", "text/html")]),
    "cnames": (DomainMeta(cnames=("www.example.com",)), [Record("/", "text/html")]),
    "query": (DomainMeta(), [Record("/index.html?foo=bar", "text/html")]),
    "robots": (DomainMeta(), [Record("/robots.txt", "text/plain")]),
    "content-type-params": (DomainMeta(), [Record("/about/", "text/html; charset=utf-8")]),
    "categories": (
        DomainMeta(),
        [Record("/favicon.ico", "image/x-icon", categories=("graphics", "frontend"))],
    ),
    "static": (
        DomainMeta(),
        [Record("/m51.txt", "text/ascii", content_length=1650240, content_sha256=SHA)],
    ),
}


def native(text: str) -> bytes:
    return text.replace("\n", os.linesep).encode("utf-8")


def write(tmp_path: Path, text: str, name: str = "example.com.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def dir_listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- the spec's examples ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SPEC_FILES))
def test_spec_example_load_save_is_byte_identical(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, SPEC_FILES[name])
    df = DomainFile.load(path)
    path.write_bytes(b"overwritten")
    df.save()
    assert path.read_bytes() == native(SPEC_FILES[name])


@pytest.mark.parametrize("name", sorted(SPEC_FILES))
def test_spec_example_built_from_the_api(tmp_path: Path, name: str) -> None:
    meta, records = SPEC_RECORDS[name]
    df = DomainFile(tmp_path / "example.com.yaml", meta, records)
    assert df.dumps() == SPEC_FILES[name]
    df.save()
    assert (tmp_path / "example.com.yaml").read_bytes() == native(SPEC_FILES[name])


@pytest.mark.parametrize("name", sorted(SPEC_FILES))
def test_spec_example_reads_as_its_records(tmp_path: Path, name: str) -> None:
    df = DomainFile.load(write(tmp_path, SPEC_FILES[name]))
    meta, records = SPEC_RECORDS[name]
    assert df.meta == meta
    assert list(df) == records


def test_all_spec_records_in_one_file_sorted(tmp_path: Path) -> None:
    records = [r for name in SPEC_RECORDS for r in SPEC_RECORDS[name][1] if r.path != "/"]
    df = DomainFile(tmp_path / "example.com.yaml", DomainMeta(), reversed(records))
    bodies = {
        r.path: SPEC_FILES[n].removeprefix("---\n---\n")
        for n in SPEC_RECORDS
        for r in SPEC_RECORDS[n][1]
        if r.path != "/"
    }
    expected = "---\n" + "".join("---\n" + bodies[p] for p in sorted(bodies))
    assert df.dumps() == expected
    assert [r.path for r in df] == [
        "/about/",
        "/favicon.ico",
        "/index.html?foo=bar",
        "/m51.txt",
        "/robots.txt",
    ]
    assert DomainFile.loads(expected, "example.com.yaml").dumps() == expected


def test_domain_comes_from_the_file_name(tmp_path: Path) -> None:
    assert DomainFile(tmp_path / "example.com.yaml").domain == "example.com"


def test_empty_file_is_an_empty_domain(tmp_path: Path) -> None:
    df = DomainFile.load(write(tmp_path, ""))
    assert (df.meta, len(df)) == (DomainMeta(), 0)
    assert df.dumps() == "---\n"


# --- the normal form --------------------------------------------------------------------------


def test_insertion_keeps_records_sorted_by_code_point(tmp_path: Path) -> None:
    df = DomainFile(tmp_path / "x.yaml")
    for path in ["/b", "/B", "/a?z=1", "/a", "/%C3%A9", "/a;p", "/\u00e9", "/a/"]:
        df.put(Record(path, "text/plain"))
    paths = [r.path for r in df]
    assert paths == sorted(paths, key=lambda p: p.encode("utf-8"))
    assert paths == ["/%C3%A9", "/B", "/a", "/a/", "/a;p", "/a?z=1", "/b", "/\u00e9"]
    reloaded = DomainFile.loads(df.dumps(), "x.yaml")
    assert [r.path for r in reloaded] == paths


def test_put_replaces_and_remove(tmp_path: Path) -> None:
    df = DomainFile(tmp_path / "x.yaml", records=[Record("/a", "text/plain")])
    df.put(Record("/a", "text/html", categories=("b", "a", "b")))
    assert list(df) == [Record("/a", "text/html", categories=("a", "b"))]
    assert df.dumps() == "---\n---\n_path: /a\ncategories:\n  - a\n  - b\ncontent-type: text/html\n"
    assert df.remove("/a") is True
    assert df.remove("/a") is False
    assert df.dumps() == "---\n"


def test_keys_sorted_including_unknown_ones(tmp_path: Path) -> None:
    text = (
        "---\n---\ncontent-type: text/html\nnote: kept\n_path: /\nX-Owner: me\n"
        "categories: [b, a, a]\n"
    )
    df = DomainFile.loads(text, tmp_path / "x.yaml")
    assert df.get("/") == Record(
        "/", "text/html", ("a", "b"), extra={"note": "kept", "X-Owner": "me"}
    )
    assert df.dumps() == (
        "---\n---\nX-Owner: me\n_path: /\ncategories:\n  - a\n  - b\n"
        "content-type: text/html\nnote: kept\n"
    )


def test_metadata_keys_sorted_and_defaults(tmp_path: Path) -> None:
    df = DomainFile(tmp_path / "x.yaml")
    df.set_meta(
        DomainMeta(cnames=("b.example", "a.example"), https=True, case_sensitive_paths=False)
    )
    assert df.dumps() == (
        "---\ncase-sensitive-paths: false\ncnames:\n  - a.example\n  - b.example\nhttps: true\n"
    )
    df.set_meta(DomainMeta())
    assert df.dumps() == "---\n"


def test_explicit_default_in_a_loaded_file_is_kept(tmp_path: Path) -> None:
    text = "---\nhttps: false\n---\n_path: /\ncontent-type: text/html\n"
    df = DomainFile.loads(text, tmp_path / "x.yaml")
    df.set_meta(DomainMeta(cnames=("www.x",)))
    assert df.dumps() == (
        "---\ncnames:\n  - www.x\nhttps: false\n---\n_path: /\ncontent-type: text/html\n"
    )


def test_strings_yaml_11_would_misread_are_quoted(tmp_path: Path) -> None:
    cats = ("yes", "on", "1:20", "null", "3", "plain")
    df = DomainFile(tmp_path / "x.yaml", records=[Record("/", "text/html", categories=cats)])
    text = df.dumps()
    for quoted in ("'yes'", "'on'", "'1:20'", "'null'", "'3'"):
        assert f"  - {quoted}\n" in text
    assert "  - plain\n" in text
    assert DomainFile.loads(text, "x.yaml").get("/") == Record("/", "text/html", categories=cats)


def test_long_values_are_not_folded(tmp_path: Path) -> None:
    path = "/" + "a" * 150 + "?" + "&".join(f"k{i}=v {i}".replace(" ", "+") for i in range(30))
    df = DomainFile(tmp_path / "x.yaml", records=[Record(path, "text/html; charset=utf-8")])
    assert f"\n_path: {path}\n" in df.dumps()


def test_paths_that_need_quoting_round_trip(tmp_path: Path) -> None:
    paths = ["/a:", "/a:b", "/'q'", '/"d"', "/-x", "/{x}", "/[x]", "/x,y", "/&a", "/*b", "/%"]
    df = DomainFile(tmp_path / "x.yaml", records=[Record(p, "text/plain") for p in paths])
    again = DomainFile.loads(df.dumps(), "x.yaml")
    assert [r.path for r in again] == sorted(paths)


def test_crlf_and_bom_are_read(tmp_path: Path) -> None:
    text = "# head\n" + SPEC_FILES["categories"]
    df = DomainFile.load(write(tmp_path, "\ufeff" + text.replace("\n", "\r\n")))
    assert list(df) == SPEC_RECORDS["categories"][1]
    assert df.dumps() == text


# --- comments ---------------------------------------------------------------------------------

COMMENTED = """\
# Example site, maintained by hand.

---
# no metadata yet
---
# the home page
_path: /
categories:
  - b  # bee
  - front # the front page
content-type: text/html  # checked
---
_path: /z
content-type: text/plain
# last words
"""


def test_comments_survive_load_save(tmp_path: Path) -> None:
    df = DomainFile.loads(COMMENTED, tmp_path / "x.yaml")
    assert df.dumps() == COMMENTED


def test_comments_survive_insert_and_update(tmp_path: Path) -> None:
    df = DomainFile.loads(COMMENTED, tmp_path / "x.yaml")
    df.put(Record("/m", "text/css"))
    old = df.get("/")
    assert old is not None
    df.put(Record("/", "text/html", categories=(*old.categories, "a")))
    text = df.dumps()
    for comment in (
        "# Example site, maintained by hand.\n",
        "# no metadata yet\n",
        "# the home page\n",
        "# bee",
        "# the front page",
        "# checked",
        "# last words",
    ):
        assert comment in text
    assert text.index("# the home page") < text.index("_path: /\n") < text.index("_path: /m")
    assert "  - a\n  - b  # bee\n  - front # the front page\n" in text
    assert "---\n_path: /m\ncontent-type: text/css\n---\n_path: /z\n" in text


def test_comments_in_empty_metadata_kept_when_it_gets_keys(tmp_path: Path) -> None:
    df = DomainFile.loads(COMMENTED, tmp_path / "x.yaml")
    df.set_meta(DomainMeta(https=True))
    assert "---\n# no metadata yet\nhttps: true\n---\n" in df.dumps()


def test_flow_lists_are_written_in_block_style(tmp_path: Path) -> None:
    text = (
        "---\ncnames: [b.example, a.example]\n"
        "---\n_path: /\ncategories: [w, v]\ncontent-type: a/b\n"
    )
    df = DomainFile.loads(text, tmp_path / "x.yaml")
    assert df.dumps() == (
        "---\ncnames:\n  - a.example\n  - b.example\n---\n_path: /\ncategories:\n  - v\n  - w\n"
        "content-type: a/b\n"
    )


# --- malformed files --------------------------------------------------------------------------

RECORD = "_path: /\ncontent-type: text/html\n"

MALFORMED = [
    # (file text, document, line or None, part of the reason)
    ("---\n---\n_path: /\ncontent-type: [text/html\n", 2, 5, "bad YAML"),
    ("---\n---\n" + RECORD + "---\n_path: /a\n  bad: indent\n", 3, 7, "bad YAML"),
    ("---\n---\n_path: /\n_path: /a\ncontent-type: x/y\n", 2, 4, "duplicate key"),
    ("---\n---\n_path: /\ncontent-type: x\nwhen: 2001-13-45\n", 2, None, "bad YAML"),
    ("---\n---\n" + RECORD + "---\ncontent-type: text/html\n", 3, 6, "no _path"),
    ("---\n---\n_path: /\n", 2, 3, "no content-type"),
    ("---\n---\n_path: /b\ncontent-type: x/y\n---\n_path: /a\ncontent-type: x/y\n", 3, 6, "sorted"),
    ("---\n---\n" + RECORD + "---\n" + RECORD, 3, 6, "duplicate record"),
    ("---\n---\n_path: /a#top\ncontent-type: x/y\n", 2, 3, "fragment"),
    ("---\n---\n_path: a/b\ncontent-type: x/y\n", 2, 3, "absolute path"),
    ("---\n---\n_path: /a b\ncontent-type: x/y\n", 2, 3, "a space"),
    ("---\n---\n_path: 5\ncontent-type: x/y\n", 2, 3, "must be a string"),
    ("---\n---\n_path: /\ncontent-type: ''\n", 2, 4, "content-type: is empty"),
    ("---\n---\n- _path: /\n", 2, 3, "must be a mapping, not a list"),
    ("---\n---\njust text\n", 2, 2, "must be a mapping, not the string"),
    ("---\n---\n---\n" + RECORD, 2, 2, "empty record document"),
    ("---\n" + RECORD, 1, 2, "metadata document has a _path"),
    ("---\n- a\n---\n" + RECORD, 1, 2, "metadata document must be a mapping"),
    ("---\nhttps: 'yes'\n---\n" + RECORD, 1, 2, "https: must be true or false"),
    ("---\ncnames: www.example.com\n", 1, 2, "cnames: must be a list"),
    ("---\ncnames:\n  - a.example\n  - 7\n", 1, 4, "cnames: item 2 must be a string"),
    ("---\ncase-sensitive-paths: 0\n", 1, 2, "case-sensitive-paths"),
    ("---\n---\n" + RECORD + "categories: frontend\n", 2, 5, "categories: must be a list"),
    ("---\n---\n" + RECORD + "categories:\n  - a\n  - ''\n", 2, 7, "item 2 is empty"),
    ("---\n---\n" + RECORD + "content-length: -1\n", 2, 5, "negative"),
    ("---\n---\n" + RECORD + "content-length: true\n", 2, 5, "whole number"),
    ("---\n---\n" + RECORD + "content-length: '12'\n", 2, 5, "whole number"),
    ("---\n---\n" + RECORD + f"content-sha256: {SHA.upper()}\n", 2, 5, "lower-case hex"),
    ("---\n---\n" + RECORD + "content-sha256: abc\n", 2, 5, "64 lower-case"),
    ("---\n---\n" + RECORD + "? [a]\n: 1\n", 2, 3, "is not a string"),
]


@pytest.mark.parametrize(("text", "document", "line", "reason"), MALFORMED)
def test_malformed_file_names_file_and_document(
    tmp_path: Path, text: str, document: int, line: int | None, reason: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(URLDBError) as info:
        DomainFile.load(path)
    err = info.value
    assert (err.file, err.document) == (str(path), document), str(err)
    if line is not None:
        assert err.line == line, str(err)
    assert reason in err.reason, str(err)
    assert str(err).startswith(f"{path}: document {document}")


def test_unsorted_error_names_both_paths(tmp_path: Path) -> None:
    text = "---\n---\n_path: /b\ncontent-type: x/y\n---\n_path: /a\ncontent-type: x/y\n"
    with pytest.raises(URLDBError, match=r"'/a' comes after '/b' \(document 2\)"):
        DomainFile.load(write(tmp_path, text))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"---\n---\n_path: /\ncontent-type: \xff\n")
    with pytest.raises(URLDBError) as info:
        DomainFile.load(path)
    assert (info.value.file, info.value.line) == (str(path), 4)
    assert "UTF-8" in str(info.value)


def test_unreadable_file_is_a_urldb_error(tmp_path: Path) -> None:
    with pytest.raises(URLDBError, match="cannot read"):
        DomainFile.load(tmp_path / "missing.yaml")


def test_read_meta_reads_only_the_first_document(tmp_path: Path) -> None:
    path = write(tmp_path, "---\nhttps: true\n---\n_path: nope\n")
    assert DomainFile.read_meta(path) == DomainMeta(https=True)
    with pytest.raises(URLDBError):
        DomainFile.load(path)
    with pytest.raises(URLDBError) as info:
        DomainFile.read_meta(write(tmp_path, "---\nhttps: [\n"))
    assert info.value.document == 1


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("-_:/#?&*!|>'\"[]{}, \n\tab1.~%@`")), max_size=60))
def test_any_text_loads_or_gives_a_urldb_error(text: str) -> None:
    try:
        DomainFile.loads(text, "fuzz.yaml")
    except URLDBError as exc:
        assert exc.file == "fuzz.yaml"
        assert exc.document is not None and exc.document >= 1


# --- values from the API ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"path": "x"}, "absolute path"),
        ({"path": "/a#b"}, "fragment"),
        ({"content_type": "text/html\n"}, "control character"),
        ({"categories": "abc"}, "list of strings"),
        ({"categories": ("a", 1)}, "item 2 must be a string"),
        ({"content_length": -5}, "negative"),
        ({"content_length": 1.5}, "whole number"),
        ({"content_sha256": "A" * 64}, "lower-case"),
        ({"extra": {"content-type": "x"}}, "known record key"),
        ({"extra": {3: "x"}}, "not a string"),
    ],
)
def test_record_validation(kwargs: dict[str, object], reason: str) -> None:
    args: dict[str, object] = {"path": "/", "content_type": "text/html", **kwargs}
    with pytest.raises(URLDBError, match=reason):
        Record(**args)  # type: ignore[arg-type]


def test_check_path() -> None:
    assert check_path("/a;p=1?q=2&r") == "/a;p=1?q=2&r"
    for bad in ("", "a", "/a#", "/\x00", 3):
        with pytest.raises(URLDBError, match="_path"):
            check_path(bad)


def test_meta_validation() -> None:
    assert DomainMeta(cnames=("b", "a", "b")).cnames == ("a", "b")
    with pytest.raises(URLDBError, match="https"):
        DomainMeta(https="yes")  # type: ignore[arg-type]


paths = st.text(alphabet=st.sampled_from(list("abcXYZ/;=?&%.:-_~'\"!é")), max_size=12).map(
    lambda s: "/" + s
)
words = st.text(alphabet=st.sampled_from(list("abcyesno:1 -")), min_size=1, max_size=6).filter(
    lambda s: s.strip() != ""
)
records = st.builds(
    Record,
    path=paths,
    content_type=st.sampled_from(["text/html", "text/html; charset=utf-8", "image/png"]),
    categories=st.lists(words, max_size=3).map(tuple),
    content_length=st.none() | st.integers(min_value=0, max_value=10**12),
    content_sha256=st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(records, max_size=6, unique_by=lambda r: r.path))
def test_any_records_round_trip(recs: list[Record]) -> None:
    df = DomainFile("x.yaml", DomainMeta(), recs)
    text = df.dumps()
    again = DomainFile.loads(text, "x.yaml")
    assert list(again) == sorted(recs, key=lambda r: r.path)
    assert again.dumps() == text


# --- atomic write -----------------------------------------------------------------------------


def test_failure_after_writing_the_temp_file_leaves_the_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, SPEC_FILES["minimal"])
    df = DomainFile.load(path)
    df.put(Record("/new", "text/html"))

    def fail(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(URLDBError) as info:
        df.save()
    assert info.value.file == str(path)
    assert "No space left" in str(info.value)
    assert path.read_bytes() == SPEC_FILES["minimal"].encode()
    assert dir_listing(tmp_path) == ["example.com.yaml"]


def test_failed_rename_leaves_the_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, SPEC_FILES["minimal"])
    df = DomainFile.load(path)
    df.remove("/")

    def fail(src: str, dst: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(URLDBError, match="Input/output error"):
        df.save()
    assert path.read_bytes() == SPEC_FILES["minimal"].encode()
    assert dir_listing(tmp_path) == ["example.com.yaml"]


def test_serializer_failing_midway_touches_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, SPEC_FILES["minimal"])
    df = DomainFile.load(path)
    df.put(Record("/a", "text/html", extra={"z-unwritable": object()}))
    with pytest.raises(URLDBError) as info:
        df.save()
    assert info.value.file == str(path)
    assert "cannot represent" in str(info.value)
    assert path.read_bytes() == SPEC_FILES["minimal"].encode()
    assert dir_listing(tmp_path) == ["example.com.yaml"]


def test_unwritable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, SPEC_FILES["minimal"])
    df = DomainFile.load(path)
    df.put(Record("/a", "text/html"))

    # root ignores directory modes, so the refusal a read-only directory gives is simulated
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr("wwwproxy.fsutil.tempfile.mkstemp", refuse)
    with pytest.raises(URLDBError, match="cannot write"):
        df.save()
    assert path.read_bytes() == SPEC_FILES["minimal"].encode()
    assert dir_listing(tmp_path) == ["example.com.yaml"]


def test_save_keeps_permissions_and_new_files_are_0600(tmp_path: Path) -> None:
    path = write(tmp_path, SPEC_FILES["minimal"])
    path.chmod(0o640)
    df = DomainFile.load(path)
    df.put(Record("/a", "text/html"))
    df.save()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    new = DomainFile(tmp_path / "new.example.yaml", records=[Record("/", "text/html")])
    new.save()
    assert stat.S_IMODE(new.path.stat().st_mode) == 0o600  # a person's browsing
    assert dir_listing(tmp_path) == ["example.com.yaml", "new.example.yaml"]
