"""The vision towers' rotary family's parameters on the wire (``GET
/v1/encodings/vision-rotary``, ``POST .../positions`` and ``.../apply``): the model
(:data:`service.encodings.vision_rotary.PRESETS`, one record a model), the image's grid in
patches, and the parameters the model takes (its real checkpoint's by default)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import Format
from service.encodings.registry import DType, Rounding
from service.encodings.vision_rotary import (
    PRESETS,
    Implementation,
    Model,
    Normalize,
    PeriodsDType,
    VisionRotaryKey,
    preset_key,
)
from service.errors import InvalidParameter
from service.schemas.common import RawBodyFields
from service.schemas.rope_nd import integers
from service.settings import POSITION_CEILING

_SIDE = 1 << 20
_DEFAULT = "Default: the model's checkpoint's."


class VisionRotaryFields(BaseModel):
    """Which table: the model, the grid, the parameters the model takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Model = Field(
        description="qwen2_vl, qwen2_5_vl, qwen3_vl (the axial type), pixtral, llama4, "
        "dinov3, eva02: its pairs, positions, token order and arithmetic."
    )
    grid: str | None = Field(
        None,
        max_length=64,
        description="The image's grid in patches, comma-separated: H,W, or T,H,W for Qwen-VL's "
        "frames (in temporal patches). Or height and width. Default: the checkpoint's image "
        "(Pixtral-12B 1024 px: 64,64; Llama 4 336 px: 24,24; DINOv3 224 px: 14,14; EVA-02 448 "
        "px: 32,32; Qwen-VL, any size: a 448-pixel square, 32,32 (Qwen3-VL's 16-pixel patches: "
        "28,28)).",
    )
    height: int | None = Field(
        None, ge=1, le=_SIDE, description="The grid's rows in patches (instead of grid)."
    )
    width: int | None = Field(
        None, ge=1, le=_SIDE, description="The grid's columns in patches (instead of grid)."
    )
    head_dim: int | None = Field(
        None, ge=4, le=1 << 16, description=f"The attention head's width. {_DEFAULT}"
    )
    theta: float | None = Field(
        None, gt=0, le=1e300, allow_inf_nan=False, description=f"The base. {_DEFAULT}"
    )
    spatial_merge_size: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Qwen-VL: the side of the blocks of patches its merger joins (2); rows are "
        "block-major.",
    )
    window_index: bool | None = Field(
        None,
        description="qwen2_5_vl: rows in the order its windowed attention receives them "
        "(get_vision_window_index's permutation). Default false.",
    )
    window_size: int | None = Field(
        None, ge=1, le=_SIDE, description="qwen2_5_vl: the window's side in pixels (112)."
    )
    patch_size: int | None = Field(
        None, ge=1, le=_SIDE, description="qwen2_5_vl: the patch's side in pixels (14)."
    )
    implementation: Implementation | None = Field(
        None,
        description="dinov3: transformers (reciprocal frequencies, the default), original "
        "(facebookresearch/dinov3: divides by the periods) or timm (the original's bits but "
        "for min and max periods).",
    )
    normalize_coords: Normalize | None = Field(
        None,
        description="dinov3: each axis's centres over its own size (separate), or both over "
        "the smaller (min) or larger (max) side; original and timm only.",
    )
    periods_dtype: PeriodsDType | None = Field(
        None,
        description="dinov3, implementation=original: the periods as its persistent buffer "
        "holds them (bfloat16: a model built or saved in bfloat16).",
    )
    ref_feat_shape: str | None = Field(
        None,
        max_length=32,
        description="eva02: the pre-training grid positions are rescaled to, rows,columns "
        "(16,16 for EVA-02-B/14 at 448).",
    )
    grid_offset: float | None = Field(
        None,
        ge=-(1 << 20),
        le=1 << 20,
        allow_inf_nan=False,
        description="eva02: added to each index before the rescale (0).",
    )
    rounding: Rounding = Field(
        "library",
        description="library: the model's float32 arithmetic, operation by operation; exact: "
        "the formula, each entry rounded once.",
    )

    def table_key(self, dtype: DType) -> VisionRotaryKey:
        """The table's key, its rows of ``dtype``."""
        if self.grid is not None and (self.height is not None or self.width is not None):
            raise InvalidParameter("grid", "give grid, or height and width, not both")
        if self.grid is not None:
            grid = integers("grid", self.grid, 3) or ()
        elif self.height is not None and self.width is not None:
            grid = (self.height, self.width)
        elif self.height is None and self.width is None:
            grid = PRESETS[self.model].image
        else:
            raise InvalidParameter("grid", "give both height and width in patches (or grid)")
        if len(grid) < 2 or any(size > POSITION_CEILING for size in grid):
            raise InvalidParameter("grid", "must name H,W or T,H,W positive sizes in patches")
        given: dict[str, Any] = {
            name: getattr(self, name)
            for name in (
                "head_dim",
                "theta",
                "spatial_merge_size",
                "window_index",
                "window_size",
                "patch_size",
                "implementation",
                "normalize_coords",
                "periods_dtype",
                "grid_offset",
            )
        }
        given["ref_feat_shape"] = integers("ref_feat_shape", self.ref_feat_shape, 2)
        return preset_key(self.model, grid, given, self.rounding, dtype)


