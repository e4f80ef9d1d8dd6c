"""Parameters as a person types them: Hugging Face's names (``rope_theta``, ``rope_type``),
a preset's name in any case or a model's name for it, "did you mean" for a misspelt name or
choice, every missing scaling parameter at once, an empty body called empty; and an apply
that says which scale and positions it used."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from tests.support import assert_problem, client_of, npy_bytes

ROTARY = "/v1/encodings/rotary?max_len=16&head_dim=8&format=npz"
TABLE = "/v1/encodings/sinusoidal?max_len=8&d_model=16&format=npy"
NPY = {"content-type": "application/x-npy"}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def test_hugging_faces_names_are_taken(http: httpx.Client) -> None:
    ours = http.get(ROTARY + "&base=500000&scaling=linear&factor=2")
    theirs = http.get(ROTARY + "&rope_theta=500000&rope_type=linear&factor=2")
    assert theirs.status_code == 200
    assert theirs.content == ours.content
    assert http.get(ROTARY + "&rope_type=default").content == http.get(ROTARY).content
    both = http.get(ROTARY + "&rope_theta=500000&base=10000")
    assert_problem(both, 422, "rope_theta", "base")


def test_a_preset_by_any_case_or_by_its_models_name(http: httpx.Client) -> None:
    fairseq = http.get(TABLE + "&preset=fairseq").content
    for name in ("Fairseq", "NLLB", "m2m100", " xglm "):
        answer = http.get(TABLE + f"&preset={name}")
        assert answer.status_code == 200, name
        assert answer.content == fairseq
    presets = {p["name"]: p for p in http.get("/v1/presets").json()["presets"]}
    assert "nllb" in presets["fairseq"]["aliases"]
    assert presets["whisper"]["aliases"] == []


@pytest.mark.parametrize(
    ("url", "name", "hint"),
    [
        (TABLE + "&dmodel=16", "dmodel", "did you mean d_model?"),
        (ROTARY + "&rope_thetaa=5", "rope_thetaa", "did you mean rope_theta?"),
        (TABLE + "&preset=fairsec", "preset", "did you mean fairseq?"),
        (ROTARY + "&scaling=yarnn", "scaling", "did you mean yarn?"),
        (TABLE + "&layuot=split", "layuot", "did you mean layout?"),
    ],
)
def test_a_misspelling_gets_a_hint(http: httpx.Client, url: str, name: str, hint: str) -> None:
    problem = assert_problem(http.get(url), 422, name)
    assert problem["errors"][0]["detail"].endswith(hint)


def test_nothing_close_gets_no_hint(http: httpx.Client) -> None:
    problem = assert_problem(http.get(TABLE + "&zzzzzz=1"), 422, "zzzzzz")
    assert "did you mean" not in problem["detail"]


def test_every_missing_scaling_parameter_at_once(http: httpx.Client) -> None:
    problem = assert_problem(http.get(ROTARY + "&scaling=llama3"), 422, "required")
    names = [error["name"] for error in problem["errors"]]
    assert names == [
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ]


def test_an_empty_body_is_called_empty(http: httpx.Client) -> None:
    for path, kind in [
        ("/v1/encodings/sinusoidal/apply", NPY),
        ("/v1/encodings/rotary/apply", {"content-type": "application/json"}),
        ("/v1/encodings/rotary/from-config", {"content-type": "application/json"}),
    ]:
        assert_problem(http.post(path, content=b"", headers=kind), 400, "empty")


def test_apply_says_what_scale_and_positions_it_used(http: httpx.Client) -> None:
    batch = npy_bytes(np.zeros((3, 16), np.float32))
    fairseq = http.post("/v1/encodings/sinusoidal/apply?preset=fairseq", content=batch, headers=NPY)
    assert fairseq.headers["x-scale"] == "4.0"  # sqrt(16), as fairseq scales
    assert fairseq.headers["x-positions"] == "2..4"  # padding_idx + 1, ...
    given = http.post("/v1/encodings/sinusoidal/apply?scale=1&offset=7", content=batch, headers=NPY)
    assert (given.headers["x-scale"], given.headers["x-positions"]) == ("1.0", "7..9")
    document = http.post(
        "/v1/encodings/sinusoidal/apply?format=json",
        json={"embeddings": [[0.0] * 16] * 2, "position_ids": [5, 1]},
    ).json()
    assert (document["scale"], document["positions"]) == (4.0, "position_ids")
    rotated = http.post("/v1/encodings/rotary/apply", content=batch, headers=NPY)
    assert rotated.headers["x-positions"] == "0..2"
    assert "x-scale" not in rotated.headers
    assert "X-Scale" in rotated.headers["access-control-expose-headers"]
