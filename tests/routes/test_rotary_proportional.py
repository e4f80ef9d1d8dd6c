"""``scaling=proportional`` (transformers 5's ``_compute_proportional_rope_parameters``, Gemma
4's full-attention layers): the table keeps the whole head; its first
``int(partial_rotary_factor * head_dim // 2)`` pairs turn at ``base^(-2k/head_dim) / factor``
and the others have frequency 0 (cos 1, sin 0); from a config, with ``head_dim_key``."""

from __future__ import annotations

import io
from collections.abc import Iterator

import httpx
import numpy as np
import orjson
import pytest
from numpy.typing import NDArray

from tests.support import assert_problem, client_of, load

ROTARY = "/v1/encodings/rotary"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def formula(
    head_dim: int, base: float, partial: float, factor: float, rows: int
) -> NDArray[np.float64]:
    """cos and sin side by side, ``(rows, 2 * head_dim)``, in float64 (half convention)."""
    pairs, turning = head_dim // 2, int(partial * head_dim // 2)
    k = np.arange(pairs)
    inverse = np.where(k < turning, base ** (-2.0 * k / head_dim), 0.0) / factor
    angles = np.arange(rows)[:, None] * np.tile(inverse, 2)[None, :]
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1)


@pytest.mark.parametrize(("partial", "factor"), [(0.25, 1.0), (0.5, 8.0), (1.0, 1.0), (0.1, 2.0)])
def test_the_table_keeps_the_whole_head(http: httpx.Client, partial: float, factor: float) -> None:
    query = (
        "max_len=64&head_dim=16&base=1000000&scaling=proportional"
        f"&partial_rotary_factor={partial}&factor={factor}"
    )
    expected = formula(16, 1e6, partial, factor, 64)
    for rounding, tolerance in (("exact", 1e-15), ("library", 2.0**-22 * 64)):
        stacked = load(http.get(f"{ROTARY}?{query}&rounding={rounding}&dtype=float64&format=npy"))
        assert stacked.shape == (2, 64, 16)
        table = np.concatenate([stacked[0], stacked[1]], axis=1)
        assert np.abs(table - expected).max() <= tolerance
        turning = int(partial * 16 // 2)
        for half in (slice(turning, 8), slice(8 + turning, 16)):  # the pairs that do not turn
            assert np.array_equal(stacked[0][:, half], np.ones((64, 8 - turning)))
            assert np.array_equal(stacked[1][:, half], np.zeros((64, 8 - turning)))
    document = http.get(f"{ROTARY}?{query}&format=json").json()
    assert (document["rotary_dim"], document["scaling"]) == (16, "proportional")


def test_a_gemma4_config_with_its_head_dim_key(http: httpx.Client) -> None:
    """Gemma 4's full-attention rope parameters, its global heads wider than its others."""
    config = {
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "head_dim": 64,
        "global_head_dim": 256,
        "max_position_embeddings": 32,
        "rope_parameters": {
            "rope_type": "proportional",
            "rope_theta": 1000000.0,
            "partial_rotary_factor": 0.25,
        },
    }
    json = {"content-type": "application/json"}
    url = f"{ROTARY}/from-config?format=npz&head_dim_key=global_head_dim"
    answer = http.post(url, content=orjson.dumps(config), headers=json)
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content)) as archive:
        assert archive["cos"].shape == (32, 256)
    get = http.get(answer.headers["content-location"])
    assert get.content == answer.content
    assert "head_dim=256" in answer.headers["content-location"]
    assert "head_dim_key" not in answer.headers["content-location"]
    local = http.post(
        f"{ROTARY}/from-config?format=npz", content=orjson.dumps(config), headers=json
    )
    with np.load(io.BytesIO(local.content)) as archive:
        assert archive["cos"].shape == (32, 64)  # head_dim, without the key
    wrong = http.post(
        f"{ROTARY}/from-config?head_dim_key=rope_parameters",
        content=orjson.dumps(config),
        headers=json,
    )
    assert_problem(wrong, 422, "rope_parameters", "integer")


def test_proportional_takes_factor_alone(http: httpx.Client) -> None:
    refused = http.get(f"{ROTARY}?max_len=4&head_dim=8&scaling=proportional&low_freq_factor=1")
    assert_problem(refused, 422, "low_freq_factor", "not a parameter of scaling=proportional")
