"""A vision tower's RoPE from its model's config.json over HTTP
(``POST /v1/encodings/vision-rotary/from-config``): the table is the ``GET``'s of the
parameters read (its ``Content-Location``), the fields read and the defaults taken are said,
and each refusal names the parameter of the query or the field of the config at fault."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import httpx
import pytest

from tests.schemas.test_vision_config import DINOV3_S16, PIXTRAL_12B, QWEN25_7B, SCOUT
from tests.support import assert_problem, client_of

TABLE: Final = "/v1/encodings/vision-rotary"
FROM_CONFIG: Final = TABLE + "/from-config"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.mark.parametrize(
    ("config", "params", "query"),
    [
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B},
            {"height": 112, "width": 168, "window_index": "true"},
            {"model": "qwen2_5_vl", "grid": "1,8,12", "head_dim": 80, "theta": 10000.0}
            | {"spatial_merge_size": 2, "window_size": 112, "patch_size": 14}
            | {"window_index": "true"},
            id="qwen2_5_vl-7b-windows",
        ),
        pytest.param(
            {"model_type": "qwen2_vl"},
            {"height": 56, "width": 28, "frames": 3},
            {"model": "qwen2_vl", "grid": "2,4,2", "head_dim": 80, "theta": 10000.0}
            | {"spatial_merge_size": 2},
            id="qwen2_vl-video",
        ),
        pytest.param(
            {"model_type": "llava", "vision_config": PIXTRAL_12B},
            {"height": 100, "width": 50},
            {"model": "pixtral", "grid": "6,3", "head_dim": 64, "theta": 10000.0},
            id="pixtral-12b",
        ),
        pytest.param(
            {"model_type": "llama4", "vision_config": SCOUT},
            {"start": 570},
            {"model": "llama4", "grid": "24,24", "head_dim": 88, "theta": 10000.0},
            id="llama4-scout",
        ),
        pytest.param(
            DINOV3_S16,
            {"height": 64, "width": 48},
            {"model": "dinov3", "grid": "4,3", "head_dim": 64, "theta": 100.0},
            id="dinov3-vits16",
        ),
    ],
)
def test_the_table_is_the_get_s_of_the_parameters_read(
    http: httpx.Client, config: dict[str, Any], params: dict[str, Any], query: dict[str, Any]
) -> None:
    rows = {"format": "npz", "start": params.get("start", 1)}
    answer = http.post(FROM_CONFIG, params={**params, **rows}, json=config)
    assert answer.status_code == 200, answer.text
    by_hand = http.get(TABLE, params={**query, **rows})
    assert by_hand.status_code == 200, by_hand.text
    assert answer.content == by_hand.content
    assert answer.headers["etag"] == by_hand.headers["etag"]
    replayed = http.get(answer.headers["content-location"])
    assert replayed.content == answer.content


def test_the_fields_read_and_the_defaults_taken_are_said(http: httpx.Client) -> None:
    """Qwen2_5_VLVisionConfig's default is 3584 wide: a config without hidden_size gets
    heads of 224, and says so."""
    config = {"model_type": "qwen2_5_vl", "vision_config": {"num_heads": 16}}
    answer = http.post(FROM_CONFIG, params={"height": 28, "width": 28}, json=config)
    assert answer.status_code == 200, answer.text
    assert answer.json()["head_dim"] == 224
    said = answer.headers["x-config-fields"].split(", ")
    assert said[:3] == ["model_type", "vision_config.hidden_size=3584", "vision_config.num_heads"]


@pytest.mark.parametrize(
    ("config", "params", "name", "where", "words"),
    [
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B},
            {"height": 42, "width": 56},
            "height",
            "query",
            "not a multiple of patch_size × spatial_merge_size (14 × 2)",
            id="qwen-size-its-processor-resizes",
        ),
        pytest.param(
            {"model_type": "qwen2_vl"},
            {"width": 56},
            "height",
            "query",
            "in pixels",
            id="no-height",
        ),
        pytest.param(
            {"model_type": "llama4", "vision_config": SCOUT},
            {"height": 672},
            "height",
            "query",
            "every 336×336 tile",
            id="llama4-not-its-tile",
        ),
        pytest.param(
            PIXTRAL_12B,
            {"height": 64, "width": 64, "window_index": "true"},
            "window_index",
            "query",
            "not a parameter of model pixtral",
            id="pixtral-windows",
        ),
        pytest.param(
            {**PIXTRAL_12B, "head_dim": 128},
            {"height": 64, "width": 64},
            "head_dim",
            "body",
            "would not fit them",
            id="pixtral-head-dim-not-its-heads",
        ),
        pytest.param(
            {"model_type": "qwen2_vl", "vision_config": {"embed_dim": 1260, "num_heads": 14}},
            {"height": 56, "width": 56},
            "head_dim",
            "body",
            "multiple of 4",
            id="head-the-model-s-split-cannot-take",
        ),
        pytest.param(
            {"model_type": "llava"},
            {"height": 64, "width": 64},
            "vision_config",
            "body",
            "clip_vision_model",
            id="llava-clip",
        ),
        pytest.param(
            {"model_type": "siglip_vision_model"},
            {"height": 64, "width": 64},
            "model_type",
            "body",
            "qwen2_5_vl, qwen3_vl",
            id="unknown-model-type",
        ),
    ],
)
def test_a_refusal_names_the_parameter_or_the_field(
    http: httpx.Client,
    config: dict[str, Any],
    params: dict[str, Any],
    name: str,
    where: str,
    words: str,
) -> None:
    answer = http.post(FROM_CONFIG, params=params, json=config)
    problem = assert_problem(answer, 422, words)
    assert [(each["name"], each["in"]) for each in problem["errors"]][:1] == [(name, where)]


def test_a_size_the_query_does_not_take_is_refused(http: httpx.Client) -> None:
    """The query's height and width are pixels, checked as such; grid is the GET's."""
    answer = http.post(FROM_CONFIG, params={"grid": "4,4"}, json={"model_type": "qwen2_vl"})
    assert_problem(answer, 422)
    assert answer.json()["errors"][0]["name"] == "grid"


def test_the_audit_of_a_config_s_table(http: httpx.Client) -> None:
    """``POST /v1/audit/vision-rotary/from-config``: the same reading, the size not a table
    parameter."""
    config = {"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B}
    answer = http.post(
        "/v1/audit/vision-rotary/from-config", params={"height": 56, "width": 56}, json=config
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["paths"]
    assert answer.headers["x-config-fields"].startswith("model_type, vision_config.hidden_size")


WRONG: Final = [[1], {"a": 1}, 3.5, -2, True, None, "x"]
READ: Final = [
    "hidden_size",
    "num_heads",
    "head_dim",
    "patch_size",
    "spatial_merge_size",
    "temporal_patch_size",
    "window_size",
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
]


@pytest.mark.parametrize("value", WRONG, ids=lambda value: type(value).__name__)
@pytest.mark.parametrize("field", ["model_type", "vision_config", *READ])
def test_a_field_of_the_wrong_type_is_a_4xx_naming_it(
    http: httpx.Client, field: str, value: Any
) -> None:
    """Every field read, given a value of each wrong type: a 4xx naming it, or a table
    (null: the class's default), never a 500."""
    config: dict[str, Any] = {"model_type": "qwen2_5_vl", "vision_config": dict(QWEN25_7B)}
    where = config if field in ("model_type", "vision_config") else config["vision_config"]
    where[field] = value
    answer = http.post(FROM_CONFIG, params={"height": 56, "width": 56, "stop": 1}, json=config)
    if answer.status_code == 200:
        return
    problem = assert_problem(answer, answer.status_code)
    assert 400 <= answer.status_code < 500
    assert field in problem["errors"][0]["name"], problem
