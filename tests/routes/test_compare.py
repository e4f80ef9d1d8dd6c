"""``POST /v1/compare``: two tables side by side over positions, each from a family's GET
parameters or a config; the figures checked against the two tables' own GETs."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from service.app import create_app
from service.settings import Settings
from tests.support import assert_problem, in_process

JSON = {"content-type": "application/json"}
HEAD = {"head_dim": 64, "base": 10000}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with in_process(create_app(Settings())) as client:
        yield client


def post(http: httpx.Client, body: Any) -> httpx.Response:
    return http.post("/v1/compare", content=orjson.dumps(body), headers=JSON)


def halves(http: httpx.Client, query: dict[str, Any]) -> Any:
    answer = http.get("/v1/encodings/rotary", params={**query, "format": "npz"})
    with np.load(io.BytesIO(answer.content)) as archive:
        half = archive["cos"].shape[1] // 2
        return np.concatenate([archive["cos"][:, :half], archive["sin"][:, :half]], 1)


def test_library_against_exact(http: httpx.Client) -> None:
    body = {
        "a": {"family": "rotary", "parameters": HEAD},
        "b": {"family": "rotary", "parameters": {**HEAD, "rounding": "exact", "dtype": "float64"}},
        "stop": 4096,
    }
    answer = post(http, body)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    a = halves(http, {**HEAD, "max_len": 4096}).astype(np.float64)
    b = halves(http, {**HEAD, "max_len": 4096, "rounding": "exact", "dtype": "float64"})
    differences = np.abs(a - b).max(axis=1)
    for span in document["bands"]:
        inside = differences[span["start"] : span["stop"]]
        if span["stop"] - span["start"] <= 512:  # small bands: every position
            assert span["samples"] == span["stop"] - span["start"]
            assert span["max_difference"] == pytest.approx(inside.max())
        else:  # sampled: at most the band's largest, and not far below it
            assert span["samples"] < len(inside)
            assert inside.max() / 2 <= span["max_difference"] <= inside.max()
        assert span["max_angle_drift"] < 1e-3
    assert document["first_over"] == {"1e-3": None, "1e-2": None, "1e-1": None}


def test_transformers_against_vllm_for_one_config(http: httpx.Client) -> None:
    config = {
        "head_dim": 64,
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "dynamic", "factor": 4.0},
    }
    body = {
        "a": {"family": "rotary", "config": config, "parameters": {"max_len": 16384}},
        "b": {
            "family": "rotary",
            "config": config,
            "parameters": {"max_len": 16384, "engine": "vllm"},
        },
        "start": 4096,
        "stop": 16384,
    }
    document = post(http, body).json()
    assert document["bands"][0]["start"] == 4096
    assert document["first_over"]["1e-1"] is not None  # the rescaled base against the static one
    assert all(first >= 4096 for first in document["first_over"].values())  # within the range
    assert max(span["max_angle_drift"] for span in document["bands"]) > 1


def test_what_cannot_be_compared_is_refused(http: httpx.Client) -> None:
    rotary = {"family": "rotary", "parameters": HEAD}
    for body, words in [
        (
            {"a": rotary, "b": {"family": "rotary", "parameters": {"head_dim": 32}}, "stop": 8},
            ["b", "not comparable"],
        ),
        ({"a": rotary, "b": {"family": "alibi", "parameters": {}}, "stop": 8}, ["b.family"]),
        (
            {"a": rotary, "b": {"family": "rotary", "parameters": {"head_dim": "x"}}, "stop": 8},
            ["head_dim"],
        ),
        ({"a": rotary, "b": rotary, "start": 8, "stop": 8}, ["stop"]),
        ({"a": rotary, "b": rotary}, ["stop"]),
        (
            {
                "a": rotary,
                "b": {"family": "sinusoidal", "config": {"head_dim": 8}},
                "stop": 8,
            },
            ["b.config"],
        ),
        ({"a": rotary, "b": rotary, "stop": 1 << 40}, ["stop"]),
    ]:
        assert_problem(post(http, body), 422, *words)


def test_the_difference_as_a_picture(http: httpx.Client) -> None:
    body = {
        "a": {"family": "rotary", "parameters": HEAD},
        "b": {"family": "rotary", "parameters": {**HEAD, "base": 20000}},
        "stop": 100000,
    }
    answer = http.post("/v1/compare?format=png", content=orjson.dumps(body), headers=JSON)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png"
    assert answer.content.startswith(b"\x89PNG")
    assert_problem(
        http.post("/v1/compare?format=npy", content=orjson.dumps(body), headers=JSON),
        422,
        "format",
    )
