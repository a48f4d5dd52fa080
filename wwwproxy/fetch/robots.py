"""robots.txt rules for recursive fetches (RFC 9309), as pure functions over a fetched file.

The fetching (through the recording path, so robots.txt lands in the cache too) is the
prefetcher's; this module only turns what came back into an answer:

* 2xx: the file is parsed (:class:`urllib.robotparser.RobotFileParser`, user agent
  ``wwwproxy``; at most :data:`MAX_SIZE` bytes are read, as RFC 9309 §2.5 allows);
* 4xx (including 401/403, RFC 9309 §2.3.1.3) or a redirect that could not be followed:
  everything is allowed;
* 5xx or no answer at all: nothing is allowed (§2.3.1.4), and the URLs say why.

Limitation: ``RobotFileParser`` applies the first matching rule, not the longest one that
RFC 9309 asks for; ``Allow`` lines that should beat a shorter ``Disallow`` must come first.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.robotparser import RobotFileParser

from ..url import URL

__all__ = ["MAX_CRAWL_DELAY", "MAX_SIZE", "USER_AGENT_TOKEN", "RobotsRules", "parse_robots"]

USER_AGENT_TOKEN = "wwwproxy"
MAX_SIZE = 500 * 1024
MAX_CRAWL_DELAY = 30.0  # seconds; a larger Crawl-delay would stall a fetch for hours


@dataclass(frozen=True)
class RobotsRules:
    """What one origin's robots.txt allows.  ``parser`` None means everything is allowed,
    unless ``unavailable`` says why nothing is."""

    parser: RobotFileParser | None = None
    unavailable: str | None = None

    def allowed(self, url: URL | str) -> bool:
        if self.unavailable is not None:
            return False
        if self.parser is None:
            return True
        target = url.canonical if isinstance(url, URL) else url
        return self.parser.can_fetch(USER_AGENT_TOKEN, target)

    def crawl_delay(self) -> float | None:
        """The ``Crawl-delay`` for us, capped at :data:`MAX_CRAWL_DELAY` seconds."""
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(USER_AGENT_TOKEN)
        return None if delay is None else min(float(delay), MAX_CRAWL_DELAY)


def robots_url(url: URL) -> str:
    """The robots.txt that governs ``url`` (same scheme, host and port)."""
    return f"{url.proto}://{url.hostport}/robots.txt"


def parse_robots(status: int | None, body: bytes = b"", *, error: str | None = None) -> RobotsRules:
    """The rules from a robots.txt response (``status`` None: it could not be fetched,
    ``error`` says why)."""
    if status is None:
        return RobotsRules(unavailable=f"robots.txt could not be fetched ({error or 'no answer'})")
    if 200 <= status < 300:
        parser = RobotFileParser()
        text = body[:MAX_SIZE].decode("utf-8", "replace").removeprefix("\ufeff")
        parser.parse(text.splitlines())
        return RobotsRules(parser)
    if status >= 500:
        return RobotsRules(unavailable=f"robots.txt answered {status}: the server is failing")
    return RobotsRules()
