"""An audit's answer: for each path, its error against the exact table by position band,
the first positions where it passes the thresholds, and, for a rotary table, the first
where a pair's angle is off by more than pi/2 (the table points the wrong way).

The positions are evaluated a few hundred thousand entries at a time, the exact ones once
for every path (:mod:`.differences` keeps what each path's figures need): what an audit holds
does not grow with its positions or its width. What it evaluates is counted before it
runs (:func:`cost`): the positions of its plan, every path's entries and the exact ones
there, the dense scan of the first crossings below :data:`SCAN_FIRST` entries (shared by
the paths, the exact entries once), and the refinements past it."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.audit import bands, differences, paths
from service.audit.differences import DEVICE, BandStatistics, Matrixer
from service.encodings import registry
from service.encodings.registry import Key

# the entries evaluated at every position from 0 (each path's and the exact ones)
SCAN: Final = 1 << 21
# a first crossing below this many entries' positions is found by evaluating every position
SCAN_FIRST: Final = 1 << 23


# what an entry an audit evaluates costs, in table numbers (``Runtime.compute``'s unit):
# the exact entry in double-double, a path's arithmetic and its error, 13 to 70 ns against
# a table's 4 (measured over Llama 3.1's, small and wide audits)
NUMBER_COST: Final = 16
# and what a path costs whatever its positions (its steps for each chunk, band and test:
# about 0.2 ms), so that no audit of every path passes for a small one
PATH_COST: Final = 1 << 16


@dataclass(frozen=True, slots=True)
class Cost:
    """What an audit evaluates: the positions of its plan (every path's entries and the
    exact ones at each), the entries it evaluates at most (scans and refinements
    included), and what that costs in table numbers (``charge``: its lane and its turn are
    chosen from it), with the preparation of its exact table."""

    positions: int
    numbers: int
    charge: int


def names(key: Key) -> list[str]:
    """The paths that apply to ``key``, in order."""
    return names_of(registry.audit(key))


def names_of(record: registry.Audit[Any]) -> list[str]:
    """The paths of a family's audit record, in order (:func:`paths.paths_of`'s, then the
    device envelope of turned pairs)."""
    found = [path.name for path in paths.paths_in(record)]
    device = record.angles is not None and (record.paths is None or DEVICE in record.paths)
    return [*found, DEVICE] if device else found


def _reach(key: Key, max_len: int) -> tuple[int, int]:
    """Below which position every position is evaluated, and below which a first crossing
    is found by evaluating every position before it."""
    width = paths.width(key)
    return min(max_len, SCAN // width), min(max_len, SCAN_FIRST // width)


def cost(key: Key, max_len: int, chosen: Sequence[str], edges: Sequence[int] | None) -> Cost:
    """What :func:`audit` will evaluate, counted in the bands' number of steps: no array is
    built (a request's limits and lane are chosen from it before any work)."""
    spans = bands.bands(max_len, edges)
    scanned, scan_to = _reach(key, max_len)
    positions = bands.count(spans, scanned)
    width, tables = paths.width(key), len(chosen) + 1  # each path's, and the exact ones
    tests = len(_tests(key))
    numbers = (positions + scan_to - scanned) * width * tables
    if max_len > scan_to:  # each crossing past the scan refined: a path's and the exact
        numbers += len(chosen) * tests * bands.refined(bands.widest(spans)) * width * 2
    preparation = registry.preparation(paths.exact_key(key))
    charge = numbers * NUMBER_COST + len(chosen) * PATH_COST + preparation
    return Cost(positions, numbers, charge)


def plan(key: Key, max_len: int, spans: Sequence[bands.Band]) -> NDArray[np.int64]:
    """The positions evaluated: the bands' samples, and every position up to
    :data:`SCAN` entries (where the thresholds are usually first passed: found exactly)."""
    return np.concatenate([np.empty(0, np.int64), *_chunks(key, max_len, spans)])


def _chunks(key: Key, max_len: int, spans: Sequence[bands.Band]) -> Iterator[NDArray[np.int64]]:
    """:func:`plan`'s positions in order, a chunk at a time: the plan itself is never held
    (2^21 positions and their union were +100 MiB)."""
    head, rows = _reach(key, max_len)[0], differences.rows(key)
    for start in range(0, head, rows):
        yield np.arange(start, min(start + rows, head), dtype=np.int64)
    waiting: list[NDArray[np.int64]] = []
    for span in spans:
        if span.stop > head:
            at = bands.spread(span.start, span.stop)
            waiting.append(at[at >= head])
        if waiting and (span is spans[-1] or sum(map(len, waiting)) >= rows):
            joined = np.concatenate(waiting)
            waiting = []
            for start in range(0, len(joined), rows):
                yield joined[start : start + rows]


def audit(
    key: Key, max_len: int, chosen: Sequence[str], edges: Sequence[int] | None
) -> dict[str, Any]:
    """The audit of ``key``'s table to ``max_len``, for the ``chosen`` paths."""
    spans = bands.bands(max_len, edges)
    scanned, scan_to = _reach(key, max_len)
    matrices = [differences.matrixer(key, name) for name in chosen]
    statistics = [BandStatistics.of(spans, _tests(key)) for _ in chosen]
    exact = any(name != DEVICE for name in chosen)
    for at in _chunks(key, max_len, spans):
        reference = paths.exact(key, at) if exact else None  # once, for every path
        for matrix, kept in zip(matrices, statistics, strict=True):
            kept.add(at, *matrix.run(at, reference))
    _scan(key, matrices, statistics, scanned, scan_to)
    answers = []
    for matrix, kept in zip(matrices, statistics, strict=True):
        measure = differences.measure(key, matrix)
        crossings = [
            None if hit is None else bands.refine(measure, low, hit, test)
            for (low, hit), test in zip(kept.hits, kept.tests, strict=True)
        ]
        answers.append(_answer(key, matrix, kept, crossings))
    return {
        "thresholds": [_label(t) for t in bands.THRESHOLDS],
        "every_position_below": scanned,
        "exact_below": scan_to,
        "paths": answers,
    }


def _tests(key: Key) -> list[bands.Test]:
    thresholds: list[bands.Test] = [_passes(t) for t in bands.THRESHOLDS]
    return [*thresholds, _misdirected] if paths.angles(key) is not None else thresholds


def _scan(
    key: Key,
    matrices: Sequence[Matrixer],
    statistics: Sequence[BandStatistics],
    scanned: int,
    scan_to: int,
) -> None:
    """The first crossings found between ``scanned`` and ``scan_to``, made exact: every
    position from ``scanned`` to each is evaluated, once for all of them (the exact entries
    once for every path)."""
    waiting = {
        (index, test): hit
        for index, kept in enumerate(statistics)
        for test, (low, hit) in enumerate(kept.hits)
        if hit is not None and hit - low > 1 and scanned < hit <= scan_to
    }
    start, rows = scanned, differences.rows(key)
    while waiting:
        stop = min(max(waiting.values()), start + rows)
        at = np.arange(start, stop, dtype=np.int64)
        open_paths = sorted({index for index, _ in waiting})
        needs_exact = any(matrices[index].uses_exact for index in open_paths)
        reference = paths.exact(key, at) if needs_exact else None
        for index in open_paths:
            found = matrices[index].run(at, reference)
            largest, misdirected = found[0].max(axis=1), found[1]
            for (path, test), hit in list(waiting.items()):
                if path != index:
                    continue
                passed = np.flatnonzero(statistics[path].tests[test](largest, misdirected))
                passed = passed[at[passed] < hit]
                if len(passed) or stop >= hit:
                    found_at = int(at[passed[0]]) if len(passed) else hit
                    statistics[path].hits[test] = (found_at - 1, found_at)
                    del waiting[(path, test)]
        start = stop


def _answer(
    key: Key, matrix: Matrixer, kept: BandStatistics, crossings: list[int | None]
) -> dict[str, Any]:
    labels = [_label(t) for t in bands.THRESHOLDS]
    answer: dict[str, Any] = {
        "name": matrix.name,
        "description": matrix.description,
        "bands": kept.rows(),
        "first_over": dict(zip(labels, crossings, strict=False)),
    }
    if paths.angles(key) is not None:
        answer["first_misdirected"] = crossings[len(labels)]
    return answer


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
