"""The sinusoidal family's parameters on the wire: tables, blocks, pictures and apply."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator

from service.codecs.types import Format, TableFormat
from service.encodings import presets
from service.encodings.catalogue import PARAMETERS, PRESETS
from service.encodings.registry import DType, Rounding
from service.encodings.sinusoidal import DEFAULT_BASE, Layout, SinusoidalKey
from service.schemas.common import (
    Colormap,
    Height,
    RawBodyFields,
    Width,
    Window,
    below,
    unshown,
    within,
)
from service.schemas.presets import SCALE_LIMIT, PresetFields, PresetName, parameter_fields


class RowsQuery(Window):
    """Which table, and which of its rows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int = Field(
        ge=1,
        description="Rows in the table: positions 0 .. max_len-1, the last at most "
        "PE_MAX_POSITION (2^31 - 1). The rows returned × d_model are at most PE_MAX_ELEMENTS.",
    )
    d_model: int = Field(ge=1, description="Columns: the model's embedding width.")
    base: float = Field(
        default_factory=unshown(DEFAULT_BASE),
        gt=1,
        allow_inf_nan=False,
        description="Wavelength base (default 10000): column pair i has frequency "
        "base^(-2i/d_model) in the paper's table; the presets that take a base use it in "
        "their own rule.",
    )
    start: int = Field(0, ge=0, description="First row returned (inclusive).")
    stop: int | None = Field(
        None, ge=1, description="Row after the last returned; default max_len."
    )

    def label(self) -> str:
        """The parameters as a picture's title shows them."""
        rows = (
            ""
            if (self.start, self.row_stop) == (0, self.max_len)
            else (f", rows {self.start}..{self.row_stop - 1}")
        )
        return f"max_len={self.max_len}, d_model={self.d_model}, base={self.base:.15g}{rows}"


class BlockQuery(RowsQuery, PresetFields):
    """Which table, and which block of it."""

    layout: Layout = Field(
        default_factory=unshown("interleaved"),
        description="vaswani only (the other presets fix their layout): interleaved (the "
        "default): sin, cos, sin, ...; split: all sines, then cosines.",
    )
    scale: float | None = Field(
        None,
        ge=-SCALE_LIMIT,
        le=SCALE_LIMIT,
        description="mlx: factor on the table; sqrt(2 / d_model). At most what dtype holds "
        "(float16: 65504).",
    )
    dtype: DType = Field("float32", description="Element type of the returned table.")
    dim_start: int = Field(0, ge=0, description="First column returned (inclusive).")
    dim_stop: int | None = Field(
        None, ge=1, description="Column after the last returned; default d_model."
    )

    @field_validator("dim_start")
    @classmethod
    def _dim_start_in_table(cls, value: int, info: ValidationInfo) -> int:
        return below(value, info, "d_model", "columns are 0 .. d_model-1")

    @field_validator("dim_stop")
    @classmethod
    def _dim_stop_in_table(cls, value: int | None, info: ValidationInfo) -> int | None:
        return within(value, info, "dim_start", "d_model")

    @property
    def col_stop(self) -> int:
        return self.d_model if self.dim_stop is None else self.dim_stop

    def key(self) -> SinusoidalKey:
        # start_index + max_len - 1 is bounded by PE_MAX_POSITION with the other limits
        return self.preset_key(self.d_model, self.dtype, scale=self.scale)

    def describe(self) -> dict[str, Any]:
        """The JSON answer's fields before ``data``, in the contract's order."""
        key = self.key()
        return {
            "max_len": self.max_len,
            "d_model": self.d_model,
            **self.preset_fields(key),
            "layout": key.layout,
            "dtype": self.dtype,
            "start": self.start,
            "stop": self.row_stop,
            "dim_start": self.dim_start,
            "dim_stop": self.col_stop,
            "shape": [self.row_stop - self.start, self.col_stop - self.dim_start],
        }

    def label(self) -> str:
        columns = (
            ""
            if (self.dim_start, self.col_stop) == (0, self.d_model)
            else (f", dimensions {self.dim_start}..{self.col_stop - 1}")
        )
        preset = "" if self.preset == "vaswani" else f", {self.preset} ({self.rounding})"
        layout = PRESETS[self.preset].arrangement or self.layout
        return f"{super().label()}{columns}{preset}, {layout}, {self.dtype}"


