"""An audit's answer: for each path, its error against the exact table by position band,
the first positions where it passes the thresholds, and, for a rotary table, the first
where a pair's angle is off by more than pi/2 (the table then points the wrong way)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.audit import bands, envelope, paths
from service.audit.paths import Path
from service.encodings.alibi import BiasKey
from service.encodings.registry import Key
from service.encodings.rotary import RotaryKey

DEVICE: Final = "device"
DEVICE_DESCRIPTION: Final = (
    "What a GPU's math library may produce (an estimate): an envelope from the documented "
    "ulp bounds of CUDA's powf (4), sinf and cosf (2) in transformers' operation order; its "
    "errors are the envelope's, the largest a device may give."
)
Matrix = NDArray[np.float64]
# a path's differences from the exact entries at positions, and where its angles point wrong
Matrixer = Callable[..., tuple[Matrix, NDArray[np.bool_] | None]]
# the entries evaluated at every position from 0 (each path's and the exact ones)
SCAN: Final = 1 << 21
# a first crossing below this many entries' positions is found by evaluating every position
SCAN_FIRST: Final = 1 << 23


def names(key: Key) -> list[str]:
    """The paths that apply to ``key``, in order."""
    found = [path.name for path in paths.paths_of(key)]
    return [*found, DEVICE] if isinstance(key, RotaryKey) else found


def _worst(key: Key) -> float:
    """The largest difference two entries can have: cos and sin times the attention factor
    (ALiBi's have no bound: the entry's own magnitude counts)."""
    if isinstance(key, BiasKey):
        return 0.0
    return 2 * key.attention if isinstance(key, RotaryKey) else 2.0


def _differences(
    key: Key, path: Path, positions: NDArray[np.int64], exact: Matrix | None = None
) -> tuple[Matrix, NDArray[np.bool_] | None]:
    got = path.values(key, positions)
    exact = paths.exact(key, positions) if exact is None else exact
    broken = ~np.isfinite(got)
    with np.errstate(invalid="ignore"):
        differences = np.abs(got - exact)
    # what cannot be read is as wrong as an entry can be (ALiBi: its whole magnitude)
    differences[broken] = np.maximum(_worst(key), np.abs(exact))[broken]
    if not isinstance(key, RotaryKey):
        return differences, None
    pairs = key.pairs
    with np.errstate(invalid="ignore"):
        turned = np.arctan2(got[:, pairs:], got[:, :pairs]) - np.arctan2(
            exact[:, pairs:], exact[:, :pairs]
        )
    wrapped = np.abs((turned + np.pi) % (2 * np.pi) - np.pi)
    misdirected = (wrapped > np.pi / 2) | broken[:, :pairs] | broken[:, pairs:]
    anywhere: NDArray[np.bool_] = np.any(misdirected, axis=1)
    return differences, anywhere


def _device(
    key: RotaryKey, positions: NDArray[np.int64], exact: Matrix | None = None
) -> tuple[Matrix, NDArray[np.bool_]]:
    entry, drift = envelope.bounds(key, positions)
    anywhere: NDArray[np.bool_] = np.any(drift > np.pi / 2, axis=1)
    return entry, anywhere


def audit(
    key: Key, max_len: int, chosen: Sequence[str], edges: Sequence[int] | None
) -> dict[str, Any]:
    """The audit of ``key``'s table to ``max_len``, for the ``chosen`` paths."""
    spans = bands.bands(max_len, edges)
    positions = plan(key, max_len, spans)
    exact = paths.exact(key, positions)  # once, for every path
    table_paths = {path.name: path for path in paths.paths_of(key)}
    answers = []
    found: dict[str, Any] = {"thresholds": [_label(t) for t in bands.THRESHOLDS]}
    for name in chosen:
        matrix: Matrixer
        if name == DEVICE and isinstance(key, RotaryKey):
            matrix, description = functools.partial(_device, key), DEVICE_DESCRIPTION
        else:
            path = table_paths[name]
            matrix, description = functools.partial(_differences, key, path), path.description
        rotary = isinstance(key, RotaryKey)
        differences = matrix(positions, exact)
        scan = min(max_len, SCAN // paths.width(key)), min(max_len, SCAN_FIRST // paths.width(key))
        answers.append(
            _path(name, description, matrix, differences, positions, spans, rotary, *scan)
        )
    found["every_position_below"] = min(max_len, SCAN // paths.width(key))
    found["exact_below"] = min(max_len, SCAN_FIRST // paths.width(key))
    found["paths"] = answers
    return found


def plan(key: Key, max_len: int, spans: Sequence[bands.Band]) -> NDArray[np.int64]:
    """The positions evaluated: the bands' samples, and every position up to
    :data:`SCAN` entries (where the thresholds are usually first passed: found exactly)."""
    head = np.arange(min(max_len, SCAN // paths.width(key)), dtype=np.int64)
    return np.union1d(bands.plan(spans), head)


def _label(threshold: float) -> str:
    return f"1e{round(math.log10(threshold))}"


def _passes(threshold: float) -> bands.Test:
    def test(
        errors: NDArray[np.float64], misdirected: NDArray[np.bool_] | None
    ) -> NDArray[np.bool_]:
        return errors > threshold

    return test


def _misdirected(
    errors: NDArray[np.float64], misdirected: NDArray[np.bool_] | None
) -> NDArray[np.bool_]:
    assert misdirected is not None
    return misdirected


def _path(
    name: str,
    description: str,
    matrix: Matrixer,
    found: tuple[Matrix, NDArray[np.bool_] | None],
    positions: NDArray[np.int64],
    spans: Sequence[bands.Band],
    rotary: bool,
    scanned: int,
    scan_to: int,
) -> dict[str, Any]:
    differences, misdirected = found
    largest = differences.max(axis=1)

    def measure(at: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_] | None]:
        found, turned = matrix(at)
        return found.max(axis=1), turned

    rows = []
    for span in spans:
        inside = (positions >= span.start) & (positions < span.stop)
        rows.append(
            {
                "start": span.start,
                "stop": span.stop,
                "samples": int(inside.sum()),
                "max_error": float(differences[inside].max()),
                "mean_error": float(differences[inside].mean()),
            }
        )
    scan = (scanned, scan_to)
    first_over = {
        _label(t): bands.first(measure, positions, largest > t, _passes(t), *scan)
        for t in bands.THRESHOLDS
    }
    answer: dict[str, Any] = {
        "name": name,
        "description": description,
        "bands": rows,
        "first_over": first_over,
    }
    if rotary and misdirected is not None:
        answer["first_misdirected"] = bands.first(
            measure, positions, misdirected, _misdirected, *scan
        )
    return answer
