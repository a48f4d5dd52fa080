"""``wwwproxy export --wacz FILE``: a WACZ (Web Archive Collection Zipped, 1.1.1) that
ReplayWeb.page opens and ``wacz validate`` accepts.

The ZIP holds ``archive/*.warc.gz`` (copies of the chosen records, stored uncompressed in the
ZIP: they are gzip already, and replay reads them by offset), ``indexes/index.cdx`` (pywb
CDXJ lines, sorted), ``pages/pages.jsonl`` (one entry per HTML page answered 200: what a
replay tool lists) and ``datapackage.json``, which names every file with its size and SHA-256,
with ``datapackage-digest.json`` holding the digest of that.  The file is written beside FILE
under a temporary name and renamed at the end; an existing FILE is never replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import uuid
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from ... import __version__
from ...fsutil import fsync_dir
from ..store import Store
from .collect import Copied, ExportError, Page, Selection, copy_records, now_stamp

__all__ = ["WACZ_VERSION", "WaczExport", "datapackage", "export_wacz", "pages_jsonl"]

WACZ_VERSION = "1.1.1"


@dataclass(frozen=True)
class Resource:
    """One file of the package as datapackage.json lists it."""

    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.path.rsplit("/", 1)[-1].lower(),
            "path": self.path,
            "hash": "sha256:" + self.sha256,
            "bytes": self.size,
        }


def pages_jsonl(pages: list[Page]) -> bytes:
    """pages/pages.jsonl: a header line, then one JSON object per page."""
    lines = [{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}]
    for page in pages:
        entry: dict[str, str] = {
            "id": uuid.uuid5(uuid.NAMESPACE_URL, f"{page.url} {page.date.isoformat()}").hex,
            "url": page.url,
            "ts": page.date.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if page.title:
            entry["title"] = page.title
        lines.append(entry)
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")


def datapackage(resources: list[Resource], *, title: str, created: datetime) -> bytes:
    """datapackage.json (a Frictionless data package, WACZ's profile of it)."""
    package = {
        "profile": "data-package",
        "resources": [r.to_json() for r in resources],
        "title": title,
        "created": created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wacz_version": WACZ_VERSION,
        "software": f"wwwproxy {__version__}",
    }
    return json.dumps(package, indent=2, ensure_ascii=False).encode("utf-8")


class _Counted:
    """A writer that hashes and counts what goes through it (into a ZIP entry)."""

    def __init__(self, target: IO[bytes]) -> None:
        self.target = target
        self.size = 0
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.target.write(data)
        self.hash.update(data)
        self.size += len(data)
        return len(data)

    def close(self) -> None:
        self.target.close()


@dataclass(frozen=True)
class WaczExport:
    path: Path
    copied: Copied
    resources: tuple[Resource, ...]


def _entry(name: str, compress: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, datetime.now(UTC).timetuple()[:6])
    info.compress_type = compress
    return info


def export_wacz(store: Store, path: Path, selection: Selection, *, title: str = "") -> WaczExport:
    """Write the WACZ ``path`` (which must not exist yet)."""
    path = Path(path)
    if path.exists():
        raise ExportError(f"{path}: exists already; give a new file name (or remove it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        resources: list[Resource] = []
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
            stamp = now_stamp()
            current: list[tuple[str, _Counted]] = []

            def open_warc(n: int) -> tuple[str, _Counted]:
                name = f"archive/wwwproxy-{stamp}-{n}.warc.gz"
                writer = _Counted(zf.open(_entry(name, zipfile.ZIP_STORED), "w", force_zip64=True))
                current.append((name, writer))
                return name, writer

            copied = copy_records(store, selection, open_warc)
            resources += [Resource(n, w.size, w.hash.hexdigest()) for n, w in current]
            parts = (
                ("indexes/index.cdx", "".join(line.text + "\n" for line in copied.lines)),
                ("pages/pages.jsonl", pages_jsonl(copied.pages)),
            )
            for name, data in parts:
                raw = data.encode("utf-8") if isinstance(data, str) else data
                zf.writestr(_entry(name, zipfile.ZIP_DEFLATED), raw)
                resources.append(Resource(name, len(raw), hashlib.sha256(raw).hexdigest()))
            package = datapackage(
                resources,
                title=title or "wwwproxy export",
                created=datetime.now(UTC),
            )
            zf.writestr(_entry("datapackage.json", zipfile.ZIP_DEFLATED), package)
            digest = {
                "path": "datapackage.json",
                "hash": "sha256:" + hashlib.sha256(package).hexdigest(),
            }
            zf.writestr(
                _entry("datapackage-digest.json", zipfile.ZIP_DEFLATED),
                json.dumps(digest, indent=2),
            )
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        if path.exists():
            raise ExportError(f"{path}: appeared while exporting; the export is not written")
        os.rename(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return WaczExport(path, copied, tuple(resources))
