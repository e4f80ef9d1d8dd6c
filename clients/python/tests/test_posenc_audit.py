"""Audits and comparisons through the client against a real service: how far each
computation path's table is from the exact one (``GET /v1/audit/{family}``, JSON and PNG),
and two tables side by side (``POST /v1/compare``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from posenc_client import AsyncClient, Client, ProblemError
from posenc_client._wire import audit, compare

# Llama 3.1's RoPE, as the GET names its parameters
LLAMA31: dict[str, Any] = {
    "head_dim": 128,
    "base": 500000.0,
    "scaling": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
# a dynamic-NTK model: transformers rescales past 4096 by the sequence length, vLLM keeps one
# static table
DYNAMIC: dict[str, Any] = {
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "rope_scaling": {"rope_type": "dynamic", "factor": 4.0},
}
THRESHOLDS = ["1e-3", "1e-2", "1e-1"]


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {path["name"]: path for path in document["paths"]}


# Llama 3.1's whole context (131072 positions): the full run's; the fast loop audits
# through the client at shorter lengths (test_paths_select_and_order and the rest)
@pytest.mark.slow
def test_llama31s_audit(pe: Client, http: httpx.Client) -> None:
    document = pe.audit("rotary", 131072, **LLAMA31)
    assert document["family"] == "rotary"
    assert document["parameters"]["scaling"] == "llama3"
    assert document["parameters"]["max_len"] == 131072
    assert document["thresholds"] == THRESHOLDS
    paths = by_name(document)
    # positions held in bfloat16 are exact to 256, float16 to 2048: the next one is off
    assert paths["bf16-positions"]["first_over"]["1e-3"] == 257
    assert paths["fp16-positions"]["first_over"]["1e-3"] == 2049
    assert paths["library"]["first_over"]["1e-1"] is None
    assert "first_misdirected" in paths["bf16-positions"]
    for path in document["paths"]:
        assert set(path["first_over"]) == set(THRESHOLDS)
        assert path["bands"][0]["start"] == 0
        assert path["bands"][-1]["stop"] == 131072
    # the GET's own answer
    query = {name: str(value) for name, value in LLAMA31.items()}
    assert document == http.get("/v1/audit/rotary", params={"max_len": 131072, **query}).json()


@pytest.mark.parametrize(
    "paths", [["fp16-positions", "library"], "fp16-positions,library"], ids=["list", "text"]
)
def test_paths_select_and_order(pe: Client, paths: list[str] | str) -> None:
    document = pe.audit("rotary", 4096, paths=paths, head_dim=64)
    assert [path["name"] for path in document["paths"]] == ["fp16-positions", "library"]
    single = pe.audit("rotary", 4096, paths=["device"], head_dim=64)
    assert [path["name"] for path in single["paths"]] == ["device"]


def test_bands_are_the_edges_given(pe: Client) -> None:
    document = pe.audit("rotary", 8192, paths="bf16-positions", bands=[100, 3000], head_dim=64)
    (path,) = document["paths"]
    edges = [(band["start"], band["stop"]) for band in path["bands"]]
    assert edges == [(0, 100), (100, 3000), (3000, 8192)]
    assert all(band["samples"] > 0 for band in path["bands"])
    assert path["bands"][0]["max_error"] < 1e-3 < path["bands"][1]["max_error"]


def test_other_families(pe: Client) -> None:
    sinusoidal = pe.audit("sinusoidal", 4096, d_model=64, paths=["library", "bf16-table"])
    assert sinusoidal["family"] == "sinusoidal"
    assert sinusoidal["parameters"]["d_model"] == 64
    assert [path["name"] for path in sinusoidal["paths"]] == ["library", "bf16-table"]
    assert "first_misdirected" not in sinusoidal["paths"][0]  # rotary's only
    temperature = pe.audit("temperature", 65536, floor_scale=8192.0, attn_scale=0.1)
    assert temperature["family"] == "temperature"
    assert temperature["parameters"]["floor_scale"] == 8192.0
    assert "library" in by_name(temperature)


@pytest.mark.parametrize(
    ("family", "asked", "name"),
    [
        pytest.param("rotary", {"paths": ["library", "no-such-path"]}, "paths", id="path"),
        pytest.param("rotary", {"bands": "x"}, "bands", id="bands"),
        pytest.param("rotary", {"dtype": "float64"}, "dtype", id="not-an-audit-parameter"),
        pytest.param("sinusoidal", {"paths": "device"}, "paths", id="rotarys-path"),
    ],
)
def test_a_refused_audit_raises_the_problem(
    pe: Client, family: Any, asked: dict[str, Any], name: str
) -> None:
    given: dict[str, Any] = {"head_dim": 64} if family == "rotary" else {"d_model": 64}
    with pytest.raises(ProblemError) as caught:
        pe.audit(family, 1024, **given, **asked)
    assert caught.value.status == 422
    assert name in caught.value.detail
    assert name in [error["name"] for error in caught.value.problem["errors"]]


def test_an_unknown_family_is_not_found(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.audit("rope", 1024)
    assert caught.value.status == 404


def test_any_family_the_service_lists_is_asked_for() -> None:
    """The client keeps no list of families: one the service serves beside its own (as
    tests/seam's) is asked for by its name."""
    asked: list[str] = []

    def service(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(200, json={"family": "ramp", "paths": []})

    with httpx.Client(transport=httpx.MockTransport(service), base_url="http://pe") as http:
        assert Client(http=http).audit("ramp", 8, width=3)["family"] == "ramp"
    assert asked == ["/v1/audit/ramp"]


# drawn over Llama 3.1's whole context: the full run's; test_async_client draws one in
# the fast loop
@pytest.mark.slow
def test_the_audit_drawn(pe: Client, http: httpx.Client) -> None:
    picture = pe.audit_png("rotary", 131072, paths=["bf16-positions", "library"], **LLAMA31)
    assert picture.startswith(b"\x89PNG\r\n\x1a\n")
    query = {name: str(value) for name, value in LLAMA31.items()}
    params: dict[str, Any] = {
        "max_len": 131072,
        "paths": "bf16-positions,library",
        "format": "png",
        **query,
    }
    assert picture == http.get("/v1/audit/rotary", params=params).content
    with pytest.raises(ProblemError) as caught:
        pe.audit_png("rotary", 1024, paths="nope", head_dim=64)
    assert "paths" in caught.value.detail


@pytest.mark.parametrize("head_dim", [64, 128])
def test_library_against_exact(pe: Client, head_dim: int) -> None:
    library = {"family": "rotary", "parameters": {"head_dim": head_dim}}
    exact_parameters = {"head_dim": head_dim, "rounding": "exact", "dtype": "float64"}
    exact = {"family": "rotary", "parameters": exact_parameters}
    found = pe.compare(library, exact, stop=4096)
    assert (found["start"], found["stop"]) == (0, 4096)
    assert found["first_over"] == dict.fromkeys(THRESHOLDS)
    assert found["bands"][0]["start"] == 0
    assert found["bands"][-1]["stop"] == 4096
    for band in found["bands"]:
        assert 0 <= band["mean_difference"] <= band["max_difference"] < 1e-3
        assert band["max_angle_drift"] < 1e-3
    assert found["bands"][-1]["max_difference"] > 0  # float32 is not float64
    same = pe.compare(library, library, stop=4096, start=100)
    assert same["start"] == 100
    assert same["bands"][0]["start"] == 100
    assert all(band["max_difference"] == 0 for band in same["bands"])


def test_transformers_against_vllm_from_one_config(pe: Client, tmp_path: Path) -> None:
    ours = {"family": "rotary", "config": DYNAMIC, "parameters": {"max_len": 16384}}
    theirs = {
        "family": "rotary",
        "config": DYNAMIC,
        "parameters": {"max_len": 16384, "engine": "vllm"},
    }
    found = pe.compare(ours, theirs, start=4096, stop=16384)
    assert (found["start"], found["stop"]) == (4096, 16384)
    assert found["first_over"]["1e-1"] is not None
    assert found["bands"][0]["start"] == 4096
    assert max(band["max_angle_drift"] for band in found["bands"]) > 1
    # the config as a path, or as its bytes: the same comparison
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DYNAMIC))
    for config in (path, str(path), path.read_bytes()):
        again = pe.compare({**ours, "config": config}, {**theirs, "config": config}, stop=16384)
        assert again["bands"][-1] == found["bands"][-1], type(config)
    # one engine against itself: nothing apart
    same = pe.compare(ours, ours, start=4096, stop=16384)
    assert same["first_over"] == dict.fromkeys(THRESHOLDS)


