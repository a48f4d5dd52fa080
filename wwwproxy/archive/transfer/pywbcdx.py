"""pywb's CDXJ index lines (``urlkey timestamp {json}``), pure.

Our own index is OpenWayback CDXJ (``(com,example,)/`` keys, W3C timestamps, a record type
column); pywb and ReplayWeb.page read pywb's dialect instead: the SURT the ``surt`` package
makes (``com,example)/``: no scheme, ``www.`` dropped, path and query lower-cased, query
arguments sorted, a trailing slash dropped), a 14-digit timestamp and a JSON block whose
values are strings.  pywb looks a request up by computing that key itself, so the key must be
the one it computes, or the capture is never found.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from ..warc import RecordInfo, parse_warc_date

__all__ = ["PywbLine", "pywb_line", "pywb_surt", "timestamp14"]

_WWW = re.compile(r"www\d*\.")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _minimal_escape(text: str) -> str:
    """Google's canonical escaping, as ``surt`` does it: undo every escape (repeatedly), then
    escape only controls, space, non-ASCII, ``#`` and ``%``."""
    data = text.encode("utf-8", "surrogateescape")
    while True:
        unescaped = unquote_to_bytes(data)
        if unescaped == data:
            break
        data = unescaped
    return "".join(f"%{b:02X}" if b <= 0x20 or b >= 0x7F or b in b"#%" else chr(b) for b in data)


def pywb_surt(url: str) -> str:
    """The key pywb looks ``url`` up by (the ``surt`` package's defaults on a canonical URL).

    >>> pywb_surt("http://www.Example.com:80/A/b/?z=1&a=2")
    'com,example)/a/b?a=2&z=1'
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not an absolute URL: {url!r}")
    rest = rest.split("#", 1)[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    authority = authority[authority.rfind("@") + 1 :].lower()
    if authority.startswith("["):
        end = authority.find("]") + 1
        host, port = authority[:end], authority[end + 1 :]
    else:
        host, _, port = authority.partition(":")
    host = host.strip(".")
    if port == _DEFAULT_PORTS.get(scheme.lower()):
        port = ""
    path, qmark, query = tail.partition("?")
    path = _minimal_escape(path).lower() or "/"
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    args = sorted(a for a in _minimal_escape(query).lower().split("&") if a)
    if host.startswith("["):
        key = host.strip("[]")
    else:
        host = _WWW.sub("", host, count=1) if _WWW.match(host) else host
        key = ",".join(reversed(host.split(".")))
    if port:
        key += ":" + port
    return key + ")" + path + ("?" + "&".join(args) if args else "")


def timestamp14(warc_date: str) -> str:
    """``20261124021500`` for a WARC-Date (pywb's CDX timestamp)."""
    return parse_warc_date(warc_date).strftime("%Y%m%d%H%M%S")


@dataclass(frozen=True)
class PywbLine:
    """One pywb CDXJ line; sorts as its text does (what pywb's binary search needs)."""

    text: str

    def __lt__(self, other: PywbLine) -> bool:
        return self.text.encode("utf-8") < other.text.encode("utf-8")


def pywb_line(
    record: RecordInfo,
    *,
    filename: str,
    offset: int,
    length: int,
    method: str | None = None,
) -> PywbLine:
    """The pywb CDXJ line of a ``response`` or ``revisit`` record copied to ``filename`` at
    ``offset`` (``length`` bytes compressed).  The key is the archive key's (a non-GET key holds
    pywb's ``__wb_method=`` arguments already), ``url`` the target URI."""
    if record.rec_type not in ("response", "revisit"):
        raise ValueError(f"{record.record_id}: a {record.rec_type} record has no index line")
    url = record.target_uri or record.archive_key
    if not url:
        raise ValueError(f"{record.record_id}: no target URI")
    fields: dict[str, str] = {"url": url}
    if record.rec_type == "revisit":
        fields["mime"] = "warc/revisit"
    else:
        fields["mime"] = record.mime_type or "unk"
    status = record.status
    if status is not None:
        fields["status"] = str(status)
    if record.payload_digest:
        fields["digest"] = record.payload_digest
    fields["length"] = str(length)
    fields["offset"] = str(offset)
    fields["filename"] = filename
    if method and method.upper() not in ("GET", "HEAD"):
        fields["method"] = method.upper()
    key = pywb_surt(record.archive_key or url)
    return PywbLine(f"{key} {timestamp14(record.date)} {json.dumps(fields, ensure_ascii=False)}")
