"""What an export takes from the cache, and the one copy of it both exports share.

An export copies the chosen records' gzip members byte for byte out of the cache files into
a few large WARC files (each record is its own gzip member, so concatenated members are a
valid ``.warc.gz``): nothing is re-encoded, every digest stays true, and the new offsets come
from where each member lands.  Alongside it makes pywb's index lines and the list of pages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ...http.content import decode_content
from ..search.text import MAX_PAYLOAD, decode_text, extract_text
from ..store import Store
from ..warc import StoredRecord, WARCFormatError, open_payload, parse_warc_date, read_records
from .pywbcdx import PywbLine, pywb_line

__all__ = [
    "Copied",
    "ExportError",
    "Page",
    "Selection",
    "WARCOutput",
    "copy_records",
    "host_matches",
    "parse_since",
]

#: a new WARC file is begun once one reaches this size (the usual 1 GB of web archives)
WARC_FILE_BYTES = 1 << 30
_COPY = 1 << 20
_HTML = ("text/html", "application/xhtml+xml")
_SINCE = re.compile(r"[0-9]{4}(?:[0-9]{2}){0,5}")


class ExportError(Exception):
    """An export that cannot be made; the message says why (nothing was written)."""


def parse_since(text: str) -> datetime:
    """``--since``: an ISO date or date-time (UTC unless it says), or a 4- to 14-digit CDX
    timestamp (``2026``, ``20261124``, ``20261124021500``).  ValueError says what is wrong."""
    text = text.strip()
    if _SINCE.fullmatch(text) and len(text) % 2 == 0:
        padded = text + "0101000000"[len(text) - 4 :] if len(text) < 14 else text
        try:
            return datetime.strptime(padded, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
        except ValueError:
            raise ValueError(f"{text!r} is not a valid timestamp") from None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a date: give 2026-11-24, 2026-11-24T02:15, or 20261124021500"
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def host_matches(hostport: str, wanted: str) -> bool:
    """Whether the cache folder ``hostport`` is the ``--host`` asked for: the same host and
    port, or any port when ``wanted`` names none (case does not matter)."""
    hostport, wanted = hostport.lower(), wanted.lower().strip()
    if hostport == wanted:
        return True
    if ":" in wanted.rsplit("]", 1)[-1]:  # a port was named: only that one
        return False
    host = hostport[: hostport.find("]") + 1] if hostport.startswith("[") else hostport
    return host.split(":", 1)[0] == wanted if not host.startswith("[") else host == wanted


@dataclass(frozen=True)
class Selection:
    """Which captures go out: of these hosts (all when empty), recorded at or after ``since``."""

    hosts: tuple[str, ...] = ()
    since: datetime | None = None

    def wants_host(self, hostport: str) -> bool:
        return not self.hosts or any(host_matches(hostport, h) for h in self.hosts)

    def files(self, store: Store) -> Iterator[Path]:
        for path in store.warc_files():
            if self.wants_host(path.parent.name):
                yield path

    def records(self, records: list[StoredRecord]) -> list[StoredRecord]:
        """Of one cache file's records, those to export: every one recorded at or after
        ``since``, and the older responses the chosen revisits stand for (without them a
        replay of the revisit has no body)."""
        if self.since is None:
            return records
        since = self.since
        chosen = [r for r in records if parse_warc_date(r.date) >= since]
        wanted = {r.refers_to for r in chosen if r.rec_type == "revisit" and r.refers_to}
        ids = {r.record_id for r in chosen}
        return [r for r in records if r.record_id in ids or r.record_id in wanted]


@dataclass(frozen=True)
class Page:
    """One HTML page of an export (pages.jsonl): a 200 response to a GET."""

    url: str
    date: datetime
    title: str


class WARCOutput(Protocol):
    """A WARC file :func:`copy_records` appends records to, then closes."""

    def write(self, data: bytes, /) -> int: ...

    def close(self) -> None: ...


@dataclass
class Copied:
    """What :func:`copy_records` wrote."""

    warcs: list[Path] = field(default_factory=list)
    lines: list[PywbLine] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)
    records: int = 0
    problems: list[str] = field(default_factory=list)


def _title(record: StoredRecord) -> str:
    """The page's <title>, or "" when it has none or cannot be read."""
    try:
        with open_payload(record) as stream:
            raw = stream.read(MAX_PAYLOAD)
        data = decode_content(raw, record.http_header("Content-Encoding"), MAX_PAYLOAD)
    except (OSError, ValueError, WARCFormatError):
        return ""
    content_type = record.http_header("Content-Type")
    return extract_text(decode_text(data, content_type), "text/html")[0]


def _is_page(record: StoredRecord, method: str | None) -> bool:
    return (
        record.rec_type == "response"
        and record.status == 200
        and (method or "GET").upper() == "GET"
        and (record.mime_type or "") in _HTML
    )


def _methods(records: Iterable[StoredRecord]) -> dict[str, str]:
    """Record id of each response -> the method of the request recorded with it."""
    out: dict[str, str] = {}
    requests = [r for r in records if r.rec_type == "request"]
    for rec in records:
        if rec.rec_type in ("response", "revisit"):
            for req in requests:
                if req.record_id in rec.concurrent_to or rec.record_id in req.concurrent_to:
                    out[rec.record_id] = req.method or "GET"
    return out


def copy_records(
    store: Store,
    selection: Selection,
    open_warc: Callable[[int], tuple[str, WARCOutput]],
    *,
    file_bytes: int = WARC_FILE_BYTES,
) -> Copied:
    """Copy the selected records into WARC files that ``open_warc(n)`` opens (the n-th, from
    1: its name for the index and a binary file to append to; the caller closes it), and
    make their pywb index lines, sorted, and the pages.  Damaged records are left out and
    said in ``problems``."""
    out = Copied()
    name: str | None = None
    warc: WARCOutput | None = None
    written = 0
    try:
        for path in selection.files(store):
            found: list[WARCFormatError] = []
            try:
                records = selection.records(list(read_records(path, found)))
            except OSError as exc:
                out.problems.append(f"{path}: cannot read: {exc.strerror or exc}")
                continue
            out.problems.extend(str(p) for p in found)
            if not records:
                continue
            methods = _methods(records)
            with open(path, "rb") as source:
                for record in records:
                    if warc is None or written >= file_bytes:
                        if warc is not None:
                            warc.close()
                        name, warc = open_warc(len(out.warcs) + 1)
                        out.warcs.append(Path(name))
                        written = 0
                    assert name is not None
                    source.seek(record.offset)
                    left = record.length
                    while left:
                        chunk = source.read(min(left, _COPY))
                        if not chunk:
                            raise OSError(f"{path}: ended inside the record at {record.offset}")
                        warc.write(chunk)
                        left -= len(chunk)
                    offset, written = written, written + record.length
                    out.records += 1
                    if record.rec_type not in ("response", "revisit"):
                        continue
                    method = methods.get(record.record_id)
                    try:
                        out.lines.append(
                            pywb_line(
                                record,
                                filename=Path(name).name,
                                offset=offset,
                                length=record.length,
                                method=method,
                            )
                        )
                    except ValueError as exc:
                        out.problems.append(f"{path}: at offset {record.offset}: {exc}")
                    if _is_page(record, method):
                        out.pages.append(
                            Page(
                                record.target_uri or "",
                                parse_warc_date(record.date),
                                _title(record),
                            )
                        )
    finally:
        if warc is not None:
            warc.close()
    out.lines.sort()
    out.pages.sort(key=lambda p: (p.date, p.url))
    return out


def now_stamp() -> str:
    """``20261124021500``: the time in export file names."""
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S")