class TableQuery(BlockQuery):
    """Which table, which block of it, and in what form."""

    format: TableFormat | None = Field(
        None,
        description="json, npy, raw or safetensors (tensor data); when absent the Accept "
        "header decides.",
    )


class HeatmapQuery(BlockQuery):
    """A table or a block of it as a picture: positions down, dimensions across."""

    width: Width = 800
    height: Height = 600
    cmap: Colormap = Field("RdBu", description="matplotlib colormap; the scale is -1 .. 1.")


class SimilarityQuery(RowsQuery):
    """The dot products of the rows start .. stop-1 with each other, as a picture. The
    layout does not change them, and they are computed from exact angles."""

    width: Width = 800
    height: Height = 600
    cmap: Colormap = Field("viridis", description="matplotlib colormap.")

    def key(self) -> SinusoidalKey:
        return SinusoidalKey(self.d_model, self.base)


class ApplyQuery(PresetFields):
    """How to apply the encoding to a posted batch; ``d_model`` is the batch's last axis."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: float = Field(
        default_factory=unshown(DEFAULT_BASE),
        gt=1,
        allow_inf_nan=False,
        description="As for tables (default 10000).",
    )
    layout: Layout = Field(
        default_factory=unshown("interleaved"), description="As for tables (interleaved)."
    )
    scale: float | None = Field(
        None,
        allow_inf_nan=False,
        description="Factor on the embeddings; default the preset's (sqrt(d_model) for "
        "vaswani, pytorch-tutorial, tf-tutorial, tensor2tensor, fairseq and marian; 1 for "
        "the others).",
    )
    offset: int | None = Field(
        None,
        ge=0,
        description="Position (table row) of the first embedding when no position_ids; "
        "default 0 (fairseq: padding_idx + 1).",
    )
    max_len: int | None = Field(
        None, ge=1, description="When given, every position must be below it."
    )
    format: Format | None = Field(
        None,
        description="json, npy, npz, raw or safetensors (tensor embeddings); when absent, "
        "Accept decides, else the body's format.",
    )

    def key(self, d_model: int, dtype: DType) -> SinusoidalKey:
        """The table the batch needs: its width, and the dtype it is computed in."""
        return self.preset_key(d_model, dtype)

    def embedding_scale(self) -> float | None:
        """The factor on the embeddings: given, or the preset's (``None``: sqrt(d_model))."""
        if self.scale is not None:
            return self.scale
        return None if PRESETS[self.preset].embed_scale == "sqrt(d_model)" else 1.0

    def first_row(self) -> int:
        """The row of the first embedding when no position ids say: given, or the preset's."""
        if self.offset is not None:
            return self.offset
        preset = PRESETS[self.preset]
        params = {
            p.name: p.default if self.given().get(p.name) is None else self.given()[p.name]
            for p in preset.params
        }
        return preset.first_row(params)


class ApplyHttpQuery(RawBodyFields, ApplyQuery):
    """The HTTP route's parameters: :class:`ApplyQuery`'s, and a raw body's shape and dtype."""


class _TableHead(BaseModel):
    max_len: int
    d_model: int
    preset: PresetName | None = Field(None, description="Absent for vaswani.")
    rounding: Rounding | None = Field(None, description="Absent for vaswani.")
    base: float | None = Field(None, description="Where the preset takes a base.")


# The presets' other parameters, after base, are the catalogue's: made at run time, as
# PresetFields' are (mypy sees the head alone).
if TYPE_CHECKING:
    _TableParameters = _TableHead
else:
    _TableParameters = create_model(
        "_TableParameters",
        __base__=_TableHead,
        __module__=__name__,
        **parameter_fields(tuple(name for name in PARAMETERS if name != "base"), query=False),
    )


class TableDocument(_TableParameters):
    """A table (or a block of one) as JSON."""

    layout: presets.Arrangement
    dtype: DType
    start: int
    stop: int
    dim_start: int
    dim_stop: int
    shape: list[int] = Field(description="[stop - start, dim_stop - dim_start]")
    data: list[list[float]] = Field(description="The rows of the block.")
