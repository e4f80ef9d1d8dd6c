"""Each path's differences from the exact entries at a chunk of positions, and what an
audit keeps of them as the chunks go by: per band, the largest error and the sum of each
position's mean; per test, the first position sampled where it holds. A chunk is at most
:data:`CHUNK` entries wide, so what an audit holds is a few of those whatever its width
and its positions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.audit import bands, envelope, paths
from service.encodings import registry
from service.encodings.registry import Key

DEVICE: Final = "device"
DEVICE_DESCRIPTION: Final = (
    "What a GPU's math library may produce (an estimate): an envelope from the documented "
    "ulp bounds of CUDA's powf (4), sinf and cosf (2) in transformers' operation order; its "
    "errors are the envelope's, the largest a device may give."
)
# entries of one path evaluated at once (2 MiB of float64): what an audit holds is a few
# arrays of this size, whatever its width
CHUNK: Final = 1 << 18
Matrix = NDArray[np.float64]
Mask = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Matrixer:
    """A path as an audit evaluates it: its differences from the exact entries at
    positions (given them, if it ``uses_exact``), and where its angles point wrong."""

    name: str
    description: str
    uses_exact: bool
    run: Callable[[NDArray[np.int64], Matrix | None], tuple[Matrix, Mask | None]]


def rows(key: Key) -> int:
    """How many positions a chunk holds."""
    return max(1, CHUNK // paths.width(key))


def matrixer(key: Key, name: str) -> Matrixer:
    """The path ``name`` of ``key``'s table."""
    turning = paths.angles(key)
    if name == DEVICE and turning is not None:

        def device(at: NDArray[np.int64], exact: Matrix | None) -> tuple[Matrix, Mask | None]:
            entry, drift = envelope.bounds(key, at)
            anywhere: Mask = np.any(drift > np.pi / 2, axis=1)
            return entry, anywhere

        return Matrixer(name, turning.device or DEVICE_DESCRIPTION, False, device)
    path = {path.name: path for path in paths.paths_of(key)}[name]

    def table(at: NDArray[np.int64], exact: Matrix | None) -> tuple[Matrix, Mask | None]:
        assert exact is not None
        return _differences(key, path.values(key, at), exact)

    return Matrixer(name, path.description, True, table)


def _differences(key: Key, got: Matrix, exact: Matrix) -> tuple[Matrix, Mask | None]:
    record = registry.audit(key)
    broken = ~np.isfinite(got)
    with np.errstate(invalid="ignore"):
        differences = np.abs(got - exact)
    # what cannot be read is as wrong as an entry can be (ALiBi: its whole magnitude)
    differences[broken] = np.maximum(record.largest(key), np.abs(exact))[broken]
    if record.angles is None:
        return differences, None
    pairs = record.angles.pairs(key)
    with np.errstate(invalid="ignore"):
        turned = np.arctan2(got[:, pairs:], got[:, :pairs]) - np.arctan2(
            exact[:, pairs:], exact[:, :pairs]
        )
    wrapped = np.abs((turned + np.pi) % (2 * np.pi) - np.pi)
    misdirected = (wrapped > np.pi / 2) | broken[:, :pairs] | broken[:, pairs:]
    anywhere: Mask = np.any(misdirected, axis=1)
    return differences, anywhere


def measure(key: Key, matrix: Matrixer) -> bands.Measure:
    """Each position's largest error and whether it points wrong, a chunk at a time (a
    refinement's window may be thousands of positions of a wide table)."""
    size = rows(key)

    def measured(at: NDArray[np.int64]) -> tuple[Matrix, Mask | None]:
        largest, turned = [], []
        for start in range(0, len(at), size):
            part = at[start : start + size]
            differences, misdirected = matrix.run(
                part, paths.exact(key, part) if matrix.uses_exact else None
            )
            largest.append(differences.max(axis=1))
            if misdirected is not None:
                turned.append(misdirected)
        return np.concatenate(largest), np.concatenate(turned) if turned else None

    return measured


@dataclass(slots=True)
class BandStatistics:
    """What an audit keeps of one path as the chunks of its plan go by (in order): per
    band, the positions seen, the largest error and the sum of each position's mean error;
    per test, the first position seen where it holds and the position seen before it."""

    spans: Sequence[bands.Band]
    tests: Sequence[bands.Test]
    starts: NDArray[np.int64]
    largest: Matrix
    sums: Matrix
    counts: NDArray[np.int64]
    hits: list[tuple[int, int | None]] = field(default_factory=list)
    last: int = -1  # the last position seen

    @classmethod
    def of(cls, spans: Sequence[bands.Band], tests: Sequence[bands.Test]) -> BandStatistics:
        size = len(spans)
        return cls(
            spans,
            tests,
            np.array([span.start for span in spans], dtype=np.int64),
            np.zeros(size),
            np.zeros(size),
            np.zeros(size, dtype=np.int64),
            [(-1, None)] * len(tests),
        )

    def add(self, at: NDArray[np.int64], differences: Matrix, misdirected: Mask | None) -> None:
        """The differences at positions ``at`` (in order, past those seen)."""
        largest = differences.max(axis=1)
        band = np.searchsorted(self.starts, at, side="right") - 1
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(band)) + 1])
        which = band[cuts]
        self.largest[which] = np.maximum(self.largest[which], np.maximum.reduceat(largest, cuts))
        self.sums[which] += np.add.reduceat(differences.mean(axis=1), cuts)
        self.counts[which] += np.diff(np.append(cuts, len(at)))
        for index, test in enumerate(self.tests):
            if self.hits[index][1] is None:
                found = np.flatnonzero(test(largest, misdirected))
                if len(found):
                    at_first = int(found[0])
                    low = int(at[at_first - 1]) if at_first else self.last
                    self.hits[index] = (low, int(at[at_first]))
        self.last = int(at[-1])

    def rows(self) -> list[dict[str, Any]]:
        """Each band's figures, as the answer gives them."""
        return [
            {
                "start": span.start,
                "stop": span.stop,
                "samples": int(count),
                "max_error": float(largest),
                "mean_error": float(total / count),
            }
            for span, count, largest, total in zip(
                self.spans, self.counts, self.largest, self.sums, strict=True
            )
        ]
