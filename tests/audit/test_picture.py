"""The audit's picture (:func:`service.plots.audit`): every path's line stays visible where
paths coincide, and its title fits the picture whatever its length, never clipped."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from service import plots

pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")

MIDDLES = [0.5, 1.0, 3.0, 10.0, 100.0, 1000.0, 10000.0]
ERRORS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]


def pixels(png: bytes) -> Any:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int64)


def test_a_line_under_an_identical_one_stays_visible() -> None:
    """float32-positions is the library's own line below 2^24: drawn over it, the same
    width and marker hid the library's."""
    from matplotlib import colors, rcParams

    png = plots.audit(
        [("library", MIDDLES, ERRORS), ("float32-positions", MIDDLES, ERRORS)],
        [1e-3],
        title="two paths that coincide",
    )
    plot = pixels(png)[:, :700]  # the legend is beside the plot, right of it
    cycle = rcParams["axes.prop_cycle"].by_key()["color"]
    for colour in cycle[:2]:
        rgb = np.array([round(255 * part) for part in colors.to_rgb(colour)])
        assert (np.abs(plot - rgb).max(axis=2) <= 8).sum() > 100, colour


@pytest.mark.parametrize("words", [40, 4000])
def test_a_title_fits_the_picture(words: int) -> None:
    """Numbers are wider than the character count allowed for: the title's lines ran past
    both edges (and a title taller than the picture was a 500)."""
    title = "rotary audit\n" + ", ".join(f"f{k}=1.{k:06d}" for k in range(words))
    image = pixels(plots.audit([("library", MIDDLES, ERRORS)], [1e-3], title=title))
    edges = np.concatenate([image[:, :3], image[:, -3:]], axis=1)
    assert edges.min() > 200  # nothing dark at the left and right edges: no text cut there
