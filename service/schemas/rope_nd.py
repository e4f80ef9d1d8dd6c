"""The multi-axis RoPE family's parameters on the wire (``GET /v1/encodings/rope-nd`` and
``POST .../positions``): the grid in patches, the axes' widths, theta, the text tokens
before the grid, the frequencies' and the ids' dtypes, and a preset
(:data:`service.encodings.rope_nd.PRESETS`) that fixes a model's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

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
from service.errors import InvalidParameter
from service.schemas.common import RawBodyFields
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
        "(HunyuanVideo, Wan). Rows: text_tokens, then its cells in row-major order.",
    )
    preset: PresetName = Field(
        "diffusers",
        description="diffusers (get_1d_rotary_pos_embed per axis, every parameter may be "
        "given), flux, flux-bfl, flux2, hunyuan-video, wan, qwen-image.",
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
        "splits into its axes (128: 44,42,42).",
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
