"""Which positions an audit evaluates, and what it says of each path there.

The positions ``0 .. max_len-1`` fall in bands: powers of two (``[0, 1)``, ``[1, 2)``,
``[2, 4)``, ...), or the edges a client gives. A band of at most :data:`SAMPLES` positions
is evaluated whole; a longer one at about :data:`SAMPLES` positions spread over it (its
first ones, then at an odd stride, and its last): an audit costs bands × samples × width,
whatever ``max_len``. How many positions that is, and the most a refinement evaluates, are
counted here without building them (:func:`count`, :func:`refined`): what an audit will
cost is known before any array is made.
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


def stride(length: int, count: int = SAMPLES) -> int:
    """The stride of :func:`spread` over ``length`` positions (more than ``count``)."""
    return (length // (count - HEAD)) | 1


def spread(start: int, stop: int, count: int = SAMPLES) -> NDArray[np.int64]:
    """Positions ``start .. stop-1``: all of them, or about ``count``: the first
    :data:`HEAD` (where a cast first loses integers: 2^k + 1), then every ``stride``-th
    with an odd stride (an even one would see only the multiples of a power of two, which
    every cast keeps), and the last."""
    if stop - start <= count:
        return np.arange(start, stop, dtype=np.int64)
    picked = np.concatenate(
        [
            np.arange(start, start + HEAD, dtype=np.int64),
            np.arange(start + HEAD, stop, stride(stop - start, count), dtype=np.int64),
            np.array([stop - 1], dtype=np.int64),
        ]
    )
    return np.unique(picked)


def sampled(start: int, stop: int, count: int = SAMPLES, above: int = 0) -> int:
    """How many of :func:`spread`'s positions are at or past ``above``, counted: none is
    built."""
    low = max(start, above)
    if low >= stop:
        return 0
    if stop - start <= count:
        return stop - low
    step, strided = stride(stop - start, count), start + HEAD
    first = max(0, min(strided, stop) - low)  # of the first HEAD
    skipped = -(-(low - strided) // step) if low > strided else 0
    points = max(0, -(-(stop - strided) // step) - skipped)
    last = 0 if (stop - 1 - strided) % step == 0 else 1  # unless a stride lands on it
    return first + points + last


def plan(chosen: Sequence[Band]) -> NDArray[np.int64]:
    """Every position evaluated, in order."""
    return np.unique(np.concatenate([spread(band.start, band.stop) for band in chosen]))


def count(chosen: Sequence[Band], head: int = 0) -> int:
    """How many positions :func:`plan` gives with every position below ``head`` added (the
    bands cover ``0 .. head-1``), counted in the bands' number of steps: none is built."""
    return head + sum(sampled(band.start, band.stop, above=head) for band in chosen)


def widest(chosen: Sequence[Band]) -> int:
    """The widest gap between two positions next to each other in :func:`plan`."""
    return max(
        (stride(band.stop - band.start) for band in chosen if band.stop - band.start > SAMPLES),
        default=1,
    )


def refined(gap: int) -> int:
    """The most positions :func:`refine` evaluates between two positions ``gap`` apart
    (each round's window, when the first found is always the farthest from the last)."""
    total = 0
    while gap > 1:
        between = gap - 1
        if between <= DENSE:
            return total + between
        total += sampled(0, between)
        gap = stride(between)
    return total


def first(
    measure: Measure,
    positions: NDArray[np.int64],
    over: NDArray[np.bool_],
    test: Test,
    floor: int = 0,
) -> int | None:
    """The first position where ``test`` holds: among ``positions`` (where it holds at
    ``over``), refined between the last position evaluated where it fails and it."""
    hits = np.flatnonzero(over)
    if not len(hits):
        return None
    at = int(hits[0])
    low = int(positions[at - 1]) if at else floor - 1  # positions start at ``floor``
    return refine(measure, low, int(positions[at]), test)


def refine(measure: Measure, low: int, high: int, test: Test) -> int:
    """The first position past ``low`` where ``test`` holds, found between ``low`` (where it
    fails) and ``high`` (where it holds): windows of about :data:`SAMPLES` positions
    spread between them, closer each time, until at most :data:`DENSE` are left, which are
    evaluated whole."""
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
