"""The threads command pages do their blocking work in: a few of their own.

A page that counts a big cache, searches, or waits for a lock another page holds must never take
the worker threads that recording and cache hits need (asyncio's default executor, sized for
them in ``app.py``): a burst of ``/`` requests on a busy cache once held all 32 of them behind
one folder count, and every disk hit and recording waited.  So pages queue here instead.

When the machine is overloaded, pages wait in that queue; a page whose browser has left by the
time its turn comes is not made (:class:`ClientGone`): aiohttp does not cancel a handler whose
client went away, and on a loaded machine pages nobody waits for any more once piled up into
minutes of backlog for the ones somebody does.  Only pages that change nothing are skipped so: a
form sent is carried out even if its sender did not wait for the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["PAGE_THREADS", "ClientGone", "in_worker", "page_executor", "skipped_if_gone"]

#: threads for command pages (a person's browser asks a few at a time)
PAGE_THREADS = 4

_T = TypeVar("_T")
_executor: ThreadPoolExecutor | None = None
#: the connection of the page being made, while its work may be skipped once it has closed
_client: ContextVar[asyncio.BaseTransport | None] = ContextVar("page_client", default=None)


class ClientGone(Exception):
    """The page's browser closed its connection before the page's work began."""


@contextlib.contextmanager
def skipped_if_gone(transport: asyncio.BaseTransport | None) -> Iterator[None]:
    """Within it, work :func:`in_worker` queues is dropped (``ClientGone``) if ``transport`` is
    closing when its turn comes."""
    token = _client.set(transport)
    try:
        yield
    finally:
        _client.reset(token)


def page_executor() -> ThreadPoolExecutor:
    """The command pages' threads (made on first use)."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(PAGE_THREADS, thread_name_prefix="wwwproxy-pages")
    return _executor


async def in_worker(fn: Callable[..., _T], /, *args: object, **kwargs: object) -> _T:
    """``fn(*args, **kwargs)`` in one of the command pages' threads; raises ClientGone instead
    when the page's client left while it waited (see :func:`skipped_if_gone`)."""
    executor = page_executor()
    loop = asyncio.get_running_loop()
    transport = _client.get()
    if transport is None:
        return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))

    def unless_gone() -> _T:
        if transport.is_closing():  # a flag read: the loop's thread is the only writer
            raise ClientGone
        return fn(*args, **kwargs)

    return await loop.run_in_executor(executor, unless_gone)
