"""The numerical core: sinusoidal positional-encoding tables, in numpy only.

    PE[pos, 2i]   = sin(pos / base^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / base^(2i / d_model))

Column ``k`` uses ``i = k // 2``, so an odd ``d_model`` is well defined (its last column is
a sine). Every entry is computed in float64 from an angle that is exact to about 2^-100
relative, then rounded once to the output dtype: float64 tables are within a few units
in the last place of the true value even at position 10^6, and float32 tables are the
correctly rounded value almost everywhere.
"""

from __future__ import annotations

import decimal
import functools
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.errors import InvalidParameter

Layout = Literal["interleaved", "split"]
DType = Literal["float32", "float64", "float16"]
LAYOUTS: Final[tuple[Layout, ...]] = get_args(Layout)
DTYPES: Final[tuple[DType, ...]] = get_args(DType)
DEFAULT_BASE: Final = 10000.0

Float64Array = NDArray[np.float64]
_SPLITTER: Final = 134217729.0  # 2^27 + 1: Dekker's split into two 26-bit halves
_EXACT_POSITIONS: Final = 1 << 27  # below this a position is its own high half
_CHUNK_ELEMENTS: Final = 1 << 16  # float64 temporaries stay in cache and memory stays flat
_BLOCK: Final = 64  # positions per exact base angle in _fill_by_blocks
_BLOCKED_PAIRS: Final = 1 << 14  # wider tables: the per-block offsets would be too large
_PARALLEL_ELEMENTS: Final = 1 << 20  # smaller tables are not worth a thread hand-off


def _split(x: Float64Array) -> tuple[Float64Array, Float64Array]:
    """Dekker's split: ``x == hi + lo`` exactly, each half with at most 26 significant bits."""
    c = _SPLITTER * x
    hi = c - (c - x)
    return hi, x - hi


def _dd_mul(
    a_hi: Float64Array, a_lo: Float64Array, b_hi: float, b_lo: float
) -> tuple[Float64Array, Float64Array]:
    """Double-double product ``(a_hi + a_lo) * (b_hi + b_lo)``, relative error ~2^-104."""
    p = a_hi * b_hi
    ah, al = _split(a_hi)
    bh = _SPLITTER * b_hi
    bh -= bh - b_hi
    bl = b_hi - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    e += a_hi * b_lo + a_lo * b_hi
    hi = p + e
    return hi, e - (hi - p)


def _decimal_pair(value: decimal.Decimal) -> tuple[float, float]:
    hi = float(value)
    return hi, float(value - decimal.Decimal(hi))


@functools.lru_cache(maxsize=64)
def frequencies(d_model: int, base: float) -> tuple[Float64Array, Float64Array]:
    """The angular frequencies ``base^(-2i/d_model)`` for ``i < ceil(d_model/2)``, as
    double-double ``(hi, lo)`` arrays (read-only) whose sum is exact to ~2^-100.

    Float64 alone is not enough: at position 10^6 one ulp of the frequency moves the angle
    by 1e-10. ``base^(-2i/d) = r^i`` with ``r = base^(-2/d)``, so only the powers
    ``r^(2^k)`` are computed in decimal arithmetic and the rest by vectorized squaring.
    """
    pairs = (d_model + 1) // 2
    index = np.arange(pairs)
    hi = np.ones(pairs)
    lo = np.zeros(pairs)
    context = decimal.Context(prec=40)
    log_base = context.ln(decimal.Decimal(base))
    bit = 0
    while (1 << bit) < pairs:
        exponent = context.divide(decimal.Decimal(-(2 << bit)), decimal.Decimal(d_model))
        r_hi, r_lo = _decimal_pair(context.exp(context.multiply(exponent, log_base)))
        use = (index >> bit) & 1 == 1
        p_hi, p_lo = _dd_mul(hi[use], lo[use], r_hi, r_lo)
        hi[use], lo[use] = p_hi, p_lo
        bit += 1
    hi.flags.writeable = False
    lo.flags.writeable = False
    return hi, lo


def _sincos(
    positions: Float64Array, w_hi: Float64Array, w_lo: Float64Array
) -> tuple[Float64Array, Float64Array]:
    """``sin`` and ``cos`` of ``positions[:, None] * (w_hi + w_lo)``, each computed once.

    The angle is carried as ``big + small``, ``big = fl(pos * w_hi)`` and ``small`` its
    rounding error (Dekker's exact product) plus ``pos * w_lo``; then
    ``sin(big + small) = sin(big) + small*cos(big)`` to within ``small^2 < 1e-19``.
    """
    pos = positions[:, None]
    big = pos * w_hi
    wh, wl = _split(w_hi)
    if positions[-1] < _EXACT_POSITIONS:
        small = (pos * wh - big) + pos * wl
    else:
        ph, pl = _split(pos)
        small = (((ph * wh - big) + ph * wl) + pl * wh) + pl * wl
    small += pos * w_lo
    s = np.sin(big)
    c = np.cos(big)
    sin = s + small * c
    small *= s
    c -= small
    return sin, c


