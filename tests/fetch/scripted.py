"""A site whose requisites only scripts can find, for the render tests; and a person's browse of
it in headless Chromium through a proxy (Playwright, with the system's Chromium).

What the pages need, none of it written in their markup:

* a loader that composes a bundle's URL with a version hash (``/static/app.<hash>.js?version=``);
* an image list filled by ``fetch()`` of a JSON API;
* lazy images loaded by an IntersectionObserver when scrolled into view;
* a web font from a stylesheet the loader injects;
* a module store in localStorage, as MediaWiki's: a browser that has shown another page of the
  site asks for fewer modules, in another URL;
* a hyperlink written by the bundle (``/scripted-link.html``), found only in the rendered DOM.

And three pages that misbehave: ``/forever.html`` fetches on a timer forever, ``/crash.html``
allocates until its tab's JavaScript heap is spent, ``/hang.html`` loops forever.  The site
runs in a thread, so the CLI (which runs its own event loop) can be pointed at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trustme
from aiohttp import web

HASH = "".join(format(n * 7, "x") for n in (3, 1, 4))  # what the loader composes: "1571c"
FONT_DIRS = (Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts"))


def png(rgb: tuple[int, int, int], size: int = 48) -> bytes:
    """A ``size``-pixel square PNG of one colour."""
    row = b"\x00" + bytes(rgb) * size
    raw = row * size

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def font_file() -> bytes:
    """A TrueType font of the system's (Debian's fonts-dejavu-core, which .ci/run installs)."""
    for folder in FONT_DIRS:
        for path in sorted(folder.rglob("*.ttf")) if folder.is_dir() else []:
            return path.read_bytes()
    pytest.fail("a .ttf font is needed for the web-font page: apt-get install fonts-dejavu-core")


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<script src="/static/loader.js"></script></head>
<body style="margin:0">
<h1>{title}</h1>
<div id="gallery" data-api="{api}"></div>
<div style="height:2400px">spacer</div>
<div id="lazy">
<img class="lazy" data-src="/img/lazy-{name}-1.png" width="48" height="48" alt="">
<img class="lazy" data-src="/img/lazy-{name}-2.png" width="48" height="48" alt="">
</div>
<p><a href="/second.html">second page</a></p>
</body></html>
"""

LOADER = """
(function () {
  var version = [3, 1, 4].map(function (n) { return (n * 7).toString(16); }).join("");
  var bundle = document.createElement("script");
  bundle.src = "/static/app." + version + ".js?version=" + version;
  document.head.appendChild(bundle);
  // a module store, as MediaWiki's ResourceLoader keeps one in localStorage: what a page
  // asks for depends on the pages this browser has shown before
  var wanted = ["core", location.pathname.replace(/[^a-z]/g, "") || "index"];
  var stored = JSON.parse(localStorage.getItem("modules") || "[]");
  var missing = wanted.filter(function (m) { return stored.indexOf(m) < 0; });
  if (missing.length) {
    var modules = document.createElement("script");
    modules.src = "/static/modules.js?modules=" + missing.join("|") + "&version=" + version;
    document.head.appendChild(modules);
    localStorage.setItem("modules", JSON.stringify(stored.concat(missing)));
  }
  var fonts = document.createElement("link");
  fonts.rel = "stylesheet";
  fonts.href = "/static/fonts.css?v=" + version;
  document.head.appendChild(fonts);
})();
"""

BUNDLE = """
// an async script: it may run before the parser has reached the body (served from a cache,
// it often does), so it starts once the document is there
function start() {
  var gallery = document.getElementById("gallery");
  fetch(gallery.dataset.api).then(function (r) { return r.json(); }).then(function (list) {
    list.forEach(function (src) {
      var img = document.createElement("img");
      img.src = src; img.width = 48; img.height = 48; img.alt = "";
      gallery.appendChild(img);
    });
    var link = document.createElement("a");
    link.href = "/scripted-link.html"; link.textContent = "written by a script";
    gallery.appendChild(link);
  });
  var seen = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) {
        entry.target.src = entry.target.dataset.src;
        seen.unobserve(entry.target);
      }
    });
  });
  document.querySelectorAll("img.lazy").forEach(function (img) { seen.observe(img); });
  window.lazyWatched = true;
}
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
"""

