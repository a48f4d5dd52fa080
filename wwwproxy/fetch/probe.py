"""One URL for the URL database (``wwwproxy urldb add`` and ``check``): fetched through the
recording path, redirects followed, and the final response described."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urljoin

from ..archive.store import CachedEntry, StoreError
from ..http.headers import get_header
from ..http.policy import is_servable
from ..recording.engine import Exchange
from ..recording.services import Services
from ..recording.upstream import UpstreamError
from ..url import InvalidURL, canonicalize
from .bodies import decoded_digest
from .tasks import REDIRECT_STATUSES, USER_AGENT, fetch_problem

__all__ = ["Probe", "probe"]


@dataclass(frozen=True)
class Probe:
    """What a URL returned, redirects followed: for ``wwwproxy urldb add`` and ``check``."""

    url: str
    final_url: str
    status: int | None = None
    reason: str = ""
    content_type: str | None = None
    length: int | None = None
    sha256: str | None = None
    error: str | None = None
    redirects: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 400


async def probe(
    services: Services, url: str, *, digest: bool = False, max_redirects: int = 10
) -> Probe:
    """Fetch ``url`` (recorded like any fetch), following redirects, and describe the final
    response.  The request asks for no Content-Encoding, and any that comes anyway is removed
    before ``length`` and ``sha256`` are taken: they describe the content itself."""
    headers = [("User-Agent", USER_AGENT), ("Accept", "*/*"), ("Accept-Encoding", "identity")]
    try:
        target = canonicalize(url)
    except InvalidURL as exc:
        return Probe(url, url, error=exc.reason)
    chain: list[str] = []
    while True:
        try:
            fetched = await services.engine.fetch(Exchange(target, target.file, "GET", headers))
        except (UpstreamError, StoreError) as exc:
            return Probe(url, target.file, error=fetch_problem(exc), redirects=tuple(chain))
        # the answer just recorded (not a good copy kept from before: check wants the truth)
        entry = None
        if is_servable(fetched.status):
            entry = await asyncio.to_thread(services.store.get, target, prefer_good=False)
        if entry is None:
            return Probe(url, target.file, error="no servable response", redirects=tuple(chain))
        location = get_header(entry.headers, "Location")
        if entry.status in REDIRECT_STATUSES and location:
            chain.append(target.file)
            try:
                nxt = canonicalize(urljoin(target.file, location.strip()))
            except (InvalidURL, ValueError):
                return Probe(
                    url,
                    target.file,
                    entry.status,
                    entry.reason,
                    error=f"redirect to an invalid Location {location!r}",
                    redirects=tuple(chain),
                )
            if nxt.file in chain:
                return Probe(
                    url,
                    nxt.file,
                    entry.status,
                    entry.reason,
                    error="redirect loop: " + " -> ".join([*chain, nxt.file]),
                    redirects=tuple(chain),
                )
            if len(chain) > max_redirects:
                return Probe(
                    url,
                    nxt.file,
                    entry.status,
                    entry.reason,
                    error=f"too many redirects (more than {max_redirects})",
                    redirects=tuple(chain),
                )
            target = nxt
            continue
        length = sha = None
        if digest:
            encoding = get_header(entry.headers, "Content-Encoding")

            def measure(
                entry: CachedEntry = entry, encoding: str | None = encoding
            ) -> tuple[int, str]:
                with entry.open_body() as stream:
                    return decoded_digest(stream, encoding)

            try:
                length, sha = await asyncio.to_thread(measure)
            except ValueError as exc:
                return Probe(
                    url,
                    target.file,
                    entry.status,
                    entry.reason,
                    get_header(entry.headers, "Content-Type"),
                    error=str(exc),
                    redirects=tuple(chain),
                )
        return Probe(
            url,
            target.file,
            entry.status,
            entry.reason,
            get_header(entry.headers, "Content-Type"),
            length,
            sha,
            redirects=tuple(chain),
        )
