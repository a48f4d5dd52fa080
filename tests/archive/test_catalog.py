"""The catalog (:mod:`wwwproxy.archive.catalog`) kept by the store: its summaries after puts,
deletes and purges equal those made again from the index; a cache without one gets one on
open; a build cut short is made again; changes during a build count once."""

from __future__ import annotations

import stat
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

from wwwproxy.archive import catalog as catalog_module
from wwwproxy.archive.catalog import Catalog
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

from ..commands.test_index import record

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def snapshot(catalog: Catalog) -> tuple[object, ...]:
    """Everything the catalog answers, to compare two catalogs by."""
    hosts = catalog.hosts(count=10**6)
    pages = {
        (h.proto, h.hostport, sort): catalog.pages(h.proto, h.hostport, sort, count=10**6)
        for h in hosts
        for sort in ("name", "time", "size")
    }
    return catalog.totals(), hosts, pages


def remade(store: Store) -> tuple[object, ...]:
    """What a catalog made from nothing (from the index) says."""
    fresh = Catalog(store.root / "elsewhere")
    fresh.rebuild(store.index.prefix(""))
    return snapshot(fresh)


def fill(store: Store) -> None:
    for i in range(6):
        record(store, f"http://a.example/p{i}", b"x" * (i + 1), T0 + timedelta(hours=i))
    record(store, "http://a.example/p1", b"", T0 + timedelta(days=1), status=304)
    record(store, "http://a.example/p2", b"gone", T0 + timedelta(days=1), status=404)
    record(store, "http://a.example/p3", b"x" * 4, T0 + timedelta(days=2))  # a revisit
    record(store, "https://a.example/s", b"secure", T0)
    record(store, "http://b.example:8080/", b"bee", T0 + timedelta(days=3))


def test_summaries_follow_puts_and_deletes(tmp_path):
    store = Store(tmp_path / "cache")
    store.open_catalog()
    fill(store)
    catalog = store.catalog
    totals = catalog.totals()
    assert (totals.hosts, totals.pages) == (3, 8)
    assert totals.bytes == sum(p.stat().st_size for p in store.warc_files())
    assert totals.last == "2024-01-04T00:00:00.000000Z"
    assert snapshot(catalog) == remade(store)
    total, rows = catalog.pages("http", "a.example", "name")
    assert total == 6 and [r.summary.captures for r in rows] == [1, 2, 2, 2, 1, 1]
    p2 = rows[2].summary
    assert p2.served(True).status == 200 and p2.served(False).status == 404

    assert store.delete(canonicalize("http://a.example/p2"))
    store.delete_host("http", "b.example:8080")
    totals = catalog.totals()
    assert (totals.hosts, totals.pages) == (2, 6)
    assert totals.last == "2024-01-03T00:00:00.000000Z"  # b.example's newer capture went
    assert totals.bytes == sum(p.stat().st_size for p in store.warc_files())
    assert snapshot(catalog) == remade(store)
    assert catalog.host("http", "b.example:8080") is None


def test_a_purge_is_followed(tmp_path):
    store = Store(tmp_path / "cache")
    store.open_catalog()
    fill(store)
    deleted = store.purge(None, canonicalize("http://a.example/"))
    assert deleted.pages == 6
    assert [(h.proto, h.hostport) for h in store.catalog.hosts()] == [
        ("http", "b.example:8080"),
        ("https", "a.example"),
    ]
    assert store.catalog.totals()[:2] == (2, 2)
    assert snapshot(store.catalog) == remade(store)
    store.purge(None)
    assert store.catalog.totals()[:3] == (0, 0, 0) and store.catalog.hosts() == []


def test_a_cache_without_a_catalog_gets_one_on_open(tmp_path, caplog):
    """An older version's cache (an index, no catalog): recording into it makes none; the
    first open makes it from the index, once, and says so; only its owner may read it."""
    store = Store(tmp_path / "cache")
    fill(store)
    assert not store.catalog.exists()
    again = Store(tmp_path / "cache")
    with caplog.at_level("WARNING"):
        again.open_catalog()
    assert "made from the index (once)" in caplog.text
    assert again.catalog.totals()[:2] == (3, 8)
    assert snapshot(again.catalog) == remade(again)
    assert stat.S_IMODE(again.catalog.path.stat().st_mode) == 0o600
    caplog.clear()
    Store(tmp_path / "cache").open_catalog()
    assert "made from the index" not in caplog.text  # once


