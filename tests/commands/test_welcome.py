"""``/``: the welcome page's figures and links."""

from __future__ import annotations


async def test_welcome_counts_and_links(client, origin, fetch, visible):
    status, data = await client.get_json("/")
    assert status == 200 and data["pages"] == 0 and data["hosts"] == 0
    assert data["last_fetch"] is None
    for path in ("/a.html", "/b.html", "/img.png"):
        await fetch(origin.url(path))
    status, data = await client.get_json("/")
    assert data["pages"] == 3 and data["hosts"] == 1 and data["size"] > 0
    assert data["mode"] == "online" and data["queued"] == 0
    assert data["search_indexed"] == 3 and data["search_with_text"] == 2
    status, text, _ = await client.get("/")
    shown = visible(text)
    assert "3 pages cached" in shown and "1 hosts" in shown
    for path in ("/index/", "/search/", "/history/", "/outgoing/", "/refresh/", "/delete/"):
        assert f'href="{path}"' in text
    assert 'href="/control/"' in text and 'href="/config/"' in text
