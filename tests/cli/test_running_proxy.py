"""The commands and a running ``wwwproxy serve`` (a real process): ``fetch`` does not go to
the network behind an offline proxy's back, ``reload`` makes it re-read its configuration, and
``serve`` names what it uses, and on a busy port says what to change and makes nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wwwproxy.archive.outgoing import OutgoingQueue, QueuedRequest
from wwwproxy.archive.store import Store
from wwwproxy.cli import main
from wwwproxy.cli.control import ask_proxy
from wwwproxy.url import canonicalize

from .conftest import Site

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(tmp_path: Path) -> dict[str, str]:
    """This tree's wwwproxy, and XDG directories of the test's own."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
    }


class Served:
    """A ``wwwproxy serve`` process and its log."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str], port: int) -> None:
        self.log = cwd / "serve.log"
        self.port = port
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wwwproxy", "serve", *args],
            cwd=cwd,
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while "listening on" not in self.text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"wwwproxy serve did not start: {self.text()}")
            time.sleep(0.05)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for one in started:
        one.stop()


def test_fetch_does_not_go_online_behind_an_offline_proxy(
    tmp_path: Path,
    site: Site,
    served: list[Served],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    conf = tmp_path / "wwwproxy.yaml"
    cache = tmp_path / "cache"
    conf.write_text(f"listen: 127.0.0.1:{port}\ncache: {cache}\nmode: offline\n")
    served.append(Served(["-c", str(conf)], tmp_path, environment(tmp_path), port))
    page = site.url("/frame2.html")

    assert main(["fetch", "-c", str(conf), page]) == 2
    err = capsys.readouterr().err
    assert f"the proxy at 127.0.0.1:{port} (cache {cache}) is offline: nothing fetched" in err
    assert "--online" in err
    assert site.take_hits() == []

    # the same cache named another way (relative, from elsewhere) is the same cache
    monkeypatch.chdir(tmp_path)
    assert main(["fetch", "-c", str(conf), "--cache", "cache", page]) == 2
    assert site.take_hits() == []

    # another cache: the offline proxy is none of its business
    assert main(["fetch", "-c", str(conf), "--cache", str(tmp_path / "other"), page]) == 0
    assert site.take_hits() == ["/frame2.html"]

    # --online fetches anyway, into the proxy's cache
    assert main(["fetch", "-c", str(conf), "--online", "--force", page]) == 0
    assert site.take_hits() == ["/frame2.html"]

    # online, fetch just fetches
    assert main(["online", "-c", str(conf)]) == 0
    assert main(["fetch", "-c", str(conf), "--force", page]) == 0
    assert site.take_hits() == ["/frame2.html"]
    assert len(Store(cache).captures(canonicalize(page).file)) == 2


def test_the_queue_is_fetched_only_without_urls_or_with_queue(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    queued = canonicalize(site.url("/frame2.html")).file
    listed = site.url("/a.html")
    OutgoingQueue(cache / "outgoing").add(QueuedRequest(queued, queued))
    assert main(["fetch", "--cache", str(cache), listed]) == 0
    assert site.take_hits() == ["/a.html"]
    assert len(OutgoingQueue(cache / "outgoing")) == 1
    assert main(["fetch", "--cache", str(cache), "--queue", "--force", listed]) == 0
    assert sorted(site.take_hits()) == ["/a.html", "/frame2.html"]
    assert len(OutgoingQueue(cache / "outgoing")) == 0
    with pytest.raises(SystemExit):
        main(["fetch", "--queue", "--no-queue"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_reload_makes_the_running_proxy_read_its_configuration(
    tmp_path: Path, served: list[Served], capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    conf = tmp_path / "wwwproxy.yaml"
    conf.write_text(f"listen: 127.0.0.1:{port}\ncache: {tmp_path / 'cache'}\n")
    proxy = Served(["-c", str(conf)], tmp_path, environment(tmp_path), port)
    served.append(proxy)
    netloc = f"127.0.0.1:{port}"
    assert ask_proxy(netloc, None)["password"] is False

    conf.write_text(conf.read_text() + "password: sesame\n")
    assert main(["reload", "-c", str(conf)]) == 0
    assert f"Configuration reloaded from {conf}" in capsys.readouterr().out
    assert ask_proxy(netloc, "sesame")["password"] is True
    assert "configuration reloaded" in proxy.text()

    # a configuration that does not validate: said, and the old one stays
    conf.write_text(conf.read_text() + "no_such_key: 1\n")
    assert main(["reload", "-c", str(conf)]) == 2  # the command reads it too
    assert "unknown key 'no_such_key'" in capsys.readouterr().err
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert main(["reload", "-c", str(empty), "--proxy", netloc, "--password", "sesame"]) == 1
    err = capsys.readouterr().err
    assert "not reloaded, the old configuration stays" in err and "no_such_key" in err
    assert ask_proxy(netloc, "sesame")["password"] is True

    proxy.stop()
    assert main(["reload", "--proxy", netloc]) == 1
    assert f"no wwwproxy at {netloc}" in capsys.readouterr().err


def test_serve_outside_a_checkout_names_its_files_and_keeps_the_cache_in_xdg(
    tmp_path: Path, served: list[Served]
) -> None:
    port = free_port()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = environment(tmp_path)
    proxy = Served(["--listen", f"127.0.0.1:{port}"], elsewhere, env, port)
    served.append(proxy)
    line = proxy.text()
    xdg_cache = tmp_path / "xdg-cache" / "wwwproxy"
    assert f"cache directory {xdg_cache}," in line
    assert (
        f"no configuration file (neither {elsewhere}/conf/wwwproxy.yaml nor "
        f"{tmp_path}/xdg-config/wwwproxy/wwwproxy.yaml): the defaults" in line
    )
    assert "cache cache" not in line
    assert xdg_cache.is_dir()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["serve.log"]

    # the user's configuration is read, named with its absolute path
    proxy.stop()
    user = tmp_path / "xdg-config" / "wwwproxy" / "wwwproxy.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(f"listen: 127.0.0.1:{port}\n")
    proxy.log.unlink()
    served.append(Served([], elsewhere, env, port))
    assert f"configuration {user})" in served[-1].text()


def test_serve_on_a_busy_port_says_what_to_change_and_makes_nothing(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "wwwproxy", "serve", "--listen", f"127.0.0.1:{port}"],
            cwd=elsewhere,
            env=environment(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "--listen HOST:PORT" in done.stderr and "listen: in the configuration" in done.stderr
    assert list(elsewhere.iterdir()) == []
    assert not (tmp_path / "xdg-cache").exists()


def test_help_lists_the_daily_commands_first(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = [
        line.split()[0]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("    ") and line.split()
    ]
    assert listed[:7] == ["serve", "online", "offline", "autodial", "status", "reload", "fetch"]
