"""Llama 4's attention temperature on the wire (``GET /v1/encodings/temperature``, and from
a config), and which of a Llama 4 model's layers use no RoPE: ``no_rope_layers`` (1: the
layer uses RoPE), else every ``no_rope_layer_interval``-th layer (4 by default) is without
(transformers 5.23, ``models/llama4/configuration_llama4.py``,
``Llama4TextConfig.__post_init__``: ``int((i + 1) % interval != 0)``; the interval a model
type's, :mod:`service.schemas.hf_models`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import DType, Rounding
from service.encodings.temperature import (
    DEFAULT_ATTN_SCALE,
    DEFAULT_FLOOR_SCALE,
    TemperatureKey,
)
from service.errors import InvalidInput
from service.schemas import hf_config
from service.schemas.common import Read, Window
from service.schemas.hf_config import BOOLEAN, INTEGER, NUMBER, NUMBERS, Reader, model_type
from service.schemas.hf_models import ModelType, model_of
from service.settings import POSITION_CEILING

_MAX_LAYERS: Final = 1 << 16
# what this reading reads, and what each holds
FIELDS: Final = hf_config.fields(
    {
        "no_rope_layers": NUMBERS,
        "attn_temperature_tuning": BOOLEAN,
        **dict.fromkeys(
            ("no_rope_layer_interval", "num_hidden_layers", "max_position_embeddings"), INTEGER
        ),
        **dict.fromkeys(("floor_scale", "attn_scale"), NUMBER),
    }
)


class TemperatureQuery(Window):
    """Which scales: Llama 4's parameters, which rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int = Field(ge=1, le=POSITION_CEILING + 1, description="Positions 0 .. max_len-1.")
    floor_scale: float = Field(
        DEFAULT_FLOOR_SCALE, ge=1, le=1e12, allow_inf_nan=False, description="Llama 4's (8192)."
    )
    attn_scale: float = Field(
        DEFAULT_ATTN_SCALE, ge=0, le=1000, allow_inf_nan=False, description="Llama 4's (0.1)."
    )
    start: int = Field(0, ge=0, description="First position returned (inclusive).")
    stop: int | None = Field(None, ge=1, description="Position after the last; default max_len.")
    rounding: Rounding = Field(
        "library", description="library: transformers' float32 arithmetic; exact: float64."
    )
    dtype: DType = Field("float32", description="Element type of the scales.")
    format: TableFormat | None = Field(
        None, description="json, npy, raw or safetensors ((rows, 1)); default by Accept."
    )

    def key(self) -> TemperatureKey:
        return TemperatureKey(self.floor_scale, self.attn_scale, self.dtype, self.rounding)

    def describe(self, key: TemperatureKey) -> dict[str, Any]:
        """The JSON answer's fields before ``data``."""
        fields = self.model_dump(exclude={"format", "stop"})
        return {**fields, "stop": self.row_stop, "shape": [self.row_stop - self.start, 1]}


class TemperatureDocument(BaseModel):
    """The scales as JSON: the parameters, then ``data``, one row of one scale a position."""

    max_len: int
    floor_scale: float
    attn_scale: float
    start: int
    stop: int
    rounding: Rounding
    dtype: DType
    shape: list[int] = Field(description="[stop - start, 1]")
    data: list[list[float]] = Field(description="The scale at each position, rows by position.")


class TemperatureFromConfig(BaseModel):
    """What a config does not say: which rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int | None = Field(
        None, ge=1, le=POSITION_CEILING + 1, description="Default: max_position_embeddings."
    )
    start: int = Field(0, ge=0, description="First position returned.")
    stop: int | None = Field(None, ge=1, description="Position after the last; default max_len.")
    rounding: Rounding = Field("library", description="As for the GET.")
    dtype: DType = Field("float32", description="As for the GET.")
    format: TableFormat | None = Field(None, description="As for the GET.")


def rope_layers(text: Reader, model: ModelType | None) -> list[str] | None:
    """Each layer's kind, ``rope`` or ``nope``, where the config or its model type says
    (Llama 4)."""
    given = text.get("no_rope_layers")
    if given:
        if not all(value in (0, 1) for value in given):
            raise InvalidInput(f"{text.path}no_rope_layers", "must be 0 or 1 for each layer")
        return ["rope" if value else "nope" for value in given]
    interval = text.get("no_rope_layer_interval")
    if interval is None:
        interval = None if model is None else model.nope_interval
    if interval is None:
        return None
    count = text.get("num_hidden_layers")
    if count is None:
        return None
    if interval < 1 or not 0 <= count <= _MAX_LAYERS:
        name = "no_rope_layer_interval" if interval < 1 else "num_hidden_layers"
        raise InvalidInput(f"{text.path}{name}", "is out of range")
    return ["rope" if (i + 1) % interval else "nope" for i in range(count)]


def temperature_query(config: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """A Llama 4 config's temperature parameters, and which layers use no RoPE."""
    top = Reader(config)
    text = top.object("text_config") or top
    model = model_of(model_type(top, text))
    if text.get("attn_temperature_tuning") is False:
        raise InvalidInput(
            f"{text.path}attn_temperature_tuning", "is false: the model scales no query"
        )
    query: dict[str, Any] = {
        name: value
        for name in ("floor_scale", "attn_scale")
        if (value := text.get(name)) is not None
    }
    mpe = text.get("max_position_embeddings")
    if mpe is not None:
        query["max_len"] = mpe
    return Read({"": query}, rope_layers(text, model), tuple(text.read))
