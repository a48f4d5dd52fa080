"""HTTPS interception over real sockets: a TLS origin with its own (trustme) CA given as
``upstream_ca``, the proxy's local CA trusted by the client, nothing mocked."""

from __future__ import annotations

import asyncio
import shlex
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from warcio.archiveiterator import ArchiveIterator

from wwwproxy.config import parse_config
from wwwproxy.proxy.certs import local_server_help, self_signed_certificate
from wwwproxy.url import canonicalize

from .conftest import TIMEOUT


def trusting(proxy) -> ssl.SSLContext:  # noqa: ANN001 (the conftest's Proxy)
    """A client that trusts the proxy's CA (as a browser that imported it)."""
    cafile = Path(proxy.cache) / "certificates" / "ca.cert.pem"
    return ssl.create_default_context(cafile=str(cafile))


async def fetch(proxy, url: str, context: ssl.SSLContext, **kwargs):  # noqa: ANN001, ANN201
    async with aiohttp.ClientSession(timeout=TIMEOUT, auto_decompress=False) as session:
        async with session.get(url, proxy=proxy.url, ssl=context, **kwargs) as resp:
            return resp.status, dict(resp.headers), await resp.read()


@pytest.fixture
async def intercepting(make_proxy, tls_origin):  # noqa: ANN001, ANN201
    return await make_proxy(
        https_intercept=("*",), upstream_ca=tls_origin.ca_pem, connect_ports=(tls_origin.port,)
    )


async def test_https_page_recorded_online_and_served_offline(intercepting, tls_origin):
    proxy = intercepting
    url = tls_origin.url("/page")
    context = _trust_after_first(proxy)
    status, headers, body = await fetch(proxy, url, context)
    assert status == 200 and body == b"secret GET /page "
    assert headers["X-Cache"] == "MISS"
    key = canonicalize(url).file
    assert key.startswith("https://localhost:")
    records = await proxy.recorded(url)
    assert records[1].target_uri == url
    await proxy.control(mode="offline")
    status, headers, offline = await fetch(proxy, url, context)
    assert status == 200 and offline == body and headers["X-Cache"] == "HIT"
    assert tls_origin.hits["/page"] == 1
    # the WARC file is a valid archive of an https:// URL
    path = proxy.store.path_for(canonicalize(url))
    with open(path, "rb") as f:
        uris = [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(f)]
    assert uris == [url, url]
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_offline_miss_inside_the_tunnel_is_queued(intercepting, tls_origin):
    proxy = intercepting
    await proxy.control(mode="offline")
    status, _, body = await fetch(proxy, tls_origin.url("/never"), _trust_after_first(proxy))
    assert status == 503 and b"queued" in body.lower()
    queued = [p.read_text() for p in proxy.outgoing()]
    assert len(queued) == 1 and "https://localhost:" in queued[0]
    assert tls_origin.hits["/never"] == 0


def _trust_after_first(proxy) -> ssl.SSLContext:  # noqa: ANN001
    proxy.running.server.interceptor.ca  # noqa: B018 (made on first use)
    return trusting(proxy)


async def test_keep_alive_inside_the_tunnel(intercepting, tls_origin):
    proxy = intercepting
    context = _trust_after_first(proxy)
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        for path in ("/a", "/b", "/c"):
            async with session.get(tls_origin.url(path), proxy=proxy.url, ssl=context) as r:
                body = await r.read()
                assert r.status == 200, body
                assert body == f"secret GET {path} ".encode()
    assert sum(tls_origin.hits.values()) == 3


async def test_untrusted_origin_certificate_is_a_502_never_recorded(make_proxy, tls_origin):
    # the origin's CA is not trusted
    proxy = await make_proxy(https_intercept=("*",), connect_ports=(tls_origin.port,))
    url = tls_origin.url("/page")
    status, _, body = await fetch(proxy, url, _trust_after_first(proxy))
    assert status == 502
    assert b"certificate" in body and b"localhost" in body
    # and how to trust it
    assert b"<code>upstream_ca</code>" in body and b"wwwproxy ca --test-cert HOST" in body
    assert not proxy.store.path_for(canonicalize(url)).exists()


