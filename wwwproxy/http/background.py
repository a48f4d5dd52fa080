"""The browsers' and operating systems' own background requests, and what waits in the queue.

A browser left running offline asks, on its own, for update checks, the time, safe-browsing
lists, telemetry uploads and connectivity checks; queued, they would bury the few pages a
person asked for, and fail again at every fetch of the queue (a check's answer is only useful
at the moment it is asked).  :data:`ENDPOINTS` lists them, each with who sends it and why; an
offline miss of one is answered at once and never queued (``queue_background: true`` queues
them like any other request).  ``docs/background-requests.md`` is the same list for people.

**Connectivity and captive-portal checks** are answered as the client expects when there is
no portal (Firefox's ``success``, Android's and Chromium's ``204``, Apple's ``Success`` page,
NetworkManager's ``NetworkManager is online``).  Offline, a browser that believes it is online
behind no portal is right to go on asking the proxy for pages: the proxy answers from its cache.
A refusal would make it believe a captive portal is in the way and show a "log in to the
network" notice or open a portal tab, which is wrong.  When the proxy is online but the check's
server cannot be reached, no such answer is made up: the check gets the proxy's plain 503.

**The rest** (updates, telemetry, safe browsing, remote settings ...) get a 503 saying the
proxy is offline: the client retries on its own schedule, online.

Which offline misses are queued at all is :func:`queue_refusal`: not one ``dont_queue`` names,
not a background request (unless ``queue_background``), not a method ``queue_methods`` leaves
out (by default only GET and HEAD: a form's POST answered from nowhere is not worth replaying
hours later, and Chromium's update checks are POSTs with a new body each time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..url import URL
from .filters import PatternSet, Verdict, parse_pattern

__all__ = [
    "ENDPOINTS",
    "Answer",
    "Endpoint",
    "Refusal",
    "background_endpoint",
    "queue_refusal",
]


@dataclass(frozen=True)
class Answer:
    """What a connectivity check expects when there is no captive portal."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain"


@dataclass(frozen=True)
class Endpoint:
    """One background endpoint: a URL pattern (:mod:`wwwproxy.http.filters` syntax), who asks
    it and why, and the answer it expects offline (None: a 503)."""

    pattern: str
    why: str
    answer: Answer | None = None


NO_CONTENT = Answer(204)
_NETWORKMANAGER = Answer(200, b"NetworkManager is online\n")
_APPLE = Answer(
    200, b"<HTML><HEAD><TITLE>Success</TITLE></HEAD><BODY>Success</BODY></HTML>", "text/html"
)

#: The connectivity and captive-portal checks, answered as "online, no portal".
CHECKS: tuple[Endpoint, ...] = (
    Endpoint(
        "detectportal.firefox.com/success.txt",
        "Firefox's connectivity check (network.connectivity-service)",
        Answer(200, b"success\n"),
    ),
    Endpoint(
        "detectportal.firefox.com/canonical.html",
        "Firefox's captive-portal check (captivedetect.canonicalURL)",
        Answer(
            200,
            b'<meta http-equiv="refresh" '
            b'content="0;url=https://support.mozilla.org/kb/captive-portal"/>',
            "text/html",
        ),
    ),
    Endpoint("*/generate_204", "Chromium's and Android's captive-portal check", NO_CONTENT),
    Endpoint("captive.apple.com", "Apple's captive-portal check", _APPLE),
    Endpoint("www.apple.com/library/test/success.html", "Apple's captive-portal check", _APPLE),
    Endpoint(
        "www.msftconnecttest.com/connecttest.txt",
        "Windows' connectivity check (NCSI)",
        Answer(200, b"Microsoft Connect Test"),
    ),
    Endpoint(
        "ipv6.msftconnecttest.com/connecttest.txt",
        "Windows' connectivity check over IPv6 (NCSI)",
        Answer(200, b"Microsoft Connect Test"),
    ),
    Endpoint(
        "www.msftncsi.com/ncsi.txt",
        "older Windows' connectivity check (NCSI)",
        Answer(200, b"Microsoft NCSI"),
    ),
    Endpoint(
        "nmcheck.gnome.org/check_network_status.txt",
        "NetworkManager's connectivity check (GNOME)",
        _NETWORKMANAGER,
    ),
    Endpoint(
        "network-test.debian.org/nm",
        "NetworkManager's connectivity check (Debian)",
        _NETWORKMANAGER,
    ),
    Endpoint(
        "ping.archlinux.org/nm-check.txt",
        "NetworkManager's connectivity check (Arch Linux)",
        _NETWORKMANAGER,
    ),
    Endpoint(
        "connectivity-check.ubuntu.com", "NetworkManager's connectivity check (Ubuntu)", NO_CONTENT
    ),
    Endpoint(
        "fedoraproject.org/static/hotspot.txt",
        "NetworkManager's connectivity check (Fedora)",
        Answer(200, b"OK\n"),
    ),
    Endpoint("networkcheck.kde.org", "KDE's connectivity check", Answer(200, b"OK\n")),
)

