"""Diffusion timestep embeddings over HTTP: ``GET /v1/encodings/timestep`` (the integer
timesteps' table in every format, its ETag and HEAD, a preset's resolved parameters) and
``POST .../positions`` (real timesteps as JSON or ``.npy``), and the refusals that name
their parameter."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.encodings import registry, timestep
from tests.support import assert_problem, client_of, npy_bytes

TABLE = "/v1/encodings/timestep"
POSITIONS = TABLE + "/positions"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def npy(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return np.load(io.BytesIO(answer.content), allow_pickle=False)


def test_the_table_is_the_family_s_rows(http: httpx.Client) -> None:
    got = npy(http.get(f"{TABLE}?max_len=1000&dim=320&preset=unet&start=10&format=npy"))
    key = timestep.preset_key(320, "unet", {}, "library", "float32")
    np.testing.assert_array_equal(got, registry.rows(key, 10, 1000))


def test_json_states_the_preset_s_parameters(http: httpx.Client) -> None:
    answer = http.get(f"{TABLE}?max_len=3&dim=5&preset=flux")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert {
        name: document[name]
        for name in ("flip_sin_to_cos", "downscale_freq_shift", "time_factor", "timestep_dtype")
    } == {
        "flip_sin_to_cos": True,
        "downscale_freq_shift": 0.0,
        "time_factor": 1000.0,
        "timestep_dtype": "bfloat16",
    }
    assert document["shape"] == [3, 5]
    assert [row[4] for row in document["data"]] == [0.0, 0.0, 0.0]  # odd: a zero column


def test_an_etag_and_head(http: httpx.Client) -> None:
    url = f"{TABLE}?max_len=8&dim=16&format=npy"
    first = http.get(url)
    tag = first.headers["etag"]
    assert http.get(url, headers={"if-none-match": tag}).status_code == 304
    head = http.head(url)
    assert head.status_code == 200
    assert head.headers["etag"] == tag
    assert not head.content


@pytest.mark.parametrize("body", ["json", "npy"])
def test_positions_take_real_timesteps(http: httpx.Client, body: str) -> None:
    sigmas = np.array([0.75, 0.9, 0.0125]) * 1000
    url = f"{POSITIONS}?max_len=1&dim=256&preset=flux&format=npy"
    if body == "json":
        answer = http.post(url, json={"position_ids": sigmas.tolist()})
    else:
        answer = http.post(
            url, content=npy_bytes(sigmas), headers={"content-type": "application/x-npy"}
        )
    got = npy(answer)
    plain = timestep.TimestepKey(256, True, 0.0)
    np.testing.assert_array_equal(got[:2], timestep.at(plain, np.array([752.0, 900.0])))


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("max_len=4&dim=8&preset=unet&scale=2", "scale", id="fixed-by-preset"),
        pytest.param("max_len=4&dim=2", "downscale_freq_shift", id="half-minus-shift-0"),
        pytest.param("max_len=4&dim=8&max_period=1", "max_period", id="max-period"),
        pytest.param("max_len=4&dim=7&preset=wan", "dim", id="wan-odd"),
        pytest.param("max_len=4&dim=8&scale=nan", "scale", id="scale-nan"),
        pytest.param(
            "max_len=70000&dim=4&timestep_dtype=float16&start=65600",
            "timestep_dtype",
            id="past-float16",
        ),
        pytest.param("max_len=4&dim=8&preset=sd", "preset", id="unknown-preset"),
    ],
)
def test_bad_parameters_are_a_4xx_naming_them(http: httpx.Client, query: str, name: str) -> None:
    problem = assert_problem(http.get(f"{TABLE}?{query}"), 422)
    assert name in {error["name"] for error in problem["errors"]}, problem


def test_non_finite_timesteps_are_refused(http: httpx.Client) -> None:
    body = npy_bytes(np.array([1.0, np.inf]))
    answer = http.post(
        f"{POSITIONS}?max_len=1&dim=8", content=body, headers={"content-type": "application/x-npy"}
    )
    assert_problem(answer, 422, "finite")


def test_overflowing_angles_are_a_4xx_not_a_nan(http: httpx.Client) -> None:
    answer = http.post(
        f"{POSITIONS}?max_len=1&dim=4&downscale_freq_shift=0&scale=1e12&time_factor=1e29",
        json={"position_ids": [1e9]},
    )
    problem = assert_problem(answer, 422)
    assert "scale" in {error["name"] for error in problem["errors"]}


FROM_CONFIG = TABLE + "/from-config"


@pytest.mark.parametrize(
    ("config", "preset", "parameters", "fields"),
    [
        pytest.param(
            {"_class_name": "FluxTransformer2DModel", "num_layers": 19},
            "flux-diffusers",
            {"dim": 256, "timestep_dtype": "bfloat16"},
            "_class_name",
            id="flux",
        ),
        pytest.param(
            {"_class_name": "UNet2DConditionModel", "block_out_channels": [320, 640]},
            "diffusers",
            {"dim": 320, "flip_sin_to_cos": True, "downscale_freq_shift": 0.0},
            "_class_name, time_embedding_type=positional, block_out_channels, "
            "flip_sin_to_cos=True, freq_shift=0",
            id="sd-unet-defaults",
        ),
        pytest.param(
            {
                "_class_name": "UNet2DModel",
                "flip_sin_to_cos": False,
                "freq_shift": 1,
                "block_out_channels": [128, 256],
            },
            "diffusers",
            {"dim": 128, "flip_sin_to_cos": False, "downscale_freq_shift": 1.0},
            "_class_name, time_embedding_type=positional, block_out_channels, "
            "flip_sin_to_cos, freq_shift",
            id="ddpm-unet",
        ),
        pytest.param(
            {"_class_name": "WanTransformer3DModel", "freq_dim": 256},
            "unet",
            {"dim": 256},
            "_class_name, freq_dim",
            id="wan",
        ),
        pytest.param(
            {"_class_name": "CogVideoXTransformer3DModel", "num_attention_heads": 48},
            "diffusers",
            {"dim": 3072},
            "_class_name, num_attention_heads, attention_head_dim=64, flip_sin_to_cos=True, "
            "freq_shift=0",
            id="cogvideox-5b",
        ),
        pytest.param(
            {"_class_name": "QwenImageTransformer2DModel"},
            "qwen-image",
            {"dim": 256, "scale": 1000.0},
            "_class_name",
            id="qwen-image",
        ),
    ],
)
def test_from_config_reads_the_class_s_embedding(
    http: httpx.Client,
    config: dict[str, Any],
    preset: str,
    parameters: dict[str, Any],
    fields: str,
) -> None:
    answer = http.post(f"{FROM_CONFIG}?max_len=4", json=config)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-config-fields"] == fields
    document = answer.json()
    assert document["preset"] == preset
    assert {name: document[name] for name in parameters} == parameters
    get = {name: document[name] for name in ("dim", "preset")}
    given = timestep.PRESETS[preset].takes
    extra = "".join(
        f"&{name}={str(document[name]).lower()}" for name in given if name != "timestep_dtype"
    )
    same = http.get(f"{TABLE}?max_len=4&dim={get['dim']}&preset={preset}{extra}")
    assert same.json()["data"] == document["data"]


@pytest.mark.parametrize(
    ("config", "name"),
    [
        pytest.param({"_class_name": "StableCascadeUNet"}, "_class_name", id="unknown-class"),
        pytest.param({"in_channels": 4}, "_class_name", id="no-class"),
        pytest.param(
            {"_class_name": "UNet2DModel", "time_embedding_type": "fourier"},
            "time_embedding_type",
            id="fourier-weights",
        ),
        pytest.param(
            {"_class_name": "UNet2DModel", "freq_shift": "1"}, "freq_shift", id="a-string"
        ),
    ],
)
def test_a_config_it_cannot_place_is_a_422_naming_the_field(
    http: httpx.Client, config: dict[str, Any], name: str
) -> None:
    problem = assert_problem(http.post(f"{FROM_CONFIG}?max_len=4", json=config), 422)
    assert name in {error["name"] for error in problem["errors"]}, problem


def test_from_config_lists_the_classes_it_reads(http: httpx.Client) -> None:
    problem = assert_problem(http.post(f"{FROM_CONFIG}?max_len=4", json={"_class_name": "X"}), 422)
    assert "FluxTransformer2DModel" in problem["detail"]
    assert "UNet2DConditionModel" in problem["detail"]


def test_the_audit_shows_the_bfloat16_hop(http: httpx.Client) -> None:
    answer = http.get("/v1/audit/timestep?max_len=1000&dim=320&preset=unet")
    assert answer.status_code == 200, answer.text
    found = {path["name"]: path for path in answer.json()["paths"]}
    assert found["bf16-timesteps"]["first_over"]["1e-3"] == 257
    assert found["library"]["first_over"]["1e-3"] is None
    assert found["device"]["first_over"]["1e-3"] is None


def test_a_width_with_no_entry_has_no_audit(http: httpx.Client) -> None:
    assert_problem(http.get("/v1/audit/timestep?max_len=10&dim=1"), 422, "dim")


def test_flux_s_sampler_and_diffusers_pipeline_compared_in_one_request(
    http: httpx.Client,
) -> None:
    """Rows are the scheduler's timesteps in both: the sampler's σ = t / 1000 rounds once
    less than the pipeline, and they part from 257 on (256 holds every integer)."""
    a, b = (
        {"family": "timestep", "parameters": {"dim": 256, "max_len": 1001, "preset": preset}}
        for preset in ("flux", "flux-diffusers")
    )
    answer = http.post("/v1/compare", json={"a": a, "b": b, "start": 0, "stop": 1001})
    assert answer.status_code == 200, answer.text
    assert answer.json()["first_over"]["1e-3"] == 257


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("timestep_dtype=float16&time_factor=1000", "time_factor", id="float16"),
        pytest.param("scale=1e9&rounding=exact", "rounding", id="exact-angles"),
    ],
)
def test_a_table_is_refused_by_its_last_timestep_not_by_its_page(
    http: httpx.Client, query: str, name: str
) -> None:
    """The cache computes a page of rows past the table's last: a timestep the key cannot
    take there is no reason to refuse the table (65 × 1000 fits float16, 66 × 1000 does not;
    2 × 1e9 radians are within exact's 2^31, 3 × 1e9 are not)."""
    short = "max_len=3" if "exact" in query else "max_len=66"
    long = "max_len=4" if "exact" in query else "max_len=67"
    served = http.get(f"{TABLE}?dim=9&{query}&{short}&format=npy")
    assert np.isfinite(npy(served)).all()
    assert_problem(http.get(f"{TABLE}?dim=9&{query}&{long}"), 422, name)