def test_parameters_left_none_and_lists(pe: Client) -> None:
    # None is not sent (the service's default); a list goes as the query string says it
    plain = {"family": "rotary", "parameters": {"head_dim": 8, "base": None}}
    longrope = {
        "family": "rotary",
        "parameters": {
            "head_dim": 8,
            "scaling": "longrope",
            "original_max_position_embeddings": 32,
            "factor": 2.0,
            "short_factor": [1.0, 1.0, 1.0, 1.0],
            "long_factor": (1.0, 1.0, 1.0, 1.0),
        },
    }
    found = pe.compare(plain, longrope, stop=16)
    assert found["bands"][-1]["stop"] == 16
    # longrope's attention factor, sqrt(1 + ln(factor) / ln(original)), on cos at position 0
    scale = math.sqrt(1 + math.log(2.0) / math.log(32))
    assert found["bands"][0]["max_difference"] == pytest.approx(scale - 1, rel=1e-5)
    assert found["first_over"]["1e-2"] == 0


def test_a_refused_comparison_raises_the_problem(pe: Client) -> None:
    rotary = {"family": "rotary", "parameters": {"head_dim": 64}}
    with pytest.raises(ProblemError) as caught:
        pe.compare(rotary, {"family": "rotary", "parameters": {}}, stop=64)
    assert caught.value.status == 422
    assert "b.parameters.head_dim" in caught.value.detail
    with pytest.raises(ProblemError) as caught:
        pe.compare(rotary, {"family": "alibi"}, stop=64)
    assert "b.family" in caught.value.detail
    with pytest.raises(ProblemError) as caught:
        pe.compare(rotary, rotary, start=64, stop=64)
    assert "stop" in caught.value.detail
    with pytest.raises(ProblemError) as caught:
        pe.compare(rotary, {"family": "rotary", "parameters": {"head_dim": 32}}, stop=64)
    assert "not comparable" in caught.value.detail
    with pytest.raises(ValueError, match="JSON compliant"):
        pe.compare({**rotary, "config": {**DYNAMIC, "rope_theta": float("nan")}}, rotary, stop=8)


