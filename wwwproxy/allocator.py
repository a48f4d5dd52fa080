"""glibc's allocator, tuned for a proxy that runs for months: few arenas, free memory given
back to the system.

glibc gives each thread that allocates an arena of its own (up to eight per core).  The worker
threads that read copies from disk and record pages each take and free page-sized buffers in
theirs, and the free space left behind stays in the process: with many arenas the process's memory
creeps up over hours without any object being kept.  Two arenas (``M_ARENA_MAX``) and a
``malloc_trim`` every few seconds (a cheap call) keep it flat.  The threads mostly wait for
the GIL or for I/O, so fewer arenas cost no measurable contention.

glibc also raises its mmap threshold (from 128 KiB up to 32 MiB) each time a block that big is
freed; after that, big buffers (a body spooled in memory, a large read) are carved out of the
heap between small long-lived objects, and the holes they leave are what made the heap grow.
A fixed threshold (``M_MMAP_THRESHOLD``) keeps every block of 128 KiB or more in a mapping of
its own, given back to the system the moment it is freed.

Where the C library is not glibc (musl, macOS), these do nothing and say so.  A
``MALLOC_ARENA_MAX`` or ``MALLOC_MMAP_THRESHOLD_`` set in the environment is the person's
choice and is left alone.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

__all__ = [
    "ARENAS",
    "GIVE_BACK_EVERY",
    "MMAP_THRESHOLD",
    "fix_mmap_threshold",
    "give_back",
    "limit_arenas",
]

ARENAS = 2
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value, kept from moving
GIVE_BACK_EVERY = 10.0  # seconds between two trims in `wwwproxy serve`
_M_ARENA_MAX = -8  # mallopt's parameter numbers (glibc's malloc.h)
_M_MMAP_THRESHOLD = -3


def _libc_function(name: str) -> Any | None:
    try:
        libc = ctypes.CDLL(None)  # the symbols the process has: the C library's among them
    except OSError:
        return None
    return getattr(libc, name, None)


def _mallopt(param: int, value: int, environment: str) -> bool:
    """``mallopt(param, value)``, unless the person set ``environment`` (glibc reads it at
    start: theirs to decide); False where it cannot be done."""
    if environment in os.environ:
        return False
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(param, value))


def limit_arenas(count: int = ARENAS) -> bool:
    """At most ``count`` malloc arenas for the process (call it before threads start
    allocating); False where it cannot be done or the environment already decides."""
    return _mallopt(_M_ARENA_MAX, count, "MALLOC_ARENA_MAX")


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Blocks of ``size`` bytes or more always get a mapping of their own (glibc no longer
    raises the threshold as big blocks are freed); False where it cannot be done or the
    environment already decides."""
    return _mallopt(_M_MMAP_THRESHOLD, size, "MALLOC_MMAP_THRESHOLD_")


def give_back() -> bool:
    """Return the allocator's free memory to the system (``malloc_trim(0)``: the top of each
    heap and the free pages inside them); True if any was returned."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return False
    trim.argtypes = (ctypes.c_size_t,)
    return bool(trim(0))
