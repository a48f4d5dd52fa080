"""What streaming a cached body from disk to a coroutine costs, per way of reading it (not run
in CI).

A body over :data:`~wwwproxy.archive.memory.MAX_OBJECT` is sent to the browser 64 KiB at a
time, each read (a read of the WARC file and an inflate of its gzip member) in a worker thread.
This records one such body (``--mib``, incompressible like most large downloads) and reads it
back, on the loop the proxy serves on (uvloop when installed) with the proxy's worker pool as
the default executor, ``--streams`` at a time, each way in turn, ``--rounds`` times; then the
same from memory (an ``io.BufferedReader`` over the bytes: no file, no inflate), which leaves
the cost of the thread hops alone:

- ``to_thread``: ``await asyncio.to_thread(stream.read, CHUNK)`` per chunk;
- ``aiofiles``: :func:`wwwproxy.fsutil.read_chunks` (``aiofiles``' wrapper of the open stream).

It prints wall time and CPU per MiB for each round.

    .venv/bin/python bench/stream_bench.py [--mib 8] [--streams 1 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from wwwproxy.archive.store import Store
from wwwproxy.cli.loop import run
from wwwproxy.fsutil import read_chunks
from wwwproxy.proxy.server import CHUNK
from wwwproxy.url import canonicalize

IO_THREADS = 32  # as app.py sizes the default executor


async def by_to_thread(stream: BinaryIO) -> int:
    total = 0
    while chunk := await asyncio.to_thread(stream.read, CHUNK):
        total += len(chunk)
    return total


async def by_aiofiles(stream: BinaryIO) -> int:
    total = 0
    async for chunk in read_chunks(stream, CHUNK):
        total += len(chunk)
    return total


WAYS: dict[str, Callable[[BinaryIO], Awaitable[int]]] = {
    "to_thread": by_to_thread,
    "aiofiles": by_aiofiles,
}


async def main(args: argparse.Namespace) -> None:
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(IO_THREADS))
    root = tempfile.mkdtemp(prefix="stream-bench-")
    try:
        store = Store(root)
        url = canonicalize("http://bench.example/large.bin")
        body = os.urandom(args.mib << 20)
        rec = store.recorder(url, url.file, method="GET", request_headers=[], request_body=b"")
        rec.write(body)
        rec.finish(200, "OK", [("Content-Type", "application/octet-stream")])
        entry = store.lookup(url, url.file, "GET", b"", [])
        assert entry is not None and entry.body is None
        loop = type(asyncio.get_running_loop()).__module__
        print(f"{args.mib} MiB body, {CHUNK // 1024} KiB chunks, loop: {loop}")
        sources: dict[str, Callable[[], BinaryIO]] = {
            "disk": entry.open_body,
            "memory": lambda: io.BufferedReader(io.BytesIO(body)),  # type: ignore[arg-type]
        }
        for (source, open_body), streams in itertools.product(sources.items(), args.streams):
            for round_ in range(1, args.rounds + 1):
                for name, way in WAYS.items():
                    opened = [open_body() for _ in range(streams)]
                    wall, cpu = time.perf_counter(), time.process_time()
                    sizes = await asyncio.gather(*(way(s) for s in opened))
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    for s in opened:
                        s.close()
                    assert sizes == [len(body)] * streams
                    mib = args.mib * streams
                    print(
                        f"  {source:6s} {streams:2d} streams {round_}/{args.rounds} {name:9s} "
                        f"{wall / mib * 1e3:6.2f} ms/MiB wall {cpu / mib * 1e3:6.2f} ms/MiB cpu"
                    )
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=8)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5)
    run(main(parser.parse_args()))
