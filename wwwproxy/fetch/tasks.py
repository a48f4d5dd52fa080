"""What a fetch run works with and decides, as pure functions: its options, the tasks (a URL at
a level, reached as a listed URL, a hyperlink or a requisite), what one page or one redirect
leads to (levels, scope, redirects: the rules in :mod:`wwwproxy.fetch.prefetch`), and the
results and summary of a run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from urllib.parse import urljoin

from .. import __version__
from ..archive.store import StoreError
from ..recording.upstream import UpstreamError
from ..url import InvalidURL, canonicalize
from .links import Link
from .scope import canonical_host, same_domain, same_host, under_prefix

__all__ = [
    "FRAME_KINDS",
    "REDIRECT_STATUSES",
    "SCOPES",
    "USER_AGENT",
    "FetchOptions",
    "Outcome",
    "Redirect",
    "RenderReport",
    "Result",
    "Role",
    "Summary",
    "Task",
    "fetch_problem",
    "in_scope",
    "next_tasks",
    "redirect_task",
]

USER_AGENT = f"wwwproxy/{__version__} (prefetch)"
SCOPES = ("host", "domain", "any", "prefix")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
FRAME_KINDS = frozenset({"frame", "iframe"})


# --- options and tasks ------------------------------------------------------------------------


@dataclass(frozen=True)
class FetchOptions:
    depth: int = 0
    requisites: bool = False
    scope: str = "host"
    limits: tuple[str, ...] = ()
    concurrency: int = 4
    per_host: int = 2
    delay: float = 0.0
    force: bool = False
    refresh_seeds: bool = False  # reload the listed URLs even if fresh (monitor, /refresh/)
    robots: bool = True
    max_redirects: int = 10
    user_agent: str = USER_AGENT
    #: link kinds followed for ``depth`` (None: every hyperlink, frames too without requisites)
    follow: frozenset[str] | None = None
    #: requisite kinds fetched with ``requisites`` (None: all of them)
    requisite_kinds: frozenset[str] | None = None
    #: at most this many URLs in one run (None: no cap)
    max_urls: int | None = None

    def __post_init__(self) -> None:
        if self.depth < 0:
            raise ValueError(f"depth must be 0 or more, not {self.depth}")
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {self.scope!r}")
        if self.concurrency < 1 or self.per_host < 1:
            raise ValueError("concurrency and the per-host limit must be at least 1")
        if not self.delay >= 0:
            raise ValueError(f"delay must be 0 or more seconds, not {self.delay}")
        if self.max_redirects < 0:
            raise ValueError("max_redirects must be 0 or more")
        if self.max_urls is not None and self.max_urls < 1:
            raise ValueError("max_urls must be at least 1")
        limits = []
        for prefix in self.limits:
            try:
                url = canonicalize(prefix)
            except InvalidURL as exc:
                raise ValueError(f"limit {prefix!r}: {exc.reason}") from None
            if url.local or url.proto not in ("http", "https"):
                raise ValueError(f"limit {prefix!r} is not an http or https URL")
            limits.append(url.file)
        if (self.scope == "prefix") != bool(limits):
            raise ValueError("the prefix scope goes with limits (--limit PREFIX), and only it")
        object.__setattr__(self, "limits", tuple(limits))


class Role(Enum):
    SEED = "seed"  # listed by the user (or queued, or monitored): no robots.txt, no scope
    LINK = "link"  # a hyperlink followed for depth: scope and robots.txt
    REQUISITE = "requisite"  # something a page needs: robots.txt, any host


@dataclass(frozen=True)
class Task:
    url: str  # canonical, the GET archive key
    level: int
    role: Role
    root: str  # the URL whose host/domain the scope is measured from
    hops: int = 0  # redirects followed to get here
    #: the path and query to send as the list wrote them (:func:`~wwwproxy.url.wire_target`);
    #: None: the canonical URL's (links and redirects: the crawl goes by canonical URLs)
    target: str | None = None


class Outcome(Enum):
    FETCHED = "fetched"
    FRESH = "fresh"
    FAILED = "failed"
    ROBOTS = "robots"


@dataclass(frozen=True)
class Result:
    url: str
    outcome: Outcome
    status: int | None = None
    size: int = 0  # payload bytes fetched
    problem: str | None = None  # why it failed / was skipped
    method: str = "GET"
    #: a queued request that failed ``queue_failures`` times and left the queue
    dropped: bool = False

    @property
    def label(self) -> str:
        return self.url if self.method == "GET" else f"{self.method} {self.url}"

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.FETCHED, Outcome.FRESH)


@dataclass(frozen=True)
class RenderReport:
    """What rendering a page in the browser (``--render``) made it load beside its document:
    ``requests`` in all, ``fetched`` from the network, ``from_cache``, ``failed`` (no answer,
    or 4xx/5xx); ``capped``: stopped at the time cap; ``problem``: not rendered at all."""

    requests: int = 0
    fetched: int = 0
    from_cache: int = 0
    failed: int = 0
    capped: bool = False
    problem: str | None = None


@dataclass
class Summary:
    results: dict[str, Result] = field(default_factory=dict)
    elapsed: float = 0.0
    #: URLs found but left out: the run had taken on ``max_urls`` already
    capped: int = 0
    #: pages with more links than ``max_links_per_page``: how many references were left unread
    links_left_out: dict[str, int] = field(default_factory=dict)
    #: pages rendered in the browser (``--render``): what each loaded
    rendered: dict[str, RenderReport] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(r.size for r in self.results.values())

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results.values() if r.outcome is Outcome.FAILED]

    def counts(self) -> dict[str, int]:
        out = {o.value: 0 for o in Outcome}
        for r in self.results.values():
            out[r.outcome.value] += 1
        out["total"] = len(self.results)
        return out

    def urls(self, *outcomes: Outcome) -> set[str]:
        """The URLs (archive keys) with these outcomes (all, if none given)."""
        return {r.url for r in self.results.values() if not outcomes or r.outcome in outcomes}


# --- the rules (pure) -------------------------------------------------------------------------


def in_scope(url: str, root: str, options: FetchOptions) -> bool:
    """Whether a hyperlink to ``url``, reached from the listed URL ``root``, is followed
    (both canonical, ``URL.file``: their hosts are read off the strings)."""
    if options.scope == "prefix":
        return any(under_prefix(url, p) for p in options.limits)
    if options.scope == "host":
        host, root_host = canonical_host(url), canonical_host(root)
        if host is not None and root_host is not None:
            return host == root_host
        return same_host(url, root)
    if options.scope == "domain":
        return same_domain(url, root)
    return True


def _wanted_requisite(link: Link, options: FetchOptions) -> bool:
    if not (link.requisite and options.requisites):
        return False
    return options.requisite_kinds is None or link.kind in options.requisite_kinds


def _followed(link: Link, options: FetchOptions) -> bool:
    if options.follow is not None:
        return link.kind in options.follow
    return not link.requisite or link.kind in FRAME_KINDS


def next_tasks(task: Task, links: Iterable[Link], options: FetchOptions) -> list[Task]:
    """What a page (fetched for ``task``) leads to."""
    out = []
    follow = task.level < options.depth
    for link in links:
        if link.url == task.url:
            continue
        if _wanted_requisite(link, options):
            out.append(Task(link.url, task.level, Role.REQUISITE, task.root))
        elif follow and _followed(link, options) and in_scope(link.url, task.root, options):
            out.append(Task(link.url, task.level + 1, Role.LINK, task.root))
    return out


@dataclass(frozen=True)
class Redirect:
    """Where a 3xx leads: ``task`` to follow, or ``problem`` (a failure if ``failed``)."""

    task: Task | None = None
    problem: str | None = None
    failed: bool = False


def redirect_task(
    task: Task, status: int, location: str | None, options: FetchOptions
) -> Redirect | None:
    """The next hop of a redirect response for ``task``; None if ``status`` is no redirect."""
    if status not in REDIRECT_STATUSES:
        return None
    if not location or not location.strip():
        return Redirect(problem=f"{status} without a Location header", failed=True)
    try:
        target = canonicalize(urljoin(task.url, location.strip())).file
    except (InvalidURL, ValueError):
        return Redirect(problem=f"{status} to an invalid Location {location!r}", failed=True)
    if not target.startswith(("http://", "https://")):
        return Redirect(problem=f"redirect to {target} (not http or https)", failed=True)
    if task.hops + 1 > options.max_redirects:
        return Redirect(
            problem=f"too many redirects (more than {options.max_redirects})", failed=True
        )
    if task.role is Role.SEED:
        return Redirect(Task(target, task.level, Role.SEED, target, task.hops + 1))
    if task.role is Role.LINK and not in_scope(target, task.root, options):
        return Redirect(problem=f"redirect to {target} not followed (out of scope)")
    return Redirect(Task(target, task.level, task.role, task.root, task.hops + 1))


def fetch_problem(exc: UpstreamError | StoreError) -> str:
    """What a failed fetch says: why the origin could not be reached, or why the answer was
    not recorded."""
    return exc.reason if isinstance(exc, UpstreamError) else f"not recorded: {exc}"