class VisionRotaryQuery(VisionRotaryFields):
    """Which table, which rows, in what form."""

    start: int = Field(0, ge=0, description="First token returned (inclusive).")
    stop: int | None = Field(None, ge=1, description="Token after the last; default all.")
    dtype: DType = Field("float32", description="Element type of the answer.")
    format: Format | None = Field(
        None, description="json, npy, npz, raw or safetensors; default by Accept."
    )

    def key(self) -> VisionRotaryKey:
        key = self.table_key(self.dtype)
        if self.start >= key.tokens:
            raise InvalidParameter("start", f"must be below the {key.tokens} tokens")
        if self.stop is not None and not self.start < self.stop <= key.tokens:
            raise InvalidParameter("stop", f"must be after start and at most {key.tokens}")
        return key

    def row_stop(self, key: VisionRotaryKey) -> int:
        return key.tokens if self.stop is None else self.stop

    def describe(self, key: VisionRotaryKey) -> dict[str, Any]:
        """The JSON answer's fields before ``cos`` and ``sin``: the parameters as resolved."""
        stop = self.row_stop(key)
        return {
            "model": key.model,
            "grid": list(key.grid),
            "tokens": key.tokens,
            **key.settings(),
            "start": self.start,
            "stop": stop,
            "rounding": key.rounding,
            "dtype": key.dtype,
            "shape": [2, stop - self.start, key.head_dim],
        }


class VisionRotaryDocument(BaseModel):
    """The tables as JSON: the parameters as resolved, then ``cos`` and ``sin``, a row a
    token."""

    model: Model
    grid: list[int] = Field(description="[T, H, W] in patches (T 1 but for Qwen-VL).")
    tokens: int
    head_dim: int
    theta: float
    spatial_merge_size: int
    window_index: bool
    window_size: int
    patch_size: int
    implementation: Implementation
    normalize_coords: Normalize
    periods_dtype: PeriodsDType
    ref_feat_shape: list[int]
    grid_offset: float
    start: int
    stop: int
    rounding: Rounding
    dtype: DType
    shape: list[int] = Field(description="[2, stop - start, head_dim]")
    cos: list[list[float]] = Field(description="Each token's cosines.")
    sin: list[list[float]] = Field(description="Each token's sines.")


class VisionRotaryApplyQuery(VisionRotaryFields, RawBodyFields):
    """How to rotate a posted batch ``(B, heads, L, head_dim)``: the table of its ``L``
    tokens (rows ``0 .. L-1`` in the model's order), the answer's form (a raw body's shape
    and dtype too)."""

    format: Format | None = Field(
        None, description="Answer format (json, npy, npz, raw, safetensors); default the body's."
    )

    @property
    def interleaved(self) -> bool:
        """Whether the model's apply turns pairs ``(2i, 2i+1)`` (else ``(i, i + d/2)``)."""
        return PRESETS[self.model].interleaved

    def key(self, head_dim: int, dtype: DType) -> VisionRotaryKey:
        """The table for a batch of heads ``head_dim`` wide (the query's head_dim, checked,
        or the batch's): float32, as every model's apply computes (Qwen-VL's and Llama 4's
        upcast; the others' in a float32 model)."""
        fields = (
            self if self.head_dim is not None else self.model_copy(update={"head_dim": head_dim})
        )
        key = fields.table_key("float64" if dtype == "float64" else "float32")
        if head_dim != key.head_dim:
            raise InvalidParameter(
                "head_dim", f"is {key.head_dim}, not the embeddings' head width {head_dim}"
            )
        return key
