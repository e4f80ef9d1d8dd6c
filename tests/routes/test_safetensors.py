"""safetensors over HTTP, in process and against a real server: every table (sinusoidal,
rotary cos and sin, ALiBi slopes and bias) read by ``safetensors.numpy.load`` equal to its
``.npy`` answer, parameters in ``__metadata__``, ETags, 304 and replay; apply bodies and
answers; hostile bodies refused with the right status."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import numpy as np
import pytest
import safetensors.numpy
from numpy.typing import NDArray

from service.app import create_app
from service.settings import Settings
from tests.support import (
    APPLY,
    NPY,
    NPZ,
    TABLE,
    assert_problem,
    batch,
    cache_stats,
    in_process,
    load,
    npy_bytes,
    npz_bytes,
    openapi_document,
    table_url,
)

SAFETENSORS = "application/x-safetensors"
AS_SAFETENSORS = {"content-type": SAFETENSORS}
ROTARY = "/v1/encodings/rotary"
ALIBI = "/v1/biases/alibi"


def tensors(response: httpx.Response) -> dict[str, NDArray[Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == SAFETENSORS
    return safetensors.numpy.load(response.content)


def metadata(response: httpx.Response) -> dict[str, str]:
    length = int.from_bytes(response.content[:8], "little")
    notes: dict[str, str] = json.loads(response.content[8 : 8 + length])["__metadata__"]
    return notes


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"max_len": 64, "d_model": 32}, id="whole"),
        pytest.param({"max_len": 5000, "d_model": 48, "start": 100, "stop": 4000}, id="rows"),
        pytest.param({"max_len": 9, "d_model": 10, "dim_start": 3, "dim_stop": 7}, id="columns"),
        pytest.param({"max_len": 7, "d_model": 6, "dtype": "float16"}, id="float16"),
        pytest.param(
            {"max_len": 7, "d_model": 5, "dtype": "float64", "preset": "fairseq"}, id="64"
        ),
    ],
)
def test_a_table_equals_its_npy_answer(api: httpx.Client, params: dict[str, Any]) -> None:
    response = api.get(table_url(**params, format="safetensors"))
    loaded = tensors(response)
    assert list(loaded) == ["data"]
    as_npy = load(api.get(table_url(**params, format="npy")))
    assert loaded["data"].dtype == as_npy.dtype
    assert np.array_equal(loaded["data"], as_npy)
    document = api.get(table_url(**params)).json()
    del document["data"]
    notes = metadata(response)
    assert list(notes) == list(document)  # the JSON answer's fields, in its order
    for name, value in document.items():
        assert notes[name] == (
            value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        )


def test_accept_asks_for_safetensors(api: httpx.Client) -> None:
    url = table_url(max_len=4, d_model=4)
    response = api.get(url, headers={"accept": f"{SAFETENSORS}, application/json;q=0.5"})
    assert np.array_equal(tensors(response)["data"], load(api.get(url, headers={"accept": NPY})))
    assert "Accept" in response.headers["vary"]
    explicit = api.get(url + "&format=safetensors", headers={"accept": "application/json"})
    assert explicit.content == response.content
    assert "vary" not in explicit.headers


def test_etag_304_and_replay(api: httpx.Client) -> None:
    url = table_url(max_len=33, d_model=12, preset="tensor2tensor", format="safetensors")
    first = api.get(url)
    tag = first.headers["etag"]
    assert first.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert tag != api.get(url.replace("safetensors", "npy")).headers["etag"]
    assert api.get(url, headers={"if-none-match": tag}).status_code == 304
    hits = cache_stats(api)["response_hits"]
    again = api.get(url)
    assert (again.content, again.headers["etag"]) == (first.content, tag)
    assert cache_stats(api)["response_hits"] > hits


def test_the_same_table_is_the_same_bytes_from_another_app(api: httpx.Client) -> None:
    """The library writes metadata in an order that changes from call to call; the service
    writes it in the fields' order (against the real server: another process)."""
    url = table_url(max_len=3, d_model=4, start_index=1, preset="keras", format="safetensors")
    with in_process(create_app(Settings())) as other:
        assert other.get(url).content == api.get(url).content


