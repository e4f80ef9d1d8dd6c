"""Pictures of tables as PNG, drawn by matplotlib's Agg renderer: the position-by-dimension
heatmap and the position-by-position similarity matrix, like the figures of the tutorials.

matplotlib is the optional ``plots`` extra and is imported on first use, so the service
starts (and stays small) without it. Rendering is pure: arrays and labels in, PNG bytes
out. matplotlib is not thread-safe, so callers draw one picture at a time.
"""

from __future__ import annotations

import functools
import io
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
from numpy.typing import NDArray

from service.errors import PlotsUnavailable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI: Final = 100
# margins, in pixels: tick and axis labels left and below, the colorbar right
_LEFT, _RIGHT, _BOTTOM, _GAP, _BAR = 72, 100, 46, 14, 16


@dataclass(frozen=True, slots=True)
class Axis:
    """What one axis of a picture shows: ``first`` to ``last`` (inclusive) in ``step`` s."""

    label: str
    first: int
    last: int
    step: int = 1

    @property
    def edges(self) -> tuple[float, float]:
        """The outer edges of the first and last cells, for ``imshow``'s extent."""
        return self.first - self.step / 2, self.last + self.step / 2


@functools.cache
def available() -> bool:
    """Whether matplotlib can be imported here (it is, on the first picture)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require() -> None:
    """Raise :class:`PlotsUnavailable` (501) where matplotlib is not installed."""
    if not available():
        raise PlotsUnavailable()


def version() -> str:
    """The matplotlib version that draws the pictures (their bytes depend on it)."""
    if not available():
        return "none"
    import matplotlib

    return str(matplotlib.__version__)


def bin_means(block: NDArray[np.floating], rows: int, cols: int) -> NDArray[np.float64]:
    """``block`` reduced to at most ``rows`` x ``cols`` cells, each the mean of the entries
    it covers: what a pixel can show of more entries than it has room for, without the
    aliasing of drawing every n-th entry."""
    data = np.asarray(block, dtype=np.float64) if block.size <= rows * cols else block
    for axis, most in ((0, rows), (1, cols)):
        n = data.shape[axis]
        if n > most:
            edges = np.linspace(0, n, most + 1).astype(np.intp)
            sums = np.add.reduceat(data, edges[:-1], axis=axis, dtype=np.float64)
            counts = np.diff(edges).reshape((-1, 1) if axis == 0 else (1, -1))
            data = sums / counts
    return np.asarray(data, dtype=np.float64)


def _wrap(title: str, width: int) -> str:
    """``title`` broken into lines that fit ``width`` pixels (about 7 pixels a character)."""
    chars = max(20, width // 7)
    return "\n".join(textwrap.fill(line, chars) for line in title.splitlines())


def _figure(width: int, height: int) -> Figure:
    from matplotlib.figure import Figure  # callers have checked require()

    return Figure(figsize=(width / DPI, height / DPI), dpi=DPI)


def _draw(
    data: NDArray[np.float64],
    x: Axis,
    y: Axis,
    *,
    title: str,
    label: str,
    scale: tuple[float, float],
    width: int,
    height: int,
    cmap: str,
) -> bytes:
    # Fixed margins in pixels rather than a layout engine, which would cost as much as the
    # drawing itself: the tick labels, the axis labels, the colorbar and its labels fit them.
    wrapped = _wrap(title, width - _LEFT)
    top = 24 + 16 * (wrapped.count("\n") + 1)  # and room for an axis offset, as 1e6
    plot_w, plot_h = width - _LEFT - _RIGHT, height - top - _BOTTOM
    figure = _figure(width, height)
    axes = figure.add_axes((_LEFT / width, _BOTTOM / height, plot_w / width, plot_h / height))
    bar = ((_LEFT + plot_w + _GAP) / width, _BOTTOM / height, _BAR / width, plot_h / height)
    left, right = x.edges
    top_edge, bottom_edge = y.edges
    image = axes.imshow(
        data,
        aspect="auto",
        cmap=cmap,
        vmin=scale[0],
        vmax=scale[1],
        interpolation="nearest",
        extent=(left, right, bottom_edge, top_edge),  # position 0 at the top, as in matshow
    )
    axes.set_xlabel(x.label)
    axes.set_ylabel(y.label)
    axes.set_title(wrapped, fontsize="medium")
    figure.colorbar(image, cax=figure.add_axes(bar), label=label)
    out = io.BytesIO()
    # zlib's fastest level: a third of the drawing time saved for 8 % more bytes, and a
    # picture is drawn once and then served from the caches
    figure.savefig(
        out, format="png", dpi=DPI, metadata={"Software": None}, pil_kwargs={"compress_level": 1}
    )
    return out.getvalue()


def heatmap(
    block: NDArray[np.floating],
    rows: Axis,
    cols: Axis,
    *,
    title: str,
    width: int,
    height: int,
    cmap: str = "RdBu",
) -> bytes:
    """A PNG of ``block`` (positions down, dimensions across) on a fixed -1 .. 1 scale."""
    data = bin_means(block, height, width)
    return _draw(
        data,
        cols,
        rows,
        title=title,
        label="PE value",
        scale=(-1.0, 1.0),
        width=width,
        height=height,
        cmap=cmap,
    )


def similarity(
    matrix: NDArray[np.float64],
    positions: Axis,
    *,
    title: str,
    width: int,
    height: int,
    cmap: str = "viridis",
) -> bytes:
    """A PNG of the dot products ``PE[p] . PE[q]``, from their least to their largest."""
    low, high = float(matrix.min()), float(matrix.max())
    across = Axis("Position q", positions.first, positions.last, positions.step)
    down = Axis("Position p", positions.first, positions.last, positions.step)
    return _draw(
        matrix,
        across,
        down,
        title=title,
        label="PE[p] · PE[q]",
        scale=(low, max(high, low + 1e-9)),
        width=width,
        height=height,
        cmap=cmap,
    )
