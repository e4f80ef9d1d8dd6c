"""ALiBi in numpy: the slopes of Press et al.'s ``get_slopes`` (any head count), BLOOM's
float32 arithmetic and the exact values rounded once (against 60-digit arithmetic), and the
bias blocks in their three forms, masked, offset and sliced."""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from service.encodings import alibi
from service.encodings.alibi import FORMS, Bias, Form
from service.encodings.registry import DTYPES, DType
from tests.support import sample

_CONTEXT = decimal.Context(prec=60)


# kept for the run: each head's slope is asked in every dtype and head count
@functools.cache
def true_slope(k: int, c: int) -> Fraction:
    """``2^(-8k/c)`` to 60 digits."""
    exponent = _CONTEXT.divide(decimal.Decimal(-8 * k), decimal.Decimal(c))
    return Fraction(_CONTEXT.power(decimal.Decimal(2), exponent))


def press_slopes(n: int) -> list[float]:
    """``get_slopes`` as the paper's repository describes it, in float64: for the largest
    power of two c <= n, ratio^1 .. ratio^c with ratio = 2^(-8/c); then every other slope
    of 2c heads, the first n - c of them."""

    def powers_of_two(count: int) -> list[float]:
        ratio = 2.0 ** (-8.0 / count)
        return [ratio ** (i + 1) for i in range(count)]

    c = 2 ** math.floor(math.log2(n))
    return powers_of_two(c) + powers_of_two(2 * c)[0::2][: n - c]


def nearest(value: Fraction, got: Any) -> bool:
    """``got`` (a numpy scalar) is a value of its dtype nearest to ``value``."""
    error = abs(Fraction(float(got)) - value)
    neighbours = (np.nextafter(got, got.dtype.type(np.inf)), np.nextafter(got, got.dtype.type(0)))
    return all(error <= abs(Fraction(float(n)) - value) for n in neighbours)


def test_eight_heads_are_one_half_to_one_256th() -> None:
    expected = [2.0**-k for k in range(1, 9)]
    for rounding in ("library", "exact"):
        for dtype in DTYPES:
            got = alibi.slopes(8, rounding, dtype)
            assert got.dtype == np.dtype(dtype)
            assert got.tolist() == expected


def test_twelve_heads_take_every_other_slope_of_sixteen() -> None:
    got = alibi.slopes(12, "exact", "float64")
    assert got[:8].tolist() == [2.0**-k for k in range(1, 9)]
    np.testing.assert_allclose(got[8:], [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5], rtol=1e-15)
    assert alibi.exponents(12)[0].tolist() == [*range(1, 9), 1, 3, 5, 7]
    assert alibi.exponents(12)[1].tolist() == [8] * 8 + [16] * 4


@pytest.mark.parametrize(
    ("num_heads", "first"),
    [
        pytest.param(1, [2**-8], id="1"),
        pytest.param(2, [2**-4, 2**-8], id="2"),
        pytest.param(3, [2**-4, 2**-8, 2**-2], id="3"),
        pytest.param(4, [2**-2, 2**-4, 2**-6, 2**-8], id="4"),
        pytest.param(6, [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3], id="6"),
    ],
)
def test_small_head_counts(num_heads: int, first: list[float]) -> None:
    assert alibi.slopes(num_heads, "exact", "float64").tolist() == first
    assert alibi.slopes(num_heads).tolist() == first


@pytest.mark.parametrize("num_heads", [*range(1, 70), 96, 100, 127, 128, 129, 255, 1000, 4099])
def test_exact_slopes_follow_get_slopes(num_heads: int) -> None:
    """The reference's float64 ``ratio ** i`` carries the rounding of ``ratio`` i times."""
    got = alibi.slopes(num_heads, "exact", "float64")
    bound = 2.0**-52 * 2 * alibi.closest_power_of_two(num_heads)
    np.testing.assert_allclose(got, press_slopes(num_heads), rtol=bound, atol=0)


@pytest.mark.parametrize("num_heads", sample([5, 12, 24, 40, 64, 80, 96, 112, 128, 200, 1000], 2))
@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_slopes_are_rounded_once(num_heads: int, dtype: DType) -> None:
    got = alibi.slopes(num_heads, "exact", dtype)
    ks, cs = alibi.exponents(num_heads)
    for slope, k, c in zip(got, ks, cs, strict=True):
        assert nearest(true_slope(int(k), int(c)), slope), (k, c, slope)


@pytest.mark.parametrize("num_heads", [1, 7, 16, 17, 32, 33, 48, 64, 100, 256, 300])
def test_library_slopes_are_blooms_arithmetic(num_heads: int) -> None:
    """A float32 base from Python's float 2^(-8/c), raised to integer powers with one
    rounding to float32 (checked against the exact power of that float32 base)."""
    got = alibi.slopes(num_heads)
    c = alibi.closest_power_of_two(num_heads)
    ks, cs = alibi.exponents(num_heads)
    for slope, k, denominator in zip(got, ks, cs, strict=True):
        base = Fraction(float(np.float32(2.0 ** (-8.0 / int(denominator)))))
        assert nearest(base ** int(k), slope)
    assert got.dtype == np.float32
    assert c == 2 ** int(math.log2(num_heads))


