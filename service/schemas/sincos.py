"""The sin-cos grid families' parameters on the wire (``GET /v1/encodings/sincos-2d`` and
``.../sincos-3d``): the grid in tokens, the row width, a preset
(:data:`service.encodings.sincos2d.PRESETS`, :data:`service.encodings.sincos3d.PRESETS`)
and the parameters it takes; and the same read from a diffusers model's ``config.json``
with the picture's size in pixels (:data:`CLASSES_2D`, :data:`CLASSES_3D`, one record a
``_class_name``).

The grid decides the rows (``extra_tokens`` or ``text_tokens`` zero rows, then one a
token): there is no ``max_len``; ``start`` and ``stop`` slice the rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings import sincos2d, sincos3d
from service.encodings.registry import DType, Rounding
from service.encodings.sincos2d import Sincos2DKey
from service.encodings.sincos3d import Sincos3DKey
from service.errors import InvalidInput, InvalidParameter
from service.schemas import hf_config
from service.schemas.common import Read
from service.schemas.hf_config import BOOLEAN, INTEGER, NUMBER, STRING, Reader

if TYPE_CHECKING:
    Preset2D = str
    Preset3D = str
else:
    Preset2D = Literal[tuple(sincos2d.PRESETS)]
    Preset3D = Literal[tuple(sincos3d.PRESETS)]
_SIDE: Final = 1 << 20  # tokens along an axis; the element limits refuse far fewer
_TAKEN = "Only the presets that take it accept it (the others refuse it)."


def _rows(start: int, stop: int | None, rows: int) -> int:
    """The row after the last returned: ``start`` and ``stop`` checked against the rows."""
    if start >= rows:
        raise InvalidParameter("start", f"must be less than the table's rows ({rows})")
    if stop is None:
        return rows
    if stop <= start:
        raise InvalidParameter("stop", f"must be greater than start ({start})")
    if stop > rows:
        raise InvalidParameter("stop", f"must be at most the table's rows ({rows})")
    return stop


class Sincos2DQuery(BaseModel):
    """Which table: the grid in tokens, the row width, a preset and the parameters it
    takes, which rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    height: int = Field(ge=1, le=_SIDE, description="Grid rows (tokens).")
    width: int = Field(ge=1, le=_SIDE, description="Grid columns (tokens).")
    dim: int = Field(ge=4, le=1 << 20, description="Row width: a multiple of 4.")
    preset: Preset2D = Field(
        "mae",
        description="mae (MAE, DiT: the indices), diffusers (get_2d_sincos_pos_embed: "
        "index / (size / base_size) / interpolation_scale; PixArt, Latte), sd3 (the "
        "pos_embed_max_size grid cropped at the centre), timm (build_sincos2d_pos_embed).",
    )
    extra_tokens: int | None = Field(
        None,
        ge=0,
        le=1 << 16,
        description=f"Zero rows first (MAE's cls token: 1). mae, diffusers. {_TAKEN}",
    )
    base_size: int | None = Field(
        None,
        ge=1,
        le=_SIDE,
        description=f"diffusers: 16; sd3: 64 (sample_size / patch_size). {_TAKEN}",
    )
    interpolation_scale: float | None = Field(
        None,
        ge=1e-6,
        le=1e6,
        allow_inf_nan=False,
        description=f"diffusers, sd3: 1 (PixArt-α 1024 px: 2). {_TAKEN}",
    )
    pos_embed_max_size: int | None = Field(
        None,
        ge=1,
        le=_SIDE,
        description=f"sd3: the square grid the table is cropped from (192; SD3.5 Medium "
        f"384); height and width at most it. {_TAKEN}",
    )
    temperature: float | None = Field(
        None, gt=1, le=1e30, allow_inf_nan=False, description=f"timm: 10000. {_TAKEN}"
    )
    interleave_sin_cos: bool | None = Field(
        None, description=f"timm: [sin h | cos h | sin w | cos w] if true. {_TAKEN}"
    )
    reverse_coord: bool | None = Field(
        None,
        description=f"timm: the width coordinate first, and the tokens column by column. {_TAKEN}",
    )
    start: int = Field(0, ge=0, description="First row returned (inclusive).")
    stop: int | None = Field(None, ge=1, description="Row after the last; default every row.")
    rounding: Rounding = Field(
        "library",
        description="library: the named code's arithmetic (float32 positions and float64 "
        "angles, one rounding; timm: float32); exact: the formula at the real positions, "
        "each entry rounded once.",
    )
    dtype: DType = Field("float32", description="Element type of the answer.")
    format: TableFormat | None = Field(
        None, description="json, npy, raw or safetensors; default by Accept."
    )

    def key(self) -> Sincos2DKey:
        given = {name: getattr(self, name) for name in sincos2d.PARAMETERS}
        key = sincos2d.preset_key(
            self.dim, self.height, self.width, self.preset, given, self.rounding, self.dtype
        )
        _rows(self.start, self.stop, key.rows)
        return key

    def row_stop(self, key: Sincos2DKey) -> int:
        return _rows(self.start, self.stop, key.rows)

    def describe(self, key: Sincos2DKey) -> dict[str, Any]:
        """The JSON answer's fields before ``data``: the parameters as resolved."""
        stop = self.row_stop(key)
        return {
            "height": key.grid_height,
            "width": key.grid_width,
            "dim": key.dim,
            "preset": key.preset,
            **key.settings(),
            "rows": key.rows,
            "start": self.start,
            "stop": stop,
            "rounding": key.rounding,
            "dtype": key.dtype,
            "shape": [stop - self.start, key.dim],
        }


