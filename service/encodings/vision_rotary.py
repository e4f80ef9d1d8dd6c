"""Vision towers' 2-D rotary embeddings (Qwen2/2.5/3-VL, Pixtral, Llama 4, DINOv3, EVA-02):
each patch token turns half of its head's pairs by its row and half by its column, and each
model lays out its pairs, its positions and its tokens its own way (:data:`PRESETS`, one
record a model, each with its sources in transformers 5.23, timm 1.0.31 and DINOv3's
repository at 6876159)::

    Qwen-VL   pairs (i, i + d/2), [h f_k | w f_k],                f_k = theta^(-4k/d)
    Pixtral   pairs (i, i + d/2), [h f_2k | w f_2k+1],            f_j = theta^(-2j/d)
    Llama 4   pairs (2i, 2i+1),   [(w+1) f_k | (h+1) f_k],        f_k = theta^(-4k/d)
    DINOv3    pairs (i, i + d/2), [2 pi c_h f_k | 2 pi c_w f_k],  c = 2(i + 0.5)/n - 1
    EVA-02    pairs (2i, 2i+1),   [h' f_k | w' f_k],              h' = (h + offset)/H ref_H

Row ``t`` of a table is the model's token ``t``: Qwen-VL's blocks of
``spatial_merge_size``² patches, block-major, repeated over the frames (or in Qwen2.5-VL's
window order with ``window_index``: what its windowed attention receives); the others' patches
row-major (Llama 4's class token last, at angle 0; DINOv3's and EVA-02's prefix tokens are not
rotated and not in the table). A row holds ``cos`` then ``sin``, each ``head_dim`` wide, in
the layout the model's apply reads: the pairs' halves (rotate-half) or each value twice
(interleaved pairs).

``rounding=library`` is the model's float32 arithmetic, operation by operation: ``pow`` of
the exponent vector the code builds (:mod:`.kernels`: its bits depend on the vector), the
reciprocal, the position's product (or DINOv3's ``2 pi c / period``), cos and sin; with the
torch engine, the modules' own bits on CPU. ``rounding=exact``: cos and sin of the formula's
angles (double-double frequencies, :mod:`._exact`), each entry rounded once.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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
from service.encodings.timestep import narrowed
from service.errors import InvalidParameter

Model = Literal["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "pixtral", "llama4", "dinov3", "eva02"]
MODELS: Final[tuple[Model, ...]] = get_args(Model)
# DINOv3's three codes (they differ in float32); EVA-02's is timm's, the others' transformers'
Implementation = Literal["transformers", "original", "timm"]
IMPLEMENTATIONS: Final[tuple[Implementation, ...]] = get_args(Implementation)
Normalize = Literal["separate", "min", "max"]
NORMALIZATIONS: Final[tuple[Normalize, ...]] = get_args(Normalize)
PeriodsDType = Literal["float32", "bfloat16"]
PERIODS_DTYPES: Final[tuple[PeriodsDType, ...]] = get_args(PeriodsDType)
F32 = np.float32
# the largest side a grid's positions are rescaled to (EVA-02's reference grid)
MAX_SIDE: Final = 1 << 20
# torch takes Python's 2 * math.pi as a float32 scalar against a float32 tensor
_TWO_PI32: Final = F32(2 * math.pi)
_TWO_PI: Final = decimal.Decimal("6.283185307179586476925286766559005768394338798750")
_CHUNK_ELEMENTS: Final = 1 << 16
# exact angles are exact (double-double) up to this many radians, as sinusoidal's positions
_LARGEST_ANGLE: Final = 2.0**31

_TRANSFORMERS: Final = "5.23.0"
_TIMM: Final = "1.0.31"
_DINOV3: Final = "6876159"


def _qwen(name: str, function: str = "VisionRotaryEmbedding") -> tuple[Source, ...]:
    prefix = {"qwen2_vl": "Qwen2VL", "qwen2_5_vl": "Qwen2_5_VL", "qwen3_vl": "Qwen3VL"}[name]
    return (
        Source(
            "huggingface/transformers",
            _TRANSFORMERS,
            f"src/transformers/models/{name}/modeling_{name}.py",
            f"{prefix}{function}",
        ),
        Source(
            "huggingface/transformers",
            _TRANSFORMERS,
            "src/transformers/vision_utils.py",
            "get_vision_position_ids",
        ),
    )


@dataclass(frozen=True, slots=True)
class Preset:
    """A vision tower's 2-D RoPE: its sources, the real checkpoint's parameters
    (``settings``: what a request that names only the model gets), the parameters a client
    may give (``takes``), how its rows are ordered (``order``: ``blocks`` of
    ``spatial_merge_size``², ``rows``, or ``rows`` then a ``class`` token), how its pairs
    are laid out (``interleaved``: pairs ``(2i, 2i+1)``; else halves), which axis turns the
    first half of them (``first``: 0 the row, 1 the column), the checkpoint it describes
    and its image's grid."""

    name: Model
    description: str
    sources: tuple[Source, ...]
    settings: Mapping[str, Any]
    takes: tuple[str, ...] = ("head_dim", "theta")
    order: Literal["blocks", "rows", "class"] = "rows"
    interleaved: bool = False
    first: int = 0
    checkpoint: str = ""
    # the grid a request that gives none gets: the checkpoint's image in patches (Qwen-VL's
    # take any size: a 448-pixel square)
    image: tuple[int, int, int] = (1, 32, 32)

    @property
    def arithmetic(self) -> str:
        """What ``rounding=library`` computes in."""
        return "float32"

    @property
    def rows(self) -> str:
        """What row ``t`` of its table is."""
        return {
            "blocks": "row t is the tower's token t: spatial_merge_size² blocks of patches, "
            "block-major, repeated over the frames (window order with window_index)",
            "rows": "row t is patch t, row-major (prefix tokens are not rotated: not in the table)",
            "class": "row t is patch t, row-major; the class token last, at angle 0",
        }[self.order]


