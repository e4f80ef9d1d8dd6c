"""``POST /v1/positions/mrope``: M-RoPE's (3, L) position ids and rope delta for a layout.
The expected ids are what transformers 5.23's ``get_rope_index`` gave for the same layouts
(``tests/conformance/test_mrope_positions.py`` checks many more against it)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from tests.support import assert_problem, client_of

PATH = "/v1/positions/mrope"
JSON = {"content-type": "application/json"}
# two text tokens, an image of [1, 4, 6] patches, one text token, a video of [3, 4, 4] at
# 1.5 s a grid, two text tokens; merge size 2
MIXED = [
    {"text": 2},
    {"image": [1, 4, 6]},
    {"text": 1},
    {"video": [3, 4, 4], "seconds_per_grid": 1.5},
    {"text": 2},
]
HW = (
    [0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 6, 7, 7, 6, 6, 7, 7, 6, 6, 7, 7, 8, 9],
    [0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 8, 9],
)
EXPECTED = {
    "qwen2_vl": ([0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 9], *HW, -13),
    "qwen2_5_vl": (
        [0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 6, 6, 6, 9, 9, 9, 9, 12, 12, 12, 12, 8, 9],
        *HW,
        -10,
    ),
}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def post(http: httpx.Client, body: Any, query: str = "", **headers: str) -> httpx.Response:
    return http.post(f"{PATH}?{query}", content=orjson.dumps(body), headers={**JSON, **headers})


@pytest.mark.parametrize("model", ["qwen2_vl", "qwen2_5_vl"])
def test_the_ids_of_a_mixed_layout(http: httpx.Client, model: str) -> None:
    rate = None if model == "qwen2_vl" else 2
    answer = post(http, {"segments": MIXED, "spatial_merge_size": 2, "tokens_per_second": rate})
    assert answer.status_code == 200, answer.text
    document = answer.json()
    *rows, delta = EXPECTED[model]
    assert document["position_ids"] == rows
    assert (document["model"], document["rope_delta"], document["length"]) == (model, delta, 23)
    assert answer.headers["x-rope-delta"] == str(delta)


def test_qwen3_vl_takes_a_video_as_frames_with_text_between(http: httpx.Client) -> None:
    video = {"video": [3, 4, 4], "frame_text": 1}
    body = {"segments": [*MIXED[:3], video, {"text": 2}], "model": "qwen3_vl"}
    document = post(http, body).json()
    assert document["position_ids"][0] == [
        *[0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 6, 6, 6, 8, 9, 9, 9, 9, 11, 12, 12, 12, 12, 14, 15]
    ]
    assert document["rope_delta"] == -9


def test_npy_is_the_int64_ids(http: httpx.Client) -> None:
    answer = post(http, {"segments": MIXED, "tokens_per_second": 2}, "format=npy")
    assert answer.headers["content-type"] == "application/x-npy"
    ids = np.load(io.BytesIO(answer.content))
    assert ids.dtype == np.int64
    assert ids.tolist() == list(EXPECTED["qwen2_5_vl"][:3])
    accepted = post(http, {"segments": MIXED}, accept="application/x-npy")
    assert accepted.headers["content-type"] == "application/x-npy"
    assert accepted.headers["vary"] == "Accept"


@pytest.mark.parametrize("fmt", ["json", "npy"])
@pytest.mark.parametrize(
    "segments", [[{"text": 0}], [{"text": 0}, {"text": 0}]], ids=["one", "two"]
)
def test_a_layout_of_no_token_is_the_empty_ids_in_every_format(
    http: httpx.Client, fmt: str, segments: list[dict[str, int]]
) -> None:
    """No token is (3, 0) ids, an array like any other (the .npy once failed on its zero)."""
    answer = post(http, {"segments": segments}, f"format={fmt}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-rope-delta"] == "0"
    if fmt == "json":
        document = answer.json()
        assert (document["position_ids"], document["length"]) == ([[], [], []], 0)
    else:
        ids = np.load(io.BytesIO(answer.content), allow_pickle=False)
        assert (ids.shape, ids.dtype) == ((3, 0), np.int64)


def test_the_settings_from_a_config(http: httpx.Client) -> None:
    config = {
        "model_type": "qwen2_5_vl",
        "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 2},
    }
    document = post(http, {"segments": MIXED, "config": config}).json()
    assert document["position_ids"][0] == EXPECTED["qwen2_5_vl"][0]
    assert (document["model"], document["tokens_per_second"]) == ("qwen2_5_vl", 2)
    glm = {"segments": [{"text": 1}], "config": {"model_type": "glm4v"}}
    assert post(http, glm).json()["model"] == "qwen3_vl"  # GLM-4V's arithmetic is Qwen3-VL's
    overridden = post(http, {"segments": MIXED, "config": config, "tokens_per_second": 4})
    assert overridden.json()["tokens_per_second"] == 4


def test_text_only_is_arange(http: httpx.Client) -> None:
    document = post(http, {"segments": [{"text": 4}]}).json()
    assert document["position_ids"] == [[0, 1, 2, 3]] * 3
    assert document["rope_delta"] == 0


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"segments": [{"image": [1, 27, 28]}]}, ["segments[0].image", "multiples", "2"]),
        ({"segments": [{"image": [1, 2, 2]}, {"image": [1, 2, 2]}]}, ["segments[1]", "text"]),
        (
            {"segments": [{"video": [1, 2, 2]}, {"text": 0}, {"video": [1, 2, 2]}]},
            ["segments[2]", "text"],
        ),
        ({"segments": [{"text": 1, "image": [1, 2, 2]}]}, ["one of text, image or video"]),
        ({"segments": [{"text": 1, "seconds_per_grid": 1}]}, ["a video's"]),
        ({"segments": [{"video": [2, 4, 4]}], "model": "qwen3_vl"}, ["frame_text"]),
        ({"segments": [{"video": [2, 4, 4]}], "model": "qwen2_5_vl"}, ["tokens_per_second"]),
        ({"segments": [{"image": [1, 0, 2]}]}, ["segments"]),
        ({"segments": []}, ["segments"]),
        ({"segments": [{"text": 1}], "config": {"model_type": "llama"}}, ["config.model_type"]),
        (
            {"segments": [{"text": 1}], "config": {"model_type": "qwen2_vl", "vision_config": 2}},
            ["config.vision_config"],
        ),
        ({"segments": [{"text": 1}], "sequence": 2}, ["sequence"]),
        ({"segments": [{"video": [1, 2, 2], "seconds_per_grid": 0}]}, ["seconds_per_grid"]),
    ],
)
def test_a_bad_layout_is_a_problem(http: httpx.Client, body: Any, words: list[str]) -> None:
    assert_problem(post(http, body), 422, *words)


def test_a_huge_grid_is_refused_before_anything_is_made(http: httpx.Client) -> None:
    body = {"segments": [{"video": [65536, 65536, 65536]}]}
    assert_problem(post(http, body), 422, "PE_MAX_ELEMENTS", "position ids")
    many = {"segments": [{"text": 1}] * 1025}
    assert_problem(post(http, many), 422, "segments")
    assert_problem(post(http, {"segments": [{"text": 1 << 29}]}, "format=npy"), 422, "PE_MAX")
