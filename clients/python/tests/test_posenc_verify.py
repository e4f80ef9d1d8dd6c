"""Checking a table through the client against a real service: a table against the ``GET``
or the config that should make it (``POST /v1/verify``), with the mistake that made it
otherwise, and a table with no claim (``POST /v1/identify``)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import numpy as np
import pytest
from posenc_client import AsyncClient, Client, ProblemError
from posenc_client._encoding import read_npz
from posenc_client._wire import identify, verify

# a small model's config.json: rotary tables of head_dim 8, base 10000
CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "num_attention_heads": 8,
    "max_position_embeddings": 64,
    "rope_theta": 10000.0,
}


def mistakes(answer: dict[str, Any]) -> list[str]:
    return [diagnosis["mistake"] for diagnosis in answer["diagnoses"]]


def test_a_table_as_its_get_gives_it_matches(pe: Client) -> None:
    cos, sin = pe.rotary(64, 8, base=500000.0)
    answer = pe.verify({"cos": cos, "sin": sin}, "rotary", head_dim=8, base=500000.0)
    assert answer["match"] == "bitwise"
    assert answer["rows"] == 64
    assert answer["diagnoses"] == []
    assert answer["claim"]["family"] == "rotary"
    assert answer["claim"]["parameters"]["base"] == 500000
    # the (2, L, d) array the rotary GET's .npy holds is read as cos and sin
    stacked = pe.verify(np.stack([cos, sin]), "rotary", head_dim=8, base=500000.0)
    assert stacked["match"] == "bitwise"
    table = pe.table(32, 16)
    assert pe.verify(table, "sinusoidal", d_model=16)["match"] == "bitwise"


def test_rows_past_the_first_position(pe: Client) -> None:
    cos, sin = pe.rotary(256, 8, start=100, stop=132)
    assert pe.verify({"cos": cos, "sin": sin}, "rotary", head_dim=8, start=100)["match"] == (
        "bitwise"
    )
    ids = np.arange(100, 132)
    at_ids = pe.verify({"cos": cos, "sin": sin}, "rotary", head_dim=8, position_ids=ids)
    assert at_ids["match"] == "bitwise"
    # the same rows taken for positions 0 .. 31 are not the claim's
    assert pe.verify({"cos": cos, "sin": sin}, "rotary", head_dim=8)["match"] == "different"


def test_the_mistake_is_named(pe: Client) -> None:
    cos, sin = pe.rotary(64, 8, base=10000.0)
    answer = pe.verify({"cos": cos, "sin": sin}, "rotary", head_dim=8, base=500000.0)
    assert answer["match"] == "different"
    assert mistakes(answer)[0] == "base"
    assert answer["diagnoses"][0]["parameters"]["base"] == 10000
    assert answer["first_over"]["1e-3"] is not None
    interleaved = pe.rotary(64, 8, convention="interleaved")
    paired = pe.verify(dict(zip(("cos", "sin"), interleaved, strict=True)), "rotary", head_dim=8)
    assert paired["match"] == "different"
    assert "pairing" in mistakes(paired)
    swapped = pe.verify({"cos": sin, "sin": cos}, "rotary", head_dim=8)
    assert "swapped-cos-sin" in mistakes(swapped)


def test_against_a_models_config(pe: Client) -> None:
    cos, sin = pe.from_config(CONFIG)
    answer = pe.verify({"cos": cos, "sin": sin}, config=CONFIG)
    assert answer["match"] == "bitwise"
    assert answer["claim"]["parameters"]["head_dim"] == 8
    # the config's bytes, and from-config's parameters beside it; rows from position 8
    later = pe.verify({"cos": cos[8:], "sin": sin[8:]}, config=json.dumps(CONFIG).encode(), start=8)
    assert later["match"] == "bitwise"
    other = {**CONFIG, "rope_theta": 500000.0}
    assert mistakes(pe.verify({"cos": cos, "sin": sin}, config=other))[0] == "base"


def test_float16_and_non_finite_entries(pe: Client) -> None:
    cos, sin = pe.rotary(64, 8)
    halved = {"cos": cos.astype(np.float16), "sin": sin.astype(np.float16)}
    assert pe.verify(halved, "rotary", head_dim=8)["match"] == "float16"
    # entries JSON cannot hold are data in an .npz: the answer says where they are
    broken = cos.copy()
    broken[5, 0] = np.nan
    answer = pe.verify({"cos": broken, "sin": sin}, "rotary", head_dim=8)
    assert answer["non_finite"]["entries"] == 1
    assert answer["non_finite"]["first_positions"] == [5]
    with pytest.raises(ValueError, match="non-finite"):
        pe.verify({"cos": broken, "sin": sin}, config=CONFIG)


def test_identify_reads_the_table(pe: Client) -> None:
    cos, sin = pe.rotary(64, 8, base=500000.0)
    answer = pe.identify({"cos": cos, "sin": sin})
    assert answer["matched"] is True
    best = answer["candidates"][0]
    assert (best["family"], best["match"]) == ("rotary", "bitwise")
    assert best["parameters"]["base"] == 500000
    assert (answer["read"]["rows"], answer["read"]["width"]) == (64, 16)  # cos and sin
    assert answer["read"]["pairing"] == "half"
    # the candidate is a GET that gives the table back
    again = pe.encoding(best["family"], **best["parameters"])
    assert np.array_equal(again, np.stack([cos, sin]))
    later = pe.identify({"cos": cos[10:], "sin": sin[10:]}, start=10)
    assert later["candidates"][0]["match"] == "bitwise"
    assert pe.identify(pe.table(32, 16))["candidates"][0]["family"] == "sinusoidal"


def test_a_refused_table_raises_the_problem(pe: Client) -> None:
    cos, sin = pe.rotary(16, 8)
    with pytest.raises(ProblemError) as caught:
        pe.verify(np.zeros((4, 8), np.int32), "rotary", head_dim=8)
    assert caught.value.status == 422
    assert caught.value.detail.startswith("data: must hold floats")
    with pytest.raises(ProblemError) as caught:
        pe.verify({"cos": cos}, "rotary", head_dim=8)
    assert caught.value.detail.startswith("sin:")
    with pytest.raises(ProblemError) as caught:
        pe.verify(cos)
    assert caught.value.detail.startswith("family:")
    with pytest.raises(ProblemError) as caught:
        pe.identify({"cos": cos, "sin": sin}, position_ids=np.arange(3))
    assert caught.value.detail.startswith("position_ids:")
    with pytest.raises(TypeError, match="'tan'"):
        pe.identify({"cos": cos, "tan": sin})


def test_the_calls_on_the_wire() -> None:
    cos = np.ones((2, 4), np.float32)
    call = verify(
        {"cos": cos, "sin": cos}, {"family": "rotary", "parameters": {"head_dim": 4}}, 3, [3, 4]
    )
    assert (call.method, call.path, call.headers) == (
        "POST",
        "/v1/verify",
        {"content-type": "application/x-npz"},
    )
    assert call.params == {"family": "rotary", "head_dim": "4", "start": "3"}
    assert call.content is not None
    members = read_npz(call.content)
    assert sorted(members) == ["cos", "position_ids", "sin"]
    assert members["position_ids"].dtype == np.int64
    claim = {"family": "rotary", "config": b'{"head_dim": 4}', "parameters": {"base": None}}
    call = verify(cos.astype(np.float16), claim, 0, None)
    assert (call.params, call.headers) == ({}, {"content-type": "application/json"})
    assert call.content is not None
    assert json.loads(call.content) == {
        "family": "rotary",
        "config": {"head_dim": 4},
        "parameters": {},
        "start": 0,
        "dtype": "float16",
        "data": [[1.0] * 4] * 2,
    }
    call = identify(cos, 0, None)
    assert (call.path, call.params) == ("/v1/identify", {"start": "0"})


def test_async_client(service_url: str, pe: Client) -> None:
    cos, sin = pe.rotary(64, 8, base=10000.0)
    want = pe.verify({"cos": cos, "sin": sin}, "rotary", head_dim=8, base=500000.0)
    want_identified = pe.identify({"cos": cos, "sin": sin})

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            got = await client.verify({"cos": cos, "sin": sin}, "rotary", head_dim=8, base=5e5)
            assert got == want
            assert mistakes(got)[0] == "base"
            from_config = await client.verify({"cos": cos, "sin": sin}, config=CONFIG)
            assert from_config["match"] == "bitwise"
            assert await client.identify({"cos": cos, "sin": sin}) == want_identified

    anyio.run(main)
