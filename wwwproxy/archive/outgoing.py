"""The outgoing queue: requests asked for while offline, to fetch when next online.

``cache/outgoing/<hash>.json`` holds one request (its URL, archive key, method, headers, body,
the path and query as the browser sent them, and how many fetches of the queue failed to reach
its server), named by the same hash as the request's cache file, so asking twice queues once.
Files are written to a temporary name and renamed, so a crash never leaves half a request
queued.  A request whose server could not be reached ``queue_failures`` times leaves the queue
(:meth:`OutgoingQueue.failed`): a dead host or a stale one-off URL must not be tried for ever.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from ..fsutil import atomic_write
from ..url import url_hash

__all__ = ["OutgoingQueue", "QueuedRequest"]


@dataclass(frozen=True)
class QueuedRequest:
    url: str  # the file string (canonical URL with userinfo) to fetch
    key: str  # the archive key it will be stored under
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    queued: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    #: the path and query as the browser sent them (:func:`~wwwproxy.url.wire.wire_target`),
    #: sent as they are when the queue is fetched; None (a file queued without one): the
    #: canonical URL's
    target: str | None = None
    #: fetches of the queue that could not reach its server so far
    failures: int = 0

    @property
    def hash(self) -> str:
        return url_hash(self.key)

    def to_json(self) -> str:
        data: dict[str, object] = {
            "url": self.url,
            "key": self.key,
            "method": self.method,
            "headers": [list(h) for h in self.headers],
            "body": base64.b64encode(self.body).decode("ascii"),
            "queued": self.queued,
        }
        if self.target is not None:
            data["target"] = self.target
        if self.failures:
            data["failures"] = self.failures
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str, source: str) -> QueuedRequest:
        try:
            data = json.loads(text)
            target = data.get("target")
            if target is not None and not isinstance(target, str):
                raise ValueError(f"target is not a string: {target!r}")
            failures = data.get("failures", 0)
            if type(failures) is not int or failures < 0:
                raise ValueError(f"failures is not a count: {failures!r}")
            return cls(
                url=str(data["url"]),
                key=str(data["key"]),
                method=str(data.get("method", "GET")),
                headers=tuple((str(n), str(v)) for n, v in data.get("headers", [])),
                body=base64.b64decode(data.get("body", ""), validate=True),
                queued=str(data.get("queued", "")),
                target=target,
                failures=failures,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{source}: not a queued request: {exc}") from None


class OutgoingQueue:
    """The directory of queued requests."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, key: str) -> Path:
        return self.directory / f"{url_hash(key)}.json"

    def add(self, request: QueuedRequest) -> bool:
        """Queue ``request``; False if it was queued already (the first one is kept)."""
        path = self.path_for(request.key)
        if path.exists():
            return False
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write(path, request.to_json())
        return True

    def remove(self, key: str) -> bool:
        try:
            self.path_for(key).unlink()
        except FileNotFoundError:
            return False
        return True

    def failed(self, key: str, limit: int) -> int | None:
        """Count one more failure to reach the server of the request queued under ``key``;
        at ``limit`` failures (0: no limit) it leaves the queue.  The failures so far when it
        left, None while it stays (or when it is not queued, or its file is unreadable)."""
        path = self.path_for(key)
        try:
            request = QueuedRequest.from_json(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        failures = request.failures + 1
        if limit and failures >= limit:
            path.unlink(missing_ok=True)
            return failures
        atomic_write(path, replace(request, failures=failures).to_json())
        return None

    def __contains__(self, key: str) -> bool:
        return self.path_for(key).exists()

    def __len__(self) -> int:
        return sum(1 for _ in self._files())

    def _files(self) -> Iterator[Path]:
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob("*.json")):
            if not path.name.startswith(".tmp-"):
                yield path

    def entries(self) -> Iterator[tuple[Path, QueuedRequest | ValueError]]:
        """Every queued file with its request, or the error that makes it unreadable."""
        for path in self._files():
            try:
                yield path, QueuedRequest.from_json(path.read_text(encoding="utf-8"), str(path))
            except (OSError, UnicodeDecodeError) as exc:
                yield path, ValueError(f"{path}: cannot read: {exc}")
            except ValueError as exc:
                yield path, exc

    def requests(self) -> list[QueuedRequest]:
        """The readable queued requests, oldest first."""
        found = [r for _, r in self.entries() if isinstance(r, QueuedRequest)]
        return sorted(found, key=lambda r: r.queued)