def test_a_build_cut_short_is_made_again_and_changes_meanwhile_count_once(tmp_path):
    """A build killed mid-way leaves the catalog marked unfinished: puts and deletes meanwhile
    queue in it, and the next open makes it again from the index, applying them on top (a
    line the build read and its put queued counts once)."""
    store = Store(tmp_path / "cache")
    store.open_catalog()
    fill(store)
    store.catalog.flush()
    with store.catalog._write() as conn:  # noqa: SLF001 (as a build killed mid-way leaves it)
        conn.execute("UPDATE meta SET value = 'building' WHERE name = 'state'")
        conn.execute("DELETE FROM pages WHERE id % 2 = 0")
    assert not store.catalog.ready()
    record(store, "http://a.example/p0", b"new", T0 + timedelta(days=5))
    record(store, "http://c.example/", b"c", T0 + timedelta(days=5))
    store.delete(canonicalize("http://a.example/p5"))
    with store.catalog._read() as conn:  # noqa: SLF001
        assert conn.execute("SELECT count(*) FROM pending").fetchone() == (3,)
    store.open_catalog()
    assert store.catalog.ready()
    assert store.catalog.totals()[:2] == (4, 8)
    _, rows = store.catalog.pages("http", "a.example")
    assert rows[0].key == "http://a.example/p0" and rows[0].summary.captures == 2
    assert snapshot(store.catalog) == remade(store)


def test_changes_queued_across_a_whole_build_count_once(tmp_path, monkeypatch):
    """A put queued in this process (its line in the index already) while a build runs from
    start to end (another thread's open) counts once when it is applied after the build."""
    monkeypatch.setattr(catalog_module, "_FLUSH_AFTER", 600.0)  # applied when the test says
    store = Store(tmp_path / "cache")
    store.open_catalog()
    record(store, "http://a.example/p", b"one", T0)
    store.catalog.flush()
    record(store, "http://a.example/p", b"", T0 + timedelta(hours=1), status=304)
    record(store, "http://a.example/q", b"q", T0 + timedelta(hours=1))
    assert store.catalog._queue  # noqa: SLF001 (queued, not applied yet)
    Catalog.rebuild(store.catalog, store.index.prefix(""))  # reads the queued lines too
    store.catalog.flush()
    _, rows = store.catalog.pages("http", "a.example")
    assert [(r.key, r.summary.captures) for r in rows] == [
        ("http://a.example/p", 2),
        ("http://a.example/q", 1),
    ]
    assert snapshot(store.catalog) == remade(store)
    record(store, "http://a.example/p", b"two", T0 + timedelta(hours=2))  # after: counted
    assert store.catalog.pages("http", "a.example")[1][0].summary.captures == 3


def test_changes_queued_across_another_processs_build_count_once(tmp_path, monkeypatch):
    """The same, the build made by another process (``index rebuild`` beside the proxy)."""
    monkeypatch.setattr(catalog_module, "_FLUSH_AFTER", 600.0)
    store = Store(tmp_path / "cache")
    store.open_catalog()
    record(store, "http://a.example/p", b"one", T0)
    store.catalog.flush()
    record(store, "http://a.example/p", b"", T0 + timedelta(hours=1), status=304)
    code = (
        "import sys; from wwwproxy.archive.store import Store; s = Store(sys.argv[1]); "
        "s.catalog.rebuild(s.index.prefix(''))"
    )
    subprocess.run([sys.executable, "-c", code, str(store.root)], check=True, timeout=60)
    assert store.catalog._queue  # noqa: SLF001
    store.catalog.flush()
    assert store.catalog.pages("http", "a.example")[1][0].summary.captures == 2
    assert snapshot(store.catalog) == remade(store)


def test_index_rebuild_makes_the_catalog_again(tmp_path):
    store = Store(tmp_path / "cache")
    store.open_catalog()
    fill(store)
    store.catalog.flush()
    with store.catalog._write() as conn:  # noqa: SLF001 (out of step, as after a crash)
        conn.execute("DELETE FROM pages")
        conn.execute("UPDATE totals SET pages = 0")
    count, problems = store.rebuild_index()
    assert not problems
    assert store.catalog.totals()[:2] == (3, 8)
    assert snapshot(store.catalog) == remade(store)


def test_page_orders_both_ways(tmp_path):
    store = Store(tmp_path / "cache")
    store.open_catalog()
    for i, size in enumerate((30, 10, 20, 10)):
        record(store, f"http://o.example/{'dcba'[i]}", b"x" * size, T0 + timedelta(hours=i % 3))

    def keys(sort: str, descending: bool = False, **kw: int) -> list[str]:
        _, rows = store.catalog.pages("http", "o.example", sort, descending=descending, **kw)
        return [r.key.rsplit("/", 1)[1] for r in rows]

    assert keys("name") == ["a", "b", "c", "d"]
    assert keys("name", True) == ["d", "c", "b", "a"]
    assert keys("time") == ["a", "d", "c", "b"]  # hours 0, 0, 1, 2: ties by name
    assert keys("size") == ["a", "c", "b", "d"]  # 10, 10, 20, 30
    assert keys("size", True) == ["d", "b", "c", "a"]
    assert keys("name", start=1, count=2) == ["b", "c"]


CRASHING_WRITER = """
import os, signal, sys
from datetime import UTC, datetime
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

store = Store(sys.argv[1])
u = canonicalize("http://crash.example/page")
rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"",
                     date=datetime(2024, 2, 1, tzinfo=UTC))
rec.write(b"recorded, then killed")
rec.finish(200, "OK", [("Content-Type", "text/plain")])
os.kill(os.getpid(), signal.SIGKILL)  # before its catalog changes are applied
"""