@pytest.mark.parametrize("convention", ["half", "interleaved"])
def test_rotary_cos_and_sin(api: httpx.Client, convention: str) -> None:
    params = {"max_len": 40, "head_dim": 16, "convention": convention, "start": 3}
    response = api.get(
        table_url(ROTARY, **params, scaling="linear", factor=2, format="safetensors")
    )
    loaded = tensors(response)
    assert set(loaded) == {"cos", "sin"}
    npz = api.get(table_url(ROTARY, **params, scaling="linear", factor=2, format="npz"))
    with np.load(io.BytesIO(npz.content)) as archive:
        assert np.array_equal(loaded["cos"], archive["cos"])
        assert np.array_equal(loaded["sin"], archive["sin"])
    notes = metadata(response)
    assert (notes["scaling"], notes["factor"], notes["rotary_dim"]) == ("linear", "2.0", "16")
    assert notes["shape"] == "[2,37,16]"


def test_rotary_from_config_in_safetensors(api: httpx.Client) -> None:
    config = {"rope_theta": 500000.0, "head_dim": 8, "max_position_embeddings": 16}
    response = api.post(ROTARY + "/from-config?format=safetensors", json=config)
    loaded = tensors(response)
    plain = api.get(table_url(ROTARY, max_len=16, head_dim=8, base=500000.0, format="npz"))
    with np.load(io.BytesIO(plain.content)) as archive:
        assert np.array_equal(loaded["cos"], archive["cos"])


@pytest.mark.parametrize(
    ("path", "params"),
    [
        pytest.param(ALIBI + "/slopes", {"num_heads": 12}, id="slopes"),
        pytest.param(ALIBI, {"num_heads": 4, "max_len": 6}, id="bias-causal"),
        pytest.param(ALIBI, {"num_heads": 3, "max_len": 5, "form": "symmetric"}, id="symmetric"),
    ],
)
def test_alibi(api: httpx.Client, path: str, params: dict[str, Any]) -> None:
    response = api.get(table_url(path, **params, format="safetensors"))
    loaded = tensors(response)["data"]
    as_npy = load(api.get(table_url(path, **params, format="npy")))
    assert np.array_equal(loaded, as_npy)
    assert metadata(response)["num_heads"] == str(params["num_heads"])
    assert api.get(table_url(path, **params), headers={"accept": SAFETENSORS}).content == (
        response.content
    )


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_apply_with_a_safetensors_body_and_answer(api: httpx.Client, dtype: str) -> None:
    x = batch((2, 5, 8), dtype)
    ids = np.array([[0, 3, 9, 9, 1], [4, 4, 4, 4, 4]], np.int32)
    body = safetensors.numpy.save({"embeddings": x, "position_ids": ids})
    response = api.post(APPLY, content=body, headers=AS_SAFETENSORS)
    answer = tensors(response)
    assert list(answer) == ["embeddings"]
    assert metadata(response) == {
        "dtype": dtype,
        "shape": "[2,5,8]",
        "positions": "position_ids",
        "scale": str(np.sqrt(8)),
    }
    through_npz = load(
        api.post(
            APPLY, content=npz_bytes(embeddings=x, position_ids=ids), headers={"content-type": NPZ}
        )
    )
    assert answer["embeddings"].dtype == np.dtype(dtype)
    assert np.array_equal(answer["embeddings"], through_npz)


