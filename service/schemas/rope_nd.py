"""The multi-axis RoPE family's parameters on the wire (``GET /v1/encodings/rope-nd``,
``POST .../positions`` and ``.../apply``): the grid in patches, the axes' widths, theta, the
text tokens before the grid, the frequencies' and the ids' dtypes, and a preset
(:data:`service.encodings.rope_nd.PRESETS`) that fixes a model's; and the same read from a
diffusers transformer's ``config.json`` with the image's size (:data:`CLASSES`, one record
a ``_class_name``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import Format
from service.encodings.registry import DType, Rounding
from service.encodings.rope_nd import (
    MAX_AXES,
    PRESETS,
    Arithmetic,
    FreqsDType,
    Layout,
    RopeNdKey,
    preset_key,
)
from service.encodings.timestep import TimestepDType
from service.errors import InvalidInput, InvalidParameter
from service.schemas import hf_config
from service.schemas.common import RawBodyFields, Read
from service.schemas.hf_config import BOOLEAN, INTEGER, NUMBER, NUMBERS, STRING, Reader
from service.schemas.hf_models import ModelType
from service.settings import POSITION_CEILING

# mypy reads a str; pydantic and the OpenAPI document the presets' names
if TYPE_CHECKING:
    PresetName = str
else:
    PresetName = Literal[tuple(PRESETS)]
_FIXED = "Default: the preset's; preset=diffusers takes it (the others fix it or take it)."


def integers(name: str, text: str | None, count: int | None = None) -> tuple[int, ...] | None:
    """Comma-separated integers (``None``: not given), refused naming ``name``."""
    if text is None:
        return None
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise InvalidParameter(name, "must be integers, comma-separated") from None
    if count is not None and len(values) > count:
        raise InvalidParameter(name, f"must name at most {count} values")
    return values


class RopeNdFields(BaseModel):
    """Which table: the grid, a preset, the embedding's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grid: str = Field(
        max_length=128,
        description="The latent grid in patches, comma-separated: H,W for images (FLUX, "
        "FLUX.2, Qwen-Image; preset=diffusers: one size per axis), T,H,W for video "
        "(HunyuanVideo, Wan, CogVideoX). Rows: text_tokens, then its cells in row-major order.",
    )
    preset: PresetName = Field(
        "diffusers",
        description="diffusers (get_1d_rotary_pos_embed per axis, every parameter may be "
        "given), flux, flux-bfl, flux2, hunyuan-video, wan, cogvideox, cogvideox-1.5, "
        "qwen-image.",
    )
    axes_dim: str | None = Field(
        None,
        max_length=128,
        description=f"Each axis's width, even, comma-separated (16,56,56). {_FIXED}",
    )
    head_dim: int | None = Field(
        None,
        ge=2,
        le=1 << 16,
        description="The attention head's width: the axes' sum (checked), or what Wan "
        "(128: 44,42,42) and CogVideoX (64: 16,24,24) split into their axes.",
    )
    theta: float | None = Field(
        None, gt=0, le=1e300, allow_inf_nan=False, description=f"10000. {_FIXED}"
    )
    freqs_dtype: FreqsDType | None = Field(
        None,
        description=f"The frequencies' dtype: float32 (diffusers' default) or float64. {_FIXED}",
    )
    text_tokens: int | None = Field(
        None,
        ge=0,
        le=POSITION_CEILING,
        description="Text tokens before the grid (FLUX, FLUX.2), with the ids the model gives "
        "text. Default 0.",
    )
    ids_dtype: TimestepDType | None = Field(
        None,
        description="The ids as the pipeline builds them: float32, or bfloat16 / float16 "
        "(FLUX's pipeline in its dtype: bfloat16 holds integers exactly only to 256).",
    )
    layout: Layout = Field(
        "interleaved",
        description="interleaved: pairs (2i, 2i+1), each cos twice (repeat_interleave_real); "
        "half: the head's pairs (i, i + head_dim/2), cos concatenated with itself.",
    )
    base_grid: str | None = Field(
        None,
        max_length=64,
        description="cogvideox only: the pipeline's base size in patches, rows,columns "
        "(sample_height, sample_width / patch_size: 30,45), whose crop region the grid's "
        "rows and columns spread over.",
    )
    rounding: Rounding = Field(
        "library",
        description="library: the named code's arithmetic (float64 or float32); exact: the "
        "formula at the ids, each entry rounded once.",
    )

    def table_key(self, dtype: DType) -> RopeNdKey:
        """The table's key, its rows of ``dtype``."""
        given = {
            "axes_dim": integers("axes_dim", self.axes_dim, MAX_AXES),
            "theta": self.theta,
            "freqs_dtype": self.freqs_dtype,
            "text_tokens": self.text_tokens,
            "ids_dtype": self.ids_dtype,
            "base_grid": integers("base_grid", self.base_grid, 2),
        }
        grid = integers("grid", self.grid, MAX_AXES) or ()
        return preset_key(
            self.preset, grid, given, self.head_dim, self.layout, self.rounding, dtype
        )


