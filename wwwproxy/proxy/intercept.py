"""HTTPS interception: after a CONNECT, the TLS handshake with the browser is ours.

For a host that ``https_intercept`` names (and ``https_bypass`` does not), the proxy answers the
CONNECT with 200, takes the browser's TLS handshake with a leaf certificate for that host signed
by the local CA (:mod:`.certs`), and then serves the connection with the same aiohttp request
handler as plain HTTP: every request inside is handled exactly like a plain-HTTP one whose URL
is ``https://host[:port]/...`` (recorded, served offline, queued, revalidated), with keep-alive.

aiohttp has no public API for upgrading a connection it serves, so two of its internals are
used, in one place: the request handler's ``_manager`` (the :class:`aiohttp.web.Server` that
makes handlers) and the handler's ``_task_handler`` (to know when the inner connection ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from .certs import CertificateAuthority, CertificateError

__all__ = ["Interceptor", "Target"]

log = logging.getLogger("wwwproxy.proxy")

HANDSHAKE_TIMEOUT = 15.0


@dataclass(frozen=True)
class Target:
    """The CONNECT target an intercepted connection's requests are for."""

    host: str  # without brackets
    port: int

    def origin(self) -> str:
        """``https://host[:port]``, the scheme and authority of every URL inside."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}" if self.port == 443 else f"https://{host}:{self.port}"


class Interceptor:
    """The local CA (made on first use) and the connections being intercepted."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._ca: CertificateAuthority | None = None
        #: the TLS transport of each intercepted connection -> its CONNECT target
        self._targets: dict[asyncio.BaseTransport, Target] = {}

    @property
    def ca(self) -> CertificateAuthority:
        if self._ca is None:
            self._ca = CertificateAuthority.load_or_create(self._directory)
        return self._ca

    def target_of(self, request: web.BaseRequest) -> Target | None:
        """The CONNECT target when ``request`` came inside an intercepted connection."""
        transport = request.transport
        return self._targets.get(transport) if transport is not None else None

    async def intercept(
        self, request: web.Request, target: Target, closing: asyncio.Event
    ) -> web.StreamResponse:
        """Answer the CONNECT, take the browser's handshake, serve the requests inside until the
        browser closes the connection or ``closing`` is set (the server's shutdown)."""
        try:
            context = await self.ca.leaf_context_async(target.host)
        except (CertificateError, OSError, ValueError) as exc:
            log.error("cannot intercept %s: %s", target.origin(), exc)
            from .pages import page_response

            return page_response(
                502,
                "Cannot intercept",
                "The proxy's certificate authority is not usable; see its log.",
            )
        response = web.StreamResponse(status=200, reason="Connection Established")
        response.force_close()
        raw = request.transport
        protocol = request.protocol
        manager = getattr(protocol, "_manager", None)
        if raw is None or manager is None:
            return response
        try:
            await response.prepare(request)
        except (ConnectionError, OSError):
            return response
        loop = asyncio.get_running_loop()
        inner = manager()  # a new aiohttp request handler, as for a new connection
        try:
            tls = await loop.start_tls(
                raw,
                inner,
                context,
                server_side=True,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT,
            )
        except (ssl.SSLError, ConnectionError, OSError, TimeoutError) as exc:
            # a browser that does not trust the CA ends here: nothing was sent to it
            log.info("TLS handshake for %s failed: %s", target.origin(), exc)
            raw.close()
            return response
        if tls is None:
            raw.close()
            return response
        self._targets[tls] = target
        try:
            inner.connection_made(tls)
            served = getattr(inner, "_task_handler", None)
            waiters: set[asyncio.Future[object]] = {asyncio.ensure_future(closing.wait())}
            if served is not None:
                waiters.add(served)
            else:  # pragma: no cover (an aiohttp without the attribute: poll)
                waiters.add(asyncio.ensure_future(_closed(tls)))
            done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                if task is not served:
                    task.cancel()
        finally:
            self._targets.pop(tls, None)
            with contextlib.suppress(Exception):
                tls.close()
        return response


async def _closed(transport: asyncio.BaseTransport) -> None:
    while not transport.is_closing():
        await asyncio.sleep(0.5)