def test_the_calls_on_the_wire() -> None:
    call = audit("rotary", {"max_len": 10, "bands": [4, 8.0], "head_dim": 8}, ["a", "b"])
    assert (call.method, call.path) == ("GET", "/v1/audit/rotary")
    want = {"max_len": "10", "bands": "4,8", "head_dim": "8", "paths": "a,b", "format": "json"}
    assert call.params == want
    config = b'{"head_dim": 8}'
    side = {"family": "rotary", "config": config, "parameters": {"engine": "vllm", "base": None}}
    call = compare(side, {"family": "rotary", "parameters": {"short_factor": [1, 2]}}, 0, 8)
    assert (call.method, call.path, call.headers) == (
        "POST",
        "/v1/compare",
        {"content-type": "application/json"},
    )
    assert call.content is not None
    assert json.loads(call.content) == {
        "a": {"family": "rotary", "config": {"head_dim": 8}, "parameters": {"engine": "vllm"}},
        "b": {"family": "rotary", "parameters": {"short_factor": "1.0,2.0"}},
        "start": 0,
        "stop": 8,
    }


def test_async_client(service_url: str, pe: Client) -> None:
    want = pe.audit("rotary", 131072, paths=["bf16-positions"], **LLAMA31)
    library = {"family": "rotary", "parameters": {"head_dim": 64}}
    exact = {"family": "rotary", "parameters": {"head_dim": 64, "rounding": "exact"}}
    want_compared = pe.compare(library, exact, stop=4096)

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            got = await client.audit("rotary", 131072, paths=["bf16-positions"], **LLAMA31)
            assert got == want
            assert got["paths"][0]["first_over"]["1e-3"] == 257
            picture = await client.audit_png("rotary", 4096, paths="library", head_dim=64)
            assert picture.startswith(b"\x89PNG")
            assert await client.compare(library, exact, stop=4096) == want_compared
            with pytest.raises(ProblemError) as caught:
                await client.audit("rotary", 1024, paths="nope", head_dim=64)
            assert "paths" in caught.value.detail

    anyio.run(main)
