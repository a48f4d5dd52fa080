"""WWWOFFLE-style URL canonicalization (the contract: docs/specs/canonical-url-rules.md).

One canonical URL per resource is what makes the cache work: it is what we hash into the cache
file name, what the archive records as the target URI and what the index shows (upstream goes
the browser's own spelling: :mod:`.wire`). Every rule below merges only spellings
that origin servers treat as the same resource; anything we cannot read unambiguously is an
:class:`InvalidURL` rather than a guess.

Internally a URL is handled as a ``str`` whose characters are the URL's *bytes* (Latin-1
mapping), so non-UTF-8 input is treated byte for byte, as the rules require, while still using
fast ``str`` methods.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass

import idna

__all__ = [
    "DEFAULT_LOCAL_HOST",
    "DEFAULT_PORTS",
    "URL",
    "InvalidURL",
    "canonicalize",
    "is_canonical_web_url",
    "percent_decode",
    "split_url",
    "to_byte_chars",
]

DEFAULT_LOCAL_HOST = "localhost:8080"
DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "finger": 79}


class InvalidURL(ValueError):
    """A URL that cannot be canonicalized; the message says what is wrong and where."""

    def __init__(self, url: str | bytes, reason: str) -> None:
        self.url = url if isinstance(url, str) else url.decode("utf-8", "backslashreplace")
        self.reason = reason
        super().__init__(f"invalid URL {self.url!r}: {reason}")


@dataclass(frozen=True, slots=True)
class URL:
    """A canonicalized URL. ``canonical`` omits userinfo; ``file`` (the GET archive key) has it."""

    proto: str
    user: str | None
    password: str | None
    host: str
    port: int | None
    path: str
    args: str | None
    canonical: str
    file: str
    local: bool = False

    @property
    def hostport(self) -> str:
        """``host[:port]`` as in the canonical URL (and the cache folder)."""
        return self.host if self.port is None else f"{self.host}:{self.port}"

    @property
    def path_args(self) -> str:
        """The request target for an origin-form request line."""
        return self.path if self.args is None else f"{self.path}?{self.args}"

    def __str__(self) -> str:
        return self.canonical


# --- character sets -------------------------------------------------------------------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_PATH_BARE = frozenset(_ALNUM + "!$()*+,-./:;=_~")
_PASSWORD_BARE = frozenset(_ALNUM + "!$*+,-.=_~")
_ARGS_BARE = frozenset(_ALNUM + "!$()*,-./:_|~")
_ARGS_RAW_KEPT = frozenset("&=;+?")

# Escapes that would create structure if decoded stay encoded in the path.  While the path is
# being normalized they are held as code points above 0xFF, which no byte can collide with.
_PATH_PROTECTED = {"2F": "\u0100", "3F": "\u0101", "23": "\u0102", "25": "\u0103"}
_PROTECTED_OUT = {"\u0100": "%2F", "\u0101": "%3F", "\u0102": "%23", "\u0103": "%25"}


def _table(bare: frozenset[str]) -> dict[int, str]:
    return {i: (chr(i) if chr(i) in bare else f"%{i:02X}") for i in range(256)}


_PATH_TABLE = _table(_PATH_BARE) | {ord(k): v for k, v in _PROTECTED_OUT.items()}
_PASSWORD_TABLE = _table(_PASSWORD_BARE)

_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_STRIP = "".join(chr(i) for i in range(0x21))
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(//?)")
_PORT = re.compile(r"[0-9]+")
_LABEL = re.compile(r"[a-z0-9_\-]{1,63}")
_ARGS_TOKEN = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9!$()*,\-./:_|~&=;+?]")
# A run "&amp;amp;..." is what replacing "&amp;" until none is left turns into one "&"; nothing
# else can form a new "&amp;" (a replacement leaves "&", which starts no earlier match), so one
# pass over the runs gives the same result as repeated passes, in linear time.
_AMP_RUN = re.compile(r"&(?:amp;)+")


def percent_decode(text: str) -> str:
    """Decode ``%XX`` escapes (byte-chars in, byte-chars out); a lone ``%`` stays literal."""
    if "%" not in text:
        return text
    return _PCT.sub(lambda m: chr(int(m.group(1), 16)), text)


def _decode_path(path: str) -> str:
    if "%" not in path:
        return path

    def repl(m: re.Match[str]) -> str:
        hexpair = m.group(1).upper()
        return _PATH_PROTECTED.get(hexpair) or chr(int(hexpair, 16))

    return _PCT.sub(repl, path)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute path (``/a/.`` is ``/a/``, ``/a/b/..`` is ``/a/``)."""
    if "." not in path:
        return path
    segments = path[1:].split("/")
    out: list[str] = []
    last = len(segments) - 1
    for i, seg in enumerate(segments):
        if seg == ".":
            if i == last:
                out.append("")
        elif seg == "..":
            if out:
                out.pop()
            if i == last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def _recode_args(args: str) -> str:
    """URLRecodeFormArgs: one spelling for every way a browser may have encoded the query."""

    def repl(m: re.Match[str]) -> str:
        tok = m.group(0)
        if len(tok) == 3:
            ch = chr(int(tok[1:], 16))
            if ch in _ARGS_BARE:
                return ch
            if ch == " ":
                return "+"
            return tok.upper()
        if tok == " ":
            return "+"
        return f"%{ord(tok):02X}"

    out = _ARGS_TOKEN.sub(repl, args)
    if "&amp;" in out:
        out = _AMP_RUN.sub("&", out)
    return out


