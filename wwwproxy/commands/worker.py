"""The threads command pages do their blocking work in: a few of their own.

A page that counts a big cache, searches, or waits for a lock another page holds must never take
the worker threads that recording and cache hits need (asyncio's default executor, sized for
them in ``app.py``): a burst of ``/`` requests on a busy cache once held all 32 of them behind
one folder count, and every disk hit and recording waited.  So pages queue here instead.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["PAGE_THREADS", "in_worker"]

#: threads for command pages (a person's browser asks a few at a time)
PAGE_THREADS = 4

_T = TypeVar("_T")
_executor: ThreadPoolExecutor | None = None


async def in_worker(fn: Callable[..., _T], /, *args: object, **kwargs: object) -> _T:
    """``fn(*args, **kwargs)`` in one of the command pages' threads."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(PAGE_THREADS, thread_name_prefix="wwwproxy-pages")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, functools.partial(fn, *args, **kwargs))
