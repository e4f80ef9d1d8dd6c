"""Which positions an audit evaluates, and what it says of each path there.

The positions ``0 .. max_len-1`` fall in bands: powers of two (``[0, 1)``, ``[1, 2)``,
``[2, 4)``, ...), or the edges a client gives. A band of at most :data:`SAMPLES` positions
is evaluated whole; a longer one at about :data:`SAMPLES` positions spread over it (its
first ones, then at an odd stride, and its last): an audit costs bands × samples × width,
whatever ``max_len``.
A band's largest and mean error are over the positions evaluated in it.

The first position where a path's error passes a threshold (or where its angle is off by
more than pi/2) is found among them. Every position below it is then evaluated where that
costs little (the audit says how far: the first is then exact); past that, it is refined
between the last position evaluated below the threshold and the first above it, until the
window is one position wide: a crossing between two positions of a coarser sample,
followed by a return below it, is not seen there.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

SAMPLES: Final = 512
HEAD: Final = 16
DENSE: Final = 4096
THRESHOLDS: Final = (1e-3, 1e-2, 1e-1)
# what a path gives at positions: each position's largest error, and whether its angle is
# off by more than pi/2 (None where the path has no angle)
Measure = Callable[[NDArray[np.int64]], tuple[NDArray[np.float64], NDArray[np.bool_] | None]]
Test = Callable[[NDArray[np.float64], NDArray[np.bool_] | None], NDArray[np.bool_]]


@dataclass(frozen=True, slots=True)
class Band:
    start: int
    stop: int


def bands(max_len: int, edges: Sequence[int] | None = None) -> list[Band]:
    """The bands of ``0 .. max_len-1``: between the ``edges`` (0 and ``max_len`` added), or
    powers of two."""
    if edges is None:
        cuts = [0, *(1 << k for k in range(max_len.bit_length()) if 1 << k < max_len)]
    else:
        cuts = [0, *(edge for edge in edges if 0 < edge < max_len)]
    cuts = [*sorted(set(cuts)), max_len]
    return [Band(a, b) for a, b in itertools.pairwise(cuts)]


def spread(start: int, stop: int, count: int = SAMPLES) -> NDArray[np.int64]:
    """Positions ``start .. stop-1``: all of them, or about ``count``: the first
    :data:`HEAD` (where a cast first loses integers: 2^k + 1), then every ``stride``-th
    with an odd stride (an even one would see only the multiples of a power of two, which
    every cast keeps), and the last."""
    if stop - start <= count:
        return np.arange(start, stop, dtype=np.int64)
    stride = ((stop - start) // (count - HEAD)) | 1
    picked = np.concatenate(
        [
            np.arange(start, start + HEAD, dtype=np.int64),
            np.arange(start + HEAD, stop, stride, dtype=np.int64),
            np.array([stop - 1], dtype=np.int64),
        ]
    )
    return np.unique(picked)


def plan(chosen: Sequence[Band]) -> NDArray[np.int64]:
    """Every position evaluated, in order."""
    return np.unique(np.concatenate([spread(band.start, band.stop) for band in chosen]))


def first(
    measure: Measure,
    positions: NDArray[np.int64],
    over: NDArray[np.bool_],
    test: Test,
    scanned: int = 0,
    scan_to: int = 0,
    floor: int = 0,
) -> int | None:
    """The first position where ``test`` holds: among ``positions`` (where it holds at
    ``over``; every position below ``scanned`` among them). Where the first found is below
    ``scan_to``, every position between ``scanned`` and it is evaluated (the first is then
    exact); else it is refined between the last evaluated position where the test fails and
    it."""
    hits = np.flatnonzero(over)
    if not len(hits):
        return None
    at = int(hits[0])
    high = int(positions[at])
    if scanned < high <= scan_to:
        for start in range(scanned, high, DENSE):
            window = np.arange(start, min(start + DENSE, high), dtype=np.int64)
            found = np.flatnonzero(test(*measure(window)))
            if len(found):
                return int(window[found[0]])
        return high
    low = int(positions[at - 1]) if at else floor - 1  # positions start at ``floor``
    while high - low > 1:
        dense = high - low - 1 <= DENSE
        window = spread(low + 1, high, DENSE if dense else SAMPLES)
        found = np.flatnonzero(test(*measure(window)))
        if not len(found):
            if dense:
                break  # every position between was evaluated: ``high`` is the first
            low = int(window[-1])  # those evaluated are below it: closer to ``high``
            continue
        index = int(found[0])
        high = int(window[index])
        low = int(window[index - 1]) if index else low
        if dense:
            break
    return high
