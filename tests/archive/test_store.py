"""The cache facade over real files: WARC + CDXJ written, read back with warcio, crash-cut."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.archive.cdxj import CDXJRecord, make_ref
from wwwproxy.archive.store import Store, StoreError
from wwwproxy.url import canonicalize, surt, url_hash
from wwwproxy.url.requestkey import request_key

T0 = datetime(2026, 11, 22, 5, 4, 30, 123456, tzinfo=UTC)


def put(
    store: Store,
    url_text: str,
    body: bytes,
    *,
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    method: str = "GET",
    request_body: bytes = b"",
    content_type: str | None = None,
    date: datetime = T0,
):
    url = canonicalize(url_text)
    key = request_key(url.file, method, content_type, request_body)
    rec = store.recorder(
        url,
        key,
        method=method,
        request_headers=[("Host", url.hostport), ("Content-Type", content_type or "text/plain")],
        request_body=request_body,
        date=date,
    )
    for i in range(0, len(body), 7):  # streamed in small pieces
        rec.write(body[i : i + 7])
    hdrs = headers if headers is not None else [("Content-Type", "text/html; charset=utf-8")]
    lines = rec.finish(status, "OK", [*hdrs, ("Content-Length", str(len(body)))])
    return url, key, lines


def warcio_records(path: Path) -> list:
    out = []
    with open(path, "rb") as f:
        for record in ArchiveIterator(f):
            out.append(
                (
                    record.rec_type,
                    record.rec_headers.get_header("WARC-Target-URI"),
                    record.http_headers.get_statuscode() if record.http_headers else None,
                    record.content_stream().read(),
                )
            )
    return out


def warcio_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_put_then_get_round_trips_exact_bytes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    body = b"<html><title>x</title>" + bytes(range(256)) * 40 + b"</html>"
    url, key, lines = put(store, "http://Example.com/a?b=1", body)
    entry = store.get(url)
    assert entry is not None
    assert entry.status == 200 and entry.reason == "OK"
    assert ("Content-Type", "text/html; charset=utf-8") in entry.headers
    assert entry.date == T0
    with entry.open_body() as f:
        assert f.read() == body
    path = store.path_for(url)
    assert path == tmp_path / "http" / "example.com" / (path.name)
    assert path.name.endswith(".warc.gz") and len(path.name) == 22 + len(".warc.gz")
    # warcio reads it back to the exact bytes, and its checker passes every digest
    records = warcio_records(path)
    assert [r[0] for r in records] == ["request", "response"]
    assert records[1][1] == "http://example.com/a?b=1"
    assert records[1][3] == body
    check = warcio_check(path)
    assert check.returncode == 0 and "digest pass" in check.stdout, check.stdout + check.stderr
    # and the index line points at the response record
    assert len(lines) == 1
    line = lines[0]
    assert line.key == "(com,example,)/a?b=1"
    assert line.timestamp == "2026-11-22T05:04:30.123456Z"
    assert line.fields["hsc"] == 200 and line.fields["mct"] == "text/html"
    stored = store.get_at(line)
    assert stored.rec_type == "response" and stored.offset == line.warcfile[1]


def test_warcfile_name_is_unique_and_resolvable(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, lines = put(store, "http://[::1]:8080/x", b"hi")
    name, offset = lines[0].warcfile
    path = store.path_for(url, key)
    # the file's own name, no folders (CDXJ Appendix C), and the hash of the whole key
    assert name == path.name == url_hash(key) + ".warc.gz"
    assert store.resolve_warcfile(name, key) == path == store.path_of(lines[0])
    other = "http://[::1]:8081/x"
    with pytest.raises(StoreError):
        store.resolve_warcfile(name, other)  # not that key's file
    for bad_key in ("http://../x", "http://./x", "nonsense", "http:///x", "../../etc://h/"):
        with pytest.raises(StoreError):
            store.resolve_warcfile(url_hash(bad_key) + ".warc.gz", bad_key)
    with pytest.raises(StoreError):
        store.resolve_warcfile("../" + name, key)


def test_same_payload_is_recorded_as_revisit(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, _ = put(store, "http://example.com/", b"same body", date=T0)
    _, _, lines = put(store, "http://example.com/", b"same body", date=T0 + timedelta(hours=1))
    assert lines[0].record_type == "revisit"
    assert lines[0].fields["rod"] == "2026-11-22T05:04:30.123456Z"
    assert lines[0].fields["rou"] == "http://example.com/"
    entry = store.get(url)
    assert entry is not None and entry.date == T0 + timedelta(hours=1)
    with entry.open_body() as f:
        assert f.read() == b"same body"
    _, _, lines = put(store, "http://example.com/", b"new body", date=T0 + timedelta(hours=2))
    assert lines[0].record_type == "response"
    types = [r[0] for r in warcio_records(store.path_for(url))]
    assert types == ["request", "response", "request", "revisit", "request", "response"]
    assert [c.record_type for c in store.captures(key)] == ["response", "revisit", "response"]
    assert warcio_check(store.path_for(url)).returncode == 0


def test_get_at_a_time_travels(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, _, _ = put(store, "http://example.com/t", b"v1", date=T0)
    put(store, "http://example.com/t", b"v2", date=T0 + timedelta(days=1))
    entry = store.get(url, at=T0 + timedelta(hours=5))
    assert entry is not None
    with entry.open_body() as f:
        assert f.read() == b"v1"
    assert store.get(url, at=T0 - timedelta(seconds=1)) is None


def test_304_is_recorded_but_not_served(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, _, _ = put(store, "http://example.com/c", b"content", date=T0)
    put(store, "http://example.com/c", b"", status=304, date=T0 + timedelta(minutes=1))
    entry = store.get(url)
    assert entry is not None and entry.status == 200
    with entry.open_body() as f:
        assert f.read() == b"content"


def test_non_get_served_only_for_equal_method_and_body(tmp_path: Path) -> None:
    store = Store(tmp_path)
    form = "application/x-www-form-urlencoded"
    url, key, lines = put(
        store,
        "http://example.com/s",
        b"result",
        method="POST",
        request_body=b"q=1",
        content_type=form,
    )
    assert key == "http://example.com/s?__wb_method=POST&q=1"
    assert lines[0].key == "(com,example,)/s?__wb_method=post&q=1"
    assert store.lookup(url, key, "POST", b"q=1") is not None
    assert store.lookup(url, key, "PUT", b"q=1") is None
    # a body that encodes to the same key (cut at 4096 characters) is another request
    long_a = b"q=" + b"a" * 5000
    long_b = b"q=" + b"a" * 4999 + b"b"
    url2, key2, _ = put(
        store, "http://example.com/s", b"r", method="POST", request_body=long_a, content_type=form
    )
    assert request_key(url2.file, "POST", form, long_b) == key2
    assert store.lookup(url2, key2, "POST", long_a) is not None
    assert store.lookup(url2, key2, "POST", long_b) is None
    # GET of the same URL is another key, another file
    assert store.get(url) is None


def test_listing_by_prefix_and_host(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for u in (
        "http://example.com/a",
        "http://example.com/b",
        "http://www.example.com/",
        "http://example.org/",
    ):
        put(store, u, u.encode())
    assert [r.uri for r in store.list_prefix("(com,example,)/")] == [
        "http://example.com/a",
        "http://example.com/b",
    ]
    assert len(list(store.list_prefix("(com,example,"))) == 3
    assert len(list(store.list_host("http", "example.com"))) == 2
    assert list(store.list_host("http", "..")) == []


def test_delete_removes_file_and_index_lines(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, _ = put(store, "http://example.com/gone", b"x")
    other, _, _ = put(store, "http://example.com/kept", b"y")
    assert store.delete(url) is True
    assert not store.path_for(url).exists()
    assert store.get(url) is None
    assert store.captures(key) == []
    assert store.get(other) is not None
    assert [r.uri for r in store.list_prefix("(com,example,)/")] == ["http://example.com/kept"]
    assert store.delete(url) is False


def test_rebuild_restores_index_and_check_is_clean(tmp_path: Path) -> None:
    store = Store(tmp_path)
    put(store, "http://example.com/1", b"one")
    put(store, "http://example.com/1", b"one", date=T0 + timedelta(seconds=1))
    put(
        store,
        "http://example.com/2",
        b"two",
        method="PUT",
        request_body=b"{}",
        content_type="application/json",
    )
    before = sorted(r.to_line() for r in store.list_prefix(""))
    assert store.check_index() == []
    for path in store.index.files():
        path.unlink(missing_ok=True)
    assert list(store.list_prefix("")) == []
    count, problems = store.rebuild_index()
    assert problems == []
    assert count == 3
    assert sorted(r.to_line() for r in store.list_prefix("")) == before
    assert store.check_index() == []


def test_check_reports_bad_lines_and_refs_with_places(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, lines = put(store, "http://example.com/x", b"x")
    journal = store.index.journal_path
    good = lines[0].to_line()
    bad_ref = good.replace(lines[0].ref, lines[0].ref.split("#")[0] + "#99999")
    other = "http://example.net/x"
    missing = CDXJRecord.build(
        surt(other),
        lines[0].timestamp,
        "response",
        uri=other,
        ref=make_ref(url_hash(other) + ".warc.gz", 0),
    ).to_line()
    n = journal.read_bytes().count(b"\n")  # the header and the good line
    with open(journal, "a", encoding="utf-8") as f:
        f.write("not a cdxj line\n")
        f.write(bad_ref)
        f.write(missing)
    problems = store.check_index()
    text = "\n".join(problems)
    assert f"{journal}:{n + 1}:" in text  # the malformed line, with file:line
    assert f"{journal}:{n + 2}: ref" in text and "99999" in text
    assert f"{journal}:{n + 3}: ref" in text and "No such file" in text
    # the store keeps serving
    assert store.get(url) is not None


def _with(record: CDXJRecord, *, record_type: str | None = None, ref: str | None = None) -> str:
    """The index line of ``record`` with its type or ref changed."""
    fields = dict(record.fields)
    if ref is not None:
        fields["ref"] = ref
    return CDXJRecord(
        key=record.key,
        timestamp=record.timestamp,
        record_type=record_type or record.record_type,
        fields=fields,
    ).to_line()


@pytest.mark.parametrize(
    ("line_of", "message"),
    [
        # (index line of the stored response, offset of its request record) -> a wrong line
        (
            lambda good, request_at: _with(good, record_type="revisit"),
            "is a response record, the line says revisit",
        ),
        (
            lambda good, request_at: _with(good, ref=good.ref.split("#")[0] + f"#{request_at}"),
            "is a request record, the line says response",
        ),
        (
            lambda good, request_at: _with(
                good, ref=make_ref(url_hash("http://example.com/y") + ".warc.gz", 0)
            ),
            "is not the cache file of",
        ),
    ],
    ids=["type-differs", "ref-to-request-record", "ref-to-another-key-file"],
)
def test_check_says_what_is_wrong_with_a_ref(tmp_path: Path, line_of, message: str) -> None:
    """check_index reads the cache files once; a line whose ref that scan did not match is
    still reported with what the record there is."""
    store = Store(tmp_path)
    url, key, lines = put(store, "http://example.com/x", b"x")
    put(store, "http://example.com/y", b"y")
    assert store.check_index() == []
    with open(store.path_for(url, key), "rb") as f:
        it = ArchiveIterator(f)
        offsets = {r.rec_type: it.get_record_offset() for r in it}
    line = line_of(lines[0], offsets["request"])
    assert line != lines[0].to_line()
    with open(store.index.journal_path, "a", encoding="utf-8") as f:
        f.write(line)
    problems = store.check_index()
    assert any(message in p for p in problems), problems


def cut(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def test_warc_cut_anywhere_loses_only_the_record_being_written(tmp_path: Path) -> None:
    """kill -9 mid-write, simulated: the file cut at every position of its last exchange."""
    store = Store(tmp_path / "c")
    url, _, _ = put(store, "http://example.com/k", b"first version", date=T0)
    path = store.path_for(url)
    size_one = path.stat().st_size
    put(store, "http://example.com/k", b"second version" * 50, date=T0 + timedelta(seconds=1))
    full = path.read_bytes()
    positions = range(size_one, len(full), max(1, (len(full) - size_one) // 60))
    for pos in positions:
        path.write_bytes(full[:pos])
        entry = store.get(url)
        assert entry is not None, pos
        with entry.open_body() as f:
            assert f.read() == b"first version", pos  # never the torn second record
        repaired: list[str] = []
        count, _ = store.rebuild_index(repaired)
        assert count == 1, pos
        assert store.check_index() == [], pos  # the torn tail is gone from the file
        assert len(repaired) <= 1, pos  # none when the cut fell between two records
        assert warcio_check(path).returncode == 0, pos
    # and the next write after a cut lands readable
    path.write_bytes(full[: size_one + 10])
    put(store, "http://example.com/k", b"third", date=T0 + timedelta(seconds=2))
    entry = store.get(url)
    assert entry is not None
    with entry.open_body() as f:
        assert f.read() == b"third"
    assert warcio_check(path).returncode == 0
    assert [r[3] for r in warcio_records(path) if r[0] == "response"] == [
        b"first version",
        b"third",
    ]


def test_journal_cut_anywhere_keeps_earlier_lines(tmp_path: Path) -> None:
    store = Store(tmp_path)
    put(store, "http://example.com/1", b"one")
    first = store.index.journal_path.read_bytes()
    put(store, "http://example.com/2", b"two")
    full = store.index.journal_path.read_bytes()
    for pos in range(len(first), len(full)):
        store.index.journal_path.write_bytes(full[:pos])
        uris = [r.uri for r in Store(tmp_path).list_prefix("")]
        assert uris[:1] == ["http://example.com/1"], pos
        assert "http://example.com/2" not in uris or pos == len(full), pos
    count, _ = store.rebuild_index()
    assert count == 2


def test_malformed_warc_files_do_not_crash_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, _, _ = put(store, "http://example.com/m", b"m")
    path = store.path_for(url)
    for garbage in (b"", b"not gzip at all", os.urandom(300), b"\x1f\x8b\x08\x00garbage"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(garbage)
        assert store.get(url) is None
        repaired: list[str] = []
        count, problems = store.rebuild_index(repaired)
        assert count == 0 and problems == []
        if garbage:
            # rebuild cuts it off: torn gzip is dropped, other bytes kept in a side file
            assert repaired == [f"{path}: held only a torn record: removed"]
            assert not path.exists()
            sides = list(path.parent.glob(path.name + ".corrupt-*"))
            if garbage.startswith(b"\x1f\x8b"):
                assert sides == []
            else:
                assert [p.read_bytes() for p in sides] == [garbage]
                for side in sides:
                    side.unlink()
        assert store.check_index() == []


def test_large_body_is_spooled_not_held(tmp_path: Path) -> None:
    import tracemalloc

    store = Store(tmp_path)
    url = canonicalize("http://example.com/big")
    rec = store.recorder(url, url.file, method="GET", request_headers=[], request_body=b"")
    chunk = os.urandom(64 * 1024)
    tracemalloc.start()
    for _ in range(160):  # 10 MiB
        rec.write(chunk)
    rec.finish(200, "OK", [("Content-Type", "application/octet-stream")])
    entry = store.get(url)
    assert entry is not None
    total = 0
    with entry.open_body() as f:
        while data := f.read(65536):
            total += len(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total == 160 * len(chunk)
    assert peak < 4 * 1024 * 1024, peak


def test_index_key_is_surt_of_archive_key(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, lines = put(store, "http://bücher.example/ü", b"x")
    assert lines[0].key == surt(key) == "(example,bücher,)/%c3%bc"
    assert lines[0].uri == "http://xn--bcher-kva.example/%C3%BC"


def test_request_record_holds_method_and_body(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, _ = put(
        store,
        "http://example.com/p",
        b"ok",
        method="POST",
        request_body=b"a=1&b=2",
        content_type="application/x-www-form-urlencoded",
    )
    with open(store.path_for(url, key), "rb") as f:
        records = list(ArchiveIterator(f))
    # (ArchiveIterator streams; the records were consumed in order, check the first by reading)
    with open(store.path_for(url, key), "rb") as f:
        it = ArchiveIterator(f)
        req = next(iter(it))
        assert req.rec_type == "request"
        assert req.http_headers.protocol == "POST"
        assert req.content_stream().read() == b"a=1&b=2"
    assert len(records) == 2


class Listener:
    """A store listener that remembers what it was told."""

    def __init__(self) -> None:
        self.puts: list[tuple[str, str]] = []
        self.deletes: list[tuple[list[str], list[str]]] = []

    def on_put(self, url, key, lines) -> None:
        self.puts.append((key, lines[0].record_type))

    def on_delete(self, keys, files) -> None:
        self.deletes.append((sorted(keys), sorted(files)))


class Broken:
    def on_put(self, url, key, lines) -> None:
        raise RuntimeError("search index down")

    def on_delete(self, keys, files) -> None:
        raise RuntimeError("search index down")


def test_listeners_see_every_put_and_cannot_break_it(tmp_path: Path) -> None:
    store = Store(tmp_path)
    seen = Listener()
    store.listeners += [seen, Broken()]
    url, key, _ = put(store, "http://example.com/l", b"x")
    put(store, "http://example.com/l", b"x", date=T0 + timedelta(seconds=1))
    assert seen.puts == [(key, "response"), (key, "revisit")]
    assert store.get(url) is not None
    assert store.delete(url)  # a failing listener does not undo or stop the delete
    assert seen.deletes == [([key], [store.warcfile_name(store.path_for(url))])]
    assert store.get(url) is None


def test_delete_of_one_key_tells_the_listeners(tmp_path: Path) -> None:
    store = Store(tmp_path)
    seen = Listener()
    store.listeners.append(seen)
    url, key, _ = put(store, "http://example.com/a", b"a")
    other, other_key, _ = put(store, "http://example.com/b", b"b")
    name = store.warcfile_name(store.path_for(url))
    assert store.delete(url) is True
    assert seen.deletes == [([key], [name])]
    assert not store.path_for(url).exists() and store.captures(key) == []
    assert store.get(other) is not None and len(store.captures(other_key)) == 1
    # deleting what is not stored says so, and still tells (a derived index may name it)
    assert store.delete(url) is False
    assert seen.deletes[-1] == ([key], [name])
    assert store.check_index() == []


def test_delete_host_removes_its_files_folder_and_index_lines(tmp_path: Path) -> None:
    store = Store(tmp_path)
    seen = Listener()
    store.listeners.append(seen)
    keys = [put(store, f"http://gone.example/{i}", b"x")[1] for i in range(3)]
    _, kept, _ = put(store, "http://kept.example/", b"y")
    _, other_proto, _ = put(store, "https://gone.example/s", b"z")
    files = sorted(p.name for p in store.list_host("http", "gone.example"))
    deleted = store.delete_host("http", "gone.example")
    assert deleted.pages == 3 and sorted(deleted.files) == files
    assert sorted(deleted.keys) == sorted(keys)
    assert seen.deletes == [(sorted(keys), files)]
    assert not (store.root / "http" / "gone.example").exists()
    assert sorted(r.uri for r in store.list_prefix("")) == sorted([kept, other_proto])
    assert store.check_index() == []
    # nothing there: nothing removed, nobody told
    assert store.delete_host("http", "gone.example").pages == 0
    assert store.delete_host("..", "etc").pages == 0
    assert len(seen.deletes) == 1


def test_purge_removes_old_pages_of_a_host_or_of_all_and_tells(tmp_path: Path) -> None:
    store = Store(tmp_path)
    seen = Listener()
    store.listeners.append(seen)
    _, p_old, _ = put(store, "http://p.example/old", b"1")
    _, p_new, _ = put(store, "http://p.example/new", b"2")
    _, q_old, _ = put(store, "http://q.example/old", b"3")
    now = 2_000_000_000.0
    for key, age_days in ((p_old, 40), (p_new, 1), (q_old, 40)):
        path = store.path_for(canonicalize(key))
        os.utime(path, (now - age_days * 86400, now - age_days * 86400))
    deleted = store.purge(30, canonicalize("http://p.example/"), now=now)
    assert deleted.keys == (p_old,) and deleted.pages == 1
    assert seen.deletes == [([p_old], [url_hash(p_old) + ".warc.gz"])]
    assert store.captures(p_old) == [] and len(store.captures(q_old)) == 1  # another host
    deleted = store.purge(30, now=now)
    assert deleted.keys == (q_old,)
    assert not (store.root / "http" / "q.example").exists()  # emptied: its folder goes too
    assert seen.deletes[-1] == ([q_old], [url_hash(q_old) + ".warc.gz"])
    assert store.purge(30, now=now).pages == 0 and len(seen.deletes) == 2  # nothing old left
    assert [r.uri for r in store.list_prefix("")] == [p_new]
    deleted = store.purge(None, canonicalize("http://p.example/"))  # any age
    assert deleted.keys == (p_new,) and list(store.list_prefix("")) == []
    assert store.check_index() == []


def test_a_file_the_index_does_not_know_is_deleted_by_name(tmp_path: Path) -> None:
    store = Store(tmp_path)
    seen = Listener()
    store.listeners.append(seen)
    url, key, _ = put(store, "http://x.example/a", b"a")
    store.index.rebuild([])  # the index lost its lines (the file is still there)
    deleted = store.delete_host("http", "x.example")
    name = store.warcfile_name(store.path_for(url))
    assert deleted.files == (name,) and deleted.keys == ()
    assert seen.deletes == [([], [name])]


def test_rebuild_and_check_survive_entries_that_are_not_readable_files(tmp_path: Path) -> None:
    store = Store(tmp_path)
    url, key, lines = put(store, "http://example.com/a", b"a")
    # a directory where a cache file or the journal would be: read as a file, it raised
    (store.path_for(url).parent / ("x" * 22 + ".warc.gz")).mkdir()
    count, problems = store.rebuild_index()
    assert count == 1 and problems == []
    assert store.check_index() == []
    sealed = store.index.directory / "journal-00000000000000000001-1.sealed"
    sealed.mkdir()
    problems = store.check_index()
    assert problems and all(str(sealed) in p and "cannot read" in p for p in problems)
    assert [c.uri for c in store.captures(key)] == [key]  # lookups still answer, and say why
    assert any(str(sealed) in p and "cannot read" in p for p in store.index.problems)


def test_compressed_payloads_are_stored_not_deflated_again(tmp_path: Path) -> None:
    store = Store(tmp_path)
    body = b"a" * 200_000  # compressible, but labelled as compressed already
    url, key, _ = put(store, "http://example.com/g", body, headers=[("Content-Encoding", "gzip")])
    assert store.path_for(url, key).stat().st_size > len(body)  # stored as is (level 0)
    url2, key2, _ = put(
        store, "http://example.com/p", body, headers=[("Content-Type", "image/png")]
    )
    assert store.path_for(url2, key2).stat().st_size > len(body)
    url3, key3, _ = put(
        store, "http://example.com/t", body, headers=[("Content-Type", "text/html")]
    )
    assert store.path_for(url3, key3).stat().st_size < len(body) // 10  # deflated
    for u, k in ((url, key), (url2, key2), (url3, key3)):
        entry = store.get(u, k)
        assert entry is not None
        with entry.open_body() as f:
            assert f.read() == body
        assert warcio_check(store.path_for(u, k)).returncode == 0


def test_concurrent_puts_share_flushes_and_all_are_indexed(tmp_path: Path) -> None:
    # eight recordings finishing together with sync: flush: each WARC append and its journal
    # line are durable on return, at the price of fewer flushes than one a recording
    import threading

    store = Store(tmp_path, sync="flush")
    barrier = threading.Barrier(8)

    def record(i: int) -> None:
        barrier.wait()
        put(store, f"http://example.com/c{i}", b"body %d" % i)

    threads = [threading.Thread(target=record, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(r.uri for r in store.list_prefix("")) == sorted(
        f"http://example.com/c{i}" for i in range(8)
    )
    assert store.check_index() == []
    assert 1 <= store.sync.flushes < 8  # type: ignore[attr-defined]


@pytest.mark.parametrize(("mode", "flushes_on_return"), [("flush", 1), ("group", 1), ("write", 0)])
def test_a_put_flushes_its_records_and_index_line_in_one_round_or_later(
    tmp_path: Path, mode: str, flushes_on_return: int
) -> None:
    """flush and group: the exchange's records and its index line are on disk on return, in
    one flush (not one for the records, then one for the line); write: none yet, in the
    background within a second, and the exchange is served and indexed meanwhile."""
    store = Store(tmp_path, sync=mode)
    put(store, "http://example.com/one", b"body")
    assert store.sync.flushes == flushes_on_return  # type: ignore[attr-defined]
    assert [r.uri for r in store.list_prefix("")] == ["http://example.com/one"]
    entry = store.get(canonicalize("http://example.com/one"))
    assert entry is not None and entry.read_body() == b"body"


def test_the_sync_setting_can_change_and_what_was_written_is_flushed(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert store.sync_mode == "write"
    put(store, "http://example.com/a", b"a")
    background = store.sync
    store.set_sync("flush")
    assert background.flushes == 1  # type: ignore[attr-defined]
    put(store, "http://example.com/b", b"b")
    assert store.sync.flushes == 1  # type: ignore[attr-defined]


def test_saves_racing_compactions_all_succeed_and_are_indexed(tmp_path: Path) -> None:
    # a compaction renames the journal between a save's append and its group flush: the
    # flush goes by the open descriptor, so the save neither fails nor loses its line
    import threading

    store = Store(tmp_path)
    stop = threading.Event()
    errors: list[BaseException] = []

    def compact() -> None:
        while not stop.is_set():
            try:
                store.index.compact()
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

    compactor = threading.Thread(target=compact)
    compactor.start()
    try:
        for i in range(150):
            put(store, f"http://example.com/r{i}", b"body %d" % i)
    finally:
        stop.set()
        compactor.join(30)
    assert errors == []
    assert len({r.uri for r in store.list_prefix("")}) == 150
    assert store.check_index() == []


def test_a_copy_removed_while_it_is_looked_up_is_no_copy(tmp_path: Path, monkeypatch) -> None:
    """A purge or delete may remove the file between finding the copy in it and reading its
    body: that is no copy (the proxy fetches or queues), not an error (a review's purge race
    gave 500s)."""
    from wwwproxy.archive import store as store_module

    put(Store(tmp_path / "cache"), "http://example.com/gone", b"body")
    store = Store(tmp_path / "cache", memory_bytes=1 << 20)  # as serve has it; empty yet
    # found through the index (response_at), or by reading the file (newest_response)
    for name in ("response_at", "newest_response"):
        found_then_removed = getattr(store_module, name)

        def then_removed(path, *args, _found=found_then_removed, **kwargs):  # noqa: ANN001, ANN202
            found = _found(path, *args, **kwargs)
            Path(path).unlink(missing_ok=True)
            return found

        monkeypatch.setattr(store_module, name, then_removed)
    assert store.get(canonicalize("http://example.com/gone")) is None


def test_the_cache_folder_is_made_private(tmp_path: Path) -> None:
    """A cache folder readable by all (one that came with the checkout) is the user's alone
    once a store opens it; a new one is made so."""
    import stat

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    Store(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o700
    Store(tmp_path / "new" / "cache")
    assert stat.S_IMODE((tmp_path / "new" / "cache").stat().st_mode) == 0o700


def test_absent_says_whether_a_key_has_no_copy_at_all(tmp_path: Path) -> None:
    """What a cold miss asks on the event loop instead of a lookup in a thread: true only
    when there is no cache file; any copy, even one never served (a 304), is not absent."""
    store = Store(tmp_path / "cache")
    url = canonicalize("http://absent.example/page")
    post_key = request_key(url.file, "POST", "text/plain", b"a=1")
    assert store.absent(url, url.file) and store.absent(url, post_key)
    put(store, "http://absent.example/page", b"", status=304)
    assert not store.absent(url, url.file)
    assert store.lookup(url, url.file, "GET", b"") is None  # there, but nothing to serve
    assert store.absent(url, post_key)  # another key, another file
    put(store, "http://absent.example/page", b"x", method="POST", request_body=b"a=1")
    assert not store.absent(url, post_key)
    assert store.delete(url)
    assert store.absent(url, url.file) and not store.absent(url, post_key)


# ---------------------------------------------------------------------------------------------
# A page fetched again and again: its newest capture found through the index


def _reference(path: Path, key: str, prefer_good: bool):  # noqa: ANN202
    """What reading the whole file finds (the lookup before the index was used), as
    (response, original, request) offsets."""
    from wwwproxy.archive import store as store_module

    for accept in (
        (store_module._good, store_module._servable) if prefer_good else (store_module._servable,)
    ):
        found = store_module.newest_response(path, archive_key=key, accept=accept)
        if found is not None:
            return (found.response.offset, found.payload_record.offset, found.request.offset)
    return None


def _places(entry) -> tuple[int, int, int] | None:  # noqa: ANN001
    if entry is None:
        return None
    cached = entry._cached
    return (cached.response.offset, cached.payload_record.offset, cached.request.offset)


@pytest.mark.parametrize("seed", range(8))
def test_many_captures_are_found_through_the_index_as_the_file_would_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Captures of one page (200s, 404s, 503s, 304s; bodies seen before, so revisits of
    older originals; Vary): after each, a lookup and a capture find the newest copy from its
    index line, never reading the whole file, and it is the copy reading the whole file
    finds."""
    import random

    from wwwproxy.archive import store as store_module

    rng = random.Random(seed)
    root = tmp_path / "cache"
    for n in range(rng.randrange(3, 30)):
        status = rng.choice([200, 200, 200, 404, 503, 304])
        body = rng.choice([b"one", b"two", b"three " * 100]) if status != 304 else b""
        headers = [("Vary", "Accept-Encoding")] if rng.random() < 0.5 else None
        with monkeypatch.context() as m:
            if n:  # every capture but the first (no file yet) decides from the index
                m.setattr(store_module, "newest_response", _whole_file_read)
            url, key, _ = put(
                Store(root), "http://example.com/p", body, status=status, headers=headers,
                date=T0 + timedelta(seconds=n),
            )  # fmt: skip
        path = Store(root).path_for(url, key)
        expected = {pg: _reference(path, key, pg) for pg in (True, False)}
        with monkeypatch.context() as m:
            m.setattr(store_module, "newest_response", _whole_file_read)
            for prefer_good in (True, False):
                got = Store(root).get(url, key, prefer_good=prefer_good)
                assert _places(got) == expected[prefer_good], (n, prefer_good)
    assert Store(root).check_index() == []
    assert len(warcio_records(path)) == 2 * (n + 1)


