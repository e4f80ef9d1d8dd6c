"""M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V): position ids of three axes (temporal,
height, width), each frequency pair turned by one of them.

``mrope_section`` says how many pairs each axis takes. transformers'
``apply_multimodal_rotary_pos_emb`` (``models/qwen2_vl/modeling_qwen2_vl.py``) splits cos and
sin by the sections, in order (pairs ``0 .. s_t - 1`` take the temporal axis, the next
``s_h`` the height, the last ``s_w`` the width); Qwen3-VL's ``apply_interleaved_mrope``
(``models/qwen3_vl/modeling_qwen3_vl.py``) interleaves them: pair ``k`` takes the height
where ``k % 3 == 1`` and ``k < 3 s_h``, the width where ``k % 3 == 2`` and ``k < 3 s_w``,
else the temporal axis. Each pair's cos and sin are those of the table's row at its axis's
position, so rows at three-axis ids are assembled from the rows of each axis, bit for bit.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from service.encodings import rotary
from service.encodings.registry import Rows
from service.encodings.rotary import RotaryKey
from service.errors import InvalidParameter

AXES = 3


def check(sections: tuple[int, ...], pairs: int) -> None:
    """Three sections of positive pair counts, which cover the rotary pairs."""
    if len(sections) != AXES or min(sections) < 1:
        raise InvalidParameter("mrope_section", "must be three positive pair counts (t, h, w)")
    if sum(sections) != pairs:
        raise InvalidParameter(
            "mrope_section",
            f"sums to {sum(sections)} pairs; the rotary dimension has {pairs} (rotary_dim / 2)",
        )


def axes(key: RotaryKey) -> NDArray[np.intp]:
    """Each pair's axis: 0 temporal, 1 height, 2 width."""
    return pair_axes(key.mrope_section, key.mrope_interleaved, key.pairs)


def pair_axes(sections: tuple[int, ...], interleaved: bool, pairs: int) -> NDArray[np.intp]:
    """Each of ``pairs`` pairs' axis (0 temporal, 1 height, 2 width) by ``sections``."""
    if not interleaved:
        return np.repeat(np.arange(AXES), sections).astype(np.intp)
    k = np.arange(pairs)
    chosen = np.zeros(pairs, dtype=np.intp)
    for axis in (1, 2):
        chosen[(k % 3 == axis) & (k < 3 * sections[axis])] = axis
    return chosen


def columns(key: RotaryKey, pairs: NDArray[np.bool_]) -> NDArray[np.intp]:
    """The columns of a row (cos, then sin) that hold the chosen pairs' values."""
    k = np.flatnonzero(pairs)
    members = (k, k + key.pairs) if key.convention == "half" else (2 * k, 2 * k + 1)
    cos = np.concatenate(members)
    return np.concatenate([cos, cos + key.rotary_dim]).astype(np.intp)


def assemble(
    chosen: NDArray[np.intp],
    cos: NDArray[np.floating],
    sin: NDArray[np.floating],
    index: NDArray[np.intp],
) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
    """Each pair's cos and sin, ``(..., pairs)``, at its axis's row: ``cos`` and ``sin`` are
    rows ``(rows, pairs)``, ``index`` ``(3, ...)`` the rows of each axis, ``chosen`` each
    pair's axis."""
    out = cos[index[0]], sin[index[0]]
    for axis in (1, 2):
        where = chosen == axis
        for half, values in zip(out, (cos, sin), strict=True):
            half[..., where] = values[index[axis]][..., where]
    return out


def at(key: RotaryKey, ids: NDArray[np.int64]) -> Rows:
    """The rows at position ids ``(N,)`` (one axis: the table's rows), or ``(3, N)`` (each
    pair at its axis's position, as the models assemble them)."""
    if ids.ndim == 1:
        return rotary.take(key, ids)
    rows = [rotary.take(key, ids[axis]) for axis in range(AXES)]
    chosen = axes(key)
    out = rows[0]
    for axis in (1, 2):
        where = columns(key, chosen == axis)
        out[:, where] = rows[axis][:, where]
    return out
