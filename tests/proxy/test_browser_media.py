"""Media and PDF offline in a real browser: headless Chromium plays a WebM video (made here
by ``ffmpeg``, which ``.ci/run`` installs) and opens a PDF through the proxy online, then
offline with the origin stopped and a fresh profile: the video starts, a seek lands on a later
frame, and the PDF opens, all from the cache.  A media element asks ``Range: bytes=0-`` and
seeks by ranges, so this is the proxy answering ranges from its copies.

Hermetic: Chromium resolves no name (``--host-resolver-rules``), its background services are
off, and the proxy sends anything but the test's origin to a closed upstream proxy.  The
browser is driven over the DevTools protocol (a WebSocket, with aiohttp's client).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from wwwproxy.archive.memory import MAX_OBJECT

from .chromium import RUN_TIMEOUT, hermetic_chromium, run, tool
from .conftest import Proxy
from .devtools import DevTools, Params, devtools

#: seconds of the video, its frames a second, and where the test seeks to
SECONDS, RATE, SEEK_TO = 5, 25, 3.5
PAGE = b"""<!DOCTYPE html><html><head><title>Video</title></head><body>
<video id="clip" src="/clip.webm" muted playsinline preload="auto" width="320" height="240">
</video><canvas id="frame" width="32" height="24"></canvas></body></html>"""
#: run in the page: play, see time pass, seek, and tell what the frames were
PLAY_AND_SEEK = """(async () => {
  const video = document.getElementById('clip');
  const canvas = document.getElementById('frame');
  const frame = () => {
    const c = canvas.getContext('2d');
    c.drawImage(video, 0, 0, canvas.width, canvas.height);
    return Array.from(c.getImageData(0, 0, canvas.width, canvas.height).data).join(',');
  };
  const until = (test, ms) => new Promise((resolve, reject) => {
    const start = Date.now();
    const look = () => test() ? resolve() : Date.now() - start > ms
      ? reject(new Error('timed out: ' + test)) : setTimeout(look, 20);
    look();
  });
  try {
    await until(() => video.readyState >= 2, 20000);
    await video.play();
    await until(() => video.currentTime > 0.3, 20000);
    const played = video.currentTime;
    video.pause();
    const early = frame();
    const seeked = new Promise(resolve => video.addEventListener('seeked', resolve, {once: true}));
    video.currentTime = SEEK_TO;
    await seeked;
    await until(() => video.readyState >= 2, 20000);
    return {played, at: video.currentTime, duration: video.duration, moved: frame() !== early};
  } catch (e) {
    return {error: String(e), state: video.readyState, code: video.error && video.error.code};
  }
})()""".replace("SEEK_TO", str(SEEK_TO))


#: where Chromium's PDF viewer runs (its component extension)
PDF_VIEWER = "chrome-extension://mhjfbmdgcfjbbpaeojofohoefgiehjai/"


def pdf() -> bytes:
    """A one-page PDF saying hello, with its cross-reference table worked out here."""
    stream = b"BT /F1 24 Tf 72 720 Td (Hello from the cache) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


async def make_video(path: Path) -> None:
    """A WebM (VP8) of a test pattern that changes every frame (and noise), a key frame each
    second (so a seek lands on its own frame), at a rate that makes it larger than the memory cache
    holds: its ranges are read from the WARC file on disk."""
    await run(
        tool("ffmpeg", "ffmpeg"),
        "-loglevel",
        "error",
        "-f",
        "lavfi",
        "-i",
        f"testsrc=duration={SECONDS}:size=320x240:rate={RATE}",
        "-vf",
        "noise=alls=30:allf=t",  # hard to compress: the size the bit rate says
        "-c:v",
        "libvpx",
        "-b:v",
        "4M",
        "-minrate",
        "4M",
        "-maxrate",
        "4M",
        "-g",
        str(RATE),
        "-deadline",
        "realtime",
        "-cpu-used",
        "8",
        str(path),
    )


@contextlib.asynccontextmanager
async def origin_serving(files: Path) -> AsyncIterator[int]:
    """An origin serving ``files`` as aiohttp's static files do: ETag, Last-Modified and
    ranges (a 206 for a Range), as web servers do."""
    app = web.Application()
    app.router.add_static("/", files)
    runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def open_page(page: DevTools, url: str) -> Params:
    """Navigate to ``url`` and wait for its load; the main document's response."""
    page.forget_events()
    frame = (await page.navigate(url))["frameId"]
    response = await page.event(
        "Network.responseReceived",
        lambda p: p.get("frameId") == frame and p.get("type") == "Document",
    )
    return response["response"]


