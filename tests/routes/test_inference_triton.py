"""The Open Inference Protocol as its own client speaks it: ``tritonclient.http`` against a
real ``python -m service``, with tensors in JSON and in the binary data extension, each
answer compared with the v1 endpoint the model mirrors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.support import (
    APPLY,
    DATATYPES,
    ROTARY_APPLY,
    TABLE,
    WAIT,
    load,
    npy_bytes,
    npz_bytes,
    sample,
)


@pytest.fixture(scope="module")
def server(live_url: str) -> Iterator[triton.InferenceServerClient]:
    client = triton.InferenceServerClient(live_url.removeprefix("http://"))
    yield client
    client.close()


# one for the module: each client builds a TLS context (some 50 ms), unused over HTTP
@pytest.fixture(scope="module")
def http(live_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_url, timeout=WAIT) as client:
        yield client


def tensor(name: str, array: np.ndarray[Any, Any], datatype: str, binary: bool) -> Any:
    given = triton.InferInput(name, list(array.shape), datatype)
    given.set_data_from_numpy(array, binary_data=binary)
    return given


def test_health_and_server_metadata(server: triton.InferenceServerClient) -> None:
    assert server.is_server_live()
    assert server.is_server_ready()
    assert server.is_model_ready("sinusoidal")
    assert server.is_model_ready("sinusoidal-apply", "1")
    assert "binary_tensor_data" in server.get_server_metadata()["extensions"]


def test_model_metadata_names_the_contract(server: triton.InferenceServerClient) -> None:
    table = server.get_model_metadata("sinusoidal")
    assert table["inputs"][0] | {"parameters": None} == {
        "name": "positions",
        "datatype": "INT64",
        "shape": [-1],
        "parameters": None,
    }
    assert table["inputs"][0]["parameters"]["datatypes"] == ["INT64", "INT32"]
    assert table["outputs"][0]["name"] == "encodings"
    assert table["outputs"][0]["shape"] == [-1, -1]
    for name in ("d_model", "base", "preset", "rounding", "dtype"):
        assert name in table["parameters"]["request"]
    applied = server.get_model_metadata("sinusoidal-apply")
    assert [spec["name"] for spec in applied["inputs"]] == ["embeddings", "position_ids"]
    assert applied["outputs"][0]["name"] == "embeddings"
    for name in ("scale", "offset", "base", "preset"):
        assert name in applied["parameters"]["request"]


@pytest.mark.parametrize("binary_in", sample([True, False], 2))
@pytest.mark.parametrize("binary_out", [True, False])
@pytest.mark.parametrize(("datatype", "dtype"), [("INT64", np.int64), ("INT32", np.int32)])
def test_sinusoidal_rows_at_positions_equal_the_table(
    server: triton.InferenceServerClient,
    http: httpx.Client,
    binary_in: bool,
    binary_out: bool,
    datatype: str,
    dtype: type[np.integer[Any]],
) -> None:
    positions = np.array([7, 0, 4095, 7, 300], dtype=dtype)
    result = server.infer(
        "sinusoidal",
        [tensor("positions", positions, datatype, binary_in)],
        outputs=[triton.InferRequestedOutput("encodings", binary_data=binary_out)],
        parameters={"d_model": 64, "base": 500.0},
    )
    rows = result.as_numpy("encodings")
    table = load(http.get(TABLE, params={"max_len": 4096, "d_model": 64, "base": 500.0}))
    assert rows.dtype == np.float32
    np.testing.assert_array_equal(rows, table[positions])


def test_sinusoidal_preset_rounding_and_dtype(
    server: triton.InferenceServerClient, http: httpx.Client
) -> None:
    positions = np.arange(3, 9, dtype=np.int64)
    params: dict[str, Any] = {
        "d_model": 32,
        "preset": "tensor2tensor",
        "rounding": "exact",
        "dtype": "float64",
    }
    result = server.infer(
        "sinusoidal", [tensor("positions", positions, "INT64", True)], parameters=params
    )
    rows = result.as_numpy("encodings")
    assert result.get_output("encodings")["datatype"] == "FP64"
    table = load(http.get(TABLE, params={"max_len": 9, **params}))
    np.testing.assert_array_equal(rows, table[3:9])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("binary", [True, False])
def test_sinusoidal_apply_equals_the_rest_apply(
    server: triton.InferenceServerClient, http: httpx.Client, dtype: Any, binary: bool
) -> None:
    x = np.random.default_rng(1).standard_normal((2, 16, 64)).astype(dtype)
    ids = np.tile(np.arange(100, 116, dtype=np.int64)[::-1], (2, 1))
    result = server.infer(
        "sinusoidal-apply",
        [
            tensor("embeddings", x, DATATYPES[dtype], binary),
            tensor("position_ids", ids, "INT64", binary),
        ],
        outputs=[triton.InferRequestedOutput("embeddings", binary_data=binary)],
        parameters={"scale": 2.0, "preset": "fairseq"},
    )
    y = result.as_numpy("embeddings")
    expected = load(
        http.post(
            APPLY,
            params={"scale": 2.0, "preset": "fairseq"},
            content=npz_bytes(embeddings=x, position_ids=ids),
            headers={"content-type": "application/x-npz", "accept": "application/x-npy"},
        )
    )
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, expected)


def test_sinusoidal_apply_with_an_offset(
    server: triton.InferenceServerClient, http: httpx.Client
) -> None:
    x = np.ones((5, 8), np.float32)
    result = server.infer(
        "sinusoidal-apply",
        [tensor("embeddings", x, "FP32", True)],
        parameters={"offset": 10},
    )
    expected = load(
        http.post(
            APPLY,
            params={"offset": 10},
            content=npy_bytes(x),
            headers={"content-type": "application/x-npy"},
        )
    )
    np.testing.assert_array_equal(result.as_numpy("embeddings"), expected)


def test_rotary_apply_plugs_in_the_same_way(
    server: triton.InferenceServerClient, http: httpx.Client
) -> None:
    x = np.random.default_rng(2).standard_normal((1, 4, 32, 64)).astype(np.float32)
    params: dict[str, Any] = {
        "convention": "interleaved",
        "scaling": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 2048,
        "offset": 5,
    }
    result = server.infer(
        "rotary-apply", [tensor("embeddings", x, "FP32", True)], parameters=params
    )
    expected = load(
        http.post(
            ROTARY_APPLY,
            params=params,
            content=npy_bytes(x),
            headers={"content-type": "application/x-npy"},
        )
    )
    np.testing.assert_array_equal(result.as_numpy("embeddings"), expected)


@pytest.mark.parametrize(
    ("call", "status", "words"),
    [
        (lambda s, p: s.infer("nope", [p]), 404, ["nope", "sinusoidal"]),
        (lambda s, p: s.infer("sinusoidal", [p]), 400, ["d_model"]),
        (lambda s, p: s.infer("sinusoidal", [p], parameters={"d_model": 0}), 400, ["d_model"]),
        (
            lambda s, p: s.infer("sinusoidal", [p], parameters={"d_model": 8, "bogus": 1}),
            400,
            ["bogus"],
        ),
        (
            lambda s, p: s.infer("sinusoidal", [p], model_version="2", parameters={"d_model": 8}),
            404,
            ["version"],
        ),
        (lambda s, p: s.infer("sinusoidal-apply", [p]), 400, ["positions", "not an input"]),
        (lambda s, p: s.get_model_metadata("nope"), 404, ["nope"]),
        (
            lambda s, p: s.infer(
                "sinusoidal",
                [p],
                outputs=[triton.InferRequestedOutput("rows")],
                parameters={"d_model": 8},
            ),
            400,
            ["rows", "encodings"],
        ),
    ],
)
def test_errors_reach_the_client_with_status_and_message(
    server: triton.InferenceServerClient, call: Any, status: int, words: list[str]
) -> None:
    positions = tensor("positions", np.arange(4, dtype=np.int64), "INT64", True)
    with pytest.raises(InferenceServerException) as caught:
        call(server, positions)
    assert caught.value.status() == str(status)
    for word in words:
        assert word in caught.value.message()