def _show(chars: str) -> str:
    """Byte-chars quoted for a message: UTF-8 as the text it is, other bytes as ``\\xNN``."""
    text = chars.encode("latin-1").decode("utf-8", "backslashreplace")
    return "'" + "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text) + "'"


# --- hosts ----------------------------------------------------------------------------------


def _ipv4_number(part: str) -> int | None:
    """WHATWG IPv4 number parser: decimal, ``0x`` hex or leading-zero octal."""
    if not part:
        return None
    radix = 10
    if part[:2] == "0x":
        radix, part = 16, part[2:]
    elif len(part) > 1 and part[0] == "0":
        radix, part = 8, part[1:]
    if not part:
        return 0
    digits = {10: "0123456789", 16: "0123456789abcdef", 8: "01234567"}[radix]
    if any(c not in digits for c in part):
        return None
    return int(part, radix)


# a last label :func:`_ipv4_number` reads as a number (decimal, octal or not, ``0x`` hex)
_NUMBER_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


def _ends_in_number(host: str) -> bool:
    """WHATWG: a host whose last label (before one trailing dot) is a number is IPv4."""
    name = host[:-1] if host.endswith(".") else host
    return _NUMBER_LABEL.fullmatch(name.rpartition(".")[2]) is not None


def _parse_ipv4(url: str | bytes, host: str) -> str:
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise InvalidURL(url, f"IPv4 host {host!r} has more than four parts")
    numbers = []
    for part in parts:
        n = _ipv4_number(part)
        if n is None:
            raise InvalidURL(url, f"IPv4 host {host!r} has a bad part {part!r}")
        numbers.append(n)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise InvalidURL(url, f"IPv4 host {host!r} has a part out of range")
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value += n * 256 ** (3 - i)
    return ".".join(str((value >> s) & 0xFF) for s in (24, 16, 8, 0))


