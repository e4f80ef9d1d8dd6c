"""ALiBi (Press, Smith and Lewis, "Train Short, Test Long"): the head slopes and the linear
attention biases built from them, in numpy only.

Slopes follow ``get_slopes`` of ofirpress/attention_with_linear_biases: for ``n`` heads and
``c`` the largest power of two at most ``n``, head ``k`` (1-based) of the first ``c`` has
slope ``2^(-8k/c)``; the remaining ``n - c`` heads take every other slope of ``2c`` heads,
``2^(-8k/(2c))`` for ``k = 1, 3, 5, ...``.

- ``rounding=library`` reproduces BLOOM (transformers ``models/bloom/modeling_bloom.py``,
  ``_get_alibi_slopes`` and ``build_alibi_tensor``): a float32 base ``2^(-8/c)`` from
  Python's float, raised by ``torch.pow`` to int32 powers (here in float64, then rounded to
  float32 once), and biases as float32 products of the float32 slope and the integer
  distance (``slopes[..., None] * arange_tensor``), cast to the dtype asked for.
- ``rounding=exact``: ``2^(-8k/c)`` carried in double-double (:func:`._exact.inverse_powers`,
  exact powers of two where ``8k/c`` is an integer), and every slope and bias (slope times
  distance) rounded once to the dtype.

A bias block is ``(num_heads, stop - start, key_len)``: query row ``i`` sits at key position
``i + key_len - max_len`` (the last ``max_len`` of ``key_len`` positions, as when decoding
with a cache). Forms: ``causal`` ``-m (i - j)``, ``bloom`` ``m j`` (the same row shifted by
``m i``, which softmax ignores), both ``-inf`` where ``j`` is after the query;
``symmetric`` ``-m |i - j|``, nothing masked.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact
from service.encodings.registry import (
    Audit,
    Bound,
    DType,
    Family,
    Rounding,
    Values,
    register,
    replacing,
)

Form = Literal["causal", "bloom", "symmetric"]
FORMS: Final[tuple[Form, ...]] = get_args(Form)
MASKED_FORMS: Final[frozenset[Form]] = frozenset({"causal", "bloom"})
_CHUNK_ELEMENTS: Final = 1 << 16  # the float64 temporaries of a chunk stay small
Float64Array = NDArray[np.float64]
# BLOOM's float32 slopes, or the exact ones as double-double (hi, lo)
Slopes = NDArray[np.float32] | tuple[Float64Array, Float64Array]


def closest_power_of_two(num_heads: int) -> int:
    """The largest power of two at most ``num_heads`` (``get_slopes``' ``closest_power_of_2``)."""
    return 1 << (num_heads.bit_length() - 1)


def exponents(num_heads: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(k, c)`` per head: its slope is ``2^(-8k/c)`` exactly."""
    c = closest_power_of_two(num_heads)
    k = np.concatenate([np.arange(1, c + 1), np.arange(1, 2 * (num_heads - c), 2)])
    denominators = np.concatenate([np.full(c, c), np.full(num_heads - c, 2 * c)])
    return k.astype(np.int64), denominators.astype(np.int64)


def _bloom_base(c: int) -> np.float32:
    """BLOOM's float32 ``base`` for ``c`` heads: the Python float ``2^(-8/c)``, as written
    in ``_get_alibi_slopes``, rounded to float32 as ``torch.full(..., dtype=float32)`` does."""
    return np.float32(2 ** (-(2 ** -(math.log2(c) - 3))))


def library_slopes(num_heads: int) -> NDArray[np.float32]:
    """BLOOM's float32 slopes (transformers ``modeling_bloom._get_alibi_slopes``):
    ``base^k`` for int32 powers, each power in float64 and rounded to float32 once: the
    correctly rounded power of BLOOM's float32 base. torch's vectorized float32 ``pow`` is
    within an ulp of it, not always equal (with 32 heads, head 14 is one ulp off)."""
    c = closest_power_of_two(num_heads)
    powers = np.float64(_bloom_base(c)) ** np.arange(1, c + 1)
    if c != num_heads:
        extra = np.float64(_bloom_base(2 * c)) ** np.arange(1, 2 * (num_heads - c), 2)
        powers = np.concatenate([powers, extra])
    return powers.astype(np.float32)


def exact_slopes(num_heads: int) -> tuple[Float64Array, Float64Array]:
    """The slopes ``2^(-8k/c)`` as double-double ``(hi, lo)``, exact to about 2^-100; where
    ``8k/c`` is an integer the slope is that power of two exactly (``lo = 0``)."""
    c = closest_power_of_two(num_heads)
    # 16^(-2i/c) = 2^(-8i/c): the sinusoidal frequencies' exact powers, with base 16
    hi, lo = _exact.inverse_powers(16.0, c, c + 1)
    hi, lo = hi[1:], lo[1:]
    if c != num_heads:
        extra_hi, extra_lo = _exact.inverse_powers(16.0, 2 * c, 2 * (num_heads - c))
        hi = np.concatenate([hi, extra_hi[1::2]])
        lo = np.concatenate([lo, extra_lo[1::2]])
    k, denominators = exponents(num_heads)
    whole = (8 * k) % denominators == 0
    hi[whole] = np.ldexp(1.0, -((8 * k[whole]) // denominators[whole]).astype(np.int32))
    lo[whole] = 0.0
    return hi, lo


def round_once(hi: Float64Array, lo: Float64Array, dtype: DType) -> NDArray[np.floating]:
    """The double-double ``hi + lo`` (``|lo| <= ulp(hi) / 2``) rounded once to ``dtype``.
    Rounding ``hi`` alone can only go wrong when ``hi`` is exactly halfway between two
    values of ``dtype``: then ``lo`` says which side the true value is on."""
    if dtype == "float64":
        return hi.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # float16 overflows to inf
        out = hi.astype(dtype)
        back = out.astype(np.float64)
        toward = np.where(hi > back, np.inf, -np.inf).astype(dtype)
        other = np.nextafter(out, toward)
        other_back = other.astype(np.float64)
        tie = (hi - back) == (other_back - hi)
        return np.where(tie & (lo * (other_back - hi) > 0), other, out)


def slopes(
    num_heads: int, rounding: Rounding = "library", dtype: DType = "float32"
) -> NDArray[np.floating]:
    """The ``num_heads`` slopes in ``dtype``: BLOOM's float32 values (cast), or exact ones
    rounded once."""
    if rounding == "library":
        return library_slopes(num_heads).astype(dtype)
    return round_once(*exact_slopes(num_heads), dtype)


@dataclass(frozen=True, slots=True)
class Bias:
    """A block of the bias tensor: query rows ``start .. stop-1`` of ``max_len`` queries
    against ``key_len`` keys, for every head."""

    num_heads: int
    max_len: int
    key_len: int
    form: Form = "causal"
    start: int = 0
    stop: int | None = None
    rounding: Rounding = "library"
    dtype: DType = "float32"

    @property
    def row_stop(self) -> int:
        return self.max_len if self.stop is None else self.stop

    @property
    def offset(self) -> int:
        """The key position of query row 0."""
        return self.key_len - self.max_len

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.num_heads, self.row_stop - self.start, self.key_len

    def largest_distance(self) -> int:
        """The largest factor a slope is multiplied by in an entry that is not masked."""
        last = self.row_stop - 1 + self.offset  # the last query's key position
        if self.form in MASKED_FORMS:
            return max(last, 0)
        return max(abs(last), abs(self.start + self.offset - (self.key_len - 1)))


def _products(bias: Bias, distances: NDArray[np.int64], slope: Slopes) -> NDArray[np.floating]:
    """``(num_heads, len(distances))``: each slope times each distance, in ``bias.dtype``."""
    if isinstance(slope, np.ndarray):  # BLOOM: a float32 product, then .to(dtype)
        product = slope[:, None] * distances.astype(np.float32)[None, :]
        with np.errstate(over="ignore"):  # float16 overflows are refused before a block
            return product.astype(bias.dtype)
    hi, lo = slope
    p_hi, p_lo = _exact.dd_mul(hi[:, None], lo[:, None], distances.astype(np.float64), 0.0)
    return round_once(p_hi, p_lo, bias.dtype)


def _slope_values(bias: Bias) -> Slopes:
    if bias.rounding == "library":
        return library_slopes(bias.num_heads)
    return exact_slopes(bias.num_heads)


def largest_magnitude(bias: Bias) -> float:
    """The largest ``|entry|`` of the block that is not masked, in its dtype (``inf`` when
    an entry overflows it)."""
    distance = np.array([bias.largest_distance()], dtype=np.int64)
    return float(np.max(np.abs(_products(bias, distance, _slope_values(bias)))))


def _fill(bias: Bias, slope: Slopes, dest: NDArray[np.floating], first: int, step: int) -> None:
    """``dest[:, t]`` is the entry at signed distance ``first + step * t``: ``m d`` in the
    bloom form (``d >= 0`` there), else ``-m |d|``, ``-inf`` for ``d < 0`` when causal. In
    chunks (temporaries stay small), on every core for a large ``dest``."""
    heads, columns = dest.shape
    chunk = max(1, _CHUNK_ELEMENTS // heads)

    def part(lo: int, hi: int) -> None:
        for a in range(lo, hi, chunk):
            b = min(a + chunk, hi)
            signed = first + step * np.arange(a, b, dtype=np.int64)
            values = _products(bias, np.abs(signed), slope)
            if bias.form != "bloom":
                np.negative(values, out=values)
                values += 0  # -0.0 -> 0.0
                if bias.form == "causal":
                    values[:, signed < 0] = -np.inf
            dest[:, a:b] = values

    spans = _exact.row_spans(columns, heads)
    _exact.in_parallel([functools.partial(part, lo, hi) for lo, hi in spans])


def block(bias: Bias) -> NDArray[np.floating]:
    """The block ``(num_heads, stop - start, key_len)`` in ``bias.dtype``; masked entries
    are ``-inf``. Entries depend on the distance alone, so each head's values are computed
    once per distance (diagonal) and laid out along the diagonals."""
    heads, rows, keys = bias.shape
    slope = _slope_values(bias)
    out = np.empty(bias.shape, dtype=bias.dtype)
    first = bias.start + bias.offset  # the first query's key position
    if bias.form == "bloom":  # m j along a row, the same in every row, then the mask
        if rows == 1:
            _fill(bias, slope, out[:, 0, :], 0, 1)
        else:
            row = np.empty((heads, keys), dtype=bias.dtype)
            _fill(bias, slope, row, 0, 1)
            out[...] = row[:, None, :]
        # entry (r, j) is masked when j - r > first: diagonal t = j - r + rows - 1
        diagonals = np.zeros(rows + keys - 1, dtype=bool)
        diagonals[max(first + rows, 0) :] = True
        future = np.lib.stride_tricks.sliding_window_view(diagonals, keys)[::-1]
        np.copyto(out, -np.inf, where=future[None, :, :])
        return out
    # entry (r, j) has signed distance first + r - j
    if rows == 1:
        _fill(bias, slope, out[:, 0, :], first, -1)
    elif keys == 1:
        _fill(bias, slope, out[:, :, 0], first, 1)
    else:  # diagonal t = j - r + rows - 1 has distance first + rows - 1 - t
        table = np.empty((heads, rows + keys - 1), dtype=bias.dtype)
        _fill(bias, slope, table, first + rows - 1, -1)
        windows = np.lib.stride_tricks.sliding_window_view(table, keys, axis=1)
        np.copyto(out, windows[:, ::-1, :])
    return out


@dataclass(frozen=True, slots=True)
class SlopesKey:
    """The slopes of ``num_heads`` heads: one row of ``num_heads`` numbers."""

    num_heads: int
    rounding: Rounding = "library"
    dtype: DType = "float32"

    @property
    def width(self) -> int:
        return self.num_heads


@dataclass(frozen=True, slots=True)
class BiasKey:
    """The biases of ``max_len`` queries against ``key_len`` keys: a query row holds
    ``num_heads × key_len`` numbers."""

    num_heads: int
    max_len: int
    key_len: int
    form: Form = "causal"
    rounding: Rounding = "library"
    dtype: DType = "float32"

    @property
    def width(self) -> int:
        return self.num_heads * self.key_len

    def rows(self, start: int, stop: int) -> Bias:
        """Query rows ``start .. stop-1``."""
        heads, length, keys, form = self.num_heads, self.max_len, self.key_len, self.form
        return Bias(heads, length, keys, form, start, stop, self.rounding, self.dtype)


def exact_magnitudes(key: BiasKey, distances: NDArray[np.int64]) -> Values:
    """Each head's exact slope times each distance (an audit's exact entries)."""
    hi, lo = exact_slopes(key.num_heads)
    p_hi, p_lo = _exact.dd_mul(hi[None, :], lo[None, :], distances.astype(np.float64)[:, None], 0.0)
    magnitudes: Values = p_hi + p_lo
    return magnitudes


def bloom_magnitudes(key: BiasKey, distances: NDArray[np.float64]) -> Values:
    """BLOOM's bias magnitudes: the float32 slopes times float32 distances (any, cast ones
    too), in float32."""
    slopes = library_slopes(key.num_heads)
    with np.errstate(invalid="ignore", over="ignore"):
        product = distances.astype(np.float32)[:, None] * slopes[None, :]
    return product.astype(np.float64)


# audited by distance: each head's entry is its slope times the distance, BLOOM's for the
# library, whatever their magnitude
AUDIT: Final[Audit[BiasKey]] = Audit(
    exact=replacing(rounding="exact", dtype="float64"),
    library=replacing(rounding="library", dtype="float32"),
    width=lambda key: key.num_heads,
    exact_at=exact_magnitudes,
    library_at=bloom_magnitudes,
    largest=lambda key: 0.0,
    # distances up to the keys': the last key_len - 1, where keys outnumber queries
    extent=lambda key, max_len: max(max_len, key.key_len),
)
# Computed per request: each entry is one product, and a repeat is replayed whole.
SLOPES: Final = register(
    Family(
        "alibi-slopes",
        SlopesKey,
        block=lambda key, start, stop: slopes(key.num_heads, key.rounding, key.dtype),
        shape=lambda key, start, stop: (key.num_heads,),
        bound=lambda key: Bound(1.0, ("num_heads",)),
    )
)
BIAS: Final = register(
    Family(
        "alibi",
        BiasKey,
        block=lambda key, start, stop: block(key.rows(start, stop)),
        shape=lambda key, start, stop: key.rows(start, stop).shape,
        # the query refuses a dtype that cannot hold its largest entry, computed exactly;
        # a pass over every entry would cost more than the block (and -inf are masks)
        checked=False,
        audit=AUDIT,
    )
)
