"""app.start: what a started proxy prepares before anyone asks."""

from __future__ import annotations

import asyncio
import dataclasses

from wwwproxy.app import config_read, start
from wwwproxy.commands.listing import _view
from wwwproxy.config import Config, load_config


async def test_the_host_summaries_are_counted_at_start(tmp_path):
    """The welcome page's per-host counts (a second at 100,000 pages) are made in a worker
    thread at start, not by the first person to open ``/``."""
    cache = tmp_path / "cache"
    for host, pages in (("a.example", 3), ("b.example:8080", 2)):
        folder = cache / "http" / host
        folder.mkdir(parents=True)
        for i in range(pages):
            (folder / f"{i:040x}.warc.gz").write_bytes(b"x" * (10 + i))
    config = dataclasses.replace(Config(), listen_port=0, cache=cache)
    running = await start(config)
    try:
        view = _view(running.services.store)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len(view.summaries) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.02)
        summaries = {host: (s.pages, s.size) for (_, host), s in view.summaries.items()}
        assert summaries == {"a.example": (3, 33), "b.example:8080": (2, 21)}
    finally:
        await running.stop()


def test_the_start_line_says_which_configuration_was_read(tmp_path):
    assert config_read(Config()) == (
        "no configuration file (conf/wwwproxy.yaml not found): the defaults"
    )
    path = tmp_path / "my.yaml"
    path.write_text("mode: offline\n")
    assert config_read(load_config(path)) == f"configuration {path}"
