"""Presets over HTTP: ``GET /v1/presets``, each preset's rules (arrangement, zero rows and
columns, start index, scale, odd widths), both roundings as distinct tables, the 422s that
name a contradicting parameter, apply's defaults, and pictures. Each preset's numbers are
compared with the real libraries in ``tests/conformance``."""

from __future__ import annotations

import math
import typing

import httpx
import numpy as np
import pytest

from service.encodings import registry, timestep
from service.encodings.catalogue import PRESETS
from service.schemas.presets import PresetName
from tests.support import APPLY, HEATMAP, TABLE, assert_problem, load, npy_bytes

NPY = {"content-type": "application/x-npy"}
FLOAT64 = ("tf-tutorial", "marian")  # the libraries that compute in float64


def table(api: httpx.Client, query: str) -> np.ndarray[typing.Any, typing.Any]:
    response = api.get(f"{TABLE}?{query}&format=npy")
    assert response.status_code == 200, response.text
    return load(response)


def test_every_preset_is_listed_with_its_source(api: httpx.Client) -> None:
    response = api.get("/v1/presets")
    assert response.status_code == 200
    listed = {entry["name"]: entry for entry in response.json()["presets"]}
    assert list(listed) == list(PRESETS) == list(typing.get_args(PresetName))
    for name, entry in listed.items():
        assert entry["follows"], name
        assert all(source["repository"] and source["function"] for source in entry["follows"])
        names = [param["name"] for param in entry["parameters"]]
        assert names == [param.name for param in PRESETS[name].params]
    assert listed["fairseq"]["first_row"] == "padding_idx + 1"
    assert listed["whisper"]["odd_d_model"].startswith("refused")
    paths = api.get("/openapi.json").json()["paths"]
    assert "/v1/presets" in paths


def test_the_default_preset_is_the_paper_unchanged(api: httpx.Client) -> None:
    plain = api.get(f"{TABLE}?max_len=50&d_model=7&format=json")
    named = api.get(f"{TABLE}?max_len=50&d_model=7&format=json&preset=vaswani")
    exact = api.get(f"{TABLE}?max_len=50&d_model=7&format=json&preset=vaswani&rounding=exact")
    assert plain.content == named.content == exact.content
    assert "preset" not in plain.json()


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_roundings_are_distinct_tables_close_to_each_other(
    api: httpx.Client, name: str
) -> None:
    query = f"max_len=100064&start=100000&d_model=64&preset={name}"
    library = api.get(f"{TABLE}?{query}&format=npy")
    exact = api.get(f"{TABLE}?{query}&format=npy&rounding=exact")
    difference = np.abs(load(library).astype(np.float64) - load(exact)).max()
    assert difference < 2e-2  # the libraries' float32 arithmetic at position 100,000
    if PRESETS[name].library is None:  # computed in float64 and rounded once: exact
        assert library.content == exact.content
    else:
        assert library.headers["etag"] != exact.headers["etag"]
    if name in FLOAT64:  # rounded once at the end: at most a float32 ulp from exact
        assert difference <= 2.0**-24
    elif name != "vaswani":
        assert difference > 1e-4


def test_fairseq_zeroes_its_padding_row_and_its_odd_column(api: httpx.Client) -> None:
    rows = table(api, "max_len=6&d_model=7&preset=fairseq")
    assert np.all(rows[1] == 0)  # padding_idx 1
    assert np.all(rows[:, 6] == 0)  # the column after the three pairs
    assert np.array_equal(rows[0], [0, 0, 0, 1, 1, 1, 0])  # row 0 is position 0, not zeroed
    w = np.exp(-np.arange(3) * math.log(10000) / 2)
    np.testing.assert_allclose(rows[3, :3], np.sin(3 * w), atol=1e-6)
    moved = table(api, "max_len=6&d_model=7&preset=fairseq&padding_idx=4")
    assert np.all(moved[4] == 0)
    assert not np.all(moved[1] == 0)


def test_musicgen_and_mlx_cos_first_put_the_cosines_first(api: httpx.Client) -> None:
    fairseq = table(api, "max_len=9&d_model=8&preset=fairseq&padding_idx=99")
    musicgen = table(api, "max_len=9&d_model=8&preset=musicgen")
    assert np.array_equal(musicgen, np.concatenate([fairseq[:, 4:], fairseq[:, :4]], axis=1))
    sines = table(api, "max_len=9&d_model=8&preset=mlx")
    cosines = table(api, "max_len=9&d_model=8&preset=mlx&cos_first=true")
    assert np.array_equal(cosines, np.concatenate([sines[:, 4:], sines[:, :4]], axis=1))
    assert np.allclose(sines[0, 4:], math.sqrt(2 / 8))  # cos 0, times mlx's default scale


@pytest.mark.parametrize("name", ["tensor2tensor", "keras"])
def test_start_index_shifts_the_positions(api: httpx.Client, name: str) -> None:
    shifted = table(api, f"max_len=10&d_model=16&preset={name}&start_index=5")
    plain = table(api, f"max_len=15&d_model=16&preset={name}")
    assert np.array_equal(shifted, plain[5:])