_QWEN_TAKES: Final = ("head_dim", "theta", "spatial_merge_size")
PRESETS: Final[Mapping[str, Preset]] = {
    preset.name: preset
    for preset in (
        Preset(
            "qwen2_vl",
            "Qwen2-VL's vision tower (the axial type): [h f | w f] twice, rotate-half; "
            "head 80 (embed_dim 1280 / 16 heads), theta 10000, merge 2",
            _qwen("qwen2_vl"),
            {"head_dim": 80, "theta": 10000.0, "spatial_merge_size": 2},
            _QWEN_TAKES,
            order="blocks",
            checkpoint="Qwen/Qwen2-VL-7B-Instruct",
        ),
        Preset(
            "qwen2_5_vl",
            "Qwen2.5-VL's vision tower: Qwen2-VL's rope and order, head 80 (hidden_size 1280 "
            "/ 16), merge 2; window_index: rows in its windowed attention's order (window "
            "112 pixels, patch 14: 4x4 merged tokens)",
            (
                *_qwen("qwen2_5_vl"),
                Source(
                    "huggingface/transformers",
                    _TRANSFORMERS,
                    "src/transformers/vision_utils.py",
                    "get_vision_window_index",
                ),
            ),
            {
                "head_dim": 80,
                "theta": 10000.0,
                "spatial_merge_size": 2,
                "window_size": 112,
                "patch_size": 14,
            },
            (*_QWEN_TAKES, "window_index", "window_size", "patch_size"),
            order="blocks",
            checkpoint="Qwen/Qwen2.5-VL-7B-Instruct",
        ),
        Preset(
            "qwen3_vl",
            "Qwen3-VL's vision tower: Qwen2-VL's rope and order, head 72 (hidden_size 1152 / "
            "16), merge 2 (its learned 48x48 position table needs weights: its bilinear map "
            "is GET /v1/positions/vision-interpolation)",
            _qwen("qwen3_vl"),
            {"head_dim": 72, "theta": 10000.0, "spatial_merge_size": 2},
            _QWEN_TAKES,
            order="blocks",
            checkpoint="Qwen/Qwen3-VL-8B-Instruct",
            image=(1, 28, 28),
        ),
        Preset(
            "pixtral",
            "Pixtral: theta^(-2j/d) for j < d/2, the even j turning rows, the odd columns, "
            "rotate-half; head 64 (1024 / 16), theta 10000; patches row-major per image",
            (
                Source(
                    "huggingface/transformers",
                    _TRANSFORMERS,
                    "src/transformers/models/pixtral/modeling_pixtral.py",
                    "PixtralVisionRotaryEmbedding",
                ),
                Source(
                    "huggingface/transformers",
                    _TRANSFORMERS,
                    "src/transformers/models/pixtral/modeling_pixtral.py",
                    "PixtralVisionModel.forward",
                ),
            ),
            {"head_dim": 64, "theta": 10000.0},
            checkpoint="mistral-community/pixtral-12b",
            image=(1, 64, 64),
        ),
        Preset(
            "llama4",
            "Llama 4's vision encoder: pairs (2i, 2i+1), the first half turned by column + 1, "
            "the second by row + 1; head 88 (1408 / 16), theta 10000, 24x24 patches (336 / "
            "14) and the class token last, unturned",
            (
                Source(
                    "huggingface/transformers",
                    _TRANSFORMERS,
                    "src/transformers/models/llama4/modeling_llama4.py",
                    "Llama4VisionRotaryEmbedding",
                ),
                Source(
                    "huggingface/transformers",
                    _TRANSFORMERS,
                    "src/transformers/models/llama4/modeling_llama4.py",
                    "vision_apply_rotary_emb",
                ),
            ),
            {"head_dim": 88, "theta": 10000.0},
            order="class",
            interleaved=True,
            first=1,
            checkpoint="meta-llama/Llama-4-Scout-17B-16E",
            image=(1, 24, 24),
        ),
        Preset(
            "dinov3",
            "DINOv3: patch centres c = 2(i + 0.5)/n - 1 turned by 2 pi c / period, periods "
            "theta^(4k/d), rotate-half; head 64 (ViT-S/16: 384 / 6), theta 100; the original "
            "code and timm divide by the periods, transformers multiplies by their "
            "reciprocals (implementation)",
            (
                Source(
                    "facebookresearch/dinov3",
                    _DINOV3,
                    "dinov3/layers/rope_position_encoding.py",
                    "RopePositionEmbedding",
                ),
                Source(
                    "huggingface/pytorch-image-models",
                    _TIMM,
                    "timm/layers/pos_embed_sincos.py",
                    "RotaryEmbeddingDinoV3",
                ),
                Source(
                    "huggingface/transformers",
                    _TRANSFORMERS,
                    "src/transformers/models/dinov3_vit/modeling_dinov3_vit.py",
                    "DINOv3ViTRopePositionEmbedding",
                ),
            ),
            {"head_dim": 64, "theta": 100.0, "implementation": "transformers"},
            ("head_dim", "theta", "implementation", "normalize_coords", "periods_dtype"),
            checkpoint="facebook/dinov3-vits16-pretrain-lvd1689m",
            image=(1, 14, 14),
        ),
        Preset(
            "eva02",
            "EVA-02 (timm's RotaryEmbeddingCat): pairs (2i, 2i+1), rows then columns, "
            "f_k = theta^(-k/(d/4)), positions (i + grid_offset) / n * ref_feat_shape; head 64 "
            "(768 / 12), theta 10000, ref_feat_shape 16,16 (EVA-02-B/14 at 448: a 32x32 grid)",
            (
                Source(
                    "huggingface/pytorch-image-models",
                    _TIMM,
                    "timm/layers/pos_embed_sincos.py",
                    "RotaryEmbeddingCat",
                ),
                Source(
                    "huggingface/pytorch-image-models",
                    _TIMM,
                    "timm/models/eva.py",
                    "eva02_base_patch14_448",
                ),
            ),
            {
                "head_dim": 64,
                "theta": 10000.0,
                "implementation": "timm",
                "ref_feat_shape": (16, 16),
                "grid_offset": 0.0,
            },
            ("head_dim", "theta", "ref_feat_shape", "grid_offset"),
            interleaved=True,
            checkpoint="timm/eva02_base_patch14_448.mim_in22k_ft_in22k_in1k",
        ),
    )
}
# every parameter some model takes, with the key's value where a model does not
PARAMETERS: Final[Mapping[str, Any]] = {
    "head_dim": None,
    "theta": None,
    "spatial_merge_size": 1,
    "window_index": False,
    "window_size": 112,
    "patch_size": 14,
    "implementation": "transformers",
    "normalize_coords": "separate",
    "periods_dtype": "float32",
    "ref_feat_shape": (),
    "grid_offset": 0.0,
}


