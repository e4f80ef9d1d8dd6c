"""Sin-cos grid tables over HTTP: ``GET /v1/encodings/sincos-2d`` and ``.../sincos-3d``
(the rows a grid decides, sliced by start and stop, the resolved parameters, ETag and
HEAD), ``POST .../from-config`` of each diffusers class read, and the refusals that name
their parameter or limit before anything is computed."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.encodings import registry, sincos2d, sincos3d
from tests.support import assert_problem, client_of

TABLE_2D = "/v1/encodings/sincos-2d"
TABLE_3D = "/v1/encodings/sincos-3d"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def npy(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return np.load(io.BytesIO(answer.content), allow_pickle=False)


def test_the_grid_decides_the_rows_and_start_stop_slice_them(http: httpx.Client) -> None:
    query = "height=6&width=10&dim=64&preset=diffusers&base_size=64&interpolation_scale=2"
    got = npy(http.get(f"{TABLE_2D}?{query}&extra_tokens=1&start=5&stop=40&format=npy"))
    key = sincos2d.preset_key(
        64,
        6,
        10,
        "diffusers",
        {"base_size": 64, "interpolation_scale": 2.0, "extra_tokens": 1},
        "library",
        "float32",
    )
    np.testing.assert_array_equal(got, registry.rows(key, 5, 40))
    whole = npy(http.get(f"{TABLE_2D}?{query}&format=npy"))
    assert whole.shape == (60, 64)


def test_json_states_the_resolved_parameters(http: httpx.Client) -> None:
    answer = http.get(f"{TABLE_2D}?height=2&width=3&dim=8&preset=sd3")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert {
        name: document[name]
        for name in ("base_size", "interpolation_scale", "pos_embed_max_size", "rows", "shape")
    } == {
        "base_size": 64,
        "interpolation_scale": 1.0,
        "pos_embed_max_size": 192,
        "rows": 6,
        "shape": [6, 8],
    }


def test_the_3d_table_with_its_text_rows(http: httpx.Client) -> None:
    got = npy(
        http.get(
            f"{TABLE_3D}?frames=3&height=4&width=5&dim=32&preset=cogvideox&start=220&format=npy"
        )
    )
    key = sincos3d.preset_key(32, (3, 4, 5), "cogvideox", {}, "library", "float32")
    assert key.rows == 226 + 60
    np.testing.assert_array_equal(got, registry.rows(key, 220, key.rows))
    assert not got[:6].any()


def test_an_etag_and_head(http: httpx.Client) -> None:
    url = f"{TABLE_2D}?height=4&width=4&dim=16&preset=timm&format=npy"
    tag = http.get(url).headers["etag"]
    assert http.get(url, headers={"if-none-match": tag}).status_code == 304
    head = http.head(url)
    assert head.status_code == 200
    assert head.headers["etag"] == tag
    assert not head.content


@pytest.mark.parametrize(
    ("url", "name"),
    [
        pytest.param(f"{TABLE_2D}?height=4&width=4&dim=18", "dim", id="dim-multiple-of-4"),
        pytest.param(f"{TABLE_2D}?height=0&width=4&dim=16", "height", id="zero-height"),
        pytest.param(f"{TABLE_2D}?height=4&width=-2&dim=16", "width", id="negative-width"),
        pytest.param(f"{TABLE_2D}?height=4&width=4&dim=16&base_size=8", "base_size", id="mae"),
        pytest.param(
            f"{TABLE_2D}?height=4&width=4&dim=16&preset=timm&extra_tokens=1",
            "extra_tokens",
            id="timm-extra-tokens",
        ),
        pytest.param(
            f"{TABLE_2D}?height=200&width=4&dim=16&preset=sd3", "height", id="past-max-size"
        ),
        pytest.param(f"{TABLE_2D}?height=4&width=4&dim=16&start=16", "start", id="start"),
        pytest.param(f"{TABLE_2D}?height=4&width=4&dim=16&stop=17", "stop", id="stop"),
        pytest.param(f"{TABLE_2D}?height=4&width=4&dim=16&preset=dit", "preset", id="preset"),
        pytest.param(
            f"{TABLE_3D}?frames=1&height=4&width=4&dim=24", "dim", id="3d-dim-multiple-of-16"
        ),
        pytest.param(
            f"{TABLE_3D}?frames=1&height=4&width=4&dim=32&preset=cogvideox&text_tokens=0",
            "text_tokens",
            id="3d-fixed",
        ),
    ],
)
def test_bad_parameters_are_a_4xx_naming_them(http: httpx.Client, url: str, name: str) -> None:
    problem = assert_problem(http.get(url), 422)
    named = {error["name"] for error in problem.get("errors", [])}
    assert name in named or name in problem["detail"], problem


def test_a_grid_past_the_limits_is_refused_before_it_is_computed(http: httpx.Client) -> None:
    problem = assert_problem(
        http.get(f"{TABLE_2D}?height=1000000&width=1000000&dim=1024&format=npy"), 422
    )
    assert problem["setting"] in {"PE_MAX_ELEMENTS", "PE_MAX_POSITION"}
    problem = assert_problem(
        http.get(f"{TABLE_3D}?frames=100000&height=1000&width=1000&dim=16&format=npy"), 422
    )
    assert problem["setting"] in {"PE_MAX_ELEMENTS", "PE_MAX_POSITION"}


FROM_2D = TABLE_2D + "/from-config"
FROM_3D = TABLE_3D + "/from-config"


@pytest.mark.parametrize(
    ("config", "query", "expected", "fields"),
    [
        pytest.param(
            {
                "_class_name": "SD3Transformer2DModel",
                "pos_embed_max_size": 192,
                "num_attention_heads": 24,
            },
            "height=1024&width=768",
            {
                "preset": "sd3",
                "dim": 1536,
                "height": 64,
                "width": 48,
                "base_size": 64,
                "pos_embed_max_size": 192,
            },
            "_class_name, sample_size=128, patch_size=2, num_attention_heads, "
            "attention_head_dim=64, pos_embed_max_size",
            id="sd3-medium",
        ),
        pytest.param(
            {
                "_class_name": "PixArtTransformer2DModel",
                "sample_size": 128,
                "interpolation_scale": None,
            },
            "",
            {
                "preset": "diffusers",
                "dim": 1152,
                "height": 64,
                "width": 64,
                "base_size": 64,
                "interpolation_scale": 2.0,
            },
            "_class_name, sample_size, patch_size=2, num_attention_heads=16, attention_head_dim=72",
            id="pixart-alpha",
        ),
        pytest.param(
            {
                "_class_name": "PixArtTransformer2DModel",
                "sample_size": 256,
                "interpolation_scale": 4,
            },
            "height=1024&width=2048",
            {
                "preset": "diffusers",
                "height": 64,
                "width": 128,
                "base_size": 128,
                "interpolation_scale": 4.0,
            },
            "_class_name, sample_size, patch_size=2, num_attention_heads=16, "
            "attention_head_dim=72, interpolation_scale",
            id="pixart-sigma-2k",
        ),
        pytest.param(
            {"_class_name": "DiTTransformer2DModel"},
            "",
            {
                "preset": "diffusers",
                "dim": 1152,
                "height": 16,
                "width": 16,
                "base_size": 16,
                "interpolation_scale": 1.0,
            },
            "_class_name, sample_size=32, patch_size=2, num_attention_heads=16, "
            "attention_head_dim=72",
            id="dit",
        ),
        pytest.param(
            {"_class_name": "LatteTransformer3DModel", "patch_size": 2, "sample_size": 64},
            "height=512&width=512",
            {
                "preset": "diffusers",
                "dim": 1408,
                "height": 32,
                "base_size": 32,
                "interpolation_scale": 1.0,
            },
            "_class_name, sample_size, patch_size, num_attention_heads=16, attention_head_dim=88",
            id="latte",
        ),
    ],
)
def test_from_config_2d_reads_the_class_s_table(
    http: httpx.Client,
    config: dict[str, Any],
    query: str,
    expected: dict[str, Any],
    fields: str,
) -> None:
    answer = http.post(f"{FROM_2D}?{query}&stop=2", json=config)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-config-fields"] == fields
    document = answer.json()
    assert {name: document[name] for name in expected} == expected
    same = http.get(answer.headers["content-location"])
    assert same.json()["data"] == document["data"]


def test_from_config_3d_reads_cogvideox_2b(http: httpx.Client) -> None:
    answer = http.post(
        f"{FROM_3D}?frames=49&height=480&width=720&start=226&stop=228",
        json={"_class_name": "CogVideoXTransformer3DModel"},
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert (document["frames"], document["height"], document["width"], document["dim"]) == (
        13,
        30,
        45,
        1920,
    )
    assert document["spatial_interpolation_scale"] == 1.875
    assert document["text_tokens"] == 226
    assert "use_rotary_positional_embeddings=False" in answer.headers["x-config-fields"]


@pytest.mark.parametrize(
    ("url", "config", "name"),
    [
        pytest.param(FROM_2D, {"_class_name": "FluxTransformer2DModel"}, "_class_name", id="flux"),
        pytest.param(FROM_2D, {"in_channels": 4}, "_class_name", id="no-class"),
        pytest.param(
            FROM_3D,
            {
                "_class_name": "CogVideoXTransformer3DModel",
                "use_rotary_positional_embeddings": True,
            },
            "use_rotary_positional_embeddings",
            id="cogvideox-5b-rope",
        ),
        pytest.param(
            FROM_2D,
            {"_class_name": "DiTTransformer2DModel", "patch_size": "2"},
            "patch_size",
            id="a-string",
        ),
    ],
)
def test_a_config_it_cannot_place_is_a_422_naming_the_field(
    http: httpx.Client, url: str, config: dict[str, Any], name: str
) -> None:
    problem = assert_problem(http.post(url, json=config), 422)
    assert name in {error["name"] for error in problem["errors"]}, problem


def test_from_config_lists_the_classes_it_reads(http: httpx.Client) -> None:
    problem = assert_problem(http.post(FROM_2D, json={"_class_name": "X"}), 422)
    for name in ("SD3Transformer2DModel", "PixArtTransformer2DModel", "DiTTransformer2DModel"):
        assert name in problem["detail"]
    problem = assert_problem(http.post(FROM_3D, json={"_class_name": "X"}), 422)
    assert "CogVideoXTransformer3DModel" in problem["detail"]


def test_the_presets_are_listed_with_their_sources(http: httpx.Client) -> None:
    families = http.get("/v1/presets").json()["families"]
    listed = {preset["name"]: preset for preset in families["sincos-2d"]}
    assert list(listed) == list(sincos2d.PRESETS)
    assert listed["sd3"]["fixes"]["pos_embed_max_size"] == 192
    assert listed["timm"]["takes"] == ["temperature", "interleave_sin_cos", "reverse_coord"]
    assert listed["timm"]["library_rounding"].startswith("float32")
    assert all(source["version"] for source in listed["mae"]["follows"])
    cogvideox = {preset["name"]: preset for preset in families["sincos-3d"]}["cogvideox"]
    assert cogvideox["fixes"]["text_tokens"] == 226
