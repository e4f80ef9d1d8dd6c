"""The sinusoidal family: its tables against 200-bit arithmetic, its layouts and odd
widths, its rows in pieces and at scattered positions, and the similarity of positions."""

from __future__ import annotations

import numpy as np
import pytest

from service.encodings import registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import LAYOUTS, Layout, SinusoidalKey, similarity
from service.errors import InvalidParameter
from tests import oracle
from tests.support import sample


def encoding(
    start: int,
    stop: int,
    d_model: int,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    dtype: DType = "float32",
) -> np.ndarray[tuple[int, int], np.dtype[np.floating]]:
    return registry.rows(SinusoidalKey(d_model, base, layout, dtype), start, stop)


F32_BOUND = 2.0**-23
F64_BOUND = 1e-12


def test_the_seeds_worked_example() -> None:
    """n=100, d=4, "I am a robot": the table printed in the seed, to its 8 decimals."""
    table = encoding(0, 4, 4, base=100.0, dtype="float64")
    np.testing.assert_allclose(table, oracle.ROBOT, rtol=0, atol=5e-9)


@pytest.mark.parametrize(
    ("max_len", "d_model", "base"),
    sample(
        [
            pytest.param(1, 1, 10000.0, id="1x1"),
            pytest.param(50, 4, 100.0, id="50x4-base100"),
            pytest.param(40, 5, 10000.0, id="40x5-odd"),
            pytest.param(30, 33, 10000.0, id="30x33-odd"),
            pytest.param(20, 64, 10000.0, id="20x64"),
            pytest.param(10, 7, 1.0001, id="base-near-1"),
            pytest.param(10, 9, 1e12, id="base-1e12"),
        ],
        2,
    ),
)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tables_match_the_oracle(
    max_len: int, d_model: int, base: float, layout: Layout, dtype: DType
) -> None:
    table = encoding(0, max_len, d_model, base, layout, dtype)
    truth = oracle.table(max_len, d_model, base, layout)
    assert table.shape == (max_len, d_model)
    assert table.dtype == np.dtype(dtype)
    assert table.flags.c_contiguous
    if dtype == "float16":
        # one rounding: the nearest float16 to the exact value
        half_ulp = np.spacing(np.abs(truth).astype(np.float16)).astype(np.float64) / 2
        assert np.all(np.abs(table.astype(np.float64) - truth) <= half_ulp * (1 + 1e-9))
    else:
        bound = F32_BOUND if dtype == "float32" else F64_BOUND
        assert np.max(np.abs(table.astype(np.float64) - truth)) <= bound


@pytest.mark.parametrize(
    ("d_model", "base"),
    [
        pytest.param(512, 10000.0, id="512"),
        pytest.param(1023, 10000.0, id="1023-odd"),
        pytest.param(4, 100.0, id="4-base100"),
        pytest.param(96, 1.5, id="96-base1.5"),
    ],
)
def test_accuracy_near_a_million(d_model: int, base: float) -> None:
    """Every sampled entry of rows 999,000 .. 999,999 against the exact value."""
    start, stop = 999_000, 1_000_000
    t32 = encoding(start, stop, d_model, base, dtype="float32")
    t64 = encoding(start, stop, d_model, base, dtype="float64")
    rng = np.random.default_rng(d_model)
    rows = rng.integers(0, stop - start, 150)
    cols = rng.integers(0, d_model, 150)
    cols[:4] = [0, 1, d_model - 1, d_model - 2 if d_model > 1 else 0]  # extremes of frequency
    err32 = max(
        oracle.exact_error(t32[r, k], start + r, k, d_model, base)
        for r, k in zip(rows, cols, strict=True)
    )
    err64 = max(
        oracle.exact_error(t64[r, k], start + r, k, d_model, base)
        for r, k in zip(rows, cols, strict=True)
    )
    assert err32 <= F32_BOUND
    assert err64 <= F64_BOUND