@dataclass(frozen=True, slots=True)
class VisionRotaryKey:
    """Everything that changes a vision tower's rotary table: the model (its pairs, order
    and arithmetic), the grid ``(t, h, w)`` in patches, the head's width, theta, and each
    model's own parameters (Qwen-VL's merge and windows, DINOv3's implementation,
    normalisation and periods' dtype, EVA-02's reference grid and offset), the rounding and
    the answer's dtype. A row holds ``cos`` then ``sin``, each ``head_dim`` wide."""

    model: Model
    grid: tuple[int, int, int]
    head_dim: int
    theta: float
    spatial_merge_size: int = 1
    window_index: bool = False
    window_size: int = 112
    patch_size: int = 14
    implementation: Implementation = "transformers"
    normalize_coords: Normalize = "separate"
    periods_dtype: PeriodsDType = "float32"
    ref_feat_shape: tuple[int, ...] = ()
    grid_offset: float = 0.0
    rounding: Rounding = "library"
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        checks: tuple[tuple[str, tuple[str, ...]], ...] = (
            ("model", MODELS),
            ("implementation", IMPLEMENTATIONS),
            ("normalize_coords", NORMALIZATIONS),
            ("periods_dtype", PERIODS_DTYPES),
            ("rounding", ROUNDINGS),
            ("dtype", DTYPES),
        )
        for name, allowed in checks:
            if getattr(self, name) not in allowed:
                raise InvalidParameter(name, f"must be one of {', '.join(allowed)}")
        chosen = PRESETS[self.model]
        if self.head_dim < 4 or self.head_dim % 4:
            raise InvalidParameter(
                "head_dim",
                f"must be a positive multiple of 4: {self.model} turns a quarter of its pairs' "
                "worth of frequencies by each of rows and columns",
            )
        if not (math.isfinite(self.theta) and self.theta > 0):
            raise InvalidParameter("theta", "must be a finite positive number")
        if len(self.grid) != 3 or any(size < 1 for size in self.grid):
            raise InvalidParameter("grid", "must be positive sizes in patches: H,W or T,H,W")
        t, h, w = self.grid
        if chosen.order != "blocks" and t != 1:
            raise InvalidParameter("grid", f"{self.model} rotates one image: give H,W")
        m = self.spatial_merge_size
        if m < 1:
            raise InvalidParameter("spatial_merge_size", "must be a positive integer")
        if h % m or w % m:
            raise InvalidParameter(
                "grid",
                f"{h}x{w} patches are not blocks of spatial_merge_size {m}: both sides must "
                f"be multiples of {m}",
                also=("spatial_merge_size",),
            )
        if self.window_index and self.window_size // m // max(self.patch_size, 1) < 1:
            raise InvalidParameter(
                "window_size",
                f"must hold a merged token: at least spatial_merge_size x patch_size ({m} x "
                f"{self.patch_size}) pixels",
                also=("patch_size",),
            )
        if self.patch_size < 1 or self.window_size < 1:
            raise InvalidParameter("patch_size", "window_size and patch_size must be positive")
        if chosen.order == "class" and h != w:
            raise InvalidParameter("grid", "Llama 4's tiles are square: H must equal W")
        if self.ref_feat_shape and (
            len(self.ref_feat_shape) != 2
            or not all(1 <= size <= MAX_SIDE for size in self.ref_feat_shape)
        ):
            raise InvalidParameter(
                "ref_feat_shape", f"must be two sizes (rows, columns) from 1 to {MAX_SIDE}"
            )
        if not math.isfinite(self.grid_offset):
            raise InvalidParameter("grid_offset", "must be a finite number")
        if self.tokens > POSITION_CEILING + 1:
            raise InvalidParameter(
                "grid", f"makes {self.tokens} tokens, past {POSITION_CEILING + 1}"
            )
        if self.model == "dinov3":
            if self.implementation == "transformers" and self.normalize_coords != "separate":
                raise InvalidParameter(
                    "normalize_coords",
                    "transformers' DINOv3 normalises each axis by its own size (separate): "
                    "give implementation=original or timm for min or max",
                    also=("implementation",),
                )
            if self.periods_dtype == "bfloat16" and self.implementation != "original":
                raise InvalidParameter(
                    "periods_dtype",
                    "bfloat16 periods are the original code's persistent buffer (timm and "
                    "transformers compute their own): give implementation=original",
                    also=("implementation",),
                )
        if self.rounding == "exact" and self.periods_dtype != "float32":
            raise InvalidParameter(
                "periods_dtype",
                "rounding=exact computes the formula: bfloat16 periods are a library's rounding",
                also=("rounding",),
            )

    @property
    def width(self) -> int:
        """cos and sin side by side."""
        return 2 * self.head_dim

    @property
    def patches(self) -> int:
        return math.prod(self.grid)

    @property
    def tokens(self) -> int:
        """The table's rows: its patches (and Llama 4's class token)."""
        return self.patches + (PRESETS[self.model].order == "class")

    def settings(self) -> dict[str, Any]:
        """The parameters by their names (tuples as lists)."""
        given = {name: getattr(self, name) for name in PARAMETERS}
        return {**given, "ref_feat_shape": list(self.ref_feat_shape)}


