"""File-system helpers shared by every writer of the cache, the config and the URL database.

One way to replace a file atomically (readers see the old file or the new one, never a part,
and a crash leaves no half-written file behind) and one way to make a rename durable.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir"]


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in ``directory`` durable (best effort: not every file
    system lets a directory be opened or synced)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, new_mode: int = 0o644) -> None:
    """Replace ``path`` with ``data``: a temporary file beside it, fsync, rename, fsync the
    directory.  An existing file keeps its permission bits; a new one gets ``new_mode``.
    Raises OSError, after removing the temporary file and leaving the original untouched."""
    target = Path(path)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = new_mode
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, target)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    fsync_dir(target.parent)
