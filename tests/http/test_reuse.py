"""Which capture of a URL answers a request when its answers vary (RFC 9111 §4.1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wwwproxy.http.reuse import replaces, select_variant, vary_matches

VARY_FOO = [("Vary", "Foo")]


def capture(foo: str | None, vary: str | None = "Foo", **other: str):
    """(response headers, recorded request headers) of a capture made for ``Foo: foo``."""
    response = [("Cache-Control", "max-age=5000")] + ([("Vary", vary)] if vary else [])
    request = ([("Foo", foo)] if foo is not None else []) + list(other.items())
    return response, request


@pytest.mark.parametrize(
    ("stored", "new_request", "expected"),
    [
        (capture("1"), [("Foo", "1")], True),  # the same variant again: it replaces
        (capture("1"), [("Foo", "2")], False),  # vary-invalidate: another variant sits beside
        (capture("1"), [], False),
        (capture(None), [], True),  # vary-omit-stored: both without Foo
        (capture("1", vary=None), [("Foo", "2")], True),  # no Vary: one variant only
        (capture("1", vary="*"), [("Foo", "1")], False),  # Vary: * never matches anything
    ],
)
def test_replaces(stored, new_request, expected):
    assert replaces(*stored, new_request) is expected


# captures newest first, request -> index of the capture served (None: fetch)
VARIANTS = [
    ([], [("Foo", "1")], None),
    ([capture("1")], [("Foo", "1")], 0),  # vary-match
    ([capture("1")], [("Foo", "2")], None),  # vary-no-match
    ([capture("2"), capture("1")], [("Foo", "1")], 1),  # vary-invalidate: the first is kept
    ([capture("2"), capture("1")], [("Foo", "2")], 0),
    ([capture("2"), capture("1")], [("Foo", "3")], None),
    ([capture("1"), capture("1")], [("Foo", "1")], 0),  # refetched: the newest
    ([capture("1", vary=None), capture("2")], [("Foo", "2")], 0),  # no longer varies
    ([capture("1", Other="2"), capture("1")], [("Foo", "1"), ("Other", "3")], 0),  # cache-key
    # the Vary changed: the new answer for Foo: 1 (Vary: Bar) rules the old Foo: 1 one out
    ([capture("1", vary="Bar", Bar="a"), capture("1")], [("Foo", "1"), ("Bar", "b")], None),
    ([capture("1", vary="Bar", Bar="a"), capture("1")], [("Foo", "1"), ("Bar", "a")], 0),
    ([capture("1", vary="*"), capture("1")], [("Foo", "1")], None),  # Vary: * replaced it
]


@pytest.mark.parametrize(("captures", "request_headers", "expected"), VARIANTS)
def test_select_variant(captures, request_headers, expected):
    assert select_variant(captures, request_headers) == expected


FOO = st.sampled_from(["1", "2", "3"])


@given(st.lists(st.tuples(FOO, st.sampled_from(["Foo", None])), max_size=6), FOO)
def test_the_selected_variant_fits_and_nothing_newer_fits(history, foo):
    captures = [capture(f, vary=v) for f, v in history]
    request = [("Foo", foo)]
    index = select_variant(captures, request)
    fits = [vary_matches(h, r, request) for h, r in captures]
    if index is None:
        assert not any(fits) or fits.index(True) > 0
    else:
        assert fits[index] and not any(fits[:index])
