"""Llama 4's attention temperature by position: the table, and the same from a config."""

from __future__ import annotations

from typing import Final

from service import handlers
from service.encodings import temperature
from service.schemas.hf_config import read_config
from service.schemas.llama4 import (
    TemperatureDocument,
    TemperatureFromConfig,
    TemperatureQuery,
    temperature_query,
)
from service.web import declared

TABLE: Final = declared.Declared(
    family=temperature.FAMILY,
    query=TemperatureQuery,
    key=TemperatureQuery.key,
    block=lambda query, key: handlers.Block(key, query.start, query.row_stop, 0, 1, query.max_len),
    describe=TemperatureQuery.describe,
    document=TemperatureDocument,
    operation_id="getTemperatureTable",
    summary="Llama 4's query scale by position on its layers without RoPE: "
    "log1p(floor((p + 1) / floor_scale)) * attn_scale + 1.",
    answer="The scales: (rows, 1).",
    shape="rows,1",
    tag="rotary",
    audit=True,
    from_document=declared.FromDocument(
        read=read_config,
        fields=temperature_query,
        query=TemperatureFromConfig,
        summary="Llama 4's query scales from its config.json; X-Layer-Types says which "
        "layers use RoPE (rope) and which do not (nope, those the scales are for).",
        operation_id="getTemperatureTableFromConfig",
        body="A Llama 4 config.json (floor_scale, attn_scale, attn_temperature_tuning, "
        "no_rope_layers or no_rope_layer_interval; in text_config where it nests one).",
        missing={"max_len": "the config has no max_position_embeddings: give max_len"},
    ),
)
