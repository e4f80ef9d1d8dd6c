"""The exact inverse frequencies of each RoPE scaling (``rounding=exact``), as double-doubles
``(hi, lo)`` exact to ~2^-100, as the sinusoidal family's are: the base powers from
:func:`._exact.inverse_powers` (at the base ``ntk`` and ``dynamic`` change to, computed in
40 digits), times each scaling's per-pair factor computed in 40-digit decimal arithmetic
from the formulas of transformers' ``modeling_rope_utils.py`` (:data:`.scalings.SOURCES`).
"""

from __future__ import annotations

import collections
import decimal
import threading
from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from service.encodings import _exact
from service.encodings.scalings import Params, Scaling, yarn_range

_CONTEXT: Final = decimal.Context(prec=40)
_PI: Final = decimal.Decimal("3.141592653589793238462643383279502884197")


def effective_base(
    scaling: Scaling, base: float, rotary_dim: int, params: Params
) -> decimal.Decimal:
    """The base ``ntk`` and ``dynamic`` change to (else ``base``), in 40 digits."""
    values = dict(params)
    b = decimal.Decimal(base)
    if scaling == "ntk":
        grow = decimal.Decimal(values["factor"])
    elif scaling == "dynamic" and values["seq_len"] > values["max_position_embeddings"]:
        f = decimal.Decimal(values["factor"])
        ratio = _CONTEXT.divide(f * values["seq_len"], values["max_position_embeddings"])
        grow = ratio - (f - 1)
    else:
        return b
    exponent = _CONTEXT.divide(rotary_dim, rotary_dim - 2)
    return _CONTEXT.multiply(b, _CONTEXT.power(grow, exponent))


Frequencies = tuple[_exact.Float64Array, _exact.Float64Array]
# The frequencies of the last keys (at most 16 x 8,192 pairs x 16 bytes): a cache whose
# content can be asked about, so that preparing a key is known to be work, and where.
_KEPT: Final = 16
_FREQUENCIES: collections.OrderedDict[tuple[Any, ...], Frequencies] = collections.OrderedDict()
_LOCK: Final = threading.Lock()
# Decimal arithmetic of one pair's factor costs about as much as this many table numbers.
PAIR_COST: Final = 1024


def preparation(scaling: Scaling, base: float, rotary_dim: int, params: Params) -> int:
    """What computing the key's frequencies costs, in table numbers: 0 once they are kept,
    or when the scaling multiplies no pair by a factor of its own."""
    if scaling not in ("llama3", "yarn", "longrope"):
        return 0
    with _LOCK:
        if (scaling, base, rotary_dim, params) in _FREQUENCIES:
            return 0
    return rotary_dim // 2 * PAIR_COST


def frequencies(scaling: Scaling, base: float, rotary_dim: int, params: Params) -> Frequencies:
    """The inverse frequencies of the ``rotary_dim // 2`` pairs, exactly (double-double)."""
    key = (scaling, base, rotary_dim, params)
    with _LOCK:
        if key in _FREQUENCIES:
            _FREQUENCIES.move_to_end(key)
            return _FREQUENCIES[key]
    found = _frequencies(scaling, base, rotary_dim, params)
    with _LOCK:
        _FREQUENCIES[key] = found
        while len(_FREQUENCIES) > _KEPT:
            _FREQUENCIES.popitem(last=False)
    return found


def _frequencies(scaling: Scaling, base: float, rotary_dim: int, params: Params) -> Frequencies:
    pairs = rotary_dim // 2
    hi, lo = _exact.inverse_powers(
        effective_base(scaling, base, rotary_dim, params), rotary_dim, pairs
    )
    values = dict(params)
    multipliers: list[decimal.Decimal]
    if scaling in ("linear", "llama3"):
        factor = decimal.Decimal(values["factor"])
        if scaling == "linear":
            return _exact.scaled(hi, lo, _CONTEXT.divide(1, factor))
        multipliers = [
            _llama3(h, low_part, factor, values)
            for h, low_part in zip(hi.tolist(), lo.tolist(), strict=True)
        ]
    elif scaling == "yarn":
        low, high = yarn_range(rotary_dim, base, values)
        span = decimal.Decimal(high - low if high != low else high + 0.001 - low)
        factor = decimal.Decimal(values["factor"])
        multipliers = []
        for i in range(pairs):
            ramp = _CONTEXT.divide(i - decimal.Decimal(low), span)
            ramp = min(max(ramp, decimal.Decimal(0)), decimal.Decimal(1))
            multipliers.append(_CONTEXT.divide(ramp, factor) + (1 - ramp))
    elif scaling == "longrope":
        multipliers = [_CONTEXT.divide(1, decimal.Decimal(e)) for e in values["ext_factors"]]
    else:
        return hi, lo
    m_hi = np.array([float(m) for m in multipliers])
    m_lo = np.array([float(m - decimal.Decimal(float(m))) for m in multipliers])
    return _exact.dd_mul(hi, lo, m_hi, m_lo)


def _llama3(
    hi: float, lo: float, factor: decimal.Decimal, values: Mapping[str, Any]
) -> decimal.Decimal:
    """What llama3 multiplies one inverse frequency by: ``1/factor`` above the low-frequency
    wavelength, 1 below the high-frequency one, a smooth blend between."""
    inverse = decimal.Decimal(hi) + decimal.Decimal(lo)
    original = decimal.Decimal(values["original_max_position_embeddings"])
    low, high = (
        decimal.Decimal(values["low_freq_factor"]),
        decimal.Decimal(values["high_freq_factor"]),
    )
    wavelength = _CONTEXT.divide(2 * _PI, inverse)
    if wavelength > original / low:
        return _CONTEXT.divide(1, factor)
    if wavelength < original / high:
        return decimal.Decimal(1)
    smooth = _CONTEXT.divide(_CONTEXT.divide(original, wavelength) - low, high - low)
    return _CONTEXT.divide(1 - smooth, factor) + smooth
