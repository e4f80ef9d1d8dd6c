"""Multi-axis rotary embeddings of diffusion transformers (FLUX, FLUX.2, HunyuanVideo, Wan,
CogVideoX, Qwen-Image): each token has an id on every axis (FLUX: ``(0, row, col)``; a
video: ``(frame, row, col)``), and axis ``k`` turns its own ``axes_dim[k] / 2`` pairs by
that id, as diffusers 0.42.1 computes it (``models/embeddings.py::get_1d_rotary_pos_embed``
once per axis, the axes concatenated)::

    f_i  = 1 / theta^(2i / d_k)                  i < d_k / 2, per axis k
    a_i  = id_k * f_i
    cos  = [cos a_0, cos a_0, cos a_1, cos a_1, ...]      (repeat_interleave_real=True)

the axes one after the other; ``sin`` alike. ``layout=half`` gives each row's pairs as
halves instead (``[c_0 .. c_{n-1}, c_0 .. c_{n-1}]`` over the whole head, every axis's
frequencies in the first half): the rotate-half convention. Row ``t`` is the model's token
``t``: the text tokens first (with the ids the model gives text), then the grid's cells in
row-major order (the latent grid in patches: the caller applies the VAE and patch factors).

The ids reach the frequencies as the model has them: rounded to ``ids_dtype`` where the
pipeline builds them in its dtype (FLUX's ``_prepare_latent_image_ids(..., dtype)``:
bfloat16 holds the integers exactly only to 256), then float32 (``ids.float()``).

The ids are the grid's indices, but CogVideoX 1.0's rows and columns (spread by a float32
``linspace`` over a crop region, :func:`_linspace`) and Qwen-Image's (centred on the image).

``rounding=library`` is the named code's arithmetic: float64 frequencies, angles, cos and
sin rounded once to the answer's dtype for the float64 code (diffusers' FluxPosEmbed and
Flux2PosEmbed, the 2024 FLUX reference, Wan); float32 operation by operation for the rest
(``f32(arange(0, d, 2)) / d``, ``theta ** that``, ``1 / that``, the product, cos and sin,
each rounded to float32), with correctly rounded pow, cos and sin where torch's are not
(:mod:`service.encodings._library`; the conformance tests measure the entries that differ).
``rounding=exact``: cos and sin of ``id * theta^(-2i/d)`` with double-double frequencies
(:mod:`service.encodings._exact`), each entry rounded once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.arrays import POSITION_CEILING
from service.encodings import _exact, _library, kernels
from service.encodings.registry import (
    DTYPES,
    ROUNDINGS,
    Angles,
    Audit,
    AuditPath,
    Bound,
    DType,
    Family,
    Rounding,
    Rows,
    Source,
    Values,
    register,
    replacing,
)
from service.encodings.timestep import TIMESTEP_DTYPES, TimestepDType, narrowed
from service.errors import InvalidParameter

Layout = Literal["interleaved", "half"]
LAYOUTS: Final[tuple[Layout, ...]] = get_args(Layout)
# the frequencies' dtype (diffusers' freqs_dtype): the arithmetic of rounding=library
FreqsDType = Literal["float32", "float64"]
FREQS_DTYPES: Final[tuple[FreqsDType, ...]] = get_args(FreqsDType)
# an apply's: the rotation's dtype
Arithmetic = Literal["float32", "float64"]
IDS_DTYPES: Final[tuple[TimestepDType, ...]] = TIMESTEP_DTYPES
PARAMETERS: Final = ("axes_dim", "theta", "freqs_dtype", "text_tokens", "ids_dtype")
MAX_AXES: Final = 8
# exact angles are exact (double-double) up to this many radians, as sinusoidal's positions
_LARGEST_ANGLE: Final = 2.0**31
_CHUNK_ELEMENTS: Final = 1 << 16
F32 = np.float32
_LARGEST_ID: Final[Mapping[TimestepDType, float]] = {
    "float32": float(np.finfo(F32).max),
    "bfloat16": 3.3895313892515355e38,
    "float16": 65504.0,
}


@dataclass(frozen=True, slots=True)
class Preset:
    """A model's multi-axis RoPE: its sources and parameters (what it fixes), the
    parameters a client may still give (``takes``); the model's ids: for each of its axes,
    the grid axis whose index it holds (None: 0), the axis that counts text tokens (None:
    text ids are all 0), and how many axes its grid has (None: as many as ``axes_dim``);
    ``split``: a head of ``head_dim`` (default ``head``) cut into its axes, where the model
    derives them (Wan's, CogVideoX's); ``linspace``: the grid's rows and columns spread over
    the crop region of a ``base_grid``, as CogVideoX 1.0's pipeline places them;
    ``centred``: a grid axis of ``n`` cells holds ids ``-(n - n // 2) .. n // 2 - 1``
    (Qwen-Image's ``scale_rope``); ``text_after_grid``: text token ``l`` has the id
    ``m + l`` on every axis, ``m`` past the grid's largest id (Qwen-Image's); ``wide_ids``:
    integer ids promoted to float64 (Wan's ``outer(arange, freqs)``), not cast to float32;
    ``polar``: its cos and sin are ``torch.polar``'s."""

    name: str
    description: str
    sources: tuple[Source, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    takes: tuple[str, ...] = ()
    places: tuple[int | None, ...] | None = None
    text_axis: int | None = None
    split: Callable[[int], tuple[int, ...]] | None = None
    head: int = 128
    linspace: bool = False
    centred: bool = False
    wide_ids: bool = False
    text_after_grid: bool = False
    # cos and sin of the float32 angles from torch.polar (Qwen-Image's complex frequencies),
    # another kernel than torch's cos and sin (:func:`.kernels.polar`)
    polar: bool = False

    @property
    def arithmetic(self) -> str:
        """What ``rounding=library`` computes its frequencies and angles in."""
        return str(self.settings.get("freqs_dtype", DEFAULTS["freqs_dtype"]))

    @property
    def rows(self) -> str:
        """What row ``t`` of its table is."""
        text = (
            "its text tokens first, then "
            if self.text_axis is not None or self.text_after_grid
            else ""
        )
        return f"row t is the model's token t: {text}the grid's cells in the model's order"

    def grid_axes(self, axes: int) -> int:
        """The grid's axes for a model of ``axes`` axes."""
        if self.places is None:
            return axes
        return sum(place is not None for place in self.places)


DEFAULTS: Final[Mapping[str, Any]] = {
    "axes_dim": (16, 56, 56),
    "theta": 10000.0,
    "freqs_dtype": "float32",
    "text_tokens": 0,
    "ids_dtype": "float32",
    "base_grid": (),
}
_DIFFUSERS: Final = "0.42.1"
_FLUX_BFL: Final = "black-forest-labs/flux"
PRESETS: Final[Mapping[str, Preset]] = {
    preset.name: preset
    for preset in (
        Preset(
            "diffusers",
            "get_1d_rotary_pos_embed per axis (use_real, repeat_interleave_real) with its "
            "defaults (freqs_dtype float32); ids: the grid's indices; every parameter may "
            "be given",
            (
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/embeddings.py",
                    "get_1d_rotary_pos_embed",
                ),
            ),
            takes=PARAMETERS,
        ),
        Preset(
            "flux",
            "FLUX.1 in diffusers and the 2024 reference: axes 16/56/56, theta 10000, float64 "
            "frequencies and angles; ids (0, row, col), text ids 0, text first",
            (
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/transformers/transformer_flux.py",
                    "FluxPosEmbed",
                ),
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/pipelines/flux/pipeline_flux.py",
                    "FluxPipeline._prepare_latent_image_ids",
                ),
                Source(_FLUX_BFL, "1f71c43", "src/flux/math.py", "rope"),
            ),
            {"axes_dim": (16, 56, 56), "theta": 10000.0, "freqs_dtype": "float64"},
            takes=("text_tokens", "ids_dtype", "axes_dim"),
            places=(None, 0, 1),
        ),
        Preset(
            "flux-bfl",
            "FLUX.1's reference since 4343061 (2025-01-31): frequencies in the ids' dtype "
            "(float32), angles, cos and sin in float32; ids (0, row, col), text first",
            (
                Source(_FLUX_BFL, "802fb47", "src/flux/math.py", "rope"),
                Source(_FLUX_BFL, "802fb47", "src/flux/modules/layers.py", "EmbedND"),
                Source(_FLUX_BFL, "802fb47", "src/flux/sampling.py", "prepare"),
            ),
            {"axes_dim": (16, 56, 56), "theta": 10000.0, "freqs_dtype": "float32"},
            takes=("text_tokens", "axes_dim"),
            places=(None, 0, 1),
        ),
        Preset(
            "flux2",
            "FLUX.2: four axes of 32, theta 2000, float64; image ids (0, row, col, 0), text "
            "ids (0, 0, 0, l), text first",
            (
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/transformers/transformer_flux2.py",
                    "Flux2PosEmbed",
                ),
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/pipelines/flux2/pipeline_flux2.py",
                    "Flux2Pipeline._prepare_latent_ids",
                ),
            ),
            {"axes_dim": (32, 32, 32, 32), "theta": 2000.0, "freqs_dtype": "float64"},
            takes=("text_tokens", "axes_dim", "theta"),
            places=(None, 0, 1, None),
            text_axis=3,
        ),
        Preset(
            "hunyuan-video",
            "HunyuanVideo: axes 16/56/56, theta 256, float32; ids (frame, row, col) of the "
            "patch grid",
            (
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/transformers/transformer_hunyuan_video.py",
                    "HunyuanVideoRotaryPosEmbed",
                ),
                Source(
                    "Tencent/HunyuanVideo",
                    "fa14b00",
                    "hyvideo/modules/posemb_layers.py",
                    "get_nd_rotary_pos_embed",
                ),
            ),
            {"axes_dim": (16, 56, 56), "theta": 256.0, "freqs_dtype": "float32"},
            takes=("axes_dim", "theta"),
            places=(0, 1, 2),
        ),
        Preset(
            "wan",
            "Wan 2.x: a head of head_dim (128) split d - 4(d // 6), 2(d // 6), 2(d // 6) "
            "(44/42/42), theta 10000, float64; ids (frame, row, col) of the patch grid "
            "(patch 1x2x2)",
            (
                Source("Wan-Video/Wan2.1", "9737cba", "wan/modules/model.py", "rope_params"),
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/transformers/transformer_wan.py",
                    "WanRotaryPosEmbed",
                ),
            ),
            {"theta": 10000.0, "freqs_dtype": "float64"},
            places=(0, 1, 2),
            split=lambda d: (d - 4 * (d // 6), 2 * (d // 6), 2 * (d // 6)),
            wide_ids=True,
        ),
        Preset(
            "cogvideox",
            "CogVideoX 1.0: a head of head_dim (64) split d // 4, 3(d // 8), 3(d // 8), theta "
            "10000, float32; ids (frame, row, col), rows and columns spread by linspace over "
            "the crop region of base_grid (sample_height, sample_width in patches: 30,45)",
            (
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/embeddings.py",
                    "get_3d_rotary_pos_embed",
                ),
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/pipelines/cogvideo/pipeline_cogvideox.py",
                    "CogVideoXPipeline._prepare_rotary_positional_embeddings",
                ),
            ),
            {"theta": 10000.0, "freqs_dtype": "float32", "base_grid": (30, 45)},
            takes=("base_grid",),
            places=(0, 1, 2),
            split=lambda d: (d // 4, d // 8 * 3, d // 8 * 3),
            head=64,
            linspace=True,
        ),
        Preset(
            "cogvideox-1.5",
            "CogVideoX 1.5: as cogvideox, ids the grid's indices (get_3d_rotary_pos_embed's "
            'grid_type="slice"); frames in temporal patches (patch_size_t)',
            (
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/embeddings.py",
                    "get_3d_rotary_pos_embed",
                ),
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/pipelines/cogvideo/pipeline_cogvideox.py",
                    "CogVideoXPipeline._prepare_rotary_positional_embeddings",
                ),
            ),
            {"theta": 10000.0, "freqs_dtype": "float32"},
            places=(0, 1, 2),
            split=lambda d: (d // 4, d // 8 * 3, d // 8 * 3),
            head=64,
        ),
        Preset(
            "qwen-image",
            "Qwen-Image: axes 16/56/56, theta 10000, float32; ids (0, row, col) centred on "
            "the image (scale_rope); text after the grid's largest id on every axis, first",
            (
                Source(
                    "huggingface/diffusers",
                    _DIFFUSERS,
                    "src/diffusers/models/transformers/transformer_qwenimage.py",
                    "QwenEmbedRope",
                ),
            ),
            {"axes_dim": (16, 56, 56), "theta": 10000.0, "freqs_dtype": "float32"},
            takes=("text_tokens", "axes_dim"),
            places=(None, 0, 1),
            centred=True,
            text_after_grid=True,
            polar=True,
        ),
    )
}


