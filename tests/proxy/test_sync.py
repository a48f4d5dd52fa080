"""The ``sync`` setting through a running proxy: in every mode a page the browser has whole is
in the archive (written, and for ``group`` and ``flush`` on disk) when its last byte arrives,
and a reload changes the mode."""

from __future__ import annotations

import dataclasses

import pytest

from wwwproxy.fsutil import BackgroundSync, GroupSync


@pytest.mark.parametrize(
    ("mode", "kind", "flushed"),
    [
        ("write", BackgroundSync, False),
        ("group", GroupSync, True),
        ("flush", GroupSync, True),
    ],
)
async def test_a_page_the_browser_has_is_recorded_in_every_sync_mode(
    make_proxy, origin, mode, kind, flushed
):
    proxy = await make_proxy(sync=mode)
    store = proxy.store
    assert store.sync_mode == mode and type(store.sync) is kind
    url = origin.url("/page.html")
    reply = await proxy.get(url)
    assert (reply.status, reply.body) == (200, origin.HTML)
    records = proxy.records(url)  # read back with warcio at once
    assert [r.rec_type for r in records] == ["request", "response"]
    assert records[1].payload.endswith(origin.HTML)
    helper = store.record_helper  # the proxy records pages in its helper process
    assert helper is not None and helper.pid is not None and helper.failures == 0
    if flushed:  # on disk before the last byte (write: within a second, in the background)
        assert helper.flushes >= 1


async def test_a_reload_changes_the_sync_mode(make_proxy, origin):
    proxy = await make_proxy()
    services = proxy.running.services
    assert proxy.store.sync_mode == "write"
    services.reload(dataclasses.replace(services.config, sync="flush"))
    assert proxy.store.sync_mode == "flush"
    reply = await proxy.get(origin.url("/page.html"))
    assert reply.status == 200 and proxy.store.record_helper.flushes == 1
