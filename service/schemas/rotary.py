"""The rotary family's parameters on the wire: tables, apply, and the JSON document."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from service.codecs.types import Format
from service.encodings import rotary, scalings
from service.encodings.registry import DType, Rounding
from service.encodings.rotary import (
    DEFAULT_BASE,
    MAX_HEAD_DIM,
    Convention,
    RotaryKey,
    rotary_dim,
)
from service.errors import InvalidParameter
from service.schemas.common import Aliased, Window
from service.settings import POSITION_CEILING

_FACTOR_LIMIT = 1e9  # far above any model's; keeps the arithmetic finite
_FACTOR_FLOOR = 1e-6  # far below any model's; keeps 1 / factor finite in float32


def _number(description: str, **bounds: float) -> Any:
    return Field(None, allow_inf_nan=False, description=description, **bounds)  # type: ignore[call-overload]


class RotaryFields(Aliased):
    """What makes a rotary table, but its size: the base, the rotary part of a head, the
    pairing, the scaling and its parameters (Hugging Face's names, ``rope_theta`` and
    ``rope_type`` too), rounding and dtype."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ALIASES: ClassVar[dict[str, str]] = {"rope_theta": "base", "rope_type": "scaling"}

    base: float = Field(
        DEFAULT_BASE,
        gt=1,
        le=1e30,
        allow_inf_nan=False,
        description="rope_theta: pair k of the rotary dimension r turns at base^(-2k/r).",
    )
    partial_rotary_factor: float = Field(
        1.0,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="The rotated part of a head: int(head_dim * factor) dimensions, even; the "
        "rest passes through (proportional: the first int(factor * head_dim // 2) pairs turn, "
        "the others have frequency 0).",
    )
    convention: Convention = Field(
        "half",
        description="half: pairs (i, i + r/2), Hugging Face's rotate_half, GPT-NeoX; "
        "interleaved: pairs (2i, 2i+1), Meta's apply_rotary_emb, GPT-J, torchtune.",
    )
    scaling: scalings.Asked = Field(
        "none",
        description="none, linear, ntk (static NTK-aware), dynamic, yarn, longrope, llama3 or "
        "proportional, as transformers' modeling_rope_utils.py computes them; deepseek_yarn, "
        "yarn as the engine runs DeepSeek's. Parameters under rope_scaling's names follow.",
    )
    factor: float | None = _number(
        "linear, ntk, dynamic, yarn, llama3, longrope; proportional (1).",
        ge=_FACTOR_FLOOR,
        le=_FACTOR_LIMIT,
    )
    original_max_position_embeddings: int | None = Field(
        None,
        ge=1,
        le=POSITION_CEILING,
        description="yarn, longrope, llama3: the pretraining context.",
    )
    max_position_embeddings: int | None = Field(
        None,
        ge=1,
        le=POSITION_CEILING,
        description="dynamic: the model's context (the config's); yarn, longrope: derives "
        "factor when it is absent.",
    )
    beta_fast: float | None = _number("yarn (default 32).", ge=_FACTOR_FLOOR, le=_FACTOR_LIMIT)
    beta_slow: float | None = _number("yarn (default 1).", ge=_FACTOR_FLOOR, le=_FACTOR_LIMIT)
    mscale: float | None = _number(
        "yarn: with mscale_all_dim, the attention factor.", ge=-1e6, le=1e6
    )
    mscale_all_dim: float | None = _number("yarn.", ge=-1e6, le=1e6)
    attention_factor: float | None = _number(
        "yarn, longrope: what cos and sin are multiplied by (default derived from factor).",
        gt=0,
        le=1e6,
    )
    truncate: bool | None = Field(
        None, description="yarn: round the correction range (default true)."
    )
    low_freq_factor: float | None = _number("llama3.", ge=_FACTOR_FLOOR, le=_FACTOR_LIMIT)
    high_freq_factor: float | None = _number("llama3.", ge=_FACTOR_FLOOR, le=_FACTOR_LIMIT)
    short_factor: str | None = Field(
        None, description="longrope: rotary_dim/2 comma-separated factors, for short sequences."
    )
    long_factor: str | None = Field(
        None,
        description="longrope: the factors past original_max_position_embeddings (the table's "
        "max_len decides which set applies, as the sequence length does in transformers).",
    )
    seq_len: int | None = Field(
        None,
        ge=1,
        le=POSITION_CEILING + 1,
        description="dynamic: the sequence length the model has reached (default max_len).",
    )
    rounding: Rounding = Field(
        "library",
        description="library: transformers' float32 arithmetic (what most engines compute); "
        "exact: exact angles, each entry rounded once.",
    )

    @field_validator("scaling", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return "none" if value == "default" else value  # Hugging Face's name for none

    @field_validator("short_factor", "long_factor")
    @classmethod
    def _factors(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            _numbers(value, str(info.field_name))
        return value

    def given(self) -> dict[str, Any]:
        """The scaling's parameters the client gave (``short_factor`` and ``long_factor``
        as lists of numbers)."""
        values = {
            name: getattr(self, name)
            for name in scalings.ALL_PARAMETERS
            if getattr(self, name) is not None
        }
        for name in ("short_factor", "long_factor"):
            if name in values:
                values[name] = _numbers(values[name], name)
        return values

    def resolved(self, r: int, max_len: int, rotated: int) -> tuple[Any, scalings.Params]:
        """The key's scaling and its resolved parameters (an engine's may differ)."""
        return scalings.resolve_for("transformers", self.scaling, self.given(), r, max_len, rotated)

    def rotary_key(self, head_dim: int, max_len: int, dtype: DType) -> RotaryKey:
        """The table's key for heads of ``head_dim`` and a sequence of ``max_len``."""
        r = rotary_dim(head_dim, self.partial_rotary_factor)
        rotated = int(self.partial_rotary_factor * head_dim // 2)  # proportional's turning pairs
        r = head_dim if scalings.rule_of(self.scaling).whole_head else r  # proportional
        if r < 2 or r % 2:
            raise InvalidParameter(
                "head_dim" if self.partial_rotary_factor == 1 else "partial_rotary_factor",
                f"the rotary dimension int(head_dim * partial_rotary_factor) = {r} must be even "
                "and at least 2",
            )
        scaling, params = self.resolved(r, max_len, rotated)
        key = RotaryKey(r, self.base, self.convention, scaling, params, dtype, self.rounding)
        rotary.check(key, max_len)
        return key

    def fields(self, key: RotaryKey) -> dict[str, Any]:
        """The parameters as an answer reports them."""
        return {
            "base": self.base,
            "partial_rotary_factor": self.partial_rotary_factor,
            "rotary_dim": key.rotary_dim,
            "convention": self.convention,
            "scaling": self.scaling,
            **self.given(),
            "attention_factor": key.attention,
            "rounding": self.rounding,
        }


def _numbers(text: str, name: str) -> list[float]:
    parts = text.split(",")
    if len(parts) > scalings.MAX_FACTORS:
        raise InvalidParameter(name, f"has more than {scalings.MAX_FACTORS} numbers")
    try:
        values = [float(part) for part in parts]
    except ValueError:
        raise InvalidParameter(name, "must be comma-separated numbers") from None
    if not all(math.isfinite(v) and _FACTOR_FLOOR <= v <= _FACTOR_LIMIT for v in values):
        within = f"from {_FACTOR_FLOOR:g} to {_FACTOR_LIMIT:g}"
        raise InvalidParameter(name, f"must be positive numbers {within}")
    return values


class RotaryTableQuery(RotaryFields, Window):
    """Which rotary table, which rows of it, and in what form."""

    max_len: int = Field(
        ge=1,
        le=POSITION_CEILING + 1,
        description="Positions 0 .. max_len-1 (the last at most PE_MAX_POSITION); with "
        "dynamic and longrope also the sequence length the scaling sees.",
    )
    head_dim: int = Field(
        ge=1,
        le=MAX_HEAD_DIM,
        description=f"The width of one attention head (at most {MAX_HEAD_DIM}).",
    )
    start: int = Field(0, ge=0, description="First position returned (inclusive).")
    stop: int | None = Field(None, ge=1, description="Position after the last; default max_len.")
    dtype: DType = Field("float32", description="Element type of cos and sin.")
    format: Format | None = Field(
        None,
        description="json ({cos, sin}), npz (members cos and sin), safetensors (tensors cos "
        "and sin), npy or raw ((2, rows, rotary_dim), cos first); when absent the Accept "
        "header decides.",
    )

    def key(self) -> RotaryKey:
        return self.rotary_key(self.head_dim, self.max_len, self.dtype)

    def describe(self, key: RotaryKey) -> dict[str, Any]:
        """The JSON answer's fields before ``cos`` and ``sin``."""
        rows = self.row_stop - self.start
        return {
            "max_len": self.max_len,
            "head_dim": self.head_dim,
            **self.fields(key),
            "dtype": self.dtype,
            "start": self.start,
            "stop": self.row_stop,
            "shape": [2, rows, key.rotary_dim],
        }


class RotaryApplyQuery(RotaryFields):
    """How to rotate a posted batch of queries or keys; ``head_dim`` is its last axis."""

    offset: int = Field(
        0, ge=0, le=POSITION_CEILING, description="Position of the first row when no position_ids."
    )
    max_len: int | None = Field(
        None,
        ge=1,
        le=POSITION_CEILING + 1,
        description="When given, every position must be below it; dynamic and longrope take "
        "it as the sequence length (required for them unless seq_len is given).",
    )
    format: Format | None = Field(
        None,
        description="json, npy, npz, raw or safetensors (tensor embeddings); when absent, "
        "Accept decides, else the body's format.",
    )

    def key(self, head_dim: int, dtype: DType) -> RotaryKey:
        length = self.max_len
        if length is None:
            rule = scalings.rule_of(self.scaling)
            if rule.lengthwise and ("seq_len" not in rule.parameters or self.seq_len is None):
                raise InvalidParameter(
                    "max_len",
                    f"scaling={self.scaling} depends on the sequence length: give max_len",
                )
            length = 1
        return self.rotary_key(head_dim, length, dtype)


class RotaryTableDocument(BaseModel):
    """A rotary table (or some of its rows) as JSON: scaling parameters as given."""

    model_config = ConfigDict(extra="allow")

    max_len: int
    head_dim: int
    base: float
    partial_rotary_factor: float
    rotary_dim: int
    convention: Convention
    scaling: scalings.Asked
    attention_factor: float = Field(description="What cos and sin are multiplied by.")
    rounding: Rounding
    dtype: DType
    start: int
    stop: int
    shape: list[int] = Field(description="[2, stop - start, rotary_dim]")
    cos: list[list[float]] = Field(description="cos of each position's angles, rows by position.")
    sin: list[list[float]] = Field(description="sin of the same angles.")