def test_positions_past_two_to_the_27() -> None:
    """Past 2^27 a position no longer fits Dekker's 26-bit half; the general product runs."""
    start = (1 << 27) + 3
    table = encoding(start, start + 3, 10, 10000.0, dtype="float64")
    for r in range(3):
        for k in range(10):
            assert oracle.exact_error(table[r, k], start + r, k, 10, 10000.0) <= F64_BOUND


def test_the_float32_error_of_naive_float32_arithmetic_is_avoided() -> None:
    """The design's claim: float32 angles are off by ~3e-3 at position 100,000; ours are not."""
    pos, d_model = 100_000, 512
    naive = np.sin(np.float32(pos) * np.float32(10000.0) ** (-np.float32(2 * 3) / d_model))
    ours = encoding(pos, pos + 1, d_model)[0, 6]
    truth = oracle.exact(pos, 6, d_model, 10000.0)
    assert abs(float(naive) - truth) > 1e-4
    assert abs(float(ours) - truth) <= F32_BOUND


def test_odd_d_model_ends_with_a_sine() -> None:
    table = encoding(0, 8, 5, dtype="float64")
    angle = np.arange(8) / 10000.0 ** (4 / 5)
    np.testing.assert_allclose(table[:, 4], np.sin(angle), rtol=0, atol=1e-15)


def test_row_zero_is_sin_zero_cos_zero() -> None:
    assert encoding(0, 1, 7).tolist() == [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]]


@pytest.mark.parametrize("d_model", [1, 2, 7, 8])
def test_split_is_interleaved_with_columns_regrouped(d_model: int) -> None:
    inter = encoding(0, 30, d_model)
    split = encoding(0, 30, d_model, layout="split")
    sines = (d_model + 1) // 2
    assert np.array_equal(split[:, :sines], inter[:, 0::2])
    assert np.array_equal(split[:, sines:], inter[:, 1::2])


def test_rows_do_not_depend_on_where_the_computation_starts() -> None:
    """A slice computed alone is bit-identical to the same rows of the whole table."""
    whole = encoding(0, 5000, 48, dtype="float64")
    assert np.array_equal(encoding(1234, 4321, 48, dtype="float64"), whole[1234:4321])


@pytest.mark.parametrize(
    ("args", "name"),
    [
        pytest.param((0, 10000.0, "interleaved", "float32"), "d_model", id="d_model=0"),
        pytest.param((4, 1.0, "interleaved", "float32"), "base", id="base=1"),
        pytest.param((4, float("nan"), "interleaved", "float32"), "base", id="base=nan"),
        pytest.param((4, float("inf"), "interleaved", "float32"), "base", id="base=inf"),
        pytest.param((4, 10000.0, "diagonal", "float32"), "layout", id="layout"),
        pytest.param((4, 10000.0, "interleaved", "int8"), "dtype", id="dtype"),
    ],
)
def test_invalid_keys_name_the_parameter(args: tuple[object, ...], name: str) -> None:
    with pytest.raises(InvalidParameter) as caught:
        SinusoidalKey(*args)  # type: ignore[arg-type]
    assert caught.value.name == name
    assert caught.value.status == 422


@pytest.mark.parametrize(
    ("start", "stop"),
    [(0, 1), (5, 6), (63, 65), (64, 128), (60, 200), (127, 129), (1, 999), (640, 641)],
)
def test_any_slice_is_bit_identical_to_the_whole_table(start: int, stop: int) -> None:
    """Blocks of the angle-addition path are aligned to absolute positions."""
    whole = encoding(0, 1000, 30, dtype="float64")
    assert np.array_equal(encoding(start, stop, 30, dtype="float64"), whole[start:stop])


def test_very_wide_tables_are_exact_too() -> None:
    """Past 2^15 columns each angle gets its own sine and cosine (no block offsets)."""
    d_model = 2 * (1 << 14) + 3
    table = encoding(70, 73, d_model, dtype="float64")
    for r, k in [(0, 0), (1, 1), (2, 5000), (0, d_model - 1), (1, d_model - 2), (2, 32770)]:
        assert oracle.exact_error(table[r, k], 70 + r, k, d_model, 10000.0) <= F64_BOUND
    assert np.array_equal(encoding(71, 72, d_model, dtype="float64"), table[1:2])