@dataclass(frozen=True, slots=True)
class RopeNdKey:
    """Everything that changes a multi-axis RoPE table's values: the axes' widths, theta,
    the grid (in patches) and the text tokens before it, the frequencies' dtype, the ids'
    dtype, the preset (whose ids the rows take), the pairs' layout, the rounding and the
    answer's dtype. A row holds ``cos`` then ``sin``, each ``sum(axes_dim)`` wide."""

    axes_dim: tuple[int, ...]
    grid: tuple[int, ...]
    theta: float = 10000.0
    freqs_dtype: FreqsDType = "float32"
    text_tokens: int = 0
    ids_dtype: TimestepDType = "float32"
    base_grid: tuple[int, ...] = ()
    preset: str = "diffusers"
    layout: Layout = "interleaved"
    rounding: Rounding = "library"
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
        if not 1 <= len(self.axes_dim) <= MAX_AXES:
            raise InvalidParameter("axes_dim", f"must name 1 to {MAX_AXES} axes")
        if any(d < 2 or d % 2 for d in self.axes_dim):
            raise InvalidParameter("axes_dim", "must be positive even widths, one per axis")
        chosen = PRESETS[self.preset]
        if chosen.places is not None and len(chosen.places) != len(self.axes_dim):
            raise InvalidParameter(
                "axes_dim", f"must name {len(chosen.places)} axes for preset {self.preset}"
            )
        axes = chosen.grid_axes(len(self.axes_dim))
        if len(self.grid) != axes:
            raise InvalidParameter("grid", f"must name {axes} sizes for preset {self.preset}")
        if any(size < 1 for size in self.grid):
            raise InvalidParameter("grid", "must be positive sizes (in patches)")
        if chosen.linspace and (len(self.base_grid) != 2 or min(self.base_grid) < 1):
            raise InvalidParameter("base_grid", "must be two positive sizes (rows, columns)")
        if self.text_tokens < 0:
            raise InvalidParameter("text_tokens", "must not be negative")
        if self.tokens > POSITION_CEILING + 1:
            raise InvalidParameter(
                "grid", f"makes {self.tokens} tokens, past {POSITION_CEILING + 1}"
            )
        if not (math.isfinite(self.theta) and self.theta > 0):
            raise InvalidParameter("theta", "must be a finite positive number")
        checks = (
            ("freqs_dtype", FREQS_DTYPES),
            ("ids_dtype", IDS_DTYPES),
            ("layout", LAYOUTS),
            ("rounding", ROUNDINGS),
            ("dtype", DTYPES),
        )
        for name, allowed in checks:
            if getattr(self, name) not in allowed:
                raise InvalidParameter(name, f"must be one of {', '.join(allowed)}")

    @property
    def head_dim(self) -> int:
        return sum(self.axes_dim)

    @property
    def width(self) -> int:
        """cos and sin side by side."""
        return 2 * self.head_dim

    @property
    def tokens(self) -> int:
        return self.text_tokens + math.prod(self.grid)

    def settings(self) -> dict[str, Any]:
        """The parameters by their names (``axes_dim`` as a list)."""
        given = {name: getattr(self, name) for name in PARAMETERS}
        return {**given, "axes_dim": list(self.axes_dim), "base_grid": list(self.base_grid)}