def test_library_and_exact_differ_where_the_float32_base_is_rounded() -> None:
    """16 heads: BLOOM squares a float32 2^(-1/2), so even its 2^-1 is not one half."""
    library, exact = alibi.slopes(16), alibi.slopes(16, "exact")
    assert exact[1::2].tolist() == [2.0**-k for k in range(1, 9)]
    assert library[1] == np.float32(0.49999997) != exact[1]
    assert np.array_equal(alibi.slopes(8), alibi.slopes(8, "exact"))  # a base of 1/2


@pytest.mark.parametrize(
    ("hi", "lo", "expected"),
    [
        pytest.param(1 + 2.0**-24, 2.0**-60, 1 + 2.0**-23, id="tie-lo-up"),
        pytest.param(1 + 2.0**-24, -(2.0**-60), 1.0, id="tie-lo-down"),
        pytest.param(1 + 2.0**-24, 0.0, 1.0, id="tie-even-down"),
        pytest.param(1 + 3 * 2.0**-24, 0.0, 1 + 2 * 2.0**-23, id="tie-even-up"),
        pytest.param(1 + 3 * 2.0**-24, -(2.0**-60), 1 + 2.0**-23, id="tie-odd-down"),
        pytest.param(1 + 2.0**-25, 2.0**-60, 1.0, id="no-tie"),
    ],
)
def test_round_once_breaks_float64_ties_with_the_low_part(
    hi: float, lo: float, expected: float
) -> None:
    got = alibi.round_once(np.array([hi]), np.array([lo]), "float32")
    assert got.dtype == np.float32
    assert float(got[0]) == expected


def test_round_once_breaks_ties_in_float16_too() -> None:
    got = alibi.round_once(np.array([1 + 2.0**-11]), np.array([2.0**-40]), "float16")
    assert float(got[0]) == 1 + 2.0**-10


def entry(bias: Bias, h: int, r: int, j: int) -> float | None:
    """The exact value of entry (h, r, j) of ``bias`` as a float, None where masked."""
    k, c = (int(x[h]) for x in alibi.exponents(bias.num_heads))
    i = bias.start + r + bias.offset
    if bias.form != "symmetric" and j > i:
        return None
    distance = j if bias.form == "bloom" else abs(i - j)
    value = true_slope(k, c) * distance
    return float(value if bias.form == "bloom" else -value)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    "shape",
    [
        pytest.param({"max_len": 5, "key_len": 5}, id="square"),
        pytest.param({"max_len": 3, "key_len": 7}, id="cached-keys"),
        pytest.param({"max_len": 6, "key_len": 9, "start": 2, "stop": 5}, id="slice"),
        pytest.param({"max_len": 6, "key_len": 6, "start": 5}, id="last-row"),
        pytest.param({"max_len": 1, "key_len": 1}, id="1x1"),
    ],
)
def test_every_entry_of_every_form(form: Form, shape: dict[str, int]) -> None:
    bias = Bias(num_heads=6, form=form, rounding="exact", dtype="float64", **shape)
    got = alibi.block(bias)
    assert got.shape == bias.shape == (6, bias.row_stop - bias.start, bias.key_len)
    assert got.flags.c_contiguous
    for (h, r, j), value in np.ndenumerate(got):
        expected = entry(bias, h, r, j)
        assert value == (-np.inf if expected is None else pytest.approx(expected, rel=1e-15))
    assert not np.signbit(got[got == 0]).any()  # 0.0 on the diagonal, never -0.0


def test_the_causal_form_by_hand() -> None:
    got = alibi.block(Bias(2, 3, 3))
    inf = np.inf
    assert got.tolist() == [
        [[0, -inf, -inf], [-1 / 16, 0, -inf], [-2 / 16, -1 / 16, 0]],
        [[0, -inf, -inf], [-1 / 256, 0, -inf], [-2 / 256, -1 / 256, 0]],
    ]


def test_symmetric_with_fewer_keys_than_queries() -> None:
    got = alibi.block(Bias(1, 4, 2, "symmetric", rounding="exact", dtype="float64"))
    # query i sits at key position i - 2
    assert got[0].tolist() == [
        [-2 / 256, -3 / 256],
        [-1 / 256, -2 / 256],
        [0, -1 / 256],
        [-1 / 256, 0],
    ]


