"""The sin-cos grid families: rows against 200-bit arithmetic at the real positions, the
layouts ([w | h] halves, timm's orders), the rows a grid decides (extra and text tokens),
SD3's centre crop, scattered rows equal to the table's, and refusals naming parameters."""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest

from service.encodings import registry, sincos2d, sincos3d
from service.errors import InvalidParameter


def key2d(preset: str = "mae", dim: int = 16, grid: tuple[int, int] = (3, 4), **given: Any) -> Any:
    rounding = given.pop("rounding", "library")
    dtype = given.pop("dtype", "float32")
    return sincos2d.preset_key(dim, *grid, preset, given, rounding, dtype)


def table(key: Any) -> Any:
    return registry.rows(key, 0, key.rows)


def one_axis(position: float, count: int) -> tuple[list[float], list[float]]:
    """sin and cos of ``position · 10000^(-k / count)`` to 200 bits."""
    with mpmath.workprec(200):
        angles = [
            mpmath.mpf(position) * mpmath.mpf(10000) ** (-mpmath.mpf(k) / count)
            for k in range(count)
        ]
        return [float(mpmath.sin(a)) for a in angles], [float(mpmath.cos(a)) for a in angles]


@pytest.mark.parametrize(
    ("preset", "given", "position"),
    [
        pytest.param("mae", {}, lambda i, size: i, id="mae"),
        pytest.param(
            "diffusers",
            {"base_size": 16, "interpolation_scale": 1.875},
            lambda i, size: mpmath.mpf(i) * 16 / (size * mpmath.mpf(1.875)),
            id="diffusers",
        ),
    ],
)
def test_exact_rows_are_the_formula_at_real_positions(
    preset: str, given: dict[str, Any], position: Any
) -> None:
    key = key2d(preset, 16, (3, 5), **given, rounding="exact", dtype="float64")
    rows = table(key)
    for token, row in enumerate(rows):
        i, j = divmod(token, 5)
        with mpmath.workprec(200):
            x, y = one_axis(position(j, 5), 4), one_axis(position(i, 3), 4)
        np.testing.assert_allclose(row, [*x[0], *x[1], *y[0], *y[1]], rtol=0, atol=2.0**-51)


def test_the_first_half_is_the_width_coordinate() -> None:
    """MAE's ``emb_h`` half encodes the column: along a row only it changes."""
    rows = table(key2d("mae", 16, (3, 4))).reshape(3, 4, 16)
    assert np.ptp(rows[:, 0, :8], axis=0).max() == 0  # column 0 in every row: first half same
    assert np.ptp(rows[0, :, 8:], axis=0).max() == 0  # row 0 across columns: second half same
    np.testing.assert_array_equal(
        rows[0, 1, :4], np.sin(1.0 / 10000.0 ** (np.arange(4) / 4)).astype(np.float32)
    )


def test_timm_layouts_and_reversed_coordinates() -> None:
    plain = table(key2d("timm", 16, (3, 4)))
    halves = table(key2d("mae", 16, (3, 4)))
    # [sin h | sin w | cos h | cos w] against [sin w | cos w | sin h | cos h]
    for ours, theirs in ((0, 8), (4, 0), (8, 12), (12, 4)):
        np.testing.assert_allclose(
            plain[:, ours : ours + 4], halves[:, theirs : theirs + 4], atol=3e-7
        )
    interleaved = table(key2d("timm", 16, (3, 4), interleave_sin_cos=True))
    np.testing.assert_array_equal(interleaved[:, 4:8], plain[:, 8:12])  # cos h second
    reverse = table(key2d("timm", 16, (3, 4), reverse_coord=True)).reshape(4, 3, 16)
    # column-major tokens, the width coordinate first: the transpose of the plain grid's
    np.testing.assert_array_equal(
        reverse[:, :, :4], plain.reshape(3, 4, 16)[:, :, 4:8].transpose(1, 0, 2)
    )


def test_extra_and_text_tokens_are_zero_rows_first() -> None:
    with_cls = table(key2d("mae", 16, (2, 2), extra_tokens=1))
    assert with_cls.shape == (5, 16)
    assert not with_cls[0].any()
    np.testing.assert_array_equal(with_cls[1:], table(key2d("mae", 16, (2, 2))))
    key = sincos3d.preset_key(32, (2, 2, 3), "cogvideox", {}, "library", "float32")
    rows = table(key)
    assert rows.shape == (226 + 12, 32)
    assert not rows[:226].any()
    # frame 1's first token: the frame's angle 1, the patch's 0
    np.testing.assert_array_equal(rows[226 + 6, 8:], rows[226, 8:])
    assert rows[226 + 6, 0] == np.float32(np.sin(1.0))


def test_sd3_is_the_centre_of_its_largest_grid() -> None:
    full = table(key2d("sd3", 16, (8, 8), pos_embed_max_size=8)).reshape(8, 8, 16)
    crop = table(key2d("sd3", 16, (4, 5), pos_embed_max_size=8)).reshape(4, 5, 16)
    np.testing.assert_array_equal(crop, full[2:6, 1:6])


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(key2d("diffusers", 32, (6, 7), extra_tokens=2), id="2d"),
        pytest.param(key2d("timm", 32, (6, 7), reverse_coord=True, rounding="exact"), id="timm"),
        pytest.param(
            sincos3d.preset_key(32, (3, 4, 5), "cogvideox", {}, "exact", "float64"), id="3d"
        ),
    ],
)
def test_scattered_rows_are_the_table_s(key: Any) -> None:
    whole = table(key)
    positions = np.array([key.rows - 1, 0, 5, 5, key.rows // 2])
    np.testing.assert_array_equal(registry.take(key, positions), whole[positions])


@pytest.mark.parametrize(
    ("make", "name"),
    [
        pytest.param(lambda: key2d(dim=18), "dim", id="dim-not-multiple-of-4"),
        pytest.param(lambda: key2d(grid=(0, 3)), "height", id="empty-grid"),
        pytest.param(lambda: key2d("mae", base_size=4), "base_size", id="mae-no-base-size"),
        pytest.param(lambda: key2d("sd3", extra_tokens=1), "extra_tokens", id="sd3-no-extras"),
        pytest.param(
            lambda: key2d("timm", interpolation_scale=2.0), "interpolation_scale", id="timm"
        ),
        pytest.param(
            lambda: key2d("sd3", grid=(4, 9), pos_embed_max_size=8), "width", id="past-max"
        ),
        pytest.param(
            lambda: key2d("diffusers", interpolation_scale=1e-9, rounding="exact"),
            "rounding",
            id="exact-angles-too-large",
        ),
        pytest.param(
            lambda: sincos3d.preset_key(40, (1, 2, 2), "diffusers", {}, "library", "float32"),
            "dim",
            id="3d-dim-not-multiple-of-16",
        ),
        pytest.param(
            lambda: sincos3d.preset_key(
                32, (1, 2, 2), "cogvideox", {"text_tokens": 3}, "library", "float32"
            ),
            "text_tokens",
            id="3d-fixed-by-preset",
        ),
    ],
)
def test_refusals_name_the_parameter(make: Any, name: str) -> None:
    with pytest.raises(InvalidParameter) as caught:
        make()
    assert caught.value.name == name
