"""``POST /v1/verify`` and ``POST /v1/identify`` over HTTP: every body format, the claim in
the query or in a JSON body (a family's parameters, or a model's config), and every bad input
answered with a problem that names it."""

from __future__ import annotations

import io
import json
import struct
from typing import Any, Final

import httpx
import numpy as np
import pytest

from service.app import create_app
from service.settings import Settings
from service.web.examples import _LLAMA_31
from tests.support import assert_problem, in_process, npy_bytes, npz_bytes

VERIFY: Final = "/v1/verify"
IDENTIFY: Final = "/v1/identify"
ROTARY: Final = "/v1/encodings/rotary"
QUERY: Final[dict[str, Any]] = {"family": "rotary", "head_dim": 16, "base": 10000}


def table(api: httpx.Client, fmt: str = "npz", **params: Any) -> Any:
    """A rotary table as the service serves it: its cos and sin."""
    answer = api.get(ROTARY, params={"max_len": 64, "head_dim": 16, **params, "format": fmt})
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
        return archive["cos"], archive["sin"]


def safetensors_bytes(**arrays: Any) -> bytes:
    header: dict[str, Any] = {}
    offset, data = 0, b""
    for name, array in arrays.items():
        raw = np.ascontiguousarray(array, "<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
        data += raw
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def post(api: httpx.Client, path: str, body: bytes, media: str, **params: Any) -> httpx.Response:
    return api.post(path, params=params, content=body, headers={"content-type": media})


def test_a_table_posted_as_npz_with_the_claim_in_the_query_matches(api: httpx.Client) -> None:
    cos, sin = table(api)
    answer = post(api, VERIFY, npz_bytes(cos=cos, sin=sin), "application/x-npz", **QUERY)
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    found = answer.json()
    assert found["match"] == "bitwise"
    assert found["claim"] == {
        "family": "rotary",
        "parameters": {"head_dim": 16, "base": 10000, "max_len": 64},
    }
    assert found["rows"] == 64


@pytest.mark.parametrize("fmt", ["npy", "safetensors", "raw", "json"])
def test_every_body_format_is_read(api: httpx.Client, fmt: str) -> None:
    cos, sin = table(api)
    headers: dict[str, str] = {}
    if fmt == "npy":
        body, media = npy_bytes(np.stack([cos, sin])), "application/x-npy"
    elif fmt == "safetensors":
        body, media = safetensors_bytes(cos=cos, sin=sin), "application/x-safetensors"
    elif fmt == "raw":
        body, media = np.stack([cos, sin]).astype("<f4").tobytes(), "application/octet-stream"
        headers["x-shape"] = "2,64,16"
    else:
        body = json.dumps({"cos": cos.tolist(), "sin": sin.tolist()}).encode()
        media = "application/json"
    answer = api.post(
        VERIFY, params=QUERY, content=body, headers={"content-type": media, **headers}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["match"] == "bitwise"


def test_the_claim_may_be_a_models_config(api: httpx.Client) -> None:
    """Llama 3.1's config.json: a table made without its llama3 scaling is diagnosed."""
    params: dict[str, Any] = {"max_len": 64, "head_dim": 128, "base": 500000, "format": "npz"}
    got = api.get(ROTARY, params=params)
    with np.load(io.BytesIO(got.content), allow_pickle=False) as archive:
        cos, sin = archive["cos"], archive["sin"]
    body = {"config": _LLAMA_31, "family": "rotary", "cos": cos.tolist(), "sin": sin.tolist()}
    answer = api.post(VERIFY, json=body)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["match"] == "different"
    assert found["claim"]["parameters"]["scaling"] == "llama3"
    scaling = next(each for each in found["diagnoses"] if each["mistake"] == "scaling")
    assert scaling["parameters"]["scaling"] == "none"


def test_a_mistake_is_diagnosed_with_a_get_that_makes_the_table(api: httpx.Client) -> None:
    cos, sin = table(api, convention="interleaved")
    answer = post(api, VERIFY, npz_bytes(cos=cos, sin=sin), "application/x-npz", **QUERY)
    found = answer.json()
    assert found["match"] == "different"
    pairing = found["diagnoses"][0]
    assert pairing["mistake"] == "pairing"
    again = api.get(ROTARY, params={**pairing["parameters"], "format": "npz"})
    with np.load(io.BytesIO(again.content), allow_pickle=False) as archive:
        assert np.array_equal(archive["cos"], cos)


def test_start_and_position_ids_place_the_rows(api: httpx.Client) -> None:
    cos, sin = table(api)
    answer = post(
        api, VERIFY, npz_bytes(cos=cos[10:], sin=sin[10:]), "application/x-npz", start=10, **QUERY
    )
    assert answer.json()["match"] == "bitwise"
    ids = np.array([63, 0, 5], dtype=np.int64)
    body = npz_bytes(cos=cos[ids], sin=sin[ids], position_ids=ids)
    assert post(api, VERIFY, body, "application/x-npz", **QUERY).json()["match"] == "bitwise"


def test_identify_answers_the_get_that_reproduces_the_table(api: httpx.Client) -> None:
    cos, sin = table(api, base=500000)
    answer = post(api, IDENTIFY, npz_bytes(cos=cos, sin=sin), "application/x-npz")
    assert answer.status_code == 200, answer.text
    best = answer.json()["candidates"][0]
    assert best["family"] == "rotary"
    assert best["match"] == "bitwise"
    assert best["parameters"]["base"] == 500000


@pytest.mark.parametrize(
    ("path", "params", "body", "status", "words"),
    [
        pytest.param(
            VERIFY, {}, {"data": [[0.0, 1.0]]}, 422, ["family", "is required"], id="no-claim"
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2},
            {"family": "rotary", "data": [[1.0, 0.0]]},
            422,
            ["not both"],
            id="claim-twice",
        ),
        pytest.param(
            VERIFY, {"family": "nope"}, {"data": [[0.0]]}, 422, ["must be one of"], id="family"
        ),
        pytest.param(
            VERIFY, {"family": "alibi"}, {"data": [[0.0]]}, 422, ["must be one of"], id="alibi"
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 16, "bse": 3},
            {"data": [[0.0]]},
            422,
            ["bse"],
            id="unknown-parameter",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2},
            {"cos": [[1.0, 1.0]]},
            422,
            ["sin", "required"],
            id="cos-alone",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2},
            {"cos": [[1.0, 1.0]], "sin": [[0.0]]},
            422,
            ["shape"],
            id="shapes-differ",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2},
            {"data": [1.0, 0.0]},
            422,
            ["rows × width"],
            id="one-dimension",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2, "max_len": 1},
            {"data": [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]},
            422,
            ["max_len"],
            id="past-max-len",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2},
            {"data": [[1.0, 1.0, 0.0, 0.0]], "position_ids": [0, 1]},
            422,
            ["position_ids"],
            id="ids-count",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2},
            {"data": [[1.0, 1.0, 0.0, 0.0]], "position_ids": [-1]},
            422,
            ["position_ids"],
            id="ids-negative",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2, "start": -1},
            {"data": [[1.0, 1.0, 0.0, 0.0]]},
            422,
            ["start"],
            id="start-negative",
        ),
        pytest.param(
            VERIFY,
            {"family": "rotary", "head_dim": 2, "start": 1},
            {"data": [[1.0, 1.0, 0.0, 0.0]], "start": 1},
            422,
            ["start"],
            id="start-twice",
        ),
        pytest.param(
            IDENTIFY,
            {},
            {"family": "rotary", "data": [[0.0]]},
            422,
            ["no claim"],
            id="identify-claim",
        ),
        pytest.param(
            IDENTIFY, {"base": 3}, {"data": [[0.0]]}, 422, ["base"], id="identify-parameter"
        ),
        pytest.param(
            VERIFY, {"family": "rotary", "head_dim": 2}, {"table": []}, 422, ["table"], id="field"
        ),
    ],
)
def test_bad_input_is_a_problem_naming_it(
    api: httpx.Client, path: str, params: dict[str, Any], body: Any, status: int, words: list[str]
) -> None:
    answer = api.post(path, params=params, json=body)
    problem = assert_problem(answer, status)
    text = json.dumps(problem, ensure_ascii=False)
    for word in words:
        assert word in text, problem


