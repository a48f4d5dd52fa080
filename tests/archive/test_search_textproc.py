"""The search text of recorded pages is made in a helper process (a real child process, over
real pipes): the same text as in this process, and when the helper cannot start, dies or
answers nonsense, the pages are made here instead, never lost.  It goes away with the index,
with its indexing thread, and with its parent, even one killed by SIGKILL."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from wwwproxy.archive.search import SearchIndex
from wwwproxy.archive.search import helper as helper_module
from wwwproxy.archive.search.schema import Text
from wwwproxy.archive.search.textproc import HELPER_FAILURES, PageError, TextHelper, page_text
from wwwproxy.archive.store import Store
from wwwproxy.url import canonicalize

HTML = (("Content-Type", "text/html; charset=utf-8"),)
PAGES = [
    ("<title>Café</title><p>crème brûlée, crème again</p>".encode(), HTML),
    (
        "<title>été</title>ça ça".encode("latin-1"),
        (("Content-Type", "text/html; charset=latin-1"),),
    ),
    (
        gzip.compress(b"<title>Zed</title>zipped words zipped"),
        (*HTML, ("Content-Encoding", "gzip")),
    ),
    (b"plain text, plain", (("Content-Type", "text/plain"),)),
    (b"", HTML),  # no text at all
    (b"not gzip at all", (*HTML, ("Content-Encoding", "gzip"))),  # cannot be decoded
]


def here(pages):
    out = []
    for payload, headers in pages:
        try:
            out.append(page_text(payload, headers))
        except PageError as exc:
            out.append(f"error: {exc}")
    return out


def as_comparable(results):
    return [f"error: {r}" if isinstance(r, PageError) else r for r in results]


def gone(pid: int, within: float = 30.0) -> bool:
    """Whether process ``pid`` has exited (and been reaped by someone) within ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return True  # exited; its parent has not reaped it yet
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_the_helper_makes_the_same_text_as_this_process():
    expected = here(PAGES)
    assert expected[0] == Text.of("Café", "crème brûlée, crème again")
    assert expected[4] == Text("", "", "")
    assert isinstance(expected[5], str) and expected[5].startswith("error:")
    helper = TextHelper()
    try:
        assert as_comparable(helper.texts(PAGES)) == expected
        pid = helper.pid
        assert pid is not None and pid != os.getpid()  # a process of its own ...
        assert as_comparable(helper.texts(PAGES[:2])) == expected[:2]
        assert helper.pid == pid and helper.started == 1  # ... kept for the next batch
        assert helper.failures == 0
    finally:
        helper.stop()
    assert helper.pid is None and gone(pid)


def test_a_helper_killed_between_batches_is_replaced():
    helper = TextHelper()
    try:
        helper.texts(PAGES[:1])
        first = helper.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert gone(first)
        assert as_comparable(helper.texts(PAGES)) == here(PAGES)
        assert helper.started == 2 and helper.failures == 1
        assert helper.pid not in (None, first)
    finally:
        helper.stop()


def test_without_a_helper_the_pages_are_made_here(tmp_path):
    helper = TextHelper([str(tmp_path / "no-such-python"), "-m", "nothing"])
    assert as_comparable(helper.texts(PAGES)) == here(PAGES)
    assert helper.failures == HELPER_FAILURES and helper.started == 0
    assert as_comparable(helper.texts(PAGES[:1])) == here(PAGES[:1])  # not tried again


@pytest.mark.parametrize(
    "script",
    [
        "import sys; sys.stdin.buffer.read(8); sys.exit(3)",  # dies in the middle
        # answers, but not with page texts
        "import sys, marshal, struct; sys.stdin.buffer.read(1);"
        "d = marshal.dumps([1, 2]); sys.stdout.buffer.write(struct.pack('<Q', len(d)) + d);"
        "sys.stdout.buffer.flush(); sys.stdin.buffer.read()",
        "import sys; sys.stdout.buffer.write(b'\\xff' * 8); sys.stdout.buffer.flush()",
    ],
    ids=["dies", "wrong-answer", "garbage"],
)
def test_a_failing_helper_loses_no_page(script, caplog):
    helper = TextHelper([sys.executable, "-c", script])
    for _ in range(HELPER_FAILURES + 1):
        assert as_comparable(helper.texts(PAGES)) == here(PAGES)
    assert helper.failures == HELPER_FAILURES
    assert helper.started == HELPER_FAILURES  # then no more tries
    assert "the search text helper failed" in caplog.text


