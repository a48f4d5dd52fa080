"""app.start: what a started proxy prepares before anyone asks."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from wwwproxy.app import AcceptErrors, config_read, start
from wwwproxy.config import Config, load_config


async def test_the_catalog_is_made_at_start(tmp_path):
    """A cache with an index and no catalog (an older version's) gets one at start, in a
    worker thread, not when the first person opens ``/``."""
    from datetime import UTC, datetime

    from wwwproxy.archive.store import Store

    from .commands.test_index import record

    cache = tmp_path / "cache"
    old = Store(cache)
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for url in ("http://a.example/1", "http://a.example/2", "http://b.example:8080/"):
        record(old, url, b"x", when)
    assert not old.catalog.exists()  # recording into a cache without one makes none
    config = dataclasses.replace(Config(), listen_port=0, cache=cache)
    running = await start(config)
    try:
        catalog = running.services.store.catalog
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not (catalog.exists() and catalog.ready()) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        assert catalog.totals()[:2] == (2, 3)
    finally:
        await running.stop()


def test_the_start_line_says_which_configuration_was_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_read(Config()) == (
        f"no configuration file (neither {tmp_path}/conf/wwwproxy.yaml nor "
        f"{tmp_path}/xdg/wwwproxy/wwwproxy.yaml): the defaults"
    )
    path = tmp_path / "my.yaml"
    path.write_text("mode: offline\n")
    assert config_read(load_config(path)) == f"configuration {path}"


def test_a_late_accept_retry_after_shutdown_is_no_error(caplog):
    """asyncio retries accepting a second after running out of descriptors; when the proxy
    shut down meanwhile, that retry finds the listening socket closed.  No traceback for
    that (the fd-limit test met it once under load); any other error still reaches the
    loop's previous handler."""
    loop = asyncio.new_event_loop()
    try:

        def _start_serving() -> None:  # named as asyncio's accept retry is
            pass

        retry = loop.call_later(100, _start_serving)
        other = loop.call_later(100, print)
        errors = AcceptErrors(loop)
        with caplog.at_level(logging.DEBUG):
            bad_fd = ValueError("Invalid file descriptor: -1")
            errors(loop, {"message": "Exception in callback", "exception": bad_fd, "handle": retry})
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
            errors(loop, {"message": "Exception in callback", "exception": bad_fd, "handle": other})
            assert [r for r in caplog.records if r.levelno >= logging.ERROR]
        retry.cancel()
        other.cancel()
    finally:
        loop.close()
