"""The fetch tests' local site (:mod:`tests.fetch.conftest`), for the sub-commands too; and
``named``: the site as example.com and friends on port 80, for every command."""

from __future__ import annotations

from typing import Any

import pytest

from ..fetch.conftest import STATIC, MapResolver, Site, site

__all__ = ["STATIC", "MapResolver", "Site", "named", "site"]


@pytest.fixture
def named(site: Site, monkeypatch: pytest.MonkeyPatch) -> Site:  # noqa: F811 (the fixture)
    """The site, also as example.com, www.example.com, ... on port 80 for every fetch the
    commands make through :func:`wwwproxy.recording.wiring.open_services`."""
    from wwwproxy.recording import wiring

    original = wiring.open_services

    def open_services(config: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("resolver", MapResolver(site.port))
        return original(config, **kwargs)

    monkeypatch.setattr(wiring, "open_services", open_services)
    return site