def preset_key(
    model: str,
    grid: tuple[int, ...],
    given: Mapping[str, Any],
    rounding: Rounding,
    dtype: DType,
) -> VisionRotaryKey:
    """The key of ``model``'s table over ``grid`` (``H,W`` or ``T,H,W``) with the
    parameters a client gave (``None``: not given): one the model does not take is an
    :class:`InvalidParameter`."""
    if model not in PRESETS:
        raise InvalidParameter("model", f"must be one of {', '.join(PRESETS)}")
    chosen = PRESETS[model]
    settings = {**PARAMETERS, **chosen.settings}
    for name, value in given.items():
        if value is None:
            continue
        if name not in chosen.takes:
            raise InvalidParameter(name, f"is not a parameter of model {model}")
        settings[name] = value
    if len(grid) == 2:
        grid = (1, *grid)
    if len(grid) != 3:
        raise InvalidParameter("grid", "must name H,W or T,H,W patches")
    settings["ref_feat_shape"] = tuple(settings["ref_feat_shape"])
    return VisionRotaryKey(
        model,  # type: ignore[arg-type]  # checked above
        (grid[0], grid[1], grid[2]),
        rounding=rounding,
        dtype=dtype,
        **settings,
    )


def patches(key: VisionRotaryKey, rows: NDArray[np.int64]) -> NDArray[np.int64]:
    """``(N, 2)``: the row and column of each row's patch in the model's token order (past
    the last token, the order goes on: another frame); Llama 4's class token ``(-1, -1)``."""
    _, h, w = key.grid
    chosen = PRESETS[key.model]
    out = np.empty((len(rows), 2), np.int64)
    if chosen.order != "blocks":
        within = rows % (h * w)
        out[:, 0], out[:, 1] = within // w, within % w
        if chosen.order == "class":
            out[rows >= h * w] = -1
        return out
    m = key.spatial_merge_size
    block, sub = rows // (m * m), rows % (m * m)
    merged_h, merged_w = h // m, w // m
    within = block % (merged_h * merged_w)
    if key.window_index:
        row, column = _windowed(key, within)
    else:
        row, column = within // merged_w, within % merged_w
    out[:, 0] = row * m + sub // m
    out[:, 1] = column * m + sub % m
    return out


