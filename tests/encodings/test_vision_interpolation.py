"""Qwen3-VL's bilinear indices and weights into its learned position table: the worked
example transformers 5.23 gave, the resampling they make against bilinear interpolation in
float64, the token order (merge blocks, frames), the float32 steps, refusals naming the
parameter. ``tests/conformance/test_vision_interpolation.py`` compares them with
transformers' function bit for bit."""

from __future__ import annotations

from typing import Final

import numpy as np
import pytest

from service.encodings.vision_interpolation import MAX_SIDE, Grid, indices_and_weights, tokens
from service.errors import InvalidParameter

# transformers 5.23, get_vision_interpolation_indices_and_weights(tensor([[1, 4, 4]]), 48,
# mode="bilinear", align_corners=True, spatial_merge_size=2): rows 0, 1, 2 and 15
EXAMPLE: Final = {
    0: ([0, 1, 48, 49], [1.0, 0.0, 0.0, 0.0]),
    1: ([15, 16, 63, 64], [0.333333015441894531, 0.666666984558105469, 0.0, 0.0]),
    2: ([720, 721, 768, 769], [0.333333015441894531, 0.0, 0.666666984558105469, 0.0]),
    15: ([2303, 2303, 2303, 2303], [1.0, 0.0, 0.0, 0.0]),
}


def test_the_worked_example() -> None:
    indices, weights = indices_and_weights((1, 4, 4), 48, 2)
    assert indices.shape == weights.shape == (16, 4)
    assert indices.dtype == np.int64
    assert weights.dtype == np.float32
    for row, (expected_indices, expected_weights) in EXAMPLE.items():
        assert indices[row].tolist() == expected_indices
        assert weights[row].tolist() == expected_weights  # float32 values, exactly


def block_order(height: int, width: int, merge: int) -> list[tuple[int, int]]:
    """The patches (h, w) in the model's order: merge blocks row-major, inside a block
    row-major."""
    return [
        (block_row * merge + in_row, block_col * merge + in_col)
        for block_row in range(height // merge)
        for block_col in range(width // merge)
        for in_row in range(merge)
        for in_col in range(merge)
    ]


@pytest.mark.parametrize(
    ("grid", "side", "merge"),
    [
        pytest.param((1, 6, 10), 48, 2, id="merge-2"),
        pytest.param((1, 5, 7), 32, 1, id="merge-1"),
        pytest.param((1, 60, 2), 8, 2, id="upsampled-rows-downsampled-columns"),
        pytest.param((1, 1, 3), 48, 1, id="one-row"),
        pytest.param((1, 9, 12), 1, 3, id="a-table-of-one"),
    ],
)
def test_the_weighted_rows_are_bilinear_interpolation(grid: Grid, side: int, merge: int) -> None:
    """A table resampled with them is F.interpolate(align_corners=True)'s resampling, written
    here in float64 with the model's order of patches."""
    table = np.random.default_rng(7).standard_normal((side * side, 3))
    indices, weights = indices_and_weights(grid, side, merge)
    resampled = (table[indices] * weights[:, :, None]).sum(1)
    _, height, width = grid

    def axis(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = np.arange(size) * (side - 1) / max(size - 1, 1)
        low = np.floor(src).astype(int)
        return low, np.minimum(low + 1, side - 1), src - low

    (h0, h1, hf), (w0, w1, wf) = axis(height), axis(width)
    grid_table = table.reshape(side, side, 3)
    expected = [
        (1 - hf[h]) * ((1 - wf[w]) * grid_table[h0[h], w0[w]] + wf[w] * grid_table[h0[h], w1[w]])
        + hf[h] * ((1 - wf[w]) * grid_table[h1[h], w0[w]] + wf[w] * grid_table[h1[h], w1[w]])
        for h, w in block_order(height, width, merge)
    ]
    np.testing.assert_allclose(resampled, expected, rtol=0, atol=1e-5)


def test_merge_one_is_row_major_and_frames_repeat() -> None:
    indices, weights = indices_and_weights((3, 4, 6), 48, 1)
    frame, frame_weights = indices_and_weights((1, 4, 6), 48, 1)
    assert len(indices) == tokens((3, 4, 6)) == 72
    np.testing.assert_array_equal(indices, np.tile(frame, (3, 1)))
    np.testing.assert_array_equal(weights, np.tile(frame_weights, (3, 1)))
    # row-major: the second patch is (0, 1), the seventh (1, 0)
    first_rows = {h0 // 48 for h0 in frame[:6, 0]}
    assert first_rows == {0}
    assert frame[6, 0] // 48 == 15  # row 1 of 4 is 1 × 47 / 3 = 15.67: tap 15


def test_the_second_weight_is_one_minus_one_minus_the_fraction() -> None:
    """transformers' weight of the far tap is ``1 - |frac - 1|`` in float32, which is not
    always ``frac``: at index 1 of 97 along a 48-table, 47 / 96 rounds to 0.48958334 and
    1 - (1 - it) to 0.48958337."""
    _, weights = indices_and_weights((1, 1, 97), 48, 1)
    fraction = np.float32(1) * np.float32(47) / np.float32(96)
    assert weights[1, 1] == np.float32(1) - (np.float32(1) - fraction) != fraction
    assert weights[1].tolist()[2:] == [0.0, 0.0]  # a grid of one row reads only the table's first


@pytest.mark.parametrize(
    ("grid", "side", "merge", "names"),
    [
        pytest.param((1, 4, 5), 48, 2, ("grid", "spatial_merge_size"), id="width-not-a-multiple"),
        pytest.param((1, 6, 4), 48, 4, ("grid", "spatial_merge_size"), id="height-not-a-multiple"),
        pytest.param((0, 4, 4), 48, 2, ("grid",), id="no-frame"),
        pytest.param((1, -2, 4), 48, 2, ("grid",), id="negative-height"),
        pytest.param((1, 4, 4), 0, 2, ("num_grid_per_side",), id="no-table"),
        pytest.param((1, 4, 4), 48, 0, ("spatial_merge_size",), id="no-merge"),
        pytest.param((1, 4, MAX_SIDE + 2), 48, 2, ("grid",), id="past-the-largest-side"),
        pytest.param((1, 4, 4), MAX_SIDE + 1, 2, ("num_grid_per_side",), id="table-past-it"),
        pytest.param((1, 4, 4), 48, MAX_SIDE + 1, ("spatial_merge_size",), id="merge-past-it"),
        pytest.param((4, 4), 48, 2, ("grid",), id="two-sizes"),
    ],
)
def test_refusals_name_the_parameter(
    grid: Grid, side: int, merge: int, names: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidParameter) as refused:
        indices_and_weights(grid, side, merge)
    assert [error["name"] for error in refused.value.extensions["errors"]] == list(names)
