"""One command request: its arguments, the form token, and how to answer (HTML or JSON).

Security lives here so that no page can forget it:

* every POST is a state change, and is refused unless it carries the per-session form token
  (a random value in a ``SameSite=Strict; HttpOnly`` cookie, echoed in a hidden field: a
  cross-site page can neither read it nor make the browser send the cookie), or the
  ``X-Wwwproxy-Request`` header (which a cross-site page cannot send without a CORS preflight
  that is never granted);
* with ``password:`` configured, every POST also needs it (HTTP Basic, any user name,
  constant-time comparison);
* pages carry a Content-Security-Policy that allows no script at all.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..http.policy import credential_check
from ..url import URL, InvalidURL, canonicalize
from ..url.form import FormArgs
from .template import clean, esc, layout

if TYPE_CHECKING:
    from ..archive.store import CachedEntry
    from ..recording.services import Services

__all__ = ["API_HEADER", "TOKEN_COOKIE", "Context", "PageError", "form_token"]


def form_token(secret: bytes, nonce: str) -> str:
    """The form token that goes with a cookie nonce (HMAC-SHA256, URL-safe Base64)."""
    digest = hmac.new(secret, nonce.encode("ascii", "replace"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


#: Non-browser clients (the ``wwwproxy`` CLI) send this header on state-changing requests; a
#: cross-site page cannot (a custom header needs a CORS preflight that we never grant).
API_HEADER = "X-Wwwproxy-Request"
TOKEN_COOKIE = "wwwproxy_token"
_TOKEN = re.compile(r"[A-Za-z0-9_\-]{32,64}")
PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class PageError(Exception):
    """A request the page cannot answer (bad or missing argument ...): shown as an error page
    (or JSON ``{"error": ...}``) with ``status``."""

    def __init__(self, status: int, message: str, *, title: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.title = title or {400: "Bad request", 404: "Not found"}.get(status, "Error")


def _json_default(value: object) -> object:
    return str(value)


@dataclass
class Context:
    """What a page needs to know about its request."""

    request: web.Request
    services: Services
    path: str
    args: FormArgs
    wants_json: bool
    #: the session's random nonce, kept in the token cookie
    nonce: str = ""
    new_token: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(cls, request: web.Request, services: Services, path: str, args: FormArgs) -> Context:
        accept = request.headers.get("Accept", "")
        wants_json = args.get("format") == "json" or "application/json" in accept
        cookie = request.cookies.get(TOKEN_COOKIE, "")
        if _TOKEN.fullmatch(cookie):
            return cls(request, services, path, args, wants_json, cookie, False)
        return cls(request, services, path, args, wants_json, secrets.token_urlsafe(32), True)

    @property
    def token(self) -> str:
        """The form token: an HMAC of the cookie's nonce under this proxy's own secret, so a
        cookie planted by another site on the same host (another port: cookies do not keep
        ports apart) cannot come with a matching token."""
        return form_token(self.services.form_secret, self.nonce)

    # --- arguments -------------------------------------------------------------------------

    @property
    def post(self) -> bool:
        return self.request.method == "POST"

    def text(self, key: str, default: str | None = None) -> str | None:
        """An argument as displayable text (bytes that were not UTF-8 become U+FFFD)."""
        value = self.args.get(key)
        return default if value is None else clean(value)

    def withheld(self, entry: CachedEntry) -> bool:
        """Was this copy fetched with credentials, or is it ``private``?  Then the pages show
        neither it nor its text: the proxy serves it only to a request with the same
        credentials (http.policy.credential_check), and a page of the proxy's own never
        carries a site's credentials."""
        key = self.services.engine.credential_key
        return bool(credential_check(entry.headers, entry.request_headers, key).needed)

    def url(self, key: str = "url", *, required: bool = True) -> URL | None:
        """An argument holding a URL: decoded once (by the parser), then canonicalized."""
        raw = self.args.get(key)
        if raw is None or not raw.strip():
            if required:
                raise PageError(400, f"The {key!r} argument (a URL) is missing.")
            return None
        try:
            return self.args.url(key, local_host=self.services.local_host)
        except InvalidURL as exc:
            raise PageError(
                400, f"The URL {clean(exc.url)!r} is not valid: {clean(exc.reason)}."
            ) from None

    def integer(self, key: str, default: int, lo: int, hi: int) -> int:
        """A whole-number argument within [lo, hi]; a bad one is a 400 naming it."""
        raw = self.args.get(key)
        if raw is None or raw.strip() == "":
            return default
        raw = raw.strip()
        digits = raw[1:] if raw.startswith("-") else raw
        if not raw.isascii() or not digits.isdigit():
            raise PageError(
                400, f"The {key!r} argument must be a whole number, not {clean(raw)!r}."
            )
        # a number too long to be in range is not converted (int() of a huge string is slow)
        value = int(raw) if len(digits) <= 18 else None
        if value is None or not lo <= value <= hi:
            shown = raw if len(raw) <= 40 else raw[:40] + "…"
            raise PageError(400, f"The {key!r} argument must be from {lo} to {hi}, not {shown}.")
        return value

    def flag(self, key: str) -> bool:
        return (self.args.get(key) or "").strip().lower() in ("1", "on", "yes", "true")

    # --- security --------------------------------------------------------------------------

    def password_ok(self) -> bool:
        password = self.services.config.password
        if not password:
            return True
        auth = self.request.headers.get("Authorization", "")
        if auth[:6].lower() != "basic ":
            return False
        try:
            decoded = base64.b64decode(auth[6:].strip(), validate=True)
        except (ValueError, binascii.Error):
            return False
        _, _, given = decoded.partition(b":")
        return hmac.compare_digest(given, password.encode("utf-8"))

    def csrf_ok(self) -> bool:
        if self.request.headers.get(API_HEADER):
            return True
        if self.new_token:  # no (valid) cookie: nothing to compare the form's token with
            return False
        if not self._same_origin():
            return False
        given = self.args.get("token") or ""
        return hmac.compare_digest(self.token.encode(), clean(given).encode())

    def _same_origin(self) -> bool:
        """A browser's state change must come from the proxy's own pages: its ``Origin`` (or,
        without one, its ``Referer``) names this proxy, port included."""
        source = self.request.headers.get("Origin") or self.request.headers.get("Referer")
        if not source:
            return False
        try:
            url = canonicalize(source, local_host=self.services.local_host)
        except InvalidURL:
            return False
        return url.proto == "http" and self.services.is_own(url)

    def refuse_post(self) -> web.Response | None:
        """The answer refusing this POST, or None when it may go ahead."""
        if not self.password_ok():
            return self.error_response(
                401,
                "Password needed",
                "This proxy's control actions need its password.",
                headers={"WWW-Authenticate": 'Basic realm="wwwproxy", charset="UTF-8"'},
            )
        if not self.csrf_ok():
            return self.error_response(
                403,
                "Refused",
                "Refused: the form token is missing or wrong. Actions must come from this "
                "proxy's own pages; reload the page and try again.",
            )
        return None

    # --- answers ---------------------------------------------------------------------------

    def _finish(self, response: web.Response) -> web.Response:
        for name, value in {**_NO_STORE, **self.headers}.items():
            response.headers.setdefault(name, value)
        if self.new_token:
            response.set_cookie(
                TOKEN_COOKIE, self.nonce, httponly=True, samesite="Strict", path="/"
            )
        return response

    def json_response(self, data: Any, status: int = 200) -> web.Response:
        text = json.dumps(data, ensure_ascii=False, default=_json_default, indent=1)
        response = web.Response(
            status=status, text=clean(text), content_type="application/json", charset="utf-8"
        )
        return self._finish(response)

    def html_response(
        self,
        title: str,
        body: str,
        status: int = 200,
        *,
        active: str = "",
        query: str = "",
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        text = layout(
            title, body, mode=self.services.mode.value, active=active or self.path, query=query
        )
        response = web.Response(
            status=status, text=text, content_type="text/html", charset="utf-8", headers=headers
        )
        response.headers["Content-Security-Policy"] = PAGE_CSP
        return self._finish(response)

    def respond(
        self,
        data: Any,
        title: str,
        render: Callable[[], str],
        status: int = 200,
        *,
        active: str = "",
        query: str = "",
    ) -> web.Response:
        """JSON of ``data`` or the HTML page ``render()`` makes, as the client asked."""
        if self.wants_json:
            return self.json_response(data, status)
        return self.html_response(title, render(), status, active=active, query=query)

    def error_response(
        self, status: int, title: str, message: str, *, headers: dict[str, str] | None = None
    ) -> web.Response:
        if self.wants_json:
            response = self.json_response({"error": message, "status": status}, status)
            response.headers.update(headers or {})
            return response
        body = f'<div class="msg error">{esc(message)}</div><p><a href="/">Home</a></p>'
        return self.html_response(title, body, status, headers=headers)
