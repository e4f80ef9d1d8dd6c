"""Qwen3-VL's resampling of its learned position table: for each patch of a grid, the four
rows of the square ``(num_grid_per_side, num_grid_per_side)`` table that bilinear
interpolation reads and their weights, as transformers 5.23's
``vision_utils.get_vision_interpolation_indices_and_weights(grid_thw, num_grid_per_side,
mode="bilinear", align_corners=True, spatial_merge_size)`` gives them (what
``Qwen3VLVisionModel.forward`` calls, ``num_grid_per_side = int(num_position_embeddings **
0.5)``: 48, ``spatial_merge_size`` 2). The table itself is the checkpoint's weights; the model
adds ``sum(table[indices] * weights[..., None], 1)`` to its patch embeddings.

Every step is the function's float32 arithmetic in its order (``_interpolation_axis_taps_
weights``): multiplication, division, floor, subtraction, ``abs`` and ``clamp`` are
correctly rounded in torch and in numpy alike, so the weights are transformers' bit for bit.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numpy.typing import NDArray

from service.errors import InvalidParameter

# taps along an axis (floor, floor + 1), and a patch's: their outer product
AXIS_TAPS: Final = 2
TAPS: Final = AXIS_TAPS * AXIS_TAPS
# each of t, h, w, the table's side and the merge size; the element limits refuse far fewer
# patches, and every index, position and product stays exact in int64
MAX_SIDE: Final = 1 << 20
_OFFSETS: Final = np.arange(AXIS_TAPS)

Grid = tuple[int, int, int]


def check(grid: Grid, num_grid_per_side: int, spatial_merge_size: int) -> None:
    """Refuse what the model cannot take, naming the parameter: sizes below 1 or past
    :data:`MAX_SIDE`, a grid of three sizes whose height or width is not a multiple of the
    merge size (transformers' reshape fails on them)."""
    if len(grid) != 3:
        raise InvalidParameter("grid", f"must be three sizes T,H,W, not {len(grid)}")
    for name, value in (
        ("grid", min(grid)),
        ("num_grid_per_side", num_grid_per_side),
        ("spatial_merge_size", spatial_merge_size),
    ):
        if value < 1:
            raise InvalidParameter(name, f"must be at least 1, not {value}")
    for name, value in (
        ("grid", max(grid)),
        ("num_grid_per_side", num_grid_per_side),
        ("spatial_merge_size", spatial_merge_size),
    ):
        if value > MAX_SIDE:
            raise InvalidParameter(name, f"must be at most {MAX_SIDE:,}, not {value:,}")
    _, height, width = grid
    if height % spatial_merge_size or width % spatial_merge_size:
        raise InvalidParameter(
            "grid",
            f"height and width ({height}, {width}) must be multiples of spatial_merge_size "
            f"({spatial_merge_size})",
            also=("spatial_merge_size",),
        )


def tokens(grid: Grid) -> int:
    """The patches of ``grid``, one row each: ``t * h * w``."""
    return math.prod(grid)


def _axis(size: int, side: int) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """The two taps and weights of each index ``0 .. size-1`` of an axis into the table's
    ``side``: ``src = index * (side - 1) / max(size - 1, 1)`` (align_corners), taps
    ``floor(src) + [0, 1]`` clamped into the table, weights ``max(1 - |src - floor -
    offset|, 0)``, float32 step by step (the second weight is ``1 - (1 - frac)``)."""
    index = np.arange(size).astype(np.float32)
    src = index * np.float32(side - 1) / np.float32(max(size - 1, 1))
    floor = np.floor(src)
    taps = np.clip(floor.astype(np.int64)[:, None] + _OFFSETS, 0, side - 1)
    distance = np.abs((src - floor)[:, None] - _OFFSETS.astype(np.float32))
    weights = np.maximum(np.float32(1) - distance, np.float32(0))
    return taps, weights


def indices_and_weights(
    grid: Grid, num_grid_per_side: int, spatial_merge_size: int
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """``indices`` ``(N, 4)`` int64 into the flattened table (``h_tap * side + w_tap``, in
    the order ``(h0 w0, h0 w1, h1 w0, h1 w1)``) and ``weights`` ``(N, 4)`` float32 (the
    axes' weights multiplied), ``N = t * h * w`` rows in the model's token order:
    block-major over ``spatial_merge_size`` square blocks (row-major inside a block,
    blocks row-major), the frame's rows repeated ``t`` times. Nothing is held besides the
    two answers and the axes' taps."""
    check(grid, num_grid_per_side, spatial_merge_size)
    frames, height, width = grid
    side, merge = num_grid_per_side, spatial_merge_size
    h_taps, h_weights = _axis(height, side)
    w_taps, w_weights = _axis(width, side)
    indices = np.empty((frames, height * width, TAPS), np.int64)
    weights = np.empty((frames, height * width, TAPS), np.float32)
    # a frame's rows as (block_row, block_col, in_row, in_col), then the taps (h, w): the
    # row is block_row * merge + in_row and the column block_col * merge + in_col, so each
    # axis's taps broadcast over the other's, written in place
    blocks = (height // merge, width // merge, merge, merge, AXIS_TAPS, AXIS_TAPS)
    by_row = (height // merge, 1, merge, 1, AXIS_TAPS, 1)
    by_col = (1, width // merge, 1, merge, 1, AXIS_TAPS)
    np.add(
        (h_taps * side).reshape(by_row),
        w_taps.reshape(by_col),
        out=indices[0].reshape(blocks),
    )
    np.multiply(
        h_weights.reshape(by_row), w_weights.reshape(by_col), out=weights[0].reshape(blocks)
    )
    indices[1:] = indices[0]
    weights[1:] = weights[0]
    return indices.reshape(-1, TAPS), weights.reshape(-1, TAPS)
