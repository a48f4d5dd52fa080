"""``/certificates/``: the certificate authority of HTTPS interception, for browsers to trust.

The CA certificate is served as PEM (``?format=pem``) and DER (``?format=der``, what Firefox and
Android import with one click) with the steps for each browser; the private key never leaves
``<cache>/certificates/``.  The CA is made on first use, here as on the first intercepted
CONNECT."""

from __future__ import annotations

from aiohttp import web

from ..proxy.certs import CertificateAuthority, CertificateError, install_help
from .context import Context, PageError
from .template import esc, link
from .worker import in_worker

__all__ = ["page"]


async def page(ctx: Context) -> web.StreamResponse:
    directory = ctx.services.store.root / "certificates"
    try:
        ca = await in_worker(CertificateAuthority.load_or_create, directory)
    except (CertificateError, OSError) as exc:
        raise PageError(500, f"The certificate authority is not usable: {exc}") from None
    form = ctx.text("format")
    if form in ("pem", "der"):
        body, ctype = (
            (ca.cert_pem, "application/x-pem-file")
            if form == "pem"
            else (ca.cert_der, "application/x-x509-ca-cert")
        )
        return web.Response(
            body=body,
            content_type=ctype,
            headers={
                "Content-Disposition": f'attachment; filename="wwwproxy-ca.{form}"',
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            },
        )
    intercept = list(ctx.services.config.https_intercept)
    data = {
        "subject": ca.subject,
        "fingerprint_sha256": ca.fingerprint_sha256,
        "certificate": ca.cert_pem.decode("ascii"),
        "https_intercept": intercept,
        "https_bypass": list(ctx.services.config.https_bypass),
    }

    def render() -> str:
        state = (
            f"Intercepted hosts: <code>{esc(', '.join(intercept))}</code>."
            if intercept
            else "HTTPS interception is off (<code>https_intercept: []</code>): HTTPS is "
            "tunnelled and not cached. Set it on the "
            + link("/config/", "configuration page")
            + "."
        )
        return (
            f"<p>{state}</p>"
            f"<p>Certificate authority: <code>{esc(ca.subject)}</code><br>"
            f"SHA-256 fingerprint: <code>{esc(ca.fingerprint_sha256)}</code></p>"
            "<p>Download: "
            + link("/certificates/", "PEM", {"format": "pem"})
            + " · "
            + link("/certificates/", "DER", {"format": "der"})
            + "</p>"
            f"<pre>{esc(install_help(ca.cert_path.resolve()))}</pre>"
        )

    return ctx.respond(data, "HTTPS certificates", render)