class Sincos2DDocument(BaseModel):
    """The table as JSON: the parameters as resolved, then ``data``, a row a token."""

    height: int
    width: int
    dim: int
    preset: Preset2D
    extra_tokens: int
    base_size: int | None
    interpolation_scale: float | None
    pos_embed_max_size: int | None
    temperature: float
    interleave_sin_cos: bool
    reverse_coord: bool
    rows: int = Field(description="extra_tokens + height × width.")
    start: int
    stop: int
    rounding: Rounding
    dtype: DType
    shape: list[int] = Field(description="[stop - start, dim]")
    data: list[list[float]] = Field(description="A row a token (the extra tokens' first).")


class Sincos3DQuery(BaseModel):
    """Which table: the video's grid in tokens, the row width, a preset and its
    parameters, which rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    frames: int = Field(ge=1, le=_SIDE, description="Frames (tokens: after compression).")
    height: int = Field(ge=1, le=_SIDE, description="Grid rows (tokens).")
    width: int = Field(ge=1, le=_SIDE, description="Grid columns (tokens).")
    dim: int = Field(ge=16, le=1 << 20, description="Row width: a multiple of 16.")
    preset: Preset3D = Field(
        "diffusers",
        description="diffusers (get_3d_sincos_pos_embed, every parameter may be given), "
        "cogvideox (CogVideoX-2b: 1.875, 1, 226 text rows).",
    )
    spatial_interpolation_scale: float | None = Field(
        None,
        ge=1e-6,
        le=1e6,
        allow_inf_nan=False,
        description="Rows and columns divided by it (diffusers: 1; CogVideoX: 1.875). "
        "Only preset=diffusers takes it.",
    )
    temporal_interpolation_scale: float | None = Field(
        None,
        ge=1e-6,
        le=1e6,
        allow_inf_nan=False,
        description="Frames divided by it (1). Only preset=diffusers takes it.",
    )
    text_tokens: int | None = Field(
        None,
        ge=0,
        le=1 << 16,
        description="Zero rows first: the text's place (CogVideoX's max_text_seq_length, "
        "226). Only preset=diffusers takes it.",
    )
    start: int = Field(0, ge=0, description="First row returned (inclusive).")
    stop: int | None = Field(None, ge=1, description="Row after the last; default every row.")
    rounding: Rounding = Field(
        "library",
        description="library: diffusers' float32 positions and float64 angles, one "
        "rounding; exact: the formula at the real positions, each entry rounded once.",
    )
    dtype: DType = Field("float32", description="Element type of the answer.")
    format: TableFormat | None = Field(
        None, description="json, npy, raw or safetensors; default by Accept."
    )

    def key(self) -> Sincos3DKey:
        given = {name: getattr(self, name) for name in sincos3d.PARAMETERS}
        grid = (self.frames, self.height, self.width)
        key = sincos3d.preset_key(self.dim, grid, self.preset, given, self.rounding, self.dtype)
        _rows(self.start, self.stop, key.rows)
        return key

    def row_stop(self, key: Sincos3DKey) -> int:
        return _rows(self.start, self.stop, key.rows)

    def describe(self, key: Sincos3DKey) -> dict[str, Any]:
        """The JSON answer's fields before ``data``: the parameters as resolved."""
        stop = self.row_stop(key)
        return {
            "frames": key.frames,
            "height": key.grid_height,
            "width": key.grid_width,
            "dim": key.dim,
            "preset": key.preset,
            **key.settings(),
            "rows": key.rows,
            "start": self.start,
            "stop": stop,
            "rounding": key.rounding,
            "dtype": key.dtype,
            "shape": [stop - self.start, key.dim],
        }


