"""The rope-nd family's numbers: each preset's ids, the layouts, the roundings, and rows by
position equal to the table's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.encodings import registry, rope_nd
from service.errors import InvalidParameter


def key(preset: str, grid: tuple[int, ...], **given: Any) -> rope_nd.RopeNdKey:
    layout = given.pop("layout", "interleaved")
    rounding = given.pop("rounding", "library")
    dtype = given.pop("dtype", "float32")
    head_dim = given.pop("head_dim", None)
    return rope_nd.preset_key(preset, grid, given, head_dim, layout, rounding, dtype)


def test_flux_ids_are_zero_row_col_after_text_zeros() -> None:
    ids = rope_nd.ids(key("flux", (2, 3), text_tokens=2), np.arange(8))
    assert ids.T.tolist() == [[0, 0, 0]] * 2 + [[0, r, c] for r in range(2) for c in range(3)]


def test_flux2_text_counts_on_its_fourth_axis() -> None:
    ids = rope_nd.ids(key("flux2", (1, 2), text_tokens=3), np.arange(5))
    assert ids.T.tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 0], [0, 0, 1, 0]]


def test_qwen_image_ids_are_centred_and_text_follows_the_grid() -> None:
    """QwenEmbedRope's scale_rope: rows -(h - h // 2) .. h // 2 - 1; text from max(h, w) // 2
    on every axis."""
    ids = rope_nd.ids(key("qwen-image", (3, 4), text_tokens=2), np.arange(14))
    assert ids[:, :2].T.tolist() == [[2, 2, 2], [3, 3, 3]]
    assert sorted(set(ids[1, 2:])) == [-2, -1, 0]
    assert sorted(set(ids[2, 2:])) == [-2, -1, 0, 1]


def test_wan_and_cogvideox_split_their_heads() -> None:
    assert key("wan", (1, 1, 1)).axes_dim == (44, 42, 42)
    assert key("wan", (1, 1, 1), head_dim=64).axes_dim == (24, 20, 20)
    assert key("cogvideox", (1, 1, 1)).axes_dim == (16, 24, 24)


def test_cogvideox_spreads_rows_over_its_crop_region() -> None:
    """At the base size the ids are the grid's indices; a wider grid is resized into the
    base's 45 columns, its rows spread over the 30 x 45 region's rows it crops."""
    native = rope_nd.ids(key("cogvideox", (2, 30, 45)), np.arange(2 * 30 * 45))
    assert native[1].max() == 29
    assert native[2].max() == 44
    assert np.array_equal(native[1], np.floor(native[1]))
    wide = rope_nd.ids(key("cogvideox", (1, 20, 60)), np.arange(20 * 60))
    assert wide[1].min() == 8  # resized to 15 x 45 rows: the crop top round(7.5) = 8
    assert not np.array_equal(wide[2], np.floor(wide[2]))


def test_half_layout_holds_the_same_pairs() -> None:
    interleaved = registry.rows(key("flux", (3, 3)), 0, 9)
    half = registry.rows(key("flux", (3, 3), layout="half"), 0, 9)
    for part in (slice(0, 128), slice(128, 256)):
        np.testing.assert_array_equal(interleaved[:, part][:, 0::2], half[:, part][:, :64])
        np.testing.assert_array_equal(half[:, part][:, :64], half[:, part][:, 64:])


@pytest.mark.parametrize("preset", ["flux", "flux-bfl", "hunyuan-video"])
def test_exact_and_library_agree_to_float32_rounding(preset: str) -> None:
    grid = (3, 5, 7) if preset == "hunyuan-video" else (9, 11)
    exact = registry.rows(key(preset, grid, rounding="exact", dtype="float64"), 0, 50)
    library = registry.rows(key(preset, grid, dtype="float64"), 0, 50)
    assert np.abs(exact - library).max() < (1e-13 if preset == "flux" else 1e-5)


def test_rows_at_positions_are_the_table_s() -> None:
    chosen = key("flux2", (4, 5), text_tokens=3)
    table = registry.rows(chosen, 0, chosen.tokens)
    picked = np.array([22, 0, 7, 7, 3])
    np.testing.assert_array_equal(registry.take(chosen, picked), table[picked])


@pytest.mark.parametrize(
    ("preset", "given", "name"),
    [
        ("flux", {"theta": 5.0}, "theta"),
        ("wan", {"text_tokens": 1}, "text_tokens"),
        ("diffusers", {"axes_dim": (4, 5)}, "axes_dim"),
        ("diffusers", {"axes_dim": (4, 4), "head_dim": 10}, "axes_dim"),
    ],
)
def test_refusals_name_the_parameter(preset: str, given: dict[str, Any], name: str) -> None:
    grid = (1,) * (len(given.get("axes_dim", (0, 0, 0))) if preset == "diffusers" else 3)
    with pytest.raises(InvalidParameter) as caught:
        key(preset, grid, **given)
    assert caught.value.name == name


def test_a_parameter_of_another_preset_is_named_as_such() -> None:
    with pytest.raises(InvalidParameter, match=r"not a parameter of preset flux$"):
        key("flux", (2, 2), base_grid=(30, 45))
    with pytest.raises(InvalidParameter, match=r"fixed by preset wan \(10000.0\): give it"):
        key("wan", (2, 2, 2), theta=500.0)
