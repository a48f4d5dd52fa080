"""``/certificates/``: the HTTPS interception CA for browsers to trust; never its key."""

from __future__ import annotations

import re

from cryptography import x509


async def test_certificate_page_serves_pem_der_and_the_steps(client, proxy, visible):
    status, data = await client.get_json("/certificates/")
    assert status == 200
    pem = data["certificate"].encode()
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert data["https_intercept"] == []
    status, text, headers = await client.get("/certificates/?format=pem")
    assert status == 200 and text.encode() == pem
    assert "attachment" in headers["Content-Disposition"]
    async with client.session.get(client.url("/certificates/?format=der"), **client._kw({})) as r:
        der = await r.read()
    assert x509.load_der_x509_certificate(der) == cert
    status, text, _ = await client.get("/certificates/")
    page = visible(text)
    assert "certutil" in page and "Firefox" in page and data["fingerprint_sha256"] in page
    assert "interception is off" in page
    # the private key is never served, whatever is asked
    key = (proxy.services.store.root / "certificates" / "ca.key.pem").read_text()
    for path in ("/certificates/", "/certificates/?format=key", "/certificates/?format=json"):
        _, body, _ = await client.get(path)
        assert "PRIVATE KEY" not in body and key not in body


async def test_certificate_page_wraps_its_long_lines(client):
    """The steps hold long commands and paths: they wrap instead of making the page scroll
    sideways (every <pre> on the page is wrapped by the pages' style)."""
    _, text, _ = await client.get("/certificates/")
    assert "<pre>" in text
    style = re.search(r"<style>(.*?)</style>", text, re.S)
    assert style is not None
    rule = re.search(r"(?:^|[}\s])pre\{([^}]*)\}", style.group(1))
    assert rule is not None and "white-space:pre-wrap" in rule.group(1)
    assert "overflow-wrap:anywhere" in rule.group(1)
