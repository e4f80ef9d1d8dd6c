"""``GET /v1/positions/vision-interpolation``: Qwen3-VL's bilinear indices and weights as
JSON and ``.npz``, immutable; refusals naming the parameter; limits counted before anything
is allocated. ``tests/conformance/test_vision_interpolation.py`` compares the answers with
transformers' function."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Final

import httpx
import numpy as np
import pytest

from service.encodings.vision_interpolation import indices_and_weights
from tests.support import assert_problem, client_of

PATH: Final = "/v1/positions/vision-interpolation"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.fixture(scope="module")
def small(small_in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(small_in_process_app) as client:
        yield client


def get(http: httpx.Client, query: str, **headers: str) -> httpx.Response:
    return http.get(f"{PATH}?{query}", headers=headers)


def test_json_is_the_parameters_and_both_arrays(http: httpx.Client) -> None:
    answer = get(http, "grid=2,4,6&num_grid_per_side=32")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    document = answer.json()
    assert {name: document[name] for name in list(document)[:4]} == {
        "grid": [2, 4, 6],
        "num_grid_per_side": 32,
        "spatial_merge_size": 2,
        "shape": [48, 4],
    }
    indices, weights = indices_and_weights((2, 4, 6), 32, 2)
    assert document["indices"] == indices.tolist()
    # the shortest texts that read back as the same float32 values
    np.testing.assert_array_equal(np.array(document["weights"], np.float32), weights)


def test_the_defaults_are_qwen3_vls_and_h_w_is_one_frame(http: httpx.Client) -> None:
    document = get(http, "grid=4,4").json()
    assert (document["grid"], document["num_grid_per_side"]) == ([1, 4, 4], 48)
    assert document["spatial_merge_size"] == 2
    assert document["indices"][1] == [15, 16, 63, 64]
    assert document["weights"][1] == [0.33333302, 0.666667, 0.0, 0.0]


def test_npz_holds_indices_and_weights(http: httpx.Client) -> None:
    for answer in (
        get(http, "grid=3,6,8&spatial_merge_size=1&format=npz"),
        get(http, "grid=3,6,8&spatial_merge_size=1", accept="application/x-npz"),
    ):
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/x-npz"
        with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
            assert sorted(archive.files) == ["indices", "weights"]
            indices, weights = indices_and_weights((3, 6, 8), 48, 1)
            assert archive["indices"].dtype == np.int64
            assert archive["weights"].dtype == np.float32
            np.testing.assert_array_equal(archive["indices"], indices)
            np.testing.assert_array_equal(archive["weights"], weights)


def test_the_answer_is_immutable_and_revalidated(http: httpx.Client) -> None:
    first = get(http, "grid=1,4,4&format=npz")
    assert first.headers["cache-control"] == "public, max-age=31536000, immutable"
    again = get(http, "grid=1,4,4&format=npz", **{"if-none-match": first.headers["etag"]})
    assert again.status_code == 304
    other = get(http, "grid=1,4,4&format=npz&num_grid_per_side=32")
    assert other.headers["etag"] != first.headers["etag"]


def test_an_unoffered_format_is_not_acceptable(http: httpx.Client) -> None:
    assert_problem(get(http, "grid=1,4,4", accept="application/x-npy"), 406)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        pytest.param("grid=1,4,5", ["grid", "spatial_merge_size"], id="not-a-multiple"),
        pytest.param("grid=6,6&spatial_merge_size=4", ["grid", "spatial_merge_size"], id="merge"),
        pytest.param("grid=0,4,4", ["grid"], id="no-frame"),
        pytest.param("grid=1,-4,4", ["grid"], id="negative"),
        pytest.param("grid=1,4,4,4", ["grid"], id="four-sizes"),
        pytest.param("grid=4", ["grid"], id="one-size"),
        pytest.param("grid=1,four,4", ["grid"], id="not-integers"),
        pytest.param("num_grid_per_side=48", ["grid"], id="no-grid"),
        pytest.param("grid=1,4,4&num_grid_per_side=0", ["num_grid_per_side"], id="no-table"),
        pytest.param("grid=1,4,4&spatial_merge_size=0", ["spatial_merge_size"], id="no-merge"),
        pytest.param("grid=1,4,4&spatial_merge_size=2.5", ["spatial_merge_size"], id="real"),
        pytest.param("grid=1,4,4&format=npy", ["format"], id="npy"),
        pytest.param("grid=1,4,4&mode=bicubic", ["mode"], id="unknown"),
        pytest.param("grid=1,4,4&grid=1,8,8", ["grid"], id="repeated"),
    ],
)
def test_refusals_name_the_parameter(http: httpx.Client, query: str, names: list[str]) -> None:
    problem = assert_problem(get(http, query), 422)
    assert [error["name"] for error in problem["errors"]] == names


def test_a_grid_past_the_limits_is_refused_before_anything_is_allocated(
    http: httpx.Client,
) -> None:
    """2^40 patches would be 52 TB of indices and weights: refused by counting them."""
    problem = assert_problem(get(http, "grid=1,1048576,1048576&format=npz"), 422, "PE_MAX_ELEMENTS")
    assert problem["requested"] == 12 << 40
    assert problem["setting"] == "PE_MAX_ELEMENTS"


def test_small_limits(small: httpx.Client) -> None:
    """PE_MAX_ELEMENTS 100,000 counts 12 a patch (4 int64 twice, 4 float32);
    PE_MAX_JSON_ELEMENTS 1,000 the JSON's 8 numbers a patch."""
    assert get(small, "grid=1,90,92&format=npz").status_code == 200
    problem = assert_problem(get(small, "grid=1,92,92&format=npz"), 422, "PE_MAX_ELEMENTS")
    assert problem["requested"] == 92 * 92 * 12
    assert get(small, "grid=1,10,12").status_code == 200
    assert_problem(get(small, "grid=1,12,12"), 422, "PE_MAX_JSON_ELEMENTS", "format=npz")
    assert get(small, "grid=1,12,12&format=npz").status_code == 200
