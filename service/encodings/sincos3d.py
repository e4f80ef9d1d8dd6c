"""3-D sin-cos tables of a video's patch grid (diffusers' ``get_3d_sincos_pos_embed``,
CogVideoX-2b's ``CogVideoXPatchEmbed``): ``text_tokens`` zero rows (the text's place in
the joint sequence), then one row a token, frame by frame, each frame row-major (token
``t · height · width + i · width + j``). A row is the frame's embedding (``dim / 4``
columns, ``[sin | cos]`` of ``dim / 8`` frequencies), then the patch's (``3·dim / 4``
columns laid out as the 2-D tables' ``[w | h]`` halves, ``3·dim / 16`` frequencies each)::

    [sin(t·ω_t) | cos(t·ω_t) | sin(x·ω_s) | cos(x·ω_s) | sin(y·ω_s) | cos(y·ω_s)]

with ``t = frame / temporal_interpolation_scale``, ``x = column /
spatial_interpolation_scale``, ``y = row / spatial_interpolation_scale`` (float32
divisions in ``library``), ``ω = 10000^(-k / count)``. ``rounding=library``: diffusers'
float64 angles from float32 positions, one rounding at the end (the model casts the
buffer to its dtype); ``exact``: the real positions, each entry rounded once."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.encodings import _grid
from service.encodings._grid import Axis, Part
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
    "spatial_interpolation_scale",
    "temporal_interpolation_scale",
    "text_tokens",
)
# the column blocks: axis 0 the frames', 1 the rows' (height), 2 the columns' (width)
_LAYOUT: Final[tuple[tuple[int, Part], ...]] = (
    (0, "sin"),
    (0, "cos"),
    (2, "sin"),
    (2, "cos"),
    (1, "sin"),
    (1, "cos"),
)


@dataclass(frozen=True, slots=True)
class Preset:
    """A model's 3-D table: its sources, the parameters it sets, and those a client may
    give (``takes``; the rest are refused)."""

    name: str
    description: str
    sources: tuple[Source, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    takes: tuple[str, ...] = ()

    @property
    def arithmetic(self) -> str:
        """diffusers': float32 positions, float64 angles, one rounding at the end."""
        return "float64"

    @property
    def rows(self) -> str:
        """What row ``r`` of its table is."""
        return (
            "text_tokens zero rows, then a row a token of the frames × height × width grid, "
            "frame by frame, each frame row-major"
        )


_FUNCTION: Final = Source(
    "huggingface/diffusers",
    "0.42.1",
    "src/diffusers/models/embeddings.py",
    "get_3d_sincos_pos_embed",
)
PRESETS: Final[Mapping[str, Preset]] = {
    preset.name: preset
    for preset in (
        Preset(
            "diffusers",
            "get_3d_sincos_pos_embed with its defaults (both scales 1, no text rows); every "
            "parameter may be given",
            (_FUNCTION,),
            takes=PARAMETERS,
        ),
        Preset(
            "cogvideox",
            "CogVideoX-2b: spatial_interpolation_scale 1.875, temporal 1, 226 text rows first",
            (
                _FUNCTION,
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/embeddings.py",
                    "CogVideoXPatchEmbed._get_positional_embeddings",
                ),
            ),
            {"spatial_interpolation_scale": 1.875, "text_tokens": 226},
        ),
    )
}
DEFAULTS: Final[Mapping[str, Any]] = {
    "spatial_interpolation_scale": 1.0,
    "temporal_interpolation_scale": 1.0,
    "text_tokens": 0,
}


