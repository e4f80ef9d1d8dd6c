"""The vision towers' rotary tables in numpy: each model's token order (worked examples from
transformers 5.23's ``get_vision_position_ids`` and ``get_vision_window_index``), its pairs'
layout, the exact rounding against the library's, and the refusals that name a parameter.
Bit-for-bit agreement with the real modules is ``tests/conformance/test_vision_rotary.py``'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.encodings import registry, vision_rotary
from service.encodings.vision_rotary import VisionRotaryKey, preset_key
from service.errors import InvalidParameter


def key_of(model: str, grid: tuple[int, ...], **given: Any) -> VisionRotaryKey:
    rounding = given.pop("rounding", "library")
    return preset_key(model, grid, given, rounding, given.pop("dtype", "float32"))


def cells(key: VisionRotaryKey) -> list[tuple[int, int]]:
    found = vision_rotary.patches(key, np.arange(key.tokens, dtype=np.int64))
    return [(int(h), int(w)) for h, w in found]


def test_qwen_rows_are_merge_blocks_block_major() -> None:
    """get_vision_position_ids([[1, 4, 4]], 2): four 2x2 blocks, row-major inside."""
    assert cells(key_of("qwen2_vl", (4, 4))) == [
        (0, 0), (0, 1), (1, 0), (1, 1),
        (0, 2), (0, 3), (1, 2), (1, 3),
        (2, 0), (2, 1), (3, 0), (3, 1),
        (2, 2), (2, 3), (3, 2), (3, 3),
    ]  # fmt: skip


def test_qwen_frames_repeat_the_spatial_ids() -> None:
    key = key_of("qwen3_vl", (2, 2, 2))
    assert key.tokens == 8
    assert cells(key) == [(0, 0), (0, 1), (1, 0), (1, 1)] * 2


def test_qwen2_5_window_order() -> None:
    """get_vision_window_index([[1, 4, 12]], 2, 112, 14) = [0,1,2,3,6,7,8,9, 4,5,10,11]: the
    merged tokens of the first 4x4 window, then the cut-short second."""
    key = key_of("qwen2_5_vl", (1, 4, 12), window_index=True)
    plain = cells(key_of("qwen2_5_vl", (1, 4, 12)))
    order = [0, 1, 2, 3, 6, 7, 8, 9, 4, 5, 10, 11]
    assert cells(key) == [plain[4 * merged + inside] for merged in order for inside in range(4)]


def test_llama4_class_token_is_last_and_unturned() -> None:
    key = key_of("llama4", (3, 3), head_dim=8)
    rows = registry.rows(key, 0, key.tokens)
    assert key.tokens == 10
    assert cells(key)[-1] == (-1, -1)
    np.testing.assert_array_equal(rows[-1], [1.0] * 8 + [0.0] * 8)
    # patch (0, 0) turns by column + 1 and row + 1: angle 1 in its first pair
    assert rows[0, 0] == rows[0, 1] == np.float32(np.cos(1.0))


@pytest.mark.parametrize(
    ("model", "interleaved"),
    [
        pytest.param("qwen2_vl", False, id="qwen"),
        pytest.param("pixtral", False, id="pixtral"),
        pytest.param("dinov3", False, id="dinov3"),
        pytest.param("llama4", True, id="llama4"),
        pytest.param("eva02", True, id="eva02"),
    ],
)
def test_pairs_layout(model: str, interleaved: bool) -> None:
    key = key_of(model, (4, 4))
    cos = registry.rows(key, 0, key.tokens)[:, : key.head_dim]
    if interleaved:
        np.testing.assert_array_equal(cos[:, 0::2], cos[:, 1::2])
    else:
        half = key.head_dim // 2
        np.testing.assert_array_equal(cos[:, :half], cos[:, half:])


def test_pixtral_rows_turn_even_frequencies_columns_odd() -> None:
    """Patch (0, 1), head 8: the row's pairs (j = 0, 2) do not turn, the column's turn by
    theta^(-2j/8) for j = 1, 3."""
    key = key_of("pixtral", (2, 2), head_dim=8, rounding="exact", dtype="float64")
    row = registry.rows(key, 1, 2)[0]
    np.testing.assert_allclose(row[:2], [1.0, 1.0])
    np.testing.assert_allclose(row[2:4], np.cos([10000.0 ** (-2 / 8), 10000.0 ** (-6 / 8)]))


@pytest.mark.parametrize("model", vision_rotary.MODELS)
def test_exact_is_within_an_ulp_of_the_library(model: str) -> None:
    grid = (2, 4, 4) if model.startswith("qwen") else (6, 6)
    library = key_of(model, grid)
    exact = key_of(model, grid, rounding="exact", dtype="float32")
    a = registry.rows(library, 0, library.tokens).astype(np.float64)
    b = registry.rows(exact, 0, exact.tokens).astype(np.float64)
    assert np.abs(a - b).max() <= 5e-7


def test_dinov3_centres_depend_on_the_grid() -> None:
    """Patch (0, 0) of a 2x2 grid sits at -0.5, of a 4x4 at -0.75: a table is not a slice."""
    small, large = key_of("dinov3", (2, 2)), key_of("dinov3", (4, 4))
    assert not np.array_equal(registry.rows(small, 0, 1), registry.rows(large, 0, 1))


def test_bf16_periods_move_dinov3_s_table() -> None:
    plain = key_of("dinov3", (14, 14), implementation="original")
    rounded = key_of("dinov3", (14, 14), implementation="original", periods_dtype="bfloat16")
    gap = np.abs(registry.rows(plain, 0, 196) - registry.rows(rounded, 0, 196)).max()
    assert 1e-3 < gap < 1e-2


@pytest.mark.parametrize(
    ("model", "grid", "given", "name"),
    [
        pytest.param("qwen2_vl", (5, 4), {}, "grid", id="not-merge-blocks"),
        pytest.param("qwen2_vl", (4, 4), {"head_dim": 78}, "head_dim", id="head-not-4k"),
        pytest.param("pixtral", (2, 4, 4), {}, "grid", id="frames-of-an-image"),
        pytest.param("pixtral", (4, 4), {"spatial_merge_size": 2}, "spatial_merge_size", id="nt"),
        pytest.param("llama4", (4, 5), {}, "grid", id="llama4-square"),
        pytest.param(
            "dinov3", (4, 4), {"normalize_coords": "min"}, "normalize_coords", id="hf-separate"
        ),
        pytest.param(
            "dinov3", (4, 4), {"periods_dtype": "bfloat16"}, "periods_dtype", id="bf16-original"
        ),
        pytest.param(
            "qwen2_5_vl",
            (4, 4),
            {"window_index": True, "window_size": 20},
            "window_size",
            id="window-smaller-than-a-token",
        ),
        pytest.param("eva02", (4, 4), {"ref_feat_shape": (0, 4)}, "ref_feat_shape", id="ref"),
        pytest.param("qwen2_vl", (1 << 16, 1 << 16), {}, "grid", id="past-the-positions"),
    ],
)
def test_refusals_name_the_parameter(
    model: str, grid: tuple[int, ...], given: dict[str, Any], name: str
) -> None:
    with pytest.raises(InvalidParameter) as refused:
        key_of(model, grid, **given)
    assert refused.value.name == name
