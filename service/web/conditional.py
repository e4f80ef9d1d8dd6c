"""Conditional requests: strong validators and ``If-None-Match`` (RFC 9110, 13.1.2)."""

from __future__ import annotations

import hashlib
from typing import Any, Final

IMMUTABLE: Final = "public, max-age=31536000, immutable"


def strong_etag(content: bytes) -> str:
    """A strong validator for ``content``: what it is, or what it is a pure function of."""
    return '"' + hashlib.sha256(content).hexdigest()[:32] + '"'


def fields_etag(*parts: str, fields: dict[str, Any]) -> str:
    """:func:`strong_etag` of ``parts`` and ``fields``, in a canonical order."""
    canonical = "|".join([*parts, *(f"{name}={fields[name]!r}" for name in sorted(fields))])
    return strong_etag(canonical.encode())


def matches(if_none_match: str | None, etag: str) -> bool:
    """Weak comparison of ``If-None-Match`` against ``etag``."""
    if if_none_match is None:
        return False
    candidates = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in candidates or etag in candidates
