"""A real browser over HTTPS: headless Chromium (Debian's ``chromium``) trusts the proxy's CA
through the NSS database that README.md's Chromium steps create in a fresh, empty ``$HOME``
(run as written, with ``certutil`` from ``libnss3-tools``), browses an HTTPS page with a style
sheet, a script and an image online, then offline with the origin stopped, and renders the same
page.  ``.ci/run`` installs both packages.

Hermetic: Chromium resolves no name (``--host-resolver-rules``) and sends every URL to the
proxy, which reaches only the test's origin on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import ssl
import struct
import zlib
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from wwwproxy.http.policy import Mode

from .chromium import HEADLESS_FLAGS, run, tool

README = Path(__file__).resolve().parents[2] / "README.md"
#: the README bullet whose ``sh`` block makes Chromium on Linux trust the CA
CHROMIUM_BULLET = "**Chromium/Chrome on Linux**"
#: where the README's steps expect the CA, relative to the directory they run in
README_CA = Path("cache/certificates/ca.cert.pem")
#: seconds the README's steps may take (certutil takes well under one)
STEPS_TIMEOUT = 20

PAGE = b"""<!DOCTYPE html><html><head><title>Secure page</title>
<link rel="stylesheet" href="/style.css"><script src="/app.js"></script></head>
<body><p id="text">Hello over TLS.</p><img id="logo" src="/logo.png" onload="loaded(this)">
<p id="result">waiting</p></body></html>"""
STYLE = b"#text { color: rgb(10, 20, 30); }"
SCRIPT = b"""function loaded(img) {
  var color = getComputedStyle(document.getElementById('text')).color;
  document.getElementById('result').textContent =
    'script ran; image ' + img.naturalWidth + 'x' + img.naturalHeight + '; color ' + color;
}"""


def png(width: int, height: int) -> bytes:
    """A red ``width`` x ``height`` PNG, made here so no image library is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


LOGO = png(2, 3)


def chromium_steps(readme: str) -> str:
    """The ``sh`` block of the README's Chromium-on-Linux bullet, dedented (the test fails,
    saying what is missing, when the bullet or its block is not there)."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if CHROMIUM_BULLET in line), None)
    if start is None:
        pytest.fail(f"README.md has no {CHROMIUM_BULLET} bullet with the certificate steps")
    bullet_indent = len(lines[start]) - len(lines[start].lstrip())
    for i in range(start + 1, len(lines)):
        stripped = lines[i].lstrip()
        indent = len(lines[i]) - len(stripped)
        if stripped.startswith("- ") and indent <= bullet_indent:
            break  # the next bullet: this one has no block
        if stripped == "```sh":
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                break
            return "\n".join(line[indent:] for line in lines[i + 1 : end]) + "\n"
    pytest.fail(f"README.md's {CHROMIUM_BULLET} bullet has no ```sh block of certificate steps")


async def run_readme_steps(steps: str, env: dict[str, str], cwd: Path) -> None:
    """Run ``steps`` with bash as a user would paste them, in the environment ``env`` (its
    ``HOME`` the user's) and the working directory ``cwd``; a failing command fails the test,
    and so does one that waits for input (``certutil`` asking for a password), which is
    killed with everything it started."""
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-e",
        "-c",
        steps,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, to end certutil with bash
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), STEPS_TIMEOUT)
    except TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        pytest.fail(f"README steps did not finish within {STEPS_TIMEOUT}s (waiting for input?)")
    assert proc.returncode == 0, f"README steps exited {proc.returncode}: {out.decode()[-2000:]}"


async def start_origin() -> tuple[web.AppRunner, int, Path]:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    bodies = {
        "/": (PAGE, "text/html"),
        "/style.css": (STYLE, "text/css"),
        "/app.js": (SCRIPT, "application/javascript"),
        "/logo.png": (LOGO, "image/png"),
    }

    async def handle(request: web.Request) -> web.Response:
        body, ctype = bodies.get(request.path, (b"missing", "text/plain"))
        return web.Response(body=body, content_type=ctype)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    pem = Path(os.environ.get("TMPDIR", "/tmp")) / f"wwwproxy-origin-ca-{port}.pem"
    ca.cert_pem.write_to_path(str(pem))
    return runner, port, pem


async def test_chromium_browses_https_online_then_offline(make_proxy, tmp_path):
    chromium = next(
        (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))),
        None,
    )
    if chromium is None:
        pytest.fail("headless Chromium is needed: apt-get install chromium (as .ci/run does)")
    tool("certutil", "libnss3-tools")  # the README's steps run it
    runner, port, origin_ca = await start_origin()
    try:
        proxy = await make_proxy(
            https_intercept=("localhost",),
            upstream_ca=origin_ca,
            connect_ports=(port,),
            # hermetic: any host but the test origin goes to the discard port, which refuses
            upstream_proxy="http://127.0.0.1:9",
            no_proxy=("localhost", "127.0.0.1"),
        )
        ca = proxy.running.server.interceptor.ca
        # the README's steps run unchanged, in the directory holding the proxy's cache
        workdir = ca.cert_path.parents[len(README_CA.parts) - 1]
        assert ca.cert_path == workdir / README_CA
        home = tmp_path / "home"
        home.mkdir()  # fresh and empty: Chromium has never run here
        env = {**os.environ, "HOME": str(home)}  # the NSS database Chromium reads is home's
        steps = chromium_steps(README.read_text())
        await run_readme_steps(steps, env, workdir)
        url = f"https://localhost:{port}/"

        async def browse(profile: str) -> str:
            return await run(
                chromium,
                *HEADLESS_FLAGS,
                f"--user-data-dir={tmp_path / profile}",
                f"--proxy-server=http://127.0.0.1:{proxy.port}",
                "--proxy-bypass-list=<-loopback>",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--virtual-time-budget=5000",
                "--dump-dom",
                url,
                env=env,
            )

        online = await browse("profile-online")
        expected = "script ran; image 2x3; color rgb(10, 20, 30)"
        assert expected in online, online
        for path in ("/", "/style.css", "/app.js", "/logo.png"):
            await proxy.recorded(f"https://localhost:{port}{path}")
    finally:
        await runner.cleanup()  # the origin is gone
    proxy.running.services.state.mode = Mode.OFFLINE
    # the same steps on an account where Chromium has run: they keep the database it has
    # (creating it again would ask for its password) and the CA stays trusted
    await run_readme_steps(steps, env, workdir)
    offline = await browse("profile-offline")  # a fresh profile: nothing in its own cache
    assert expected in offline, offline
    assert offline == online
    # everything the page needs came from the cache: nothing of the site was queued but the
    # browser's own favicon probe (Chromium's update pings to Google may be queued too)
    queued = [json.loads(p.read_text())["url"] for p in proxy.outgoing()]
    site = [u for u in queued if u.startswith(f"https://localhost:{port}/")]
    assert site in ([], [f"https://localhost:{port}/favicon.ico"]), queued