#: The other background hosts: answered offline with a 503, never queued.
QUIET: tuple[Endpoint, ...] = (
    # Chromium (and Chrome)
    Endpoint("clients1.google.com", "Chromium: omnibox suggestions, crash and update pings"),
    Endpoint("clients2.google.com", "Chromium: network time (/time/) and update checks"),
    Endpoint("clients4.google.com", "Chromium: sync and client services"),
    Endpoint("update.googleapis.com", "Chromium's component and extension updater"),
    Endpoint("*.gvt1.com", "Chromium's component downloads"),
    Endpoint("clientservices.googleapis.com", "Chromium's field-trial seed (variations)"),
    Endpoint("optimizationguide-pa.googleapis.com", "Chromium's optimization guide hints"),
    Endpoint("safebrowsing.googleapis.com", "Safe Browsing lists (Chromium and Firefox)"),
    Endpoint("safebrowsingohttpgateway.googleapis.com", "Chromium's Safe Browsing lookups"),
    Endpoint("content-autofill.googleapis.com", "Chromium's autofill server"),
    Endpoint("android.clients.google.com", "Chromium's push messaging (GCM) check-in"),
    # Firefox
    Endpoint("detectportal.firefox.com", "Firefox's connectivity and captive-portal checks"),
    Endpoint("incoming.telemetry.mozilla.org", "Firefox's telemetry uploads"),
    Endpoint(
        "*.services.mozilla.com",
        "Firefox: push, remote settings (firefox.settings), safe-browsing lists (shavar), "
        "sponsored tiles and suggestions",
    ),
    Endpoint("firefox-settings-attachments.cdn.mozilla.net", "Firefox's remote settings files"),
    Endpoint("content-signature-2.cdn.mozilla.net", "Firefox's remote settings signatures"),
    Endpoint("aus5.mozilla.org", "Firefox's update checks"),
    Endpoint("normandy.cdn.mozilla.net", "Firefox's studies and recipes"),
    Endpoint("tracking-protection.cdn.mozilla.net", "Firefox's tracking-protection lists"),
    # Microsoft Edge
    Endpoint("edge.microsoft.com", "Microsoft Edge's update, sync and component services"),
)

ENDPOINTS: tuple[Endpoint, ...] = CHECKS + QUIET

_CHECKS = PatternSet(parse_pattern(e.pattern) for e in CHECKS)
_QUIET = PatternSet(parse_pattern(e.pattern) for e in QUIET)
_BY_PATTERN = {e.pattern: e for e in ENDPOINTS}


def background_endpoint(url: URL) -> Endpoint | None:
    """The endpoint ``url`` is one of (a check before the host it is on), or None."""
    pattern = _CHECKS.match(url) or _QUIET.match(url)
    return _BY_PATTERN[pattern] if pattern is not None else None


@dataclass(frozen=True)
class Refusal:
    """Why an offline miss is not queued: ``listed_in`` the config key that says so and
    ``pattern`` what in it matched (a pattern, or the method), with the background
    ``endpoint`` when it is one."""

    listed_in: str
    pattern: str
    endpoint: Endpoint | None = None


def queue_refusal(
    url: URL, method: str, verdict: Verdict, *, methods: Iterable[str], background: bool
) -> Refusal | None:
    """Why this miss is not queued, or None when it is: ``dont_queue`` (and the lists that
    imply it: ``verdict``), then the built-in background list (unless ``background``: queue
    it too), then ``methods`` (``queue_methods``)."""
    if not verdict.queue:
        return Refusal(verdict.listed_in or "dont_queue", verdict.pattern or "")
    if not background:
        endpoint = background_endpoint(url)
        if endpoint is not None:
            return Refusal("queue_background", endpoint.pattern, endpoint)
    if method not in methods:
        return Refusal("queue_methods", method)
    return None