@pytest.mark.parametrize(
    ("query", "headers", "media_type"),
    [
        pytest.param("", {}, SAFETENSORS, id="own-format"),
        pytest.param("?format=npy", {}, NPY, id="format=npy"),
        pytest.param("", {"accept": "application/json"}, "application/json", id="accept-json"),
        pytest.param("?format=raw", {}, "application/octet-stream", id="raw"),
    ],
)
def test_a_safetensors_body_answered_in_any_format(
    api: httpx.Client, query: str, headers: dict[str, str], media_type: str
) -> None:
    x = batch((3, 4))
    body = safetensors.numpy.save({"embeddings": x})
    response = api.post(
        APPLY + "?offset=2" + query.replace("?", "&"),
        content=body,
        headers={**AS_SAFETENSORS, **headers},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    expected = load(
        api.post(
            APPLY + "?offset=2&format=npy", content=npy_bytes(x), headers={"content-type": NPY}
        )
    )
    got = tensors(response)["embeddings"] if media_type == SAFETENSORS else load(response)
    assert np.array_equal(got, expected)


def test_an_npy_body_answered_in_safetensors(api: httpx.Client) -> None:
    x = batch((4, 6))
    response = api.post(
        APPLY, content=npy_bytes(x), headers={"content-type": NPY, "accept": SAFETENSORS}
    )
    expected = load(api.post(APPLY, content=npy_bytes(x), headers={"content-type": NPY}))
    assert np.array_equal(tensors(response)["embeddings"], expected)


@pytest.mark.parametrize("convention", ["half", "interleaved"])
def test_rotary_apply_in_safetensors(api: httpx.Client, convention: str) -> None:
    x = batch((2, 3, 7, 16))
    url = f"{ROTARY}/apply?convention={convention}&offset=5"
    body = safetensors.numpy.save({"embeddings": x})
    answer = tensors(api.post(url, content=body, headers=AS_SAFETENSORS))
    expected = load(api.post(url, content=npy_bytes(x), headers={"content-type": NPY}))
    assert np.array_equal(answer["embeddings"], expected)


BAD_BODIES = [
    pytest.param(b"not safetensors at all", 400, "not a readable safetensors file", id="garbage"),
    pytest.param(b"\xff" * 16, 400, "at most 65,536", id="huge-header-length"),
    pytest.param(
        safetensors.numpy.save({"embeddings": np.zeros(4, np.float32)})[:-1],
        400,
        "data_offsets end at 16",
        id="truncated",
    ),
    pytest.param(
        safetensors.numpy.save({"embeddings": np.zeros((2, 2), np.float32), "x": np.zeros(1)}),
        422,
        "x: is not a tensor this endpoint reads",
        id="unknown-tensor",
    ),
    pytest.param(
        safetensors.numpy.save({"position_ids": np.zeros(2, np.int64)}),
        422,
        "embeddings: is required",
        id="no-embeddings",
    ),
    pytest.param(
        safetensors.numpy.save({"embeddings": np.zeros((2, 2), np.int8)}),
        422,
        "embeddings: must be float16, float32 or float64",
        id="int8-embeddings",
    ),
    pytest.param(
        safetensors.numpy.save(
            {"embeddings": np.zeros((2, 2), np.float32), "position_ids": np.ones(2, bool)}
        ),
        422,
        "position_ids: must hold real numbers",
        id="bool-ids",
    ),
]


@pytest.mark.parametrize(("body", "status", "words"), BAD_BODIES)
def test_bad_safetensors_bodies(api: httpx.Client, body: bytes, status: int, words: str) -> None:
    response = api.post(APPLY, content=body, headers=AS_SAFETENSORS)
    assert_problem(response, status, words)


def test_a_bf16_tensor_is_refused_by_name(api: httpx.Client) -> None:
    header = json.dumps({"embeddings": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}})
    body = len(header).to_bytes(8, "little") + header.encode() + bytes(8)
    for path in (APPLY, ROTARY + "/apply"):
        document = assert_problem(api.post(path, content=body, headers=AS_SAFETENSORS), 422, "BF16")
        assert document["errors"][0] == {
            "name": "embeddings",
            "in": "body",
            "detail": "must hold real numbers (F16, F32, F64 or integers), not BF16",
        }


def test_a_safetensors_body_past_the_limit_is_413(small_api: httpx.Client) -> None:
    body = safetensors.numpy.save({"embeddings": np.zeros((100, 300), np.float32)})
    assert_problem(small_api.post(APPLY, content=body, headers=AS_SAFETENSORS), 413)


def test_the_contract_lists_safetensors() -> None:
    spec = openapi_document()
    for path in (TABLE, ROTARY, ALIBI, ALIBI + "/slopes"):
        assert SAFETENSORS in spec["paths"][path]["get"]["responses"]["200"]["content"]
    for path in (APPLY, ROTARY + "/apply"):
        operation = spec["paths"][path]["post"]
        assert SAFETENSORS in operation["requestBody"]["content"]
        assert SAFETENSORS in operation["responses"]["200"]["content"]
    formats = [p for p in spec["paths"][TABLE]["get"]["parameters"] if p["name"] == "format"]
    assert "safetensors" in json.dumps(formats[0]["schema"])
