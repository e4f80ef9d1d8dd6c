"""The exact inverse frequencies of each RoPE scaling (``rounding=exact``), as double-doubles
``(hi, lo)`` exact to ~2^-100, as the sinusoidal family's are: the base powers from
:func:`._exact.inverse_powers` (at the base ``ntk`` and ``dynamic`` change to, computed in
40 digits), times each scaling's per-pair factor computed in 40-digit decimal arithmetic
from the formulas of transformers' ``modeling_rope_utils.py``. One function a scaling;
each scaling's record in :data:`.scalings.RULES` names its function and its source.
"""

from __future__ import annotations

import collections
import decimal
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact
from service.encodings._rope_library import yarn_range

_CONTEXT: Final = decimal.Context(prec=40)
_PI: Final = decimal.Decimal("3.141592653589793238462643383279502884197")

Frequencies = tuple[_exact.Float64Array, _exact.Float64Array]


def _grown(base: float, rotary_dim: int, grow: decimal.Decimal) -> decimal.Decimal:
    """The base ``ntk`` and ``dynamic`` change to, in 40 digits."""
    exponent = _CONTEXT.divide(rotary_dim, rotary_dim - 2)
    return _CONTEXT.multiply(decimal.Decimal(base), _CONTEXT.power(grow, exponent))


