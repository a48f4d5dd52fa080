"""``wwwproxy export --pywb DIR``: a pywb collection that pywb's ``wayback`` serves as it is.

``DIR/archive/*.warc.gz`` holds copies of the chosen records and ``DIR/indexes/index.cdxj``
their pywb CDXJ lines, sorted, so pywb finds every capture without re-indexing.  The
collection is made in a temporary folder beside DIR and renamed into place at the end: an
export that fails leaves nothing behind, and an existing DIR is never written into.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...fsutil import fsync_dir
from ..store import Store
from .collect import Copied, ExportError, Selection, copy_records, now_stamp

__all__ = ["PywbExport", "export_pywb"]


@dataclass(frozen=True)
class PywbExport:
    directory: Path
    copied: Copied


def export_pywb(store: Store, directory: Path, selection: Selection) -> PywbExport:
    """Write the pywb collection ``directory`` (which must not exist yet, or be empty)."""
    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ExportError(f"{directory}: exists and is not an empty folder; give a new one")
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        (work / "archive").mkdir()
        (work / "indexes").mkdir()
        stamp = now_stamp()

        def open_warc(n: int) -> tuple[str, BinaryIO]:
            name = f"wwwproxy-{stamp}-{n}.warc.gz"
            return name, open(work / "archive" / name, "xb")  # noqa: SIM115 (closed by copy)

        copied = copy_records(store, selection, open_warc)
        with open(work / "indexes" / "index.cdxj", "w", encoding="utf-8", newline="\n") as index:
            for line in copied.lines:
                index.write(line.text + "\n")
        for path in (*(work / "archive").iterdir(), work / "indexes" / "index.cdxj"):
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        if directory.exists():
            directory.rmdir()  # empty, checked above
        os.rename(work, directory)
        fsync_dir(directory.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
        raise
    return PywbExport(directory, copied)