async def test_bypassed_host_is_tunnelled_with_the_origins_certificate(make_proxy, tls_origin):
    proxy = await make_proxy(
        https_intercept=("*",),
        https_bypass=("localhost",),
        upstream_ca=tls_origin.ca_pem,
        connect_ports=(tls_origin.port,),
    )
    url = tls_origin.url("/page")
    # the client trusts only the origin's CA: it works only if the proxy did not intercept
    status, _, body = await fetch(proxy, url, tls_origin.client_context)
    assert status == 200 and body == b"secret GET /page "
    assert not proxy.store.path_for(canonicalize(url)).exists()


async def test_client_not_trusting_the_ca_fails_the_handshake(intercepting, tls_origin):
    proxy = intercepting
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await fetch(proxy, tls_origin.url("/page"), tls_origin.client_context)
    assert tls_origin.hits["/page"] == 0  # nothing was sent on its behalf


async def test_upstream_ca_takes_effect_on_reload(make_proxy, tls_origin, tmp_path):
    import dataclasses

    proxy = await make_proxy(https_intercept=("*",), connect_ports=(tls_origin.port,))
    url = tls_origin.url("/page")
    context = _trust_after_first(proxy)
    assert (await fetch(proxy, url, context))[0] == 502
    services = proxy.running.services
    services.reload(dataclasses.replace(services.config, upstream_ca=tls_origin.ca_pem))
    assert (await fetch(proxy, url, context))[0] == 200
    # a CA file that does not load is refused and changes nothing
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ValueError, match="bad.pem"):
        services.reload(dataclasses.replace(services.config, upstream_ca=bad))
    assert services.config.upstream_ca == tls_origin.ca_pem
    assert (await fetch(proxy, tls_origin.url("/again"), context))[0] == 200


async def test_the_test_certificate_recipe_works_as_printed(make_proxy, tmp_path):  # noqa: ANN001
    """``wwwproxy ca --test-cert``'s recipe, run as printed: its one-line server serves HTTPS
    with the certificate; the proxy refuses it (naming upstream_ca) until the printed
    configuration lines are in force, and then records its pages."""
    cert, key = tmp_path / "127.0.0.1.cert.pem", tmp_path / "127.0.0.1.key.pem"
    for path, data in zip((cert, key), self_signed_certificate("127.0.0.1"), strict=True):
        path.write_bytes(data)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    recipe = local_server_help("127.0.0.1", cert, key, port).splitlines()
    command = shlex.split(next(line for line in recipe if line.startswith("  python3 -c ")))
    lines = recipe[recipe.index(next(x for x in recipe if "add to its configuration" in x)) + 1 :]
    printed = parse_config("\n".join(x.strip() for x in lines if x.startswith("  ")))
    site = tmp_path / "site"
    site.mkdir()
    (site / "hello.txt").write_text("hello over TLS\n")
    server = subprocess.Popen(
        [sys.executable, *command[1:]], cwd=site, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        for _ in range(400):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                await asyncio.sleep(0.05)
                continue
            writer.close()
            break
        url = f"https://127.0.0.1:{port}/hello.txt"
        untrusting = await make_proxy(https_intercept=("127.0.0.1",), connect_ports=(443, port))
        status, _, body = await fetch(untrusting, url, _trust_after_first(untrusting))
        assert status == 502 and b"<code>upstream_ca</code>" in body
        proxy = await make_proxy(
            cache=tmp_path / "trusting",
            https_intercept=printed.https_intercept,
            upstream_ca=printed.upstream_ca,
            connect_ports=printed.connect_ports,
        )
        status, headers, body = await fetch(proxy, url, _trust_after_first(proxy))
        assert status == 200 and body == b"hello over TLS\n"
        assert headers["X-Cache"] == "MISS"
        assert proxy.store.path_for(canonicalize(url)).exists()
    finally:
        server.terminate()
        server.wait(10)
