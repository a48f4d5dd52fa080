"""A page's search text (:func:`page_text`), made in a helper process (:class:`TextHelper`).

Extracting a page's visible text and counting its ranking terms is pure Python that holds the
GIL: about 4 ms of a 100 KB page, as much as the rest of recording and crawling it.  In the
process that records, it took turns with the crawler on one core; in a process of its own it
runs on another core beside it (``wwwproxy fetch`` of a 556-page site: most of the text's CPU
off the crawler's critical path).  The helper is a plain child process
(``python -m wwwproxy.archive.search.textproc``) that reads requests on its standard input and
answers on its standard output (``marshal``, length-prefixed; only built-in types cross), and
exits when its input ends: when the index stops it, and when the parent dies, even by
``kill -9``, since nothing else holds the pipe.  Whatever goes wrong with it (it cannot start,
it dies, it answers nonsense), the pages are made in this process instead: the same function,
the same text; only slower.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import BinaryIO

from .capture import READ_ERRORS, payload_document
from .schema import Text
from .text import extract_text

__all__ = ["HELPER_FAILURES", "PageError", "TextHelper", "page_text", "page_texts"]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("<Q")
#: failures after which the helper is not started again (the pages are made in-process)
HELPER_FAILURES = 3
_MAX_MESSAGE = 1 << 31  # bytes: more than any batch of pages (GIVEN_BUDGET)
_STOP_WAIT = 5.0  # seconds a stopped helper is given to exit before it is killed
#: the directory that holds the ``wwwproxy`` package, for the helper's import path
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])

_MODULE = "wwwproxy.archive.search.textproc"

Headers = Sequence[tuple[str, str]]


class PageError(ValueError):
    """A page whose text could not be made (bad Content-Encoding...): it is not indexed."""


def page_text(payload: bytes, headers: Headers) -> Text:
    """The text a recorded page is indexed with: its payload (as recorded, Content-Encoded)
    decoded, its title and visible text extracted, and its ranking terms (all empty if it has
    no text).  PageError if the payload cannot be decoded."""
    try:
        title, text = extract_text(*payload_document(payload, headers))
    except READ_ERRORS as exc:
        raise PageError(str(exc)) from exc
    return Text.of(title, text) if title or text else Text("", "", "")


def page_texts(pages: Iterable[tuple[bytes, Headers]]) -> list[Text | PageError]:
    """:func:`page_text` of each page, a failure in its place."""
    out: list[Text | PageError] = []
    for payload, headers in pages:
        try:
            out.append(page_text(payload, headers))
        except PageError as exc:
            out.append(exc)
    return out


# --- the wire: what crosses the pipe -----------------------------------------------------------


def _write(stream: BinaryIO, value: object) -> None:
    data = marshal.dumps(value)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _read(stream: BinaryIO) -> object:
    """One message; EOFError at the end of the stream (or in the middle of a message),
    ValueError if it is none of ours."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("the stream ended")
    (size,) = _LENGTH.unpack(head)
    if size > _MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes: not one of ours")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the stream ended in a message")
    try:
        return marshal.loads(data)
    except (ValueError, EOFError, TypeError) as exc:
        raise ValueError(f"an unreadable message: {exc}") from None


def _encode(results: list[Text | PageError]) -> list[object]:
    """Results as built-in types: a text as a tuple, a failure as its message."""
    return [tuple(r) if isinstance(r, Text) else str(r) for r in results]


def _decode(values: object, count: int) -> list[Text | PageError]:
    """The helper's answer back to results; ValueError if it is not one for ``count`` pages."""
    if not isinstance(values, list) or len(values) != count:
        raise ValueError("the helper's answer does not fit the request")
    out: list[Text | PageError] = []
    for value in values:
        if isinstance(value, str):
            out.append(PageError(value))
        elif (
            isinstance(value, tuple)
            and len(value) == 3
            and all(isinstance(part, str) for part in value)
        ):
            out.append(Text(*value))
        else:
            raise ValueError("the helper answered something that is no page text")
    return out


def serve(source: BinaryIO, sink: BinaryIO) -> int:
    """The helper's loop: a list of ``(payload, headers)`` in, their texts out, until the
    input ends.  The number of requests answered."""
    answered = 0
    while True:
        try:
            request = _read(source)
        except EOFError:
            return answered
        pages = [(bytes(payload), [tuple(h) for h in headers]) for payload, headers in request]  # type: ignore[union-attr]
        _write(sink, _encode(page_texts(pages)))  # type: ignore[arg-type]
        answered += 1


# --- the parent's side ------------------------------------------------------------------------


class TextHelper:
    """The helper process of one search index, started at its first request.  One caller at
    a time (a lock: the index's one indexing thread).  :meth:`texts` never fails for the
    helper's sake: without one, the pages are made in this process."""

    def __init__(self, argv: Sequence[str] | None = None) -> None:
        self._argv = list(argv) if argv is not None else [sys.executable, "-m", _MODULE]
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.failures = 0
        self.started = 0  # helper processes started (for the tests)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def texts(self, pages: Sequence[tuple[bytes, Headers]]) -> list[Text | PageError]:
        """:func:`page_text` of each page (a failure in its place), in the helper if it can."""
        if not pages:
            return []
        with self._lock:
            proc = self._running()
            if proc is not None:
                try:
                    assert proc.stdin is not None and proc.stdout is not None
                    request = [(bytes(p), [tuple(h) for h in hs]) for p, hs in pages]
                    _write(proc.stdin, request)  # type: ignore[arg-type]
                    return _decode(_read(proc.stdout), len(pages))  # type: ignore[arg-type]
                except (OSError, EOFError, ValueError) as exc:
                    self.failures += 1
                    log.warning("search: the text helper failed (%s); pages made here", exc)
                    self._stop(kill=True)
        return page_texts(pages)

    def _running(self) -> subprocess.Popen[bytes] | None:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:  # it died between requests
            self.failures += 1
            self._stop(kill=True)
        if self.failures >= HELPER_FAILURES:
            return None
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
            )
        except OSError as exc:
            self.failures = HELPER_FAILURES
            log.warning("search: no text helper (%s); pages made here", exc)
            return None
        self.started += 1
        return self._proc

    def stop(self) -> None:
        """End the helper (its input closed, then waited for: its CPU counts as this
        process's, and no zombie is left)."""
        with self._lock:
            self._stop(kill=False)

    def _stop(self, *, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            proc.wait(_STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    # Ctrl-C in the terminal reaches the whole process group: the parent decides when to stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.stdin.buffer, sys.stdout.buffer)
