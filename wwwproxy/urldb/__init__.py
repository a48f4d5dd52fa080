"""The URL database: a directory of per-domain YAML files (docs/specs/urldb-format.txt)."""

from wwwproxy.urldb.db import Entry, URLDatabase, canonical_host, normalize_path, parse_db_url
from wwwproxy.urldb.format import DomainFile, DomainMeta, Record, URLDBError, check_path

__all__ = [
    "DomainFile",
    "DomainMeta",
    "Entry",
    "Record",
    "URLDBError",
    "URLDatabase",
    "canonical_host",
    "check_path",
    "normalize_path",
    "parse_db_url",
]
