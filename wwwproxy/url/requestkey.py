"""Archive keys of non-GET requests: the method and body folded into the URL.

Two POSTs to one URL with different bodies are different resources, so their keys must differ.
This follows ``cdx-non-get-requests.txt`` (the encoding pywb 2.6.7 writes into CDX keys) and,
where that text is silent, pywb 2.6.7 itself as ``non-get-notes.md`` records it, so keys match
pywb's except where the spec overrules it (urlencoded forms) or safety does (AMF, below).

Decisions where neither the spec nor the notes say, each kept as close to pywb as is safe:

* JSON numbers print as Python prints them after ``json.loads``: ``1e400`` is ``inf``; ``NaN``
  and ``Infinity``, which ``json.loads`` accepts, print ``nan`` and ``inf``. Integers print
  as written (``-0`` as ``0``), also past Python's 4300-digit ``int`` limit, as on pywb's
  Python 3.7. Every value, numbers included, is percent-plus encoded, as pywb's ``urlencode``
  does (``1e16`` => ``1e%2B16``); the names too.
* JSON nested deeper than 500 arrays and objects does not parse (pywb: wherever Python's
  recursion limit stopped it), nor does JSON with a lone surrogate (``"\\ud800"``, which UTF-8
  cannot carry): as pywb, whose ``urlencode`` raised there.
* A JSON name that collides with a generated ``name.N_`` is counted (notes); the output only
  ever appends (spec) where pywb's dict would overwrite the earlier value in place.
* urlencoded forms percent-decode to bytes, so ``%FF`` stays ``%FF`` (not U+FFFD); a pair is
  split at its first ``=``; empty pairs keep their ``&``.
* multipart: CRLF line ends, a closing delimiter, and a ``Content-Disposition: form-data`` with
  a ``name`` on every part are required, else the body is binary. Every part's value is its raw
  bytes (text parts too: the same output as decoding UTF-8 when they are UTF-8, and lossless
  when not); a nested multipart part is just bytes. Parameters are read as Python's ``cgi``
  module (which pywb used) read them.
* Content-type parameters (``charset``) are ignored: bodies are taken as UTF-8, as pywb did.
* AMF is encoded as binary. pywb decoded it with PyAMF; its maintained fork Py3AMF (0.9.1)
  imports any module a request body names as a class alias (checked: a typed object of class
  ``this.Foo`` imports ``this``), which a proxy must not let web pages do, and its rendering
  depends on the library's classes. Flash is gone; binary keeps distinct bodies distinct.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from itertools import chain, repeat
from urllib.parse import unquote_to_bytes

__all__ = ["MAX_BODY_CHARS", "MAX_JSON_DEPTH", "encode_body", "percent_plus", "request_key"]

#: pywb's ``MAX_QUERY_LENGTH``: the encoded body, not counting the ``&`` before it, is cut here.
MAX_BODY_CHARS = 4096
#: JSON nested deeper than this many arrays and objects counts as unparseable (see _json_pairs).
MAX_JSON_DEPTH = 500

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_UNRESERVED = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-._~"
_PP_TABLE = tuple(
    chr(b) if b in _UNRESERVED else "+" if b == 0x20 else f"%{b:02X}" for b in range(256)
)
# RFC 2046: at most 70 characters, the last not a space; any printable ASCII (as Python's cgi).
_BOUNDARY = re.compile(r"[ -~]{0,69}[!-~]")


def percent_plus(data: str | bytes) -> str:
    """Percent plus encoding (spec appendix): unreserved bytes bare, space ``+``, else ``%XX``.

    A ``str`` is encoded as UTF-8 first; one holding a lone surrogate raises
    ``UnicodeEncodeError`` (a ``ValueError``), as UTF-8 cannot carry it.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    return "".join(map(_PP_TABLE.__getitem__, data))


def request_key(
    file_string: str, method: str, content_type: str | None = None, body: bytes = b""
) -> str:
    """The archive key: the file string for GET, else with ``__wb_method`` and the body added.

    Raises ``ValueError`` only for a method that is not an RFC 9110 token.
    """
    if not _TOKEN.fullmatch(method):
        raise ValueError(f"request method {method!r} is not an HTTP token")
    method = method.upper()
    if method == "GET":
        return file_string
    key = f"{file_string}{'&' if '?' in file_string else '?'}__wb_method={method}"
    if method in ("POST", "PUT") and body:
        # The cut counts from after the "&", as pywb's did.
        key += encode_body(content_type, body, limit=MAX_BODY_CHARS + 1)[: MAX_BODY_CHARS + 1]
    return key


