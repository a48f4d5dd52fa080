"""A note beside a sorted index file saying that every line of it was checked when it was written.

Every line an index lookup returns must be a valid record; checking a line costs more than all
the rest of a lookup (a regular expression of the whole JSON block). A file this package writes
(``write_index``, ``merge_files``, ``Index.compact`` and ``Index.rebuild``) holds only lines of
records that were checked as they were made, so the writer leaves ``.NAME.checked`` beside it
naming the file's device, inode, size, mtime and ctime as the rename left them. A reader that
finds the note matching the file it opened takes the lines as they are and builds each record's
JSON fields on first use; any later change to the file (an edit in place, ``touch``, ``chmod``, a
copy, a restore) changes its ctime or inode, so the note no longer matches and every line is
checked again as it is read. The one gap: an edit of the same size within the file system's
ctime tick of the note being written (a few milliseconds), by a process that is not this
package's writer.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["forget", "is_checked", "note_checked"]

_MAGIC = b"wwwproxy-cdxj-checked 1"


def _note_path(path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    return target.parent / f".{target.name}.checked"


def _fingerprint(st: os.stat_result) -> bytes:
    fields = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return _MAGIC + b" " + b" ".join(str(n).encode() for n in fields) + b"\n"


def forget(path: str | os.PathLike[str]) -> None:
    """Remove the note of ``path`` (before a file that was not checked replaces it)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_note_path(path))


def note_checked(path: str | os.PathLike[str], st: os.stat_result) -> None:
    """Say that the file at ``path``, as ``st`` (from its descriptor, after the rename)
    describes it, holds only checked lines. Not fsynced: a note lost in a crash only makes
    readers check the lines again."""
    note = _note_path(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{note.name}.", suffix=".tmp", dir=note.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_fingerprint(st))
        os.replace(tmp, note)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def is_checked(path: str | os.PathLike[str], st: os.stat_result) -> bool:
    """Whether the note beside ``path`` describes exactly the file ``st`` describes (the
    ``fstat`` of a descriptor open on it)."""
    try:
        with open(_note_path(path), "rb") as f:
            note = f.read(256)
    except OSError:  # none, or unreadable: check every line
        return False
    return note == _fingerprint(st)
