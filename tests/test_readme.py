"""The README's try-it block, run as written and pasted whole, does what its comments say.

The block assumes ``wwwproxy serve`` running in the checkout on 127.0.0.1:8080 and a free port
8000; the test starts the proxy itself on a free port, in a temporary working directory with its
own configuration and cache, and moves the block's ports and site folder there.  Every other
character of the block runs as the README prints it, in one ``bash`` script."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: what a comment may claim of the answer to the ``curl -i`` on its line
CLAIMS = ("MISS", "HIT", "503")


def try_it_block(readme: str) -> str:
    """The first ``sh`` fenced block under the ``## Try it`` heading."""
    section = readme.split("\n## Try it\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "no sh block under ## Try it"
    return match.group(1)


def curl_claims(block: str) -> list[str]:
    """For each ``curl -i`` line of the block, the claim its comment makes."""
    claims = []
    for line in block.splitlines():
        if line.startswith("curl -i "):
            comment = line.partition("#")[2]
            said = [claim for claim in CLAIMS if claim in comment.split(":")[0].split()]
            said = said or [claim for claim in CLAIMS if claim in comment]
            assert said, f"a curl line whose comment claims nothing: {line}"
            claims.append(said[0])
    return claims


def answers(output: str) -> list[tuple[int, str | None]]:
    """Each HTTP answer that ``curl -i`` printed: (status, X-Cache or None)."""
    found = []
    for part in re.split(r"(?=HTTP/1\.[01] \d{3} )", output)[1:]:
        status = int(part.split()[1])
        cache = re.search(r"(?mi)^X-Cache: *(\S+)", part)
        found.append((status, cache.group(1) if cache else None))
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "wwwproxy serve exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


def test_the_claims_are_read_from_the_comments():
    block = (
        "curl -i -x P http://s/   # X-Cache: MISS: fetched\n"
        "curl -i -x P http://s/   # ... but its copy is served: HIT\n"
        "curl -i -x P http://s/n  # not cached: 503, queued\n"
    )
    assert curl_claims(block) == ["MISS", "HIT", "503"]
    printed = "HTTP/1.1 200 OK\r\nX-Cache: MISS\r\n\r\nbodyHTTP/1.1 503 X\r\n\r\n"
    assert answers(printed) == [(200, "MISS"), (503, None)]


def test_the_try_it_block_does_what_its_comments_say(tmp_path: Path):
    block = try_it_block(README.read_text(encoding="utf-8"))
    claims = curl_claims(block)
    assert claims == ["MISS", "HIT", "HIT", "503", "HIT"]
    proxy_port, site_port = free_port(), free_port()
    site = tmp_path / "site"
    script = (
        block.replace("127.0.0.1:8080", f"127.0.0.1:{proxy_port}")
        .replace("8000", str(site_port))
        .replace("/tmp/site", str(site))
    )
    # every port and path the block names is one of these three
    assert block.count("8080") == block.count("127.0.0.1:8080")
    assert block.count("/tmp/") == block.count("/tmp/site")
    (tmp_path / "try-it.sh").write_text(script, encoding="utf-8")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "wwwproxy.yaml").write_text(
        f"listen: 127.0.0.1:{proxy_port}\n", encoding="utf-8"
    )
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "wwwproxy").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m wwwproxy "$@"\n', encoding="utf-8"
    )
    (venv_bin / "wwwproxy").chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy"):
        env.pop(name, None)

    serve = subprocess.Popen(
        [sys.executable, "-m", "wwwproxy", "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    shell: subprocess.Popen[str] | None = None
    try:
        wait_listening(proxy_port, serve)
        shell = subprocess.Popen(
            ["bash", "try-it.sh"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: the site it starts goes with it
        )
        out, err = shell.communicate(timeout=60)
    finally:
        if shell is not None and shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=15)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()

    got = answers(out)
    assert len(got) == len(claims), (out, err)
    for (status, cache), claim in zip(got, claims, strict=True):
        if claim == "503":
            assert status == 503, (out, err)
        else:
            assert (status, cache) == (200, claim), (out, err)
    queued = out.split("HTTP/1.1 503", 1)[1].split("HTTP/1.", 1)[0]
    assert "queue" in queued.lower(), queued  # the page says it is queued
    assert "mode: offline" in out and "mode: online" in out, out
    assert "fetching the queue" in out, out
    assert "<h1>New</h1>" in out.rsplit("HTTP/1.1 200", 1)[1]  # the page fetched from the queue
