"""2-D sin-cos tables of a patch grid (MAE, DiT, PixArt, SD3, timm): the table of an
``height × width`` grid, one row a token in the model's order (row-major: token ``i ·
width + j`` is row ``i``, column ``j``), ``extra_tokens`` zero rows first. Half the columns
encode one coordinate, half the other; each half is ``[sin | cos]`` of ``dim / 4``
frequencies ``10000^(-k / (dim / 4))``::

    MAE, DiT, diffusers, SD3:  [sin(x·ω) | cos(x·ω) | sin(y·ω) | cos(y·ω)]
    timm:                      [sin(y·ω) | sin(x·ω) | cos(y·ω) | cos(x·ω)]
    timm, interleave_sin_cos:  [sin(y·ω) | cos(y·ω) | sin(x·ω) | cos(x·ω)]

with ``x`` the column's position and ``y`` the row's. The first half is the *width*
coordinate in MAE's and diffusers' code, although their variable calls it ``emb_h``
(``meshgrid(grid_w, grid_h)`` puts the width first): ``[w | h]``. Positions are the
indices (MAE, DiT, timm), or diffusers' ``index / (size / base_size) /
interpolation_scale`` (PixArt's resolution normalisation; SD3 over its
``pos_embed_max_size`` grid, cropped at the centre).

``rounding=library``: the named code's arithmetic (:mod:`service.encodings._grid`: float32
positions, float64 angles and one rounding for MAE, DiT and diffusers; timm's float32).
``rounding=exact``: the formula at the real positions, each entry rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.encodings import _grid
from service.encodings._grid import Arithmetic, Axis, Part
from service.encodings.registry import (
    DTYPES,
    ROUNDINGS,
    Audit,
    Bound,
    DType,
    Family,
    Rounding,
    Rows,
    Source,
    register,
)
from service.errors import InvalidParameter

PARAMETERS: Final = (
    "extra_tokens",
    "base_size",
    "interpolation_scale",
    "pos_embed_max_size",
    "temperature",
    "interleave_sin_cos",
    "reverse_coord",
)
DEFAULTS: Final[Mapping[str, Any]] = {
    "extra_tokens": 0,
    "base_size": None,
    "interpolation_scale": None,
    "pos_embed_max_size": None,
    "temperature": 10000.0,
    "interleave_sin_cos": False,
    "reverse_coord": False,
}
# the column blocks: (axis, sin or cos), axis 0 the rows' (height), 1 the columns' (width)
Layout = tuple[tuple[int, Part], ...]
_HALVES: Final[Layout] = ((1, "sin"), (1, "cos"), (0, "sin"), (0, "cos"))


@dataclass(frozen=True, slots=True)
class Preset:
    """A model's 2-D table: its sources, the parameters it sets and the ones a client may
    give (``takes``; the rest are refused), its arithmetic, and whether its positions are
    diffusers' scaled ones (``base_size``, ``interpolation_scale``) or the indices."""

    name: str
    description: str
    sources: tuple[Source, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    takes: tuple[str, ...] = ()
    arithmetic: Arithmetic = "float64"
    scaled: bool = False

    @property
    def rows(self) -> str:
        """What row ``r`` of its table is."""
        zeros = "extra_tokens zero rows, then " if "extra_tokens" in self.takes else ""
        order = "column by column with reverse_coord" if self.name == "timm" else "row-major"
        return f"{zeros}a row a token of the height × width grid ({order})"


_DIFFUSERS: Final = Source(
    "huggingface/diffusers",
    "0.42.1",
    "src/diffusers/models/embeddings.py",
    "get_2d_sincos_pos_embed",
)
_PATCH_EMBED: Final = Source(
    "huggingface/diffusers", "0.42.1", "src/diffusers/models/embeddings.py", "PatchEmbed"
)
PRESETS: Final[Mapping[str, Preset]] = {
    preset.name: preset
    for preset in (
        Preset(
            "mae",
            "MAE and DiT: positions the indices, float32 grid, float64 angles, one rounding; "
            "extra_tokens zero rows first (MAE's cls_token: 1)",
            (
                Source(
                    "facebookresearch/mae",
                    "efb2a80",
                    "util/pos_embed.py",
                    "get_2d_sincos_pos_embed",
                ),
                Source("facebookresearch/DiT", "ed81ce2", "models.py", "get_2d_sincos_pos_embed"),
            ),
            takes=("extra_tokens",),
        ),
        Preset(
            "diffusers",
            "get_2d_sincos_pos_embed: positions index / (size / base_size) / "
            "interpolation_scale (PixArt-α/Σ, Latte, DiT in diffusers); base_size 16, "
            "interpolation_scale 1 unless given",
            (_DIFFUSERS, _PATCH_EMBED),
            {"base_size": 16, "interpolation_scale": 1.0},
            takes=("extra_tokens", "base_size", "interpolation_scale"),
            scaled=True,
        ),
        Preset(
            "sd3",
            "SD3/SD3.5's PatchEmbed: the table of a pos_embed_max_size square grid (192; "
            "SD3.5 Medium 384), base_size 64 (sample_size / patch_size), cropped at the "
            "centre to height × width (a persistent buffer: a checkpoint's pos_embed "
            "replaces it when loaded)",
            (
                _PATCH_EMBED,
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/embeddings.py",
                    "PatchEmbed.cropped_pos_embed",
                ),
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/transformers/transformer_sd3.py",
                    "SD3Transformer2DModel",
                ),
            ),
            {"base_size": 64, "interpolation_scale": 1.0, "pos_embed_max_size": 192},
            takes=("base_size", "interpolation_scale", "pos_embed_max_size"),
            scaled=True,
        ),
        Preset(
            "timm",
            "timm's build_sincos2d_pos_embed in float32: [sin h | sin w | cos h | cos w] "
            "(interleave_sin_cos: [sin h | cos h | sin w | cos w]; reverse_coord: w before "
            "h, and the tokens column by column)",
            (
                Source(
                    "huggingface/pytorch-image-models",
                    "1.0.31",
                    "timm/layers/pos_embed_sincos.py",
                    "build_sincos2d_pos_embed",
                ),
            ),
            takes=("temperature", "interleave_sin_cos", "reverse_coord"),
            arithmetic="float32",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Sincos2DKey:
    """Everything that changes a 2-D table's values: the width of a row (``dim``), the
    grid (``grid_height`` × ``grid_width`` tokens: ``height`` and ``width`` on the wire),
    the preset and its parameters, the rounding and the answer's dtype."""

    dim: int
    grid_height: int
    grid_width: int
    preset: str = "mae"
    extra_tokens: int = 0
    base_size: int | None = None
    interpolation_scale: float | None = None
    pos_embed_max_size: int | None = None
    temperature: float = 10000.0
    interleave_sin_cos: bool = False
    reverse_coord: bool = False
    rounding: Rounding = "library"
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
        if self.dim < 4 or self.dim % 4:
            raise InvalidParameter(
                "dim",
                "must be a positive multiple of 4: each of the two coordinates takes the "
                "sines and cosines of dim / 4 frequencies",
            )
        for name, value in (("height", self.grid_height), ("width", self.grid_width)):
            if value < 1:
                raise InvalidParameter(name, "must be a positive integer (tokens)")
        if self.extra_tokens < 0:
            raise InvalidParameter("extra_tokens", "must be 0 or more")
        if self.rounding not in ROUNDINGS:
            raise InvalidParameter("rounding", f"must be one of {', '.join(ROUNDINGS)}")
        if self.dtype not in DTYPES:
            raise InvalidParameter("dtype", f"must be one of {', '.join(DTYPES)}")
        if not (math.isfinite(self.temperature) and self.temperature > 1):
            raise InvalidParameter("temperature", "must be a finite number greater than 1")
        if PRESETS[self.preset].scaled:
            if self.base_size is None or self.base_size < 1:
                raise InvalidParameter("base_size", "must be a positive integer")
            scale = self.interpolation_scale
            if scale is None or not (math.isfinite(scale) and scale > 0):
                raise InvalidParameter("interpolation_scale", "must be a finite number above 0")
        largest = self.pos_embed_max_size
        if largest is not None:
            if largest < 1:
                raise InvalidParameter("pos_embed_max_size", "must be a positive integer")
            for name, value in (("height", self.grid_height), ("width", self.grid_width)):
                if value > largest:
                    raise InvalidParameter(
                        name,
                        f"is {value} tokens, past pos_embed_max_size ({largest}): the table "
                        "is cropped from a grid of that size",
                        also=("pos_embed_max_size",),
                    )
        if self.rounding == "exact":
            reach = max(
                axis.largest_position(size)
                for axis, size in zip(self.axes, self.sizes, strict=True)
            )
            if reach > _grid.LARGEST_ANGLE:
                raise InvalidParameter(
                    "rounding",
                    f"exact angles are computed up to 2^31 radians, and these reach {reach:.4g}: "
                    "ask for rounding=library, or a larger interpolation_scale",
                    also=("interpolation_scale",),
                )

    @property
    def width(self) -> int:
        return self.dim

    @property
    def rows(self) -> int:
        """The table's rows: the extra tokens' zero rows, then one a grid token."""
        return self.extra_tokens + self.grid_height * self.grid_width

    @property
    def sizes(self) -> tuple[int, int]:
        return self.grid_height, self.grid_width

    @property
    def axes(self) -> tuple[Axis, Axis]:
        """The rows' axis (height) and the columns' (width)."""
        count = self.dim // 4
        if not PRESETS[self.preset].scaled:
            indices = Axis(0, *_grid.INTEGER, count, self.temperature)
            return indices, indices
        base, scale = self.base_size or 16, self.interpolation_scale or 1.0  # checked set
        side = self.pos_embed_max_size
        made = []
        for size in self.sizes:
            grid = size if side is None else side
            divisors, real = _grid.divisors(grid, base, scale)
            made.append(Axis((grid - size) // 2, divisors, real, count, self.temperature))
        return made[0], made[1]

    def settings(self) -> dict[str, Any]:
        """The preset's parameters by their names."""
        return {name: getattr(self, name) for name in PARAMETERS}


def preset_key(
    dim: int,
    height: int,
    width: int,
    preset: str,
    given: Mapping[str, Any],
    rounding: Rounding,
    dtype: DType,
) -> Sincos2DKey:
    """The key of ``preset``'s table with the parameters a client gave (``None``: not
    given): a parameter the preset does not take is an :class:`InvalidParameter`."""
    if preset not in PRESETS:
        raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
    chosen = PRESETS[preset]
    settings = {**DEFAULTS, **chosen.settings}
    for name, value in given.items():
        if value is None:
            continue
        if name not in chosen.takes:
            takers = ", ".join(p.name for p in PRESETS.values() if name in p.takes)
            raise InvalidParameter(
                name,
                f"is not a parameter of preset {preset} (it takes "
                f"{', '.join(chosen.takes) or 'none'}); presets that take it: {takers}",
            )
        settings[name] = value
    return Sincos2DKey(dim, height, width, preset, **settings, rounding=rounding, dtype=dtype)


def _layout(key: Sincos2DKey) -> tuple[tuple[int, Part], ...]:
    if PRESETS[key.preset].arithmetic == "float64":
        return _HALVES
    first, second = (1, 0) if key.reverse_coord else (0, 1)
    if key.interleave_sin_cos:
        return ((first, "sin"), (first, "cos"), (second, "sin"), (second, "cos"))
    return ((first, "sin"), (second, "sin"), (first, "cos"), (second, "cos"))


def take(key: Sincos2DKey, positions: NDArray[np.int64]) -> Rows:
    """The rows at ``positions`` (row indices of the table)."""
    return along(key, positions, PRESETS[key.preset].arithmetic)


def along(key: Sincos2DKey, positions: NDArray[np.int64], arithmetic: _grid.Arithmetic) -> Rows:
    """The rows at ``positions`` in the key's layout, computed in ``arithmetic`` (the
    preset's for the table; the other for an audit's path)."""
    out = np.zeros((len(positions), key.dim), dtype=key.dtype)
    tokens = np.asarray(positions, dtype=np.int64) - key.extra_tokens
    grid = tokens >= 0
    if not grid.any():
        return out
    tokens = tokens[grid]
    if key.reverse_coord:  # timm's grid of (width, height): the tokens column by column
        column, row = np.divmod(tokens, key.grid_height)
    else:
        row, column = np.divmod(tokens, key.grid_width)
    part = np.empty((len(tokens), key.dim), dtype=key.dtype)
    _grid.fill_rows(
        part,
        (row, column),
        key.axes,
        _layout(key),
        arithmetic,
        key.rounding == "exact",
    )
    out[grid] = part
    return out


def fill(key: Sincos2DKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part), dtype=np.int64))
        start += len(part)


def bound(key: Sincos2DKey) -> Bound:
    """Entries are sines and cosines; positions past float32's range make them NaN."""
    return Bound(1.0, ("interpolation_scale",))


AUDIT: Final[Audit[Sincos2DKey]] = _grid.audit(along)
FAMILY: Final = register(
    Family("sincos-2d", Sincos2DKey, fill, take, bound, audit=AUDIT, presets=PRESETS)
)
