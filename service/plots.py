"""Pictures of tables as PNG, drawn by matplotlib's Agg renderer: the position-by-dimension
heatmap and the position-by-position similarity matrix, like the figures of the tutorials.

matplotlib is the optional ``plots`` extra and is imported on first use, so the service
starts (and stays small) without it. Rendering is pure: arrays and labels in, PNG bytes
out. matplotlib is not thread-safe, so callers draw one picture at a time.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from numpy.typing import NDArray

from service import titles
from service.errors import PlotsUnavailable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI: Final = 100
# bin_means reads its blocks in chunks of about this many numbers
_CHUNK_ELEMENTS: Final = 1 << 20
# margins, in pixels: tick and axis labels left and below, the colorbar right
_LEFT, _RIGHT, _BOTTOM, _GAP, _BAR = 72, 100, 46, 14, 16
# the difference picture's width and height, in pixels
DIFFERENCE_SIZE: Final = (900, 640)
# an audit's title: its margin and line height (pixels)
_MARGIN, _LINE = 8, 17


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


def bin_means(
    blocks: NDArray[np.floating] | Sequence[NDArray[np.floating]], rows: int, cols: int
) -> NDArray[np.float64]:
    """``blocks`` (one array, or consecutive row blocks of one) reduced to at most ``rows``
    x ``cols`` cells, each the mean of the entries it covers: what a pixel can show of more
    entries than it has room for, without the aliasing of drawing every n-th entry. The
    blocks are read a few thousand rows at a time and never joined: what this holds
    besides them is its answer and a chunk of at most ``_CHUNK_ELEMENTS`` numbers."""
    parts = [blocks] if isinstance(blocks, np.ndarray) else list(blocks)
    total, width = sum(len(part) for part in parts), parts[0].shape[1]
    col_edges = np.linspace(0, width, cols + 1).astype(np.intp) if width > cols else None
    row_edges = np.linspace(0, total, rows + 1).astype(np.intp) if total > rows else None
    out = np.zeros((rows if row_edges is not None else total, min(width, cols)))
    step = max(1, _CHUNK_ELEMENTS // width)
    offset = 0
    for part in parts:
        for start in range(0, len(part), step):
            chunk = part[start : start + step]
            if col_edges is None:
                reduced = np.asarray(chunk, dtype=np.float64)
            else:
                sums = np.add.reduceat(chunk, col_edges[:-1], axis=1, dtype=np.float64)
                reduced = sums / np.diff(col_edges)
            if row_edges is None:
                out[offset : offset + len(chunk)] = reduced
            else:  # the sums of the row bins this chunk reaches
                first = int(np.searchsorted(row_edges, offset, "right")) - 1
                last = int(np.searchsorted(row_edges[:-1], offset + len(chunk), "left"))
                starts = np.maximum(row_edges[first:last] - offset, 0)
                out[first:last] += np.add.reduceat(reduced, starts, axis=0)
            offset += len(chunk)
    if row_edges is not None:
        out /= np.diff(row_edges)[:, np.newaxis]
    return out


def _wrap(title: str, width: int) -> str:
    """``title`` within ``width`` pixels (:func:`service.titles.wrap`)."""
    return titles.wrap(title, width * 72 / DPI)


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
    # coloured here, as bytes: matplotlib resamples them as they are, where it would
    # resample floats and colour the result (half the memory and time: a 2048 x 2048
    # picture of as many cells peaked at +490 MiB, now +260 MiB)
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    norm, colours = Normalize(*scale), colormaps[cmap]
    axes.imshow(
        colours(norm(data), bytes=True),
        aspect="auto",
        interpolation="nearest",
        extent=(left, right, bottom_edge, top_edge),  # position 0 at the top, as in matshow
    )
    axes.set_xlabel(x.label)
    axes.set_ylabel(y.label)
    # positions from 10^5 as 1e5 above the axis: six digits and the label would pass _LEFT
    axes.ticklabel_format(axis="y", style="sci", scilimits=(-5, 5))
    axes.set_title(wrapped, fontsize=titles.TITLE_SIZE)
    mappable = ScalarMappable(norm, colours)
    figure.colorbar(mappable, cax=figure.add_axes(bar), label=label)
    out = io.BytesIO()
    # zlib's fastest level: a third of the drawing time saved for 8 % more bytes, and a
    # picture is drawn once and then served from the caches
    figure.savefig(
        out, format="png", dpi=DPI, metadata={"Software": None}, pil_kwargs={"compress_level": 1}
    )
    return out.getvalue()


def heatmap(
    block: NDArray[np.floating] | Sequence[NDArray[np.floating]],
    rows: Axis,
    cols: Axis,
    *,
    title: str,
    width: int,
    height: int,
    cmap: str = "RdBu",
) -> bytes:
    """A PNG of ``block`` (one array, or consecutive row blocks of one; positions down,
    dimensions across) on a fixed -1 .. 1 scale."""
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


def audit(
    lines: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    thresholds: Sequence[float],
    *,
    title: str,
    width: int = 900,
    height: int = 560,
) -> bytes:
    """An audit's error against position, log-log: one line per path (``name``, the bands'
    geometric middles, their largest errors), the thresholds dashed; the title's lines fit
    the picture (:func:`service.titles.wrap`)."""
    figure = _figure(width, height)
    shown = _wrap(title, width - 2 * _MARGIN)
    figure.text(0.5, 1 - _MARGIN / height, shown, ha="center", va="top", fontsize=titles.TITLE_SIZE)
    top = _MARGIN + _LINE * (shown.count("\n") + 1) + 16  # and room for the axis' ticks
    plot = (_LEFT / width, _BOTTOM / height, (width - _LEFT - 190) / width)  # legend: 190 px
    axes = figure.add_axes((*plot, (height - top - _BOTTOM) / height))
    floor = 1e-12  # an error of 0 (exact entries) is drawn at the floor of the log scale
    # paths coincide (float32-positions is the library below 2^24): thinner lines hide none
    for index, (name, middles, errors) in enumerate(lines):
        wider = (len(lines) - 1 - index) / max(len(lines) - 1, 1)  # 1 first, 0 last
        y, dashes = np.maximum(np.asarray(errors), floor), ("-", "--", "-.", ":")[index % 4]
        style: dict[str, Any] = {"lw": 1 + 3 * wider, "ms": 3 + 6 * wider, "label": name}
        axes.plot(middles, y, dashes, marker="osv^DPX*h"[index % 9], **style)
    for threshold in thresholds:
        axes.axhline(threshold, color="#b2182b", linestyle="--", linewidth=0.8)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("position (middle of each band)")
    axes.set_ylabel("largest |error| in the band")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    out = io.BytesIO()
    figure.savefig(
        out, format="png", dpi=DPI, metadata={"Software": None}, pil_kwargs={"compress_level": 1}
    )
    return out.getvalue()


def difference(matrix: NDArray[np.float64], positions: Axis, columns: Axis, *, title: str) -> bytes:
    """A PNG of two tables' ``|a - b|`` (positions down, entries across), log10 scale; more
    rows or columns than :data:`DIFFERENCE_SIZE`'s pixels are reduced to one cell a pixel."""
    width, height = DIFFERENCE_SIZE
    shown = np.log10(np.maximum(bin_means(matrix, height, width), 1e-12))
    low, high = float(shown.min()), float(shown.max())
    return _draw(
        shown,
        columns,
        positions,
        title=title,
        label="log10 |a - b|",
        scale=(low, max(high, low + 1e-9)),
        width=width,
        height=height,
        cmap="magma",
    )