async def pdf_viewer(page: DevTools) -> bool:
    """Has Chromium's PDF viewer (its built-in extension) opened in the page?"""
    for _ in range(50):
        if any(t["url"].startswith(PDF_VIEWER) for t in await page.targets()):
            return True
        await asyncio.sleep(0.1)
    return False


@contextlib.asynccontextmanager
async def chromium(profile: Path, proxy: Proxy) -> AsyncIterator[DevTools]:
    """Headless Chromium through ``proxy`` that plays media without a gesture, its own cache
    off: every byte comes from the proxy."""
    autoplay = "--autoplay-policy=no-user-gesture-required"
    async with hermetic_chromium(profile, proxy.port, autoplay) as process:
        async with devtools(profile, process, RUN_TIMEOUT) as page:
            await page.send("Page.enable")
            await page.send("Network.enable")
            await page.send("Network.setCacheDisabled", cacheDisabled=True)
            yield page


async def test_a_cached_video_plays_and_seeks_and_a_pdf_opens_offline(make_proxy, tmp_path):
    files = tmp_path / "site"
    files.mkdir()
    (files / "video.html").write_bytes(PAGE)
    (files / "doc.pdf").write_bytes(pdf())
    await make_video(files / "clip.webm")
    assert (files / "clip.webm").stat().st_size > MAX_OBJECT  # on disk, not in memory
    proxy = await make_proxy(upstream_proxy="http://127.0.0.1:9", no_proxy=("127.0.0.1",))
    async with origin_serving(files) as port:
        base = f"http://127.0.0.1:{port}"
        async with chromium(tmp_path / "online", proxy) as browser:
            page = await open_page(browser, f"{base}/video.html")
            assert page["status"] == 200
            online = await browser.evaluate(PLAY_AND_SEEK)
            assert "error" not in online, online
            document = await open_page(browser, f"{base}/doc.pdf")
            assert (document["status"], document["mimeType"]) == (200, "application/pdf")
        for path in ("/video.html", "/clip.webm", "/doc.pdf"):
            await proxy.recorded(base + path)
    await proxy.control(mode="offline")  # and the origin is gone
    logged = len(proxy.access_lines())
    async with chromium(tmp_path / "offline", proxy) as browser:
        page = await open_page(browser, f"{base}/video.html")
        assert page["status"] == 200
        offline = await browser.evaluate(PLAY_AND_SEEK)
        assert "error" not in offline, offline
        assert offline["played"] > 0.3  # it started
        assert abs(offline["at"] - SEEK_TO) < 0.5, offline  # the seek landed
        assert offline["moved"], offline  # on another frame
        assert abs(offline["duration"] - SECONDS) < 0.5, offline
        document = await open_page(browser, f"{base}/doc.pdf")
        assert (document["status"], document["mimeType"]) == (200, "application/pdf")
        assert document["headers"].get("X-Cache") == "HIT"
        assert await pdf_viewer(browser), "the PDF viewer did not open"
    pdf_lines = [line for line in proxy.access_lines()[logged:] if f"{base}/doc.pdf" in line]
    assert pdf_lines and all(" 200 " in line and line.endswith(" HIT") for line in pdf_lines)
    # the video came from the cache by ranges (a media element asks bytes=0- first)
    video = [line for line in proxy.access_lines()[logged:] if f"{base}/clip.webm" in line]
    assert any('" 206 ' in line for line in video), video
    assert all(line.endswith(" HIT") for line in video), video
