"""Finding and asking the running proxy, for ``online``/``offline``/``autodial``/``status``,
``reload`` and ``fetch``.

The running proxy is the one at ``--proxy HOST:PORT``, else at the configuration's ``listen``
address (a wildcard address is asked on loopback).  It is asked on its own ``/control/`` page
(JSON), with the configuration's password, never through a proxy from the environment.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import parse_hostport

if TYPE_CHECKING:
    from ..config import Config

__all__ = [
    "ProxyRefused",
    "ProxyUnreachable",
    "ask_proxy",
    "control_address",
    "offline_proxy",
]

TIMEOUT = 10.0
#: how long `fetch` waits for a proxy that may not be there
PROBE_TIMEOUT = 2.0


class ProxyUnreachable(Exception):
    """No wwwproxy answers at the address."""


class ProxyRefused(Exception):
    """The proxy answered with an error (the message says which and why)."""


def control_address(config: Config, proxy: str | None = None) -> str:
    """``host:port`` of the running proxy: ``proxy`` (HOST:PORT) if given, else the
    configuration's ``listen``, a wildcard address as loopback.  ValueError for a bad one."""
    host, port = parse_hostport(proxy) if proxy else (config.listen_host, config.listen_port)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def ask_proxy(
    netloc: str,
    password: str | None,
    form: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> dict[str, Any]:
    """The proxy's ``/control/`` JSON: its state, or with ``form`` (POSTed) what the action
    did.  :class:`ProxyUnreachable` or :class:`ProxyRefused` when there is no answer."""
    request = urllib.request.Request(f"http://{netloc}/control/?format=json")
    request.add_header("Accept", "application/json")
    if form is not None:
        # imported for a POST only: a fetch that just asks the mode stays light
        from ..commands import API_HEADER

        request.data = urllib.parse.urlencode(form).encode()
        request.add_header(API_HEADER, "cli")
    if password:
        token = base64.b64encode(f"wwwproxy:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            why = json.loads(exc.read()).get("error") or exc.reason
        except (ValueError, AttributeError, OSError):
            why = exc.reason
        raise ProxyRefused(f"{netloc}: {exc.code} {why}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProxyUnreachable(f"no wwwproxy at {netloc}: {reason}") from None
    if not isinstance(answer, dict):
        raise ProxyUnreachable(f"no wwwproxy at {netloc}: not its answer")
    return answer


def offline_proxy(config: Config) -> str | None:
    """Where a running proxy that uses ``config.cache`` is offline (its address), else None:
    none running, another cache, or a mode that fetches."""
    netloc = control_address(config)
    try:
        state = ask_proxy(netloc, config.password, timeout=PROBE_TIMEOUT)
    except (ProxyUnreachable, ProxyRefused):
        return None
    if state.get("mode") != "offline" or not isinstance(state.get("cache"), str):
        return None
    if Path(state["cache"]).resolve() != config.cache.resolve():
        return None
    return netloc
