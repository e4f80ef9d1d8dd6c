"""Two tables side by side: the difference of their entries by position band, the first
position where it passes the thresholds, and for rotary tables the drift of each pair's
angle; sampled as an audit is (:mod:`.bands`).

Both tables are computed a chunk of positions at a time, each position once: what a
comparison holds besides its answer is a few arrays of at most :data:`CHUNK_ENTRIES`
entries (each table's rows, and their difference) and a few numbers a position."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service import plots
from service.audit import bands, paths
from service.encodings import registry
from service.encodings.registry import Key

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]
# the entries of each table computed at once (a chunk of positions: at least one)
CHUNK_ENTRIES: Final = 1 << 20


def values(key: Key, positions: NDArray[np.int64]) -> Matrix:
    """A table's entries at ``positions`` as the audit compares them."""
    return paths.entries(key, registry.take(key, positions))


def plan(start: int, stop: int) -> tuple[list[bands.Band], NDArray[np.int64]]:
    """The bands of ``start .. stop-1`` and the positions evaluated in them."""
    spans = [span for span in bands.bands(stop) if span.stop > start]
    spans = [bands.Band(max(span.start, start), span.stop) for span in spans]
    positions = np.unique(np.concatenate([bands.spread(s.start, s.stop) for s in spans]))
    return spans, positions


def cost(start: int, stop: int) -> int:
    """The positions a comparison of ``start .. stop-1`` evaluates in each table, at most:
    those planned, and those refining each threshold's first crossing may add between two
    of them (:func:`bands.first`)."""
    _, positions = plan(start, stop)
    gap = int(np.diff(positions).max()) if len(positions) > 1 else 1
    return len(positions) + len(bands.THRESHOLDS) * _refining(gap)


def _refining(gap: int) -> int:
    """The positions refining evaluates, at most, between two evaluated ``gap`` apart:
    every one between where they are :data:`bands.DENSE` or fewer, else a spread of them
    (under twice :data:`bands.SAMPLES`), then again between two of those."""
    inside = gap - 1
    if inside <= bands.DENSE:
        return inside
    return 2 * bands.SAMPLES + _refining((inside // (bands.SAMPLES - bands.HEAD)) | 1)


def _chunks(a: Key, b: Key, positions: NDArray[np.int64]) -> Iterator[tuple[Matrix, Matrix | None]]:
    """``|a - b|`` at ``positions``, a chunk at a time, each table computed once; with each
    rotary pair's angle drift."""
    step = max(1, CHUNK_ENTRIES // paths.width(a))
    turned_pairs = paths.angles(a) is not None and paths.angles(b) is not None
    for begin in range(0, len(positions), step):
        at = positions[begin : begin + step]
        first, second = values(a, at), values(b, at)
        drift = None
        if turned_pairs:
            half = first.shape[1] // 2
            turned = np.arctan2(first[:, half:], first[:, :half])
            turned -= np.arctan2(second[:, half:], second[:, :half])
            drift = np.abs((turned + np.pi) % (2 * np.pi) - np.pi)
        first -= second
        yield np.abs(first, out=first), drift


def _rows(a: Key, b: Key, positions: NDArray[np.int64]) -> tuple[Vector, Vector, Vector | None]:
    """Each position's largest and summed ``|a - b|``, and its largest angle drift."""
    largest, sums, drifts = [], [], []
    for difference, drift in _chunks(a, b, positions):
        largest.append(difference.max(axis=1))
        sums.append(difference.sum(axis=1))
        if drift is not None:
            drifts.append(drift.max(axis=1))
    joined = np.concatenate(drifts) if drifts else None
    return np.concatenate(largest), np.concatenate(sums), joined


def compare(a: Key, b: Key, start: int, stop: int) -> dict[str, Any]:
    """``a``'s table against ``b``'s over positions ``start .. stop-1``."""
    spans, positions = plan(start, stop)
    largest, sums, drift = _rows(a, b, positions)
    width = paths.width(a)
    rows = []
    for span in spans:
        inside = (positions >= span.start) & (positions < span.stop)
        samples = int(inside.sum())
        row: dict[str, Any] = {
            "start": span.start,
            "stop": span.stop,
            "samples": samples,
            "max_difference": float(largest[inside].max()),
            "mean_difference": float(sums[inside].sum() / (samples * width)),
        }
        if drift is not None:
            row["max_angle_drift"] = float(drift[inside].max())
        rows.append(row)

    def row_max(at: NDArray[np.int64]) -> tuple[Vector, NDArray[np.bool_] | None]:
        return _rows(a, b, at)[0], None

    first_over = {}
    for threshold in bands.THRESHOLDS:

        def passes(errors: Vector, _: NDArray[np.bool_] | None, t: float = threshold) -> Any:
            return errors > t

        label = f"1e{round(np.log10(threshold))}"
        first_over[label] = bands.first(
            row_max, positions, largest > threshold, passes, floor=start
        )
    return {"bands": rows, "first_over": first_over}


def drawn(start: int, stop: int, rows: int) -> tuple[NDArray[np.int64], int]:
    """The positions a picture of ``rows`` rows draws: every ``step``-th from ``start``,
    at most ``rows`` of them; and the step."""
    step = max(1, -(-(stop - start) // rows))
    return np.arange(start, stop, step, dtype=np.int64), step


def heatmap(a: Key, b: Key, positions: NDArray[np.int64], columns: int) -> Matrix:
    """``|a - b|`` at ``positions``, each row's entries reduced to at most ``columns``
    cells (their means, :func:`service.plots.bin_means`) a chunk at a time: what the
    picture draws, never the whole difference at once."""
    reduced = [
        plots.bin_means(difference, len(difference), columns)
        for difference, _ in _chunks(a, b, positions)
    ]
    return np.concatenate(reduced)
