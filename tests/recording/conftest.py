"""The recording tests' origins: those of the proxy tests (``tests/proxy/conftest.py``)."""

from __future__ import annotations

from ..proxy.conftest import origin, raw_origin  # noqa: F401 (fixtures)
