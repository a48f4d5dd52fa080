"""Recording in a process of its own: :class:`RecordHelper` hands a recorded exchange to a
helper process (:mod:`.search.helper`) that appends it to its cache file, indexes it and
brings the catalog and the search index up to date, and answers with its index lines.

A cold miss costs the proxy's one thread with the GIL its HTTP work and, in the same
process, the recording: building and deflating the records, the cache file, the index line,
the catalog and the search index.  Apart, the recording runs on the other core; the proxy
waits for its answer (the records written, as the ``sync`` setting says) before the
browser's last byte, as when it records itself.

Only small bodies go across the pipe (:data:`SENT_MAX`, held in memory by the recorder
anyway); a larger one is recorded in the proxy's process, streamed from its spool file.  If
the helper cannot be used (it cannot start, dies, answers nonsense) the exchange is recorded
in the proxy's process: the same function, the same files.  A failure of the recording
itself (a full disk) comes back as the error it was, as if it had happened here.
"""

from __future__ import annotations

import errno
import logging
import signal
import sqlite3
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .cdxj import CDXJRecord
from .errors import StoreError
from .search.helper import Helper, serve
from .warc import HTTPRequest, HTTPResponse, WARCWriteError

if TYPE_CHECKING:
    from ..url import URL
    from .search import SearchIndex
    from .store import Store

__all__ = ["SENT_MAX", "Put", "RecordHelper"]

log = logging.getLogger(__name__)

_MODULE = "wwwproxy.archive.recordproc"
_NO_SEARCH = "--no-search"  # the helper keeps no search index (its services keep none)
#: bodies up to this many bytes are recorded by the helper (they are in memory already)
SENT_MAX = 1024 * 1024
#: bodies sent in one batch, at most (one body more than this is sent alone)
BATCH_BYTES = 4 * 1024 * 1024
#: the helper's threads that record the pages of a batch side by side ...
PUT_THREADS = 8
#: ... when their bodies come to this many bytes, or they are flushed (else one by one)
SIDE_BY_SIDE_BYTES = 256 * 1024
#: batches on their way to the helper at once: it reads the next while it records one
IN_FLIGHT = 2
#: seconds the helper's search index is given to catch up when a search waits for it
SEARCH_WAIT = 10.0
#: seconds a stopped helper is given to index what it recorded (as the proxy's own index
#: is given when it stops: :data:`wwwproxy.recording.wiring.SEARCH_FLUSH`)
STOP_WAIT = 120.0

#: one exchange as sent: (root, sync, canonical URL, key, method, request headers, request
#: body, target, request version, date, status, reason, response headers, version, body)
Put = tuple[Any, ...]
#: the errors a recording may raise, by name, to raise them again in the proxy
_ERRORS: dict[str, type[Exception]] = {
    "StoreError": StoreError,
    "WARCWriteError": WARCWriteError,
    "ValueError": ValueError,
}


def _plain(value: Any) -> Any:
    """``value`` as the built-in type :mod:`marshal` writes (it refuses subclasses: a header
    name of aiohttp's is a ``str`` subclass, a status may be an ``IntEnum``)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if value is None:
        return None
    return [tuple(_plain(part) for part in item) for item in value]  # headers


def _encode_put(
    store: Store,
    url: URL,
    key: str,
    request: HTTPRequest,
    response: HTTPResponse,
    date: datetime,
    body: bytes,
) -> Put:
    """An exchange as built-in types (what :mod:`marshal` carries)."""
    request_body = request.body if isinstance(request.body, bytes) else request.body.read()
    return tuple(
        _plain(field)
        for field in (
            str(store.root),
            store.sync_mode,
            url.canonical,
            key,
            request.method,
            request.headers,
            request_body,
            request.target,
            request.version,
            date.isoformat(),
            response.status,
            response.reason,
            response.headers,
            response.version,
            body,
        )
    )


# --- in the helper --------------------------------------------------------------------------

_stores: dict[str, tuple[Store, SearchIndex | None]] = {}


def _store(root: str) -> tuple[Store, SearchIndex | None]:
    """The helper's store of ``root``, with its search index following it (made once)."""
    kept = _stores.get(root)
    if kept is None:
        from .search import SearchIndex  # noqa: PLC0415 (the helper's alone)
        from .store import Store  # noqa: PLC0415

        store = Store(root)
        store.catalog.timed = False  # (applied after each batch: _answer)
        search: SearchIndex | None = None
        if _NO_SEARCH not in sys.argv[1:]:  # (else the parent marks its pages unindexed)
            try:
                search = SearchIndex(store.root)
            except (ValueError, sqlite3.Error) as exc:  # recording never depends on it
                log.warning("the search index is not kept up to date: %s", exc)
            else:
                search.attach(store)
        kept = _stores[root] = (store, search)
    return kept


