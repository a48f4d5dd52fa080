"""Shared test settings: hypothesis profiles (``HYPOTHESIS_PROFILE=deep`` for a long run), and
the event loop: the one the commands run on (uvloop; :mod:`wwwproxy.cli.loop`), or asyncio's
own with ``WWWPROXY_TEST_LOOP=asyncio``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

from wwwproxy.cli.loop import loop_factory

settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "deep",
    max_examples=20000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """pytest-asyncio's loops are made as ``wwwproxy serve`` makes its own."""
    factory = loop_factory()
    if factory is None or os.environ.get("WWWPROXY_TEST_LOOP") == "asyncio":
        return {"asyncio": asyncio.new_event_loop}
    return {"uvloop": factory}


@pytest.fixture(scope="session", autouse=True)
def _own_xdg_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tests read no configuration of the person running them and write no cache into
    their home: ``$XDG_CONFIG_HOME`` and ``$XDG_CACHE_HOME`` are empty directories of the run
    (the test tools' own venv cache is looked up before this, see tests/archive/transfer)."""
    saved = {name: os.environ.get(name) for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    for name in saved:
        os.environ[name] = str(tmp_path_factory.mktemp(name.lower()))
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
