"""Exact angles: double-double frequencies, and served entries within ``F64_BOUND`` of the
true value at every position up to 2^31 (``PE_MAX_POSITION``'s ceiling), float32 entries
those rounded once. README ("Exact.") and RELIABILITY.md state these numbers;
tests/test_readme.py checks that they state these."""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest

from service.encodings import _exact, registry
from service.encodings.sinusoidal import LAYOUTS, Layout, SinusoidalKey
from service.settings import POSITION_CEILING
from tests import oracle
from tests.support import sample

# Every float64 entry is within this of the true value: 4 x 2^-53, two ulps of 1. It is
# absolute (an entry near 0 is off by many of its own ulps): angle addition sums two
# products of rounded sines and cosines, each within about one ulp (bench/accuracy.py: the
# worst found is 3.45e-16, 3.1 x 2^-53).
F64_BOUND = 2.0**-51
# Near position 10^6, every row of a table computed in float32 arithmetic as the tutorials
# do (the pytorch-tutorial preset's library rounding) is off by between these.
TUTORIAL_ERROR = (1e-2, 1e-1)
# The positions the accuracy is checked near, as the README names them.
FAR = {"1e6": 10**6, "1e8": 10**8, "2^31-1": POSITION_CEILING}


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


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    ("d_model", "base"),
    sample(
        [
            pytest.param(4, 10000.0, id="4"),
            pytest.param(64, 10000.0, id="64"),
            pytest.param(512, 10000.0, id="512"),
            pytest.param(1023, 10000.0, id="1023-odd"),
            pytest.param(40000, 10000.0, id="40000-unblocked"),  # too wide for angle addition
            pytest.param(64, 100.0, id="64-base100"),
            pytest.param(7, 500000.0, id="7-base5e5"),
        ],
        2,
    ),
)
@pytest.mark.parametrize("near", FAR.values(), ids=FAR.keys())
def test_accuracy_at_far_positions(near: int, d_model: int, base: float, layout: Layout) -> None:
    """Rows around 10^6, 10^8 and up to 2^31 - 1, in 200-bit arithmetic: float64 within
    ``F64_BOUND``; float32 the float64 entries rounded once, so within half a float32 ulp
    of them, and of the true value but for ``F64_BOUND``."""
    count = 256 if d_model <= 1024 else 4  # 256 rows: every offset in a 64-row block
    stop = min(near + count // 2, POSITION_CEILING + 1)
    start = stop - count
    t64 = registry.rows(SinusoidalKey(d_model, base, layout, "float64"), start, stop)
    t32 = registry.rows(SinusoidalKey(d_model, base, layout, "float32"), start, stop)
    assert np.array_equal(t32, t64.astype(np.float32))
    rng = np.random.default_rng([near, d_model])
    rows = rng.integers(0, count, 96)
    cols = rng.integers(0, d_model, 96)
    rows[:4] = count - 1  # the last position (2^31 - 1 itself)
    cols[:4] = [0, 1, d_model - 1, max(d_model - 2, 0)]  # the extremes of frequency
    for r, k in zip(rows.tolist(), cols.tolist(), strict=True):
        truth = oracle.entry(start + r, k, d_model, base, layout)
        assert abs(mpmath.mpf(float(t64[r, k])) - truth) <= F64_BOUND, (start + r, k)
        half_ulp = float(np.spacing(np.float32(abs(truth)))) / 2
        assert abs(mpmath.mpf(float(t32[r, k])) - truth) <= half_ulp + F64_BOUND, (start + r, k)


@pytest.mark.parametrize(
    ("pos", "column", "d_model", "base"),
    [
        pytest.param(999_991, 10, 64, 10000.0, id="2.5-ulp-near-1e6"),  # an operator's report
        pytest.param(99_999_991, 266, 1023, 100.0, id="3.1-ulp-near-1e8"),
        pytest.param(2_147_483_235, 146, 1023, 100.0, id="3.1-ulp-near-2^31"),
    ],
)
def test_the_worst_entries_found_are_within_the_bound(
    pos: int, column: int, d_model: int, base: float
) -> None:
    """The float64 entries farthest from the truth in bench/accuracy.py's sweep (over 2.5 x
    2^-53, where an earlier README promised 2.3e-16), alone and in their table."""
    key = SinusoidalKey(d_model, base, dtype="float64")
    row = registry.rows(key, pos - 70, pos + 1)[-1]
    assert np.array_equal(registry.take(key, np.array([pos]))[0], row)
    error = oracle.exact_error(row[column], pos, column, d_model, base)
    assert 2.5 * 2.0**-53 < error <= F64_BOUND


def test_float32_entries_are_the_float64_entries_rounded_once() -> None:
    """Not the truth rounded once: where the true value is within the float64 error of a
    half-way point between two float32s, the served entry is the other neighbour (0.5000000014
    float32 ulp off, within half an ulp plus ``F64_BOUND``)."""
    pos, column, d_model, base = 1_000_292, 50, 512, 500000.0
    t64 = registry.rows(SinusoidalKey(d_model, base, dtype="float64"), pos, pos + 1)[0, column]
    t32 = registry.rows(SinusoidalKey(d_model, base, dtype="float32"), pos, pos + 1)[0, column]
    truth = oracle.entry(pos, column, d_model, base)
    assert t32 == np.float32(t64) != np.float32(float(truth))
    half_ulp = float(np.spacing(np.float32(abs(truth)))) / 2
    assert half_ulp < abs(mpmath.mpf(float(t32)) - truth) <= half_ulp + F64_BOUND


@pytest.mark.parametrize("d_model", [64, 512, 1024])
def test_float32_arithmetic_is_far_off_near_a_million(d_model: int) -> None:
    """The README's foil: the PyTorch tutorial's float32 table (the preset that reproduces
    it) is off by ``TUTORIAL_ERROR`` in every row near position 10^6."""
    start, stop = 10**6 - 64, 10**6 + 64
    tutorial = SinusoidalKey(d_model, preset="pytorch-tutorial", rounding="library")
    exact = registry.rows(SinusoidalKey(d_model, dtype="float64"), start, stop)
    worst = np.abs(registry.rows(tutorial, start, stop) - exact).max(axis=1)
    low, high = TUTORIAL_ERROR
    assert worst.min() > low
    assert worst.max() < high


def test_the_second_order_term_matters_past_a_million() -> None:
    """Without ``small^2 / 2`` an angle near 2^31 is off by ~1e-14 (a hundred ulp)."""
    pos = np.array([float(POSITION_CEILING)])
    w_hi, w_lo = _exact.inverse_powers(10000.0, 512, 3)
    sin, cos = _exact.sincos(pos, w_hi, w_lo)
    for i in range(3):
        angle = mpmath.mpf(POSITION_CEILING) / mpmath.power(10000, mpmath.mpf(2 * i) / 512)
        assert abs(mpmath.mpf(sin[0, i]) - mpmath.sin(angle)) <= F64_BOUND
        assert abs(mpmath.mpf(cos[0, i]) - mpmath.cos(angle)) <= F64_BOUND


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