def format_ipv6(value: int) -> str:
    """RFC 5952 §4 text form (lower-case hex, longest zero run of two or more groups as ``::``)."""
    groups = [(value >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    best_start, best_len, i = -1, 1, 0
    while i < 8:
        if groups[i] == 0:
            j = i
            while j < 8 and groups[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    hexes = [f"{g:x}" for g in groups]
    if best_start < 0:
        return ":".join(hexes)
    return ":".join(hexes[:best_start]) + "::" + ":".join(hexes[best_start + best_len :])


def _parse_ipv6(url: str | bytes, text: str) -> str:
    if "%" in text:
        raise InvalidURL(
            url, f"IPv6 host [{_show(text)[1:-1]}] has a zone id, which URLs cannot carry"
        )
    if not text.isascii():
        reason = (
            f"bad IPv6 address [{_show(text)[1:-1]}]: only hex digits, ':' and '.' belong there"
        )
        raise InvalidURL(url, reason)
    try:
        value = int(ipaddress.IPv6Address(text))
    except ValueError as exc:
        raise InvalidURL(url, f"bad IPv6 address [{_show(text)[1:-1]}]: {exc}") from None
    return f"[{format_ipv6(value)}]"


def _check_hostname(url: str | bytes, host: str) -> str:
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253:
        raise InvalidURL(url, f"host name is {len(name)} bytes long (at most 253)")
    for label in name.split("."):
        if _LABEL.fullmatch(label):
            continue
        if not label:
            raise InvalidURL(url, f"host {host!r} has an empty label")
        if len(label) > 63:
            raise InvalidURL(url, f"host label {label[:20]!r}... is over 63 bytes")
        bad = next(c for c in label if c not in "abcdefghijklmnopqrstuvwxyz0123456789_-")
        raise InvalidURL(url, f"host {host!r} contains {_describe(bad)}")
    return host


def _describe(ch: str) -> str:
    code = ord(ch)
    if code == 0x20:
        return "a space"
    if 0x21 <= code < 0x7F:
        return f"the character {ch!r}"
    return f"the byte 0x{code:02X}"


def _idna_to_ascii(url: str | bytes, host_bytes: str) -> str:
    """UTS #46 non-transitional, label by label, so ASCII labels keep only our own rule."""
    try:
        text = host_bytes.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidURL(url, "host name is not valid UTF-8") from None
    try:
        mapped = idna.uts46_remap(text, std3_rules=False, transitional=False)
    except idna.IDNAError as exc:
        raise InvalidURL(url, f"host {text!r} is not a valid international name: {exc}") from None
    labels = []
    for label in mapped.split("."):
        if label.isascii():
            labels.append(label)
            continue
        try:
            labels.append(idna.alabel(label).decode("ascii"))
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            raise InvalidURL(
                url, f"host label {label!r} is not a valid international name: {exc}"
            ) from None
    return ".".join(labels)


class _BadHost(str):
    """Why a host is invalid (what :class:`InvalidURL` says, the URL aside)."""


def _canonical_host(url: str | bytes, host: str, ipv6: bool) -> str:
    """Host (already percent-decoded, byte-chars) to its canonical text; raises InvalidURL."""
    canonical = _host_of(host, ipv6)
    if isinstance(canonical, _BadHost):
        raise InvalidURL(url, canonical)
    return canonical


@functools.lru_cache(maxsize=1024)
def _host_of(host: str, ipv6: bool) -> str:
    """:func:`_canonical_host`, remembered: a crawl's or a page's URLs are of few hosts, and an
    international name takes the IDNA tables tens of microseconds.  A reason
    (:class:`_BadHost`) for an invalid one: the reasons name the host, never the URL."""
    try:
        return _host_text(host, host, ipv6)
    except InvalidURL as exc:
        return _BadHost(exc.reason)


def _host_text(url: str | bytes, host: str, ipv6: bool) -> str:
    """What :func:`_canonical_host` works out."""
    if ipv6:
        return _parse_ipv6(url, host)
    if not host.isascii():
        host = _idna_to_ascii(url, host)
    host = host.lower()
    if _ends_in_number(host):
        return _parse_ipv4(url, host)
    return _check_hostname(url, host)


def _canonical_port(url: str | bytes, proto: str, port: str) -> int | None:
    if port == "":
        return None
    if not _PORT.fullmatch(port):
        raise InvalidURL(url, f"port {_show(port)} is not a decimal number")
    value = int(port)
    if not 1 <= value <= 65535:
        raise InvalidURL(url, f"port {_show(port)} is out of range 1-65535")
    return None if DEFAULT_PORTS.get(proto) == value else value


def _split_hostport(url: str | bytes, hostport: str) -> tuple[str, str, bool]:
    """Split decoded ``host[:port]``; brackets or two or more colons mean an IPv6 literal."""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise InvalidURL(url, f"IPv6 host {_show(hostport)} is missing its closing ']'")
        rest = hostport[end + 1 :]
        if rest and not rest.startswith(":"):
            shown = _show(hostport[: end + 1])[1:-1]
            raise InvalidURL(url, f"unexpected {_show(rest)} after the IPv6 host {shown}")
        return hostport[1:end], rest[1:], True
    if hostport.count(":") >= 2:
        return hostport, "", True
    host, _, port = hostport.partition(":")
    return host, port, False


@functools.lru_cache(maxsize=16)
def _local_hostport(local_host: str) -> tuple[str, int | None]:
    host, port, ipv6 = _split_hostport(local_host, to_byte_chars(local_host))
    if not host:
        raise InvalidURL(local_host, "the proxy's own host name is empty")
    canon_host = _canonical_host(local_host, host, ipv6)
    return canon_host, _canonical_port(local_host, "http", port)


def to_byte_chars(url: str | bytes) -> str:
    if isinstance(url, bytes):
        return url.decode("latin-1")
    try:
        return url.encode("utf-8", "surrogateescape").decode("latin-1")
    except UnicodeEncodeError:
        raise InvalidURL(url, "contains an unpaired surrogate code point") from None


# --- the whole URL --------------------------------------------------------------------------


def split_url(text: str) -> tuple[str, str, str]:
    """The scheme (lower-cased; ``http`` when none is written), the authority as written and
    the rest (path and query, as written) of a URL in byte-chars, without its fragment and
    the blanks around it.  Nothing, or only a fragment, is the proxy's root (``/``), as
    WWWOFFLE has it; a path-only URL has no authority (the proxy's own)."""
    text = text.strip(_STRIP)
    hash_at = text.find("#")
    if hash_at >= 0:
        text = text[:hash_at]
    if not text:
        text = "/"
    proto = "http"
    if text.startswith("/"):
        return proto, "", text
    m = _SCHEME.match(text)
    if m and ".." not in m.group(1):
        proto = m.group(1).lower()
        text = text[m.end() :]
    end = len(text)
    for sep in "/?":
        at = text.find(sep)
        if 0 <= at < end:
            end = at
    return proto, text[:end], text[end:]


def canonicalize(url: str | bytes, *, local_host: str = DEFAULT_LOCAL_HOST) -> URL:
    """Parse any URL string (text or raw bytes) into its canonical :class:`URL`.

    ``local_host`` is the proxy's own ``host[:port]``: path-only URLs (``/index/``) and URLs
    with an empty host name it, and so does an empty one (``""``, ``#only``: its root).  Raises
    :class:`InvalidURL`, and nothing else, for bad input.
    """
    if not isinstance(url, (str, bytes)):
        raise TypeError(f"canonicalize() takes str or bytes, not {type(url).__name__}")
    return _canonicalize(url, local_host)


# A URL written as its own canonical form, as most links on a page are: http(s), a lower-case
# ASCII host name of valid labels, maybe a port, a path and an optional query of bytes that
# stay bare, no escapes, no userinfo, no fragment.  Only the checks no character class can
# make are left to :func:`is_canonical_web_url`.
_CANONICAL_AS_WRITTEN = re.compile(
    r"(https?)://"
    r"((?:[a-z0-9_\-]{1,63}\.)*[a-z0-9_\-]{1,63}\.?)"
    r"(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9!$()*+,\-./:;=_~]*)"
    r"(?:\?([A-Za-z0-9!$()*,\-./:_|~&=;+?]+))?"
)


@functools.lru_cache(maxsize=256)
def _plain_name(host: str) -> bool:
    """Is ``host`` (of valid labels) a name, neither too long nor an IPv4 address?  Asked
    for each link, mostly of a few hosts."""
    return len(host) - host.endswith(".") <= 253 and not _ends_in_number(host)


def is_canonical_web_url(url: str) -> bool:
    """Is ``url`` an http(s) URL that is its own canonical form (``canonicalize(url).file ==
    url``, neither local nor with userinfo)?  Most links on a page are, once resolved: this
    tells in a regular expression's time what the general parser takes far longer to; False
    says nothing (ask :func:`canonicalize`).  A property test compares the two."""
    m = _CANONICAL_AS_WRITTEN.fullmatch(url)
    if m is None:
        return False
    proto, host, port, path, args = m.groups()
    if port is not None and ((len(port) == 5 and int(port) > 65535) or port in ("80", "443")):
        return False  # out of range, or a default port (http's and https's, to be short)
    return (
        "/." not in path  # maybe dot segments
        and (args is None or "&amp;" not in args)  # an entity to replace
        and _plain_name(host)  # too long, or an IPv4 address
    )


def _as_written(url: str) -> URL | None:
    """The :class:`URL` of a ``url`` canonical as written (:func:`is_canonical_web_url`), or
    None; the same as :func:`_parse` gives."""
    if not is_canonical_web_url(url):
        return None
    m = _CANONICAL_AS_WRITTEN.fullmatch(url)
    assert m is not None
    proto, host, port, path, args = m.groups()
    return URL(proto, None, None, host, None if port is None else int(port), path, args, url, url)


@functools.lru_cache(maxsize=4096)
def _canonicalize(url: str | bytes, local_host: str) -> URL:
    if isinstance(url, str):
        written = _as_written(url)
        if written is not None:
            return written
    return _parse(url, local_host)


def _parse(url: str | bytes, local_host: str) -> URL:
    """The general parser: every rule of the contract, for any input."""
    proto, authority, rest = split_url(to_byte_chars(url))
    user = password = None
    at = authority.rfind("@")
    if at >= 0:
        userinfo, authority = authority[:at], authority[at + 1 :]
        u, colon, p = userinfo.partition(":")
        if u or p:
            user = percent_decode(u).translate(_PASSWORD_TABLE)
            password = percent_decode(p).translate(_PASSWORD_TABLE) if p else None

    hostport = percent_decode(authority)
    host_text, port_text, ipv6 = _split_hostport(url, hostport)
    local = host_text == "" and not ipv6
    if local:
        _canonical_port(url, proto, port_text)  # a written port must still be valid
        try:
            host, port = _local_hostport(local_host)
        except InvalidURL as exc:
            reason = (
                f"it names the proxy itself, whose host {local_host!r} is invalid: {exc.reason}"
            )
            raise InvalidURL(url, reason) from None
    else:
        host = _canonical_host(url, host_text, ipv6)
        port = _canonical_port(url, proto, port_text)

    qmark = rest.find("?")
    if qmark >= 0:
        path, args = rest[:qmark], rest[qmark + 1 :]
    else:
        path, args = rest, ""
    if not path:
        path = "/"
    path = remove_dot_segments(_decode_path(path)).translate(_PATH_TABLE)
    args_out = _recode_args(args) if args else None

    hostport_out = host if port is None else f"{host}:{port}"
    tail = path if args_out is None else f"{path}?{args_out}"
    canonical = f"{proto}://{hostport_out}{tail}"
    if user is None:
        file = canonical
    else:
        cred = user if password is None else f"{user}:{password}"
        file = f"{proto}://{cred}@{hostport_out}{tail}"
    return URL(proto, user, password, host, port, path, args_out, canonical, file, local)