def encoding(
    start: int,
    stop: int,
    d_model: int,
    base: float = DEFAULT_BASE,
    layout: Layout = "interleaved",
    dtype: DType = "float32",
) -> NDArray[np.floating]:
    """Rows ``start .. stop-1`` of the positional-encoding table, shape
    ``(stop - start, d_model)``, C order, in ``dtype``.

    The rows do not depend on the table's length, so a table of ``max_len`` rows is
    ``encoding(0, max_len, ...)``; any slice of it can be computed on its own and is
    bit-identical to the same rows of the whole table.
    """
    _check(start, stop, d_model, base, layout, dtype)
    w_hi, w_lo = frequencies(d_model, base)
    pairs = w_hi.shape[0]
    out = np.empty((stop - start, d_model), dtype=dtype)
    if layout == "interleaved":
        sin_cols, cos_cols = out[:, 0::2], out[:, 1::2]
    else:
        sin_cols, cos_cols = out[:, :pairs], out[:, pairs:]
    fill = _fill_by_blocks if pairs <= _BLOCKED_PAIRS else _fill_directly
    spans = _spans(start, stop, parts=_workers() if out.size >= _PARALLEL_ELEMENTS else 1)
    work = [functools.partial(fill, a, b, start, w_hi, w_lo, sin_cols, cos_cols) for a, b in spans]
    if len(work) == 1:
        work[0]()
    else:
        for future in [_pool().submit(job) for job in work]:
            future.result()
    return out


