"""``wwwproxy serve`` as a real process: start, serve through it, SIGHUP, SIGTERM, bad config."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

WWWPROXY = [str(Path(sys.executable).with_name("wwwproxy"))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("server did not start listening")


@pytest.fixture
async def origin():
    hits: list[str] = []

    async def page(request: web.Request) -> web.Response:
        hits.append(request.path)
        if request.path == "/slow":
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            resp.content_length = 6
            await resp.prepare(request)
            await resp.write(b"abc")
            await asyncio.sleep(1.0)
            await resp.write(b"def")
            return resp
        return web.Response(text=f"page {request.path}", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    yield port, hits
    await runner.cleanup()


@pytest.fixture
def proxy(tmp_path: Path):
    port = free_port()
    conf = tmp_path / "wwwproxy.yaml"
    conf.write_text(
        f"# test config\nlisten: 127.0.0.1:{port}\ncache: {tmp_path / 'cache'}\n"
        "request_changed: 0\n"  # every repeat asks the origin, unless a rule says otherwise
    )
    log = open(tmp_path / "proxy.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([*WWWPROXY, "serve", "-c", str(conf)], stdout=log, stderr=log)
    try:
        wait_listening(port, proc)
        yield port, proc, conf, tmp_path / "proxy.log"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        log.close()


async def get(proxy_port: int, url: str, timeout: float = 10) -> tuple[int, dict, bytes]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
        async with s.get(url, proxy=f"http://127.0.0.1:{proxy_port}") as r:
            return r.status, dict(r.headers), await r.read()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WWWPROXY, *args], capture_output=True, text=True, timeout=30, check=False
    )


async def test_serve_records_switches_mode_and_logs(proxy, origin) -> None:
    port, proc, conf, log = proxy
    oport, hits = origin
    status, headers, body = await get(port, f"http://127.0.0.1:{oport}/a")
    assert (status, body, headers["X-Cache"]) == (200, b"page /a", "MISS")
    result = cli("offline", "--proxy", f"127.0.0.1:{port}")
    assert result.returncode == 0 and "mode: offline" in result.stdout
    status, headers, body = await get(port, f"http://127.0.0.1:{oport}/a")
    assert (status, body, headers["X-Cache"]) == (200, b"page /a", "HIT")
    assert hits == ["/a"]
    result = cli("status", "-c", str(conf))  # the address comes from the config
    assert "mode: offline" in result.stdout
    assert cli("online", "-c", str(conf)).returncode == 0
    # one access-log line per request, with the full URL and the cache result
    text = log.read_text()
    assert f'"GET http://127.0.0.1:{oport}/a" 200' in text
    assert text.count(f"http://127.0.0.1:{oport}/a") == 2
    assert " MISS" in text and " HIT" in text
    # the cache is private to the user: files 0600, folders 0700
    cache = conf.parent / "cache"
    made = [p for p in cache.rglob("*") if not p.is_symlink()]
    assert any(p.suffix == ".gz" for p in made)
    for path in made:
        mode = path.stat().st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


async def test_sighup_reloads_config(proxy, origin) -> None:
    port, proc, conf, log = proxy
    oport, hits = origin
    await get(port, f"http://127.0.0.1:{oport}/fresh")
    conf.write_text(conf.read_text() + "freshness:\n  - pattern: '/fresh$'\n    max_age: 3600\n")
    proc.send_signal(signal.SIGHUP)
    for _ in range(50):
        if "configuration reloaded" in log.read_text():
            break
        await asyncio.sleep(0.1)
    status, headers, _ = await get(port, f"http://127.0.0.1:{oport}/fresh")
    assert headers["X-Cache"] == "HIT"  # fresh by the new rule: origin not asked
    assert hits == ["/fresh"]
    # a broken config on reload is reported and the old one kept
    conf.write_text("mode: nonsense\n")
    proc.send_signal(signal.SIGHUP)
    for _ in range(50):
        if "config not reloaded" in log.read_text():
            break
        await asyncio.sleep(0.1)
    assert "config not reloaded" in log.read_text()
    assert proc.poll() is None
    status, headers, _ = await get(port, f"http://127.0.0.1:{oport}/fresh")
    assert status == 200 and headers["X-Cache"] == "HIT"


async def test_sighup_keeps_the_mode(proxy, origin) -> None:
    """The mode is the running proxy's state: ``systemctl reload`` must not put an offline
    proxy back online (the config says ``mode: online``)."""
    port, proc, conf, log = proxy
    oport, hits = origin
    conf.write_text(conf.read_text() + "mode: online\n")
    assert cli("offline", "--proxy", f"127.0.0.1:{port}").returncode == 0
    proc.send_signal(signal.SIGHUP)
    for _ in range(50):
        if "configuration reloaded" in log.read_text():
            break
        await asyncio.sleep(0.1)
    assert "configuration reloaded" in log.read_text()
    assert "mode: offline" in cli("status", "--proxy", f"127.0.0.1:{port}").stdout
    status, _, _ = await get(port, f"http://127.0.0.1:{oport}/never")
    assert status == 503 and hits == []  # still offline: queued, not fetched


async def test_sigterm_finishes_requests_in_flight(proxy, origin) -> None:
    port, proc, conf, log = proxy
    oport, _ = origin
    task = asyncio.ensure_future(get(port, f"http://127.0.0.1:{oport}/slow"))
    await asyncio.sleep(0.4)  # the response has started, half the body is on its way
    proc.send_signal(signal.SIGTERM)
    status, headers, body = await task
    assert (status, body) == (200, b"abcdef")
    assert await asyncio.to_thread(proc.wait, 10) == 0
    # and it was recorded before exit
    from wwwproxy.archive.store import Store
    from wwwproxy.url import canonicalize

    entry = Store(conf.parent / "cache").get(canonicalize(f"http://127.0.0.1:{oport}/slow"))
    assert entry is not None
    with entry.open_body() as f:
        assert f.read() == b"abcdef"


def test_bad_config_refuses_to_start(tmp_path: Path) -> None:
    conf = tmp_path / "bad.yaml"
    conf.write_text("listen: 127.0.0.1:1\nmode: sleepy\ncolour: blue\n")
    result = cli("serve", "-c", str(conf))
    assert result.returncode == 2
    assert f"{conf}:2: key 'mode'" in result.stderr
    assert f"{conf}:3: unknown key 'colour'" in result.stderr


def test_mode_command_without_a_server(tmp_path: Path) -> None:
    result = cli("status", "--proxy", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "no wwwproxy at" in result.stderr


def test_control_password(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "c.yaml"
    conf.write_text(f"listen: 127.0.0.1:{port}\ncache: {tmp_path / 'cache'}\npassword: s3cret\n")
    proc = subprocess.Popen([*WWWPROXY, "serve", "-c", str(conf)], stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        denied = cli("offline", "--proxy", f"127.0.0.1:{port}", "--password", "wrong")
        assert denied.returncode == 1 and "401" in denied.stderr
        assert cli("offline", "-c", str(conf)).returncode == 0
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/control/?format=json", timeout=10) as r:
            status = json.loads(r.read())
        assert status["mode"] == "offline"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


async def test_sigterm_merges_the_index_journal(proxy, origin) -> None:
    port, proc, conf, log = proxy
    oport, _ = origin
    for i in range(3):
        await get(port, f"http://127.0.0.1:{oport}/j{i}")
    cache = conf.parent / "cache"
    assert (cache / "index" / "journal.cdxj").exists()
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 10) == 0
    from wwwproxy.archive.store import Store

    store = Store(cache)
    assert store.index.journal_bytes() == 0  # merged into index.cdxj at exit
    assert [r.uri for r in store.list_prefix("(127.0.0.1:")] == [
        f"http://127.0.0.1:{oport}/j{i}" for i in range(3)
    ]
    assert store.check_index() == []


async def test_compact_loop_merges_a_large_journal(tmp_path: Path) -> None:
    from wwwproxy import app as run
    from wwwproxy.archive.store import Store
    from wwwproxy.url import canonicalize

    store = Store(tmp_path)
    for i in range(40):
        url = canonicalize(f"http://example.com/{i}")
        rec = store.recorder(url, url.file, method="GET", request_headers=[], request_body=b"")
        rec.finish(200, "OK", [("Content-Type", "text/plain")])
    before = store.index.journal_bytes()
    small = asyncio.ensure_future(run.compact_loop(store, every=0.01, min_bytes=before + 1))
    await asyncio.sleep(0.1)
    small.cancel()
    assert store.index.journal_bytes() == before  # below the threshold: left alone
    task = asyncio.ensure_future(run.compact_loop(store, every=0.05, min_bytes=before))
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            if store.index.journal_bytes() < before:
                break
    finally:
        task.cancel()
    assert store.index.journal_bytes() == 0
    assert len(list(store.list_prefix("(com,example,)/"))) == 40


def test_malformed_requests_are_one_info_line_not_a_traceback(proxy) -> None:
    port, proc, conf, log = proxy
    for junk in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(junk)
            assert s.recv(100).startswith(b"HTTP/1.")
    for _ in range(50):
        if "Content-Length" in log.read_text():
            break
        time.sleep(0.05)
    text = log.read_text()
    # (aiohttp logs the bad Content-Length; the garbage line only gets its 400)
    assert "bad request from 127.0.0.1: Invalid character in Content-Length" in text, text
    assert "Traceback" not in text and " ERROR " not in text
    assert proc.poll() is None
