"""Properties of the tables that hold for every input (hypothesis, a fixed seed)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from service.encodings import additive, registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import LAYOUTS, Layout, SinusoidalKey
from tests.support import examples


def encoding(
    start: int,
    stop: int,
    d_model: int,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    dtype: DType = "float32",
) -> np.ndarray[tuple[int, int], np.dtype[np.floating]]:
    return registry.rows(SinusoidalKey(d_model, base, layout, dtype), start, stop)


FAST = settings(max_examples=examples(60), deadline=None, derandomize=True)
d_models = st.integers(1, 96)
bases = st.floats(1.001, 1e6)
lengths = st.integers(1, 300)
dtypes = st.sampled_from(DTYPES)
layouts = st.sampled_from(LAYOUTS)


@FAST
@given(lengths, d_models, bases, dtypes, layouts, st.integers(0, 10**6))
def test_every_entry_is_in_minus_one_to_one(
    length: int, d_model: int, base: float, dtype: DType, layout: Layout, start: int
) -> None:
    table = encoding(start, start + length, d_model, base, layout, dtype)
    assert np.all(np.abs(table.astype(np.float64)) <= 1)


@FAST
@given(lengths, d_models, bases, st.integers(0, 10**6))
def test_each_sine_cosine_pair_is_on_the_unit_circle(
    length: int, d_model: int, base: float, start: int
) -> None:
    table = encoding(start, start + length, d_model, base, dtype="float64")
    pairs = d_model // 2
    radius = table[:, 0 : 2 * pairs : 2] ** 2 + table[:, 1 : 2 * pairs : 2] ** 2
    assert np.all(np.abs(radius - 1) <= 1e-15)


@FAST
@given(d_models, bases, layouts)
def test_row_zero_is_sin_zero_cos_zero(d_model: int, base: float, layout: Layout) -> None:
    row = encoding(0, 1, d_model, base, "interleaved")[0]
    assert row.tolist() == [float(k % 2) for k in range(d_model)]
    split = encoding(0, 1, d_model, base, layout)[0]
    assert sorted(split.tolist()) == sorted(row.tolist())


@FAST
@given(st.integers(2, 400), st.integers(2, 64), bases)
def test_distinct_positions_have_distinct_rows(length: int, d_model: int, base: float) -> None:
    table = encoding(0, length, d_model, base, dtype="float64")
    assert len(np.unique(table, axis=0)) == length


@FAST
@given(st.integers(0, 10**5), st.integers(0, 10**4), st.integers(2, 64), bases)
def test_a_shift_is_a_rotation(pos: int, k: int, d_model: int, base: float) -> None:
    """PE[pos + k] = R_k PE[pos], R_k block-diagonal 2x2 rotations by k w_i (the seeds)."""
    pairs = d_model // 2
    here, there = (
        encoding(pos, pos + 1, d_model, dtype="float64", base=base)[0],
        (encoding(pos + k, pos + k + 1, d_model, dtype="float64", base=base)[0]),
    )
    w = base ** (-2 * np.arange(pairs) / d_model)
    sin, cos = here[0 : 2 * pairs : 2], here[1 : 2 * pairs : 2]
    rotated_sin = sin * np.cos(k * w) + cos * np.sin(k * w)
    rotated_cos = cos * np.cos(k * w) - sin * np.sin(k * w)
    assert np.allclose(there[0 : 2 * pairs : 2], rotated_sin, rtol=0, atol=1e-6)
    assert np.allclose(there[1 : 2 * pairs : 2], rotated_cos, rtol=0, atol=1e-6)


@FAST
@given(st.data(), lengths, d_models, bases, dtypes, layouts)
def test_a_slice_is_the_same_block_of_the_full_table(
    data: st.DataObject,
    length: int,
    d_model: int,
    base: float,
    dtype: DType,
    layout: Layout,
) -> None:
    start = data.draw(st.integers(0, length - 1))
    stop = data.draw(st.integers(start + 1, length))
    full = encoding(0, length, d_model, base, layout, dtype)
    assert np.array_equal(encoding(start, stop, d_model, base, layout, dtype), full[start:stop])
    positions = np.array(data.draw(st.lists(st.integers(0, length - 1), min_size=1)))
    key = SinusoidalKey(d_model, base, layout, dtype)
    assert np.array_equal(registry.take(key, positions), full[positions])


@FAST
@given(st.integers(1, 4), lengths, d_models, st.integers(0, 1000), dtypes)
def test_apply_with_unit_scale_to_zeros_is_the_table(
    batch: int, length: int, d_model: int, offset: int, dtype: str
) -> None:
    x = np.zeros((batch, length, d_model), dtype=dtype)
    table = encoding(offset, offset + length, d_model, dtype=additive.compute_dtype(x))
    y = additive.apply(x, table, 1.0)
    rows = table.astype(dtype)
    assert np.array_equal(y, np.broadcast_to(rows, y.shape))
