"""The store's one error, in a module of its own: the store and its recorder both raise it
without importing each other, and callers catch it from :mod:`.store` as before."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(Exception):
    """A store operation that cannot be done; the message says what and where."""
