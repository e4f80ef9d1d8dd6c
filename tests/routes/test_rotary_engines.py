"""``engine=vllm``: the rotary tables vLLM 0.33.0 computes where they differ from
transformers' (dynamic's one static table, longrope's factors picked by max_model_len,
DeepSeek's yarn), and ``cache_dtype``, the dtype an engine keeps the table in. Each vLLM
table is a transformers table under other parameters, which these tests name."""

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

ROTARY = "/v1/encodings/rotary"
HEAD = "head_dim=16&base=10000"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def table(http: httpx.Client, query: str) -> dict[str, Any]:
    answer = http.get(f"{ROTARY}?{query}&format=npz")
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content)) as archive:
        return {name: archive[name] for name in archive.files}


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(np.array_equal(a[name], b[name]) for name in ("cos", "sin"))


def test_vllms_dynamic_is_one_static_table(http: httpx.Client) -> None:
    dynamic = f"{HEAD}&scaling=dynamic&factor=2&max_position_embeddings=64&max_len=256"
    vllm = table(http, f"{dynamic}&engine=vllm")
    assert same(vllm, table(http, f"{HEAD}&max_len=256"))  # the base is unchanged
    assert not same(vllm, table(http, dynamic))  # transformers rescales past 64
    refused = http.get(f"{ROTARY}?{dynamic}&engine=vllm&seq_len=128")
    assert_problem(refused, 422, "seq_len", "static")


def test_vllms_longrope_picks_its_factors_by_max_model_len(http: httpx.Client) -> None:
    short, long = ",".join(["1"] * 4), ",".join(["2", "3", "4", "5"])
    rope = (
        f"head_dim=8&scaling=longrope&short_factor={short}&long_factor={long}"
        "&original_max_position_embeddings=64&max_position_embeddings=256"
    )
    # transformers: the long factors once the sequence passes 64
    short_table, long_table = table(http, f"{rope}&max_len=64"), table(http, f"{rope}&max_len=65")
    assert not same(short_table, {k: v[:64] for k, v in long_table.items()})
    deployed = table(http, f"{rope}&max_len=65&engine=vllm")  # max_model_len default: 64
    assert same({k: v[:64] for k, v in deployed.items()}, short_table)
    longer = table(http, f"{rope}&max_len=64&engine=vllm&max_model_len=256")
    assert same(longer, {k: v[:64] for k, v in long_table.items()})
    refused = http.get(f"{ROTARY}?{rope}&max_len=64&max_model_len=256")
    assert_problem(refused, 422, "max_model_len", "engine=vllm")


def test_deepseek_yarn(http: httpx.Client) -> None:
    yarn = f"{HEAD}&max_len=64&factor=40&original_max_position_embeddings=16"
    ratio = f"{yarn}&mscale=0.707&mscale_all_dim=0.707"
    # transformers: DeepSeek-V3's rope is plain yarn
    assert same(table(http, f"{ratio}&scaling=deepseek_yarn"), table(http, f"{ratio}&scaling=yarn"))
    # vLLM: mscale alone still counts (mscale_all_dim 0), attention_factor is not read
    got = http.get(
        f"{ROTARY}?{yarn}&mscale=0.707&attention_factor=3&scaling=deepseek_yarn&engine=vllm&format=json"
    )
    expected = 0.1 * 0.707 * math.log(40) + 1
    assert got.json()["attention_factor"] == pytest.approx(expected, rel=1e-12)
    assert got.json()["engine"] == "vllm"
    plain = http.get(f"{ROTARY}?{yarn}&mscale=0.707&scaling=yarn&format=json").json()
    assert plain["attention_factor"] == pytest.approx(0.1 * math.log(40) + 1, rel=1e-12)


@pytest.mark.parametrize(("cache", "bits"), [("bfloat16", 16), ("float16", 13)])
def test_cache_dtype_rounds_each_entry(http: httpx.Client, cache: str, bits: int) -> None:
    full = table(http, f"{HEAD}&max_len=512")
    kept = table(http, f"{HEAD}&max_len=512&cache_dtype={cache}")
    for name in ("cos", "sin"):
        if cache == "bfloat16":
            assert not (kept[name].view(np.uint32) & 0xFFFF).any()  # a bfloat16's bits
        else:
            assert np.array_equal(kept[name], full[name].astype(np.float16).astype(np.float32))
        assert np.abs(kept[name] - full[name]).max() <= 2.0**-8
        assert not np.array_equal(kept[name], full[name])
    json = http.get(f"{ROTARY}?{HEAD}&max_len=4&cache_dtype={cache}&format=json").json()
    assert json["cache_dtype"] == cache


def test_bfloat16_rounds_to_nearest_even() -> None:
    from service.encodings.engines import stored

    values = np.array(
        [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -(1 + 2**-8)], dtype=np.float32
    )
    stored(values, "bfloat16")
    assert values.tolist() == [1.0, 1 + 4 * 2**-8, 1 + 2**-7, -1.0]


def test_from_config_as_vllm_reads_deepseek_and_its_dtype(http: httpx.Client) -> None:
    config = {
        "model_type": "deepseek_v3",
        "qk_rope_head_dim": 16,
        "max_position_embeddings": 64,
        "rope_theta": 10000,
        "torch_dtype": "bfloat16",
        "rope_scaling": {
            "type": "yarn",
            "factor": 40,
            "original_max_position_embeddings": 16,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
    }
    answer = http.post(
        f"{ROTARY}/from-config?engine=vllm&format=json",
        content=orjson.dumps(config),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert (document["scaling"], document["cache_dtype"]) == ("deepseek_yarn", "bfloat16")
    assert "torch_dtype" in answer.headers["x-config-fields"]
    plain = http.post(
        f"{ROTARY}/from-config?format=json",
        content=orjson.dumps(config),
        headers={"content-type": "application/json"},
    ).json()
    assert (plain["scaling"], "cache_dtype" in plain) == ("yarn", False)


@pytest.mark.parametrize(
    ("sent", "blamed"),
    [
        pytest.param("mscale=-100", "mscale", id="mscale: a negative factor"),
        pytest.param("mscale=1e6", "mscale", id="mscale: a factor too large"),
        pytest.param("mscale_all_dim=-2.71", "mscale_all_dim", id="mscale_all_dim"),
        pytest.param("mscale=1&mscale_all_dim=-2.71", "mscale_all_dim", id="both sent"),
    ],
)
def test_deepseek_yarns_attention_factor_is_blamed_on_what_was_sent(
    http: httpx.Client, sent: str, blamed: str
) -> None:
    """vLLM's DeepSeek yarn derives its attention factor from mscale and mscale_all_dim
    (attention_factor is not read): a factor out of range names what derived it."""
    yarn = f"{HEAD}&max_len=4&factor=40&original_max_position_embeddings=4"
    answer = http.get(f"{ROTARY}?{yarn}&{sent}&scaling=deepseek_yarn&engine=vllm")
    problem = assert_problem(answer, 422, blamed, "mscale(factor, mscale)", "derives")
    assert [(e["name"], e["in"]) for e in problem["errors"]] == [(blamed, "query")]
    assert "attention_factor:" not in problem["detail"]
