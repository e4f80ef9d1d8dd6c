"""Exact angles: ``sin(p * w)`` and ``cos(p * w)`` for integer positions ``p`` and
frequencies ``w`` carried in double-double precision, each result within about one float64
ulp of the true value for every position up to 2^31 (numpy only).

Float64 alone is not enough: at position 10^6 one ulp of a frequency moves the angle by
1e-10, and at 2^31 by 2e-7. So a frequency is ``w_hi + w_lo`` (exact to ~2^-100), the angle
is ``big + small`` with ``big = fl(p * w_hi)`` and ``small`` its exact rounding error plus
``p * w_lo``, and ``sin(big + small) = sin(big) + small cos(big) - small^2/2 sin(big)``
(the next term, ``small^3/6``, is below 1e-20 for ``p < 2^31``).

Tables are filled by angle addition over 64-position blocks aligned to absolute positions,
so an entry's bits depend on its position alone: any rows, in any number of pieces, and
:func:`take` of scattered positions, give the same bits as the whole table.
"""

from __future__ import annotations

import bisect
import decimal
import functools
import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import numpy as np
from numpy.typing import NDArray

from service import cores

Float64Array = NDArray[np.float64]
# (sines, cosines): views of one output, rows by position; the cosines may have one column
# fewer than the frequencies (an odd width ends with a sine)
Target = tuple[NDArray[np.floating], NDArray[np.floating]]

_SPLITTER: Final = 134217729.0  # 2^27 + 1: Dekker's split into two 26-bit halves
CHUNK_ELEMENTS: Final = 1 << 16  # float64 temporaries stay in cache and memory stays flat
BLOCK: Final = 64  # positions per exact base angle in angle addition
_BLOCKED_PAIRS: Final = 1 << 14  # wider tables: the per-block offsets would be too large
_PARALLEL_ELEMENTS: Final = 1 << 20  # smaller fills are not worth a thread hand-off


def split(x: Float64Array) -> tuple[Float64Array, Float64Array]:
    """Dekker's split: ``x == hi + lo`` exactly, each half with at most 26 significant bits."""
    c = _SPLITTER * x
    hi = c - (c - x)
    return hi, x - hi


def dd_mul(
    a_hi: Float64Array, a_lo: Float64Array, b_hi: Float64Array | float, b_lo: Float64Array | float
) -> tuple[Float64Array, Float64Array]:
    """Double-double product ``(a_hi + a_lo) * (b_hi + b_lo)`` (arrays broadcast), relative
    error ~2^-104."""
    p = a_hi * b_hi
    ah, al = split(a_hi)
    bh, bl = split(np.asarray(b_hi))
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    e += a_hi * b_lo + a_lo * b_hi
    hi = p + e
    return hi, e - (hi - p)


def decimal_pair(value: decimal.Decimal) -> tuple[float, float]:
    """``value`` as a double-double: its float and the float of what is left."""
    hi = float(value)
    return hi, float(value - decimal.Decimal(hi))