@pytest.mark.parametrize("rounding", ["library", "exact"])
def test_bloom_is_causal_shifted_by_m_i(rounding: str) -> None:
    bias = Bias(12, 40, 50, "causal", rounding=rounding, dtype="float64")  # type: ignore[arg-type]
    causal, bloom = alibi.block(bias), alibi.block(Bias(12, 40, 50, "bloom", rounding=rounding))  # type: ignore[arg-type]
    assert np.array_equal(np.isinf(causal), np.isinf(bloom))
    slopes = alibi.slopes(12, rounding, "float64")  # type: ignore[arg-type]
    shift = slopes[:, None, None] * (np.arange(40) + 10)[None, :, None]
    visible = ~np.isinf(causal)
    difference = bloom.astype(np.float64)[visible] - causal[visible]
    np.testing.assert_allclose(difference, np.broadcast_to(shift, causal.shape)[visible], rtol=1e-6)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("rounding", ["library", "exact"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_slices_are_blocks_of_the_whole(form: Form, rounding: str, dtype: DType) -> None:
    whole = alibi.block(Bias(5, 30, 33, form, rounding=rounding, dtype=dtype))  # type: ignore[arg-type]
    for start, stop in [(0, 1), (7, 8), (29, 30), (3, 17), (0, 30)]:
        part = alibi.block(Bias(5, 30, 33, form, start, stop, rounding, dtype))  # type: ignore[arg-type]
        assert np.array_equal(part, whole[:, start:stop], equal_nan=False)


@pytest.mark.parametrize("form", FORMS)
def test_one_key_is_the_first_column(form: Form) -> None:
    if form == "symmetric":
        one = alibi.block(Bias(3, 20, 1, form))
        assert np.array_equal(one[:, :, 0], -alibi.slopes(3)[:, None] * np.abs(np.arange(20) - 19))
    else:
        whole = alibi.block(Bias(3, 20, 20, form))
        assert np.array_equal(alibi.block(Bias(3, 1, 1, form))[:, :, 0], whole[:, :1, 0])


@pytest.mark.parametrize("form", FORMS)
def test_library_entries_are_float32_products(form: Form) -> None:
    """BLOOM's ``slopes[..., None] * arange``: float32 slope times float32 distance."""
    bias = Bias(24, 4, 5000, form, start=1, stop=3)
    got = alibi.block(bias)
    slopes = alibi.library_slopes(24)
    i = np.arange(1, 3)[:, None] + bias.offset
    j = np.arange(5000)[None, :]
    distance = (j if form == "bloom" else np.abs(i - j)).astype(np.float32)
    product = slopes[:, None, None] * distance[None]
    expected = product if form == "bloom" else -product
    expected = np.where(((j > i) & (form != "symmetric"))[None], -np.inf, expected)
    assert np.array_equal(got, expected + 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_entries_far_out_are_rounded_once(dtype: DType) -> None:
    """The last query of 2^31 - 1 against three keys: distances near 2^31."""
    top = 2**31 - 1 if dtype != "float16" else 2**13
    got = alibi.block(Bias(12, top, 3, "symmetric", start=top - 1, rounding="exact", dtype=dtype))
    ks, cs = alibi.exponents(12)
    for h in range(12):
        for j in range(3):
            distance = abs((top - 1) + (3 - top) - j)
            assert nearest(-true_slope(int(ks[h]), int(cs[h])) * distance, got[h, 0, j])


def test_large_blocks_are_filled_in_parallel_with_the_same_bits() -> None:
    big = Bias(4, 1 << 19, 1 << 19, "causal", stop=1, rounding="exact")
    whole = alibi.block(
        Bias(4, 1 << 19, 1 << 19, "symmetric", start=(1 << 19) - 1, rounding="exact")
    )
    got = alibi.block(Bias(4, 1, 1 << 19, "symmetric", rounding="exact"))
    assert np.array_equal(got, whole)
    assert np.isinf(alibi.block(big)[:, 0, 1:]).all()


@pytest.mark.parametrize(
    ("bias", "distance"),
    [
        pytest.param(Bias(1, 10, 10), 9, id="causal"),
        pytest.param(Bias(1, 10, 15, start=2, stop=4), 8, id="causal-slice"),
        pytest.param(Bias(1, 10, 10, "bloom"), 9, id="bloom"),
        pytest.param(Bias(1, 10, 10, "symmetric", start=2, stop=3), 7, id="symmetric"),
        pytest.param(Bias(1, 10, 3, "symmetric"), 9, id="symmetric-few-keys"),
    ],
)
def test_largest_distance(bias: Bias, distance: int) -> None:
    assert bias.largest_distance() == distance
    block = alibi.block(bias)
    finite = np.abs(block[np.isfinite(block)])
    assert finite.max() == alibi.largest_magnitude(bias) == distance * 2.0**-8


def test_float16_overflow_is_infinite_magnitude() -> None:
    assert alibi.largest_magnitude(Bias(1, 1 << 24, 1 << 24, dtype="float16")) == np.inf
    assert (
        alibi.largest_magnitude(Bias(1, 1 << 24, 1 << 24, rounding="exact", dtype="float16"))
        == np.inf
    )
    assert alibi.largest_magnitude(Bias(1, 1 << 20, 1 << 20, dtype="float16")) == 4096.0