def preset_key(
    preset: str,
    grid: tuple[int, ...],
    given: Mapping[str, Any],
    head_dim: int | None,
    layout: Layout,
    rounding: Rounding,
    dtype: DType,
) -> RopeNdKey:
    """The key of ``preset``'s table over ``grid`` with the parameters a client gave
    (``None``: not given): a parameter the preset fixes is an :class:`InvalidParameter`, as
    is a ``head_dim`` other than the axes' sum."""
    if preset not in PRESETS:
        raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
    chosen = PRESETS[preset]
    settings = {**DEFAULTS, **chosen.settings}
    for name, value in given.items():
        if value is None:
            continue
        if name not in chosen.takes:
            said = (
                f"is fixed by preset {preset} ({settings[name]})"
                if name in chosen.settings
                else f"is not a parameter of preset {preset}"
            )
            if name in PRESETS["diffusers"].takes:
                said += ": give it with preset=diffusers, which takes every parameter"
            raise InvalidParameter(name, said)
        settings[name] = value
    if chosen.split is not None:
        settings["axes_dim"] = chosen.split(chosen.head if head_dim is None else head_dim)
    elif head_dim is not None and head_dim != sum(settings["axes_dim"]):
        raise InvalidParameter(
            "axes_dim",
            f"sums to {sum(settings['axes_dim'])}, not the head width {head_dim}",
            also=("head_dim",),
        )
    settings["axes_dim"] = tuple(settings["axes_dim"])
    settings["base_grid"] = tuple(settings["base_grid"])
    return RopeNdKey(
        grid=grid, **settings, preset=preset, layout=layout, rounding=rounding, dtype=dtype
    )