class Sincos3DDocument(BaseModel):
    """The table as JSON: the parameters as resolved, then ``data``, a row a token."""

    frames: int
    height: int
    width: int
    dim: int
    preset: Preset3D
    spatial_interpolation_scale: float
    temporal_interpolation_scale: float
    text_tokens: int
    rows: int = Field(description="text_tokens + frames × height × width.")
    start: int
    stop: int
    rounding: Rounding
    dtype: DType
    shape: list[int] = Field(description="[stop - start, dim]")
    data: list[list[float]] = Field(description="A row a token (the text's first).")


class _FromConfig(BaseModel):
    """What a diffusers model's config does not say: the picture's size, which rows, in
    what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    height: int | None = Field(
        None,
        ge=1,
        le=1 << 24,
        description="Picture height in pixels; default the config's sample_size (latent) "
        "times the VAE's 8.",
    )
    width: int | None = Field(
        None,
        ge=1,
        le=1 << 24,
        description="Picture width in pixels; default the config's, as height's.",
    )
    start: int = Field(0, ge=0, description="First row returned.")
    stop: int | None = Field(None, ge=1, description="Row after the last; default every row.")
    rounding: Rounding = Field("library", description="As for the GET.")
    dtype: DType = Field("float32", description="As for the GET.")
    format: TableFormat | None = Field(None, description="As for the GET.")


class Sincos2DFromConfig(_FromConfig):
    """A picture's size in pixels; the grid is the latent's (pixels / 8) in patches."""


class Sincos3DFromConfig(_FromConfig):
    """A video's size in pixels and frames; the grid is the latent's in patches."""

    frames: int | None = Field(
        None,
        ge=1,
        le=1 << 20,
        description="Frames of the video; default the config's sample_frames (49). The "
        "latent has (frames - 1) / temporal_compression_ratio + 1.",
    )


# the pictures' pixels per latent pixel: the VAEs of every class read here
VAE_SCALE: Final = 8
FIELDS: Final = hf_config.fields(
    {
        "_class_name": STRING,
        "use_rotary_positional_embeddings": BOOLEAN,
        "use_learned_positional_embeddings": BOOLEAN,
        "interpolation_scale": NUMBER,
        "spatial_interpolation_scale": NUMBER,
        "temporal_interpolation_scale": NUMBER,
        **dict.fromkeys(
            (
                "sample_size",
                "sample_height",
                "sample_width",
                "sample_frames",
                "patch_size",
                "pos_embed_max_size",
                "temporal_compression_ratio",
                "max_text_seq_length",
                "num_attention_heads",
                "attention_head_dim",
            ),
            INTEGER,
        ),
    }
)


@dataclass(frozen=True, slots=True)
class DiffusersClass:
    """A diffusers 0.42.1 model class's 2-D table (its ``PatchEmbed``): the preset whose
    arithmetic it runs, its defaults (heads, head width, sample size, patch), how it sets
    ``interpolation_scale``, whether it crops from ``pos_embed_max_size``, and where."""

    preset: str
    heads: int
    head_dim: int
    sample_size: int
    source: str
    interpolation: Callable[[Reader, int], float] = lambda config, sample: 1.0
    cropped: bool = False


def _by_sample(config: Reader, sample: int) -> float:
    """PixArt's and Latte's ``max(sample_size // 64, 1)``."""
    return float(max(sample // 64, 1))


def _pixart(config: Reader, sample: int) -> float:
    """PixArt's ``interpolation_scale``, else ``max(sample_size // 64, 1)``."""
    value = config.get("interpolation_scale")
    return _by_sample(config, sample) if value is None else float(value)


CLASSES_2D: Final[Mapping[str, DiffusersClass]] = {
    "SD3Transformer2DModel": DiffusersClass(
        "sd3",
        18,
        64,
        128,
        "models/transformers/transformer_sd3.py: PatchEmbed(sample_size, sample_size, "
        "patch_size, pos_embed_max_size=...)",
        cropped=True,
    ),
    "PixArtTransformer2DModel": DiffusersClass(
        "diffusers",
        16,
        72,
        128,
        "models/transformers/pixart_transformer_2d.py: PatchEmbed(..., interpolation_scale)",
        _pixart,
    ),
    "DiTTransformer2DModel": DiffusersClass(
        "diffusers",
        16,
        72,
        32,
        "models/transformers/dit_transformer_2d.py: PatchEmbed(sample_size, sample_size, "
        "patch_size)",
    ),
    "LatteTransformer3DModel": DiffusersClass(
        "diffusers",
        16,
        88,
        64,
        "models/transformers/latte_transformer_3d.py: PatchEmbed(..., interpolation_scale="
        "max(sample_size // 64, 1)), each frame's spatial table",
        _by_sample,
    ),
}
CLASSES_3D: Final = ("CogVideoXTransformer3DModel",)


def _class(top: Reader, known: Mapping[str, Any] | tuple[str, ...], what: str) -> str:
    name = top.get("_class_name")
    if name is None or name not in known:
        said = "is missing" if name is None else f"is {name!r}"
        raise InvalidInput(
            "_class_name", f"{said}: the {what} is read from the configs of {', '.join(known)}"
        )
    return str(name)


def _tokens(pixels: int | None, latent: int, patch: int, name: str) -> int:
    """Tokens along an axis: the picture's pixels (default the sample's latent size) over
    the VAE's 8, over the patch."""
    size = latent if pixels is None else pixels // VAE_SCALE
    tokens = size // patch
    if tokens < 1:
        raise InvalidParameter(name, f"makes no patch: at least {VAE_SCALE * patch} pixels")
    return tokens


def sincos2d_query(config: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """A diffusers model config's 2-D table: its class's preset and parameters, the grid
    of the picture asked for (its ``height`` and ``width`` in pixels), and the fields read."""
    top = Reader(config)
    record = CLASSES_2D[_class(top, CLASSES_2D, "2-D sin-cos table")]
    sample = top.get_or("sample_size", record.sample_size)
    patch = top.get_or("patch_size", 2)
    if not isinstance(patch, int) or patch < 1:
        raise InvalidInput("patch_size", "must be a positive integer (a patched model)")
    heads = top.get_or("num_attention_heads", record.heads)
    dim = heads * top.get_or("attention_head_dim", record.head_dim)
    height = asked.get("height")
    query: dict[str, Any] = {
        "preset": record.preset,
        "dim": dim,
        "height": _tokens(height, sample, patch, "height"),
        "width": _tokens(asked.get("width"), sample, patch, "width"),
        "base_size": sample // patch,
        "interpolation_scale": record.interpolation(top, sample),
    }
    if record.cropped:
        query["pos_embed_max_size"] = top.get_or("pos_embed_max_size", 96)
    return Read({"": query}, None, tuple(top.read))


def sincos3d_query(config: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """A CogVideoX config's 3-D table (where it has one: not with rotary or learned
    embeddings), the grid of the video asked for, and the fields read."""
    top = Reader(config)
    _class(top, CLASSES_3D, "3-D sin-cos table")
    for name in ("use_rotary_positional_embeddings", "use_learned_positional_embeddings"):
        if top.get_or(name, False):
            raise InvalidInput(
                name,
                "is true: this model's positions are "
                + ("rotary (CogVideoX 5B, 1.5)" if "rotary" in name else "learned weights")
                + ", not a sin-cos table",
            )
    patch = top.get_or("patch_size", 2)
    if not isinstance(patch, int) or patch < 1:
        raise InvalidInput("patch_size", "must be a positive integer")
    dim = top.get_or("num_attention_heads", 30) * top.get_or("attention_head_dim", 64)
    height = asked.get("height")
    frames = asked.get("frames")
    frames = top.get_or("sample_frames", 49) if frames is None else frames
    query = {
        "preset": "diffusers",
        "dim": dim,
        "frames": (frames - 1) // top.get_or("temporal_compression_ratio", 4) + 1,
        "height": _tokens(height, top.get_or("sample_height", 60), patch, "height"),
        "width": _tokens(asked.get("width"), top.get_or("sample_width", 90), patch, "width"),
        "spatial_interpolation_scale": top.get_or("spatial_interpolation_scale", 1.875),
        "temporal_interpolation_scale": top.get_or("temporal_interpolation_scale", 1.0),
        "text_tokens": top.get_or("max_text_seq_length", 226),
    }
    return Read({"": query}, None, tuple(top.read))
