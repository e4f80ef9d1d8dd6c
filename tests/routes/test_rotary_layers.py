"""from-config of a model whose rope parameters are per layer type (Gemma 3, Gemma 4), and of
a multimodal config that nests its text model (``text_config``): ``layer_type=NAME`` answers
that type's table, without it every type's (JSON keyed by type, npz and safetensors members
``NAME/cos``, ``NAME/sin``) and which layers use which; ``X-Config-Fields`` names what was
read."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
import safetensors.numpy

from tests.support import assert_problem, client_of

ROTARY = "/v1/encodings/rotary"
JSON = {"content-type": "application/json"}
# Gemma 3 4B's text model in transformers 5's form: sliding layers at theta 1e4, full
# layers at 1e6 with linear scaling by 8 (six layers: the fifth... is layer 5, full)
GEMMA3 = {
    "model_type": "gemma3_text",
    "head_dim": 8,
    "max_position_embeddings": 16,
    "num_hidden_layers": 6,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}
SLIDING = "max_len=16&head_dim=8&base=10000"
FULL = "max_len=16&head_dim=8&base=1000000&scaling=linear&factor=8"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def post(http: httpx.Client, config: Any, query: str = "") -> httpx.Response:
    return http.post(f"{ROTARY}/from-config?{query}", content=orjson.dumps(config), headers=JSON)


def npz(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content)) as archive:
        return {name: archive[name] for name in archive.files}


def table(http: httpx.Client, query: str) -> dict[str, Any]:
    return npz(http.get(f"{ROTARY}?{query}&format=npz"))


def test_every_layer_types_table_in_npz(http: httpx.Client) -> None:
    answer = post(http, GEMMA3, "format=npz")
    got = npz(answer)
    assert sorted(got) == [
        "full_attention/cos",
        "full_attention/sin",
        "sliding_attention/cos",
        "sliding_attention/sin",
    ]
    for name, query in (("sliding_attention", SLIDING), ("full_attention", FULL)):
        expected = table(http, query)
        for member in ("cos", "sin"):
            assert np.array_equal(got[f"{name}/{member}"], expected[member])
    assert answer.headers["x-layer-types"] == ", ".join(GEMMA3["layer_types"])  # type: ignore[arg-type]
    assert "rope_parameters.full_attention.factor" in answer.headers["x-config-fields"]
    assert answer.headers["cache-control"] == "no-store"


def test_every_layer_types_table_in_json(http: httpx.Client) -> None:
    answer = post(http, GEMMA3, "format=json&stop=3")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["layer_types"] == GEMMA3["layer_types"]
    assert "layer_types" in document["config_fields"]
    assert set(document["tables"]) == {"sliding_attention", "full_attention"}
    full = document["tables"]["full_attention"]
    assert (full["base"], full["scaling"], full["factor"], full["stop"]) == (1e6, "linear", 8.0, 3)
    again = http.get(full["location"]).json()  # its GET (format=json, as asked) is the same
    assert again["cos"] == full["cos"]
    assert again["sin"] == full["sin"]


def test_every_layer_types_table_in_safetensors(http: httpx.Client) -> None:
    answer = post(http, GEMMA3, "format=safetensors")
    assert answer.status_code == 200, answer.text
    tensors = safetensors.numpy.load(answer.content)
    assert np.array_equal(tensors["sliding_attention/sin"], table(http, SLIDING)["sin"])
    header_length = int.from_bytes(answer.content[:8], "little")
    notes = json.loads(answer.content[8 : 8 + header_length])["__metadata__"]
    assert json.loads(notes["layer_types"]) == GEMMA3["layer_types"]
    assert json.loads(notes["full_attention"])["factor"] == 8.0


@pytest.mark.parametrize("name", ["sliding_attention", "full_attention"])
def test_one_layer_types_table(http: httpx.Client, name: str) -> None:
    answer = post(http, GEMMA3, f"layer_type={name}&format=npz")
    expected = table(http, SLIDING if name == "sliding_attention" else FULL)
    assert all(np.array_equal(npz(answer)[member], expected[member]) for member in ("cos", "sin"))
    assert "layer_types" in answer.headers["x-config-fields"]
    npy = post(http, GEMMA3, f"layer_type={name}&format=npy")  # one table: every format
    assert npy.status_code == 200, npy.text


def test_a_format_of_one_array_needs_a_layer_type(http: httpx.Client) -> None:
    for fmt in ("npy", "raw"):
        assert_problem(post(http, GEMMA3, f"format={fmt}"), 422, "layer_type", "npz")
    refused = http.post(
        f"{ROTARY}/from-config",
        content=orjson.dumps(GEMMA3),
        headers={**JSON, "accept": "application/x-npy"},
    )
    assert_problem(refused, 406)
    chosen = http.post(
        f"{ROTARY}/from-config",
        content=orjson.dumps(GEMMA3),
        headers={**JSON, "accept": "application/x-npz"},
    )
    assert chosen.headers["content-type"] == "application/x-npz"
    assert chosen.headers["vary"] == "Accept"


def test_layer_types_are_checked(http: httpx.Client) -> None:
    assert_problem(post(http, GEMMA3, "layer_type=global"), 422, "'global'", "sliding_attention")
    plain = {"head_dim": 8, "max_position_embeddings": 16}
    assert_problem(post(http, plain, "layer_type=full_attention"), 422, "one set")
    unknown = {**GEMMA3, "layer_types": ["sliding_attention", "chunked_attention"]}
    assert_problem(post(http, unknown, "format=npz"), 422, "layer_types", "chunked_attention")
    assert_problem(post(http, {**GEMMA3, "layer_types": "full"}), 422, "layer_types", "list")
    loose = {**GEMMA3, "rope_parameters": {**GEMMA3["rope_parameters"], "rope_theta": 5.0}}  # type: ignore[dict-item]
    assert_problem(post(http, loose), 422, "rope_parameters", "loose", "rope_theta")


def test_gemma3s_older_fields(http: httpx.Client) -> None:
    """rope_theta and rope_scaling for full layers, rope_local_base_freq for sliding ones,
    layer types by sliding_window_pattern: as Gemma3TextConfig converts them."""
    legacy = {
        "model_type": "gemma3_text",
        "head_dim": 8,
        "max_position_embeddings": 16,
        "num_hidden_layers": 8,
        "sliding_window_pattern": 4,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    answer = post(http, legacy, "format=npz")
    got = npz(answer)
    assert np.array_equal(got["full_attention/cos"], table(http, FULL)["cos"])
    assert np.array_equal(got["sliding_attention/cos"], table(http, SLIDING)["cos"])
    types = ["sliding_attention"] * 3 + ["full_attention"]
    assert answer.headers["x-layer-types"] == ", ".join(types * 2)
    fields = answer.headers["x-config-fields"].split(", ")
    assert {"rope_theta", "rope_local_base_freq", "rope_scaling.factor"} <= set(fields)
    # "type" where transformers reads "rope_type": its conversion keeps the default
    lost = {**legacy, "rope_scaling": {"type": "linear", "factor": 8.0}}
    full = post(http, lost, "layer_type=full_attention&format=json").json()
    assert (full["scaling"], full["base"]) == ("none", 1e6)


def test_gemma4s_full_layers_use_the_global_head(http: httpx.Client) -> None:
    gemma4 = {
        "model_type": "gemma4_text",
        "head_dim": 8,
        "global_head_dim": 16,
        "max_position_embeddings": 16,
        "num_hidden_layers": 5,  # no layer_types: pattern 6, and the last layer is full
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "rope_theta": 1000000.0,
            },
        },
    }
    answer = post(http, gemma4, "format=npz")
    got = npz(answer)
    full = table(
        http, "max_len=16&head_dim=16&base=1000000&scaling=proportional&partial_rotary_factor=0.25"
    )
    assert np.array_equal(got["full_attention/cos"], full["cos"])
    assert got["sliding_attention/cos"].shape == (16, 8)
    assert answer.headers["x-layer-types"].endswith("sliding_attention, full_attention")
    assert "global_head_dim" in answer.headers["x-config-fields"]


def test_a_nested_text_config_is_read(http: httpx.Client) -> None:
    """Qwen3-VL and Gemma 3 nest the text model's fields; the outer ones are not read."""
    config = {
        "model_type": "qwen3_vl",
        "max_position_embeddings": 99,
        "text_config": {
            "head_dim": 16,
            "max_position_embeddings": 16,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 5000000,
                "mrope_section": [2, 3, 3],
                "mrope_interleaved": True,
            },
        },
    }
    answer = post(http, config, "format=json")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert (document["max_len"], document["base"]) == (16, 5e6)
    assert document["mrope_section"] == [2, 3, 3]
    assert document["mrope_interleaved"] is True
    fields = answer.headers["x-config-fields"].split(", ")
    assert "text_config.rope_parameters.mrope_section" in fields
    assert "max_position_embeddings" not in fields
    wrong = {**config, "text_config": {**config["text_config"], "head_dim": "16"}}  # type: ignore[dict-item]
    assert_problem(post(http, wrong), 422, "text_config.head_dim", "integer")


