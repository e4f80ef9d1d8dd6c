"""Vision towers' RoPE over HTTP: ``GET /v1/encodings/vision-rotary`` (each model's table in
npz and JSON, the grid as ``grid`` or ``height`` and ``width``), ``POST .../positions`` (patch
coordinates ``(2, L)`` or ``(L, 2)``), ``POST .../apply`` (the model's pairs), the audit, and
the refusals that name their parameter."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.encodings import registry, vision_rotary
from tests.support import assert_problem, client_of, npy_bytes

TABLE = "/v1/encodings/vision-rotary"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def npz(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return np.load(io.BytesIO(answer.content), allow_pickle=False)


@pytest.mark.parametrize("model", vision_rotary.MODELS)
def test_the_npz_holds_the_family_s_rows(http: httpx.Client, model: str) -> None:
    got = npz(http.get(TABLE, params={"model": model, "grid": "4,4", "format": "npz"}))
    key = vision_rotary.preset_key(model, (4, 4), {}, "library", "float32")
    rows = registry.rows(key, 0, key.tokens)
    np.testing.assert_array_equal(got["cos"], rows[:, : key.head_dim])
    np.testing.assert_array_equal(got["sin"], rows[:, key.head_dim :])


def test_json_states_the_checkpoint_s_parameters(http: httpx.Client) -> None:
    answer = http.get(TABLE, params={"model": "llama4", "height": 24, "width": 24})
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert (document["head_dim"], document["theta"], document["tokens"]) == (88, 10000.0, 577)
    assert document["grid"] == [1, 24, 24]
    assert document["shape"] == [2, 577, 88]
    assert document["cos"][576] == [1.0] * 88


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        pytest.param("llama4", 577, id="llama4"),
        pytest.param("dinov3", 196, id="dinov3"),
        pytest.param("eva02", 1024, id="eva02"),
        pytest.param("pixtral", 4096, id="pixtral"),
        pytest.param("qwen3_vl", 784, id="qwen3-vl"),
    ],
)
def test_without_a_grid_the_checkpoint_s_image(http: httpx.Client, model: str, tokens: int) -> None:
    answer = http.get(TABLE, params={"model": model, "format": "npz"})
    assert npz(answer)["cos"].shape[0] == tokens


def test_window_index_reorders_the_rows(http: httpx.Client) -> None:
    query = {"model": "qwen2_5_vl", "grid": "1,4,12", "format": "npz"}
    plain = npz(http.get(TABLE, params=query))["cos"]
    windowed = npz(http.get(TABLE, params={**query, "window_index": "true"}))["cos"]
    order = np.array([0, 1, 2, 3, 6, 7, 8, 9, 4, 5, 10, 11])
    rows = np.arange(48)
    np.testing.assert_array_equal(windowed, plain[4 * order[rows // 4] + rows % 4])


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"position_ids": [[0, 3, 1], [2, 0, 3]]}, id="2-by-L"),
        pytest.param({"position_ids": [[0, 2], [3, 0], [1, 3]]}, id="L-by-2"),
    ],
)
def test_positions_are_patch_coordinates(http: httpx.Client, body: dict[str, Any]) -> None:
    got = npz(http.post(f"{TABLE}/positions?model=dinov3&grid=4,4&format=npz", json=body))
    table = npz(http.get(TABLE, params={"model": "dinov3", "grid": "4,4", "format": "npz"}))
    np.testing.assert_array_equal(got["cos"], table["cos"][[2, 12, 7]])


def test_apply_rotates_with_the_model_s_pairs(http: httpx.Client) -> None:
    batch = np.random.default_rng(3).standard_normal((1, 2, 17, 88)).astype(np.float32)
    answer = http.post(
        f"{TABLE}/apply?model=llama4&grid=4,4&format=npy",
        content=npy_bytes(batch),
        headers={"content-type": "application/x-npy"},
    )
    assert answer.status_code == 200, answer.text
    got = np.load(io.BytesIO(answer.content), allow_pickle=False)
    key = vision_rotary.preset_key("llama4", (4, 4), {}, "library", "float32")
    rows = registry.rows(key, 0, 17)
    re, im = batch[..., 0::2], batch[..., 1::2]  # Llama 4's complex pairs (2i, 2i+1)
    cos, sin = rows[:, 0:88:2], rows[:, 88::2]
    np.testing.assert_array_equal(got[..., 0::2], re * cos - im * sin)
    np.testing.assert_array_equal(got[..., 1::2], re * sin + im * cos)


def test_apply_takes_the_batch_s_head_width(http: httpx.Client) -> None:
    batch = np.ones((1, 1, 16, 32), np.float32)
    answer = http.post(
        f"{TABLE}/apply?model=pixtral&grid=4,4&format=npy",
        content=npy_bytes(batch),
        headers={"content-type": "application/x-npy"},
    )
    assert answer.status_code == 200, answer.text


def test_the_audit_measures_bf16_periods(http: httpx.Client) -> None:
    answer = http.get("/v1/audit/vision-rotary", params={"model": "dinov3", "grid": "14,14"})
    assert answer.status_code == 200, answer.text
    paths = {path["name"]: path for path in answer.json()["paths"]}
    assert {"library", "bf16-table", "bf16-periods", "float32-positions", "device"} <= set(paths)
    worst = max(band["max_error"] for band in paths["bf16-periods"]["bands"])
    assert 1e-3 < worst < 1e-2
    library = max(band["max_error"] for band in paths["library"]["bands"])
    assert library < 1e-6
    # the library's float32 table is within what a device may give
    device = max(band["max_error"] for band in paths["device"]["bands"])
    assert library <= device < 1e-4


def test_presets_list_each_model(http: httpx.Client) -> None:
    answer = http.get("/v1/presets")
    assert answer.status_code == 200, answer.text
    listed = answer.json()
    assert "vision-rotary" in answer.text, listed
    assert "pixtral" in answer.text, listed


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param({"model": "qwen2_vl", "grid": "5,4"}, "grid", id="merge"),
        pytest.param({"model": "qwen2_vl", "grid": "4,4", "head_dim": 78}, "head_dim", id="head"),
        pytest.param({"model": "pixtral", "height": 4}, "grid", id="height-alone"),
        pytest.param({"model": "pixtral", "grid": "4,4", "height": 4}, "grid", id="both"),
        pytest.param({"model": "pixtral", "grid": "4,x"}, "grid", id="not-integers"),
        pytest.param(
            {"model": "eva02", "grid": "4,4", "ref_feat_shape": "1,2,3"}, "ref_feat_shape", id="ref"
        ),
        pytest.param({"model": "vit", "grid": "4,4"}, "model", id="model"),
        pytest.param(
            {"model": "eva02", "grid": "2,2", "ref_feat_shape": "99999999999999999999,1"},
            "ref_feat_shape",
            id="ref-past-int64",
        ),
        pytest.param({"model": "pixtral", "grid": "60000,60000"}, "grid", id="past-the-limits"),
    ],
)
def test_refusals_name_the_parameter(http: httpx.Client, query: dict[str, Any], name: str) -> None:
    answer = http.get(TABLE, params=query)
    assert 400 <= answer.status_code < 500, answer.text
    assert_problem(answer, answer.status_code, name)
