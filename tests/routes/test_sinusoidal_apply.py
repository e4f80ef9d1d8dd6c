"""``POST /v1/encodings/sinusoidal/apply`` over HTTP: bodies in every format, answers in
every format, positions near and far, and every bad body named."""

from __future__ import annotations

import io
import math
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from numpy.typing import NDArray

from service.app import create_app
from service.encodings import additive, registry
from service.encodings.registry import DTYPES
from service.encodings.sinusoidal import LAYOUTS, SinusoidalKey
from service.settings import Settings
from tests import oracle
from tests.oracle import assert_close, expected
from tests.support import APPLY, assert_problem, batch, in_process, load, npy_bytes, npz_bytes

NPY = {"content-type": "application/x-npy"}
JSON = {"content-type": "application/json"}
NPZ = {"content-type": "application/x-npz"}


def npz(**arrays: NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


@pytest.mark.parametrize(
    "shape", [pytest.param((12, 16), id="2-D"), pytest.param((4, 12, 15), id="3-D")]
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_bodies(api: httpx.Client, shape: tuple[int, ...], dtype: str) -> None:
    x = batch(shape, dtype, seed=3)
    response = api.post(APPLY + "?offset=5&base=500", content=npy_bytes(x), headers=NPY)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-npy"
    assert response.headers["content-length"] == str(response.num_bytes_downloaded)
    scale = math.sqrt(shape[-1])
    assert_close(load(response), expected(x, scale, np.arange(5, 5 + shape[-2]), base=500.0), dtype)


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(lambda x: x.astype(">f4"), id="big-endian"),
        pytest.param(np.asfortranarray, id="fortran-order"),
    ],
)
def test_npy_in_any_byte_and_memory_order(api: httpx.Client, variant: Any) -> None:
    x = batch((9, 6), "float32")
    buffer = io.BytesIO()
    np.save(buffer, variant(x))
    plain = api.post(APPLY, content=npy_bytes(x), headers=NPY)
    response = api.post(APPLY, content=buffer.getvalue(), headers=NPY)
    assert response.status_code == 200, response.text
    assert np.array_equal(load(response), load(plain))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_json_body_with_position_ids(api: httpx.Client, layout: str) -> None:
    x = batch((2, 4, 6), "float64")
    ids = [[3, 2, 1, 0], [10, 11, 12, 13]]
    body = orjson.dumps({"embeddings": x.tolist(), "position_ids": ids, "dtype": "float64"})
    response = api.post(f"{APPLY}?scale=0.5&layout={layout}", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert_close(load(response), expected(x, 0.5, np.array(ids), layout=layout), "float64")


def test_json_defaults_to_float32(api: httpx.Client) -> None:
    body = orjson.dumps({"embeddings": [[0.0, 0.0], [0.0, 0.0]]})
    document = api.post(f"{APPLY}?scale=1", content=body, headers=JSON).json()
    assert document == {
        "dtype": "float32",
        "shape": [2, 2],
        "positions": "0..1",
        "scale": 1.0,
        "embeddings": [[0.0, 1.0], [0.84147096, 0.5403023]],
    }


@pytest.mark.parametrize(
    "ids_shape", [pytest.param((5,), id="(L,)"), pytest.param((3, 5), id="(batch,L)")]
)
def test_npz_body_with_position_ids(api: httpx.Client, ids_shape: tuple[int, ...]) -> None:
    x = batch((3, 5, 8), "float32")
    ids = np.arange(15, dtype=np.int32)[: math.prod(ids_shape)].reshape(ids_shape) * 7
    response = api.post(APPLY, content=npz(embeddings=x, position_ids=ids), headers=NPZ)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-npz"
    assert_close(load(response), expected(x, math.sqrt(8), np.broadcast_to(ids, (3, 5))), "float32")


def test_the_same_batch_through_npy_and_json_gives_the_same_answer(api: httpx.Client) -> None:
    x = batch((4, 32, 24), "float32", seed=9)
    through_npy = load(api.post(APPLY + "?offset=3", content=npy_bytes(x), headers=NPY))
    json_body = orjson.dumps({"embeddings": x}, option=orjson.OPT_SERIALIZE_NUMPY)
    through_json = load(api.post(APPLY + "?offset=3", content=json_body, headers=JSON))
    through_npz = load(api.post(APPLY + "?offset=3", content=npz(embeddings=x), headers=NPZ))
    assert np.array_equal(through_npy, through_json)
    assert np.array_equal(through_npy, through_npz)


@pytest.mark.parametrize(
    ("query", "headers", "media_type"),
    [
        pytest.param("", {}, "application/x-npy", id="own-format"),
        pytest.param("", {"accept": "*/*"}, "application/x-npy", id="anything-is-own-format"),
        pytest.param("?format=json", {}, "application/json", id="format=json"),
        pytest.param("?format=npz", {}, "application/x-npz", id="format=npz"),
        pytest.param("?format=raw", {}, "application/octet-stream", id="format=raw"),
        pytest.param("", {"accept": "application/json"}, "application/json", id="accept"),
    ],
)
def test_response_formats(
    api: httpx.Client, query: str, headers: dict[str, str], media_type: str
) -> None:
    x = batch((3, 4), "float32")
    response = api.post(APPLY + query, content=npy_bytes(x), headers={**NPY, **headers})
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    assert response.headers["cache-control"] == "no-store"
    table = registry.rows(SinusoidalKey(4), 0, 3)
    assert np.array_equal(load(response), additive.apply(x, table, 2.0))


def test_unacceptable_response_is_406(api: httpx.Client) -> None:
    response = api.post(
        APPLY, content=npy_bytes(batch((2, 2))), headers={**NPY, "accept": "text/csv"}
    )
    assert response.status_code == 406


def _object_npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([[{"x": 1}]], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _npy(array: NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


GOOD = _npy(np.ones((3, 4), np.float32))
BAD_BODIES = [
    pytest.param({"content-type": "text/plain"}, b"1,2", "", 415, "Content-Type", id="text/plain"),
    pytest.param({}, GOOD, "", 415, "no Content-Type", id="no-content-type"),
    pytest.param(NPY, GOOD[:-7], "", 400, "bytes of data", id="truncated-npy"),
    pytest.param(NPY, GOOD + b"xx", "", 400, "bytes of data", id="trailing-bytes"),
    pytest.param(NPY, b"garbage", "", 400, "magic", id="garbage-npy"),
    pytest.param(NPY, b"", "", 400, "empty", id="empty-body"),
    pytest.param(NPY, b"\x93NUMPY\x01\x00\xff\x00{'descr", "", 400, "readable", id="bad-header"),
    pytest.param(NPY, _object_npy(), "embeddings", 422, "never unpickled", id="object-npy"),
    pytest.param(NPY, b"\x80\x04\x95" + GOOD, "", 400, "magic", id="pickle"),
    pytest.param(NPY, _npy(np.ones((3, 4), np.int32)), "embeddings", 422, "int32", id="integers"),
    pytest.param(
        NPY, _npy(np.ones((3, 4), np.complex128)), "embeddings", 422, "complex128", id="complex"
    ),
    pytest.param(NPY, _npy(np.ones(4, np.float32)), "embeddings", 422, "1-D", id="1-D"),
    pytest.param(NPY, _npy(np.array(1, np.float32)), "embeddings", 422, "0-D", id="0-D"),
    pytest.param(NPY, _npy(np.ones((1, 1, 3, 4), np.float32)), "embeddings", 422, "4-D", id="4-D"),
    pytest.param(NPY, _npy(np.ones((0, 4), np.float32)), "embeddings", 422, "empty", id="empty"),
    pytest.param(
        NPY, _npy(np.array([[1.0, np.nan]], np.float32)), "embeddings", 422, "NaN", id="nan-npy"
    ),
    pytest.param(NPY, _npy(np.array([[1.0, np.inf]])), "embeddings", 422, "infinity", id="inf-npy"),
    pytest.param(JSON, b'{"embeddings": [[1.0, NaN]]}', "", 400, "NaN", id="nan-json"),
    pytest.param(JSON, b'{"embeddings": [[1.0, Infinity]]}', "", 400, "JSON", id="inf-json"),
    pytest.param(JSON, b'{"embeddings": [[1.0, 1e999]]}', "", 400, "JSON", id="overflow-json"),
    pytest.param(
        JSON, b'{"embeddings": [[1.0, 2.0], [3.0]]}', "embeddings", 422, "ragged", id="ragged"
    ),
    pytest.param(JSON, b'{"embeddings": [[1.0, "2"]]}', "embeddings", 422, "numbers", id="string"),
    pytest.param(
        JSON, b'{"embeddings": [[1.0, true]]}', "embeddings", 422, "not numbers", id="boolean"
    ),
    pytest.param(JSON, b'{"embeddings": [[1.0, {}]]}', "embeddings", 422, "", id="object-in-list"),
    pytest.param(
        JSON,
        b'{"embeddings": [[1e39, 2.0]]}',
        "embeddings",
        422,
        "float32 range",
        id="float32-range",
    ),
    pytest.param(JSON, b'{"embeddings": "abc"}', "embeddings", 422, "", id="not-a-list"),
    pytest.param(JSON, b"[[1.0, 2.0]]", "body", 422, "object", id="bare-list"),
    pytest.param(JSON, b'{"embedings": [[1.0]]}', "embedings", 422, "not a field", id="misspelt"),
    pytest.param(JSON, b'{"position_ids": [0]}', "embeddings", 422, "required", id="missing"),
    pytest.param(
        JSON, b'{"embeddings": [[1.0]], "dtype": "int8"}', "dtype", 422, "float16", id="dtype"
    ),
    pytest.param(JSON, b'{"embeddings": [[1.0]', "", 400, "JSON", id="truncated-json"),
    pytest.param(
        JSON,
        b'{"embeddings": [[1.0], [2.0]], "position_ids": [0]}',
        "position_ids",
        422,
        "shape",
        id="ids-shape",
    ),
    pytest.param(
        JSON,
        b'{"embeddings": [[1.0], [2.0]], "position_ids": [0, -2]}',
        "position_ids",
        422,
        "non-negative",
        id="ids-negative",
    ),
    pytest.param(
        JSON,
        b'{"embeddings": [[1.0], [2.0]], "position_ids": [0, 0.5]}',
        "position_ids",
        422,
        "integers",
        id="ids-fraction",
    ),
    pytest.param(
        JSON,
        b'{"embeddings": [[1.0], [2.0]], "position_ids": ["a", "b"]}',
        "position_ids",
        422,
        "numbers",
        id="ids-strings",
    ),
    pytest.param(NPZ, b"PK\x03\x04 not really", "", 400, ".npz", id="garbage-npz"),
    pytest.param(
        NPZ,
        npz(position_ids=np.arange(3)),
        "embeddings",
        422,
        "required",
        id="npz-without-embeddings",
    ),
    pytest.param(
        NPZ,
        npz(embeddings=np.ones((3, 2)), weights=np.ones(2)),
        "weights",
        422,
        "member",
        id="npz-unknown-member",
    ),
    pytest.param(
        NPZ,
        npz(embeddings=np.ones((3, 2)), position_ids=np.array([0.0, 1.0, 2.0])),
        "position_ids",
        422,
        "integers",
        id="npz-float-ids",
    ),
    pytest.param(
        NPZ, npz(embeddings=np.ones((3, 2), np.int8)), "embeddings", 422, "int8", id="npz-integers"
    ),
]


@pytest.mark.parametrize(("headers", "body", "name", "status", "words"), BAD_BODIES)
def test_bad_bodies(
    api: httpx.Client, headers: dict[str, str], body: bytes, name: str, status: int, words: str
) -> None:
    response = api.post(APPLY, content=body, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    document = response.json()
    assert words in document["detail"]
    if name:
        assert [error["name"] for error in document["errors"]] == [name]
        assert document["errors"][0]["in"] == "body"


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("scale=nan", "scale", id="scale-nan"),
        pytest.param("scale=inf", "scale", id="scale-inf"),
        pytest.param("scale=abc", "scale", id="scale-text"),
        pytest.param("offset=-1", "offset", id="offset-negative"),
        pytest.param("max_len=0", "max_len", id="max_len-zero"),
        pytest.param("base=1", "base", id="base"),
        pytest.param("layout=x", "layout", id="layout"),
        pytest.param("format=csv", "format", id="format"),
        pytest.param("d_model=4", "d_model", id="d_model-is-the-body's"),
    ],
)
def test_bad_parameters(api: httpx.Client, query: str, name: str) -> None:
    response = api.post(f"{APPLY}?{query}", content=GOOD, headers=NPY)
    assert response.status_code == 422
    assert [error["name"] for error in response.json()["errors"]] == [name]


@pytest.mark.parametrize(
    ("query", "body"),
    [
        pytest.param("max_len=2", GOOD, id="offset-rows"),
        pytest.param("max_len=10&offset=8", GOOD, id="offset"),
        pytest.param(
            "max_len=10",
            b'{"embeddings": [[1.0], [2.0]], "position_ids": [0, 10]}',
            id="position_ids",
        ),
    ],
)
def test_positions_at_or_past_max_len(api: httpx.Client, query: str, body: bytes) -> None:
    headers = JSON if body.startswith(b"{") else NPY
    response = api.post(f"{APPLY}?{query}", content=body, headers=headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["name"] == "max_len"
    assert "not below max_len" in response.json()["detail"]


def test_rows_past_the_element_limit() -> None:
    """The limit is on the rows the positions need × d_model, not on the highest position."""
    x = np.ones((10, 200), np.float32)
    with in_process(create_app(Settings(max_elements=1000))) as http:
        response = http.post(APPLY, content=npy_bytes(x), headers=NPY)
        document = assert_problem(response, 422, "PE_MAX_ELEMENTS")
        assert (document["limit"], document["requested"]) == (1000, 2000)
        assert http.post(APPLY, content=npy_bytes(x[:5]), headers=NPY).status_code == 200
        far = http.post(APPLY + "?offset=100000000", content=npy_bytes(x[:5]), headers=NPY)
        assert far.status_code == 200


@pytest.mark.parametrize(
    ("query", "body"),
    [
        pytest.param("offset=2147483646", GOOD, id="offset"),
        pytest.param(
            "",
            b'{"embeddings": [[1.0], [2.0]], "position_ids": [0, 2147483648]}',
            id="position_ids",
        ),
        pytest.param(
            "",
            b'{"embeddings": [[1.0], [2.0]], "position_ids": [0, 9223372036854775807]}',
            id="position_ids-int64-max",
        ),
    ],
)
def test_positions_past_the_largest_are_refused(api: httpx.Client, query: str, body: bytes) -> None:
    headers = JSON if body.startswith(b"{") else NPY
    document = assert_problem(api.post(f"{APPLY}?{query}", content=body, headers=headers), 422)
    assert (document["setting"], document["limit"]) == ("PE_MAX_POSITION", 2**31 - 1)


@pytest.mark.parametrize(
    ("offset", "ids"),
    [
        pytest.param(20_000, None, id="offset-20000"),
        pytest.param(2**31 - 3, None, id="offset-at-the-end"),
        pytest.param(0, [8_000_000, 3], id="far-and-near-ids"),
        pytest.param(0, [2**31 - 1, 2**31 - 1], id="the-largest-position-twice"),
        pytest.param(0, [70_000, 70_001], id="dense-ids-far-away"),
    ],
)
def test_far_positions_cost_only_their_rows(
    api: httpx.Client, offset: int, ids: list[int] | None
) -> None:
    """Two rows of a wide model far down the table: only the rows needed are computed."""
    x = batch((2, 4096), "float32", seed=5)
    if ids is None:
        response = api.post(f"{APPLY}?offset={offset}&scale=1", content=npy_bytes(x), headers=NPY)
        positions = np.arange(offset, offset + 2)
    else:
        body = npz(embeddings=x, position_ids=np.array(ids))
        response = api.post(f"{APPLY}?scale=1&format=npy", content=body, headers=NPZ)
        positions = np.array(ids)
    assert response.status_code == 200, response.text
    y = load(response)
    rows = registry.take(SinusoidalKey(4096), positions)
    assert np.array_equal(y, additive.apply(x, rows, 1.0))
    for r, p in enumerate(positions.tolist()):
        for k in (0, 1, 4094, 4095):
            exact = oracle.exact(p, k, 4096, 10000.0)
            assert abs(float(y[r, k]) - (float(x[r, k]) + exact)) <= 2.0**-21


def test_a_json_answer_past_its_limit(small_api: httpx.Client) -> None:
    body = npy_bytes(np.zeros((40, 30), np.float32))
    response = small_api.post(APPLY + "?format=json", content=body, headers=NPY)
    assert response.status_code == 422
    assert response.json()["setting"] == "PE_MAX_JSON_ELEMENTS"
    assert "format=npy" in response.json()["detail"]
    assert small_api.post(APPLY, content=body, headers=NPY).status_code == 200


def test_a_json_body_past_its_limit(small_api: httpx.Client) -> None:
    body = orjson.dumps({"embeddings": np.zeros((40, 30)).tolist()})
    response = small_api.post(APPLY, content=body, headers=JSON)
    assert response.status_code == 422
    assert response.json()["setting"] == "PE_MAX_JSON_ELEMENTS"


def test_a_decompressed_npz_past_the_body_limit(small_api: httpx.Client) -> None:
    bomb = npz(embeddings=np.zeros((200, 200), np.float32))  # 160 kB of zeros, a few compressed
    assert len(bomb) < 100_000
    response = small_api.post(APPLY, content=bomb, headers=NPZ)
    assert response.status_code == 413
    assert response.json()["setting"] == "PE_MAX_BODY_BYTES"


def test_a_body_past_the_limit_is_413(small_api: httpx.Client) -> None:
    response = small_api.post(APPLY, content=b"\0" * 100_001, headers=NPY)
    assert response.status_code == 413
    assert response.json()["setting"] == "PE_MAX_BODY_BYTES"


@pytest.mark.parametrize("position_ids", [None, [0, 1]], ids=["offset", "dense-ids"])
def test_a_batch_wider_than_pe_max_width_is_refused(position_ids: list[int] | None) -> None:
    batch = np.ones((2, 9), np.float32)
    body = (
        npy_bytes(batch)
        if position_ids is None
        else npz_bytes(embeddings=batch, position_ids=np.array(position_ids))
    )
    kind = "application/x-npy" if position_ids is None else "application/x-npz"
    with in_process(create_app(Settings(max_width=8))) as http:
        response = http.post(APPLY, content=body, headers={"content-type": kind})
    assert assert_problem(response, 422, "PE_MAX_WIDTH")["requested"] == 9
