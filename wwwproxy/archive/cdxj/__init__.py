"""OpenWayback CDXJ 1.0 index: record lines, byte-order sorting, merging, a journal and lookups.

Pure index logic plus thin file I/O; nothing here knows about WARC. The searchable keys (SURT)
arrive as ready strings from the URL layer; a record's ``ref`` names the WARC file and offset.

On disk (``Index``): sorted files (``index.cdxj`` and newer runs ``run-<time>.cdxj``) searched
through sparse indexes of their keys, never read whole, and an append-only journal
(``journal.cdxj``) that ``compact()`` turns into a new sorted run, merged with the newest runs
while they are small (:mod:`.runs`). Lookups consult them all, so a record is visible as soon
as ``add()`` returns.

Lines are compared as UTF-8 bytes without their newline, which is what ``LC_ALL=C sort`` does.
Because the space (0x20) sorts below every byte a key may contain, byte order of whole lines is
key order first, then time order (timestamps are always written with microseconds).

The work is split by job, as pywb splits its indexing:

- :mod:`.line`: the line format (a record line and the header line), parsing and validation;
- :mod:`.read`: reading CDXJ files (header block, strict or tolerant iteration, journals, checks);
- :mod:`.merge`: byte-order sorting and merging, external sort, atomic replacement of a file;
- :mod:`.runs`: the sorted runs: when they are merged, their kept samples and Bloom filters;
- :mod:`.index`: the on-disk index (binary search, journal appends, compaction, lookups).

The public names are all importable from here.
"""

from __future__ import annotations

from .index import INDEX_NAME, JOURNAL_NAME, Index, IndexFile, append_journal
from .line import (
    HEADER_LINE,
    SUPPORTED_MAJOR,
    CDXJError,
    CDXJRecord,
    CDXJVersionError,
    format_header,
    format_timestamp,
    make_ref,
    normalize_timestamp,
    parse_header,
    parse_ref,
    parse_timestamp,
)
from .merge import DEFAULT_RUN_LINES, merge_files, merge_sorted, sort_lines, write_index
from .read import check, file_version, iter_records, read_journal

__all__ = [
    "DEFAULT_RUN_LINES",
    "HEADER_LINE",
    "INDEX_NAME",
    "JOURNAL_NAME",
    "SUPPORTED_MAJOR",
    "CDXJError",
    "CDXJRecord",
    "CDXJVersionError",
    "Index",
    "IndexFile",
    "append_journal",
    "check",
    "file_version",
    "format_header",
    "format_timestamp",
    "iter_records",
    "make_ref",
    "merge_files",
    "merge_sorted",
    "normalize_timestamp",
    "parse_header",
    "parse_ref",
    "parse_timestamp",
    "read_journal",
    "sort_lines",
    "write_index",
]
