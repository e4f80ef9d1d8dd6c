"""The ``device`` path: not one table but an envelope, the largest error a GPU's math
library may give an entry of a turned pair (:class:`service.encodings.registry.Angles`: a
rotary entry), from the ulp bounds its functions are documented with
(CUDA C++ Programming Guide, "Mathematical Functions": ``powf`` 4 ulp, ``sinf`` and
``cosf`` 2 ulp; IEEE division and multiplication correctly rounded), applied to
transformers' operation order. It is an estimate: the docs give its measured margin over
the H200 tables of ``../shared/reference/cuda``.

For pair ``k`` at position ``p``, with the exact inverse frequency ``w``, the CPU's float32
one ``w32`` and ``P = float32(p)``:

- the device's inverse frequency is within ``|w32 - w| + K * 2^-23 * w`` of ``w``: its
  ``pow`` may round otherwise than the CPU's by the two libraries' bounds, ``K`` ulps, more
  for the scalings that compute more on the device (``dynamic`` recomputes its base there);
- its angle ``float32(P * w_device)`` is within ``P * that + |P - p| * w + ulp(angle) / 2``
  of ``p * w``;
- its cos and sin are within that angle error, plus 2 ulp of the result (at most 2^-22),
  and the attention factor's product rounds once more.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray

from service.audit.paths import angles, exact_key, library_key
from service.encodings.registry import Angles, Key

_TRIG: Final = 2.0**-22  # sinf, cosf: 2 ulp of a result of at most 1
_EPSILON: Final = 2.0**-23
# float64 arithmetic (Angles.wide): sin and cos 2 ulp of a double, then the table's
# float32 rounding (half an ulp of a result of at most 1)
_WIDE_TRIG: Final = 2.0**-51 + 2.0**-25
_WIDE_EPSILON: Final = 2.0**-52


def _turning(key: Key) -> Angles[Key]:
    turning = angles(key)
    if turning is None:
        raise TypeError("the device envelope is a turned pair's: its family has no angles")
    return turning


def frequency_error(key: Key) -> NDArray[np.float64]:
    """How far the device's inverse frequencies may be from the exact ones (by the ulps the
    family's record gives, :attr:`Angles.ulps`)."""
    turning = _turning(key)
    exact = turning.exact(exact_key(key))
    # float64 frequencies are within the device's ulps of the exact ones, as the CPU's
    cpu = exact if turning.wide(key) else turning.library(library_key(key)).astype(np.float64)
    epsilon = _WIDE_EPSILON if turning.wide(key) else _EPSILON
    error: NDArray[np.float64] = np.abs(cpu - exact) + turning.ulps(key) * epsilon * exact
    return error


def _per_pair(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Positions ``(N,)`` as a column, or per pair ``(N, pairs)`` as they are."""
    return values if values.ndim == 2 else values[:, None]


def bounds(
    key: Key, positions: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per position and pair: the bound on a cos or sin entry's error, and on its angle's."""
    turning = _turning(key)
    exact = turning.exact(exact_key(key))
    if turning.received is None:
        wide = positions.astype(np.float64)
        narrow = positions.astype(np.float32).astype(np.float64)
    else:
        wide, narrow = turning.received(key, positions)
    wide, narrow = _per_pair(wide), _per_pair(narrow)
    angle = np.abs(narrow * exact[None, :])
    double = turning.wide(key)
    ulp = np.spacing(angle) if double else np.spacing(angle.astype(np.float32))
    drift = (
        np.abs(narrow) * frequency_error(key)[None, :]
        + np.abs(narrow - wide) * exact[None, :]
        + ulp.astype(np.float64) / 2
    )
    attention = turning.attention(key)
    trig, epsilon = (_WIDE_TRIG, _WIDE_EPSILON) if double else (_TRIG, _EPSILON)
    entry = attention * (np.minimum(drift, 2.0) + trig) + attention * epsilon / 2
    return np.minimum(entry, 2 * attention), drift
