"""What a change to the store is and who hears of it: the listeners (:class:`StoreListener`,
:class:`PayloadListener`) that derived indexes implement, the payload a put hands them, and
what a delete or purge removed or rewrote (:class:`Deleted`, :class:`Moved`).  Apart from
:mod:`.store` because these are the contract between the store and what follows it, read by
the search index and the purge without the store's reading and writing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..url import URL
from .cdxj import CDXJRecord
from .warc import PendingRecord

__all__ = ["Deleted", "Moved", "PayloadListener", "RecordedPayload", "StoreListener"]


class StoreListener(Protocol):
    """Follows what a :class:`Store` records and removes: how derived indexes (full-text
    search) stay up to date.  Called in the thread that changed the store, after the change
    is on disk; an exception is logged and goes no further (the change is done)."""

    def on_put(self, url: URL, key: str, lines: list[CDXJRecord]) -> None:
        """One exchange was recorded for archive key ``key``: its index lines."""

    def on_delete(self, keys: list[str], files: list[str]) -> None:
        """Captures were removed: ``files``, the ``warcfile:`` names of the cache files that
        went (every capture of their key); ``keys``, the archive keys whose index lines went
        with them.  A file the index did not know is named in ``files`` only."""


class PayloadListener(StoreListener, Protocol):
    """A :class:`StoreListener` that also wants the payload a put recorded (the search index:
    reading each page back from its file cost as much as indexing it).  The store calls
    :meth:`on_put_payload` instead of ``on_put`` on a listener that has it."""

    def on_put_payload(
        self, url: URL, key: str, lines: list[CDXJRecord], payload: RecordedPayload | None
    ) -> None:
        """As ``on_put``; ``payload`` is the response's (None for a revisit)."""


class RecordedPayload:
    """The payload of a response just recorded, as :class:`PayloadListener` gets it: readable
    only while ``on_put_payload`` runs (the recorder's spool closes after it)."""

    def __init__(self, record: PendingRecord) -> None:
        self._record = record
        #: the HTTP headers as recorded (what a reader of the record gets)
        self.http_headers = record.info.http_headers
        self.length = record.info.payload_length

    def read(self) -> bytes:
        """The whole payload as recorded (still Content-Encoded), checked against its digest
        (WARCWriteError if the spool changed)."""
        data = self._record.read_payload()
        return data if data is not None else b""


@dataclass(frozen=True)
class Moved:
    """A cache file a purge rewrote: its index lines now (``lines``, in the journal) and the
    ``(offset, record id)`` places of its lines before that are no longer true (``stale``)."""

    name: str  # warcfile name
    key: str
    lines: tuple[CDXJRecord, ...]
    stale: frozenset[tuple[int, str]]


@dataclass(frozen=True)
class Deleted:
    """What a delete or purge removed."""

    files: tuple[str, ...] = ()  # warcfile names of the cache files removed
    keys: tuple[str, ...] = ()  # archive keys whose index lines were removed

    @property
    def pages(self) -> int:
        """Cache files removed: one per archive key (a page, an image ...)."""
        return len(self.files)