def similarity(
    start: int, stop: int, step: int, d_model: int, base: float = DEFAULT_BASE
) -> Float64Array:
    """The dot products ``PE[p] . PE[q]`` for ``p, q`` in ``range(start, stop, step)``, in
    float64 from exact angles: a square, symmetric matrix. The layout only orders the
    columns, so it does not change them.

    A sine-cosine pair contributes ``sin(pw)sin(qw) + cos(pw)cos(qw) = cos((p-q)w)``, so
    the sum over pairs depends on ``p - q`` alone and is computed once per distance; an odd
    ``d_model``'s last column (a sine without its cosine) adds ``sin(pw)sin(qw)``.
    """
    _check(start, stop, d_model, base, "interleaved", "float64")
    if step < 1:
        raise InvalidParameter("step", "must be a positive integer")
    w_hi, w_lo = frequencies(d_model, base)
    pairs = d_model // 2
    count = len(range(start, stop, step))
    by_distance = np.zeros(count)
    if pairs:
        rows = max(1, _CHUNK_ELEMENTS // pairs)
        for first in range(0, count, rows):
            distances = np.arange(first, min(first + rows, count), dtype=np.float64) * step
            _, c = _sincos(distances, w_hi[:pairs], w_lo[:pairs])
            by_distance[first : first + len(distances)] = c.sum(axis=1)
    # row j is by_distance[|j - l|] for every l: a window onto the mirrored distances
    mirrored = np.concatenate([by_distance[::-1], by_distance[1:]])
    matrix = np.lib.stride_tricks.sliding_window_view(mirrored, count)[::-1]
    if d_model % 2 == 0:
        return np.ascontiguousarray(matrix)
    positions = np.arange(start, stop, step, dtype=np.float64)
    s, _ = _sincos(positions, w_hi[pairs:], w_lo[pairs:])
    return matrix + s * s.T


def _spans(start: int, stop: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive row ranges covering ``start .. stop``, cut at block edges."""
    edges = [start + (stop - start) * k // parts for k in range(parts + 1)]
    edges[1:-1] = [max(start, min(stop, e - e % _BLOCK)) for e in edges[1:-1]]
    return [(a, b) for a, b in itertools.pairwise(edges) if a < b]


def _fill_directly(
    start: int,
    stop: int,
    origin: int,
    w_hi: Float64Array,
    w_lo: Float64Array,
    sin_cols: NDArray[np.floating],
    cos_cols: NDArray[np.floating],
) -> None:
    """Rows ``start .. stop`` (of a table whose first row is ``origin``): one exact sine
    and cosine per angle. For widths too large for :func:`_fill_by_blocks`."""
    cosines = cos_cols.shape[1]
    rows = max(1, _CHUNK_ELEMENTS // w_hi.shape[0])
    for first in range(start, stop, rows):
        last = min(first + rows, stop)
        s, c = _sincos(np.arange(first, last, dtype=np.float64), w_hi, w_lo)
        sin_cols[first - origin : last - origin] = s
        cos_cols[first - origin : last - origin] = c[:, :cosines]


def _fill_by_blocks(
    start: int,
    stop: int,
    origin: int,
    w_hi: Float64Array,
    w_lo: Float64Array,
    sin_cols: NDArray[np.floating],
    cos_cols: NDArray[np.floating],
) -> None:
    """Rows ``start .. stop`` by angle addition: position ``p = B*b + q`` (``B`` = 64) has
    ``sin(pw) = sin(Bbw) cos(qw) + cos(Bbw) sin(qw)`` and ``cos(pw) = cos(Bbw) cos(qw) -
    sin(Bbw) sin(qw)``, with both angles exact. Only ``(rows/B + B) * pairs`` sines and
    cosines are computed instead of ``rows * pairs``; each entry costs two products and a
    sum, within 3e-16 of the exact value. Blocks are aligned to absolute positions, so an
    entry's bits depend on its position only, never on the rows requested with it."""
    cosines = cos_cols.shape[1]
    first_block, last_block = start // _BLOCK, (stop - 1) // _BLOCK
    q_lo = start - first_block * _BLOCK if first_block == last_block else 0
    q_hi = stop - last_block * _BLOCK if first_block == last_block else _BLOCK
    s_q, c_q = _sincos(np.arange(q_lo, q_hi, dtype=np.float64), w_hi, w_lo)
    blocks = np.arange(first_block, last_block + 1, dtype=np.float64) * _BLOCK
    s_b, c_b = _sincos(blocks, w_hi, w_lo)
    left = np.empty_like(s_q)
    right = np.empty_like(s_q)
    for j in range(len(blocks)):
        block = (first_block + j) * _BLOCK
        lo, hi = max(start, block), min(stop, block + _BLOCK)
        q = slice(lo - block - q_lo, hi - block - q_lo)
        rows = slice(lo - origin, hi - origin)
        a, b = left[: hi - lo], right[: hi - lo]
        np.multiply(c_q[q], s_b[j], out=a)
        np.multiply(s_q[q], c_b[j], out=b)
        np.add(a, b, out=sin_cols[rows])
        np.multiply(c_q[q], c_b[j], out=a)
        np.multiply(s_q[q], s_b[j], out=b)
        np.subtract(a[:, :cosines], b[:, :cosines], out=cos_cols[rows])


@functools.cache
def _workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """Threads for large tables: numpy releases the GIL, so they use every core."""
    return ThreadPoolExecutor(_workers(), thread_name_prefix="pe-core")


def _check(start: int, stop: int, d_model: int, base: float, layout: str, dtype: str) -> None:
    if d_model < 1:
        raise InvalidParameter("d_model", "must be a positive integer")
    if not 0 <= start < stop:
        raise InvalidParameter("stop", "rows must satisfy 0 <= start < stop")
    if not (np.isfinite(base) and base > 1):
        raise InvalidParameter("base", "must be a finite number greater than 1")
    if layout not in LAYOUTS:
        raise InvalidParameter("layout", f"must be one of {', '.join(LAYOUTS)}")
    if dtype not in DTYPES:
        raise InvalidParameter("dtype", f"must be one of {', '.join(DTYPES)}")


def _float_kind(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" and dtype.itemsize in (2, 4, 8)


def check_batch(
    embeddings: NDArray[Any], position_ids: NDArray[Any] | None = None
) -> NDArray[np.intp] | None:
    """Validate an embedding batch ``(L, d)`` or ``(batch, L, d)`` of float16/32/64 and its
    optional non-negative integer ``position_ids`` of shape ``(L,)`` or ``(batch, L)``.

    Returns the position ids as ``intp`` (or ``None``); raises :class:`InvalidParameter`
    naming ``embeddings`` or ``position_ids``.
    """
    if not _float_kind(embeddings.dtype):
        raise InvalidParameter(
            "embeddings", f"must be float16, float32 or float64, not {embeddings.dtype}", "body"
        )
    if embeddings.ndim not in (2, 3):
        raise InvalidParameter(
            "embeddings",
            f"must be 2-D (L, d_model) or 3-D (batch, L, d_model), not {embeddings.ndim}-D",
            "body",
        )
    if embeddings.size == 0:
        raise InvalidParameter("embeddings", f"is empty: shape {embeddings.shape}", "body")
    if position_ids is None:
        return None
    if position_ids.dtype.kind not in "iu":
        raise InvalidParameter(
            "position_ids", f"must be integers, not {position_ids.dtype}", "body"
        )
    allowed = [embeddings.shape[-2:-1], embeddings.shape[:-1]]
    if position_ids.shape not in allowed:
        raise InvalidParameter(
            "position_ids",
            f"has shape {position_ids.shape}; embeddings of shape {embeddings.shape} "
            f"need {' or '.join(map(str, dict.fromkeys(allowed)))}",
            "body",
        )
    if position_ids.dtype.kind == "i" and position_ids.min() < 0:
        raise InvalidParameter("position_ids", "must be non-negative", "body")
    if int(position_ids.max()) >= np.iinfo(np.intp).max:
        raise InvalidParameter("position_ids", "are too large", "body")
    return position_ids.astype(np.intp, copy=False)


def rows_needed(
    embeddings: NDArray[Any], offset: int, position_ids: NDArray[np.intp] | None
) -> int:
    """How many table rows ``apply`` reads: one past the largest position."""
    if position_ids is None:
        return offset + int(embeddings.shape[-2])
    return int(position_ids.max()) + 1


def compute_dtype(embeddings: NDArray[Any]) -> DType:
    """The table and arithmetic dtype for a batch: float64 for float64, else float32."""
    return "float64" if embeddings.dtype.itemsize == 8 else "float32"


def apply(
    embeddings: NDArray[Any],
    table: NDArray[np.floating],
    scale: float,
    offset: int = 0,
    position_ids: NDArray[np.intp] | None = None,
    *,
    in_place: bool = False,
) -> NDArray[np.floating]:
    """``embeddings * scale + table[positions]``, in the table's dtype, returned in the
    embeddings' dtype (native byte order, C order).

    Positions are ``offset .. offset+L-1``, or ``position_ids`` of shape ``(L,)`` or
    ``(batch, L)``. The batch must have passed :func:`check_batch`, and ``table`` must have
    :func:`rows_needed` rows and ``d_model`` columns. With ``in_place``, a writable C-order
    batch already in the table's dtype is overwritten with the result and returned.
    Raises :class:`InvalidParameter` if the batch holds NaN or infinity, or the result
    overflows its dtype.
    """
    reuse = (
        in_place
        and embeddings.dtype == table.dtype
        and embeddings.flags.writeable
        and embeddings.flags.c_contiguous
    )
    with np.errstate(over="ignore", invalid="ignore"):  # checked below, with a better message
        out = np.multiply(
            embeddings, scale, out=embeddings if reuse else None, dtype=table.dtype, order="C"
        )
        return _add_rows(out, embeddings, table, offset, position_ids, reuse)


def _add_rows(
    out: NDArray[np.floating],
    embeddings: NDArray[Any],
    table: NDArray[np.floating],
    offset: int,
    position_ids: NDArray[np.intp] | None,
    overwritten: bool,
) -> NDArray[np.floating]:
    length = embeddings.shape[-2]
    if position_ids is None:
        out += table[offset : offset + length]
    elif position_ids.ndim == 1 or embeddings.ndim == 2:
        out += table[position_ids]
    else:  # one sequence at a time: the working copy stays (L, d_model)
        for row, ids in zip(out, position_ids, strict=True):
            row += table[ids]
    target = embeddings.dtype.newbyteorder("=")
    result: NDArray[np.floating] = out if out.dtype == target else out.astype(target)
    if not np.isfinite(np.add.reduce(result, axis=None, dtype=np.float64)):
        _explain_non_finite(embeddings, result, overwritten)
    return result


def _explain_non_finite(
    embeddings: NDArray[Any], result: NDArray[np.floating], overwritten: bool
) -> None:
    # The sum above can overflow float64 on finite values; only raise on a real NaN or inf.
    if overwritten and not np.isfinite(result).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(result))[0])
        raise InvalidParameter(
            "embeddings",
            f"hold NaN or infinity, or the result overflows {result.dtype}, first at {index}",
            "body",
        )
    if not np.isfinite(embeddings).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(embeddings))[0])
        raise InvalidParameter("embeddings", f"hold NaN or infinity, first at {index}", "body")
    if not np.isfinite(result).all():
        raise InvalidParameter(
            "scale", f"the result overflows {result.dtype}: lower scale or use float64", "query"
        )