FONTS_CSS = """@font-face { font-family: "Galaxy"; src: url("/fonts/galaxy.ttf"); }
body, h1 { font-family: "Galaxy", monospace; }
"""

FOREVER = """<!doctype html><html><head><meta charset="utf-8"><title>forever</title></head>
<body><p>ticking</p><a href="/second.html">second</a>
<script>var n = 0; setInterval(function () { fetch("/api/tick?n=" + (n++)); }, 100);</script>
</body></html>"""

CRASH = """<!doctype html><html><head><meta charset="utf-8"><title>crash</title></head>
<body><p>crashing</p><script>
var hoard = []; for (;;) { hoard.push(new Array(100000).fill(Math.random())); }
</script></body></html>"""

HANG = """<!doctype html><html><head><meta charset="utf-8"><title>hang</title></head>
<body><p>busy</p><script>for (;;) {}</script></body></html>"""

COLOURS = {
    "a": (200, 30, 30),
    "b": (30, 160, 30),
    "c": (30, 30, 200),
    "d": (200, 160, 0),
    "lazy-index-1": (120, 0, 120),
    "lazy-index-2": (0, 120, 120),
    "lazy-second-1": (90, 90, 90),
    "lazy-second-2": (250, 120, 60),
    "lazy-linked-1": (10, 200, 200),
    "lazy-linked-2": (200, 10, 200),
}


def pages() -> dict[str, tuple[str, bytes]]:
    """Path (with query) -> (content type, body)."""
    html = "text/html; charset=utf-8"
    out: dict[str, tuple[str, bytes]] = {
        "/": (html, PAGE.format(title="Galaxies", api="/api/images.json", name="index").encode()),
        "/second.html": (
            html,
            PAGE.format(title="Nebulae", api="/api/images.json?page=2", name="second").encode(),
        ),
        "/scripted-link.html": (
            html,
            PAGE.format(title="Clusters", api="/api/images.json?page=3", name="linked").encode(),
        ),
        "/static/loader.js": ("text/javascript", LOADER.encode()),
        f"/static/app.{HASH}.js?version={HASH}": ("text/javascript", BUNDLE.encode()),
        f"/static/fonts.css?v={HASH}": ("text/css", FONTS_CSS.encode()),
        "/api/images.json": ("application/json", b'["/img/a.png", "/img/b.png"]'),
        "/api/images.json?page=2": ("application/json", b'["/img/c.png"]'),
        "/api/images.json?page=3": ("application/json", b'["/img/d.png"]'),
        "/fonts/galaxy.ttf": ("font/ttf", font_file()),
        "/forever.html": (html, FOREVER.encode()),
        "/crash.html": (html, CRASH.encode()),
        "/hang.html": (html, HANG.encode()),
    }
    for name, rgb in COLOURS.items():
        out[f"/img/{name}.png"] = ("image/png", png(rgb))
    return out


@dataclass
class ScriptedSite:
    port: int
    #: over TLS: the PEM file of the CA that issued its certificate (None: plain HTTP)
    ca_pem: Path | None = None
    hits: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        scheme = "https" if self.ca_pem else "http"
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def take_hits(self) -> list[str]:
        with self.lock:
            hits, self.hits[:] = list(self.hits), []
        return hits


