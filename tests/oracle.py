"""An independent oracle: each entry from its definition, in 200-bit arithmetic (mpmath)."""

from __future__ import annotations

import functools
from typing import Any

import mpmath
import numpy as np
from numpy.typing import NDArray

mpmath.mp.prec = 200

# The seed's worked example: "I am a robot", four positions, n=100 (the base), d=4.
ROBOT = np.array(
    [
        [0.0, 1.0, 0.0, 1.0],
        [0.84147098, 0.54030231, 0.09983342, 0.99500417],
        [0.90929743, -0.41614684, 0.19866933, 0.98006658],
        [0.14112001, -0.9899925, 0.29552021, 0.95533649],
    ]
)


# kept for the run: the tests ask the same entries in each dtype, format and rounding
@functools.cache
def entry(
    pos: int, column: int, d_model: int, base: float, layout: str = "interleaved"
) -> mpmath.mpf:
    """``PE[pos, column]`` to 200 bits: ``layout`` says which pair and function a column is."""
    sines = (d_model + 1) // 2
    if layout == "interleaved":
        pair, is_sine = column // 2, column % 2 == 0
    else:
        pair, is_sine = (column, True) if column < sines else (column - sines, False)
    angle = mpmath.mpf(pos) / mpmath.power(mpmath.mpf(base), mpmath.mpf(2 * pair) / d_model)
    return mpmath.sin(angle) if is_sine else mpmath.cos(angle)


def exact(pos: int, column: int, d_model: int, base: float, layout: str = "interleaved") -> float:
    """``PE[pos, column]`` to 200 bits, rounded to float64 only when returned."""
    return float(entry(pos, column, d_model, base, layout))


def exact_error(
    value: float, pos: int, column: int, d_model: int, base: float, layout: str = "interleaved"
) -> float:
    """``|value - PE[pos, column]|`` measured in 200 bits, not after rounding to float64."""
    return float(abs(mpmath.mpf(float(value)) - entry(pos, column, d_model, base, layout)))


def rows(
    start: int, stop: int, d_model: int, base: float, layout: str = "interleaved"
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Rows ``start .. stop-1`` to 200 bits, as two float64 tables ``(hi, lo)``: ``hi`` is
    each entry rounded to float64 and ``hi + lo`` is within 2^-106 of it, so ``|(v - hi) -
    lo|`` is the error of a float64 ``v`` near it (``v - hi`` is exact). One angle's sine
    and cosine are computed once for both columns."""
    sines = (d_model + 1) // 2
    hi = np.empty((stop - start, d_model))
    lo = np.empty_like(hi)
    for pair in range(sines):
        w = mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * pair) / d_model)
        if layout == "interleaved":
            sine, cosine = 2 * pair, 2 * pair + 1
        else:
            sine, cosine = pair, sines + pair
        for r, pos in enumerate(range(start, stop)):
            cos, sin = mpmath.cos_sin(pos * w)
            for column, value in ((sine, sin), (cosine, cos)):
                if column < d_model:
                    hi[r, column] = float(value)
                    lo[r, column] = float(value - hi[r, column])
    return hi, lo


def table(
    max_len: int, d_model: int, base: float, layout: str = "interleaved", start: int = 0
) -> NDArray[np.float64]:
    return np.array(
        [
            [exact(pos, k, d_model, base, layout) for k in range(d_model)]
            for pos in range(start, max_len)
        ]
    )


def expected(
    x: NDArray[Any],
    scale: float,
    positions: NDArray[Any],
    base: float = 10000.0,
    layout: str = "interleaved",
) -> NDArray[np.float64]:
    """The exact answer in float64, from the oracle's table."""
    d_model = x.shape[-1]
    rows = {
        int(p): [exact(int(p), k, d_model, base, layout) for k in range(d_model)]
        for p in np.unique(positions)
    }
    pe = np.array([[rows[int(p)] for p in line] for line in np.atleast_2d(positions)])
    pe = pe.reshape((*positions.shape, d_model))
    return np.asarray(x.astype(np.float64) * scale + pe, dtype=np.float64)


def assert_close(y: NDArray[Any], truth: NDArray[np.float64], dtype: str) -> None:
    """Within the rounding that computing in ``dtype`` (float16: in float32) allows."""
    assert y.dtype == np.dtype(dtype)
    error = np.abs(y.astype(np.float64) - truth)
    magnitude = np.abs(truth)
    if dtype == "float64":
        bound = 1e-12 * np.maximum(1.0, magnitude)
    else:
        bound = 3 * 2.0**-24 * magnitude + 2.0**-23
        if dtype == "float16":
            bound += np.spacing(magnitude.astype(np.float16)).astype(np.float64) * 0.5
    assert np.all(error <= bound), float(np.max(error - bound))