def test_many_layer_types_are_refused_before_any_table(http: httpx.Client) -> None:
    layers = {f"type{k}": {"rope_type": "default"} for k in range(17)}
    config = {"head_dim": 8, "max_position_embeddings": 4, "rope_parameters": layers}
    assert_problem(post(http, config), 422, "17 layer types", "at most 16")


def test_names_from_the_config_are_quoted_in_headers(http: httpx.Client) -> None:
    def named(name: str) -> dict[str, Any]:
        return {
            "head_dim": 8,
            "max_position_embeddings": 4,
            "layer_types": [name],
            "rope_parameters": {name: {"rope_type": "default"}},
        }

    answer = post(http, named("é x"), "format=npz")
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-layer-types"] == "%C3%A9%20x"
    # a line break never reaches a header: such a name is refused (test_layer_type_names)
    assert_problem(post(http, named("é\r\nx"), "format=npz"), 422, "rope_parameters", "printable")


def test_per_layer_config_says_each_layer_types_head(http: httpx.Client) -> None:
    """transformers 5 saves Gemma 4's global_head_dim as per_layer_config, by layer index."""
    saved = {
        "model_type": "gemma4_text",
        "head_dim": 8,
        "max_position_embeddings": 16,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        "per_layer_config": {"1": {"head_dim": 16}},
    }
    got = npz(post(http, saved, "format=npz"))
    assert got["full_attention/cos"].shape == (16, 16)
    assert got["sliding_attention/cos"].shape == (16, 8)
    uneven = {
        **saved,
        "layer_types": ["full_attention"] * 2,
        "per_layer_config": {"1": {"head_dim": 16}},
    }
    assert_problem(post(http, uneven), 422, "per_layer_config", "differs")


