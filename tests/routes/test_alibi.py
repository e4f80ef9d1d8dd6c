"""``GET /v1/biases/alibi/slopes`` and ``GET /v1/biases/alibi`` over HTTP, in process:
documents, formats, masked entries, slices, validators, limits and problems."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from service.encodings import alibi
from service.encodings.alibi import Bias
from service.encodings.registry import DTYPES
from tests.support import (
    NPY,
    RAW,
    assert_problem,
    client_of,
    load,
    openapi_document,
    table_url,
)

BIAS = "/v1/biases/alibi"
SLOPES = BIAS + "/slopes"
IMMUTABLE = "public, max-age=31536000, immutable"
MASKED = (
    "key positions after the query's (j > i + key_len - max_len): null in JSON, -inf in npy and raw"
)


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.fixture(scope="module")
def small(small_in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(small_in_process_app) as client:
        yield client


def test_slopes_document(http: httpx.Client) -> None:
    response = http.get(table_url(SLOPES, num_heads=12))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "num_heads": 12,
        "rounding": "library",
        "dtype": "float32",
        "shape": [12],
        "data": [
            0.5,
            0.25,
            0.125,
            0.0625,
            0.03125,
            0.015625,
            0.0078125,
            0.00390625,
            0.70710677,
            0.35355338,
            0.17677668,
            0.08838834,
        ],
    }
    exact = http.get(table_url(SLOPES, num_heads=12, rounding="exact")).json()
    assert exact["data"][10:] == [0.17677669, 0.088388346]  # 2^-2.5, 2^-3.5 rounded once


def test_bias_document(http: httpx.Client) -> None:
    response = http.get(table_url(BIAS, num_heads=2, max_len=3))
    assert response.status_code == 200
    assert response.json() == {
        "num_heads": 2,
        "max_len": 3,
        "key_len": 3,
        "form": "causal",
        "rounding": "library",
        "dtype": "float32",
        "start": 0,
        "stop": 3,
        "shape": [2, 3, 3],
        "masked": MASKED,
        "data": [
            [[0.0, None, None], [-0.0625, 0.0, None], [-0.125, -0.0625, 0.0]],
            [[0.0, None, None], [-0.00390625, 0.0, None], [-0.0078125, -0.00390625, 0.0]],
        ],
    }


def test_symmetric_masks_nothing(http: httpx.Client) -> None:
    document = http.get(table_url(BIAS, num_heads=1, max_len=2, form="symmetric")).json()
    assert document["masked"] == "nothing"
    assert document["data"] == [[[0.0, -0.00390625], [-0.00390625, 0.0]]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", alibi.FORMS)
def test_masked_entries_are_null_in_json_and_minus_inf_in_binary(
    http: httpx.Client, dtype: str, form: str
) -> None:
    url = table_url(BIAS, num_heads=3, max_len=4, key_len=6, form=form, dtype=dtype)
    document = orjson.loads(http.get(url).content)  # valid JSON: no bare -inf
    binary = load(http.get(url + "&format=npy"))
    assert binary.dtype == np.dtype(dtype)
    assert binary.shape == (3, 4, 6) == tuple(document["shape"])
    nulls = np.array([[[v is None for v in row] for row in head] for head in document["data"]])
    assert np.array_equal(nulls, np.isneginf(binary))
    assert nulls.any() == (form != "symmetric")
    values = np.array(
        [[[np.nan if v is None else v for v in row] for row in head] for head in document["data"]],
        dtype=dtype,
    )
    assert np.array_equal(values[~nulls], binary[~nulls])


@pytest.mark.parametrize(
    ("how", "media_type"),
    [
        pytest.param({"params": "&format=json"}, "application/json", id="format=json"),
        pytest.param({"params": "&format=npy"}, NPY, id="format=npy"),
        pytest.param({"params": "&format=raw"}, RAW, id="format=raw"),
        pytest.param({"accept": NPY}, NPY, id="accept-npy"),
        pytest.param({"accept": RAW}, RAW, id="accept-raw"),
        pytest.param({"accept": "*/*"}, "application/json", id="accept-any"),
    ],
)
@pytest.mark.parametrize("path", [SLOPES, BIAS])
def test_formats(http: httpx.Client, how: dict[str, str], media_type: str, path: str) -> None:
    params: dict[str, Any] = {"num_heads": 5, "rounding": "exact", "dtype": "float64"}
    if path == BIAS:
        params.update(max_len=7, start=2, stop=5, key_len=9)
    headers = {"accept": how["accept"]} if "accept" in how else {}
    response = http.get(table_url(path, **params) + how.get("params", ""), headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    array = np.array(load(response))
    array[np.isnan(array)] = -np.inf  # JSON's nulls, which load reads as NaN
    if path == SLOPES:
        assert np.array_equal(array, alibi.slopes(5, "exact", "float64"))
    else:
        expected = alibi.block(Bias(5, 7, 9, "causal", 2, 5, "exact", "float64"))
        assert np.array_equal(array, expected)
    if media_type == RAW:
        assert response.headers["x-shape"] == ("5" if path == SLOPES else "5,3,9")
        assert response.headers["x-dtype"] == "float64"


@pytest.mark.parametrize("form", alibi.FORMS)
def test_a_slice_is_the_same_block_of_the_whole(http: httpx.Client, form: str) -> None:
    whole = load(
        http.get(table_url(BIAS, num_heads=6, max_len=50, key_len=60, form=form, format="npy"))
    )
    part = load(
        http.get(
            table_url(
                BIAS,
                num_heads=6,
                max_len=50,
                key_len=60,
                form=form,
                start=20,
                stop=31,
                format="raw",
            )
        )
    )
    assert np.array_equal(part, whole[:, 20:31])


def test_caching_headers_and_304(http: httpx.Client) -> None:
    for path, params in [(SLOPES, {"num_heads": 8}), (BIAS, {"num_heads": 8, "max_len": 4})]:
        response = http.get(table_url(path, **params))
        etag = response.headers["etag"]
        assert etag[0] == etag[-1] == '"'
        assert response.headers["cache-control"] == IMMUTABLE
        assert response.headers["vary"] == "Accept, Accept-Encoding"
        again = http.get(table_url(path, **params), headers={"if-none-match": etag})
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers["etag"] == etag
        assert again.headers["cache-control"] == IMMUTABLE
        assert "vary" not in http.get(table_url(path, format="npy", **params)).headers


def test_every_parameter_changes_the_tag(http: httpx.Client) -> None:
    urls = [
        table_url(SLOPES, num_heads=8),
        table_url(SLOPES, num_heads=9),
        table_url(SLOPES, num_heads=8, rounding="exact"),
        table_url(SLOPES, num_heads=8, dtype="float64"),
        table_url(SLOPES, num_heads=8, format="npy"),
        table_url(BIAS, num_heads=8, max_len=8),
        table_url(BIAS, num_heads=8, max_len=8, key_len=9),
        table_url(BIAS, num_heads=8, max_len=8, form="bloom"),
        table_url(BIAS, num_heads=8, max_len=8, form="symmetric"),
        table_url(BIAS, num_heads=8, max_len=8, start=1),
        table_url(BIAS, num_heads=8, max_len=8, stop=7),
        table_url(BIAS, num_heads=8, max_len=8, rounding="exact"),
        table_url(BIAS, num_heads=8, max_len=8, dtype="float16"),
        table_url(BIAS, num_heads=8, max_len=8, format="raw"),
        table_url(BIAS, num_heads=7, max_len=8),
        table_url(BIAS, num_heads=8, max_len=9, stop=8, key_len=9),
    ]
    assert len({http.get(url).headers["etag"] for url in urls}) == len(urls)


def test_large_json_is_gzipped_where_welcome(http: httpx.Client) -> None:
    url = table_url(BIAS, num_heads=4, max_len=32)
    plain = http.get(url, headers={"accept-encoding": "identity"})
    packed = http.get(url, headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.headers["etag"] != plain.headers["etag"]
    assert packed.json() == plain.json()  # httpx has decompressed it


def test_float16_that_would_overflow_is_refused(http: httpx.Client) -> None:
    url = table_url(
        BIAS, num_heads=8, max_len=300_000, start=299_999, dtype="float16", format="npy"
    )
    document = assert_problem(http.get(url), 422, "float16", "65504")
    assert document["errors"][0]["name"] == "dtype"
    assert http.get(url.replace("float16", "float32")).status_code == 200


@pytest.mark.parametrize(
    ("path", "query", "name"),
    [
        pytest.param(SLOPES, "", "num_heads", id="slopes-missing"),
        pytest.param(SLOPES, "num_heads=0", "num_heads", id="slopes-zero"),
        pytest.param(SLOPES, "num_heads=abc", "num_heads", id="slopes-text"),
        pytest.param(SLOPES, "num_heads=" + "9" * 5000, "num_heads", id="slopes-5000-digits"),
        pytest.param(SLOPES, "num_heads=8&rounding=fast", "rounding", id="slopes-rounding"),
        pytest.param(SLOPES, "num_heads=8&dtype=bfloat16", "dtype", id="slopes-dtype"),
        pytest.param(SLOPES, "num_heads=8&format=npz", "format", id="slopes-format"),
        pytest.param(SLOPES, "num_heads=8&heads=8", "heads", id="slopes-unknown"),
        pytest.param(BIAS, "max_len=4", "num_heads", id="num_heads-missing"),
        pytest.param(BIAS, "num_heads=4", "max_len", id="max_len-missing"),
        pytest.param(BIAS, "num_heads=4&max_len=0", "max_len", id="max_len-zero"),
        pytest.param(BIAS, "num_heads=4&max_len=4&key_len=0", "key_len", id="key_len-zero"),
        pytest.param(BIAS, "num_heads=4&max_len=4&key_len=3", "key_len", id="key_len-short"),
        pytest.param(
            BIAS, "num_heads=4&max_len=4&key_len=3&form=bloom", "key_len", id="key_len-bloom"
        ),
        pytest.param(BIAS, "num_heads=4&max_len=4&form=alibi", "form", id="form"),
        pytest.param(BIAS, "num_heads=4&max_len=4&start=4", "start", id="start-past-end"),
        pytest.param(BIAS, "num_heads=4&max_len=4&start=-1", "start", id="start-negative"),
        pytest.param(BIAS, "num_heads=4&max_len=4&stop=5", "stop", id="stop-past-end"),
        pytest.param(BIAS, "num_heads=4&max_len=4&start=2&stop=2", "stop", id="stop-empty"),
        pytest.param(BIAS, "num_heads=4&max_len=4&format=xml", "format", id="format"),
        pytest.param(BIAS, "num_heads=4&max_len=4&maxlen=4", "maxlen", id="unknown"),
        pytest.param(BIAS, "num_heads=4&max_len=4&max_len=5", "max_len", id="repeated"),
    ],
)
def test_invalid_parameters_are_named(http: httpx.Client, path: str, query: str, name: str) -> None:
    document = assert_problem(http.get(f"{path}?{query}"), 422, name)
    assert name in [error["name"] for error in document["errors"]]
    assert all(error["in"] == "query" for error in document["errors"])


def test_fewer_keys_than_queries_is_fine_when_symmetric(http: httpx.Client) -> None:
    response = http.get(table_url(BIAS, num_heads=1, max_len=4, key_len=2, form="symmetric"))
    assert response.status_code == 200
    assert response.json()["shape"] == [1, 4, 2]


@pytest.mark.parametrize(
    ("path", "params", "setting", "requested"),
    [
        pytest.param(SLOPES, {"num_heads": 10**9}, "PE_MAX_WIDTH", 10**9, id="slopes-heads"),
        pytest.param(BIAS, {"num_heads": 10**9, "max_len": 2}, "PE_MAX_WIDTH", 10**9, id="heads"),
        pytest.param(
            BIAS, {"num_heads": 2, "max_len": 10**40}, "PE_MAX_POSITION", 10**40 - 1, id="max_len"
        ),
        pytest.param(
            BIAS,
            {"num_heads": 2, "max_len": 2, "key_len": 2**31 + 1, "format": "npy"},
            "PE_MAX_POSITION",
            2**31,
            id="key_len-position",
        ),
        pytest.param(
            BIAS,
            {"num_heads": 64, "max_len": 2**20, "start": 2**20 - 2, "format": "npy"},
            "PE_MAX_ELEMENTS",
            64 * 2 * 2**20,
            id="elements",
        ),
        pytest.param(
            BIAS,
            {"num_heads": 16, "max_len": 512},
            "PE_MAX_JSON_ELEMENTS",
            16 * 512 * 512,
            id="json",
        ),
    ],
)
def test_limits_are_checked_before_anything_is_computed(
    http: httpx.Client, path: str, params: dict[str, Any], setting: str, requested: int
) -> None:
    document = assert_problem(http.get(table_url(path, **params)), 422, setting)
    assert (document["setting"], document["requested"]) == (setting, requested)


def test_small_limits(small: httpx.Client) -> None:
    assert_problem(
        small.get(table_url(BIAS, num_heads=10, max_len=10, key_len=1001, format="npy")),
        422,
        "PE_MAX_ELEMENTS",
    )
    document = assert_problem(
        small.get(table_url(BIAS, num_heads=10, max_len=11)), 422, "PE_MAX_JSON_ELEMENTS"
    )
    assert "format=npy" in document["detail"]
    assert small.get(table_url(BIAS, num_heads=10, max_len=11, format="npy")).status_code == 200
    assert small.get(table_url(BIAS, num_heads=10, max_len=10)).status_code == 200


def test_a_large_block_is_computed_off_the_loop(http: httpx.Client) -> None:
    params = {
        "num_heads": 16,
        "max_len": 1024,
        "rounding": "exact",
        "form": "bloom",
        "format": "npy",
    }
    block = load(http.get(table_url(BIAS, **params)))
    assert block.shape == (16, 1024, 1024)
    assert np.array_equal(
        block[:, 1000:1003], alibi.block(Bias(16, 1024, 1024, "bloom", 1000, 1003, "exact"))
    )


def test_unacceptable_is_406(http: httpx.Client) -> None:
    response = http.get(table_url(SLOPES, num_heads=4), headers={"accept": "text/html"})
    assert_problem(response, 406, "Accept")


def test_the_operations_are_documented() -> None:
    spec = openapi_document()
    slopes, bias = spec["paths"][SLOPES]["get"], spec["paths"][BIAS]["get"]
    assert (slopes["operationId"], bias["operationId"]) == ("getAlibiSlopes", "getAlibiBias")
    for op in (slopes, bias):
        assert op["summary"]
        media = {"application/json", NPY, RAW, "application/x-safetensors"}
        assert set(op["responses"]["200"]["content"]) == media
        assert {"ETag", "X-Shape", "X-Dtype"} <= set(op["responses"]["200"]["headers"])
        assert "application/problem+json" in op["responses"]["422"]["content"]
    names = [p["name"] for p in bias["parameters"]]
    assert names == [
        "num_heads",
        "max_len",
        "key_len",
        "form",
        "start",
        "stop",
        "dtype",
        "rounding",
        "format",
    ]
