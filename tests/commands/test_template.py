"""The page layout: tab titles and escaping."""

from __future__ import annotations

from wwwproxy.commands.template import layout


def test_tab_titles() -> None:
    assert "<title>wwwproxy</title>" in layout("wwwproxy", "", mode="online")
    assert "<title>Search - wwwproxy</title>" in layout("Search", "", mode="online")
    page = layout("<x>", "", mode="online")
    assert "<title>&lt;x&gt; - wwwproxy</title>" in page and "<x>" not in page
