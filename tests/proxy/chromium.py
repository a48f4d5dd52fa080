"""Headless Chromium for the browser tests: finding it, its flags, and running tools.

Chromium comes from the Debian package ``chromium`` (``.ci/run`` installs it).  Without it a
browser test fails, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
RUN_TIMEOUT = 60
#: headless, with the browser's own services (updates, time, hints ...) as a user has them
BACKGROUND_ON_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
#: headless, and none of the browser's own services on the network
HEADLESS_FLAGS = (
    *BACKGROUND_ON_FLAGS,
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-pings",
    "--disable-domain-reliability",
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter",
)


#: no name resolved by the browser but the test hosts' (the proxy, the origins: 127.0.0.1)
HERMETIC_RESOLVER = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def find_chromium() -> str:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        "headless Chromium is needed for the browser test and was not found "
        f"(looked for {', '.join(CHROMIUM_NAMES)}): install the Debian package "
        "'chromium' (apt-get install -y chromium), as .ci/run does"
    )


def tool(name: str, package: str) -> str:
    """The path of a program a browser test needs (it fails, saying so, without it)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is needed for a browser test: apt-get install {package}")
    return path


async def run(*args: str, env: dict[str, str] | None = None) -> str:
    """Run a program to its end (within RUN_TIMEOUT), which must succeed; its stdout."""
    proc = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"{args[0]} did not finish within {RUN_TIMEOUT}s")
    assert proc.returncode == 0, f"{args[0]} exited {proc.returncode}: {err.decode()[-2000:]}"
    return out.decode("utf-8", "replace")


def chromium_args(profile: Path, proxy_port: int, *, background: bool = False) -> list[str]:
    """Headless Chromium with a fresh ``profile``, sending every URL (loopback too) through the
    proxy on ``proxy_port``, resolving no name itself, and as few requests of its own as its
    flags allow (``background``: as many as a user's browser sends)."""
    return [
        find_chromium(),
        *(BACKGROUND_ON_FLAGS if background else HEADLESS_FLAGS),
        f"--user-data-dir={profile}",
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        "--proxy-bypass-list=<-loopback>",  # proxy loopback URLs too (they bypass by default)
        HERMETIC_RESOLVER,  # it resolves no name itself: every URL goes to the proxy
    ]


@contextlib.asynccontextmanager
async def hermetic_chromium(
    profile: Path, proxy_port: int, *extra: str, background: bool = False
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Headless Chromium on ``about:blank`` through the proxy (:func:`chromium_args`), with the
    ``extra`` flags, resolving no name itself and listening for DevTools
    (:func:`devtools_endpoint`); killed at the end."""
    args = [
        *chromium_args(profile, proxy_port, background=background),
        *extra,
        "--remote-debugging-port=0",
        "about:blank",
    ]
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def devtools_endpoint(
    profile: Path, process: asyncio.subprocess.Process, timeout: float
) -> tuple[str, str]:
    """The DevTools port and browser WebSocket path Chromium wrote into ``profile``."""
    port_file = profile / "DevToolsActivePort"
    async with asyncio.timeout(timeout):
        while not port_file.exists() or len(port_file.read_text().split()) < 2:
            if process.returncode is not None:
                pytest.fail(f"chromium exited {process.returncode}")
            await asyncio.sleep(0.1)
    port, path = port_file.read_text().split()[:2]
    return port, path
