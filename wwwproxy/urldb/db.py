"""The URL database directory: which domain file a URL belongs to, and URL-level operations.

Decisions where the spec is silent:

* **Which file a host belongs to.**  ``<host>.yaml`` if that file exists; otherwise the file
  whose metadata lists the host in ``cnames``; otherwise ``<host>`` becomes a new domain of its
  own.  ``www.example.com`` therefore only joins ``example.com.yaml`` when that file lists it
  as a cname: the database never guesses that two names are the same site.  A cname that is
  also a domain file's name, or is listed by two files, is reported in :attr:`problems`; the
  domain file, or else the first file in name order, wins.
* **Canonical form.**  Host names are canonical (lower-case, IDNA, no trailing dot) and record
  paths are the path and query of :func:`wwwproxy.url.canonical.canonicalize`, so each URL has
  one spelling.  A loaded record whose ``_path`` is not in that form (or, in a domain with
  ``case-sensitive-paths: false``, not lower-case) is an error naming its document, with the
  spelling to use, rather than a record that lookups silently miss.
* **Case-insensitive domains** lower-case the ASCII letters of the path (before ``?``); the
  query is left alone (servers that ignore the case of paths still pass the query to the
  application as it is), and so are ``%XX`` escapes, which stay upper-case as canonical.
* **URLs the database cannot hold** are refused with :class:`URLDBError`: userinfo (a record
  has no place for credentials, and they should not end up in a file meant for version
  control), schemes other than http/https, non-default ports, path-only URLs.  A fragment is
  dropped by canonicalization.
* **Adding an https URL** sets ``https: true`` on its domain, so :meth:`URLDatabase.urls` gives
  the URL back as it was added; an http URL never clears it.
* **Bad files.**  Whole-database reads (:meth:`URLDatabase.records`, :meth:`URLDatabase.urls`,
  :meth:`URLDatabase.check`) skip a file that cannot be used and report it in
  :attr:`URLDatabase.problems`; the other files are still listed.  Operations on one URL
  (add, remove, lookup) raise the file's :class:`URLDBError`, as they cannot do their job.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from wwwproxy.url.canonical import InvalidURL, canonicalize
from wwwproxy.urldb.format import SUFFIX, DomainFile, DomainMeta, Record, URLDBError

__all__ = [
    "Entry",
    "URLDatabase",
    "canonical_host",
    "normalize_path",
    "parse_db_url",
]

_ESCAPE_OR_UPPER = re.compile(r"%[0-9A-Fa-f]{2}|[A-Z]+")


class Entry(NamedTuple):
    """One record with the domain it belongs to."""

    domain: str
    meta: DomainMeta
    record: Record

    @property
    def url(self) -> str:
        """The URL to fetch: ``https://`` when the domain has ``https: true``."""
        scheme = "https" if self.meta.https else "http"
        return f"{scheme}://{self.domain}{self.record.path}"


def normalize_path(path: str, case_sensitive: bool) -> str:
    """The database spelling of a canonical path for a domain: ASCII letters before ``?``
    lower-cased when the server ignores case, ``%XX`` escapes and the query left alone."""
    if case_sensitive:
        return path
    head, qmark, query = path.partition("?")
    head = _ESCAPE_OR_UPPER.sub(
        lambda m: m.group() if m.group().startswith("%") else m.group().lower(), head
    )
    return head + qmark + query


def canonical_host(host: str) -> str:
    """A host name (or IP literal) in its canonical form; :class:`URLDBError` if it is not
    a bare host name."""
    if not isinstance(host, str) or not host or any(c in host for c in "/?#@\\"):
        raise URLDBError(f"{host!r} is not a host name")
    if ":" in host and not host.startswith("["):
        raise URLDBError(f"{host!r} is not a host name (it has a port or a colon)")
    try:
        u = canonicalize(f"http://{host}/")
    except InvalidURL as exc:
        raise URLDBError(f"{host!r} is not a host name: {exc.reason}") from None
    if u.local or u.port is not None or u.path != "/" or u.args is not None:
        raise URLDBError(f"{host!r} is not a host name")
    return u.host.rstrip(".") or u.host