def test_a_writer_killed_before_its_changes_are_applied_loses_nothing(tmp_path):
    """A process killed (SIGKILL) with captures in the index whose catalog changes it had
    not applied yet: the next open makes the catalog again, and they are in it."""
    import os
    import subprocess
    import sys

    store = Store(tmp_path / "cache")
    store.open_catalog()
    fill(store)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(store.root)], env=env, timeout=60
    )
    assert done.returncode == -9
    assert store.catalog.host("http", "crash.example") is None  # lost with the process
    store.open_catalog()
    assert store.catalog.host("http", "crash.example") is not None
    assert store.catalog.totals()[:2] == (4, 9)
    assert snapshot(store.catalog) == remade(store)


def test_changes_that_cannot_be_applied_stay_queued_and_are_applied_later(
    tmp_path, monkeypatch, caplog
):
    """A full disk: the changes are kept, a page still reads the catalog (a little behind),
    and they are applied once they can be."""
    import sqlite3

    from wwwproxy.archive import catalog as catalog_module

    store = Store(tmp_path / "cache")
    store.open_catalog()
    catalog = store.catalog
    real = Catalog._apply
    failures = []

    def full_disk(self, items):
        if not failures:
            failures.append(len(items))
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, items)

    monkeypatch.setattr(Catalog, "_apply", full_disk)
    monkeypatch.setattr(catalog_module, "_RETRY_AFTER", 0.05)
    fill(store)
    totals = catalog.totals()  # (a page's read: its flush fails once, the page answers)
    assert failures and "changes not applied yet" in caplog.text
    deadline = time.monotonic() + 10
    while catalog._queue and time.monotonic() < deadline:
        time.sleep(0.02)
    totals = catalog.totals()
    assert (totals.hosts, totals.pages) == (3, 8)
    assert snapshot(catalog) == remade(store)


def test_a_second_connection_keeps_the_first_ones_locks(tmp_path):
    """Opening the reader must not drop this process's locks on the database (closing any
    descriptor of the file drops them): another process closing its connection would then
    take itself for the last one and remove the log this process still writes to."""
    import subprocess
    import sys

    store = Store(tmp_path / "cache")
    fill(store)
    catalog = store.catalog
    catalog.rebuild(store.index.prefix(""))  # the writer's connection is open, with a log
    catalog.totals()  # the reader's connection opens now
    assert catalog.log_path.exists()
    other = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]);"
        "c.execute('SELECT count(*) FROM sqlite_master').fetchone(); c.close()"
    )
    subprocess.run([sys.executable, "-c", other, str(catalog.path)], check=True, timeout=60)
    assert catalog.log_path.exists()  # it did not take itself for the last connection
    assert catalog.totals()[:2] == (3, 8)


def test_a_read_waits_for_the_changes_another_thread_is_applying(tmp_path, monkeypatch):
    """Changes that left the queue for another thread's transaction are this process's too: a
    page read meanwhile waits for them (it used to read without them, and the host list
    showed 100 hosts of "page 1 of 2" out of 250)."""
    monkeypatch.setattr(catalog_module, "_FLUSH_AFTER", 600.0)  # applied when the test says
    store = Store(tmp_path / "cache")
    store.open_catalog()
    catalog = store.catalog
    record(store, "http://a.example/p", b"one", T0)
    catalog.flush()
    record(store, "http://b.example/q", b"two", T0)
    entered, release = threading.Event(), threading.Event()
    apply = catalog._apply  # noqa: SLF001

    def slow_apply(items):
        entered.set()
        release.wait(10)
        apply(items)

    monkeypatch.setattr(catalog, "_apply", slow_apply)
    applying = threading.Thread(target=catalog.flush)
    applying.start()
    assert entered.wait(10)
    assert not catalog._queue  # noqa: SLF001 (taken: being applied)
    read: list[int] = []
    reader = threading.Thread(target=lambda: read.append(catalog.totals().hosts))
    reader.start()
    time.sleep(0.3)  # (a read that does not wait has read by now)
    release.set()
    reader.join(10)
    applying.join(10)
    assert read == [2]


def test_reads_in_a_snapshot_see_one_state(tmp_path, monkeypatch):
    """A page's totals and rows are read in one snapshot: what another process applies in
    between shows on the next page, not half on this one."""
    monkeypatch.setattr(catalog_module, "_FLUSH_AFTER", 600.0)
    store = Store(tmp_path / "cache")
    store.open_catalog()
    record(store, "http://a.example/p", b"one", T0)
    store.catalog.flush()
    other = Store(tmp_path / "cache")  # another process's store of the same cache
    other.open_catalog()
    with store.catalog.snapshot():
        totals = store.catalog.totals()
        record(other, "http://b.example/q", b"two", T0)
        other.catalog.flush()
        hosts = store.catalog.hosts(count=100)
    assert totals.hosts == len(hosts) == 1
    assert store.catalog.totals().hosts == len(store.catalog.hosts(count=100)) == 2