def _whole_file_read(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    raise AssertionError("the whole file was read")


def test_a_capture_whose_line_is_missing_is_still_served(tmp_path: Path) -> None:
    """A crash after a record was written but before its index line: the index no longer
    stands for the file (bytes after its newest line), so the file is read, and the newest
    copy is served and the next capture is appended after it."""
    from wwwproxy.archive.warc import HTTPRequest, HTTPResponse, append_exchange, build_exchange

    root = tmp_path / "cache"
    url, key, _ = put(Store(root), "http://example.com/p", b"first")
    path = Store(root).path_for(url, key)
    records = build_exchange(
        target_uri=url.canonical,
        archive_key=key,
        request=HTTPRequest("GET", [("Host", "example.com")]),
        response=HTTPResponse(200, "OK", [("Content-Type", "text/plain")], b"unindexed"),
        date=T0 + timedelta(seconds=1),
    )
    append_exchange(path, records)  # written, never indexed
    assert Store(root).get(url).read_body() == b"unindexed"
    put(Store(root), "http://example.com/p", b"unindexed", date=T0 + timedelta(seconds=2))
    entry = Store(root).get(url)
    assert entry.read_body() == b"unindexed" and entry._cached.is_revisit
    assert [r[0] for r in warcio_records(path)] == ["request", "response"] * 2 + [
        "request",
        "revisit",
    ]


def test_a_torn_tail_after_the_indexed_records_is_cut_before_the_next_capture(
    tmp_path: Path,
) -> None:
    """``kill -9`` in the middle of an append: the next capture cuts the torn bytes off and
    appends after the last whole record, and every record is read back whole."""
    import gzip

    root = tmp_path / "cache"
    url, key, _ = put(Store(root), "http://example.com/p", b"first")
    path = Store(root).path_for(url, key)
    torn = gzip.compress(b"WARC/1.1\r\nWARC-Type: request\r\n" + b"x" * 5000)
    with path.open("ab") as f:
        f.write(torn[: len(torn) // 2])
    put(Store(root), "http://example.com/p", b"second", date=T0 + timedelta(seconds=1))
    assert [r[3] for r in warcio_records(path) if r[0] == "response"] == [b"first", b"second"]
    assert Store(root).check_index() == []
    assert Store(root).get(url).read_body() == b"second"


def test_damage_in_an_old_capture_does_not_hide_the_newer_ones(tmp_path: Path) -> None:
    """Bytes of an old capture damaged on disk: the newest copy is found through its index line
    and served, and the next capture is appended after it (reading the file from its start
    stops at the damage: the newer captures were not found, and the next append moved them
    all to a side file)."""
    root = tmp_path / "cache"
    for n, body in enumerate([b"old " * 200, b"middle", b"newest"]):
        url, key, lines = put(
            Store(root), "http://example.com/p", body, date=T0 + timedelta(seconds=n)
        )
        if n == 0:
            damaged_at = lines[0].warcfile[1] + 40  # inside the first response's member
    path = Store(root).path_for(url, key)
    data = bytearray(path.read_bytes())
    data[damaged_at : damaged_at + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    assert Store(root).get(url).read_body() == b"newest"
    put(Store(root), "http://example.com/p", b"after", date=T0 + timedelta(seconds=3))
    assert Store(root).get(url).read_body() == b"after"
    assert not list(path.parent.glob("*.corrupt-*"))
    store = Store(root)
    assert [store.get_at(line).payload_length for line in store.captures(key)[1:]] == [6, 6, 5]
