"""The sinusoidal encoding of "Attention Is All You Need", in numpy only.

    PE[pos, 2i]   = sin(pos / base^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / base^(2i / d_model))

Column ``k`` uses ``i = k // 2``, so an odd ``d_model`` is well defined (its last column is
a sine). Every entry is computed in float64 from an exact angle (``_exact``) and rounded
once to the table's dtype: float64 tables are within a few units in the last place of the
true value and float32 tables within half a float32 ulp, at every position up to 2^31.
A row depends on its position only, so any rows can be computed on their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact
from service.encodings.registry import DTYPES, DType, Family, Rows, register
from service.errors import InvalidParameter

Layout = Literal["interleaved", "split"]
LAYOUTS: Final[tuple[Layout, ...]] = get_args(Layout)
DEFAULT_BASE: Final = 10000.0


@dataclass(frozen=True, slots=True)
class SinusoidalKey:
    """Everything that changes a sinusoidal table's values."""

    d_model: int
    base: float = DEFAULT_BASE
    layout: Layout = "interleaved"
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        if self.d_model < 1:
            raise InvalidParameter("d_model", "must be a positive integer")
        if not (math.isfinite(self.base) and self.base > 1):
            raise InvalidParameter("base", "must be a finite number greater than 1")
        if self.layout not in LAYOUTS:
            raise InvalidParameter("layout", f"must be one of {', '.join(LAYOUTS)}")
        if self.dtype not in DTYPES:
            raise InvalidParameter("dtype", f"must be one of {', '.join(DTYPES)}")

    @property
    def width(self) -> int:
        return self.d_model

    @property
    def pairs(self) -> int:
        """Frequencies: one per sine column, ``ceil(d_model / 2)``."""
        return (self.d_model + 1) // 2


def frequencies(key: SinusoidalKey) -> tuple[_exact.Float64Array, _exact.Float64Array]:
    """``base^(-2i/d_model)`` for ``i < ceil(d_model/2)``, double-double."""
    return _exact.inverse_powers(key.base, key.d_model, key.pairs)


def _columns(key: SinusoidalKey, out: Rows) -> _exact.Target:
    """The sine and cosine columns of ``out`` in the key's layout."""
    if key.layout == "interleaved":
        return out[:, 0::2], out[:, 1::2]
    return out[:, : key.pairs], out[:, key.pairs :]


def fill(key: SinusoidalKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    w_hi, w_lo = frequencies(key)
    _exact.fill(start, w_hi, w_lo, [_columns(key, part) for part in out])


def take(key: SinusoidalKey, positions: NDArray[np.int64]) -> Rows:
    """The rows at ``positions``, bit-identical to those rows of the whole table."""
    w_hi, w_lo = frequencies(key)
    out = np.empty((len(positions), key.d_model), dtype=key.dtype)
    _exact.take(positions, w_hi, w_lo, _columns(key, out))
    return out


def similarity(start: int, stop: int, step: int, key: SinusoidalKey) -> _exact.Float64Array:
    """The dot products ``PE[p] . PE[q]`` for ``p, q`` in ``range(start, stop, step)``, in
    float64 from exact angles: a square, symmetric matrix. The layout only orders the
    columns and the dtype is not used: neither changes the result.

    A sine-cosine pair contributes ``sin(pw)sin(qw) + cos(pw)cos(qw) = cos((p-q)w)``, so
    the sum over pairs depends on ``p - q`` alone and is computed once per distance; an odd
    ``d_model``'s last column (a sine without its cosine) adds ``sin(pw)sin(qw)``.
    """
    if not 0 <= start < stop:
        raise InvalidParameter("stop", "rows must satisfy 0 <= start < stop")
    if step < 1:
        raise InvalidParameter("step", "must be a positive integer")
    w_hi, w_lo = frequencies(key)
    pairs = key.d_model // 2
    count = len(range(start, stop, step))
    by_distance = np.zeros(count)
    if pairs:
        rows = max(1, _exact.CHUNK_ELEMENTS // pairs)
        for first in range(0, count, rows):
            distances = np.arange(first, min(first + rows, count), dtype=np.float64) * step
            _, c = _exact.sincos(distances, w_hi[:pairs], w_lo[:pairs])
            by_distance[first : first + len(distances)] = c.sum(axis=1)
    # row j is by_distance[|j - l|] for every l: a window onto the mirrored distances
    mirrored = np.concatenate([by_distance[::-1], by_distance[1:]])
    matrix = np.lib.stride_tricks.sliding_window_view(mirrored, count)[::-1]
    if key.d_model % 2 == 0:
        return np.ascontiguousarray(matrix)
    positions = np.arange(start, stop, step, dtype=np.float64)
    s, _ = _exact.sincos(positions, w_hi[pairs:], w_lo[pairs:])
    return matrix + s * s.T


FAMILY: Final = register(Family("sinusoidal", SinusoidalKey, fill, take))
