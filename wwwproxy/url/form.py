"""Command-URL form arguments (WWWOFFLE's SplitFormArgs + one URL-decoding).

A query string and a POSTed ``application/x-www-form-urlencoded`` body are read the same way:
``&`` and ``;`` separate pairs, and each key and value is decoded exactly once (``+`` is a
space), so a URL passed as an argument comes out as the URL its form encoded, ready to be
canonicalized, and is never decoded a second time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .canonical import URL, canonicalize

__all__ = ["FormArgs", "decode_component", "parse_form_args"]

_PCT = re.compile(rb"%([0-9A-Fa-f]{2})")
_SEP = re.compile(rb"[&;]")


def decode_component(raw: bytes) -> str:
    """``+`` to space and ``%XX`` to its byte, once; bytes that are not UTF-8 survive as
    surrogate escapes, so :func:`canonicalize` re-encodes them to the same bytes."""
    raw = raw.replace(b"+", b" ")
    if b"%" in raw:
        raw = _PCT.sub(lambda m: bytes([int(m.group(1), 16)]), raw)
    return raw.decode("utf-8", "surrogateescape")


def parse_form_args(data: str | bytes | None) -> list[tuple[str, str]]:
    """All ``(key, value)`` pairs in order; empty pairs are skipped, a bare ``key`` has ``""``."""
    if not data:
        return []
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    pairs = []
    for item in _SEP.split(data):
        if not item:
            continue
        key, _, value = item.partition(b"=")
        pairs.append((decode_component(key), decode_component(value)))
    return pairs


class FormArgs:
    """Decoded arguments of one command request, with the lookups the pages need."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self.pairs: list[tuple[str, str]] = list(pairs)

    @classmethod
    def parse(cls, *sources: str | bytes | None) -> FormArgs:
        """Arguments from a query string and/or a form body, in that order."""
        return cls(pair for source in sources for pair in parse_form_args(source))

    def get(self, key: str, default: str | None = None) -> str | None:
        """The first value given for ``key``."""
        return next((v for k, v in self.pairs if k == key), default)

    def getall(self, key: str) -> list[str]:
        return [v for k, v in self.pairs if k == key]

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self.pairs)

    def url(self, key: str = "url", **kwargs: str) -> URL | None:
        """The argument ``key`` as a canonical URL (decoded once, then canonicalized).

        Raises :class:`~wwwproxy.url.canonical.InvalidURL` for a bad URL; ``None`` if absent.
        """
        value = self.get(key)
        return None if value is None else canonicalize(value, **kwargs)
