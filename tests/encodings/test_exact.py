"""Exact angles: double-double frequencies, and sines and cosines accurate to about one
float64 ulp at every position up to 2^31 (``PE_MAX_POSITION``'s ceiling)."""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest

from service.encodings import _exact, registry
from service.encodings.sinusoidal import SinusoidalKey
from service.settings import POSITION_CEILING
from tests import oracle

# a few float64 ulp of values in [0.5, 1): what "within a few ulp" means for an entry
F64_FEW_ULP = 2.0**-51


def test_frequencies_are_double_double_exact() -> None:
    hi, lo = _exact.inverse_powers(10000.0, 1000, 500)
    for i in (0, 1, 77, 255, 499):
        truth = mpmath.power(10000, mpmath.mpf(-2 * i) / 1000)
        assert abs(mpmath.mpf(hi[i]) + mpmath.mpf(lo[i]) - truth) <= truth * 2.0**-100


@pytest.mark.parametrize("count", [0, 1, 2, 3, 64, 65])
def test_frequencies_of_any_count(count: int) -> None:
    hi, lo = _exact.inverse_powers(100.0, 2 * count + 1, count)
    assert hi.shape == lo.shape == (count,)
    np.testing.assert_allclose(hi, 100.0 ** (-2 * np.arange(count) / (2 * count + 1)), rtol=1e-15)


@pytest.mark.parametrize(
    ("d_model", "base"),
    [
        pytest.param(512, 10000.0, id="512"),
        pytest.param(1023, 10000.0, id="1023-odd"),
        pytest.param(64, 100.0, id="64-base100"),
        pytest.param(7, 500000.0, id="7-base5e5"),
    ],
)
def test_accuracy_near_the_largest_position(d_model: int, base: float) -> None:
    """Rows up to 2^31 - 1: float64 within a few ulp, float32 within half an ulp (plus
    the float64 error) of the exact value, measured in 200-bit arithmetic."""
    stop = POSITION_CEILING + 1
    start = stop - 300
    t64 = registry.rows(SinusoidalKey(d_model, base, dtype="float64"), start, stop)
    t32 = registry.rows(SinusoidalKey(d_model, base, dtype="float32"), start, stop)
    rng = np.random.default_rng(d_model)
    rows = rng.integers(0, stop - start, 120)
    cols = rng.integers(0, d_model, 120)
    rows[:4] = stop - start - 1  # the largest position itself
    cols[:4] = [0, 1, d_model - 1, max(d_model - 2, 0)]  # the extremes of frequency
    for r, k in zip(rows.tolist(), cols.tolist(), strict=True):
        truth = oracle.exact(start + r, k, d_model, base)
        assert oracle.exact_error(t64[r, k], start + r, k, d_model, base) <= F64_FEW_ULP
        half_ulp = float(np.spacing(np.float32(abs(truth)))) / 2
        assert oracle.exact_error(t32[r, k], start + r, k, d_model, base) <= half_ulp + 1e-15


def test_the_second_order_term_matters_past_a_million() -> None:
    """Without ``small^2 / 2`` an angle near 2^31 is off by ~1e-14 (a hundred ulp)."""
    pos = np.array([float(POSITION_CEILING)])
    w_hi, w_lo = _exact.inverse_powers(10000.0, 512, 3)
    sin, cos = _exact.sincos(pos, w_hi, w_lo)
    for i in range(3):
        angle = mpmath.mpf(POSITION_CEILING) / mpmath.power(10000, mpmath.mpf(2 * i) / 512)
        assert abs(mpmath.mpf(sin[0, i]) - mpmath.sin(angle)) <= F64_FEW_ULP
        assert abs(mpmath.mpf(cos[0, i]) - mpmath.cos(angle)) <= F64_FEW_ULP


def test_parallel_and_serial_fills_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    key = SinusoidalKey(512)
    parallel = registry.rows(key, 3, 4099)
    assert parallel.size >= _exact._PARALLEL_ELEMENTS
    monkeypatch.setattr(_exact, "_PARALLEL_ELEMENTS", 1 << 62)
    assert np.array_equal(registry.rows(key, 3, 4099), parallel)


def test_narrow_fills_take_many_blocks_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table of 2^20 rows and one frequency is filled in a few dozen numpy steps, not one
    per 64-row block (16,384 Python steps: 12 s for 2^26 rows), with the same bits as
    the rows taken one by one."""
    steps = []
    pieces = _exact._Writer.pieces

    def counted(self: _exact._Writer, lo: int, hi: int) -> list[Any]:
        steps.append(hi - lo)
        return pieces(self, lo, hi)

    monkeypatch.setattr(_exact._Writer, "pieces", counted)
    w_hi, w_lo = _exact.inverse_powers(10000.0, 2, 1)
    rows = 1 << 20
    out = np.empty((rows, 2))
    _exact.fill(0, w_hi, w_lo, [(out[:, 0::2], out[:, 1::2])])
    assert sum(steps) == rows
    assert len(steps) <= rows // _exact.CHUNK_ELEMENTS + 2
    some = np.array([0, 63, 64, 99_999, rows - 1])
    taken = np.empty((len(some), 2))
    _exact.take(some, w_hi, w_lo, (taken[:, 0::2], taken[:, 1::2]))
    assert np.array_equal(out[some], taken)
