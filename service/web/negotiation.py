"""Content negotiation: which format an ``Accept`` header asks for and whether gzip is
welcome, read from one view of the request's headers (repeated fields combined into one
comma-separated value, as RFC 9110 section 5.3 says) that the replay layer keys on too."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from service.codecs.types import MEDIA_TYPES, TABLE_FORMATS, Format
from service.errors import NotAcceptable

RawHeaders = Iterable[tuple[bytes, bytes]]
_SMALLEST_Q = 0.001  # RFC 9110's qvalues have three decimals


def combined(headers: RawHeaders, name: bytes) -> str | None:
    """Every field named ``name`` (lower case) combined in order, or None if there is none."""
    return combined_fields(headers, {name}).get(name)


def combined_fields(headers: RawHeaders, names: Collection[bytes]) -> dict[bytes, str]:
    """:func:`combined` for each of ``names`` that the headers hold, in one pass."""
    found: dict[bytes, list[bytes]] = {}
    for name, value in headers:
        if name in names:
            found.setdefault(name, []).append(value)
    return {name: b", ".join(values).decode("latin-1") for name, values in found.items()}


def _weighted(header: str) -> list[tuple[str, float]]:
    """``(token, q)`` for each entry of an ``Accept``-style header, lower-cased, in order;
    a malformed ``q`` counts as 0."""
    entries = []
    for entry in header.split(","):
        token, *params = (part.strip() for part in entry.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
                if q == 0.0 and any(digit in value for digit in "123456789"):
                    q = _SMALLEST_Q  # a positive weight too small for a float is still > 0
        if token:
            entries.append((token.lower(), q))
    return entries


def _accept_ranges(accept: str) -> list[tuple[str, float]]:
    """``(media range, q)`` for each well-formed entry of an ``Accept`` header, in order."""
    ranges = [("*/*" if media == "*" else media, q) for media, q in _weighted(accept)]
    return [(media, q) for media, q in ranges if media.count("/") == 1]


def _preference(media_type: str, ranges: list[tuple[str, float]]) -> tuple[float, int]:
    """The ``q`` the most specific matching range gives ``media_type``, and that range's
    position in the header (earlier wins a tie)."""
    kind = media_type.split("/")[0]
    best: tuple[int, float, int] = (-1, 0.0, len(ranges))
    for index, (media, q) in enumerate(ranges):
        specificity = {media_type: 2, f"{kind}/*": 1, "*/*": 0}.get(media, -1)
        if specificity > best[0]:
            best = (specificity, q, index)
    return best[1], best[2]


def negotiate(accept: str | None, offered: tuple[Format, ...] = TABLE_FORMATS) -> Format:
    """The format an ``Accept`` header asks for; the first offered one if it asks for none.

    Highest ``q`` wins, then the range the client listed first, then the order of
    ``offered``. Raises :class:`NotAcceptable` when every offered type has ``q=0``.
    """
    return offered[preferred(accept, [MEDIA_TYPES[fmt] for fmt in offered])]


def preferred(accept: str | None, media_types: Sequence[str]) -> int:
    """Which of ``media_types`` an ``Accept`` header asks for (its index), as
    :func:`negotiate` chooses: for answers that are not tables (an audit's JSON or PNG)."""
    if accept is None or not accept.strip():
        return 0
    ranges = _accept_ranges(accept)
    if not ranges:
        return 0
    ranked = []
    for order, media_type in enumerate(media_types):
        q, index = _preference(media_type, ranges)
        if q > 0:
            ranked.append((-q, index, order))
    if not ranked:
        raise NotAcceptable(accept, list(media_types))
    return min(ranked)[2]


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header admits gzip (by name, or by ``*``)."""
    q = dict(_weighted(accept_encoding or ""))
    return q.get("gzip", q.get("x-gzip", q.get("*", 0.0))) > 0