def test_a_repeated_query_parameter_is_refused(api: httpx.Client) -> None:
    answer = api.post(VERIFY + "?family=rotary&head_dim=2&head_dim=4", json={"data": [[0.0]]})
    assert_problem(answer, 422, "more than once")


def test_an_answer_in_another_format_is_refused_before_the_body_is_read(api: httpx.Client) -> None:
    answer = api.post(VERIFY, params={**QUERY, "format": "npy"}, json={"data": [[0.0]]})
    assert_problem(answer, 422, "must be json")


def test_a_malformed_npy_is_a_400(api: httpx.Client) -> None:
    answer = post(api, VERIFY, b"\x93NUMPY garbage", "application/x-npy", **QUERY)
    assert_problem(answer, 400)


def test_an_npz_that_unpacks_past_the_limits_is_refused_as_it_unpacks(
    small_api: httpx.Client,
) -> None:
    """Zeros compress 1,000 to 1: the archive is small, its members are not."""
    zeros = np.zeros((30_000, 8), np.float32)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, data=zeros)
    assert len(buffer.getvalue()) < 10_000
    answer = post(
        small_api, VERIFY, buffer.getvalue(), "application/x-npz", family="sinusoidal", d_model=8
    )
    assert_problem(answer, 413)


def test_a_table_over_the_body_limit_is_a_413(small_api: httpx.Client) -> None:
    body = npy_bytes(np.zeros((400, 128), np.float32))  # 200 KB: past 100,000 bytes
    answer = post(small_api, VERIFY, body, "application/x-npy", family="sinusoidal", d_model=128)
    assert_problem(answer, 413)