@contextlib.contextmanager
def serve_scripted_site(ca_dir: Path | None = None) -> Iterator[ScriptedSite]:
    """The site on 127.0.0.1, served from a thread of its own; with ``ca_dir``, over TLS
    (a certificate for 127.0.0.1 from a new CA, whose PEM file is written there)."""
    content = pages()
    tls: ssl.SSLContext | None = None
    ca_pem: Path | None = None
    if ca_dir is not None:
        ca = trustme.CA()
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(tls)
        ca_pem = ca_dir / "origin-ca.pem"
        ca.cert_pem.write_to_path(str(ca_pem))
    ready = threading.Event()
    holder: list[ScriptedSite] = []
    loop = asyncio.new_event_loop()
    stop: asyncio.Event | None = None

    async def handler(request: web.Request) -> web.StreamResponse:
        this = holder[0]
        with this.lock:
            this.hits.append(request.path_qs)
        if request.path == "/api/tick":
            return web.json_response({"tick": request.query.get("n")})
        if request.path == "/static/modules.js":  # any set of modules
            modules = request.query.get("modules", "")
            return web.Response(text=f"/* {modules} */", content_type="text/javascript")
        found = content.get(request.path_qs)
        if found is None:
            return web.Response(status=404, text="no such page", content_type="text/plain")
        ctype, body = found
        headers = {"Content-Type": ctype}
        if ctype.startswith("text/html"):  # as MediaWiki's pages: ask every time
            headers["Cache-Control"] = "private, must-revalidate, max-age=0"
        return web.Response(body=body, headers=headers)

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        holder.append(ScriptedSite(port, ca_pem))
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10), "the scripted site did not start"
    try:
        yield holder[0]
    finally:
        assert stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


# --- a person's browse -------------------------------------------------------------------------


@dataclass
class Visit:
    """What one page showed: its DOM and screenshot after scrolling it through, and every
    response it got (URL -> status; a miss offline is a 503 or no answer at all)."""

    dom: str
    screenshot: bytes
    statuses: dict[str, int | None]


#: every image that has a source loaded, and the web fonts
ALL_LOADED = (
    "() => document.fonts.status === 'loaded' && "
    "[...document.images].every((img) => !img.getAttribute('src') || img.complete)"
)


#: the lazy images have their sources (if the bundle that watches them ran)
LAZY_SET = (
    "() => !window.lazyWatched || document.querySelectorAll('img.lazy:not([src])').length === 0"
)


def hermetic_args(proxy_port: int) -> list[str]:
    """Chromium through the proxy on ``proxy_port`` for every URL, loopback too, resolving no
    name itself, with none of its own traffic."""
    return [
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
        "--disable-dev-shm-usage",
    ]


async def browse(proxy_port: int, urls: list[str], executable: str) -> dict[str, Visit]:
    """Open each URL in a fresh headless Chromium (a browser context of its own) through the
    proxy, as a person would read it: loaded, scrolled to its end a screen at a time, back to
    the top once all is loaded; then its DOM and a screenshot of the whole page."""
    from playwright.async_api import async_playwright

    visits: dict[str, Visit] = {}
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(
            executable_path=executable, args=hermetic_args(proxy_port), chromium_sandbox=False
        )
        try:
            for url in urls:
                # a fresh browser for each page (HTTPS: the proxy's certificates, made by its
                # own CA)
                context = await browser.new_context(
                    viewport={"width": 800, "height": 600}, ignore_https_errors=True
                )
                page = await context.new_page()
                statuses: dict[str, int | None] = {}
                page.on("response", lambda r, s=statuses: s.__setitem__(r.url, r.status))
                page.on("requestfailed", lambda r, s=statuses: s.__setitem__(r.url, None))
                await page.goto(url, wait_until="networkidle", timeout=30_000)
                for _ in range(10):
                    # a screen down; two frames later what came into view has been seen
                    at_end = await page.evaluate(
                        "() => new Promise((done) => { window.scrollBy(0, window.innerHeight);"
                        " requestAnimationFrame(() => requestAnimationFrame(() => done("
                        "window.scrollY + window.innerHeight"
                        " >= document.documentElement.scrollHeight - 2))); })"
                    )
                    await page.wait_for_function(ALL_LOADED, timeout=30_000)
                    if at_end:  # the lazy images are at the end: all of them have a source
                        await page.wait_for_function(LAZY_SET, timeout=30_000)
                        await page.wait_for_function(ALL_LOADED, timeout=30_000)
                        break
                await page.evaluate("() => window.scrollTo(0, 0)")
                await page.wait_for_function(ALL_LOADED, timeout=30_000)
                shot = await page.screenshot(full_page=True)
                visits[url] = Visit(await page.content(), shot, statuses)
                await context.close()
        finally:
            await browser.close()
    return visits