def parse_db_url(url: str) -> tuple[str, str, str]:
    """``(scheme, host, path)`` of a URL as the database stores it (``path`` with any
    ``?query``), canonicalized; :class:`URLDBError` for a URL the database cannot hold."""
    try:
        u = canonicalize(url)
    except InvalidURL as exc:
        raise URLDBError(str(exc)) from None
    if u.local:
        raise URLDBError(f"{url!r} has no host name; the URL database needs a full URL")
    if u.proto not in ("http", "https"):
        raise URLDBError(f"{url!r}: only http and https URLs can be in the URL database")
    if u.user is not None:
        raise URLDBError(
            f"{u.canonical!r} was given with a user name or password, which the URL database "
            "cannot hold (and which should not be written to its files); give it without them"
        )
    if u.port is not None:
        raise URLDBError(
            f"{u.canonical!r} has port {u.port}; the URL database holds only URLs on the "
            "default port (80 for http, 443 for https), as a domain file names a host, not a "
            "port (urldb-format.txt). To try it with a local server, serve the site on port 80 "
            "(or fetch a list file of URLs with wwwproxy fetch instead)"
        )
    return u.proto, u.host.rstrip(".") or u.host, u.path_args


def _canonical_path(domain: str, path: str) -> str:
    try:
        return canonicalize(f"http://{domain}{path}").path_args
    except InvalidURL:
        return path  # the domain name was checked already; nothing better to suggest