def encode_body(content_type: str | None, body: bytes, limit: int | None = None) -> str:
    """What a POST or PUT body adds after ``__wb_method=...``: ``&`` and its encoding, or ``""``.

    Not cut to :data:`MAX_BODY_CHARS`. With ``limit``, only the first ``limit`` characters are
    sure to be right (the rest may be missing), which spares encoding megabytes that the cut
    drops; the body is still checked whole, so its type's fallback is chosen as without it.
    Never raises: a body its type cannot read falls back as the spec's table says.
    """
    if not body:
        return ""
    media = (content_type or "").lstrip(" \t").lower()
    if media.startswith("application/x-www-form-urlencoded"):
        encoded = _encode_urlencoded(body, limit)
    elif media.startswith("multipart/"):
        encoded = _encode_multipart(content_type or "", body, limit)
    elif media.startswith("application/json"):
        encoded = _encode_json(body, limit)
        if encoded is None:
            encoded = ""
    elif media.startswith("text/plain"):
        encoded = _encode_json(body, limit)
    else:  # application/x-amf too: see the module docstring.
        encoded = None
    if encoded is None:
        if limit is not None:
            body = body[: (limit // 4 + 1) * 3]  # Base64 is blockwise: 3 bytes, 4 characters
        encoded = "__wb_post_data=" + base64.b64encode(body).decode("ascii")
    return "&" + encoded if encoded else ""


def _join_pairs(pairs: Iterable[tuple[str | bytes, str | bytes]], limit: int | None) -> str:
    """``name=value`` pairs percent-plus encoded and joined with ``&``, stopping past ``limit``.

    Each input character or byte gives at least one output character, so cutting a name or value
    to ``limit`` keeps every output character that can fall before the cut.
    """
    out: list[str] = []
    size = -1
    for name, value in pairs:
        if limit is not None:
            if size >= limit:
                break
            name, value = name[:limit], value[:limit]
        item = f"{percent_plus(name)}={percent_plus(value)}"
        out.append(item)
        size += len(item) + 1
    return "&".join(out)


# --- JSON ---------------------------------------------------------------------------------


class _IntText(str):
    """A JSON integer kept as its text, so any length prints (``int`` refuses 4300+ digits)."""


def _encode_json(body: bytes, limit: int | None) -> str | None:
    """The spec's JSON algorithm; ``None`` when the body is not JSON."""
    try:
        try:
            value = json.loads(body)
        except ValueError:  # maybe an integer past int's digit limit: slower, exact retry
            value = json.loads(body, parse_int=_IntText)
        pairs = _json_pairs(value)
        # Output may stop at the limit, but a lone surrogate anywhere (which UTF-8 cannot carry)
        # must still make the body unparseable, as in pywb, whose urlencode raised.
        "".join(chain.from_iterable(pairs)).encode("utf-8")
    except (ValueError, RecursionError):
        # Not UTF-8/16/32 or not JSON, nested too deep, or a lone surrogate (UnicodeEncodeError).
        return None
    return _join_pairs(pairs, limit)


def _json_pairs(value: object) -> list[tuple[str, str]]:
    """Names and values of the scalars in document order.

    Walked with a stack, not recursion, and nesting deeper than :data:`MAX_JSON_DEPTH` is a
    ``ValueError``: a fixed depth, where pywb stopped wherever Python's recursion limit, less
    the stack already in use, fell, so a key never depends on the caller's stack.
    """
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()  # every name written so far, generated ones included (notes)
    counts: dict[str, int] = {}
    stack = [iter([("", value)])]
    while stack:
        try:
            name, item = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if isinstance(item, dict | list):
            if len(stack) > MAX_JSON_DEPTH:
                raise ValueError("JSON nested too deep")
            if isinstance(item, dict):
                stack.append(iter(item.items()))
            else:
                stack.append(zip(repeat(name), item, strict=False))
        elif name:  # a scalar with no name (top level, or "" member) adds nothing
            if name in seen:
                counts[name] = counts.get(name, 1) + 1
                key = f"{name}.{counts[name]}_"
            else:
                key = name
            seen.add(key)
            pairs.append((key, _json_scalar(item)))
    return pairs


def _json_scalar(item: object) -> str:
    """The value as Python's ``str()`` writes it after ``json.loads`` (``True``, ``44.0``)."""
    if isinstance(item, _IntText):
        return "0" if item == "-0" else item
    return str(item)


# --- application/x-www-form-urlencoded ----------------------------------------------------


def _encode_urlencoded(body: bytes, limit: int | None) -> str | None:
    """Each name and value decoded once and percent-plus encoded; ``None`` if not UTF-8."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    out: list[str] = []
    size = -1
    # With a limit, pairs past limit + 1 cannot reach the output: leave them unsplit.
    for pair in text.split("&", -1 if limit is None else limit + 1):
        if limit is not None:
            if size >= limit:
                break
            # ``%XX`` turns 3 characters into 1 byte; a cut escape only spoils what is past it.
            pair = pair[: 3 * limit + 3]
        name, eq, value = pair.partition("=")
        item = percent_plus(unquote_to_bytes(name.replace("+", " ")))
        if eq:
            item += "=" + percent_plus(unquote_to_bytes(value.replace("+", " ")))
        out.append(item)
        size += len(item) + 1
    return "&".join(out)


# --- multipart ----------------------------------------------------------------------------


class _Malformed(Exception):
    """The body is not a multipart/form-data message."""


def _encode_multipart(content_type: str, body: bytes, limit: int | None) -> str | None:
    """``name=value`` per part, percent-plus encoded; ``None`` if not valid form data."""
    _, params = _header_params(content_type)
    boundary = params.get("boundary") if params is not None else None
    if boundary is None or not _BOUNDARY.fullmatch(boundary):
        return None
    try:
        fields = _multipart_fields(body, boundary.encode("ascii"))
    except _Malformed:
        return None
    return _join_pairs(fields, limit)


def _multipart_fields(body: bytes, boundary: bytes) -> list[tuple[bytes, bytes]]:
    """The (name, value) of each part of an RFC 2046 multipart body (RFC 7578 form data)."""
    delimiter = b"--" + boundary
    if body.startswith(delimiter):
        pos = 0
    else:  # a preamble comes first
        pos = body.find(b"\r\n" + delimiter)
        if pos < 0:
            raise _Malformed
        pos += 2
    fields: list[tuple[bytes, bytes]] = []
    while True:
        pos += len(delimiter)
        if body.startswith(b"--", pos):  # close delimiter; the epilogue is ignored
            return fields
        while body[pos : pos + 1] in (b" ", b"\t"):  # transport padding
            pos += 1
        if not body.startswith(b"\r\n", pos):
            raise _Malformed
        start = pos + 2
        end = body.find(b"\r\n" + delimiter, start)
        if end < 0:
            raise _Malformed  # no closing delimiter
        fields.append(_form_field(body[start:end]))
        pos = end + 2


def _form_field(part: bytes) -> tuple[bytes, bytes]:
    """A part's field name (from its Content-Disposition) and its raw value."""
    head, sep, value = part.partition(b"\r\n\r\n")
    if not sep:
        raise _Malformed
    disposition = None
    lines: list[str] = []
    for line in head.decode("latin-1").split("\r\n"):  # latin-1: bytes round-trip
        if line[:1] in (" ", "\t") and lines:
            lines[-1] += " " + line.strip(" \t")  # obsolete line folding
        else:
            lines.append(line)
    for line in lines:
        name, colon, field_value = line.partition(":")
        if not colon or not name.strip(" \t"):
            raise _Malformed
        if name.strip(" \t").lower() == "content-disposition":
            if disposition is not None:
                raise _Malformed
            disposition = field_value
    if disposition is None:
        raise _Malformed
    kind, params = _header_params(disposition)
    if kind != "form-data" or params is None or "name" not in params:
        raise _Malformed
    return params["name"].encode("latin-1"), value


def _header_params(value: str) -> tuple[str, dict[str, str] | None]:
    """A header's lower-cased main value and its parameters (lower-cased names), read as Python's
    ``cgi.parse_header`` did; the parameters are ``None`` when one is given twice."""
    items = []
    start = 0
    quoted = False
    i = 0
    while i < len(value):
        char = value[i]
        if char == "\\" and quoted:
            i += 1
        elif char == '"':
            quoted = not quoted
        elif char == ";" and not quoted:
            items.append(value[start:i])
            start = i + 1
        i += 1
    items.append(value[start:])
    params: dict[str, str] = {}
    for item in items[1:]:
        name, eq, param = item.partition("=")
        if not eq:
            continue
        name = name.strip(" \t").lower()
        param = param.strip(" \t")
        if len(param) >= 2 and param[0] == param[-1] == '"':
            param = param[1:-1].replace("\\\\", "\\").replace('\\"', '"')
        if name in params:
            return items[0].strip(" \t").lower(), None
        params[name] = param
    return items[0].strip(" \t").lower(), params