def _powers(base: float | decimal.Decimal, rotary_dim: int) -> Frequencies:
    return _exact.inverse_powers(decimal.Decimal(base), rotary_dim, rotary_dim // 2)


def default(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    """none: the base powers."""
    return _powers(base, rotary_dim)


def linear(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    hi, lo = _powers(base, rotary_dim)
    return _exact.scaled(hi, lo, _CONTEXT.divide(1, decimal.Decimal(values["factor"])))


def proportional(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    """The pairs past the rotated ones have frequency 0."""
    hi, lo = _powers(base, rotary_dim)
    hi, lo = hi.copy(), lo.copy()
    hi[values["rotated"] :] = lo[values["rotated"] :] = 0.0
    return _exact.scaled(hi, lo, _CONTEXT.divide(1, decimal.Decimal(values["factor"])))


def ntk(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    return _powers(_grown(base, rotary_dim, decimal.Decimal(values["factor"])), rotary_dim)


def dynamic(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    """The base grows only past the model's own length."""
    if values["seq_len"] <= values["max_position_embeddings"]:
        return _powers(base, rotary_dim)
    f = decimal.Decimal(values["factor"])
    ratio = _CONTEXT.divide(f * values["seq_len"], values["max_position_embeddings"])
    return _powers(_grown(base, rotary_dim, ratio - (f - 1)), rotary_dim)


def yarn(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    hi, lo = _powers(base, rotary_dim)
    return _exact.dd_mul(hi, lo, *_yarn(rotary_dim // 2, rotary_dim, base, values))


def longrope(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    hi, lo = _powers(base, rotary_dim)
    one = np.ones(rotary_dim // 2)
    multiplier = _divide((one, 0 * one), (np.array(values["ext_factors"], float), 0 * one))
    return _exact.dd_mul(hi, lo, *multiplier)


def llama3(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Frequencies:
    hi, lo = _powers(base, rotary_dim)
    return _exact.dd_mul(hi, lo, *_llama3((hi, lo), values))


# The frequencies of the last keys (at most 16 x 8,192 pairs x 16 bytes): a cache whose
# content can be asked about, so that preparing a key is known to be work, and where.
_KEPT: Final = 16
_FREQUENCIES: collections.OrderedDict[Hashable, Frequencies] = collections.OrderedDict()
_LOCK: Final = threading.Lock()
# One pair's factor (double-double, with its base power) costs about this many table numbers.
PAIR_COST: Final = 64


def is_kept(key: Hashable) -> bool:
    """Whether the frequencies of ``key`` are kept (computing them again costs nothing)."""
    with _LOCK:
        return key in _FREQUENCIES


def kept(key: Hashable, compute: Callable[[], Frequencies]) -> Frequencies:
    """The frequencies of ``key``: kept ones, else ``compute()``'s, then kept."""
    with _LOCK:
        if key in _FREQUENCIES:
            _FREQUENCIES.move_to_end(key)
            return _FREQUENCIES[key]
    found = compute()
    with _LOCK:
        _FREQUENCIES[key] = found
        while len(_FREQUENCIES) > _KEPT:
            _FREQUENCIES.popitem(last=False)
    return found


# Each pair's factor in double-double arithmetic (about 2^-104 relative, past what the
# frequencies carry), a few numpy operations for all pairs: decimal arithmetic pair by pair
# cost 30 ms of the GIL at head_dim 16,384 for every new key.
Pair = tuple[_exact.Float64Array, _exact.Float64Array]


def _two_sum(a: _exact.Float64Array, b: _exact.Float64Array) -> Pair:
    """``a + b`` exactly, as a sum and its rounding error (Knuth)."""
    total = a + b
    part = total - a
    return total, (a - (total - part)) + (b - part)


def _add(a: Pair, b: Pair) -> Pair:
    total, error = _two_sum(a[0], b[0])
    error = error + (a[1] + b[1])
    hi = total + error
    return hi, error - (hi - total)


def _negative(a: Pair) -> Pair:
    return -a[0], -a[1]


def _divide(a: Pair, b: Pair) -> Pair:
    """``a / b``: a quotient, and its correction from the exact remainder."""
    first = a[0] / b[0]
    remainder = _add(a, _negative(_exact.dd_mul(b[0], b[1], first, 0 * first)))
    second = remainder[0] / b[0]
    hi = first + second
    return hi, second - (hi - first)


def _constant(value: float | decimal.Decimal, like: _exact.Float64Array) -> Pair:
    hi, lo = _exact.decimal_pair(decimal.Decimal(value))
    return np.full_like(like, hi), np.full_like(like, lo)


def _yarn(pairs: int, rotary_dim: int, base: float, values: Mapping[str, Any]) -> Pair:
    """``ramp / factor + (1 - ramp)``, ``ramp`` running from 0 to 1 between the pairs
    :func:`yarn_range` gives (transformers' ``linear_ramp_factor``, exactly)."""
    low, high = yarn_range(rotary_dim, base, values)
    index = np.arange(pairs, dtype=np.float64)
    span = high - low if high != low else high + 0.001 - low  # as transformers, in float64
    ramp = _divide(_two_sum(index, np.full_like(index, -low)), _constant(span, index))
    below, above = ramp[0] < 0, (ramp[0] > 1) | ((ramp[0] == 1) & (ramp[1] > 0))
    ramp = np.where(below, 0.0, np.where(above, 1.0, ramp[0])), np.where(below | above, 0, ramp[1])
    one = _constant(1, index)
    return _add(_divide(ramp, _constant(values["factor"], index)), _add(one, _negative(ramp)))


def _llama3(inverse: Pair, values: Mapping[str, Any]) -> Pair:
    """What llama3 multiplies each inverse frequency by: ``1/factor`` above the
    low-frequency wavelength, 1 below the high-frequency one, a smooth blend between."""
    like = inverse[0]
    original = _constant(values["original_max_position_embeddings"], like)
    low, high = (
        _constant(values["low_freq_factor"], like),
        _constant(values["high_freq_factor"], like),
    )
    wavelength = _divide(_constant(_CONTEXT.multiply(2, _PI), like), inverse)
    longest, shortest = _divide(original, low), _divide(original, high)
    longer = _greater(wavelength, longest)
    shorter = _greater(shortest, wavelength)
    factor = _constant(values["factor"], like)
    with np.errstate(divide="ignore", invalid="ignore"):  # equal factors: no band to blend
        smooth = _divide(
            _add(_divide(original, wavelength), _negative(low)), _add(high, _negative(low))
        )
        blend = _add(_divide(_add(_constant(1, like), _negative(smooth)), factor), smooth)
    reciprocal = _divide(_constant(1, like), factor)
    return (
        np.where(longer, reciprocal[0], np.where(shorter, 1.0, blend[0])),
        np.where(longer, reciprocal[1], np.where(shorter, 0.0, blend[1])),
    )


def _greater(a: Pair, b: Pair) -> NDArray[np.bool_]:
    greater: NDArray[np.bool_] = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] > b[1]))
    return greater
