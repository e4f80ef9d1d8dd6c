"""Multi-axis RoPE over HTTP: ``GET /v1/encodings/rope-nd`` (a preset's grid as cos and sin
in npz and JSON), ``POST .../positions`` (ids of every axis), ``POST .../apply``, and the
refusals that name their parameter."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.encodings import registry, rope_nd
from tests.support import assert_problem, client_of, npy_bytes

TABLE = "/v1/encodings/rope-nd"
POSITIONS = TABLE + "/positions"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def npz(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return np.load(io.BytesIO(answer.content), allow_pickle=False)


def test_the_npz_holds_cos_and_sin_of_the_family_s_rows(http: httpx.Client) -> None:
    got = npz(http.get(f"{TABLE}?grid=3,4&preset=flux&text_tokens=2&start=1&format=npz"))
    key = rope_nd.preset_key(
        "flux", (3, 4), {"text_tokens": 2}, None, "interleaved", "library", "float32"
    )
    rows = registry.rows(key, 1, 14)
    np.testing.assert_array_equal(got["cos"], rows[:, :128])
    np.testing.assert_array_equal(got["sin"], rows[:, 128:])


def test_json_states_the_preset_s_parameters(http: httpx.Client) -> None:
    answer = http.get(f"{TABLE}?grid=1,2,3&preset=wan&head_dim=128&format=json")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["axes_dim"] == [44, 42, 42]
    assert (document["tokens"], document["freqs_dtype"], document["shape"]) == (
        6,
        "float64",
        [2, 6, 128],
    )
    # token 5 is cell (0, 1, 2): the frame axis's angles are 0, its cosines 1
    assert document["cos"][5][:44] == [1.0] * 44


def test_text_ids_are_the_model_s(http: httpx.Client) -> None:
    """FLUX.2's text tokens count on the fourth axis, FLUX's are all zero."""
    flux2 = npz(http.get(f"{TABLE}?grid=1,1&preset=flux2&text_tokens=3&format=npz"))
    flux = npz(http.get(f"{TABLE}?grid=1,1&preset=flux&text_tokens=3&format=npz"))
    assert np.all(flux["cos"] == 1)
    assert np.all(flux2["cos"][:, :96] == 1)
    assert flux2["sin"][2, 97] == np.float32(np.sin(2.0))


def test_positions_are_the_rows_of_the_same_ids(http: httpx.Client) -> None:
    got = npz(
        http.post(
            f"{POSITIONS}?grid=1,1&preset=flux&format=npz",
            json={"position_ids": [[0, 0], [1, 2], [3, 1]]},
        )
    )
    table = npz(http.get(f"{TABLE}?grid=3,4&preset=flux&format=npz"))
    np.testing.assert_array_equal(got["cos"], table["cos"][[7, 9]])


def test_bfloat16_ids_round_as_the_pipeline_s(http: httpx.Client) -> None:
    url = f"{POSITIONS}?grid=1,1&preset=flux&ids_dtype=bfloat16&format=npz"
    got = npz(
        http.post(
            url,
            content=npy_bytes(np.array([[0, 0], [0, 0], [257, 256]], np.float32)),
            headers={"content-type": "application/x-npy"},
        )
    )
    np.testing.assert_array_equal(got["cos"][0], got["cos"][1])


def test_exact_is_within_an_ulp_of_library(http: httpx.Client) -> None:
    base = f"{TABLE}?preset=hunyuan-video&grid=2,4,5&format=npz"
    library = npz(http.get(base))
    exact = npz(http.get(base + "&rounding=exact"))
    assert np.abs(library["cos"] - exact["cos"]).max() < 1e-5


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("grid=-1,2&preset=flux", "grid"),
        ("grid=2,2,2&preset=flux", "grid"),
        ("grid=2,2,2&preset=wan&theta=5", "theta"),
        ("grid=2,2,2&preset=hunyuan-video&text_tokens=3", "text_tokens"),
        ("grid=2,2&axes_dim=3,4", "axes_dim"),
        ("grid=2,2&axes_dim=4,4&head_dim=10", "axes_dim"),
        ("grid=2,2&axes_dim=4,x", "axes_dim"),
        ("grid=100000,100000&axes_dim=64,64", "grid"),
        ("grid=1000000,1000000&axes_dim=4,4", "grid"),
        ("grid=2,2&axes_dim=4,4&start=4", "start"),
    ],
)
def test_bad_parameters_are_named(http: httpx.Client, query: str, name: str) -> None:
    assert_problem(http.get(f"{TABLE}?{query}"), 422, name)


def test_non_finite_ids_are_refused(http: httpx.Client) -> None:
    body = npy_bytes(np.array([[0.0, np.nan], [1.0, 2.0], [0.0, 1.0]]))
    answer = http.post(
        f"{POSITIONS}?grid=1,1&preset=flux",
        content=body,
        headers={"content-type": "application/x-npy"},
    )
    assert 400 <= answer.status_code < 500
    assert "position_ids" in answer.text


def test_apply_rotates_each_pair_by_its_token_s_angles(http: httpx.Client) -> None:
    x = np.random.default_rng(0).standard_normal((1, 2, 2 + 6, 16)).astype(np.float32)
    query = "grid=2,1,3&axes_dim=4,6,6&text_tokens=2"
    table = npz(http.get(f"{TABLE}?{query}&format=npz"))
    answer = http.post(
        f"{TABLE}/apply?{query}&format=npy",
        content=npy_bytes(x),
        headers={"content-type": "application/x-npy"},
    )
    assert answer.status_code == 200, answer.text
    got = np.load(io.BytesIO(answer.content))
    cos, sin = table["cos"][:, 0::2], table["sin"][:, 0::2]
    a, b = x[..., 0::2], x[..., 1::2]
    np.testing.assert_array_equal(got[..., 0::2], a * cos - b * sin)
    np.testing.assert_array_equal(got[..., 1::2], b * cos + a * sin)


def test_apply_refuses_a_head_other_than_the_axes_sum(http: httpx.Client) -> None:
    x = np.zeros((1, 1, 4, 12), np.float32)
    answer = http.post(
        f"{TABLE}/apply?grid=4&axes_dim=16",
        content=npy_bytes(x),
        headers={"content-type": "application/x-npy"},
    )
    assert_problem(answer, 422, "axes_dim", "12")


FROM_CONFIG = TABLE + "/from-config"


def test_from_config_is_the_preset_s_table_over_the_pipeline_s_grid(http: httpx.Client) -> None:
    config = {"_class_name": "WanTransformer3DModel", "attention_head_dim": 128}
    answer = http.post(
        f"{FROM_CONFIG}?height=480&width=832&frames=81&stop=2&format=json", json=config
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    # 81 frames: 21 latent frames; 480 x 832 pixels: 60 x 104 cells, patched 2x2
    assert (document["grid"], document["axes_dim"]) == ([21, 30, 52], [44, 42, 42])
    assert "attention_head_dim" in answer.headers["x-config-fields"]


def test_from_config_reads_hunyuan_video_s_fields(http: httpx.Client) -> None:
    config = {
        "_class_name": "HunyuanVideoTransformer3DModel",
        "rope_axes_dim": [8, 28, 28],
        "rope_theta": 128.0,
        "attention_head_dim": 64,
        "patch_size": 2,
        "patch_size_t": 1,
    }
    answer = http.post(f"{FROM_CONFIG}?height=64&width=32&frames=5&stop=2&format=json", json=config)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert (document["grid"], document["axes_dim"], document["theta"]) == (
        [2, 4, 2],
        [8, 28, 28],
        128.0,
    )


def test_from_config_names_an_unknown_class_and_those_it_reads(http: httpx.Client) -> None:
    answer = http.post(f"{FROM_CONFIG}?height=64&width=64", json={"_class_name": "UNet2DModel"})
    assert_problem(answer, 422, "_class_name", "FluxTransformer2DModel", "WanTransformer3DModel")


def test_from_config_asks_for_the_image_s_size(http: httpx.Client) -> None:
    answer = http.post(FROM_CONFIG, json={"_class_name": "FluxTransformer2DModel"})
    assert_problem(answer, 422, "height")


def test_from_config_cogvideox_rotary_only_and_its_versions(http: httpx.Client) -> None:
    plain = {"_class_name": "CogVideoXTransformer3DModel"}
    answer = http.post(f"{FROM_CONFIG}?height=480&width=720&frames=49", json=plain)
    assert_problem(answer, 422, "use_rotary_positional_embeddings")
    rotary = {**plain, "use_rotary_positional_embeddings": True}
    query = f"{FROM_CONFIG}?height=480&width=720&frames=49&stop=1&format=json"
    document = http.post(query, json=rotary).json()
    assert (document["preset"], document["grid"], document["base_grid"]) == (
        "cogvideox",
        [13, 30, 45],
        [30, 45],
    )
    later = http.post(query, json={**rotary, "patch_size_t": 2}).json()
    assert (later["preset"], later["grid"]) == ("cogvideox-1.5", [7, 30, 45])


def test_ids_past_the_ids_dtype_are_refused(http: httpx.Client) -> None:
    answer = http.post(
        f"{POSITIONS}?grid=1,1,1&axes_dim=2,2,2&ids_dtype=float16",
        json={"position_ids": [[0.0], [1e6], [0.0]]},
    )
    assert_problem(answer, 422, "ids_dtype", "65504")


def test_theta_whose_angles_overflow_is_named(http: httpx.Client) -> None:
    # float32: theta rounds to 0, its frequencies are infinite
    answer = http.get(f"{TABLE}?grid=2,2&axes_dim=4,4&theta=1e-300")
    assert_problem(answer, 422, "theta")
