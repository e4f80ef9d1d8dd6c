"""The pictures, decoded: sizes, colours where the values are, and the binning."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
from PIL import Image

from service import plots
from service.encodings import registry
from service.encodings.sinusoidal import SinusoidalKey, similarity
from service.errors import PlotsUnavailable
from service.schemas.common import MIN_HEIGHT, MIN_WIDTH
from tests.support import sample

ROWS = plots.Axis("Position", 0, 1)
DARK_BLUE = (5, 48, 97)  # RdBu at +1
DARK_RED = (103, 0, 31)  # RdBu at -1


def decode(png: bytes) -> np.ndarray[tuple[int, int, int], np.dtype[np.uint8]]:
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    return np.asarray(image.convert("RGB"))


def colours(pixels: np.ndarray[tuple[int, int, int], np.dtype[np.uint8]]) -> int:
    """Distinct RGB colours (each packed into one integer: np.unique by rows is slow)."""
    rgb = pixels.reshape(-1, 3).astype(np.uint32)
    return len(np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2]))


def share_of(
    pixels: np.ndarray[tuple[int, int, int], np.dtype[np.uint8]], rgb: tuple[int, ...]
) -> float:
    near = np.abs(pixels.astype(int) - np.array(rgb)).sum(axis=2) <= 12
    return float(near.mean())


def heatmap(
    block: np.ndarray[tuple[int, int], np.dtype[np.float32]],
    width: int = 640,
    height: int = 480,
    title: str = "a table",
) -> bytes:
    rows, cols = block.shape
    return plots.heatmap(
        block,
        plots.Axis("Position", 0, rows - 1),
        plots.Axis("Encoding dimension", 0, cols - 1),
        title=title,
        width=width,
        height=height,
    )


@pytest.mark.parametrize(
    ("width", "height"),
    sample(
        [
            pytest.param(MIN_WIDTH, MIN_HEIGHT, id="smallest"),
            pytest.param(800, 600, id="default"),
            pytest.param(801, 599, id="odd-sizes"),
            pytest.param(1600, 400, id="wide"),
        ],
        2,
    ),
)
def test_a_heatmap_has_the_asked_size_and_is_not_blank(width: int, height: int) -> None:
    table = registry.rows(SinusoidalKey(64), 0, 128)
    pixels = decode(heatmap(table, width=width, height=height, title="x" * 200))
    assert pixels.shape == (height, width, 3)
    assert colours(pixels) > 100


def test_the_colours_follow_the_values() -> None:
    """Column 1 of row 0 is cos(0) = 1: drawn in RdBu's dark blue over about half the plot;
    without that column no more dark blue is left than the colorbar's end."""
    table = registry.rows(SinusoidalKey(2), 0, 2)  # [[0, 1], [sin 1, cos 1]]
    with_cosine = decode(heatmap(table))
    without = decode(heatmap(table[:, :1]))
    assert share_of(with_cosine, DARK_BLUE) > 0.1
    assert share_of(without, DARK_BLUE) < 0.01
    minus = decode(heatmap(-np.ones((2, 2), dtype=np.float32)))
    assert share_of(minus, DARK_RED) > 0.3


def test_bin_means_keeps_small_blocks_and_averages_large_ones() -> None:
    block = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(plots.bin_means(block, 3, 4), block)
    halves = plots.bin_means(np.arange(8, dtype=np.float32).reshape(4, 2), 2, 1)
    np.testing.assert_array_equal(halves, [[1.5], [5.5]])  # means of 0..3 and 4..7
    table = registry.rows(SinusoidalKey(64), 0, 10_000)
    reduced = plots.bin_means(table, 500, 16)
    assert reduced.shape == (500, 16)
    assert reduced.dtype == np.float64
    np.testing.assert_allclose(reduced[0, 0], table[:20, :4].mean(), rtol=1e-6)


def test_a_similarity_picture_has_the_asked_size() -> None:
    matrix = similarity(0, 200, 2, SinusoidalKey(64))
    png = plots.similarity(
        matrix, plots.Axis("Position", 0, 198, 2), title="similarity", width=500, height=400
    )
    pixels = decode(png)
    assert pixels.shape == (400, 500, 3)
    assert colours(pixels) > 100


def test_a_constant_similarity_matrix_still_draws() -> None:
    png = plots.similarity(
        np.zeros((1, 1)), plots.Axis("Position", 0, 0), title="one", width=400, height=300
    )
    assert decode(png).shape == (300, 400, 3)


def test_without_matplotlib_pictures_are_refused_with_501(monkeypatch: pytest.MonkeyPatch) -> None:
    plots.available.cache_clear()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like
    try:
        assert not plots.available()
        with pytest.raises(PlotsUnavailable) as caught:
            plots.require()
        assert caught.value.status == 501
        assert "plots" in caught.value.detail
        assert plots.version() == "none"
    finally:
        plots.available.cache_clear()


def test_the_axis_edges_surround_the_cells() -> None:
    assert plots.Axis("p", 0, 9).edges == (-0.5, 9.5)
    assert plots.Axis("p", 10, 30, 10).edges == (5.0, 35.0)
    assert ROWS.step == 1
