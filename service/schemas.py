"""Wire models: the table query, and the JSON documents the service returns."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from service.codecs import Format, TableFormat
from service.core import DEFAULT_BASE, DType, Layout
from service.plots import MIN_HEIGHT, MIN_WIDTH, Colormap


def _below(value: int, info: ValidationInfo, bound: str, what: str) -> int:
    limit = info.data.get(bound)
    if limit is not None and value >= limit:
        raise PydanticCustomError("out_of_table", f"must be less than {bound} ({limit}); {what}")
    return value


def _within(value: int | None, info: ValidationInfo, low: str, high: str) -> int | None:
    if value is None:
        return value
    first, limit = info.data.get(low), info.data.get(high)
    if first is not None and value <= first:
        raise PydanticCustomError("empty_range", f"must be greater than {low} ({first})")
    if limit is not None and value > limit:
        raise PydanticCustomError("out_of_table", f"must be at most {high} ({limit})")
    return value


class RowsQuery(BaseModel):
    """Which table, and which of its rows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int = Field(
        ge=1,
        description="Rows in the table: positions 0 .. max_len-1. "
        "max_len × d_model is at most PE_MAX_ELEMENTS (default 2^26).",
    )
    d_model: int = Field(ge=1, description="Columns: the model's embedding width.")
    base: float = Field(
        DEFAULT_BASE,
        gt=1,
        allow_inf_nan=False,
        description="Wavelength base: column pair i has frequency base^(-2i/d_model).",
    )
    start: int = Field(0, ge=0, description="First row returned (inclusive).")
    stop: int | None = Field(
        None, ge=1, description="Row after the last returned; default max_len."
    )

    @field_validator("start")
    @classmethod
    def _start_in_table(cls, value: int, info: ValidationInfo) -> int:
        return _below(value, info, "max_len", "rows are 0 .. max_len-1")

    @field_validator("stop")
    @classmethod
    def _stop_in_table(cls, value: int | None, info: ValidationInfo) -> int | None:
        return _within(value, info, "start", "max_len")

    @property
    def row_stop(self) -> int:
        return self.max_len if self.stop is None else self.stop

    def label(self) -> str:
        """The parameters as a picture's title shows them."""
        rows = (
            ""
            if (self.start, self.row_stop) == (0, self.max_len)
            else (f", rows {self.start}..{self.row_stop - 1}")
        )
        return f"max_len={self.max_len}, d_model={self.d_model}, base={self.base:.15g}{rows}"


class BlockQuery(RowsQuery):
    """Which table, and which block of it."""

    layout: Layout = Field(
        "interleaved",
        description="interleaved: sin, cos, sin, ... (the paper); split: all sines, then cosines.",
    )
    dtype: DType = Field("float32", description="Element type of the returned table.")
    dim_start: int = Field(0, ge=0, description="First column returned (inclusive).")
    dim_stop: int | None = Field(
        None, ge=1, description="Column after the last returned; default d_model."
    )

    @field_validator("dim_start")
    @classmethod
    def _dim_start_in_table(cls, value: int, info: ValidationInfo) -> int:
        return _below(value, info, "d_model", "columns are 0 .. d_model-1")

    @field_validator("dim_stop")
    @classmethod
    def _dim_stop_in_table(cls, value: int | None, info: ValidationInfo) -> int | None:
        return _within(value, info, "dim_start", "d_model")

    @property
    def col_stop(self) -> int:
        return self.d_model if self.dim_stop is None else self.dim_stop

    @property
    def shape(self) -> tuple[int, int]:
        return self.row_stop - self.start, self.col_stop - self.dim_start

    def describe(self) -> dict[str, Any]:
        """The JSON response's fields before ``data``, in the contract's order."""
        return {
            "max_len": self.max_len,
            "d_model": self.d_model,
            "base": self.base,
            "layout": self.layout,
            "dtype": self.dtype,
            "start": self.start,
            "stop": self.row_stop,
            "dim_start": self.dim_start,
            "dim_stop": self.col_stop,
            "shape": list(self.shape),
        }

    def label(self) -> str:
        columns = (
            ""
            if (self.dim_start, self.col_stop) == (0, self.d_model)
            else (f", dimensions {self.dim_start}..{self.col_stop - 1}")
        )
        return f"{super().label()}{columns}, {self.layout}, {self.dtype}"