@pytest.mark.parametrize(
    ("start", "stop", "step", "d_model", "base"),
    [
        pytest.param(0, 50, 1, 4, 100.0, id="50x4"),
        pytest.param(0, 40, 1, 5, 10000.0, id="odd"),
        pytest.param(0, 5, 1, 1, 10000.0, id="one-column"),
        pytest.param(3, 1000, 7, 33, 10000.0, id="stepped-odd"),
        pytest.param(10**6, 10**6 + 300, 3, 512, 10000.0, id="near-a-million"),
        pytest.param(0, 1, 1, 2, 10000.0, id="one-position"),
    ],
)
def test_similarity_is_the_matrix_of_dot_products(
    start: int, stop: int, step: int, d_model: int, base: float
) -> None:
    rows = encoding(start, stop, d_model, base, "interleaved", "float64")[::step]
    expected = rows @ rows.T
    got = similarity(start, stop, step, SinusoidalKey(d_model, base))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * d_model)
    np.testing.assert_array_equal(got, got.T)
    assert got.flags.c_contiguous


def test_similarity_does_not_depend_on_the_layout() -> None:
    split = encoding(0, 64, 9, 10000.0, "split", "float64")
    np.testing.assert_allclose(similarity(0, 64, 1, SinusoidalKey(9)), split @ split.T, atol=1e-13)


def test_similarity_of_a_position_with_itself_counts_the_columns() -> None:
    """A sine-cosine pair contributes sin² + cos² = 1; an odd last column sin²(p w)."""
    diagonal = np.diag(similarity(0, 10, 1, SinusoidalKey(8)))
    np.testing.assert_allclose(diagonal, 4.0, rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        pytest.param((0, 10, 0), "step", id="step"),
        pytest.param((5, 5, 1), "stop", id="empty"),
    ],
)
def test_similarity_refuses_invalid_arguments(args: tuple[int, int, int], name: str) -> None:
    with pytest.raises(InvalidParameter) as caught:
        similarity(*args, SinusoidalKey(4))
    assert caught.value.name == name


def test_rows_in_pieces_are_the_rows_of_the_whole_table() -> None:
    """Filling consecutive arrays of any sizes writes the bits of one whole table."""
    key = SinusoidalKey(64, 10000.0, "split", "float64")
    whole = registry.rows(key, 0, 5000)
    parts = [np.empty((n, 64)) for n in (3, 61, 64, 100, 1, 4771)]
    registry.fill(key, 0, parts)
    assert np.array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize("d_model", [7, 64, 2 * (1 << 14) + 2], ids=["odd", "blocked", "direct"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_at_scattered_positions_are_those_of_the_table(d_model: int, dtype: DType) -> None:
    key = SinusoidalKey(d_model, 10000.0, "interleaved", dtype)
    whole = registry.rows(key, 0, 200)
    positions = np.array([199, 0, 17, 17, 64, 127, 128, 63, 5])
    assert np.array_equal(registry.take(key, positions), whole[positions])


def test_many_scattered_positions_are_taken_in_chunks_with_the_same_bits() -> None:
    key = SinusoidalKey(9, 10000.0, "split", "float32")
    whole = registry.rows(key, 0, 50_000)
    positions = np.random.default_rng(3).integers(0, 50_000, 120_000)  # many chunks
    assert np.array_equal(registry.take(key, positions), whole[positions])


def test_a_far_row_taken_alone_is_the_row_of_its_table() -> None:
    key = SinusoidalKey(96, 10000.0, "interleaved", "float64")
    far = 8_000_000 + 37
    assert np.array_equal(registry.take(key, np.array([far])), registry.rows(key, far, far + 1))


def test_an_unregistered_key_is_refused() -> None:
    with pytest.raises(TypeError, match="not a registered family key"):
        registry.family_of(object())  # type: ignore[arg-type]