def test_the_helper_ends_with_its_parent_even_on_sigkill(tmp_path):
    """Nothing but the parent holds the helper's input: when the parent dies, the helper
    reads the end of it and exits."""
    code = (
        "import os, sys, time\n"
        "from wwwproxy.archive.search.textproc import TextHelper\n"
        "h = TextHelper()\n"
        "h.texts([(b'<title>t</title>x', [('Content-Type', 'text/html')])])\n"
        "print(h.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        cwd=helper_module._PACKAGE_ROOT,
        text=True,
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert not gone(pid, within=0.2)
        parent.kill()
        parent.wait(30)
        assert gone(pid)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(30)


def put(store: Store, url: str, body: bytes, headers) -> None:
    u = canonicalize(url)
    rec = store.recorder(u, u.file, method="GET", request_headers=[], request_body=b"")
    rec.write(body)
    rec.finish(200, "OK", list(headers))


BIG = (b"<title>Big</title>" + b"<p>many words here " * 70_000, HTML)  # > GIVEN_MAX: read back


def test_recorded_pages_are_indexed_through_the_helper_and_it_closes_with_the_index(
    tmp_path, monkeypatch
):
    from wwwproxy.archive.search import capture, textproc, worker

    assert len(BIG[0]) > worker.GIVEN_MAX
    monkeypatch.setattr(worker, "IDLE_EXIT", 120.0)  # its thread stays for the checks below

    def not_here(*args):
        raise AssertionError("a page's text was made in this process")

    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    with monkeypatch.context() as patch:
        patch.setattr(textproc, "extract_text", not_here)
        patch.setattr(capture, "extract_text", not_here)
        for n, (body, headers) in enumerate([*PAGES, BIG]):
            put(store, f"http://t.example/{n}", body, headers)
        index.flush()
    assert index._texts.started == 1 and index._texts.failures == 0
    pid = index._texts.pid
    if sys.platform.startswith("linux"):  # the text is made with what CPU is left over
        assert pid is not None and os.getpriority(os.PRIO_PROCESS, pid) == 19
        thread = index.indexing._thread  # this index's indexing thread (still there: idle)
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        assert thread is not None and thread.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == min(
            19, mine + worker.INDEX_NICENESS
        )
    assert index.search("brûlée").total == 1
    assert index.search("zipped").total == 1
    assert index.search("plain").total == 1
    assert index.search("many words").total == 1
    rebuilt = SearchIndex(store.root, path=tmp_path / "rebuilt.sqlite3")
    assert rebuilt.rebuild(store) == len(PAGES) + 1  # read back from the WARC files, made here
    with index._lock, rebuilt._lock:
        query = "SELECT key, title, digest FROM pages ORDER BY key"
        assert index._conn.execute(query).fetchall() == rebuilt._conn.execute(query).fetchall()
    rebuilt.close()
    index.close()
    assert index._texts.pid is None and pid is not None and gone(pid)


def test_the_helper_goes_when_the_indexing_thread_idles_out(tmp_path, monkeypatch):
    from wwwproxy.archive.search import worker

    monkeypatch.setattr(worker, "IDLE_EXIT", 0.1)
    store = Store(tmp_path / "cache")
    index = SearchIndex(store.root)
    index.attach(store)
    put(store, "http://t.example/a", *PAGES[0])
    index.flush()
    pid = index._texts.pid
    assert pid is not None
    assert gone(pid)  # the thread ended, and stopped it
    put(store, "http://t.example/b", *PAGES[2])  # a later page starts another
    index.flush()
    assert index._texts.started == 2
    assert index.search("zipped").total == 1
    index.close()


def test_the_helper_finds_the_same_package_and_nothing_goes_before_the_stdlib(monkeypatch):
    """The package's directory goes on the helper's PYTHONPATH only when this process did
    not find it on its own path (put there at run time); a site-packages directory (an
    installed package) is never put before the standard library."""
    from wwwproxy.archive.search.helper import _PACKAGE_ROOT, _helper_env

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != _PACKAGE_ROOT and p])
    assert _helper_env()["PYTHONPATH"] == os.pathsep.join([_PACKAGE_ROOT, "/elsewhere"])
    monkeypatch.setattr(sys, "path", [*sys.path, _PACKAGE_ROOT])  # as site-packages is
    assert _helper_env()["PYTHONPATH"] == "/elsewhere"


def test_the_text_helper_starts_without_the_index_or_the_cache():
    """The text helper imports what makes a page's text: not the search index, the store,
    the CDXJ index or the WARC reader (a tenth of a second of its start, once)."""
    script = (
        "import sys, wwwproxy.archive.search.textproc as t;"
        "print(sorted(m for m in ('wwwproxy.archive.search.index', 'wwwproxy.archive.cdxj',"
        " 'wwwproxy.archive.store', 'wwwproxy.archive.warc', 'aiohttp') if m in sys.modules));"
        "print(t.page_text(b'<title>T</title><p>word', [('Content-Type', 'text/html')]).title)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines() == ["[]", "T"]


def test_the_helper_leaves_quietly_when_its_parent_died_while_it_worked():
    """A parent killed while its helper worked leaves the answer nowhere to go: the helper
    exits without a traceback (one once ended an hour's soak log)."""
    request = helper_module.marshal.dumps([(b"<title>t</title><p>words</p>", [])])
    child = subprocess.Popen(
        [sys.executable, "-m", "wwwproxy.archive.search.textproc"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child.stdout.close()  # the parent is gone: nobody reads the answer
    child.stdin.write(helper_module._LENGTH.pack(len(request)) + request)
    child.stdin.close()
    err = child.stderr.read()  # to its end: the helper has exited
    child.stderr.close()
    child.wait(60)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode(errors="replace")
    assert child.returncode == 0
