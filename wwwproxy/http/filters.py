"""URL filters (WWWOFFLE's DontGet, DontCache, DontRequestOffline and LocalNet): which URLs
are never fetched, never recorded, never queued offline, or always fetched directly.

Pure: patterns are parsed and compiled once per configuration (:class:`Filters`), and a request
then costs a few set lookups, however long a blocklist is.  One pattern syntax for every list::

    [scheme://]host[:port][/path]

* host: ``*`` (any host), ``example.com`` (exactly that host) or ``*.example.com`` (every
  sub-domain of it, not ``example.com`` itself), as ``https_intercept`` writes them;
* scheme (``http``/``https``) and port: only that scheme or port (a missing port is the
  scheme's default); left out: any;
* path: from the first ``/``; ``*`` stands for any characters (``/`` too), everything else is
  itself (compared as the canonical URL spells it: ``[`` as ``%5B``, ``%7E`` as ``~``).  A
  path without ``?`` is matched against the URL's path alone (any query), one with ``?``
  against path and query.  Left out: any path.

So ``*.doubleclick.net``, ``example.com/ads/*``, ``*/track.gif``, ``https://example.com:8443/``.
A blocklist file adds hosts (hosts-file ``0.0.0.0 ads.example`` lines: that host;
AdBlock ``||ads.example^`` lines: that host and its sub-domains), see :func:`parse_blocklist`.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..url import URL, InvalidURL, canonicalize

__all__ = [
    "EMPTY_GIF",
    "Blocklist",
    "Filters",
    "Replacement",
    "Treatment",
    "URLPattern",
    "Verdict",
    "PatternSet",
    "parse_blocklist",
    "parse_pattern",
    "replacement_for",
]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SCHEMES = ("http", "https")
_HOST = re.compile(r"[a-z0-9_](?:[a-z0-9_\-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_\-]*[a-z0-9_])?)*")
#: names a hosts file maps for the machine itself, never ad servers: a line for them is skipped
_HOSTS_FILE_SELF = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "local",
        "broadcasthost",
        "ip6-localhost",
        "ip6-loopback",
        "ip6-localnet",
        "ip6-mcastprefix",
        "ip6-allnodes",
        "ip6-allrouters",
        "ip6-allhosts",
        "0.0.0.0",
    }
)
_COMMENT = re.compile(r"\s#")
_SINK_ADDRESSES = frozenset({"0.0.0.0", "127.0.0.1", "::", "::1", "0", "::0"})
MEMO_KEPT = 4096  # URLs whose verdict is remembered (both fronts ask on every request)


@dataclass(frozen=True)
class URLPattern:
    """One parsed pattern (see the module's docstring for the syntax)."""

    text: str
    scheme: str | None
    host: str  # "" for any host; without a trailing dot
    subdomains: bool  # ``*.host``
    port: int | None
    path: re.Pattern[str] | None = field(compare=False)
    with_query: bool = False

    @property
    def host_only(self) -> bool:
        """A pattern that says nothing but the host (the set lookups answer it)."""
        return self.scheme is None and self.port is None and self.path is None

    def matches_rest(self, url: URL) -> bool:
        """Scheme, port and path (the host has been matched already)."""
        if self.scheme is not None and url.proto != self.scheme:
            return False
        if self.port is not None:
            port = url.port if url.port is not None else _DEFAULT_PORTS.get(url.proto)
            if port != self.port:
                return False
        if self.path is not None:
            target = url.path_args if self.with_query else url.path
            return self.path.fullmatch(target) is not None
        return True


def _canonical_host(text: str, pattern: str) -> str:
    """``text`` as canonical URLs write hosts (lower case, IDNA, IPv6 in brackets), without a
    trailing dot; ValueError for what is not a host."""
    if not text:
        raise ValueError(f"bad pattern {pattern!r}: no host (write * for any host)")
    try:
        url = canonicalize(f"http://{text}/")
    except InvalidURL as exc:
        raise ValueError(f"bad pattern {pattern!r}: {exc.reason}") from None
    if url.user is not None or url.port is not None or url.path != "/" or url.args is not None:
        raise ValueError(f"bad pattern {pattern!r}: {text!r} is not a host name")
    return url.host.rstrip(".")


def parse_pattern(text: str) -> URLPattern:
    """One ``[scheme://]host[:port][/path]`` pattern; ValueError says what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"expected a pattern string, got {type(text).__name__} {text!r}")
    pattern = text.strip()
    rest = pattern
    scheme = None
    if "://" in rest:
        scheme, rest = rest.split("://", 1)
        scheme = scheme.lower()
        if scheme == "*":
            scheme = None
        elif scheme not in _SCHEMES:
            raise ValueError(f"bad pattern {text!r}: the scheme must be http, https or *")
    slash = rest.find("/")
    authority, path = (rest, None) if slash < 0 else (rest[:slash], rest[slash:])
    port = None
    if authority.startswith("["):
        end = authority.find("]")
        host, port_text = (
            (authority, "") if end < 0 else (authority[: end + 1], authority[end + 1 :])
        )
        if port_text and not port_text.startswith(":"):
            raise ValueError(f"bad pattern {text!r}: unexpected {port_text!r} after the host")
        port_text = port_text[1:]
    else:
        host, _, port_text = authority.partition(":")
    if port_text:
        if not port_text.isascii() or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"bad pattern {text!r}: the port must be a number from 1 to 65535")
        port = int(port_text)
    subdomains = False
    if host == "*":
        host = ""
    elif host.startswith("*."):
        subdomains, host = True, _canonical_host(host[2:], text)
    elif "*" in host:
        raise ValueError(
            f"bad pattern {text!r}: a host is *, example.com or *.example.com (no other *)"
        )
    else:
        host = _canonical_host(host, text)
    regex = None
    with_query = False
    if path is not None:
        with_query = "?" in path
        try:  # spelled as canonical URLs spell paths (``[`` is ``%5B``, ``%7E`` is ``~``)
            path = canonicalize(f"http://h{path}").path_args
        except InvalidURL as exc:
            raise ValueError(f"bad pattern {text!r}: {exc.reason}") from None
        regex = re.compile(".*".join(re.escape(part) for part in path.split("*")), re.DOTALL)
    return URLPattern(pattern, scheme, host, subdomains, port, regex, with_query)


def _host_of(url: URL) -> str:
    return url.host.rstrip(".")


class PatternSet:
    """Patterns compiled for lookup: host-only ones (and blocklist hosts) in two dicts (exact
    hosts, and domains whose sub-domains match), walked by the URL host's suffixes; the few
    with a scheme, port or path grouped by host the same way and checked one by one."""

    def __init__(
        self,
        patterns: Iterable[URLPattern] = (),
        blocklist: Blocklist | None = None,
    ) -> None:
        self.exact: dict[str, str] = {}  # host -> the pattern that names it
        self.domains: dict[str, str] = {}  # domain -> the pattern naming its sub-domains
        self.any_host: str | None = None  # a bare ``*``
        self._detailed_exact: dict[str, list[URLPattern]] = {}
        self._detailed_domains: dict[str, list[URLPattern]] = {}
        self._detailed_any: list[URLPattern] = []
        if blocklist is not None:
            for host in blocklist.hosts:
                self.exact.setdefault(host, f"blocklist: {host}")
            for domain in blocklist.domains:
                self.exact.setdefault(domain, f"blocklist: ||{domain}^")
                self.domains.setdefault(domain, f"blocklist: ||{domain}^")
        for p in patterns:
            if p.host_only:
                if not p.host:
                    self.any_host = self.any_host or p.text
                elif p.subdomains:
                    self.domains.setdefault(p.host, p.text)
                else:
                    self.exact.setdefault(p.host, p.text)
            elif not p.host:
                self._detailed_any.append(p)
            elif p.subdomains:
                self._detailed_domains.setdefault(p.host, []).append(p)
            else:
                self._detailed_exact.setdefault(p.host, []).append(p)
        self.empty = not (
            self.exact
            or self.domains
            or self.any_host
            or self._detailed_exact
            or self._detailed_domains
            or self._detailed_any
        )

    def __len__(self) -> int:
        return (
            len(self.exact)
            + len(self.domains)
            + (self.any_host is not None)
            + sum(map(len, self._detailed_exact.values()))
            + sum(map(len, self._detailed_domains.values()))
            + len(self._detailed_any)
        )

    def match(self, url: URL) -> str | None:
        """The first pattern ``url`` matches (its text, to show), or None."""
        if self.empty:
            return None
        if self.any_host is not None:
            return self.any_host
        host = _host_of(url)
        found = self.exact.get(host)
        if found is not None:
            return found
        for p in self._detailed_exact.get(host, ()):
            if p.matches_rest(url):
                return p.text
        domains, detailed = self.domains, self._detailed_domains
        if domains or detailed:
            dot = host.find(".")
            while dot >= 0:
                suffix = host[dot + 1 :]
                found = domains.get(suffix)
                if found is not None:
                    return found
                for p in detailed.get(suffix, ()):
                    if p.matches_rest(url):
                        return p.text
                dot = host.find(".", dot + 1)
        for p in self._detailed_any:
            if p.matches_rest(url):
                return p.text
        return None

    def match_host(self, scheme: str, host: str, port: int) -> str | None:
        """The first pattern that takes every URL of ``scheme://host:port`` (no path in it):
        a CONNECT to that host is refused when ``dont_get`` has one."""
        if self.empty:
            return None
        try:
            url = canonicalize(
                f"{scheme}://[{host}]:{port}/" if ":" in host else f"{scheme}://{host}:{port}/"
            )
        except InvalidURL:
            return None
        found = self.any_host
        if found is None:
            bare = _host_of(url)
            found = self.exact.get(bare)
            dot = bare.find(".")
            while found is None and dot >= 0:
                found = self.domains.get(bare[dot + 1 :])
                dot = bare.find(".", dot + 1)
        if found is not None:
            return found
        for p in self._all_detailed():
            if p.path is None and p.matches_rest(url) and _host_matches(p, url):
                return p.text
        return None

    def _all_detailed(self) -> Iterable[URLPattern]:
        for group in (*self._detailed_exact.values(), *self._detailed_domains.values()):
            yield from group
        yield from self._detailed_any


def _host_matches(p: URLPattern, url: URL) -> bool:
    host = _host_of(url)
    if not p.host:
        return True
    if p.subdomains:
        return host.endswith("." + p.host)
    return host == p.host


# --- blocklists ----------------------------------------------------------------------------


@dataclass
class Blocklist:
    """The hosts of blocklist files: ``hosts`` exactly, ``domains`` with their sub-domains;
    ``problems`` are the lines skipped (``file:line: why``)."""

    hosts: set[str] = field(default_factory=set)
    domains: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.hosts) + len(self.domains)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def _blocked_host(name: str) -> str | None:
    """A host name as the URL layer writes it (lower case, no trailing dot), or None."""
    name = name.lower().rstrip(".")
    if _HOST.fullmatch(name) is None:
        if name.isascii():
            return None
        try:  # an international name: the URL layer's IDNA form
            return _canonical_host(name, name)
        except ValueError:
            return None
    return name


def parse_blocklist(lines: Iterable[str], source: str, into: Blocklist | None = None) -> Blocklist:
    """The hosts of one blocklist file's lines, in either common format:

    * hosts file: ``0.0.0.0 ads.example [more.example ...]`` (also ``127.0.0.1``, ``::1``,
      ``::``) or a bare ``ads.example`` per line: those hosts exactly; the machine's own names
      (``localhost`` ...) are skipped;
    * AdBlock domains: ``||ads.example^``: that host and every sub-domain of it.

    Blank lines and comments (``#``, ``!``, ``[Adblock Plus 2.0]``) are skipped; any other line
    (an AdBlock rule with options or a path, an element-hiding rule, a bad name) is skipped and
    noted in ``problems`` as ``source:line: why``."""
    out = into if into is not None else Blocklist()
    hosts, domains, problems = out.hosts, out.domains, out.problems
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!" or (line[0] == "[" and line[-1] == "]"):
            continue
        if line.startswith("||"):
            if not line.endswith("^"):
                problems.append(f"{source}:{number}: only ||host^ AdBlock rules are used: {line!r}")
                continue
            host = _blocked_host(line[2:-1])
            if host is None:
                problems.append(f"{source}:{number}: not a host name: {line!r}")
                continue
            domains.add(host)
            continue
        comment = _COMMENT.search(line)  # `` # ...`` ends a hosts-file line; ``a##b`` is no comment
        if comment is not None:
            line = line[: comment.start()]
        fields = line.split()
        if len(fields) > 1:
            if fields[0] not in _SINK_ADDRESSES:
                problems.append(
                    f"{source}:{number}: a hosts-file line must map to 0.0.0.0 or 127.0.0.1: "
                    f"{raw.strip()!r}"
                )
                continue
            names = fields[1:]
        else:
            names = fields
        for name in names:
            if name.lower() in _HOSTS_FILE_SELF or name in _SINK_ADDRESSES:
                continue  # the machine's own names, and "0.0.0.0 0.0.0.0" lines
            if _is_address(name):  # "0.0.0.0 127.0.0.1" would block the machine itself
                problems.append(f"{source}:{number}: an address, not a host name: {name!r}")
                continue
            host = _blocked_host(name)
            if host is None:
                problems.append(f"{source}:{number}: not a host name: {name!r}")
                continue
            hosts.add(host)
    return out


# --- the verdict -----------------------------------------------------------------------------


class Treatment(enum.Enum):
    """What the proxy does with a URL before any cache policy."""

    NORMAL = "normal"  # the cache policy decides
    BLOCK = "block"  # dont_get: never fetched, a replacement answers at once
    DIRECT = "direct"  # local_net: fetched directly (offline too), never recorded or served
    UNCACHED = "uncached"  # dont_cache: fetched online, never recorded or served from the cache


@dataclass(frozen=True)
class Verdict:
    treatment: Treatment
    #: the pattern that decided (to show in the answer and the log), or None
    pattern: str | None = None
    #: may an offline miss (or an unreachable server's) be queued for fetching?
    queue: bool = True

    @property
    def cache(self) -> bool:
        """Is the cache looked at and written for this URL?"""
        return self.treatment is Treatment.NORMAL

    @property
    def listed_in(self) -> str | None:
        """The config key of the list that decided (to show), or None."""
        if self.pattern is None:
            return None
        return _LISTS.get(self.treatment, "dont_queue")


NORMAL = Verdict(Treatment.NORMAL)
_LISTS = {
    Treatment.BLOCK: "dont_get",
    Treatment.DIRECT: "local_net",
    Treatment.UNCACHED: "dont_cache",
}


class Filters:
    """The four lists, compiled; :meth:`verdict` per request.  A blocked URL stays blocked
    whatever the other lists say (``dont_get`` first), then ``local_net``, then ``dont_cache``;
    ``dont_queue`` only says whether a miss is queued."""

    def __init__(
        self,
        dont_get: Iterable[str] = (),
        dont_cache: Iterable[str] = (),
        dont_queue: Iterable[str] = (),
        local_net: Iterable[str] = (),
        *,
        blocklist: Blocklist | None = None,
        status: int = 200,
    ) -> None:
        self.dont_get = PatternSet(map(parse_pattern, dont_get), blocklist)
        self.dont_cache = PatternSet(map(parse_pattern, dont_cache))
        self.dont_queue = PatternSet(map(parse_pattern, dont_queue))
        self.local_net = PatternSet(map(parse_pattern, local_net))
        #: the status of a ``dont_get`` replacement
        self.status = status
        self.empty = all(
            s.empty for s in (self.dont_get, self.dont_cache, self.dont_queue, self.local_net)
        )
        self._memo: dict[str, Verdict] = {}

    def verdict(self, url: URL) -> Verdict:
        """What to do with ``url`` (remembered for the last few thousand URLs)."""
        if self.empty:
            return NORMAL
        key = url.canonical
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= MEMO_KEPT:
                self._memo.clear()
            found = self._memo[key] = self._decide(url)
        return found

    def _decide(self, url: URL) -> Verdict:
        pattern = self.dont_get.match(url)
        if pattern is not None:
            return Verdict(Treatment.BLOCK, pattern, queue=False)
        pattern = self.local_net.match(url)
        if pattern is not None:
            return Verdict(Treatment.DIRECT, pattern, queue=False)
        pattern = self.dont_cache.match(url)
        if pattern is not None:
            return Verdict(Treatment.UNCACHED, pattern, queue=False)
        pattern = self.dont_queue.match(url)
        if pattern is not None:
            return Verdict(Treatment.NORMAL, pattern, queue=False)
        return NORMAL

    def blocks_connect(self, host: str, port: int) -> str | None:
        """The ``dont_get`` pattern that refuses a CONNECT to ``host:port`` (one without a
        path: a tunnel's paths are not seen), or None."""
        return self.dont_get.match_host("https", host, port)

    def direct_connect(self, host: str, port: int) -> bool:
        """Is a CONNECT to ``host:port`` for the local network (``local_net``, a pattern
        without a path): tunnelled even offline?"""
        return self.local_net.match_host("https", host, port) is not None


# --- the replacement for a blocked URL --------------------------------------------------------

#: a transparent 1x1 GIF: an image the page lays out as nothing
EMPTY_GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
_IMAGE_EXTENSIONS = frozenset(
    {".gif", ".png", ".jpg", ".jpeg", ".webp", ".avif", ".ico", ".bmp", ".svg", ".tif", ".tiff"}
)
_SCRIPT_EXTENSIONS = frozenset({".js", ".mjs"})


class Replacement(enum.Enum):
    """What a blocked URL is answered with, by what the page asked for."""

    IMAGE = "image/gif"  # EMPTY_GIF
    SCRIPT = "text/javascript"  # empty
    STYLE = "text/css"  # empty
    PAGE = "text/html"  # a short page saying why


def replacement_for(url: URL, accept: str | None) -> Replacement:
    """By the URL's extension, else by the first type of ``Accept`` (browsers ask for images
    with ``image/...``, for stylesheets with ``text/css``; scripts only say ``*/*``)."""
    path = url.path
    slash = path.rfind("/")
    dot = path.rfind(".")
    if dot > slash:
        ext = path[dot:].lower()
        if ext in _IMAGE_EXTENSIONS:
            return Replacement.IMAGE
        if ext in _SCRIPT_EXTENSIONS:
            return Replacement.SCRIPT
        if ext == ".css":
            return Replacement.STYLE
    first = (accept or "").split(",", 1)[0].split(";", 1)[0].strip().lower()
    if first.startswith("image/"):
        return Replacement.IMAGE
    if first == "text/css":
        return Replacement.STYLE
    if first in ("application/javascript", "text/javascript"):
        return Replacement.SCRIPT
    return Replacement.PAGE