class URLDatabase:
    """A URL database directory.  Nothing is read until asked, and files are re-read for
    each operation (another program may have changed them); only the cname map is cached
    (:meth:`refresh` forgets it)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._cnames: dict[str, str] | None = None
        self._cname_problems: list[URLDBError] = []
        self._unreadable_meta: list[URLDBError] = []
        self._file_problems: dict[str, URLDBError] = {}

    # -- files --

    def path_for(self, domain: str) -> Path:
        """The file of a (primary) domain: ``<domain>.yaml``."""
        return self.directory / f"{domain}{SUFFIX}"

    def domains(self) -> list[str]:
        """The primary domains that have a file, sorted."""
        try:
            names = [p.name for p in self.directory.iterdir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise URLDBError(
                f"cannot list the URL database: {exc.strerror or exc}", file=self.directory
            ) from exc
        return sorted(
            n[: -len(SUFFIX)]
            for n in names
            if n.endswith(SUFFIX) and not n.startswith(".") and (self.directory / n).is_file()
        )

    def domain_for(self, host: str, *, strict: bool = False) -> str:
        """The primary domain whose file holds URLs on ``host`` (see the module docstring).

        With ``strict``, a host that is neither a domain file nor a known cname is refused
        while some file's metadata cannot be read, since it might list the host (used before
        writing, so that a new file is never created for what is really a cname)."""
        h = canonical_host(host)
        if self.path_for(h).is_file():
            return h
        cnames = self._cname_map()
        if h in cnames:
            return cnames[h]
        if strict and self._unreadable_meta:
            first = self._unreadable_meta[0]
            raise URLDBError(
                f"cannot tell whether {h} is a cname of another domain, because the metadata "
                f"of a domain file cannot be read: {first}"
            )
        return h

    def file_for(self, host: str) -> Path:
        """The domain file for ``host`` (which may not exist yet)."""
        return self.path_for(self.domain_for(host))

    def load(self, domain: str) -> DomainFile:
        """Read and check a domain's file; an empty new one if there is none yet.  A failure
        is raised and also remembered in :attr:`problems`."""
        path = self.path_for(domain)
        if not path.is_file():
            self._file_problems.pop(path.name, None)
            return DomainFile(path)
        try:
            df = DomainFile.load(path)
            self._check_file(df)
        except URLDBError as exc:
            self._file_problems[path.name] = exc
            raise
        self._file_problems.pop(path.name, None)
        return df

    def _check_file(self, df: DomainFile) -> None:
        """What only the database layer can check: the file name and canonical paths."""
        domain = df.domain
        try:
            canon = canonical_host(domain)
        except URLDBError as exc:
            raise URLDBError(f"the file name is not a domain: {exc.reason}", file=df.path) from None
        if canon != domain:
            raise URLDBError(
                f"the file name is not a canonical host name; it should be {canon}{SUFFIX}",
                file=df.path,
            )
        case_sensitive = df.meta.case_sensitive_paths
        for record in df:
            want = normalize_path(_canonical_path(domain, record.path), case_sensitive)
            if want != record.path:
                why = "" if case_sensitive else " (case-sensitive-paths is false: lower-case)"
                document, line = df.document_of(record.path) or (None, None)
                raise URLDBError(
                    f"_path {record.path!r} is not in canonical form{why}; write it as {want!r}",
                    file=df.path,
                    document=document,
                    line=line,
                )

    # -- cnames --

    def refresh(self) -> None:
        """Forget the cname map (after another program changed the files)."""
        self._cnames = None

    def _cname_map(self) -> dict[str, str]:
        if self._cnames is not None:
            return self._cnames
        cnames: dict[str, str] = {}
        problems: list[URLDBError] = []
        unreadable: list[URLDBError] = []
        domains = self.domains()
        have_file = set(domains)
        for domain in domains:
            path = self.path_for(domain)
            try:
                meta = DomainFile.read_meta(path)
            except URLDBError as exc:
                problems.append(exc)
                unreadable.append(exc)
                continue
            for cname in meta.cnames:
                reason = None
                try:
                    canon = canonical_host(cname)
                except URLDBError as exc:
                    reason = f"cname {cname!r} is ignored: {exc.reason}"
                else:
                    if canon != cname:
                        reason = f"cname {cname!r} is ignored: write it as {canon!r}"
                    elif cname == domain:
                        reason = f"cname {cname!r} is the file's own domain"
                    elif cname in have_file:
                        reason = f"cname {cname!r} is ignored: {cname}{SUFFIX} exists"
                    elif cname in cnames:
                        reason = f"cname {cname!r} is ignored: {cnames[cname]}{SUFFIX} lists it too"
                if reason is None:
                    cnames[cname] = domain
                else:
                    problems.append(URLDBError(reason, file=path, document=1))
        self._cnames = cnames
        self._cname_problems = problems
        self._unreadable_meta = unreadable
        return cnames

    # -- problems --

    @property
    def problems(self) -> list[URLDBError]:
        """Problems found by the reads so far: files that could not be used (from the last
        whole-database read, or since) and cnames that were ignored."""
        seen: dict[str, URLDBError] = {}
        for err in [*self._file_problems.values(), *self._cname_problems]:
            seen.setdefault(str(err), err)
        return sorted(seen.values(), key=lambda e: (e.file or "", e.document or 0, str(e)))

    def check(self) -> list[URLDBError]:
        """Read every file in full and return every problem (empty: the database is sound)."""
        self.refresh()
        for _ in self.records():
            pass
        self._cname_map()
        return self.problems

    # -- URL operations --

    def add(
        self,
        url: str,
        content_type: str,
        categories: Iterable[str] = (),
        content_length: int | None = None,
        content_sha256: str | None = None,
    ) -> Entry:
        """Add a URL, or update its record: the content type is replaced, categories are
        merged.  Static information (length, digest) replaces the old only when given (either
        one replaces both); otherwise the record keeps what it had."""
        if isinstance(categories, str):
            raise URLDBError("categories must be a list of strings, not one string")
        scheme, host, path = parse_db_url(url)
        domain = self.domain_for(host, strict=True)
        df = self.load(domain)
        meta = df.meta
        path = normalize_path(path, meta.case_sensitive_paths)
        old = df.get(path)
        if old is None:
            record = Record(path, content_type, tuple(categories), content_length, content_sha256)
        else:
            static = content_length is not None or content_sha256 is not None
            record = Record(
                path,
                content_type,
                old.categories + tuple(categories),
                content_length if static else old.content_length,
                content_sha256 if static else old.content_sha256,
                old.extra,
            )
        df.put(record)
        if scheme == "https" and not meta.https:
            df.set_meta(dataclasses.replace(meta, https=True))
        self._write(df)
        return Entry(domain, df.meta, record)

    def remove(self, url: str) -> bool:
        """Remove a URL's record; False if it was not in the database."""
        _, host, path = parse_db_url(url)
        domain = self.domain_for(host)
        if not self.path_for(domain).is_file():
            return False
        df = self.load(domain)
        if not df.remove(normalize_path(path, df.meta.case_sensitive_paths)):
            return False
        self._write(df)
        return True

    def lookup(self, url: str) -> Entry | None:
        """The record for a URL (through cnames and case folding), or None."""
        _, host, path = parse_db_url(url)
        domain = self.domain_for(host)
        if not self.path_for(domain).is_file():
            return None
        df = self.load(domain)
        record = df.get(normalize_path(path, df.meta.case_sensitive_paths))
        return None if record is None else Entry(domain, df.meta, record)

    def records(self, category: str | None = None) -> Iterator[Entry]:
        """Every record (with ``category``, if given), by domain then path.  Files that cannot
        be used are skipped and reported in :attr:`problems`."""
        self._file_problems.clear()
        for domain in self.domains():
            try:
                df = self.load(domain)
            except URLDBError:
                continue
            for record in df:
                if category is None or category in record.categories:
                    yield Entry(domain, df.meta, record)

    def urls(self, category: str | None = None) -> Iterator[str]:
        """The URLs of :meth:`records`, as fetched (``https://`` for https domains)."""
        for entry in self.records(category):
            yield entry.url

    def set_meta(self, domain: str, meta: DomainMeta) -> None:
        """Change a domain's metadata (creating its file if needed).  Cnames must be host
        names with no file of their own and not listed by another domain.  Turning
        ``case-sensitive-paths`` off lower-cases the existing paths, refusing if two records
        would then have the same path."""
        if canonical_host(domain) != domain:
            raise URLDBError(f"{domain!r} is not a canonical host name")
        others = {c: d for c, d in self._cname_map().items() if d != domain}
        for cname in meta.cnames:
            if canonical_host(cname) != cname:
                raise URLDBError(f"cname {cname!r} is not a canonical host name")
            if cname == domain:
                raise URLDBError(f"cname {cname!r} is the domain itself")
            if self.path_for(cname).is_file():
                raise URLDBError(f"cname {cname!r} has its own file {cname}{SUFFIX}")
            if cname in others:
                raise URLDBError(f"cname {cname!r} is already a cname of {others[cname]}")
        df = self.load(domain)
        if not meta.case_sensitive_paths:
            for record in df.records:
                folded = normalize_path(record.path, False)
                if folded == record.path:
                    continue
                if df.get(folded) is not None:
                    raise URLDBError(
                        f"cannot make paths case-insensitive: {record.path!r} and {folded!r} "
                        "would be the same record",
                        file=df.path,
                    )
                df.remove(record.path)
                df.put(dataclasses.replace(record, path=folded))
        df.set_meta(meta)
        self._write(df)
        self._cnames = None

    def _write(self, df: DomainFile) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise URLDBError(
                f"cannot create the URL database directory: {exc.strerror or exc}",
                file=self.directory,
            ) from exc
        df.save()
        self._file_problems.pop(df.path.name, None)
