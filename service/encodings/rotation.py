"""The rotary apply kernel: queries or keys ``(..., L, head_dim)`` rotated by the cos and sin
rows of their positions, in numpy only. The rows come from the caller (the rotary family's
table: cosines, then sines); the rotated part is the first ``rotary_dim`` dimensions of a
head, the rest passes through.

For pair ``(a, b)`` at angle ``t``: ``a' = a cos t - b sin t``, ``b' = b cos t + a sin t``,
which is Hugging Face's ``q * cos + rotate_half(q) * sin`` (``half``: ``a`` is dimension
``i``, ``b`` dimension ``i + r/2``) and Meta's complex product (``interleaved``: ``a`` is
``2i``, ``b`` is ``2i + 1``), in the same order of float32 operations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import numpy as np
from numpy.typing import NDArray

from service.encodings import mrope
from service.encodings.additive import check_positions, compute_dtype
from service.encodings.registry import DType
from service.errors import InvalidInput, InvalidParameter

# Pairs rotated at once: each temporary of the arithmetic holds this many numbers (1 MiB in
# float32), small enough to stay in the processor's cache.
_CHUNK_ELEMENTS: Final = 1 << 18
MAX_BATCH_DIMS: Final = 8
# each pair's cos (or sin) in rows of the table: (rows, rotary_dim / 2)
Halves = NDArray[np.floating]
# cos and sin are rounded to float32: an attention factor read from them this close to 1 is 1
_ROUNDING: Final = 1e-4


def check_batch(
    queries: NDArray[Any], position_ids: NDArray[Any] | None
) -> NDArray[np.int64] | None:
    """Validate a batch ``(..., L, head_dim)`` of float16/32/64 (2 to ``MAX_BATCH_DIMS``
    axes) and its optional non-negative ``position_ids`` of shape ``(L,)`` or
    ``(batch, L)`` (the first axis of a batch of 3 or more axes, as Hugging Face's)."""
    if not (queries.dtype.kind == "f" and queries.dtype.itemsize in (2, 4, 8)):
        raise InvalidInput(
            "embeddings", f"must be float16, float32 or float64, not {queries.dtype}"
        )
    if not 2 <= queries.ndim <= MAX_BATCH_DIMS:
        raise InvalidInput(
            "embeddings",
            f"must have 2 to {MAX_BATCH_DIMS} axes (..., L, head_dim), not {queries.ndim}",
        )
    if queries.size == 0:
        raise InvalidInput("embeddings", f"is empty: shape {queries.shape}")
    if position_ids is None:
        return None
    allowed = [queries.shape[-2:-1]]
    if queries.ndim > 2:
        allowed.append((queries.shape[0], queries.shape[-2]))
    return check_positions(position_ids, queries.shape, allowed)


@dataclass(frozen=True, slots=True)
class Rotation:
    """The kernel: rotate the first ``rotary_dim`` dimensions of each head (half the
    table's width), pairs as the convention says."""

    convention: str = "half"
    # M-RoPE: the pairs each axis of three-axis position_ids turns (:mod:`.mrope`)
    sections: tuple[int, ...] = ()
    interleaved: bool = False

    def check(
        self, embeddings: NDArray[Any], position_ids: NDArray[Any] | None
    ) -> NDArray[np.int64] | None:
        if not self.sections or position_ids is None:
            return check_batch(embeddings, position_ids)
        check_batch(embeddings, None)
        allowed: list[tuple[int, ...]] = [(mrope.AXES, embeddings.shape[-2])]
        if embeddings.ndim > 2:
            allowed.append((mrope.AXES, embeddings.shape[0], embeddings.shape[-2]))
        return check_positions(position_ids, embeddings.shape, allowed)

    def dtype(self, embeddings: NDArray[Any]) -> DType:
        return compute_dtype(embeddings)

    def stated(self, embeddings: NDArray[Any]) -> dict[str, Any]:
        return {}

    def _pairs(self, x: NDArray[Any], r: int) -> tuple[NDArray[Any], NDArray[Any]]:
        if self.convention == "half":
            return x[..., : r // 2], x[..., r // 2 : r]
        return x[..., 0:r:2], x[..., 1:r:2]

    def _halves(self, rows: NDArray[np.floating], r: int) -> tuple[Halves, Halves]:
        """Each pair's cos and sin in ``rows`` of the table: ``(rows, r/2)`` views."""
        return self._pairs(rows[:, :r], r)[0], self._pairs(rows[:, r:], r)[0]

    def _segments(
        self,
        table: Sequence[NDArray[np.floating]],
        r: int,
        index: NDArray[np.intp] | None,
        length: int,
    ) -> tuple[list[tuple[int, int, Halves, Halves]], NDArray[np.intp] | None]:
        """The cos and sin rows for runs of the batch's ``length`` positions (first, stop),
        and the index into them that is left: rows in order are the table's blocks as they
        are (views: never joined); rows by index are gathered once, then indexed per
        sequence."""
        if index is None:
            segments, start = [], 0
            for part in table:
                segments.append((start, start + len(part), *self._halves(part, r)))
                start += len(part)
            return segments, None
        halves = [self._halves(part, r) for part in table]
        cos = np.concatenate([c for c, _ in halves]) if len(halves) > 1 else halves[0][0]
        sin = np.concatenate([s for _, s in halves]) if len(halves) > 1 else halves[0][1]
        if self.sections:  # three axes: each pair's row of its axis, gathered once
            chosen = mrope.pair_axes(self.sections, self.interleaved, r // 2)
            cos, sin = mrope.assemble(chosen, cos, sin, index)
            if cos.ndim == 2:
                return [(0, length, cos, sin)], None
            rows = np.arange(cos.shape[0] * length, dtype=np.intp).reshape(-1, length)
            return [(0, length, cos.reshape(-1, r // 2), sin.reshape(-1, r // 2))], rows
        if index.ndim == 1:  # the same rows for every head
            return [(0, length, cos[index], sin[index])], None
        return [(0, length, cos, sin)], index

    def __call__(
        self,
        embeddings: NDArray[Any],
        table: Sequence[NDArray[np.floating]],
        index: NDArray[np.intp] | None,
        *,
        in_place: bool,
    ) -> NDArray[np.floating]:
        """The batch rotated, in its own dtype (native byte order, C order), computed in the
        table's (float32 for float16). Heads are rotated a chunk at a time and each chunk is
        checked before it is written, so that with ``in_place`` a writable C-order batch in
        native byte order is overwritten and returned (no copy of the batch, whatever its
        dtype), and an error can still look at what was sent. Raises :class:`InvalidInput`
        for NaN or infinity in the batch, and for a result that overflows its dtype unless
        the attention factor is what makes it overflow (:class:`InvalidParameter`
        ``scaling``)."""
        r = table[0].shape[1] // 2
        length, width = embeddings.shape[-2:]
        segments, index = self._segments(table, r, index, length)
        target = embeddings.dtype.newbyteorder("=")
        reuse = (
            in_place
            and embeddings.dtype == target
            and embeddings.flags.writeable
            and embeddings.flags.c_contiguous
        )
        out = embeddings if reuse else np.empty(embeddings.shape, target)
        source = embeddings.reshape(-1, length, width)  # a view unless not C-contiguous
        flat = out.reshape(-1, length, width)
        heads_per_sequence = len(flat) // (1 if index is None else index.shape[0])
        for start, stop, cos, sin in segments:
            for heads, positions in _chunks(len(flat), start, stop, r // 2):
                block = source[heads, positions]
                if index is None:
                    rows = slice(positions.start - start, positions.stop - start)
                    c, s = cos[None, rows], sin[None, rows]
                else:
                    first = heads.start
                    sequences = np.arange(first, first + len(block)) // heads_per_sequence
                    ids = index[sequences, positions]
                    c, s = cos[ids], sin[ids]
                # in the table's dtype (float16 in float32), converted once, a chunk at a time
                a, b = self._pairs(block.astype(cos.dtype, copy=False), r)
                with np.errstate(over="ignore", invalid="ignore"):  # checked below
                    new_a = a * c
                    new_a -= b * s
                    new_b = b * c
                    new_b += a * s
                    # rounded once to the batch's dtype, where float16 can overflow
                    new_a = new_a.astype(target, copy=False)
                    new_b = new_b.astype(target, copy=False)
                rest = block[..., r:]
                if not (_finite(new_a) and _finite(new_b) and _finite(rest)):
                    corner = (heads.start, positions.start)
                    _explain(block, (cos, sin), r, self._pairs, corner, embeddings.shape)
                out_a, out_b = self._pairs(flat[heads, positions], r)
                out_a[...] = new_a
                out_b[...] = new_b
                if not reuse and r < width:
                    flat[heads, positions, r:] = rest
        return out


def _chunks(heads: int, start: int, stop: int, pairs: int) -> Iterator[tuple[slice, slice]]:
    """Blocks of heads at positions ``start .. stop-1``, or of one head's positions when a
    head alone is larger, of about ``_CHUNK_ELEMENTS`` pairs each: the arithmetic's
    temporaries stay near that size (and in the processor's cache) whatever the batch's
    shape, a single long sequence too."""
    per_head = (stop - start) * pairs
    if per_head <= _CHUNK_ELEMENTS:
        step = _CHUNK_ELEMENTS // per_head
        for first in range(0, heads, step):
            yield slice(first, first + step), slice(start, stop)
        return
    step = max(1, _CHUNK_ELEMENTS // pairs)
    for head in range(heads):
        for first in range(start, stop, step):
            yield slice(head, head + 1), slice(first, min(first + step, stop))


def _finite(values: NDArray[Any]) -> bool:
    return bool(np.isfinite(values).all())


def _explain(
    block: NDArray[Any],
    halves: tuple[Halves, Halves],
    r: int,
    pairs: Callable[[NDArray[Any], int], tuple[NDArray[Any], NDArray[Any]]],
    corner: tuple[int, int],
    shape: tuple[int, ...],
) -> NoReturn:
    """Why a chunk (``block``: heads and positions from ``corner`` of a batch of ``shape``,
    as sent) has a result that is not finite. A problem names what the client sent: the
    embeddings, or the scaling whose attention factor multiplies cos and sin (given as
    attention_factor or derived from its parameters: the kernel cannot tell which, and the
    scaling was given either way)."""
    sent = np.isfinite(block)
    if not sent.all():
        head, position, dim = (int(i) for i in np.argwhere(~sent)[0])
        heads = np.unravel_index(corner[0] + head, shape[:-2])
        where = (*(int(i) for i in heads), corner[1] + position, dim)
        raise InvalidInput("embeddings", f"hold NaN or infinity, first at {where}")
    dtype = block.dtype.newbyteorder("=")
    largest = float(np.finfo(dtype).max)
    a, b = pairs(block, r)
    # a rotation keeps a pair's magnitude sqrt(a^2 + b^2), and at some angle puts all of it
    # in one member: times the attention factor, that is what must fit in the dtype
    magnitude = float(np.hypot(a, b, dtype=np.float64).max())
    attention = math.hypot(float(halves[0][0, 0]), float(halves[1][0, 0]))  # cos^2 + sin^2 = 1
    fits = {"float16": "send them as float32", "float32": "send them as float64"}
    remedy = fits.get(dtype.name, "scale them down")
    if attention > 1 + _ROUNDING and magnitude <= largest:
        raise InvalidParameter(
            "scaling",
            f"its attention factor {attention:.6g} (attention_factor, or derived from its "
            f"parameters) multiplies cos and sin; rotated by them, the embeddings (pairs of "
            f"magnitude up to {magnitude:.6g}) overflow {dtype} (largest {largest:.6g}): "
            f"{remedy}, or use a smaller attention factor",
        )
    raise InvalidInput(
        "embeddings",
        f"rotated, they overflow {dtype} (largest {largest:.6g}): a rotation can move all "
        f"of a pair's magnitude sqrt(a^2 + b^2), here up to {magnitude:.6g}, into one of "
        f"its members; {remedy}",
    )
