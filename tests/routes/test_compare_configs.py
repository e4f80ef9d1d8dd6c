"""``POST /v1/compare`` with tables read from configs: every refusal a 422 located in the
body (``a.parameters.layer_type``, ``a.config.rope_theta``), never a 500, and a large
config read in the CPU lane."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from service.runtime import QUICK_ELEMENTS, Runtime
from service.web import documents
from tests.support import assert_problem, client_of

JSON = {"content-type": "application/json"}
LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32}
GEMMA = json.loads((Path(__file__).parents[1] / "data" / "gemma-3-4b-it.config.json").read_text())


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def compared(
    http: httpx.Client, config: dict[str, Any], parameters: dict[str, Any]
) -> httpx.Response:
    body = {
        "a": {"family": "rotary", "config": config, "parameters": parameters},
        "b": {"family": "rotary", "parameters": {"head_dim": 128}},
        "stop": 64,
    }
    return http.post("/v1/compare", content=orjson.dumps(body), headers=JSON)


def names(answer: httpx.Response) -> list[str]:
    return [each["name"] for each in answer.json()["errors"]]


@pytest.mark.parametrize("config", [LLAMA, GEMMA], ids=["llama", "gemma3"])
@pytest.mark.parametrize("field", ["head_dim_key", "layer_type"])
@pytest.mark.parametrize("value", [["x"], {"a": 1}, 5, True], ids=["list", "object", "5", "true"])
def test_reading_parameters_of_the_wrong_type_are_refused(
    http: httpx.Client, config: dict[str, Any], field: str, value: Any
) -> None:
    """They were hashed (a list: 500), measured (a number: 500) or ignored (a number as
    head_dim_key: 200)."""
    answer = compared(http, config, {field: value})
    assert_problem(answer, 422, f"a.parameters.{field}")
    assert names(answer) == [f"a.parameters.{field}"]


@pytest.mark.parametrize("field", ["start", "stop", "format"])
@pytest.mark.parametrize("configured", [True, False])
def test_the_comparisons_fields_are_refused_in_a_tables_parameters(
    http: httpx.Client, field: str, configured: bool
) -> None:
    """They were ignored (200), and said in the picture's title."""
    value = "npy" if field == "format" else 8
    table: dict[str, Any] = {"family": "rotary", "parameters": {field: value}}
    if configured:
        table["config"] = LLAMA
    else:
        table["parameters"]["head_dim"] = 128
    body = {"a": table, "b": {"family": "rotary", "parameters": {"head_dim": 128}}, "stop": 64}
    answer = http.post("/v1/compare", content=orjson.dumps(body), headers=JSON)
    assert_problem(answer, 422, f"a.parameters.{field}")


@pytest.mark.parametrize(
    ("config", "parameters", "name"),
    [
        ({**LLAMA, "rope_theta": "x"}, {}, "a.config.rope_theta"),
        ({**LLAMA, "model_type": ["gptj"]}, {}, "a.config.model_type"),
        (LLAMA, {"layer_type": "full_attention"}, "a.parameters.layer_type"),
        (GEMMA, {"layer_type": "chunked_attention"}, "a.parameters.layer_type"),
        ({**LLAMA, "rope_theta": -1.0}, {}, "a.config.base"),
        (LLAMA, {"base": -1.0}, "a.parameters.base"),
    ],
)
def test_a_configs_refusals_are_located_in_the_body(
    http: httpx.Client, config: dict[str, Any], parameters: dict[str, Any], name: str
) -> None:
    """A config's field was named as if at the body's top (``rope_theta``), a parameter as
    if in the query (``layer_type``)."""
    answer = compared(http, config, parameters)
    assert_problem(answer, 422, name)
    assert names(answer) == [name]
    assert all(each["in"] == "body" for each in answer.json()["errors"])


def test_a_large_config_is_read_in_the_cpu_lane(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config is read in the lane the posted body's size takes (it was the quick lane
    whatever its size)."""
    charged: list[int] = []
    compute = Runtime.compute

    async def spied(self: Runtime, elements: int, work: Any, *args: Any, **kwargs: Any) -> Any:
        if work is documents.fields:
            charged.append(elements)
        return await compute(self, elements, work, *args, **kwargs)

    monkeypatch.setattr(Runtime, "compute", spied)
    large = {**LLAMA, "notes": "x" * (QUICK_ELEMENTS + 1)}
    answer = compared(http, large, {})
    assert answer.status_code == 200, answer.text
    assert charged
    assert min(charged) > QUICK_ELEMENTS