class TableQuery(BlockQuery):
    """Which table, which block of it, and in what form."""

    format: TableFormat | None = Field(
        None, description="json, npy or raw; when absent the Accept header decides."
    )


Width = Annotated[
    int, Field(ge=MIN_WIDTH, description="Picture width in pixels, at most PE_MAX_IMAGE_WIDTH.")
]
Height = Annotated[
    int, Field(ge=MIN_HEIGHT, description="Picture height in pixels, at most PE_MAX_IMAGE_HEIGHT.")
]


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


class ApplyQuery(BaseModel):
    """How to apply the encoding to a posted batch; ``d_model`` is the batch's last axis."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: float = Field(DEFAULT_BASE, gt=1, allow_inf_nan=False, description="As for tables.")
    layout: Layout = Field("interleaved", description="As for tables.")
    scale: float | None = Field(
        None, allow_inf_nan=False, description="Factor on the embeddings; default sqrt(d_model)."
    )
    offset: int = Field(0, ge=0, description="Position of the first row when no position_ids.")
    max_len: int | None = Field(
        None, ge=1, description="When given, every position must be below it."
    )
    format: Format | None = Field(
        None,
        description="json, npy, npz or raw; when absent, Accept decides, else the body's format.",
    )


class ApplyDocument(BaseModel):
    """The result of an apply as JSON."""

    dtype: DType
    shape: list[int]
    embeddings: list[Any] = Field(description="X * scale + PE, nested like the input.")


class ApplyBody(BaseModel):
    """The JSON request body of an apply."""

    embeddings: list[Any] = Field(description="(L, d_model) or (batch, L, d_model) numbers.")
    position_ids: list[Any] | None = Field(
        None, description="(L,) or (batch, L) non-negative integers; default offset .. offset+L-1."
    )
    dtype: DType = Field("float32", description="Element type of the embeddings and result.")


class TableDocument(BaseModel):
    """A table (or a block of one) as JSON."""

    max_len: int
    d_model: int
    base: float
    layout: Layout
    dtype: DType
    start: int
    stop: int
    dim_start: int
    dim_stop: int
    shape: list[int] = Field(description="[stop - start, dim_stop - dim_start]")
    data: list[list[float]] = Field(description="The rows of the block.")


class CacheEntry(BaseModel):
    d_model: int
    base: float
    layout: Layout
    dtype: DType
    rows: int = Field(description="Rows computed so far; any max_len up to this is a hit.")
    bytes: int


class CacheDocument(BaseModel):
    """Cache statistics; entries from least to most recently used."""

    budget_bytes: int = Field(description="PE_CACHE_BYTES")
    bytes: int
    hits: int
    misses: int
    evictions: int
    uncached: int = Field(description="Tables computed but not kept: each over the budget.")
    entries: list[CacheEntry]
    responses: int = Field(description="Encoded table answers kept to replay.")
    response_bytes: int = Field(description="Their bytes, counted in the same budget.")
    response_hits: int = Field(description="Requests answered by replaying one.")


class Status(BaseModel):
    status: str


class ErrorItem(BaseModel):
    name: str = Field(description="The parameter or field at fault.")
    location: str = Field(alias="in", description="query, header, path or body.")
    detail: str


class Problem(BaseModel):
    """An RFC 9457 problem document (``application/problem+json``)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[ErrorItem] | None = None
    limit: int | None = None
    requested: int | None = None
    setting: str | None = None