def test_non_finite_entries_are_located_not_refused(api: httpx.Client) -> None:
    cos, sin = table(api)
    cos = cos.copy()
    cos[3, 0] = np.nan
    answer = post(api, VERIFY, npz_bytes(cos=cos, sin=sin), "application/x-npz", **QUERY)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["match"] == "different"
    assert found["non_finite"] == {"entries": 1, "first_positions": [3]}


def test_a_table_past_the_element_limit_is_refused_before_its_rows_are_made() -> None:
    settings = Settings.model_validate({"max_elements": 1_000, "max_body_bytes": 100_000})
    with in_process(create_app(settings)) as api:
        body = npy_bytes(np.zeros((100, 16), np.float32))  # 1,600 entries in 6.5 KB
        answer = post(api, VERIFY, body, "application/x-npy", family="sinusoidal", d_model=16)
        problem = assert_problem(answer, 422, "posted table")
        assert problem["setting"] == "PE_MAX_ELEMENTS"


GEMMA3: Final = {
    "model_type": "gemma3_text",
    "head_dim": 16,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "sliding_window_pattern": 2,
    "num_hidden_layers": 4,
    "max_position_embeddings": 64,
}


def test_a_table_per_layer_type_is_verified_against_its_config(api: httpx.Client) -> None:
    """Gemma 3's two layer types, as from-config's answer names them: the sliding layers'
    table made with the global layers' base is diagnosed, the other matches."""
    got = api.post("/v1/encodings/rotary/from-config", params={"format": "npz"}, json=GEMMA3)
    assert got.status_code == 200, got.text
    with np.load(io.BytesIO(got.content), allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files}
    assert set(members) == {
        f"{t}/{a}" for t in ("sliding_attention", "full_attention") for a in ("cos", "sin")
    }
    members["sliding_attention/cos"] = members["full_attention/cos"]
    members["sliding_attention/sin"] = members["full_attention/sin"]
    body = {"config": GEMMA3, **{name: array.tolist() for name, array in members.items()}}
    answer = api.post(VERIFY, json=body)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["match"] == "different"
    assert found["tables"]["full_attention"]["match"] == "bitwise"
    sliding = found["tables"]["sliding_attention"]
    assert sliding["match"] == "different"
    assert sliding["claim"]["parameters"]["base"] == 10000  # the sliding layers' GET
    [several] = sliding["diagnoses"]
    assert several["mistake"] == "several"
    assert {"base": 1000000, "scaling": "linear", "factor": 8}.items() <= several[
        "parameters"
    ].items()


