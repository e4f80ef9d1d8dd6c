"""Two tables side by side: the difference of their entries by position band, the first
position where it passes the thresholds, and for rotary tables the drift of each pair's
angle; sampled as an audit is (:mod:`.bands`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.audit import bands, paths
from service.encodings import registry
from service.encodings.registry import Key
from service.encodings.rotary import RotaryKey

Matrix = NDArray[np.float64]


def values(key: Key, positions: NDArray[np.int64]) -> Matrix:
    """A table's entries at ``positions`` as the audit compares them."""
    return paths.entries(key, registry.take(key, positions))


def _angles(key: Key, entries: Matrix) -> Matrix | None:
    if not isinstance(key, RotaryKey):
        return None
    half = entries.shape[1] // 2
    angles: Matrix = np.arctan2(entries[:, half:], entries[:, :half])
    return angles


def compare(a: Key, b: Key, start: int, stop: int) -> dict[str, Any]:
    """``a``'s table against ``b``'s over positions ``start .. stop-1``."""
    spans = [span for span in bands.bands(stop) if span.stop > start]
    spans = [bands.Band(max(span.start, start), span.stop) for span in spans]
    positions = np.unique(np.concatenate([bands.spread(s.start, s.stop) for s in spans]))

    def measure(at: NDArray[np.int64]) -> tuple[Matrix, NDArray[np.bool_] | None]:
        first, second = values(a, at), values(b, at)
        return np.abs(first - second), None

    differences, _ = measure(positions)
    largest = differences.max(axis=1)
    first_a, first_b = values(a, positions), values(b, positions)
    angle_a, angle_b = _angles(a, first_a), _angles(b, first_b)
    drift = None
    if angle_a is not None and angle_b is not None:
        drift = np.abs((angle_a - angle_b + np.pi) % (2 * np.pi) - np.pi)
    rows = []
    for span in spans:
        inside = (positions >= span.start) & (positions < span.stop)
        row: dict[str, Any] = {
            "start": span.start,
            "stop": span.stop,
            "samples": int(inside.sum()),
            "max_difference": float(differences[inside].max()),
            "mean_difference": float(differences[inside].mean()),
        }
        if drift is not None:
            row["max_angle_drift"] = float(drift[inside].max())
        rows.append(row)

    def row_max(at: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_] | None]:
        found, _ = measure(at)
        return found.max(axis=1), None

    first_over = {}
    for threshold in bands.THRESHOLDS:

        def passes(
            errors: NDArray[np.float64], _: NDArray[np.bool_] | None, t: float = threshold
        ) -> NDArray[np.bool_]:
            return errors > t

        label = f"1e{round(np.log10(threshold))}"
        first_over[label] = bands.first(
            row_max, positions, largest > threshold, passes, floor=start
        )
    return {"bands": rows, "first_over": first_over}


def heatmap(a: Key, b: Key, start: int, stop: int, rows: int = 512) -> tuple[Matrix, int]:
    """``|a - b|`` at ``rows`` positions evenly spaced from ``start`` (every ``step``-th),
    every entry: what the picture draws; and the step."""
    step = max(1, -(-(stop - start) // rows))
    positions = np.arange(start, stop, step, dtype=np.int64)
    return np.abs(values(a, positions) - values(b, positions)), step
