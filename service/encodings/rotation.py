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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.encodings.additive import check_positions, compute_dtype
from service.encodings.registry import DType, joined
from service.errors import InvalidInput, InvalidParameter

# Heads rotated at once: temporaries stay near this many elements.
_CHUNK_ELEMENTS: Final = 1 << 20
MAX_BATCH_DIMS: Final = 8


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

    def check(
        self, embeddings: NDArray[Any], position_ids: NDArray[Any] | None
    ) -> NDArray[np.int64] | None:
        return check_batch(embeddings, position_ids)

    def dtype(self, embeddings: NDArray[Any]) -> DType:
        return compute_dtype(embeddings)

    def _pairs(self, x: NDArray[Any], r: int) -> tuple[NDArray[Any], NDArray[Any]]:
        if self.convention == "half":
            return x[..., : r // 2], x[..., r // 2 : r]
        return x[..., 0:r:2], x[..., 1:r:2]

    def __call__(
        self,
        embeddings: NDArray[Any],
        table: Sequence[NDArray[np.floating]],
        index: NDArray[np.intp] | None,
        *,
        in_place: bool,
    ) -> NDArray[np.floating]:
        rows = joined(table)
        r = rows.shape[1] // 2
        n = r // 2
        cos, sin = (
            self._pairs(rows[:, :r], r)[0],
            self._pairs(rows[:, r:], r)[0],
        )  # each pair's value once: (rows, n)
        dtype = rows.dtype
        reuse = (
            in_place
            and embeddings.dtype == dtype
            and embeddings.flags.writeable
            and embeddings.flags.c_contiguous
        )
        out = embeddings if reuse else np.array(embeddings, dtype=dtype, order="C")
        length = out.shape[-2]
        flat = out.reshape(-1, length, out.shape[-1])  # a view: out is C-contiguous
        heads_per_sequence = flat.shape[0] // (
            index.shape[0] if index is not None and index.ndim == 2 else 1
        )
        step = max(1, _CHUNK_ELEMENTS // (length * n))
        with np.errstate(over="ignore", invalid="ignore"):
            for first in range(0, flat.shape[0], step):
                block = flat[first : first + step]
                if index is None:
                    c, s = cos[None], sin[None]
                elif index.ndim == 1:
                    c, s = cos[index][None], sin[index][None]
                else:
                    sequences = np.arange(first, first + len(block)) // heads_per_sequence
                    c, s = cos[index[sequences]], sin[index[sequences]]
                a, b = self._pairs(block, r)
                new_a = a * c
                new_a -= b * s
                b_c = b * c
                b_c += a * s
                a[...] = new_a
                b[...] = b_c
        target = embeddings.dtype.newbyteorder("=")
        with np.errstate(over="ignore", invalid="ignore"):  # checked here, with a better message
            result: NDArray[np.floating] = out if out.dtype == target else out.astype(target)
            finite = np.isfinite(np.add.reduce(result, axis=None, dtype=np.float64))
        if not finite:
            _explain(embeddings, result, reuse)
        return result


def _explain(embeddings: NDArray[Any], result: NDArray[np.floating], overwritten: bool) -> None:
    if not overwritten and not np.isfinite(embeddings).all():
        raise InvalidInput("embeddings", "hold NaN or infinity")
    if not np.isfinite(result).all():
        if overwritten:
            raise InvalidInput(
                "embeddings", f"hold NaN or infinity, or the result overflows {result.dtype}"
            )
        raise InvalidParameter("attention_factor", f"the result overflows {result.dtype}")
