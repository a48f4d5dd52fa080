"""What an unsafe request makes stale (RFC 9111 §4.4); rows name the suite's invalidate-* tests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wwwproxy.http.invalidation import invalidated_urls, invalidates
from wwwproxy.url import canonicalize

TARGET = canonicalize("http://127.0.0.1:8000/test/abc?x=1")
LOC = "http://127.0.0.1:8000/test/location_target"
CL = "http://127.0.0.1:8000/test/content_location_target"


@pytest.mark.parametrize(
    ("method", "status", "expected"),
    [
        ("POST", 200, True),  # invalidate-POST
        ("PUT", 201, True),  # invalidate-PUT
        ("DELETE", 204, True),  # invalidate-DELETE
        ("M-SEARCH", 200, True),  # invalidate-M-SEARCH: an unknown method may change things
        ("PATCH", 303, True),  # 3xx is not an error
        ("post", 200, True),
        ("POST", 500, False),  # invalidate-POST-failed
        ("PUT", 500, False),  # invalidate-PUT-failed
        ("DELETE", 404, False),  # invalidate-DELETE-failed
        ("M-SEARCH", 500, False),  # invalidate-M-SEARCH-failed
        ("POST", 100, False),  # not a final answer
        ("GET", 200, False),  # safe methods (RFC 9110 §9.2.1)
        ("HEAD", 200, False),
        ("OPTIONS", 200, False),
        ("TRACE", 200, False),
    ],
)
def test_invalidates(method, status, expected):
    assert invalidates(method, status) is expected
    urls = invalidated_urls(method, status, TARGET)
    assert urls == ((TARGET,) if expected else ())


@pytest.mark.parametrize(
    ("location", "content_location", "expected"),
    [
        (None, None, []),
        (LOC, None, [LOC]),  # invalidate-POST-location (and -PUT-, -DELETE-, -M-SEARCH-)
        (None, CL, [CL]),  # invalidate-POST-cl (and the others)
        (LOC, CL, [LOC, CL]),
        ("location_target", "content_location_target", [LOC, CL]),  # relative to the target
        ("/other?y=2", None, ["http://127.0.0.1:8000/other?y=2"]),
        ("HTTP://127.0.0.1:8000/test/location_target", None, [LOC]),  # canonical form
        ("http://127.0.0.1:8001/x", "http://example.com/x", []),  # another origin: not ours
        ("https://127.0.0.1:8000/x", None, []),  # another scheme is another origin
        ("http://[::1", None, []),  # unreadable
        ("", "  ", []),
        ("abc?x=1", None, []),  # the target itself: once
    ],
)
def test_location_and_content_location(location, content_location, expected):
    urls = invalidated_urls("POST", 200, TARGET, location, content_location)
    assert urls[0] == TARGET
    assert [u.canonical for u in urls[1:]] == expected
    assert invalidated_urls("POST", 500, TARGET, location, content_location) == ()


@given(
    method=st.sampled_from(["GET", "POST", "PUT", "M-SEARCH", "HEAD"]),
    status=st.integers(min_value=100, max_value=599),
    location=st.none() | st.text(max_size=30),
    content_location=st.none() | st.text(max_size=30),
)
def test_only_the_targets_origin_is_ever_invalidated(method, status, location, content_location):
    urls = invalidated_urls(method, status, TARGET, location, content_location)
    assert all((u.proto, u.host, u.port) == ("http", "127.0.0.1", 8000) for u in urls)
    assert len({u.canonical for u in urls}) == len(urls)
    assert bool(urls) is invalidates(method, status)
