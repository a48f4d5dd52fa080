"""glibc's allocator tuning: threads share two arenas, and freed memory goes back to the
system.  Each case runs in a child process (the tuning is for the whole process)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the tuning is glibc's (elsewhere a no-op)"
)

#: eight threads allocate at once (each would get an arena of its own); then the heaps glibc
#: made for thread arenas are counted: each is mapped at a multiple of 64 MiB
THREADS = textwrap.dedent(
    """
    import sys, threading
    from wwwproxy.allocator import limit_arenas
    if sys.argv[1] == "limit":
        assert limit_arenas()
    barrier = threading.Barrier(8)
    kept = []
    def work():
        barrier.wait()
        kept.append([bytes(20_000 + i) for i in range(50)])
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    heaps = 0
    for line in open("/proc/self/maps"):
        fields = line.split()
        if len(fields) == 5 and int(fields[0].split("-")[0], 16) % (64 << 20) == 0:
            heaps += 1
    print(heaps)
    """
)


#: glibc's malloc statistics in a child (``libc.mallinfo2().hblks``: blocks in mappings of
#: their own)
MALLINFO = textwrap.dedent(
    """
    import ctypes
    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info
    """
)


def run(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    return out.stdout.strip()


def test_threads_share_two_arenas():
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    unlimited = int(run(THREADS, "free", env=env))
    limited = int(run(THREADS, "limit", env=env))
    assert limited <= 1 < unlimited  # the main arena is the brk heap: one thread heap at most


def test_the_environment_decides_when_it_says():
    env = {**os.environ, "MALLOC_ARENA_MAX": "4"}
    code = "from wwwproxy.allocator import limit_arenas; print(limit_arenas())"
    assert run(code, env=env) == "False"


def test_freed_memory_goes_back():
    code = textwrap.dedent(
        """
        from wwwproxy.allocator import give_back
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        blocks = [bytes(3000 + i % 100) for i in range(40_000)]  # ~120 MB in the heap
        keep = blocks[-1]
        del blocks
        before = rss()
        returned = give_back()
        print(returned, before - rss())
        """
    )
    returned, freed_kb = run(code).split()
    assert returned == "True" and int(freed_kb) > 50_000


def test_big_blocks_keep_their_own_mappings():
    """After a 4 MiB block is freed, glibc alone would carve the next 1 MiB block out of the
    heap (its threshold rose to 4 MiB); fixed, the block gets a mapping of its own again."""
    code = MALLINFO + textwrap.dedent(
        """
        import sys
        from wwwproxy.allocator import fix_mmap_threshold
        if sys.argv[1] == "fix":
            assert fix_mmap_threshold()
        big = bytearray(4 << 20)
        del big
        before = libc.mallinfo2().hblks
        block = bytearray(1 << 20)
        print(libc.mallinfo2().hblks - before)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    assert run(code, "free", env=env) == "0"  # the default: the block went into the heap
    assert run(code, "fix", env=env) == "1"


def test_the_environment_decides_the_threshold_when_it_says():
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    code = "from wwwproxy.allocator import fix_mmap_threshold; print(fix_mmap_threshold())"
    assert run(code, env=env) == "False"
