"""The numerical core: sinusoidal positional-encoding tables, in numpy only.

    PE[pos, 2i]   = sin(pos / base^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / base^(2i / d_model))

Column ``k`` uses ``i = k // 2``, so an odd ``d_model`` is well defined (its last column is
a sine). Every entry is computed in float64 from an angle that is exact to about 2^-100
relative, then rounded once to the output dtype: float64 tables are within a few units
in the last place of the true value even at position 10^6, and float32 tables are the
correctly rounded value almost everywhere.
"""

from __future__ import annotations

import decimal
import functools
from typing import Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.errors import InvalidParameter

Layout = Literal["interleaved", "split"]
DType = Literal["float32", "float64", "float16"]
LAYOUTS: Final[tuple[Layout, ...]] = get_args(Layout)
DTYPES: Final[tuple[DType, ...]] = get_args(DType)
DEFAULT_BASE: Final = 10000.0

Float64Array = NDArray[np.float64]
_SPLITTER: Final = 134217729.0  # 2^27 + 1: Dekker's split into two 26-bit halves
_EXACT_POSITIONS: Final = 1 << 27  # below this a position is its own high half
_CHUNK_ELEMENTS: Final = 1 << 16  # float64 temporaries stay in cache and memory stays flat


def _split(x: Float64Array) -> tuple[Float64Array, Float64Array]:
    """Dekker's split: ``x == hi + lo`` exactly, each half with at most 26 significant bits."""
    c = _SPLITTER * x
    hi = c - (c - x)
    return hi, x - hi


def _dd_mul(
    a_hi: Float64Array, a_lo: Float64Array, b_hi: float, b_lo: float
) -> tuple[Float64Array, Float64Array]:
    """Double-double product ``(a_hi + a_lo) * (b_hi + b_lo)``, relative error ~2^-104."""
    p = a_hi * b_hi
    ah, al = _split(a_hi)
    bh = _SPLITTER * b_hi
    bh -= bh - b_hi
    bl = b_hi - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    e += a_hi * b_lo + a_lo * b_hi
    hi = p + e
    return hi, e - (hi - p)


def _decimal_pair(value: decimal.Decimal) -> tuple[float, float]:
    hi = float(value)
    return hi, float(value - decimal.Decimal(hi))


@functools.lru_cache(maxsize=64)
def frequencies(d_model: int, base: float) -> tuple[Float64Array, Float64Array]:
    """The angular frequencies ``base^(-2i/d_model)`` for ``i < ceil(d_model/2)``, as
    double-double ``(hi, lo)`` arrays (read-only) whose sum is exact to ~2^-100.

    Float64 alone is not enough: at position 10^6 one ulp of the frequency moves the angle
    by 1e-10. ``base^(-2i/d) = r^i`` with ``r = base^(-2/d)``, so only the powers
    ``r^(2^k)`` are computed in decimal arithmetic and the rest by vectorized squaring.
    """
    pairs = (d_model + 1) // 2
    index = np.arange(pairs)
    hi = np.ones(pairs)
    lo = np.zeros(pairs)
    context = decimal.Context(prec=40)
    log_base = context.ln(decimal.Decimal(base))
    bit = 0
    while (1 << bit) < pairs:
        exponent = context.divide(decimal.Decimal(-(2 << bit)), decimal.Decimal(d_model))
        r_hi, r_lo = _decimal_pair(context.exp(context.multiply(exponent, log_base)))
        use = (index >> bit) & 1 == 1
        p_hi, p_lo = _dd_mul(hi[use], lo[use], r_hi, r_lo)
        hi[use], lo[use] = p_hi, p_lo
        bit += 1
    hi.flags.writeable = False
    lo.flags.writeable = False
    return hi, lo


def _sincos(
    positions: Float64Array, w_hi: Float64Array, w_lo: Float64Array
) -> tuple[Float64Array, Float64Array]:
    """``sin`` and ``cos`` of ``positions[:, None] * (w_hi + w_lo)``, each computed once.

    The angle is carried as ``big + small``, ``big = fl(pos * w_hi)`` and ``small`` its
    rounding error (Dekker's exact product) plus ``pos * w_lo``; then
    ``sin(big + small) = sin(big) + small*cos(big)`` to within ``small^2 < 1e-19``.
    """
    pos = positions[:, None]
    big = pos * w_hi
    wh, wl = _split(w_hi)
    if positions[-1] < _EXACT_POSITIONS:
        small = (pos * wh - big) + pos * wl
    else:
        ph, pl = _split(pos)
        small = (((ph * wh - big) + ph * wl) + pl * wh) + pl * wl
    small += pos * w_lo
    s = np.sin(big)
    c = np.cos(big)
    sin = s + small * c
    small *= s
    c -= small
    return sin, c


def encoding(
    start: int,
    stop: int,
    d_model: int,
    base: float = DEFAULT_BASE,
    layout: Layout = "interleaved",
    dtype: DType = "float32",
) -> NDArray[np.floating]:
    """Rows ``start .. stop-1`` of the positional-encoding table, shape
    ``(stop - start, d_model)``, C order, in ``dtype``.

    The rows do not depend on the table's length, so a table of ``max_len`` rows is
    ``encoding(0, max_len, ...)`` and any slice of it can be computed on its own.
    """
    _check(start, stop, d_model, base, layout, dtype)
    w_hi, w_lo = frequencies(d_model, base)
    pairs = w_hi.shape[0]
    cosines = d_model // 2
    out = np.empty((stop - start, d_model), dtype=dtype)
    if layout == "interleaved":
        sin_cols, cos_cols = out[:, 0::2], out[:, 1::2]
    else:
        sin_cols, cos_cols = out[:, :pairs], out[:, pairs:]
    rows = max(1, _CHUNK_ELEMENTS // pairs)
    for first in range(0, stop - start, rows):
        last = min(first + rows, stop - start)
        positions = np.arange(start + first, start + last, dtype=np.float64)
        s, c = _sincos(positions, w_hi, w_lo)
        sin_cols[first:last] = s
        cos_cols[first:last] = c[:, :cosines]
    return out


def _check(start: int, stop: int, d_model: int, base: float, layout: str, dtype: str) -> None:
    if d_model < 1:
        raise InvalidParameter("d_model", "must be a positive integer")
    if not 0 <= start < stop:
        raise InvalidParameter("stop", "rows must satisfy 0 <= start < stop")
    if not (np.isfinite(base) and base > 1):
        raise InvalidParameter("base", "must be a finite number greater than 1")
    if layout not in LAYOUTS:
        raise InvalidParameter("layout", f"must be one of {', '.join(LAYOUTS)}")
    if dtype not in DTYPES:
        raise InvalidParameter("dtype", f"must be one of {', '.join(DTYPES)}")
