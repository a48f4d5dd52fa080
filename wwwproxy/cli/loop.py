"""The event loop the commands run on: uvloop's when it is installed, asyncio's otherwise.

uvloop (libuv, the loop uvicorn uses) halves the cost of a socket read and write against
asyncio's selector loop, which is most of what a cached answer costs; everything wwwproxy
does on a loop (TLS upgrades with ``start_tls``, ``set_protocol`` hand-offs, threads, signals)
works on both, and the tests run on both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "run"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default) when uvloop is not importable."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the fastest loop at hand."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
