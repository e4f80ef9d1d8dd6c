"""Llama 4's attention temperature: its layers without RoPE (every fourth, by default)
scale the query at position ``p`` by ``log1p(floor((p + 1) / floor_scale)) * attn_scale +
1`` (transformers 5.23, ``models/llama4/modeling_llama4.py``,
``Llama4TextAttention.forward``, with ``attn_temperature_tuning``; vLLM's
``models/llama4.py`` likewise), so long contexts keep their attention sharp. A table of one
column: row ``p`` is the scale at ``p``.

``library`` is transformers' float32 arithmetic (``positions.float()``: positions past
2^24 are rounded first; the division, ``floor``, ``log1p``, the product and the sum each
rounded to float32; ``log1p`` the library engine's, :mod:`.kernels`); ``exact`` is float64
arithmetic (the steps exact), rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from service.arrays import POSITION_CEILING
from service.encodings import kernels
from service.encodings.registry import (
    Audit,
    Bound,
    DType,
    Family,
    Rounding,
    Rows,
    register,
    replacing,
)
from service.errors import InvalidParameter

DEFAULT_FLOOR_SCALE: Final = 8192.0
DEFAULT_ATTN_SCALE: Final = 0.1


@dataclass(frozen=True, slots=True)
class TemperatureKey:
    """Everything that changes the scales: Llama 4's ``floor_scale`` and ``attn_scale``,
    the rounding and the dtype."""

    floor_scale: float = DEFAULT_FLOOR_SCALE
    attn_scale: float = DEFAULT_ATTN_SCALE
    dtype: DType = "float32"
    rounding: Rounding = "library"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.floor_scale) and self.floor_scale >= 1):
            # below 1 it is no floor: float32 division by a tiny one overflows
            raise InvalidParameter("floor_scale", "must be a finite number of at least 1")
        if not (math.isfinite(self.attn_scale) and self.attn_scale >= 0):
            raise InvalidParameter("attn_scale", "must be a non-negative finite number")

    @property
    def width(self) -> int:
        return 1


def take(key: TemperatureKey, positions: NDArray[np.int64]) -> Rows:
    """The scales at ``positions``, one row each."""
    if key.rounding == "library":
        one = np.float32(1)
        steps = np.floor((positions.astype(np.float32) + one) / np.float32(key.floor_scale))
        logs = kernels.log1p(steps)  # the library engine's: torch's own, or correctly rounded
        scales = logs * np.float32(key.attn_scale) + one
    else:  # the steps exactly (integers), the rest in float64, rounded once below
        steps64 = np.floor((positions + 1) / key.floor_scale)
        scales = np.log1p(steps64) * key.attn_scale + 1.0
    rows: Rows = scales.astype(key.dtype)[:, None]
    return rows


def fill(key: TemperatureKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part), dtype=np.int64))
        start += len(part)


def bound(key: TemperatureKey) -> Bound:
    """The largest scale, at the last position any table may hold."""
    largest = math.log1p(math.floor((POSITION_CEILING + 1) / key.floor_scale)) * key.attn_scale
    return Bound(largest + 1.0, ("attn_scale", "floor_scale"))


AUDIT: Final[Audit[TemperatureKey]] = Audit(
    exact=replacing(rounding="exact", dtype="float64"),
    library=replacing(rounding="library", dtype="float32"),
)
FAMILY: Final = register(
    Family(
        "temperature",
        TemperatureKey,
        fill,
        take,
        bound,
        audit=AUDIT,
        engine=lambda key: key.rounding == "library",
    )
)
