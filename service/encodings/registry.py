"""The families of encodings, found by their key type.

A family is a frozen key type (everything that changes its values, with the ``width`` of
a row and its ``dtype``) and two functions on it: ``fill``, which writes consecutive rows
into arrays the caller owns, and ``take``, which computes the rows of scattered positions
with the same bits. Everything else (the cache, the table and apply pipelines, replay,
pictures, preload) works from a key through this module, never from a family's name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, Literal, Protocol, TypeVar, get_args

import numpy as np
from numpy.typing import NDArray

DType = Literal["float32", "float64", "float16"]
DTYPES: Final[tuple[DType, ...]] = get_args(DType)
# library: the arithmetic of the library a family follows; exact: exact, rounded once
Rounding = Literal["library", "exact"]
ROUNDINGS: Final[tuple[Rounding, ...]] = get_args(Rounding)
Rows = NDArray[np.floating]


class Key(Protocol):
    """What every family's key tells: the columns of a row and their element type. Keys
    are frozen dataclasses whose fields are the family's parameters (as the client and
    ``/v1/cache`` name them)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def __hash__(self) -> int: ...

    @property
    def width(self) -> int: ...

    @property
    def dtype(self) -> DType: ...


K = TypeVar("K", bound=Key)


@dataclass(frozen=True, slots=True)
class Family(Generic[K]):
    """One family: its name (its routes' and listings' name), its key type, and its two
    functions."""

    name: str
    key: type[K]
    fill: Callable[[K, int, Sequence[Rows]], None]
    take: Callable[[K, NDArray[np.int64]], Rows]


_FAMILIES: dict[type[Any], Family[Any]] = {}


def register(family: Family[K]) -> Family[K]:
    """Make ``family`` known by its key type."""
    _FAMILIES[family.key] = family
    return family


def family_of(key: Key) -> Family[Any]:
    """The family whose key ``key`` is."""
    try:
        return _FAMILIES[type(key)]
    except KeyError:
        raise TypeError(f"{type(key).__name__} is not a registered family key") from None


def row_bytes(key: Key) -> int:
    """Bytes of one row of ``key``'s table."""
    return key.width * np.dtype(key.dtype).itemsize


def key_bytes(key: Key) -> int:
    """About what a key holds beyond a few numbers (a longrope key's factors), counted
    with each of its cached pages: 32 bytes per number in a tuple."""

    def size(value: Any) -> int:
        return sum(32 + size(item) for item in value) if isinstance(value, tuple) else 0

    return sum(size(getattr(key, name)) for name in key.__dataclass_fields__)


def fill(key: Key, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` of ``key``'s table written into ``out``, one array after
    the other (each ``(rows, key.width)`` of ``key.dtype``, C order)."""
    family_of(key).fill(key, start, out)


def rows(key: Key, start: int, stop: int) -> Rows:
    """Rows ``start .. stop-1`` of ``key``'s table, in a new array."""
    out = np.empty((stop - start, key.width), dtype=key.dtype)
    fill(key, start, [out])
    return out


def joined(parts: Sequence[Rows]) -> Rows:
    """Consecutive blocks of rows as one array (the block itself when there is one)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def take(key: Key, positions: NDArray[np.int64]) -> Rows:
    """The rows at ``positions`` (any order, repeats allowed), bit-identical to the same
    rows of the whole table, computed without the rows between them."""
    return family_of(key).take(key, positions)
