"""The crawler's rules as pure functions: scope, levels and roles, redirects, options."""

from __future__ import annotations

import pytest

from wwwproxy.fetch.links import Link
from wwwproxy.fetch.tasks import FetchOptions, Role, Task, in_scope, next_tasks, redirect_task

ROOT = "http://www.example.com/docs/"


@pytest.mark.parametrize(
    ("scope", "url", "expected"),
    [
        ("host", "http://www.example.com/other", True),
        ("host", "https://www.example.com:8443/x", True),  # same host name: port/scheme ignored
        ("host", "http://cdn.example.com/x", False),
        ("domain", "http://cdn.example.com/x", True),
        ("domain", "http://example.org/x", False),
        ("any", "http://example.org/x", True),
    ],
)
def test_scope(scope: str, url: str, expected: bool) -> None:
    assert in_scope(url, ROOT, FetchOptions(scope=scope)) is expected


def test_prefix_scope() -> None:
    options = FetchOptions(scope="prefix", limits=("http://www.example.com/docs", "http://x.org/"))
    assert in_scope("http://www.example.com/docs/a", ROOT, options)
    assert in_scope("http://www.example.com/docs?page=2", ROOT, options)
    assert not in_scope("http://www.example.com/docs2", ROOT, options)
    assert not in_scope("http://example.org/docs/a", ROOT, options)
    assert in_scope("http://x.org/a", ROOT, options)  # a prefix on another host is its own


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="scope"):
        FetchOptions(scope="planet")
    with pytest.raises(ValueError, match="limit"):
        FetchOptions(scope="prefix", limits=("ftp://example.com/",))
    with pytest.raises(ValueError, match="prefix"):
        FetchOptions(scope="prefix")
    with pytest.raises(ValueError, match="prefix"):
        FetchOptions(limits=("http://example.com/",))
    with pytest.raises(ValueError, match="depth"):
        FetchOptions(depth=-1)
    with pytest.raises(ValueError, match="at least 1"):
        FetchOptions(per_host=0)


LINKS = [
    Link("http://www.example.com/page", "a", False),
    Link("http://other.example/page", "a", False),
    Link("http://other.example/img.png", "img", True),
    Link("http://www.example.com/frame.html", "frame", True),
]


def test_next_tasks_levels_roles_and_scope() -> None:
    page = Task(ROOT, 0, Role.SEED, ROOT)
    got = next_tasks(page, LINKS, FetchOptions(depth=1, requisites=True))
    assert got == [
        Task("http://www.example.com/page", 1, Role.LINK, ROOT),
        Task("http://other.example/img.png", 0, Role.REQUISITE, ROOT),  # any host
        Task("http://www.example.com/frame.html", 0, Role.REQUISITE, ROOT),
    ]


def test_without_requisites_frames_are_followed_as_links() -> None:
    page = Task(ROOT, 0, Role.SEED, ROOT)
    got = next_tasks(page, LINKS, FetchOptions(depth=1))
    assert [t.url for t in got] == [
        "http://www.example.com/page",
        "http://www.example.com/frame.html",
    ]
    assert all(t.level == 1 and t.role is Role.LINK for t in got)


def test_at_the_last_level_only_requisites_follow() -> None:
    page = Task(ROOT, 2, Role.LINK, ROOT)
    assert next_tasks(page, LINKS, FetchOptions(depth=2)) == []
    got = next_tasks(page, LINKS, FetchOptions(depth=2, requisites=True))
    assert {t.role for t in got} == {Role.REQUISITE}
    assert {t.level for t in got} == {2}


def test_redirects() -> None:
    options = FetchOptions(max_redirects=2)
    seed = Task("http://a.example/x", 0, Role.SEED, "http://a.example/x")
    hop = redirect_task(seed, 301, "https://b.example/y#frag", options)
    assert hop is not None and hop.task is not None
    # a listed URL's redirect goes anywhere, and the target becomes the scope's root
    assert hop.task == Task("https://b.example/y", 0, Role.SEED, "https://b.example/y", 1)
    link = Task("http://a.example/x", 1, Role.LINK, "http://a.example/")
    off = redirect_task(link, 302, "http://b.example/", options)
    assert off is not None and off.task is None and not off.failed
    assert "out of scope" in (off.problem or "")
    within = redirect_task(link, 307, "../z", options)
    assert within is not None and within.task is not None
    assert within.task.url == "http://a.example/z" and within.task.root == "http://a.example/"
    assert redirect_task(link, 200, "/elsewhere", options) is None
    assert redirect_task(link, 304, "/elsewhere", options) is None
    missing = redirect_task(link, 302, None, options)
    assert missing is not None and missing.failed
    far = Task("http://a.example/x", 0, Role.REQUISITE, "http://a.example/", hops=2)
    too_many = redirect_task(far, 302, "/y", options)
    assert too_many is not None and too_many.failed and "too many" in (too_many.problem or "")


def test_follow_and_requisite_kinds_narrow_what_is_taken() -> None:
    """What /refresh/ asks for: only these hyperlink kinds, only these requisite kinds."""
    links = [
        *LINKS,
        Link("http://www.example.com/feed", "link", False),
        Link("http://www.example.com/next", "meta-refresh", False),
        Link("http://www.example.com/app.js", "script", True),
    ]
    page = Task(ROOT, 0, Role.SEED, ROOT)
    options = FetchOptions(
        depth=1,
        requisites=True,
        follow=frozenset({"a", "meta-refresh"}),
        requisite_kinds=frozenset({"img"}),
    )
    got = next_tasks(page, links, options)
    assert [(t.url, t.role) for t in got] == [
        ("http://www.example.com/page", Role.LINK),
        ("http://other.example/img.png", Role.REQUISITE),
        ("http://www.example.com/next", Role.LINK),
    ]
    with pytest.raises(ValueError, match="max_urls"):
        FetchOptions(max_urls=0)