@dataclass(frozen=True, slots=True)
class Sincos3DKey:
    """Everything that changes a 3-D table's values: the row's width (``dim``), the grid
    (``frames`` × ``grid_height`` × ``grid_width`` tokens: ``height`` and ``width`` on the
    wire), the scales, the text rows, the rounding and the answer's dtype."""

    dim: int
    frames: int
    grid_height: int
    grid_width: int
    preset: str = "diffusers"
    spatial_interpolation_scale: float = 1.0
    temporal_interpolation_scale: float = 1.0
    text_tokens: int = 0
    rounding: Rounding = "library"
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
        if self.dim < 16 or self.dim % 16:
            raise InvalidParameter(
                "dim",
                "must be a positive multiple of 16: the frames take dim / 4 columns and the "
                "patches 3·dim / 4, each coordinate's sines and cosines of 3·dim / 16 "
                "frequencies (get_3d_sincos_pos_embed's own condition)",
            )
        for name, value in (
            ("frames", self.frames),
            ("height", self.grid_height),
            ("width", self.grid_width),
        ):
            if value < 1:
                raise InvalidParameter(name, "must be a positive integer (tokens)")
        if self.text_tokens < 0:
            raise InvalidParameter("text_tokens", "must be 0 or more")
        for name in ("spatial_interpolation_scale", "temporal_interpolation_scale"):
            scale = getattr(self, name)
            if not (math.isfinite(scale) and scale > 0):
                raise InvalidParameter(name, "must be a finite number above 0")
        if self.rounding not in ROUNDINGS:
            raise InvalidParameter("rounding", f"must be one of {', '.join(ROUNDINGS)}")
        if self.dtype not in DTYPES:
            raise InvalidParameter("dtype", f"must be one of {', '.join(DTYPES)}")
        if self.rounding == "exact":
            sizes = (self.frames, self.grid_height, self.grid_width)
            reach = max(a.largest_position(s) for a, s in zip(self.axes, sizes, strict=True))
            if reach > _grid.LARGEST_ANGLE:
                raise InvalidParameter(
                    "rounding",
                    f"exact angles are computed up to 2^31 radians, and these reach {reach:.4g}:"
                    " ask for rounding=library, or larger interpolation scales",
                    also=("spatial_interpolation_scale", "temporal_interpolation_scale"),
                )

    @property
    def width(self) -> int:
        return self.dim

    @property
    def rows(self) -> int:
        """The table's rows: the text's zero rows, then one a video token."""
        return self.text_tokens + self.frames * self.grid_height * self.grid_width

    @property
    def axes(self) -> tuple[Axis, Axis, Axis]:
        """The frames' axis, the rows' (height) and the columns' (width)."""
        temporal = Axis(0, *_grid.scaled(self.temporal_interpolation_scale), self.dim // 8, 1e4)
        spatial = Axis(0, *_grid.scaled(self.spatial_interpolation_scale), 3 * self.dim // 16, 1e4)
        return temporal, spatial, spatial

    def settings(self) -> dict[str, Any]:
        """The preset's parameters by their names."""
        return {name: getattr(self, name) for name in PARAMETERS}


def preset_key(
    dim: int,
    grid: tuple[int, int, int],
    preset: str,
    given: Mapping[str, Any],
    rounding: Rounding,
    dtype: DType,
) -> Sincos3DKey:
    """The key of ``preset``'s table of the ``(frames, height, width)`` grid with the
    parameters a client gave (``None``: not given): a parameter the preset fixes is an
    :class:`InvalidParameter`."""
    if preset not in PRESETS:
        raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
    chosen = PRESETS[preset]
    settings = {**DEFAULTS, **chosen.settings}
    for name, value in given.items():
        if value is None:
            continue
        if name not in chosen.takes:
            raise InvalidParameter(
                name,
                f"is fixed by preset {preset} ({settings[name]}): give it with "
                "preset=diffusers, which takes every parameter",
            )
        settings[name] = value
    return Sincos3DKey(dim, *grid, preset, **settings, rounding=rounding, dtype=dtype)


def take(key: Sincos3DKey, positions: NDArray[np.int64]) -> Rows:
    """The rows at ``positions`` (row indices of the table)."""
    return along(key, positions, "float64")


def along(key: Sincos3DKey, positions: NDArray[np.int64], arithmetic: _grid.Arithmetic) -> Rows:
    """The rows at ``positions``, computed in ``arithmetic`` (diffusers' float64 for the
    table; float32 for an audit's path)."""
    out = np.zeros((len(positions), key.dim), dtype=key.dtype)
    tokens = np.asarray(positions, dtype=np.int64) - key.text_tokens
    video = tokens >= 0
    if not video.any():
        return out
    frame, cell = np.divmod(tokens[video], key.grid_height * key.grid_width)
    row, column = np.divmod(cell, key.grid_width)
    part = np.empty((len(frame), key.dim), dtype=key.dtype)
    _grid.fill_rows(
        part, (frame, row, column), key.axes, _LAYOUT, arithmetic, key.rounding == "exact"
    )
    out[video] = part
    return out


def fill(key: Sincos3DKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part), dtype=np.int64))
        start += len(part)


def bound(key: Sincos3DKey) -> Bound:
    """Entries are sines and cosines; positions past float32's range make them NaN."""
    return Bound(1.0, ("spatial_interpolation_scale", "temporal_interpolation_scale"))


AUDIT: Final[Audit[Sincos3DKey]] = _grid.audit(along)
FAMILY: Final = register(
    Family("sincos-3d", Sincos3DKey, fill, take, bound, audit=AUDIT, presets=PRESETS)
)
