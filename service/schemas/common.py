"""What every family's wire models share: row and column ranges, picture sizes, and the
documents that are not a family's (problems, status, the cache, apply's JSON)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from service.codecs import raw
from service.encodings.registry import DType
from service.errors import InvalidParameter


@dataclass(frozen=True, slots=True)
class Read:
    """What a posted document (a model's ``config.json``) says: the ``GET`` parameters of
    its table (``tables[""]``), or of each of its kinds of layer by name; which kind each
    layer is, where it says; and the paths of the fields read."""

    tables: Mapping[str, dict[str, Any]]
    layers: list[str] | None = None
    fields: tuple[str, ...] = ()


def unshown(default: Any) -> Any:
    """A default the OpenAPI document does not show (pydantic leaves a default factory's
    value out): Swagger UI would send a shown one with every request, and a parameter only
    some presets take is refused by the others. The description says it instead."""
    return lambda: default


class Aliased(BaseModel):
    """Parameters a client may give by another library's name for them (Hugging Face's
    ``rope_theta`` for ``base``): :attr:`ALIASES` maps each such name to the field."""

    ALIASES: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(alias in data for alias in cls.ALIASES):
            return data
        data = dict(data)
        for alias, name in cls.ALIASES.items():
            if alias in data:
                if name in data:
                    raise InvalidParameter(alias, f"is {name}'s other name: give one of them")
                data[name] = data.pop(alias)
        return data


# smaller pictures have no room for the title, the labels and the colorbar
MIN_WIDTH: Final = 320
MIN_HEIGHT: Final = 240
Colormap = Literal[
    # diverging, for the heatmap's -1 .. 1 (RdBu is seed 004's; viridis is matplotlib's default)
    "RdBu",
    "RdBu_r",
    "coolwarm",
    "seismic",
    "PuOr",
    "BrBG",
    "PiYG",
    "RdYlBu",
    # sequential
    "viridis",
    "cividis",
    "magma",
    "plasma",
    "inferno",
    "gray",
]
COLORMAPS: Final[tuple[Colormap, ...]] = get_args(Colormap)
Width = Annotated[
    int, Field(ge=MIN_WIDTH, description="Picture width in pixels, at most PE_MAX_IMAGE_WIDTH.")
]
Height = Annotated[
    int, Field(ge=MIN_HEIGHT, description="Picture height in pixels, at most PE_MAX_IMAGE_HEIGHT.")
]


def below(value: int, info: ValidationInfo, bound: str, what: str) -> int:
    """``value`` if it is less than the field ``bound`` (when that is valid)."""
    limit = info.data.get(bound)
    if limit is not None and value >= limit:
        raise PydanticCustomError("out_of_table", f"must be less than {bound} ({limit}); {what}")
    return value


def within(value: int | None, info: ValidationInfo, low: str, high: str) -> int | None:
    """``value`` (an exclusive end) if it is after the field ``low`` and at most ``high``."""
    if value is None:
        return value
    first, limit = info.data.get(low), info.data.get(high)
    if first is not None and value <= first:
        raise PydanticCustomError("empty_range", f"must be greater than {low} ({first})")
    if limit is not None and value > limit:
        raise PydanticCustomError("out_of_table", f"must be at most {high} ({limit})")
    return value


class Window(BaseModel):
    """A table's rows ``start .. stop-1`` of ``max_len``: ``start`` below ``max_len``,
    ``stop`` after ``start`` and at most ``max_len`` (default ``max_len``). Each model
    declares the three fields in its own words and place (the OpenAPI document lists them
    in the model's order, and a base model's fields would come first); :attr:`ROWS` says
    what the rows are in a refusal of ``start``."""

    ROWS: ClassVar[str] = "rows are 0 .. max_len-1"
    if TYPE_CHECKING:
        max_len: int
        start: int
        stop: int | None

    @field_validator("start", check_fields=False)
    @classmethod
    def _start_in_table(cls, value: int, info: ValidationInfo) -> int:
        return below(value, info, "max_len", cls.ROWS)

    @field_validator("stop", check_fields=False)
    @classmethod
    def _stop_in_table(cls, value: int | None, info: ValidationInfo) -> int | None:
        return within(value, info, "start", "max_len")

    @property
    def row_stop(self) -> int:
        """The row after the last returned."""
        return self.max_len if self.stop is None else self.stop


class RawBodyFields(BaseModel):
    """What a raw apply body (``application/octet-stream``: little-endian C-order numbers)
    does not say itself, when its ``X-Shape`` and ``X-Dtype`` headers do not either. An
    HTTP route's only: the inference protocol's tensors carry their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: str | None = Field(
        None,
        description="Raw bodies only: the batch's shape, comma-separated (e.g. 8,128,512), "
        "as the X-Shape header gives it; when both are given they must agree.",
    )
    dtype: DType | None = Field(
        None,
        description="Raw bodies only: the batch's dtype, as the X-Dtype header gives it; "
        "default float32.",
    )

    @field_validator("shape")
    @classmethod
    def _shape(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                raw.parse_shape(value)
            except ValueError as exc:
                raise PydanticCustomError("shape", "{reason}", {"reason": str(exc)}) from None
        return value


class ApplyDocument(BaseModel):
    """The result of an apply as JSON."""

    dtype: DType
    shape: list[int]
    positions: str = Field(
        description="The positions used: the table rows FIRST..LAST (from the offset), or "
        "position_ids (the posted ones). Also in the X-Positions header, in every format."
    )
    scale: float | None = Field(
        None,
        description="Additive encodings: the factor on the embeddings (given, or the preset's "
        "default, sqrt(d_model) for most). Also in the X-Scale header.",
    )
    embeddings: list[Any] = Field(description="The result, nested like the input.")


class ApplyBody(BaseModel):
    """The JSON request body of an apply."""

    embeddings: list[Any] = Field(description="(L, d_model) or (batch, L, d_model) numbers.")
    position_ids: list[Any] | None = Field(
        None, description="(L,) or (batch, L) non-negative integers; default offset .. offset+L-1."
    )
    dtype: DType = Field("float32", description="Element type of the embeddings and result.")


class CacheTable(BaseModel):
    family: str = Field(description="The encoding family, e.g. sinusoidal.")
    key: dict[str, Any] = Field(description="The parameters that make the table's values.")
    pages: int = Field(description="Pages of rows held.")
    page_rows: int = Field(description="Rows in a page of this table.")
    bytes: int


class CacheDocument(BaseModel):
    """Cache statistics; the largest tables, and how many there are."""

    budget_bytes: int = Field(description="PE_CACHE_BYTES")
    bytes: int
    hits: int = Field(description="Pages found in the cache.")
    misses: int = Field(description="Pages computed.")
    evictions: int
    uncached: int = Field(
        description="Requests whose rows were computed but not kept: over the budget."
    )
    tables: list[CacheTable] = Field(description="The tables holding the most bytes, at most 20.")
    tables_total: int = Field(description="How many tables the cache holds pages of.")
    responses: int = Field(description="Encoded answers kept to replay.")
    response_bytes: int = Field(description="Their bytes, counted in the same budget.")
    response_hits: int = Field(description="Requests answered by replaying one.")
    worker: int = Field(
        description="The process id of the worker that answered: each of the PE_WORKERS "
        "processes has a cache of its own, and this is its (/metrics sums them all)."
    )
    workers: int = Field(description="PE_WORKERS: how many worker processes there are.")


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
    setting: str | None = Field(None, description="The setting that sets the limit: its name only.")
