"""What the index pages keep between requests: at most MAX_LISTED host rows in all, and a
listing nobody looked at lately let go."""

from __future__ import annotations

from wwwproxy.archive.store import Store
from wwwproxy.commands import listing as listing_module
from wwwproxy.commands.listing import host_window, release_idle

from .test_index_paging import fill


def test_kept_rows_are_bounded_and_idle_listings_let_go(tmp_path, monkeypatch):
    store = Store(tmp_path / "cache")
    fill(store, "big.example", 30)
    fill(store, "small.example", 10)
    view = listing_module._view(store)  # noqa: SLF001
    monkeypatch.setattr(listing_module, "MAX_LISTED", 35)
    window = host_window(store, "http", "small.example")
    assert window.total == 10
    assert set(view.listings) == {("http", "small.example")}
    window = host_window(store, "http", "big.example")
    assert window.total == 30 and len(window.pages) == 30
    # both together are over the bound: the one asked for least recently goes
    assert set(view.listings) == {("http", "big.example")}
    monkeypatch.setattr(listing_module, "MAX_LISTED", 20)
    window = host_window(store, "http", "big.example", number=1, per=7)
    assert (
        window.total == 30
        and [p.key for p in window.pages]
        == sorted(p.key for p in host_window(store, "http", "big.example", per=100).pages)[:7]
    )
    assert view.listings == {}  # larger than the bound on its own: shown, not kept
    monkeypatch.setattr(listing_module, "MAX_LISTED", 1000)
    host_window(store, "http", "small.example")
    release_idle(store)
    assert set(view.listings) == {("http", "small.example")}  # asked for just now: kept
    monkeypatch.setattr(listing_module, "LISTING_IDLE", 0.0)
    release_idle(store)
    assert view.listings == {}
    assert host_window(store, "http", "small.example").total == 10  # made again when asked