class RopeNdQuery(RopeNdFields):
    """Which table, which rows, in what form."""

    start: int = Field(0, ge=0, description="First token returned (inclusive).")
    stop: int | None = Field(None, ge=1, description="Token after the last; default all.")
    dtype: DType = Field("float32", description="Element type of the answer.")
    format: Format | None = Field(
        None, description="json, npy, npz, raw or safetensors; default by Accept."
    )

    def key(self) -> RopeNdKey:
        key = self.table_key(self.dtype)
        if self.start >= key.tokens:
            raise InvalidParameter("start", f"must be below the {key.tokens} tokens")
        if self.stop is not None and not self.start < self.stop <= key.tokens:
            raise InvalidParameter("stop", f"must be after start and at most {key.tokens}")
        return key

    def row_stop(self, key: RopeNdKey) -> int:
        return key.tokens if self.stop is None else self.stop

    def describe(self, key: RopeNdKey) -> dict[str, Any]:
        """The JSON answer's fields before ``cos`` and ``sin``: the parameters as resolved."""
        stop = self.row_stop(key)
        return {
            "grid": list(key.grid),
            "tokens": key.tokens,
            "preset": key.preset,
            **key.settings(),
            "head_dim": key.head_dim,
            "layout": key.layout,
            "start": self.start,
            "stop": stop,
            "rounding": key.rounding,
            "dtype": key.dtype,
            "shape": [2, stop - self.start, key.head_dim],
        }


class RopeNdDocument(BaseModel):
    """The tables as JSON: the parameters as resolved, then ``cos`` and ``sin``, a row a
    token."""

    grid: list[int]
    tokens: int
    preset: PresetName
    axes_dim: list[int]
    theta: float
    freqs_dtype: FreqsDType
    text_tokens: int
    ids_dtype: TimestepDType
    base_grid: list[int]
    head_dim: int
    layout: Layout
    start: int
    stop: int
    rounding: Rounding
    dtype: DType
    shape: list[int] = Field(description="[2, stop - start, head_dim]")
    cos: list[list[float]] = Field(description="Each token's cosines.")
    sin: list[list[float]] = Field(description="Each token's sines.")


class RopeNdApplyQuery(RopeNdFields, RawBodyFields):
    """How to rotate a posted batch ``(B, heads, L, head_dim)``: the table of its tokens
    (rows ``0 .. L-1``), the arithmetic, the answer's form (a raw body's shape and dtype
    too)."""

    arithmetic: Arithmetic | None = Field(
        None,
        description="The rotation's dtype: float32 (diffusers' apply_rotary_emb, x.float() * "
        "cos + rotated * sin) or float64 (Wan2.1's rope_apply, complex128). Default: the "
        "batch's (float32 for float16 and float32, float64 for float64).",
    )
    format: Format | None = Field(
        None, description="Answer format (json, npy, npz, raw, safetensors); default the body's."
    )

    def key(self, head_dim: int, dtype: DType) -> RopeNdKey:
        """The table for a batch of heads ``head_dim`` wide, in the arithmetic's dtype."""
        key = self.table_key(self.arithmetic or dtype)
        if head_dim != key.head_dim:
            raise InvalidParameter(
                "axes_dim",
                f"sum to {key.head_dim}, not the embeddings' head width {head_dim}",
                also=("head_dim",),
            )
        return key