def _windowed(
    key: VisionRotaryKey, order: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The merged token (row, column) at place ``order`` of a frame's window order:
    ``get_vision_window_index``'s windows of ``window_size // merge // patch`` merged
    tokens a side, row-major, each row-major inside (the last row and column of windows
    cut short by the grid)."""
    m = key.spatial_merge_size
    side = key.window_size // m // key.patch_size
    rows, columns = key.grid[1] // m, key.grid[2] // m
    band = order // (side * columns)  # a band of windows side rows high
    place = order % (side * columns)
    high = np.minimum(side, rows - band * side)
    window = place // (high * side)
    inside = place % (high * side)
    wide = np.minimum(side, columns - window * side)
    return band * side + inside // wide, window * side + inside % wide


def _library_frequencies(key: VisionRotaryKey) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """float32 inverse frequencies of the pairs turned by the first axis and by the second,
    each from ``pow`` of the exponent vector the model's code builds."""
    d, theta = key.head_dim, _library.f32(key.theta)
    if key.model == "pixtral":
        every = F32(1) / kernels.pow(theta, np.arange(0, d, 2).astype(F32) / F32(d))
        return every[0::2], every[1::2]
    if key.model == "llama4":
        half = d // 2
        exponents = np.arange(0, half, 2)[: half // 2].astype(F32) / F32(half)
        inverse = F32(1) / kernels.pow(theta, exponents)
        return inverse, inverse
    if key.model == "eva02":
        quarter = d // 4
        inverse = F32(1) / kernels.pow(theta, np.arange(quarter).astype(F32) / F32(quarter))
        return inverse, inverse
    if key.model == "dinov3":
        periods = _periods(key)
        return periods, periods
    half = d // 2  # Qwen-VL's
    inverse = F32(1) / kernels.pow(theta, np.arange(0, half, 2).astype(F32) / F32(half))
    return inverse, inverse


def _periods(key: VisionRotaryKey) -> NDArray[np.float32]:
    """DINOv3's periods (the original code and timm: ``theta ** (2k / (d/2))``, perhaps
    stored in bfloat16), or transformers' reciprocal frequencies ``1 / theta **
    arange(0, 1, 4/d)`` (its exponents from double steps)."""
    d, theta = key.head_dim, _library.f32(key.theta)
    if key.implementation == "transformers":
        return F32(1) / kernels.pow(theta, kernels.arange(1.0, 4.0 / d))
    exponents = (F32(2) * np.arange(d // 4).astype(F32)) / F32(d // 2)
    periods = kernels.pow(theta, exponents)
    return narrowed(periods, "bfloat16") if key.periods_dtype == "bfloat16" else periods


def _coordinates32(
    key: VisionRotaryKey, index: NDArray[np.int64], axis: int
) -> NDArray[np.float32]:
    """The float32 position of patch ``index`` on ``axis`` (0 rows, 1 columns) as the model
    computes it."""
    _, h, w = key.grid
    size = (h, w)[axis]
    if key.model == "dinov3":
        denominator = {"separate": size, "min": min(h, w), "max": max(h, w)}[key.normalize_coords]
        centre = (index.astype(F32) + F32(0.5)) / F32(denominator)
        return F32(2) * centre - F32(1)
    if key.model == "eva02":
        at = index.astype(F32) + _library.f32(key.grid_offset)
        if key.ref_feat_shape:
            at = (at / F32(size)) * F32(key.ref_feat_shape[axis])
        return at
    if key.model == "llama4":
        return (index + 1).astype(F32)
    return index.astype(F32)


def _exact_coordinates(key: VisionRotaryKey, index: NDArray[np.int64], axis: int) -> Values:
    """The formula's position of patch ``index`` on ``axis`` in float64 (rounded once where
    it is a fraction)."""
    _, h, w = key.grid
    size = (h, w)[axis]
    if key.model == "dinov3":
        denominator = {"separate": size, "min": min(h, w), "max": max(h, w)}[key.normalize_coords]
        return (2 * index + 1 - denominator) / np.float64(denominator)
    if key.model == "eva02":
        at = index + key.grid_offset
        if key.ref_feat_shape:
            return at * np.float64(key.ref_feat_shape[axis]) / size
        return at.astype(np.float64)
    if key.model == "llama4":
        return (index + 1).astype(np.float64)
    return index.astype(np.float64)


def _exact_frequencies(key: VisionRotaryKey) -> tuple[tuple[Values, Values], tuple[Values, Values]]:
    """Double-double frequencies ``(hi, lo)`` of the first axis's pairs and the second's
    (DINOv3's times 2 pi)."""
    d = key.head_dim
    if key.model == "pixtral":
        hi, lo = _exact.inverse_powers(key.theta, d, d // 2)
        return (hi[0::2], lo[0::2]), (hi[1::2], lo[1::2])
    hi, lo = _exact.inverse_powers(key.theta, d // 2, d // 4)
    if key.model == "dinov3":
        hi, lo = _exact.scaled(hi, lo, _TWO_PI)
    return (hi, lo), (hi, lo)


def at(key: VisionRotaryKey, given: NDArray[Any]) -> Rows:
    """cos and sin side by side, one row per patch at ``given`` ``(2, N)`` (row and column
    indices on the key's grid; ``(-1, -1)``: Llama 4's class token, unturned)."""
    given = np.asarray(given, np.int64)
    count = given.shape[1]
    d = key.head_dim
    quarter = d // 4
    out = np.empty((count, 2 * d), dtype=key.dtype)
    first = PRESETS[key.model].first
    chunk = max(1, _CHUNK_ELEMENTS // d)
    for start in range(0, count, chunk):
        part = slice(start, start + chunk)
        coordinates = given[:, part]
        unturned = coordinates[0] < 0
        cos = np.empty((coordinates.shape[1], d // 2), np.float64)
        sin = np.empty_like(cos)
        for place, axis in enumerate((first, 1 - first)):
            index = np.where(unturned, 0, coordinates[axis])
            pairs = slice(place * quarter, (place + 1) * quarter)
            cos[:, pairs], sin[:, pairs] = _axis(key, index, axis, place)
        cos[unturned], sin[unturned] = 1.0, 0.0
        for target, values in ((out[part, :d], cos), (out[part, d:], sin)):
            if PRESETS[key.model].interleaved:
                target[:, 0::2] = values
                target[:, 1::2] = values
            else:
                target[:, : d // 2] = values
                target[:, d // 2 :] = values
    return out


def _axis(
    key: VisionRotaryKey, index: NDArray[np.int64], axis: int, place: int
) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
    """cos and sin ``(N, d/4)`` of the pairs that ``axis`` turns (the ``place``-th quarter)."""
    if key.rounding == "exact":
        hi, lo = _exact_frequencies(key)[place]
        positions = _exact_coordinates(key, index, axis)
        largest = float(np.abs(positions).max(initial=0.0)) * float(hi.max(initial=0.0))
        if largest > _LARGEST_ANGLE:
            raise InvalidParameter(
                "rounding",
                f"exact angles are computed up to 2^31 radians, and these reach {largest:.4g}",
                also=("ref_feat_shape", "grid_offset", "theta")
                if key.model == "eva02"
                else ("theta",),
            )
        sin, cos = _exact.sincos(positions, hi, lo)
        return cos, sin
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        frequencies = _library_frequencies(key)[place]
        at32 = _coordinates32(key, index, axis)
        if key.model == "dinov3":
            turned = _TWO_PI32 * at32
            if key.implementation == "transformers":
                angles = turned[:, None] * frequencies[None, :]
            else:
                angles = turned[:, None] / frequencies[None, :]
        else:
            angles = at32[:, None] * frequencies[None, :]
        return kernels.cos(angles), kernels.sin(angles)


def take(key: VisionRotaryKey, rows: NDArray[np.int64]) -> Rows:
    """The rows of the tokens ``rows``."""
    return at(key, patches(key, rows).T)


def fill(key: VisionRotaryKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part), dtype=np.int64))
        start += len(part)


def bound(key: VisionRotaryKey) -> Bound:
    """Entries are cosines and sines."""
    return Bound(1.0, ("theta",))


def entries(key: VisionRotaryKey, rows: Rows) -> Values:
    """What an audit compares of a row: each pair's cos, then its sin."""
    d = key.head_dim
    first = slice(0, None, 2) if PRESETS[key.model].interleaved else slice(0, d // 2)
    return np.concatenate([rows[:, :d][:, first], rows[:, d:][:, first]], axis=1).astype(np.float64)


def _along(**changes: Any) -> Callable[[VisionRotaryKey, NDArray[np.int64]], Values]:
    """An audit path: the library's table with ``changes``, as float64 entries."""

    def values(key: VisionRotaryKey, rows: NDArray[np.int64]) -> Values:
        return entries(key, take(dataclasses.replace(key, **changes), rows))

    return values


def _float32_positions(key: VisionRotaryKey, rows: NDArray[np.int64]) -> Values:
    """The formula's frequencies and angles (float64) at the positions as the library
    computes them in float32 (DINOv3's centres, EVA-02's rescaled positions; the others'
    are integers, exact in float32), each entry rounded once to float32: what the
    positions' float32 arithmetic alone costs."""
    given = patches(key, rows).T
    d = key.head_dim
    quarter = d // 4
    cos = np.empty((len(rows), d // 2))
    sin = np.empty_like(cos)
    first = PRESETS[key.model].first
    unturned = given[0] < 0
    for place, axis in enumerate((first, 1 - first)):
        index = np.where(unturned, 0, given[axis])
        hi, lo = _exact_frequencies(key)[place]
        positions = _coordinates32(key, index, axis).astype(np.float64)
        angles = positions[:, None] * (hi + lo)
        pairs = slice(place * quarter, (place + 1) * quarter)
        cos[:, pairs], sin[:, pairs] = np.cos(angles), np.sin(angles)
    cos[unturned], sin[unturned] = 1.0, 0.0
    return np.concatenate([cos, sin], axis=1).astype(F32).astype(np.float64)


def _pair_frequencies(key: VisionRotaryKey) -> Values:
    """The formula's frequency of each pair (row then column quarters; DINOv3's times 2 pi:
    its positions are the centres)."""
    first, second = _exact_frequencies(key)
    return np.concatenate([first[0] + first[1], second[0] + second[1]])


def _library_pair_frequencies(key: VisionRotaryKey) -> NDArray[np.float32]:
    """The library's frequency of each pair, in float32 (DINOv3's ``2 pi / period``)."""
    first, second = _library_frequencies(key)
    both = np.concatenate([first, second])
    if key.model != "dinov3":
        return both
    turned = _TWO_PI32 * both if key.implementation == "transformers" else _TWO_PI32 / both
    return np.asarray(turned, F32)


def _turned(key: VisionRotaryKey, at_: NDArray[np.float32], inverse: NDArray[np.float32]) -> Values:
    """float32 entries at one position per row with these frequencies (each pair's cos, then
    its sin)."""
    with np.errstate(over="ignore", invalid="ignore"):
        angles = at_[:, None] * inverse[None, :]
        return np.concatenate([kernels.cos(angles), kernels.sin(angles)], axis=1).astype(np.float64)


def _received(key: VisionRotaryKey, rows: NDArray[np.int64]) -> tuple[Values, Values]:
    """Per token and pair: its position as the formula has it and as the library computes
    it in float32 (Llama 4's class token: 0)."""
    given = patches(key, rows).T
    unturned = given[0] < 0
    first = PRESETS[key.model].first
    quarter = key.head_dim // 4
    wide = np.empty((len(rows), 2 * quarter))
    narrow = np.empty_like(wide)
    for place, axis in enumerate((first, 1 - first)):
        index = np.where(unturned, 0, given[axis])
        pairs = slice(place * quarter, (place + 1) * quarter)
        wide[:, pairs] = np.where(unturned, 0.0, _exact_coordinates(key, index, axis))[:, None]
        narrow[:, pairs] = np.where(unturned, 0.0, _coordinates32(key, index, axis))[:, None]
    return wide, narrow


AUDIT: Final[Audit[VisionRotaryKey]] = Audit(
    exact=replacing(rounding="exact", dtype="float64", periods_dtype="float32"),
    library=replacing(rounding="library", dtype="float32"),
    width=lambda key: key.head_dim,
    entries=entries,
    extent=lambda key, max_len: min(max_len, key.tokens),
    angles=Angles(
        pairs=lambda key: key.head_dim // 2,
        exact=_pair_frequencies,
        library=_library_pair_frequencies,
        turned=_turned,
        attention=lambda key: 1.0,
        # CUDA's powf: 4 ulp (the CPU's: 1)
        ulps=lambda key: 5.0,
        received=_received,
        device="What a GPU's math library may produce (an estimate): an envelope from the "
        "documented ulp bounds of CUDA's pow (4 ulp), sin and cos (2 ulp), at each pair's "
        "position as the model computes it in float32 (DINOv3's centres, EVA-02's rescaled "
        "positions).",
    ),
    paths=("library", "bf16-table", "fp16-table", "device"),
    own=(
        AuditPath(
            "bf16-periods",
            "DINOv3's original code with its periods stored in bfloat16 (the persistent "
            "buffer of a model built or saved in bfloat16); the key's table elsewhere.",
            lambda key, rows: _along(
                **(
                    {"implementation": "original", "periods_dtype": "bfloat16"}
                    if key.model == "dinov3"
                    else {}
                )
            )(key, rows),
        ),
        AuditPath(
            "float32-positions",
            "The formula's frequencies and angles at the positions as the library computes "
            "them in float32 (DINOv3's patch centres, EVA-02's rescaled positions; integer "
            "positions are exact), each entry rounded once: what float32 positions alone cost.",
            _float32_positions,
        ),
    ),
)


def engine(key: VisionRotaryKey) -> bool:
    """Whether the key's table is computed with the library engine's functions."""
    return key.rounding == "library"


FAMILY: Final = register(
    Family(
        "vision-rotary",
        VisionRotaryKey,
        fill,
        take,
        bound,
        arrays=("cos", "sin"),
        audit=AUDIT,
        presets=PRESETS,
        engine=engine,
    )
)
