"""The reliability suite runs the proxy as the proxy tests do: their origins and proxy fixtures."""

from __future__ import annotations

from ..proxy.conftest import Origin, Proxy, make_proxy, origin  # noqa: F401 (fixtures)
