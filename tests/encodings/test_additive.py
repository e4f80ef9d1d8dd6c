"""The additive kernel ``X * scale + PE[positions]`` and its checks of a batch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import additive, registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import LAYOUTS, Layout, SinusoidalKey
from service.errors import InvalidInput, InvalidParameter
from tests.oracle import assert_close, expected
from tests.support import batch


def encoding(
    start: int, stop: int, d_model: int, layout: Layout = "interleaved", dtype: DType = "float32"
) -> NDArray[np.floating]:
    return registry.rows(SinusoidalKey(d_model, 10000.0, layout, dtype), start, stop)


@pytest.mark.parametrize(
    "shape", [pytest.param((6, 10), id="2-D"), pytest.param((3, 6, 9), id="3-D")]
)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("scale", "offset"), [(1.0, 0), (math.sqrt(10), 7), (-0.25, 1000)])
def test_apply_with_offsets(
    shape: tuple[int, ...], dtype: str, layout: Layout, scale: float, offset: int
) -> None:
    x = batch(shape, dtype)
    length = shape[-2]
    table = encoding(offset, offset + length, shape[-1], layout, additive.compute_dtype(x))
    y = additive.apply(x, table, scale)
    positions = np.arange(offset, offset + length)
    assert y.shape == x.shape
    assert_close(y, expected(x, scale, positions, layout=layout), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(np.array([4, 0, 9, 9, 2]), id="per-position"),
        pytest.param(
            np.array([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2], [9, 8, 7, 6, 5]]), id="per-sequence"
        ),
    ],
)
def test_apply_with_position_ids(dtype: str, ids: NDArray[Any]) -> None:
    x = batch((3, 5, 8), dtype)
    positions = additive.check_batch(x, ids)
    assert positions is not None
    table = encoding(0, int(positions.max()) + 1, 8, dtype=additive.compute_dtype(x))
    y = additive.apply(x, table, 2.0, positions.astype(np.intp))
    assert_close(y, expected(x, 2.0, np.broadcast_to(ids, (3, 5))), dtype)


def test_zero_embeddings_with_scale_one_are_the_table() -> None:
    table = encoding(0, 20, 16)
    assert np.array_equal(
        additive.apply(np.zeros((2, 20, 16), np.float32), table, 1.0), np.stack([table, table])
    )


def test_any_byte_order_and_memory_order() -> None:
    x = batch((7, 6), "float64")
    table = encoding(0, 7, 6, dtype="float64")
    y = additive.apply(x, table, 3.0)
    for variant in (x.astype(">f8"), np.asfortranarray(x)):
        result = additive.apply(variant, table, 3.0)
        assert result.dtype == np.dtype("=f8")
        assert result.flags.c_contiguous
        assert np.array_equal(result, y)


@pytest.mark.parametrize(
    ("x", "ids", "name", "words"),
    [
        pytest.param(np.zeros((2, 3), np.int64), None, "embeddings", "float16", id="integers"),
        pytest.param(np.zeros((2, 3), np.complex64), None, "embeddings", "float16", id="complex"),
        pytest.param(np.zeros(3, np.float32), None, "embeddings", "1-D", id="1-D"),
        pytest.param(np.zeros((1, 2, 3, 4), np.float32), None, "embeddings", "4-D", id="4-D"),
        pytest.param(np.zeros((0, 3), np.float32), None, "embeddings", "empty", id="empty"),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([0.0, 1.0]),
            "position_ids",
            "integers",
            id="float-ids",
        ),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([0, -1]),
            "position_ids",
            "non-negative",
            id="negative-ids",
        ),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([0, 1, 2]),
            "position_ids",
            "shape",
            id="ids-too-long",
        ),
        pytest.param(
            np.zeros((2, 2, 3), np.float32),
            np.zeros((3, 2), np.int32),
            "position_ids",
            "shape",
            id="ids-wrong-batch",
        ),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([1, 2**64 - 1], np.uint64),
            "position_ids",
            "too large",
            id="ids-past-int64",
        ),
    ],
)
def test_check_batch_names_the_field(
    x: NDArray[Any], ids: NDArray[Any] | None, name: str, words: str
) -> None:
    with pytest.raises(InvalidInput, match=words) as caught:
        additive.check_batch(x, ids)
    assert caught.value.name == name


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_embeddings_are_refused(value: float) -> None:
    x = batch((4, 4), "float32")
    x[2, 3] = value
    with pytest.raises(InvalidInput, match=r"NaN or infinity, first at \(2, 3\)"):
        additive.apply(x, encoding(0, 4, 4), 1.0)


def test_an_overflowing_result_is_refused() -> None:
    x = np.full((2, 2), 60000.0, np.float16)
    with pytest.raises(InvalidParameter, match="overflows float16") as caught:
        additive.apply(x, encoding(0, 2, 2), 2.0)
    assert caught.value.name == "scale"


def test_in_place_overwrites_only_a_batch_it_may() -> None:
    table = encoding(0, 4, 4)
    x = batch((4, 4), "float32")
    expected_y = additive.apply(x, table, 2.0)
    mine = x.copy()
    assert additive.apply(mine, table, 2.0, in_place=True) is mine
    assert np.array_equal(mine, expected_y)
    frozen = x.copy()
    frozen.flags.writeable = False
    assert additive.apply(frozen, table, 2.0, in_place=True) is not frozen
    wide = x.astype(np.float16)
    assert additive.apply(wide, table, 2.0, in_place=True) is not wide


def test_in_place_non_finite_results_are_refused() -> None:
    x = np.full((2, 2), 3e38, np.float32)
    with pytest.raises(InvalidInput, match=r"overflows float32, first at \(0, 0\)"):
        additive.apply(x, encoding(0, 2, 2), 10.0, in_place=True)


def test_the_kernel_defaults_its_scale_to_the_square_root_of_the_width() -> None:
    x = batch((3, 9), "float64")
    table = encoding(0, 3, 9, dtype="float64")
    kernel = additive.Additive()
    assert kernel.dtype(x) == "float64"
    assert kernel.dtype(x.astype(np.float16)) == "float32"
    assert np.array_equal(kernel(x, [table], None, in_place=False), additive.apply(x, table, 3.0))
    assert np.array_equal(
        additive.Additive(0.5)(x, [table[:1], table[1:]], None, in_place=False),
        additive.apply(x, table, 0.5),
    )