def test_marian_is_the_split_layout_with_one_more_sine(api: httpx.Client) -> None:
    marian = table(api, "max_len=20&d_model=7&preset=marian&rounding=exact")
    split = table(api, "max_len=20&d_model=7&layout=split")
    assert np.array_equal(marian, split)


@pytest.mark.parametrize(
    ("query", "name", "words"),
    [
        pytest.param(
            "preset=fairseq&layout=split", "layout", "fixed by preset fairseq", id="layout"
        ),
        pytest.param("preset=tensor2tensor&base=100", "base", "does not apply", id="base"),
        pytest.param(
            "padding_idx=3", "padding_idx", "does not apply to preset vaswani", id="vaswani"
        ),
        pytest.param("preset=keras&min_freq=0.5", "min_freq", "keras", id="mlx-param"),
        pytest.param("preset=whisper&d_model=7", "d_model", "must be even", id="odd-whisper"),
        pytest.param("preset=mlx&d_model=5", "d_model", "must be even", id="odd-mlx"),
        pytest.param("preset=fairseq&d_model=3", "d_model", "at least 4", id="narrow-fairseq"),
        pytest.param("preset=nope", "preset", "", id="unknown"),
        pytest.param("preset=fairseq&rounding=float32", "rounding", "", id="rounding"),
        pytest.param(
            "preset=tensor2tensor&start_index=2147483647",
            "start_index",
            "PE_MAX_POSITION",
            id="start-index-past-the-ceiling",
        ),
    ],
)
def test_contradicting_parameters_are_named(
    api: httpx.Client, query: str, name: str, words: str
) -> None:
    base = "max_len=4" + ("" if "d_model=" in query else "&d_model=8")
    problem = assert_problem(api.get(f"{TABLE}?{base}&{query}"), 422, words)
    assert (
        name in {error["name"] for error in problem.get("errors", [])} or name in problem["detail"]
    )


def test_apply_uses_the_presets_rows_and_scale(api: httpx.Client) -> None:
    x = np.zeros((3, 8), np.float32)
    ones = np.ones((3, 8), np.float32)
    fairseq = table(api, "max_len=5&d_model=8&preset=fairseq")
    answer = api.post(f"{APPLY}?preset=fairseq&format=npy", content=npy_bytes(x), headers=NPY)
    assert np.array_equal(load(answer), fairseq[2:5])  # the first token is padding_idx + 1
    scaled = api.post(f"{APPLY}?preset=fairseq&format=npy", content=npy_bytes(ones), headers=NPY)
    np.testing.assert_allclose(load(scaled), fairseq[2:5] + math.sqrt(8), rtol=1e-6)
    whisper = table(api, "max_len=3&d_model=8&preset=whisper")
    plain = api.post(f"{APPLY}?preset=whisper&format=npy", content=npy_bytes(ones), headers=NPY)
    np.testing.assert_allclose(load(plain), whisper + 1, rtol=1e-6)  # whisper scales by 1
    given = api.post(
        f"{APPLY}?preset=fairseq&offset=0&scale=2&format=npy", content=npy_bytes(ones), headers=NPY
    )
    np.testing.assert_allclose(load(given), fairseq[0:3] + 2, rtol=1e-6)


def test_apply_refuses_a_width_the_preset_refuses(api: httpx.Client) -> None:
    body = npy_bytes(np.zeros((2, 5), np.float32))
    assert_problem(api.post(f"{APPLY}?preset=whisper", content=body, headers=NPY), 422, "even")


def test_the_heatmap_draws_a_presets_table(api: httpx.Client) -> None:
    paper = api.get(f"{HEATMAP}?max_len=64&d_model=32")
    fairseq = api.get(f"{HEATMAP}?max_len=64&d_model=32&preset=fairseq")
    assert paper.status_code == fairseq.status_code == 200
    assert paper.content != fairseq.content
    assert paper.headers["etag"] != fairseq.headers["etag"]
    assert_problem(api.get(f"{HEATMAP}?max_len=64&d_model=32&preset=fairseq&layout=split"), 422)


def test_the_other_families_presets_are_listed_by_family(api: httpx.Client) -> None:
    """Every family that has presets is listed under its name, each preset with the code it
    follows at a version, what it fixes and what a client may still give."""
    families = api.get("/v1/presets").json()["families"]
    assert set(families) == set(registry.listed())
    listed = {preset["name"]: preset for preset in families["timestep"]}
    assert list(listed) == list(timestep.PRESETS)
    for name, preset in listed.items():
        assert preset["follows"], name
        assert all(source["version"] for source in preset["follows"]), name
    assert listed["flux"]["fixes"]["timestep_dtype"] == "bfloat16"
    assert listed["wan"]["library_rounding"].startswith("float64")
    assert listed["diffusers"]["takes"] == list(timestep.PARAMETERS)
