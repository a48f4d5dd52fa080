"""A real browser over HTTPS: headless Chromium (Debian's ``chromium``) trusts the proxy's CA
through an NSS database under a temporary ``$HOME`` (``certutil`` from ``libnss3-tools``),
browses an HTTPS page with a style sheet, a script and an image online, then offline with the
origin stopped, and renders the same page.  ``.ci/run`` installs both packages."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import struct
import zlib
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from wwwproxy.http.policy import Mode

from .chromium import HEADLESS_FLAGS, run, tool

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
    certutil = tool("certutil", "libnss3-tools")
    runner, port, origin_ca = await start_origin()
    try:
        proxy = await make_proxy(
            https_intercept=("localhost",), upstream_ca=origin_ca, connect_ports=(port,)
        )
        ca = proxy.running.server.interceptor.ca
        home = tmp_path / "home"
        nssdb = home / ".pki" / "nssdb"
        nssdb.mkdir(parents=True)
        await run(certutil, "-d", f"sql:{nssdb}", "-N", "--empty-password")
        await run(
            certutil,
            "-d",
            f"sql:{nssdb}",
            "-A",
            "-t",
            "C,,",
            "-n",
            "wwwproxy",
            "-i",
            str(ca.cert_path),
        )
        env = {**os.environ, "HOME": str(home)}
        url = f"https://localhost:{port}/"

        async def browse(profile: str) -> str:
            return await run(
                chromium,
                *HEADLESS_FLAGS,
                f"--user-data-dir={tmp_path / profile}",
                f"--proxy-server=http://127.0.0.1:{proxy.port}",
                "--proxy-bypass-list=<-loopback>",
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
    offline = await browse("profile-offline")  # a fresh profile: nothing in its own cache
    assert expected in offline, offline
    assert offline == online
    # everything the page needs came from the cache: nothing of the site was queued but the
    # browser's own favicon probe (Chromium's update pings to Google may be queued too)
    queued = [json.loads(p.read_text())["url"] for p in proxy.outgoing()]
    site = [u for u in queued if u.startswith(f"https://localhost:{port}/")]
    assert site in ([], [f"https://localhost:{port}/favicon.ico"]), queued