_pool: ThreadPoolExecutor | None = None


def _workers() -> ThreadPoolExecutor:
    """The helper's threads that record a batch's pages side by side."""
    global _pool  # noqa: PLW0603 (one per helper process, made at its first batch)
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=PUT_THREADS, thread_name_prefix="record")
    return _pool


def _put(put: Put) -> object:
    """Record one exchange; its index lines, or the error it met (its name and words)."""
    from ..url import canonicalize  # noqa: PLC0415

    (root, sync, canonical, key, method, req_headers, req_body, target, req_version, date,
     status, reason, headers, version, body) = put  # fmt: skip
    store, _ = _store(root)
    try:
        store.set_sync(sync)
        lines = store.put_here(
            canonicalize(canonical),
            key,
            HTTPRequest(method, req_headers, req_body, target=target, version=req_version),
            HTTPResponse(status, reason, headers, body, version=version),
            date=datetime.fromisoformat(date),
        )
    except OSError as exc:
        return ("OSError", exc.errno or 0, exc.strerror or str(exc))
    except (StoreError, WARCWriteError, ValueError) as exc:
        return (type(exc).__name__, 0, str(exc))
    # with its store's flush rounds so far (for ``sync: group`` and ``flush``: tests, benches)
    return {
        "lines": [line.to_line() for line in lines],
        "flushes": getattr(store.sync, "flushes", 0),
    }


def _answer(request: object) -> object:
    """In the helper: each request's answer (a put's lines or error; a search wait's
    outcome)."""
    items: list[tuple[Any, ...]] = list(request)  # type: ignore[call-overload]
    out: list[object] = [None] * len(items)
    for root in {item[1][0] for item in items if item[0] == "put"}:
        _store(root)[0].catalog.changes_coming()  # (before the lines go in: see there)
    # the puts of a batch side by side, in threads, where that pays: large bodies (deflate
    # lets go of the GIL) or a flush to wait for (they share a flush round); those of one
    # page in their order.  Small ones with nothing to wait for: one after the other.
    pages: dict[tuple[str, str], list[int]] = {}
    body_bytes, flushing = 0, False
    for at, item in enumerate(items):
        if item[0] == "put":
            pages.setdefault((item[1][0], item[1][3]), []).append(at)
            body_bytes += len(item[1][-1])
            flushing = flushing or item[1][1] != "write"

    def put_page(ats: list[int]) -> None:
        for at in ats:
            try:
                out[at] = _put(items[at][1])
            except Exception as exc:  # noqa: BLE001 (an answer for it all the same)
                log.exception("recording helper: a put failed")
                out[at] = ("StoreError", 0, f"the recording helper failed: {exc!r}")

    if len(pages) > 1 and (flushing or body_bytes >= SIDE_BY_SIDE_BYTES):
        list(_workers().map(put_page, pages.values()))
    else:
        for ats in pages.values():
            put_page(ats)
    for at, item in enumerate(items):
        if item[0] == "search":
            _, search = _store(item[1])
            out[at] = search.flush(item[2]) if search is not None else True
        elif item[0] == "open":
            _store(item[1])
            out[at] = True
        elif item[0] != "put":
            out[at] = ("ValueError", 0, f"not a request: {item[0]!r}")
    for store, _ in _stores.values():  # the pages show the batch at once, as if made there
        try:
            store.catalog.flush()
        except (OSError, sqlite3.Error) as exc:  # (kept queued: applied on a later try)
            log.warning("%r: changes not applied yet: %s", store.catalog, exc)
    return out


# --- in the proxy ---------------------------------------------------------------------------


class _Waiting:
    """A request on its way to the helper, and its answer once there is one."""

    __slots__ = ("answer", "done", "request", "sent", "size")

    def __init__(self, request: tuple[Any, ...]) -> None:
        self.request = request
        self.size = len(request[1][-1]) if request[0] == "put" else 0  # its body's bytes
        self.answer: object = None
        self.done = False
        self.sent = False  # in a batch on its way


def _raise(error: tuple[Any, ...]) -> None:
    name, code, words = error
    if name == "OSError":
        raise OSError(code or errno.EIO, words)
    raise _ERRORS.get(name, StoreError)(words)