class RopeNdFromConfig(BaseModel):
    """What a diffusers model's config does not say: the image or video's size in pixels,
    the text tokens, which rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    height: int | None = Field(
        None, ge=1, le=1 << 20, description="The image's or video's height in pixels."
    )
    width: int | None = Field(
        None, ge=1, le=1 << 20, description="The image's or video's width in pixels."
    )
    frames: int | None = Field(
        None, ge=1, le=1 << 20, description="A video's frames (HunyuanVideo, Wan; default 1)."
    )
    text_tokens: int | None = Field(
        None, ge=0, le=POSITION_CEILING, description="As for the GET (FLUX, FLUX.2, Qwen-Image)."
    )
    ids_dtype: TimestepDType | None = Field(None, description="As for the GET (FLUX).")
    layout: Layout = Field("interleaved", description="As for the GET.")
    start: int = Field(0, ge=0, description="As for the GET.")
    stop: int | None = Field(None, ge=1, description="As for the GET.")
    rounding: Rounding = Field("library", description="As for the GET.")
    dtype: DType = Field("float32", description="As for the GET.")
    format: Format | None = Field(None, description="As for the GET.")


SIZE: Final = ("height", "width", "frames")
# Wan's patch_size is a list [t, h, w] where the others' is an integer: read under a name of
# its own, with the class's default
_WAN: Final = ModelType(
    "diffusers, WanTransformer3DModel",
    defaults={"patch_size": [1, 2, 2]},
    names={"patch_sizes": "patch_size"},
)
FIELDS: Final = hf_config.fields(
    {
        "_class_name": STRING,
        "axes_dims_rope": NUMBERS,
        "rope_axes_dim": NUMBERS,
        "rope_theta": NUMBER,
        "patch_size": INTEGER,
        "patch_sizes": NUMBERS,
        "use_rotary_positional_embeddings": BOOLEAN,
        **dict.fromkeys(
            (
                "patch_size_t",
                "rope_max_seq_len",
                "attention_head_dim",
                "sample_height",
                "sample_width",
            ),
            INTEGER,
        ),
    }
)
# the pipelines' VAE: 8 pixels a latent cell, 4 frames a latent frame (its first alone)
_VAE: Final = 8
_VAE_FRAMES: Final = 4
# what FLUX's, FLUX.2's and Qwen-Image's pipelines pack into a token: 2x2 latent cells
_PACKED: Final = 2


def _pixels(asked: Mapping[str, Any], name: str) -> int:
    value = asked.get(name)
    if value is None:
        raise InvalidParameter(name, "give the image's height and width in pixels")
    return int(value)


def _image(config: Reader, asked: Mapping[str, Any]) -> tuple[int, ...]:
    """An image pipeline's grid: 8-pixel latent cells packed 2x2 (``height // 16``)."""
    cells = _VAE * _PACKED
    return _pixels(asked, "height") // cells, _pixels(asked, "width") // cells


