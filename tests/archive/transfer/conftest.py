"""Transfer tests' fixtures: the real proxy and origin (``tests/proxy/conftest.py``), a
WWWOFFLE spool written file by file as WWWOFFLE lays it out, and the ``wacz`` package in a
virtual environment of its own (built once, kept between runs)."""

from __future__ import annotations

import base64
import fcntl
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ...proxy.conftest import Origin, Proxy, make_proxy, origin, proxy

__all__ = [
    "WACZ_PACKAGE",
    "Origin",
    "Proxy",
    "Spool",
    "make_proxy",
    "origin",
    "proxy",
    "wacz_venv",
]

#: the validator the acceptance names, pinned so a run today and a run next year agree
WACZ_PACKAGE = "wacz==0.6.0"
#: building the environment downloads ~90 MB (frictionless, pydantic ...): a minute here
WACZ_INSTALL_TIMEOUT = 600


def wwwoffle_hash(url: str) -> str:
    """A name as WWWOFFLE makes them: the URL's MD5 in base64, '/' as '-', no padding."""
    digest = base64.b64encode(hashlib.md5(url.encode()).digest()).decode()
    return digest.rstrip("=").replace("/", "-")


@dataclass
class Spool:
    """A WWWOFFLE spool being written: ``page`` adds a D/U pair, ``queued`` an O/U pair."""

    root: Path
    files: list[Path] = field(default_factory=list)

    def _folder(self, url: str) -> Path:
        proto, _, rest = url.partition("://")
        folder = self.root / proto / rest.split("/", 1)[0].split("?", 1)[0]
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def page(
        self,
        url: str,
        head: bytes,
        body: bytes = b"",
        *,
        when: datetime = datetime(2024, 3, 5, 6, 7, 8, tzinfo=UTC),
        with_u: bool = True,
        compress: bool = False,
    ) -> Path:
        """``D<hash>`` holding ``head`` (status line and headers, no blank line) and the
        body, dated ``when``; and ``U<hash>`` holding the URL unless ``with_u`` is False."""
        folder = self._folder(url)
        name = wwwoffle_hash(url)
        if compress:  # what WWWOFFLE's purge does to old pages
            head += b"\r\nContent-Encoding: x-gzip\r\nPragma: wwwoffle-compressed"
            body = gzip.compress(body)
        d = folder / ("D" + name)
        d.write_bytes(head + b"\r\n\r\n" + body)
        stamp = when.timestamp()
        os.utime(d, (stamp, stamp))
        if with_u:
            (folder / ("U" + name)).write_bytes(url.encode())
        self.files.append(d)
        return d

    def queued(self, url: str, request: bytes, *, with_u: bool = True) -> Path:
        folder = self.root / "outgoing"
        folder.mkdir(parents=True, exist_ok=True)
        name = wwwoffle_hash(url)
        o = folder / ("O" + name)
        o.write_bytes(request)
        if with_u:
            (folder / ("U" + name)).write_bytes(url.encode())
        return o


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    root = tmp_path / "spool"
    root.mkdir()
    return Spool(root)


#: the person's cache directory, read when the tests are collected (tests/conftest.py gives
#: each run an empty one after that): the wacz venv is kept there between runs
_CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@pytest.fixture(scope="session")
def wacz_venv(pytestconfig: pytest.Config) -> Path:
    """The Python of a virtual environment holding the ``wacz`` package: made under
    ``~/.cache/wwwproxy-tests/`` on the first run (pip, from the package registry; the run says
    so, as it takes a minute), reused after.  A failed install fails the test that asked,
    saying why (never a skip)."""
    home = _CACHE_HOME / "wwwproxy-tests" / ("venv-" + WACZ_PACKAGE.replace("==", "-"))
    home.parent.mkdir(parents=True, exist_ok=True)
    # the test workers (pytest-xdist) may all ask at once: one builds, the others wait for it
    with open(home.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _wacz_python(home, pytestconfig)


def _wacz_python(home: Path, pytestconfig: pytest.Config) -> Path:
    python = home / "bin" / "python"
    done = home / ".installed"
    if done.exists() and python.exists():
        return python
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"\ninstalling {WACZ_PACKAGE} into {home} with pip for the export tests "
            "(once; about a minute)"
        )
    steps = (
        [sys.executable, "-m", "venv", str(home)],
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", WACZ_PACKAGE],
    )
    for step in steps:
        try:
            result = subprocess.run(
                step, capture_output=True, text=True, timeout=WACZ_INSTALL_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"installing {WACZ_PACKAGE} into {home} took over {WACZ_INSTALL_TIMEOUT} s "
                "(is the package registry reachable?)"
            )
        if result.returncode != 0:
            pytest.fail(
                f"could not install {WACZ_PACKAGE} into {home} (the package registry "
                f"unreachable?): {' '.join(step)} exited {result.returncode}\n"
                f"{result.stderr[-3000:]}"
            )
    done.write_text(WACZ_PACKAGE + "\n")
    return python
