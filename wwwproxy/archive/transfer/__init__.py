"""Moving the cache to and from other tools: a WACZ for ReplayWeb.page, a pywb collection,
and a WWWOFFLE spool brought in.

- :mod:`.pywbcdx`: pywb's CDXJ lines and the key pywb looks captures up by (pure);
- :mod:`.collect`: what an export takes (hosts, since) and the byte-for-byte copy of those
  records into large WARC files, with their index lines and pages;
- :mod:`.wacz` and :mod:`.pywb`: the two exports;
- :mod:`.wwwoffle`: the import of a WWWOFFLE spool (pages through the store, queued
  requests into the outgoing queue).
"""

from __future__ import annotations

from .collect import ExportError, Selection, host_matches, parse_since
from .pywb import PywbExport, export_pywb
from .wacz import WaczExport, export_wacz

__all__ = [
    "ExportError",
    "PywbExport",
    "Selection",
    "WaczExport",
    "export_pywb",
    "export_wacz",
    "host_matches",
    "parse_since",
]
