"""M-RoPE's position ids from a sequence's layout: the ``(3, L)`` temporal, height and width
ids of its tokens, and the rope delta, as transformers 5.23's ``get_rope_index`` computes
them (``Qwen2VLModel.get_rope_index`` and ``get_vision_position_ids``,
``models/qwen2_vl/modeling_qwen2_vl.py``; ``Qwen2_5_VLModel``'s,
``models/qwen2_5_vl/modeling_qwen2_5_vl.py``; ``Qwen3VLModel``'s,
``models/qwen3_vl/modeling_qwen3_vl.py``, which GLM-4V's repeats).

A sequence is runs of text tokens and of one image's or one video's tokens (a grid of
``t × h × w`` patches, ``h`` and ``w`` multiples of the merge size ``m``; its tokens are the
``t × h/m × w/m`` merged patches, time first, then height, then width). From position
``p = 0``:

- ``n`` text tokens (vision_start, vision_end and a Qwen3-VL frame's timestamp among them)
  take ``p .. p + n - 1`` on every axis, and ``p`` moves on by ``n``;
- a grid's token ``(k, i, j)`` takes ``(p + time(k), p + i, p + j)``, and ``p`` moves on by
  ``max(h, w) / m``, whatever ``t`` (transformers 5.23; the text after a long video can
  share its later time ids). ``time(k)`` is ``k`` (Qwen2-VL, and every image);
  Qwen2.5-VL's video: ``trunc(k * (tokens_per_second * seconds_per_grid))`` in float32, as
  its processor's ``second_per_grid_ts`` tensor makes it. Qwen3-VL (and GLM-4V) takes a
  video as its frames, each a grid of one, with ``frame_text`` text tokens (its timestamp
  and vision markers) between them.

The rope delta is the largest id plus one less the sequence's length: generation's next
token takes ``L + delta`` on every axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

Model = Literal["qwen2_vl", "qwen2_5_vl", "qwen3_vl"]
MODELS: Final[tuple[Model, ...]] = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
AXES: Final = 3


@dataclass(frozen=True, slots=True)
class Run:
    """``text`` tokens, or the tokens of one image or video of ``grid`` (t, h, w) patches."""

    kind: Literal["text", "image", "video"]
    text: int = 0
    grid: tuple[int, int, int] = (1, 1, 1)
    seconds_per_grid: float = 1.0
    frame_text: int = 0


def tokens(run: Run, merge: int, model: Model) -> int:
    """How many tokens ``run`` is in the sequence."""
    if run.kind == "text":
        return run.text
    t, h, w = run.grid
    frames = run.frame_text * (t - 1) if run.kind == "video" and model == "qwen3_vl" else 0
    return t * (h // merge) * (w // merge) + frames


def _grid(start: int, t: int, h: int, w: int, time: NDArray[np.int64]) -> NDArray[np.int64]:
    cells = t * h * w
    ids = np.empty((AXES, cells), np.int64)
    ids[0] = np.repeat(time, h * w)
    ids[1] = np.tile(np.repeat(np.arange(h, dtype=np.int64), w), t)
    ids[2] = np.tile(np.arange(w, dtype=np.int64), t * h)
    ids += start
    return ids


def _frames(start: int, t: int, h: int, w: int, text: int) -> NDArray[np.int64]:
    """Qwen3-VL's video: ``t`` frames, each a grid of one from where the last left off
    (``max(h, w)`` on), with ``text`` text tokens between frames; at once, not frame by
    frame (a long video of small frames would be millions of steps)."""
    frame, step = h * w, max(h, w)
    ids = np.empty((AXES, t, frame + text), np.int64)
    ids[:, :, :frame] = _grid(0, 1, h, w, np.zeros(1, np.int64))[:, None, :]
    ids[:, :, frame:] = step + np.arange(text, dtype=np.int64)
    ids += (start + np.arange(t, dtype=np.int64) * (step + text))[None, :, None]
    return ids.reshape(AXES, -1)[:, : t * (frame + text) - text]


def _time(run: Run, model: Model, tokens_per_second: int) -> NDArray[np.int64]:
    frames = np.arange(run.grid[0], dtype=np.int64)
    if run.kind != "video" or model != "qwen2_5_vl":
        return frames
    step = np.float32(np.float32(run.seconds_per_grid) * np.float32(tokens_per_second))
    return (frames.astype(np.float32) * step).astype(np.int64)  # .long(): toward zero


def position_ids(
    runs: Sequence[Run], merge: int, model: Model, tokens_per_second: int = 1
) -> tuple[NDArray[np.int64], int]:
    """The ``(3, L)`` position ids of the sequence ``runs`` make, and its rope delta."""
    length = sum(tokens(run, merge, model) for run in runs)
    out = np.empty((AXES, length), np.int64)
    at = start = 0

    def put(block: NDArray[np.int64]) -> None:
        nonlocal at
        out[:, at : at + block.shape[1]] = block
        at += block.shape[1]

    for run in runs:
        if run.kind == "text":
            put(
                np.broadcast_to(
                    np.arange(start, start + run.text, dtype=np.int64), (AXES, run.text)
                )
            )
            start += run.text
            continue
        t, h, w = run.grid
        h, w = h // merge, w // merge
        if run.kind == "video" and model == "qwen3_vl":
            put(_frames(start, t, h, w, run.frame_text))
            start += t * max(h, w) + (t - 1) * run.frame_text
            continue
        put(_grid(start, t, h, w, _time(run, model, tokens_per_second)))
        start += max(h, w)
    delta = int(out.max()) + 1 - length if length else 0
    return out, delta