def _video(listed: bool) -> Callable[[Reader, Mapping[str, Any]], tuple[int, ...]]:
    """A video pipeline's grid: latent frames ``(frames - 1) // 4 + 1``, 8-pixel cells,
    then the transformer's patches (HunyuanVideo's and CogVideoX's ``patch_size_t`` and
    ``patch_size``; with ``listed``, Wan's ``patch_size`` ``[t, h, w]``)."""

    def grid(config: Reader, asked: Mapping[str, Any]) -> tuple[int, ...]:
        if listed:
            patch = config.of_class(_WAN).get("patch_sizes")
        else:
            side = config.get_or("patch_size", 2)
            patch = [config.get_or("patch_size_t", None) or 1, side, side]
        if len(patch) != 3 or not all(isinstance(p, int) and p > 0 for p in patch):
            raise InvalidInput("patch_size", "must be positive integers")
        frames = (int(asked.get("frames") or 1) - 1) // _VAE_FRAMES + 1
        height, width = (_pixels(asked, name) // _VAE for name in ("height", "width"))
        # frames in temporal patches rounded up (CogVideoX 1.5 pads them), cells down
        return -(-frames // patch[0]), height // patch[1], width // patch[2]

    return grid


def _within_rope_max_seq_len(config: Reader, query: dict[str, Any]) -> None:
    """Wan's tables hold ``rope_max_seq_len`` positions an axis: a grid past them is refused
    (the model's slices would come short)."""
    longest = config.get_or("rope_max_seq_len", 1024)
    grid = query["grid"]
    if max(map(int, grid.split(","))) > longest:
        raise InvalidParameter(
            "height",
            f"makes a grid {grid} past the model's rope_max_seq_len {longest}",
            also=("width", "frames"),
        )


def _cogvideox(config: Reader, query: dict[str, Any]) -> None:
    """CogVideoX: rotary only with ``use_rotary_positional_embeddings``; 1.0's rows and
    columns spread over the crop region of its base size (``sample_height``,
    ``sample_width`` over ``patch_size``), 1.5's (a ``patch_size_t``) the grid's indices."""
    if not config.get_or("use_rotary_positional_embeddings", False):
        raise InvalidInput(
            "use_rotary_positional_embeddings",
            "is false: this CogVideoX adds sin-cos position embeddings, not RoPE",
        )
    patch = config.get_or("patch_size", 2)
    if config.get_or("patch_size_t", None) is None:
        rows = config.get_or("sample_height", 60) // patch
        query["base_grid"] = f"{rows},{config.get_or('sample_width', 90) // patch}"
    else:
        query["preset"] = "cogvideox-1.5"


@dataclass(frozen=True, slots=True)
class DiffusersClass:
    """A diffusers 0.42.1 transformer's multi-axis RoPE: the preset whose ids and
    arithmetic it runs, the config fields that give the preset's parameters (``(field,
    parameter, the class's default)``), its grid from the image's size, where it builds
    its rotary module, and what else its config decides (``refine``: the query changed or
    refused)."""

    preset: str
    grid: Callable[[Reader, Mapping[str, Any]], tuple[int, ...]]
    source: str
    reads: tuple[tuple[str, str, Any], ...] = ()
    refine: Callable[[Reader, dict[str, Any]], None] | None = None


_HEAD: Final = ("attention_head_dim", "head_dim", 128)
_AXES: Final = ("axes_dims_rope", "axes_dim", [16, 56, 56])
CLASSES: Final[Mapping[str, DiffusersClass]] = {
    "FluxTransformer2DModel": DiffusersClass(
        "flux",
        _image,
        "models/transformers/transformer_flux.py: FluxPosEmbed(theta=10000, "
        "axes_dim=axes_dims_rope)",
        (_AXES, _HEAD),
    ),
    "Flux2Transformer2DModel": DiffusersClass(
        "flux2",
        _image,
        "models/transformers/transformer_flux2.py: Flux2PosEmbed(theta=rope_theta, "
        "axes_dim=axes_dims_rope)",
        (
            ("axes_dims_rope", "axes_dim", [32, 32, 32, 32]),
            ("rope_theta", "theta", 2000),
            _HEAD,
        ),
    ),
    "QwenImageTransformer2DModel": DiffusersClass(
        "qwen-image",
        _image,
        "models/transformers/transformer_qwenimage.py: QwenEmbedRope(theta=10000, "
        "axes_dim=axes_dims_rope, scale_rope=True)",
        (_AXES, _HEAD),
    ),
    "HunyuanVideoTransformer3DModel": DiffusersClass(
        "hunyuan-video",
        _video(listed=False),
        "models/transformers/transformer_hunyuan_video.py: HunyuanVideoRotaryPosEmbed("
        "patch_size, patch_size_t, rope_axes_dim, rope_theta)",
        (
            ("rope_axes_dim", "axes_dim", [16, 56, 56]),
            ("rope_theta", "theta", 256.0),
            _HEAD,
        ),
    ),
    "WanTransformer3DModel": DiffusersClass(
        "wan",
        _video(listed=True),
        "models/transformers/transformer_wan.py: WanRotaryPosEmbed(attention_head_dim, "
        "patch_size, rope_max_seq_len)",
        (_HEAD,),
        _within_rope_max_seq_len,
    ),
    "CogVideoXTransformer3DModel": DiffusersClass(
        "cogvideox",
        _video(listed=False),
        "models/embeddings.py: get_3d_rotary_pos_embed(attention_head_dim, ...) as "
        "pipelines/cogvideo/pipeline_cogvideox.py's _prepare_rotary_positional_embeddings",
        (("attention_head_dim", "head_dim", 64),),
        _cogvideox,
    ),
}


def rope_nd_query(config: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """A diffusers transformer config's multi-axis RoPE over the image or video of the
    asked size: its class's preset and parameters, its grid, and the fields read."""
    top = Reader(config)
    name = top.get("_class_name")
    record = CLASSES.get(name) if name is not None else None
    if record is None:
        said = "is missing" if name is None else f"is {name!r}"
        raise InvalidInput(
            "_class_name",
            f"{said}: the multi-axis RoPE is read from the configs of {', '.join(CLASSES)}",
        )
    grid = record.grid(top, asked)
    if not all(grid):
        raise InvalidParameter(
            "height",
            f"makes an empty grid {grid}: the image is smaller than a patch",
            also=("width", "frames"),
        )
    query: dict[str, Any] = {"preset": record.preset, "grid": ",".join(map(str, grid))}
    for field, parameter, default in record.reads:
        value = top.get_or(field, default)
        query[parameter] = ",".join(map(str, value)) if isinstance(value, list) else value
    if record.refine is not None:
        record.refine(top, query)
    return Read({"": query}, None, tuple(top.read))