class RecordHelper:
    """The recording helper of one proxy process (thread-safe: one exchange at a time)."""

    def __init__(self, argv: Sequence[str] | None = None, *, search: bool = True) -> None:
        if argv is None:
            argv = [sys.executable, "-m", _MODULE] + ([] if search else [_NO_SEARCH])
        self._helper: Helper[tuple[Any, ...], object] = Helper(
            "recording",
            _MODULE,
            encode=list,
            decode=self._decode,
            local=self._local,
            argv=argv,
            stop_wait=STOP_WAIT,
        )
        #: requests waiting to go, each with its answer's place: whoever finds none on its
        #: way sends them all at once (the helper answers a batch with one catalog write)
        self._waiting: list[_Waiting] = []
        #: the flush rounds of the helper's store, as of its last answer (``sync: group``
        #: and ``flush`` flush in the helper)
        self.flushes = 0
        self._sending = 0  # batches on their way (up to IN_FLIGHT)
        self._turn = threading.Condition()

    def _call(self, request: tuple[Any, ...]) -> object:
        """The helper's answer to ``request``, sent with those that wait beside it."""
        mine = _Waiting(request)
        with self._turn:
            self._waiting.append(mine)
            while not mine.done:
                if self._sending >= IN_FLIGHT or mine.sent:
                    self._turn.wait()
                    continue
                self._sending += 1
                batch = self._next_batch()
                requests = [w.request for w in batch]
                answers: list[object] = [None] * len(batch)  # (None: done by each caller)
                try:
                    sent = self._helper.send(requests)  # under the lock: in the batches' order
                    self._turn.release()
                    try:
                        answers = self._helper.receive(sent, requests)
                    finally:
                        self._turn.acquire()
                finally:
                    for waiting, answer in zip(batch, answers, strict=True):
                        waiting.answer, waiting.done = answer, True
                    self._sending -= 1
                    self._turn.notify_all()
        return mine.answer

    def _next_batch(self) -> list[_Waiting]:
        """The requests that go next, in order: all that wait, up to :data:`BATCH_BYTES`
        of bodies (at least one), so a batch's message stays bounded."""
        size = 0
        for count, waiting in enumerate(self._waiting):
            size += waiting.size
            if count and size > BATCH_BYTES:
                break
        else:
            count = len(self._waiting)
        batch, self._waiting = self._waiting[:count], self._waiting[count:]
        for waiting in batch:
            waiting.sent = True
        return batch

    @staticmethod
    def _decode(values: object, requests: Sequence[tuple[Any, ...]]) -> list[object]:
        if not isinstance(values, list) or len(values) != len(requests):
            raise ValueError("the answer does not fit the request")
        return values

    @staticmethod
    def _local(requests: Sequence[tuple[Any, ...]]) -> list[object]:
        return [None for _ in requests]  # None: do it here

    @property
    def pid(self) -> int | None:
        return self._helper.pid

    @property
    def failures(self) -> int:
        """Times the helper could not be used (the exchange was recorded in the proxy)."""
        return self._helper.failures

    def put(
        self,
        store: Store,
        url: URL,
        key: str,
        request: HTTPRequest,
        response: HTTPResponse,
        date: datetime,
    ) -> list[CDXJRecord] | None:
        """The index lines of the exchange recorded into ``store`` by the helper; None if
        its body is too large or the helper cannot (the caller records it itself, the body
        where it was).  The recording's own failure is raised."""
        source = response.body
        if isinstance(source, bytes):
            if len(source) > SENT_MAX:
                return None
            body, start = source, None
        else:
            start = source.tell()
            body = source.read(SENT_MAX + 1)
            if len(body) > SENT_MAX:
                source.seek(start)
                return None
        put = _encode_put(store, url, key, request, response, date, body)
        answer = self._call(("put", put))
        if answer is None:
            if start is not None:
                source.seek(start)  # type: ignore[union-attr]
            return None
        if isinstance(answer, tuple):
            _raise(answer)
        if not isinstance(answer, dict):
            raise StoreError(f"the recording helper answered {type(answer).__name__}")
        self.flushes = answer["flushes"]
        return [CDXJRecord.parse_line(line) for line in answer["lines"]]

    def start(self, root: str) -> None:
        """Start the helper and open its store of ``root`` (the proxy's start, in a thread):
        the first page recorded does not wait for a process to start."""
        self._call(("open", root))

    def wait_search(self, root: str, timeout: float = SEARCH_WAIT) -> bool:
        """Wait (bounded) until the helper's search index has indexed what it recorded."""
        if self._helper.pid is None:
            return True
        answer = self._call(("search", root, timeout))
        return answer is None or bool(answer)

    def stop(self) -> None:
        self._helper.stop()


def _close_all() -> None:
    """In the helper, once its input ended: what its search indexes hold is indexed."""
    for _, search in _stores.values():
        if search is not None:
            search.close()


if __name__ == "__main__":
    # a service manager's SIGTERM to the whole group must not cut it short: it ends when the
    # proxy, stopping, closes its pipe (or dies), once what it recorded is indexed
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(_answer, sys.stdin.buffer, sys.stdout.buffer)
    _close_all()
