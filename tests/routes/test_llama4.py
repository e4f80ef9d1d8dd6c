"""Llama 4: its attention temperature by position (``GET /v1/encodings/temperature`` and
from a config, with which layers use no RoPE), and its rotary tables from a config (Scout's
llama3 scaling with equal low and high frequency factors; the interleaved convention)."""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from tests.support import assert_problem, client_of

TEMPERATURE = "/v1/encodings/temperature"
ROTARY = "/v1/encodings/rotary"
JSON = {"content-type": "application/json"}
# Llama 4 Scout's text model, as its config.json nests it
SCOUT = {
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "head_dim": 128,
        "num_hidden_layers": 8,
        "max_position_embeddings": 16384,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 16.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
        },
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
    },
}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def npy(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return np.load(io.BytesIO(answer.content))


def test_the_scale_steps_up_every_floor_scale_positions(http: httpx.Client) -> None:
    got = npy(http.get(f"{TEMPERATURE}?max_len=100001&format=npy"))[:, 0]
    assert got.shape == (100001,)
    assert got.dtype == np.float32
    assert (got[:8191] == 1).all()  # (p + 1) / 8192 < 1
    f32 = np.float32  # transformers' arithmetic: each step rounded to float32
    assert got[8191] == f32(math.log1p(1)) * f32(0.1) + f32(1)
    assert got[100000] == f32(math.log1p(12)) * f32(0.1) + f32(1) == f32(1.256495)
    assert (np.diff(got) >= 0).all()


def test_its_parameters_and_exact_rounding(http: httpx.Client) -> None:
    query = "max_len=10000&floor_scale=1000&attn_scale=0.3"
    library = npy(http.get(f"{TEMPERATURE}?{query}&format=npy"))[:, 0]
    exact = npy(http.get(f"{TEMPERATURE}?{query}&rounding=exact&dtype=float64&format=npy"))
    positions = np.arange(10000)
    expected = np.log1p(np.floor((positions + 1) / 1000)) * 0.3 + 1
    assert np.array_equal(exact[:, 0], expected)
    assert np.abs(library - expected).max() <= 2 * np.spacing(np.float32(2))
    for bad, name in [
        ("floor_scale=0", "floor_scale"),
        ("floor_scale=5e-324", "floor_scale"),  # 0 in float32: the scale overflowed (a 500)
        ("attn_scale=-1", "attn_scale"),
    ]:
        assert_problem(http.get(f"{TEMPERATURE}?max_len=4&{bad}"), 422, name)


def test_from_a_llama4_config_with_its_no_rope_layers(http: httpx.Client) -> None:
    answer = http.post(
        f"{TEMPERATURE}/from-config?start=8190&stop=8193&format=json",
        content=orjson.dumps(SCOUT),
        headers=JSON,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["max_len"] == 16384
    assert answer.json()["data"] == [[1.0], [1.0693147], [1.0693147]]
    assert answer.headers["x-layer-types"] == ", ".join((["rope"] * 3 + ["nope"]) * 2)
    assert "text_config.floor_scale" in answer.headers["x-config-fields"]
    explicit = {**SCOUT["text_config"], "no_rope_layers": [1, 0, 1]}  # type: ignore[dict-item]
    listed = http.post(f"{TEMPERATURE}/from-config", content=orjson.dumps(explicit), headers=JSON)
    assert listed.headers["x-layer-types"] == "rope, nope, rope"
    off = {**SCOUT["text_config"], "attn_temperature_tuning": False}  # type: ignore[dict-item]
    refused = http.post(f"{TEMPERATURE}/from-config", content=orjson.dumps(off), headers=JSON)
    assert_problem(refused, 422, "attn_temperature_tuning")
    wrong = {**SCOUT["text_config"], "no_rope_layers": [1, 2]}  # type: ignore[dict-item]
    refused = http.post(f"{TEMPERATURE}/from-config", content=orjson.dumps(wrong), headers=JSON)
    assert_problem(refused, 422, "no_rope_layers")


def test_scouts_rope_from_its_config(http: httpx.Client) -> None:
    """factor 16 with equal low and high frequency factors: each pair is scaled or not."""
    answer = http.post(
        f"{ROTARY}/from-config?max_len=4096&format=json&stop=2",
        content=orjson.dumps(SCOUT),
        headers=JSON,
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["convention"] == "interleaved"
    assert answer.headers["x-layer-types"] == ", ".join((["rope"] * 3 + ["nope"]) * 2)
    angles = np.arctan2(document["sin"][1][0::2], document["cos"][1][0::2])
    inverse = 500000.0 ** -(np.arange(0, 128, 2) / 128)
    scaled = np.where(2 * np.pi / inverse > 8192, inverse / 16, inverse)
    assert np.allclose(angles, scaled, rtol=1e-6, atol=0)