def inverse_powers(
    base: float | decimal.Decimal, denominator: float, count: int, divisor: float = 1.0
) -> tuple[Float64Array, Float64Array]:
    """``(base / divisor)^(-2i/denominator)`` for ``i < count`` as double-double ``(hi, lo)``
    arrays whose sum is exact to ~2^-100: the frequencies of a sinusoidal table
    (``denominator = d_model``) and of rotary embeddings (the rotary dimension).

    ``base^(-2i/d) = r^i`` with ``r = base^(-2/d)``, so only the powers ``r^(2^k)`` are
    computed in decimal arithmetic. With ``i = a * 2^m + b``, ``r^i`` is ``r^(a 2^m) r^b``:
    the two short lists of powers come from products over the bits of ``a`` and ``b``, and
    every frequency from one more product, in chunks (any width costs memory in proportion).
    """
    bits = max(count - 1, 0).bit_length()
    squarings = _squarings(base, divisor, denominator, bits)
    low_bits = (bits + 1) // 2
    low_hi, low_lo = _bit_powers(squarings[:low_bits], 1 << low_bits)
    high_hi, high_lo = _bit_powers(squarings[low_bits:], -(-count >> low_bits))
    hi = np.empty((len(high_hi), len(low_hi)))
    lo = np.empty_like(hi)
    step = max(1, CHUNK_ELEMENTS // len(low_hi))
    for a in range(0, len(high_hi), step):
        rows = slice(a, a + step)
        hi[rows], lo[rows] = dd_mul(
            high_hi[rows, None], high_lo[rows, None], low_hi[None, :], low_lo[None, :]
        )
    return hi.ravel()[:count], lo.ravel()[:count]


def _bit_powers(
    squarings: tuple[tuple[float, float], ...], count: int
) -> tuple[Float64Array, Float64Array]:
    """``prod(squarings[k] for each set bit k of i)`` for ``i < count``."""
    index = np.arange(count)
    hi = np.ones(count)
    lo = np.zeros(count)
    for bit, (r_hi, r_lo) in enumerate(squarings):
        use = (index >> bit) & 1 == 1
        hi[use], lo[use] = dd_mul(hi[use], lo[use], r_hi, r_lo)
    return hi, lo


def scaled(
    hi: Float64Array, lo: Float64Array, factor: decimal.Decimal
) -> tuple[Float64Array, Float64Array]:
    """The double-double ``hi + lo`` times ``factor`` (given to 40 digits)."""
    f_hi, f_lo = decimal_pair(factor)
    return dd_mul(hi, lo, f_hi, f_lo)


@functools.lru_cache(maxsize=256)  # a few dozen floats an entry
def _squarings(
    base: float | decimal.Decimal, divisor: float, denominator: float, bits: int
) -> tuple[tuple[float, float], ...]:
    """``r^(2^k)`` for ``k < bits``, ``r = (base/divisor)^(-2/denominator)``, as
    double-doubles."""
    context = decimal.Context(prec=40)
    log_base = context.subtract(
        context.ln(decimal.Decimal(base)), context.ln(decimal.Decimal(divisor))
    )
    return tuple(
        decimal_pair(
            context.exp(
                context.multiply(
                    context.divide(decimal.Decimal(-(2 << k)), decimal.Decimal(denominator)),
                    log_base,
                )
            )
        )
        for k in range(bits)
    )


def sincos(
    positions: Float64Array, w_hi: Float64Array, w_lo: Float64Array
) -> tuple[Float64Array, Float64Array]:
    """``sin`` and ``cos`` of ``positions[:, None] * (w_hi + w_lo)``, each element a
    function of its own position and frequency only (see the module docstring)."""
    pos = positions[:, None]
    big = pos * w_hi
    ph, pl = split(pos)
    wh, wl = split(w_hi)
    small = (((ph * wh - big) + ph * wl) + pl * wh) + pl * wl  # Dekker's exact product error
    small += pos * w_lo
    s = np.sin(big)
    c = np.cos(big)
    half = 0.5 * small * small
    sin = s + (small * c - half * s)
    small *= s
    half *= c
    small += half
    c -= small
    return sin, c


def fill(start: int, w_hi: Float64Array, w_lo: Float64Array, targets: Sequence[Target]) -> None:
    """Write the sines and cosines of positions ``start, start+1, ...`` into ``targets``, one
    after the other: the first target's first row is position ``start``, the next target
    continues where it ends. Large fills run on several threads."""
    edges = list(itertools.accumulate((len(s) for s, _ in targets), initial=start))
    stop = edges[-1]
    pairs = w_hi.shape[0]
    if not pairs:  # a table with no sine column (tensor2tensor at width 1): nothing to write
        return
    writer = _Writer(edges, targets)
    work = _fill_by_blocks if pairs <= _BLOCKED_PAIRS else _fill_directly
    elements = (stop - start) * pairs
    spans = _spans(start, stop, parts=_WORKERS if elements >= _PARALLEL_ELEMENTS else 1)
    in_parallel([functools.partial(work, a, b, w_hi, w_lo, writer) for a, b in spans])


def take(
    positions: NDArray[np.integer], w_hi: Float64Array, w_lo: Float64Array, target: Target
) -> None:
    """Write the sines and cosines of ``positions`` (rows in the order given) into
    ``target`` with the same bits that :func:`fill` writes for them: the rows of scattered
    positions, without the rows between, in chunks (memory in proportion to the target)."""
    sines, cosines = target
    if not w_hi.shape[0]:
        return
    pos = np.asarray(positions, dtype=np.int64)
    blocked = w_hi.shape[0] <= _BLOCKED_PAIRS
    # the offsets within a block, once for every chunk (as fill computes them)
    s_q, c_q = sincos(np.arange(BLOCK, dtype=np.float64), w_hi, w_lo) if blocked else (w_hi, w_lo)
    rows = max(1, CHUNK_ELEMENTS // w_hi.shape[0])
    for first in range(0, len(pos), rows):
        part = pos[first : first + rows]
        if blocked:
            blocks, block_of = np.unique(part // BLOCK, return_inverse=True)
            s_b, c_b = sincos((blocks * BLOCK).astype(np.float64), w_hi, w_lo)
            s_b, c_b, q = s_b[block_of], c_b[block_of], part % BLOCK
            s = c_q[q] * s_b
            s += s_q[q] * c_b
            c = c_q[q] * c_b
            c -= s_q[q] * s_b
        else:
            s, c = sincos(part.astype(np.float64), w_hi, w_lo)
        sines[first : first + len(part)] = s
        cosines[first : first + len(part)] = c[:, : cosines.shape[1]]


class _Writer:
    """Puts computed rows (absolute positions ``lo .. hi``) into the targets that hold them."""

    def __init__(self, edges: list[int], targets: Sequence[Target]) -> None:
        self.edges = edges
        self.targets = targets

    def pieces(self, lo: int, hi: int) -> list[tuple[int, int, Target, slice]]:
        """``(piece_lo, piece_hi, target, rows in the target)`` covering ``lo .. hi``."""
        out = []
        index = bisect.bisect_right(self.edges, lo) - 1
        while lo < hi:
            first, last = self.edges[index], self.edges[index + 1]
            end = min(hi, last)
            out.append((lo, end, self.targets[index], slice(lo - first, end - first)))
            lo, index = end, index + 1
        return out


def _fill_directly(
    start: int, stop: int, w_hi: Float64Array, w_lo: Float64Array, writer: _Writer
) -> None:
    """One exact sine and cosine per entry: for widths too large for angle addition."""
    rows = max(1, CHUNK_ELEMENTS // w_hi.shape[0])
    for first in range(start, stop, rows):
        last = min(first + rows, stop)
        s, c = sincos(np.arange(first, last, dtype=np.float64), w_hi, w_lo)
        for lo, hi, (sines, cosines), where in writer.pieces(first, last):
            sines[where] = s[lo - first : hi - first]
            cosines[where] = c[lo - first : hi - first, : cosines.shape[1]]


def _fill_by_blocks(
    start: int, stop: int, w_hi: Float64Array, w_lo: Float64Array, writer: _Writer
) -> None:
    """Rows ``start .. stop`` by angle addition: position ``p = B*b + q`` (``B`` = 64) has
    ``sin(pw) = sin(Bbw) cos(qw) + cos(Bbw) sin(qw)`` and ``cos(pw) = cos(Bbw) cos(qw) -
    sin(Bbw) sin(qw)``, with both angles exact. Only ``(rows/B + B) * pairs`` sines and
    cosines are computed instead of ``rows * pairs``; each entry costs two products and a
    sum, within 3e-16 of the exact value. Narrow tables take many blocks per step, so the
    number of steps follows the elements, not the rows."""
    first_block, last_block = start // BLOCK, (stop - 1) // BLOCK
    q_lo = start - first_block * BLOCK if first_block == last_block else 0
    q_hi = stop - last_block * BLOCK if first_block == last_block else BLOCK
    s_q, c_q = sincos(np.arange(q_lo, q_hi, dtype=np.float64), w_hi, w_lo)
    blocks = np.arange(first_block, last_block + 1, dtype=np.float64) * BLOCK
    s_b, c_b = sincos(blocks, w_hi, w_lo)
    pairs = w_hi.shape[0]
    group = max(1, CHUNK_ELEMENTS // ((q_hi - q_lo) * pairs))
    for j in range(0, len(blocks), group):
        s_j, c_j = s_b[j : j + group, None, :], c_b[j : j + group, None, :]
        sines = c_q * s_j
        sines += s_q * c_j
        cosines = c_q * c_j
        cosines -= s_q * s_j
        origin = (first_block + j) * BLOCK + q_lo  # the position of the step's first row
        sines, cosines = sines.reshape(-1, pairs), cosines.reshape(-1, pairs)
        lo, hi = max(start, origin), min(stop, origin + len(sines))
        for a, b, (to_sines, to_cosines), where in writer.pieces(lo, hi):
            to_sines[where] = sines[a - origin : b - origin]
            to_cosines[where] = cosines[a - origin : b - origin, : to_cosines.shape[1]]


def _spans(start: int, stop: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive row ranges covering ``start .. stop``, cut at block edges."""
    edges = [start + (stop - start) * k // parts for k in range(parts + 1)]
    edges[1:-1] = [max(start, min(stop, e - e % BLOCK)) for e in edges[1:-1]]
    return [(a, b) for a, b in itertools.pairwise(edges) if a < b]


_WORKERS: Final = min(cores.available(), 8)
# Threads for large fills: numpy releases the GIL, so they use every core. (Its threads
# start on first use.)
_POOL: Final = ThreadPoolExecutor(_WORKERS, thread_name_prefix="pe-fill")


def in_parallel(jobs: Sequence[Callable[[], None]]) -> None:
    """Run ``jobs`` on the fill threads (one on the caller's), and wait for them all."""
    if len(jobs) == 1:
        jobs[0]()
        return
    for future in [_POOL.submit(job) for job in jobs]:
        future.result()


def row_spans(rows: int, width: int) -> list[tuple[int, int]]:
    """``rows`` rows of ``width`` numbers cut into one range per fill thread when they are
    many enough to be worth it, else one."""
    parts = _WORKERS if rows * width >= _PARALLEL_ELEMENTS else 1
    return _spans(0, rows, parts)
