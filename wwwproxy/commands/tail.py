"""Following the CDXJ index journal: the lines appended since the last look.

What :mod:`.following` keeps (the captures :mod:`.recent` shows) is brought up to date from
these lines instead of reading the index again.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MAX_TAIL", "JournalTail"]

MAX_TAIL = 64 * 1024 * 1024  # more new journal than this: start again rather than parse it


class JournalTail:
    """The lines appended to ``journal.cdxj`` since the last look.

    The journal only grows until a compaction renames it away, merges it into a new
    ``index.cdxj`` and deletes it; the descriptor held here still reads the renamed file, so its
    last lines are not missed, and ``sealed`` counts the bytes of record lines of the journals
    left behind so (what a compaction adds to the index).  If the file was cut below what was
    read, or too much came at once, ``read`` answers ``None``: what was derived from it must be
    made again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None
        self.pos = 0
        self.started = False
        self.sealed = 0

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.ident = None

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        st = os.fstat(fd)
        self.fd, self.ident, self.pos = fd, (st.st_dev, st.st_ino), 0
        return True

    def _drain(self) -> list[bytes] | None:
        """Whole lines of the held file past ``pos``; None if it shrank below it."""
        assert self.fd is not None
        size = os.fstat(self.fd).st_size
        if size < self.pos or size - self.pos > MAX_TAIL:
            return None
        if size == self.pos:
            return []
        data = os.pread(self.fd, size - self.pos, self.pos)
        end = data.rfind(b"\n") + 1  # a line being written (or torn) waits for its newline
        self.pos += end
        return [line for line in data[:end].split(b"\n") if line and not line.startswith(b"!")]

    def _record_bytes(self) -> int:
        """Bytes of the held file's whole record lines (all but its ``!`` header lines)."""
        assert self.fd is not None
        head = os.pread(self.fd, 4096, 0)
        start = 0
        while head.startswith(b"!", start) and (newline := head.find(b"\n", start)) >= 0:
            start = newline + 1
        return max(0, self.pos - start)

    def _start(self) -> None:
        """Follow from the journal's end (its last whole line) on."""
        self.close()
        self.started = True
        self.sealed = 0
        if self._open():
            assert self.fd is not None
            end = os.fstat(self.fd).st_size
            while end > 0:  # back to the end of the last whole line
                start = max(0, end - 65536)
                newline = os.pread(self.fd, end - start, start).rfind(b"\n")
                if newline >= 0:
                    self.pos = start + newline + 1
                    break
                end = start

    def read(self) -> list[bytes] | None:
        if not self.started:  # nothing is derived from it yet
            self._start()
            return []
        lines: list[bytes] = []
        if self.fd is not None:
            got = self._drain()
            if got is None:
                self._start()
                return None
            lines += got
        try:
            st = os.stat(self.path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            now = None
        if now != self.ident:  # renamed away by a compaction: on to the new journal
            if self.fd is not None:
                self.sealed += self._record_bytes()
            self.close()
            if now is not None and self._open():
                got = self._drain()
                if got is None:
                    self._start()
                    return None
                lines += got
        return lines
