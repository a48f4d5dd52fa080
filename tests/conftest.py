"""Shared test settings: hypothesis profiles (``HYPOTHESIS_PROFILE=deep`` for a long run), and
the event loop: the one the commands run on (uvloop; :mod:`wwwproxy.cli.loop`), or asyncio's
own with ``WWWPROXY_TEST_LOOP=asyncio``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

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