def test_a_table_per_layer_type_needs_a_config(api: httpx.Client) -> None:
    body = npz_bytes(
        **{"full_attention/cos": np.ones((2, 4)), "full_attention/sin": np.zeros((2, 4))}
    )
    answer = post(api, VERIFY, body, "application/x-npz", family="rotary", head_dim=4)
    assert_problem(answer, 422, "config")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"cos": [[1.0, 1.0]] * 4, "sin": [[1.0, 1.0]] * 4}, id="constant"),
        pytest.param({"cos": [[0.0, 0.0]] * 4, "sin": [[0.0, 0.0]] * 4}, id="zeros"),
        pytest.param({"cos": [[3.4e38, 3.4e38]] * 4, "sin": [[1e-40, 1e-40]] * 4}, id="extremes"),
    ],
)
def test_a_table_whose_frequencies_are_zero_is_different_not_an_error(
    api: httpx.Client, body: dict[str, Any]
) -> None:
    answer = api.post(VERIFY, json={**body, "family": "rotary", "parameters": {"head_dim": 2}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["match"] == "different"
    assert "NaN" not in answer.text
    assert "Infinity" not in answer.text


def test_a_table_one_column_wide_is_identified_or_not_without_error(api: httpx.Client) -> None:
    answer = api.post(IDENTIFY, json={"data": [[0.5], [0.25], [0.1]]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["matched"] is False


@pytest.mark.parametrize("table", ["zeros", "noise"])
def test_far_positions_do_not_make_any_table_a_match(api: httpx.Client, table: str) -> None:
    """At 2^22 a float32 library turns its fastest pairs anywhere, never its slow ones: the
    bound is each pair's, and a table of zeros or noise is different."""
    rows = np.zeros((8, 8)) if table == "zeros" else np.random.default_rng(0).uniform(-1, 1, (8, 8))
    body = {"cos": rows.tolist(), "sin": rows.tolist()}
    answer = api.post(VERIFY, params={"family": "rotary", "head_dim": 8, "start": 2**22}, json=body)
    assert answer.json()["match"] == "different"


def test_a_negative_zero_is_not_bit_for_bit(api: httpx.Client) -> None:
    cos, sin = table(api)
    sin = sin.copy()
    sin[0, 0] = -0.0
    answer = post(api, VERIFY, npz_bytes(cos=cos, sin=sin), "application/x-npz", **QUERY)
    assert answer.json()["match"] == "library"


@pytest.mark.parametrize(
    ("where", "start"),
    [
        ("query", "1_0"),
        ("query", " 7"),
        ("query", "1.0"),
        ("body", True),
        ("body", "3"),
        ("body", 1.0),
    ],
)
def test_start_is_an_integer_and_nothing_else(api: httpx.Client, where: str, start: Any) -> None:
    body: dict[str, Any] = {"data": [[0.0, 1.0]]}
    params: dict[str, Any] = {"family": "sinusoidal", "d_model": 2}
    if where == "query":
        params["start"] = start
    else:
        body["start"] = start
    problem = assert_problem(api.post(VERIFY, params=params, json=body), 422)
    assert problem["errors"][0] == {
        "name": "start",
        "in": where,
        "detail": problem["errors"][0]["detail"],
    }