def ids(key: RopeNdKey, rows: NDArray[np.int64]) -> NDArray[np.float64]:
    """The model's ids ``(axes, N)`` of the tokens ``rows`` (text first, then the grid in
    row-major order, past it more of its first axis), before the pipeline's dtype rounds
    them."""
    chosen = PRESETS[key.preset]
    axes = len(key.axes_dim)
    out = np.zeros((axes, len(rows)), np.float64)
    text = rows < key.text_tokens
    shift = [size - size // 2 if chosen.centred else 0 for size in key.grid]
    if chosen.text_axis is not None:
        out[chosen.text_axis, text] = rows[text]
    if chosen.text_after_grid:
        out[:, text] = rows[text] + max(size - s for size, s in zip(key.grid, shift, strict=True))
    # row-major cells; rows past the grid continue its first axis (the cache computes whole
    # pages, which may reach past the last token)
    rest = rows[~text] - key.text_tokens
    cells: list[NDArray[np.int64]] = []
    for size in reversed(key.grid[1:]):
        cells.insert(0, rest % size)
        rest = rest // size
    cells.insert(0, rest)
    places = chosen.places if chosen.places is not None else tuple(range(axes))
    spread = _spread(key) if chosen.linspace else None
    for axis, place in enumerate(places):
        if place is None:
            continue
        if spread is not None and place > 0:
            out[axis, ~text] = _linspace(*spread[place - 1], key.grid[place], cells[place])
        else:
            out[axis, ~text] = cells[place] - shift[place]
    return out


def _spread(key: RopeNdKey) -> tuple[tuple[float, float], tuple[float, float]]:
    """CogVideoX's rows and columns: ``linspace(start, stop * (n - 1) / n, n)`` over the crop
    region of the grid resized into ``base_grid`` (the pipeline's
    ``get_resize_crop_region_for_grid``), each end as Python computes it."""
    h, w = key.grid[1:]
    th, tw = key.base_grid
    if h / w > th / tw:
        rh, rw = th, round(th / h * w)
    else:
        rw, rh = tw, round(tw / w * h)
    top, left = round((th - rh) / 2.0), round((tw - rw) / 2.0)
    return (top, (top + rh) * (h - 1) / h), (left, (left + rw) * (w - 1) / w)


def _linspace(
    start: float, end: float, steps: int, index: NDArray[np.int64]
) -> NDArray[np.float32]:
    """torch's float32 ``linspace(start, end, steps)[index]`` as its CPU kernel computes it:
    ``step = (end - start) / (steps - 1)`` in float32, then ``start + step * i`` for the
    first half and ``end - step * (steps - 1 - i)`` for the rest, each a fused multiply-add
    (the compiler contracts them: one rounding; the product is exact in float64)."""
    first, last = F32(start), F32(end)
    if steps == 1:
        return np.full(len(index), first, F32)
    step = np.float64((last - first) / F32(steps - 1))
    low = np.float64(first) + step * index
    high = np.float64(last) - step * (steps - 1 - index)
    out: NDArray[np.float32] = np.where(index < steps // 2, low, high).astype(F32)
    return out


def _frequencies32(theta: float, d: int) -> NDArray[np.float32]:
    """``1.0 / (theta ** (arange(0, d, 2, float32) / d))`` in float32, each step rounded."""
    scale = np.arange(0, d, 2).astype(F32) / F32(d)
    return F32(1.0) / kernels.pow(_library.f32(theta), scale)


def _frequencies64(theta: float, d: int) -> NDArray[np.float64]:
    """``1.0 / (theta ** (arange(0, d, 2, float64) / d))`` in float64."""
    return 1.0 / np.power(theta, np.arange(0, d, 2, dtype=np.float64) / d)


def _axis(
    key: RopeNdKey, d: int, positions: NDArray[np.floating]
) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
    """cos and sin ``(N, d/2)`` of one axis at ``positions`` (the ids as the model's
    frequencies receive them)."""
    if key.rounding == "exact":
        w_hi, w_lo = _exact.inverse_powers(key.theta, d, d // 2)
        wide = positions.astype(np.float64)
        largest = float(np.abs(wide).max(initial=0.0)) * float(w_hi.max(initial=0.0))
        if largest > _LARGEST_ANGLE:
            raise InvalidParameter(
                "rounding",
                f"exact angles are computed up to 2^31 radians, and these reach {largest:.4g}: "
                "ask for rounding=library, or smaller ids or a larger theta",
                also=("theta",),
            )
        sin, cos = _exact.sincos(wide, w_hi, w_lo)
        return cos, sin
    # a theta near 0 makes infinite frequencies and NaN entries, refused by the bound's check
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if key.freqs_dtype == "float64":
            angles = positions.astype(np.float64)[:, None] * _frequencies64(key.theta, d)[None, :]
            return np.cos(angles), np.sin(angles)
        angles32 = positions.astype(F32)[:, None] * _frequencies32(key.theta, d)[None, :]
        if PRESETS[key.preset].polar:
            return kernels.polar(angles32)
        return kernels.cos(angles32), kernels.sin(angles32)


def at(key: RopeNdKey, given: NDArray[Any]) -> Rows:
    """cos and sin side by side, one row per token of the ids ``given`` ``(axes, N)`` (any
    finite numbers, as the pipeline builds them: rounded to ``ids_dtype``, then float32;
    Wan's integers reach its float64 frequencies exactly)."""
    given = np.asarray(given)
    if given.ndim == 1:
        given = given[None, :]
    count = given.shape[1]
    half = key.head_dim
    out = np.empty((count, 2 * half), dtype=key.dtype)
    positions: NDArray[np.floating]
    if PRESETS[key.preset].wide_ids:
        positions = given.astype(np.float64)
    else:
        with np.errstate(over="ignore"):
            positions = narrowed(given.astype(F32), key.ids_dtype)
    if not np.isfinite(positions).all():
        raise InvalidParameter(
            "ids_dtype", f"holds ids up to {_LARGEST_ID[key.ids_dtype]:g}: these reach past it"
        )
    rows = max(1, _CHUNK_ELEMENTS // half)
    pairs = np.cumsum((0, *(d // 2 for d in key.axes_dim)))
    for first in range(0, count, rows):
        chunk = slice(first, first + rows)
        cos = np.empty((len(positions[0, chunk]), half // 2), np.float64)
        sin = np.empty_like(cos)
        for axis, d in enumerate(key.axes_dim):
            c, s = _axis(key, d, positions[axis, chunk])
            cos[:, pairs[axis] : pairs[axis + 1]] = c
            sin[:, pairs[axis] : pairs[axis + 1]] = s
        for target, values in ((out[chunk, :half], cos), (out[chunk, half:], sin)):
            if key.layout == "interleaved":
                target[:, 0::2] = values
                target[:, 1::2] = values
            else:
                target[:, : half // 2] = values
                target[:, half // 2 :] = values
    return out


def take(key: RopeNdKey, rows: NDArray[np.int64]) -> Rows:
    """The rows of the tokens ``rows``."""
    return at(key, ids(key, rows))


def fill(key: RopeNdKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part), dtype=np.int64))
        start += len(part)


def bound(key: RopeNdKey) -> Bound:
    """Entries are cosines and sines."""
    return Bound(1.0, ("theta",))


def entries(key: RopeNdKey, rows: Rows) -> Values:
    """What an audit compares of a row: each pair's cos, then its sin (the other member of
    a pair repeats them)."""
    half = key.head_dim
    first = slice(0, None, 2) if key.layout == "interleaved" else slice(0, half // 2)
    return np.concatenate([rows[:, :half][:, first], rows[:, half:][:, first]], axis=1).astype(
        np.float64
    )


def _pair_axes(key: RopeNdKey) -> NDArray[np.int64]:
    """The axis each pair turns by."""
    return np.repeat(np.arange(len(key.axes_dim)), [d // 2 for d in key.axes_dim])


def _received(key: RopeNdKey, given: NDArray[np.float64]) -> NDArray[np.float64]:
    """The ids ``(axes, N)`` as the frequencies receive them: rounded to ``ids_dtype`` then
    float32 (infinite past its range), or float64 (Wan's integers)."""
    if PRESETS[key.preset].wide_ids:
        return given
    with np.errstate(over="ignore"):
        return narrowed(given.astype(F32), key.ids_dtype).astype(np.float64)


def _positions(key: RopeNdKey, rows: NDArray[np.int64]) -> tuple[Values, Values]:
    """Per token and pair: the id as the exact table takes it (float32, or Wan's float64)
    and as the library receives it (in ``ids_dtype``)."""
    given = ids(key, rows)
    exact = dataclasses.replace(key, ids_dtype="float32")
    axes = _pair_axes(key)
    return _received(exact, given)[axes].T, _received(key, given)[axes].T


def _along(**changes: Any) -> Callable[[RopeNdKey, NDArray[np.int64]], Values]:
    """An audit path: the library's table with ``changes`` (the frequencies' or the ids'
    dtype), as float64 entries; NaN where the ids are past the dtype's range."""

    def values(key: RopeNdKey, rows: NDArray[np.int64]) -> Values:
        key = dataclasses.replace(key, **changes)
        given = ids(key, rows)
        finite = np.isfinite(_received(key, given)).all(axis=0)
        out = np.full((len(rows), key.head_dim), np.nan)
        if finite.any():
            out[finite] = entries(key, at(key, given[:, finite]))
        return out

    return values


def _exact_frequencies(key: RopeNdKey) -> Values:
    return np.concatenate([_exact.inverse_powers(key.theta, d, d // 2)[0] for d in key.axes_dim])


def _library_frequencies(key: RopeNdKey) -> NDArray[np.float32]:
    """The library's frequencies, as float32 (float64's exact to a float32's rounding)."""
    if key.freqs_dtype == "float64":
        wide = [_frequencies64(key.theta, d) for d in key.axes_dim]
        return np.concatenate(wide).astype(F32)
    return np.concatenate([_frequencies32(key.theta, d) for d in key.axes_dim])


def _turned(key: RopeNdKey, at_: NDArray[np.float32], inverse: NDArray[np.float32]) -> Values:
    """float32 entries at one position per row with these frequencies (the shared paths
    that cast positions are not a multi-axis table's: kept for the record's shape)."""
    with np.errstate(over="ignore", invalid="ignore"):
        angles = at_[:, None] * inverse[None, :]
        c, s = (
            kernels.polar(angles)
            if PRESETS[key.preset].polar
            else (kernels.cos(angles), kernels.sin(angles))
        )
    return np.concatenate([c, s], axis=1).astype(np.float64)


_ANGLES: Final = "The library's table with {} (the key's ids): {}."
AUDIT: Final[Audit[RopeNdKey]] = Audit(
    exact=replacing(rounding="exact", dtype="float64", ids_dtype="float32"),
    library=replacing(rounding="library", dtype="float32"),
    width=lambda key: key.head_dim,
    entries=entries,
    angles=Angles(
        pairs=lambda key: key.head_dim // 2,
        exact=_exact_frequencies,
        library=_library_frequencies,
        turned=_turned,
        attention=lambda key: 1.0,
        # CUDA's powf: 4 ulp (the CPU's: 1); pow in float64: the same in double's ulps
        ulps=lambda key: 5.0,
        received=_positions,
        device="What a GPU's math library may produce (an estimate): an envelope from the "
        "documented ulp bounds of CUDA's pow (4 ulp), sin and cos (2 ulp), in the "
        "frequencies' dtype (float64 for FLUX in diffusers: then one rounding to float32), "
        "at the ids the model receives; its errors are the envelope's, the largest a device "
        "may give.",
        wide=lambda key: key.freqs_dtype == "float64",
    ),
    paths=("library", "bf16-table", "fp16-table", "device"),
    own=(
        AuditPath(
            "float32-angles",
            _ANGLES.format("float32 frequencies and angles", "FLUX's reference since 2025"),
            _along(freqs_dtype="float32"),
        ),
        AuditPath(
            "float64-angles",
            _ANGLES.format(
                "float64 frequencies and angles", "diffusers' FLUX and the 2024 reference"
            ),
            _along(freqs_dtype="float64"),
        ),
        AuditPath(
            "bf16-ids",
            _ANGLES.format("the ids built in bfloat16", "diffusers' FLUX pipeline; exact to 256"),
            _along(ids_dtype="bfloat16"),
        ),
        AuditPath(
            "fp16-ids",
            _ANGLES.format("the ids built in float16", "exact to 2048, none past 65504"),
            _along(ids_dtype="float16"),
        ),
    ),
)


def engine(key: RopeNdKey) -> bool:
    """Whether the key's table is computed with the library engine's functions: the float32
    library path (the float64 presets' are numpy's and torch's float64 alike)."""
    return key.rounding == "library" and key.freqs_dtype == "float32"


FAMILY: Final = register(
    Family(
        "rope-nd",
        RopeNdKey,
        fill,
        take,
        bound,
        arrays=("cos", "sin"),
        audit=AUDIT,
        presets=PRESETS,
        engine=engine,
    )
)