def named(*names: str) -> dict[str, Any]:
    """A config whose rope parameters are per layer type, one table a name."""
    return {
        "head_dim": 8,
        "max_position_embeddings": 4,
        "rope_parameters": {
            name: {"rope_type": "default", "rope_theta": 100.0 * (k + 2)}
            for k, name in enumerate(names)
        },
    }


@pytest.mark.parametrize("fmt", ["json", "npz", "safetensors"])
@pytest.mark.parametrize(
    ("name", "why"),
    [
        pytest.param("", "1 to 64", id="empty: the config's single table"),
        pytest.param("layer_types", "must not be", id="the metadata's layer_types"),
        pytest.param("config_fields", "must not be", id="the metadata's config_fields"),
        pytest.param("a\x00b", "printable", id="NUL: npz members cut there"),
        pytest.param("../x", "path", id="a path out of the archive"),
        pytest.param("x/cos", "path", id="a member's name"),
        pytest.param("x" * 65, "1 to 64", id="long"),
    ],
)
def test_layer_type_names(http: httpx.Client, fmt: str, name: str, why: str) -> None:
    """A layer type's name keys a table in every answer (JSON, members NAME/cos, metadata):
    one that would be taken for another thing, or lost, is refused, naming where it is."""
    answer = post(http, named(name, "full_attention"), f"format={fmt}")
    problem = assert_problem(answer, 422, "layer type", why)
    assert problem["errors"][0]["name"] == "rope_parameters"
    assert problem["errors"][0]["in"] == "body"


def test_a_layer_type_named_empty_is_refused_by_audit_and_compare(http: httpx.Client) -> None:
    """The same reading: an audit or a comparison does not take "" for a single table."""
    config = named("", "full_attention")
    audit = http.post("/v1/audit/rotary/from-config", content=orjson.dumps(config), headers=JSON)
    assert_problem(audit, 422, "layer type", "1 to 64")
    table = {"family": "rotary", "config": config}
    body = {"a": table, "b": {"family": "rotary", "parameters": {"head_dim": 8}}, "stop": 4}
    compare = http.post("/v1/compare", content=orjson.dumps(body), headers=JSON)
    assert_problem(compare, 422, "layer type", "1 to 64")


def test_any_name_a_config_may_give_can_be_chosen(http: httpx.Client) -> None:
    config = named("é x", "full_attention")
    chosen = post(http, config, "layer_type=%C3%A9%20x&format=json")
    assert chosen.status_code == 200, chosen.text
    assert chosen.json()["base"] == 200.0
    problem = assert_problem(post(http, config, "layer_type=..%2Fx"), 422, "path")
    assert problem["errors"][0]["in"] == "query"


def test_a_json_answer_over_the_limit_suggests_formats_this_route_takes(
    http: httpx.Client,
) -> None:
    """The route answers several tables as json, npz or safetensors (npy and raw hold one)."""
    long = {**GEMMA3, "max_position_embeddings": 131072, "head_dim": 256}
    for query in ("format=json", ""):  # asked, or by Accept (JSON by default)
        problem = assert_problem(post(http, long, query), 422, "PE_MAX_JSON_ELEMENTS")
        assert "npz or safetensors" in problem["detail"]
        assert "npy" not in problem["detail"]
        assert "raw" not in problem["detail"]
    both = {**long, "max_position_embeddings": 4096}  # each table within it, not the two
    problem = assert_problem(post(http, both, "format=json"), 422, "PE_MAX_JSON_ELEMENTS")
    assert "npz or safetensors, or give layer_type" in problem["detail"]
