"""The rotary parameters that say whose arithmetic (``engine``) and in what dtype an engine
keeps the table (``cache_dtype``): :mod:`service.encodings.engines`."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field

from service.encodings import engines, scalings
from service.encodings.registry import DType
from service.encodings.rotary import RotaryKey
from service.schemas.rotary import RotaryFields
from service.settings import POSITION_CEILING


class EngineFields(RotaryFields):
    """Whose table: transformers' or a serving engine's, and its cache's dtype."""

    engine: engines.Engine = Field(
        "transformers",
        description="transformers, or vllm: vLLM 0.33.0's tables where it computes a scaling "
        "otherwise (dynamic: one static table; longrope: the factors max_model_len picks; "
        "deepseek_yarn: DeepSeek's mscale ratio).",
    )
    max_model_len: int | None = Field(
        None,
        ge=1,
        le=POSITION_CEILING + 1,
        description="engine=vllm, longrope: the deployment's context; long factors for every "
        "position past original_max_position_embeddings (its default: short ones).",
    )
    cache_dtype: engines.CacheDType = Field(
        "float32",
        description="The dtype the engine keeps the table in (vLLM: the model's, e.g. "
        "bfloat16): each entry rounded to it, then given in dtype.",
    )

    def resolved(self, r: int, max_len: int, rotated: int) -> tuple[Any, scalings.Params]:
        given = self.given()
        return scalings.resolve_for(
            self.engine, self.scaling, given, r, max_len, rotated, self.max_model_len
        )

    def rotary_key(self, head_dim: int, max_len: int, dtype: DType) -> RotaryKey:
        key = super().rotary_key(head_dim, max_len, dtype)
        return dataclasses.replace(key, cache_dtype=self.cache_dtype)

    def engine_fields(self) -> dict[str, Any]:
        """What an answer states of these: only what differs from transformers' float32."""
        fields: dict[str, Any] = {}
        if self.engine != "transformers":
            fields["engine"] = self.engine
        if self.max_model_len is not None:
            fields["max_model_len"] = self.max_model_len
        if self.cache_dtype != "float32":
            fields["cache_dtype"] = self.cache_dtype
        return fields
