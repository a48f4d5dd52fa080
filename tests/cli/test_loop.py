"""The event loop of the commands (uvloop), and the loop the tests run on (the same)."""

from __future__ import annotations

import asyncio
import os

import pytest

from wwwproxy.cli.loop import loop_factory, run


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_commands_run_on_uvloop():
    assert loop_factory() is not None  # a dependency: installed with wwwproxy
    assert run(_loop_module()).startswith("uvloop")


@pytest.mark.skipif(
    os.environ.get("WWWPROXY_TEST_LOOP") == "asyncio", reason="asyncio's loop asked for"
)
async def test_the_tests_run_on_the_loop_of_the_commands():
    assert (await _loop_module()).startswith("uvloop")
