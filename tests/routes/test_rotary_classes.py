"""from-config of configs as published, which leave fields to their model type's config
class in transformers (:mod:`service.schemas.hf_models`): the class's default is taken,
and ``X-Config-Fields`` names it with its value (``text_config.head_dim=256``)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from tests.support import ROOT, assert_problem, client_of

ROTARY = "/v1/encodings/rotary"
JSON = {"content-type": "application/json"}
# google/gemma-3-4b-it's config.json as published on the Hub (transformers 4.50): its
# text_config names no head_dim, head count, max_position_embeddings or rope_theta
GEMMA3_4B = orjson.loads((ROOT / "tests" / "data" / "gemma-3-4b-it.config.json").read_bytes())
# EleutherAI/gpt-j-6B's RoPE fields, under GPT-J's own names
GPTJ = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def post(http: httpx.Client, config: Any, query: str) -> httpx.Response:
    return http.post(f"{ROTARY}/from-config?{query}", content=orjson.dumps(config), headers=JSON)


def arrays(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content)) as archive:
        return {name: archive[name] for name in archive.files}


def test_gemma_3_4b_as_published(http: httpx.Client) -> None:
    """Gemma3TextConfig's head_dim (256), thetas (1e6 full, 1e4 sliding) and pattern (6):
    the tables transformers builds for the model, and the header says which were taken."""
    answer = post(http, GEMMA3_4B, "stop=64&format=npz")
    got = arrays(answer)
    head = "max_len=131072&stop=64&head_dim=256&format=npz"
    full = arrays(http.get(f"{ROTARY}?{head}&base=1000000&scaling=linear&factor=8"))
    sliding = arrays(http.get(f"{ROTARY}?{head}&base=10000"))
    for member in ("cos", "sin"):
        assert np.array_equal(got[f"full_attention/{member}"], full[member])
        assert np.array_equal(got[f"sliding_attention/{member}"], sliding[member])
    fields = answer.headers["x-config-fields"].split(", ")
    assert {
        "text_config.head_dim=256",
        "text_config.max_position_embeddings=131072",
        "text_config.rope_theta=1000000.0",
        "text_config.rope_local_base_freq=10000.0",
        "text_config.sliding_window_pattern=6",
        "text_config.rope_scaling.factor",
        "text_config.num_hidden_layers",
    } <= set(fields)
    layers = answer.headers["x-layer-types"].split(", ")
    assert len(layers) == 34
    assert [i for i, kind in enumerate(layers) if kind == "full_attention"] == [5, 11, 17, 23, 29]


def test_gemma_3_4b_one_layer_type(http: httpx.Client) -> None:
    answer = post(http, GEMMA3_4B, "layer_type=full_attention&stop=2&format=json")
    assert answer.status_code == 200, answer.text
    table = answer.json()
    assert (table["max_len"], table["head_dim"], table["base"]) == (131072, 256, 1e6)
    assert (table["scaling"], table["factor"]) == ("linear", 8.0)
    assert "head_dim=256" in answer.headers["content-location"]


def test_a_config_of_gpt_j(http: httpx.Client) -> None:
    """GPT-J's names (n_embd, n_head, n_positions), its rotary_dim (a quarter of its 256-wide
    heads) and its pairs (2i, 2i + 1): modeling_gptj's create_sinusoidal_positions."""
    answer = post(http, GPTJ, "stop=8&format=json")
    assert answer.status_code == 200, answer.text
    table = answer.json()
    assert (table["max_len"], table["head_dim"], table["rotary_dim"]) == (2048, 256, 64)
    assert (table["partial_rotary_factor"], table["convention"]) == (0.25, "interleaved")
    fields = answer.headers["x-config-fields"].split(", ")
    assert {"n_embd", "n_head", "rotary_dim", "n_positions"} <= set(fields)
    inv_freq = 1.0 / 10000.0 ** (np.arange(0, 64, 2) / 64)  # create_sinusoidal_positions
    angles = np.arange(8)[:, None] * np.repeat(inv_freq, 2)[None, :]  # duplicate_interleave
    assert np.allclose(table["cos"], np.cos(angles), atol=1e-6)
    assert np.allclose(table["sin"], np.sin(angles), atol=1e-6)


def test_gpt_j_leaves_its_rotary_dim_to_the_class(http: httpx.Client) -> None:
    bare = {"model_type": "gptj", "n_embd": 1024, "n_head": 8}
    answer = post(http, bare, "stop=1&format=json")
    assert answer.status_code == 200, answer.text
    table = answer.json()
    assert (table["max_len"], table["head_dim"], table["rotary_dim"]) == (2048, 128, 64)
    fields = answer.headers["x-config-fields"].split(", ")
    assert {"rotary_dim=64", "n_positions=2048", "n_embd", "n_head"} <= set(fields)
    common = {"model_type": "gptj", "hidden_size": 1024, "num_attention_heads": 8}  # either name
    assert post(http, common, "stop=1&format=json").json()["head_dim"] == 128
    narrow = {"model_type": "gptj", "n_embd": 64, "n_head": 8}  # 8-wide heads: 64 is too many
    assert_problem(post(http, narrow, "stop=1"), 422, "rotary_dim", "class's default")


@pytest.mark.parametrize("heads", [1, 8])
def test_gpt_j_refuses_a_null_rotary_dim(http: httpx.Client, heads: int) -> None:
    """GPTJConfig refuses ``rotary_dim: null`` (a strict int): not its class's 64."""
    config = {"model_type": "gptj", "n_embd": 1024, "n_head": heads, "rotary_dim": None}
    problem = assert_problem(post(http, config, "stop=1"), 422, "rotary_dim", "GPTJConfig")
    assert "one head only" in problem["detail"]
    # a config of another type reads a null as the field left out: no rotary_dim, whole heads
    other = {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8}
    answer = post(http, {**other, "rotary_dim": None}, "stop=1&format=json")
    assert answer.status_code == 200, answer.text
    assert answer.json()["rotary_dim"] == 128


@pytest.mark.parametrize(
    ("config", "expected", "defaulted"),
    [
        pytest.param(
            {"model_type": "llama", "hidden_size": 2048},
            {"head_dim": 64, "max_len": 2048},
            {"num_attention_heads=32", "max_position_embeddings=2048"},
            id="llama",
        ),
        pytest.param(
            {"model_type": "gpt_neox", "hidden_size": 2048, "num_attention_heads": 16},
            {"head_dim": 128, "partial_rotary_factor": 0.25, "rotary_dim": 32},
            {"rotary_pct=0.25", "max_position_embeddings=2048"},
            id="gpt_neox",
        ),
        pytest.param(
            {"model_type": "gemma2", "max_position_embeddings": 16},
            {"head_dim": 256},
            {"head_dim=256"},
            id="gemma2",
        ),
    ],
)
def test_other_classes_defaults(
    http: httpx.Client, config: dict[str, Any], expected: dict[str, Any], defaulted: set[str]
) -> None:
    answer = post(http, config, "stop=1&format=json")
    assert answer.status_code == 200, answer.text
    table = answer.json()
    assert {name: table[name] for name in expected} == expected
    assert defaulted <= set(answer.headers["x-config-fields"].split(", "))


def test_a_config_of_no_known_class_takes_no_default(http: httpx.Client) -> None:
    assert_problem(post(http, {"hidden_size": 2048}, "max_len=4"), 422, "head_dim")
    answer = post(http, {"model_type": "llama", "head_dim": 8, "rope_theta": 5e5}, "stop=1")
    assert answer.status_code == 200, answer.text
    assert "rope_theta" in answer.headers["x-config-fields"].split(", ")
