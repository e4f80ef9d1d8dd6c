"""The additive apply kernel: ``X * scale + PE[positions]`` for an embedding batch, in numpy
only. The rows of ``PE`` come from the caller (any additive family's table); this module
knows batches, positions and arithmetic, not how the rows are computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.encodings.registry import DType, joined
from service.errors import InvalidInput, InvalidParameter

# Rows gathered at once for a batch with per-sequence position ids (elements).
_GATHER_ELEMENTS = 1 << 20


def _float_kind(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" and dtype.itemsize in (2, 4, 8)


def check_batch(
    embeddings: NDArray[Any], position_ids: NDArray[Any] | None = None
) -> NDArray[np.int64] | None:
    """Validate an embedding batch ``(L, d)`` or ``(batch, L, d)`` of float16/32/64 and its
    optional non-negative integer ``position_ids`` of shape ``(L,)`` or ``(batch, L)``.

    Returns the position ids as ``int64`` (or ``None``); raises :class:`InvalidInput`
    naming ``embeddings`` or ``position_ids``.
    """
    if not _float_kind(embeddings.dtype):
        raise InvalidInput(
            "embeddings", f"must be float16, float32 or float64, not {embeddings.dtype}"
        )
    if embeddings.ndim not in (2, 3):
        raise InvalidInput(
            "embeddings",
            f"must be 2-D (L, d_model) or 3-D (batch, L, d_model), not {embeddings.ndim}-D",
        )
    if embeddings.size == 0:
        raise InvalidInput("embeddings", f"is empty: shape {embeddings.shape}")
    if position_ids is None:
        return None
    return check_positions(
        position_ids, embeddings.shape, [embeddings.shape[-2:-1], embeddings.shape[:-1]]
    )


def check_positions(
    position_ids: NDArray[Any], shape: tuple[int, ...], allowed: list[tuple[int, ...]]
) -> NDArray[np.int64]:
    """``position_ids`` of a batch of ``shape`` as ``int64``: integers, of one of the
    ``allowed`` shapes, non-negative; else an :class:`InvalidInput` naming them."""
    if position_ids.dtype.kind not in "iu":
        raise InvalidInput("position_ids", f"must be integers, not {position_ids.dtype}")
    if position_ids.shape not in allowed:
        raise InvalidInput(
            "position_ids",
            f"has shape {position_ids.shape}; embeddings of shape {shape} "
            f"need {' or '.join(map(str, dict.fromkeys(allowed)))}",
        )
    if position_ids.dtype.kind == "i" and position_ids.min() < 0:
        raise InvalidInput("position_ids", "must be non-negative")
    if int(position_ids.max()) > np.iinfo(np.int64).max:
        raise InvalidInput("position_ids", "are too large")
    return position_ids.astype(np.int64, copy=False)


def compute_dtype(embeddings: NDArray[Any]) -> DType:
    """The table and arithmetic dtype for a batch: float64 for float64, else float32."""
    return "float64" if embeddings.dtype.itemsize == 8 else "float32"


def apply(
    embeddings: NDArray[Any],
    table: NDArray[np.floating] | Sequence[NDArray[np.floating]],
    scale: float,
    index: NDArray[np.intp] | None = None,
    *,
    in_place: bool = False,
) -> NDArray[np.floating]:
    """``embeddings * scale + table[index]``, in the table's dtype, returned in the
    embeddings' dtype (native byte order, C order). ``table`` is one array of rows, or
    consecutive blocks of them (as the cache holds a table: they are not joined when the
    rows are in order).

    Without ``index`` the table holds exactly the batch's ``L`` rows, in order; with it,
    ``index`` of shape ``(L,)`` or ``(batch, L)`` says which table row each embedding gets.
    The batch must have passed :func:`check_batch`. With ``in_place``, a writable C-order
    batch already in the table's dtype is overwritten with the result and returned.
    Raises :class:`InvalidInput` if the batch holds NaN or infinity, or
    :class:`InvalidParameter` if the result overflows its dtype.
    """
    parts = [table] if isinstance(table, np.ndarray) else list(table)
    reuse = (
        in_place
        and embeddings.dtype == parts[0].dtype
        and embeddings.flags.writeable
        and embeddings.flags.c_contiguous
    )
    with np.errstate(over="ignore", invalid="ignore"):  # checked below, with a better message
        out = np.multiply(
            embeddings, scale, out=embeddings if reuse else None, dtype=parts[0].dtype, order="C"
        )
        return _add_rows(out, embeddings, parts, index, reuse)


@dataclass(frozen=True, slots=True)
class Additive:
    """The kernel ``X * scale + PE[positions]``; ``scale`` defaults to ``sqrt(d_model)``."""

    scale: float | None = None

    def check(
        self, embeddings: NDArray[Any], position_ids: NDArray[Any] | None
    ) -> NDArray[np.int64] | None:
        return check_batch(embeddings, position_ids)

    def dtype(self, embeddings: NDArray[Any]) -> DType:
        return compute_dtype(embeddings)

    def __call__(
        self,
        embeddings: NDArray[Any],
        table: Sequence[NDArray[np.floating]],
        index: NDArray[np.intp] | None,
        *,
        in_place: bool,
    ) -> NDArray[np.floating]:
        return apply(embeddings, table, self.used(embeddings), index, in_place=in_place)

    def used(self, embeddings: NDArray[Any]) -> float:
        """The scale the batch is multiplied by: given, or ``sqrt(d_model)``."""
        return math.sqrt(embeddings.shape[-1]) if self.scale is None else self.scale

    def stated(self, embeddings: NDArray[Any]) -> dict[str, Any]:
        return {"scale": self.used(embeddings)}


def _add_rows(
    out: NDArray[np.floating],
    embeddings: NDArray[Any],
    parts: list[NDArray[np.floating]],
    index: NDArray[np.intp] | None,
    overwritten: bool,
) -> NDArray[np.floating]:
    if index is None:  # block by block: the rows are never joined
        at = 0
        for part in parts:
            out[..., at : at + len(part), :] += part
            at += len(part)
    else:
        table = joined(parts)
        if index.ndim == 1 or embeddings.ndim == 2:
            out += table[index]
        else:  # sequences in chunks: the gathered rows stay near _GATHER_ELEMENTS
            step = max(1, _GATHER_ELEMENTS // (index.shape[1] * out.shape[-1]))
            for first in range(0, len(out), step):
                out[first : first + step] += table[index[first : first + step]]
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
        raise InvalidInput(
            "embeddings",
            f"hold NaN or infinity, or the result overflows {result.dtype}, first at {index}",
        )
    if not np.isfinite(embeddings).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(embeddings))[0])
        raise InvalidInput("embeddings", f"hold NaN or infinity, first at {index}")
    if not np.isfinite(result).all():
        raise InvalidParameter(
            "scale", f"the result overflows {result.dtype}: lower scale or use float64"
        )
