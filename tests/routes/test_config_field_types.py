"""Every field the config readers read, given a value of the wrong type (a list, an object,
a number, true, null, a string), through from-config: a 4xx naming what is wrong, or a
table (null is a field left out), never a 500. A list as ``model_type`` was hashed (500)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.encodings import scalings
from tests.support import client_of, sample

ROTARY = "/v1/encodings/rotary/from-config?max_len=4&format=json"
TEMPERATURE = "/v1/encodings/temperature/from-config?max_len=4&format=json"
LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "head_dim": 8,
    "num_hidden_layers": 4,
    "max_position_embeddings": 16,
}
GEMMA3: dict[str, Any] = {
    "model_type": "gemma3_text",
    "head_dim": 8,
    "max_position_embeddings": 16,
    "layer_types": ["sliding_attention", "full_attention"],
    "per_layer_config": {"0": {"head_dim": 8}, "1": {"head_dim": 8}},
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}
LLAMA4: dict[str, Any] = {
    "model_type": "llama4",
    "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4, "floor_scale": 8192},
}
# the fields read at a config's top (rotary), as GPT-J names some, and in its rope parameters
TOP = [
    "model_type",
    "text_config",
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "rotary_emb_base",
    "partial_rotary_factor",
    "rotary_pct",
    "rotary_dim",
    "head_dim",
    "qk_rope_head_dim",
    "hidden_size",
    "num_attention_heads",
    "max_position_embeddings",
    "original_max_position_embeddings",
    "layer_types",
    "sliding_window_pattern",
    "num_hidden_layers",
    "rope_local_base_freq",
    "per_layer_config",
    "global_head_dim",
    "dtype",
    "torch_dtype",
    "no_rope_layers",
    "no_rope_layer_interval",
]
GPTJ: tuple[str, ...] = ("n_embd", "n_head", "n_positions", "n_layer", "rotary_dim")
ROPE: tuple[str, ...] = (
    "rope_type",
    "type",
    "rope_theta",
    "partial_rotary_factor",
    "mrope_section",
)
ROPE += ("mrope_interleaved", *scalings.ALL_PARAMETERS)
LLAMA4_FIELDS: tuple[str, ...] = (
    "floor_scale",
    "attn_scale",
    "attn_temperature_tuning",
    "no_rope_layers",
)
LLAMA4_FIELDS += ("no_rope_layer_interval", "num_hidden_layers", "max_position_embeddings")
LLAMA4_FIELDS += ("model_type",)
WRONG = {"list": ["x", 1], "object": {"a": 1}, "number": -1.5, "true": True, "null": None}
WRONG |= {"string": "x", "huge": 1 << 70}


# a field read by two models or routes: the full run sends it wrong to both; the inner loop
# to the first, and of those cases every other one (sample)
TWICE = pytest.mark.slow


def cases() -> Iterator[Any]:
    scaled = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8}
    for field in TOP:
        yield pytest.param(ROTARY, LLAMA, (field,), id=f"llama.{field}")
        yield pytest.param(ROTARY, GEMMA3, (field,), id=f"gemma3.{field}", marks=TWICE)
    yield pytest.param(
        ROTARY,
        {"model_type": "gemma3", "text_config": LLAMA},
        ("text_config", "model_type"),
        id="text_config.model_type",
    )
    for field in GPTJ:
        yield pytest.param(ROTARY, {"model_type": "gptj"}, (field,), id=f"gptj.{field}")
    for field in ROPE:  # in the rope parameters of a scaling that reads it
        taking = [name for name, takes in scalings.PARAMETERS.items() if field in takes]
        rope_type = taking[0] if taking else "yarn"
        config = {**LLAMA, "rope_parameters": {**scaled, "rope_type": rope_type}}
        yield pytest.param(ROTARY, config, ("rope_parameters", field), id=f"{rope_type}.{field}")
    for name in ("sliding_attention", "full_attention"):
        yield pytest.param(ROTARY, GEMMA3, ("rope_parameters", name), id=f"gemma3.{name}")
    for field in ("rope_type", "rope_theta", "factor"):
        where: tuple[str, ...] = ("rope_parameters", "full_attention", field)
        yield pytest.param(ROTARY, GEMMA3, where, id=f"gemma3.full_attention.{field}")
    yield pytest.param(ROTARY, GEMMA3, ("per_layer_config", "1"), id="per_layer_config.1")
    yield pytest.param(ROTARY, GEMMA3, ("per_layer_config", "1", "head_dim"), id="plc.head_dim")
    for field in LLAMA4_FIELDS:
        where = ("text_config", field)
        yield pytest.param(TEMPERATURE, LLAMA4, where, id=f"llama4.{field}")
        yield pytest.param(ROTARY, LLAMA4, where, id=f"llama4-rotary.{field}", marks=TWICE)


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app, raise_errors=False) as client:
        yield client


@pytest.mark.parametrize(("route", "config", "where"), sample(cases(), 2))
def test_no_field_of_the_wrong_type_makes_a_500(
    http: httpx.Client, route: str, config: dict[str, Any], where: tuple[str, ...]
) -> None:
    refused = []
    for kind, value in WRONG.items():
        # vLLM's reading reads the dtype too
        for query in ("", "&engine=vllm") if "dtype" in where[-1] else ("",):
            posted = copy.deepcopy(config)
            inner = posted
            for name in where[:-1]:
                inner = inner[name]
            inner[where[-1]] = value
            answer = http.post(
                route + query,
                content=json.dumps(posted).encode(),  # orjson writes no 70-bit integer
                headers={"content-type": "application/json"},
            )
            if answer.status_code >= 500:
                refused.append(f"{kind}{query}: {answer.status_code} {answer.text[:200]}")
    assert not refused, refused


@pytest.mark.parametrize("value", list(WRONG.values()), ids=list(WRONG))
def test_an_mrope_layouts_config_model_type_of_the_wrong_type_is_refused(
    http: httpx.Client, value: Any
) -> None:
    """M-RoPE's layout looked a list up as a model type (500)."""
    body = {"segments": [{"text": 3}], "config": {"model_type": value}}
    answer = http.post(
        "/v1/positions/mrope",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 422, answer.text


def test_the_default_rope_theta_is_named(http: httpx.Client) -> None:
    """X-Config-Fields names the defaults taken, rope_theta's too (it named none)."""
    answer = http.post(
        ROTARY, content=json.dumps(LLAMA), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    assert "rope_theta=10000.0" in answer.headers["x-config-fields"].split(", ")
