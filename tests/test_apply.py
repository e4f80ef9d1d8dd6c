"""``X * scale + PE[positions]``: the core function, and the endpoint over HTTP."""

from __future__ import annotations

import contextlib
import io
import math
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import orjson
import pytest
from numpy.typing import NDArray

from service import codecs, core
from service.client import Client
from service.errors import InvalidParameter
from tests import oracle

APPLY = "/v1/encodings/sinusoidal/apply"
NPY = {"content-type": "application/x-npy"}
JSON = {"content-type": "application/json"}
NPZ = {"content-type": "application/x-npz"}


def expected(
    x: NDArray[Any],
    scale: float,
    positions: NDArray[Any],
    base: float = 10000.0,
    layout: str = "interleaved",
) -> NDArray[np.float64]:
    """The exact answer in float64, from the oracle's table."""
    d_model = x.shape[-1]
    rows = {
        int(p): [oracle.exact(int(p), k, d_model, base, layout) for k in range(d_model)]
        for p in np.unique(positions)
    }
    pe = np.array([[rows[int(p)] for p in line] for line in np.atleast_2d(positions)])
    pe = pe.reshape((*positions.shape, d_model))
    return np.asarray(x.astype(np.float64) * scale + pe, dtype=np.float64)


def assert_close(y: NDArray[Any], truth: NDArray[np.float64], dtype: str) -> None:
    """Within the rounding that computing in ``dtype`` (float16: in float32) allows."""
    assert y.dtype == np.dtype(dtype)
    error = np.abs(y.astype(np.float64) - truth)
    magnitude = np.abs(truth)
    if dtype == "float64":
        bound = 1e-12 * np.maximum(1.0, magnitude)
    else:
        bound = 3 * 2.0**-24 * magnitude + 2.0**-23
        if dtype == "float16":
            bound += np.spacing(magnitude.astype(np.float16)).astype(np.float64) * 0.5
    assert np.all(error <= bound), float(np.max(error - bound))


def batch(shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> NDArray[Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def npz(**arrays: NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def load(response: Any) -> NDArray[Any]:
    kind = response.headers["content-type"]
    if kind == "application/json":
        document = orjson.loads(response.content)
        result = np.array(document["embeddings"], dtype=document["dtype"])
        assert list(result.shape) == document["shape"]
        return result
    if kind == "application/x-npz":
        return np.asarray(np.load(io.BytesIO(response.content), allow_pickle=False)["embeddings"])
    if kind == "application/octet-stream":
        shape = tuple(int(n) for n in response.headers["x-shape"].split(","))
        dtype = np.dtype(response.headers["x-dtype"]).newbyteorder("<")
        return np.frombuffer(response.content, dtype=dtype).reshape(shape)
    assert kind == "application/x-npy"
    return np.asarray(np.load(io.BytesIO(response.content), allow_pickle=False))


# -- the core function -------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [pytest.param((6, 10), id="2-D"), pytest.param((3, 6, 9), id="3-D")]
)
@pytest.mark.parametrize("dtype", core.DTYPES)
@pytest.mark.parametrize("layout", core.LAYOUTS)
@pytest.mark.parametrize(("scale", "offset"), [(1.0, 0), (math.sqrt(10), 7), (-0.25, 1000)])
def test_apply_with_offsets(
    shape: tuple[int, ...], dtype: str, layout: core.Layout, scale: float, offset: int
) -> None:
    x = batch(shape, dtype)
    length = shape[-2]
    table = core.encoding(0, offset + length, shape[-1], 10000.0, layout, core.compute_dtype(x))
    y = core.apply(x, table, scale, offset)
    positions = np.arange(offset, offset + length)
    assert y.shape == x.shape
    assert_close(y, expected(x, scale, positions, layout=layout), dtype)


@pytest.mark.parametrize("dtype", core.DTYPES)
@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(np.array([4, 0, 9, 9, 2]), id="per-position"),
        pytest.param(
            np.array([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2], [9, 8, 7, 6, 5]]), id="per-sequence"
        ),
    ],
)
def test_apply_with_position_ids(dtype: str, ids: NDArray[Any]) -> None:
    x = batch((3, 5, 8), dtype)
    positions = core.check_batch(x, ids)
    table = core.encoding(0, core.rows_needed(x, 0, positions), 8, dtype=core.compute_dtype(x))
    y = core.apply(x, table, 2.0, 0, positions)
    assert_close(y, expected(x, 2.0, np.broadcast_to(ids, (3, 5))), dtype)


def test_zero_embeddings_with_scale_one_are_the_table() -> None:
    table = core.encoding(0, 20, 16)
    assert np.array_equal(
        core.apply(np.zeros((2, 20, 16), np.float32), table, 1.0), np.stack([table, table])
    )


def test_any_byte_order_and_memory_order() -> None:
    x = batch((7, 6), "float64")
    table = core.encoding(0, 7, 6, dtype="float64")
    y = core.apply(x, table, 3.0)
    for variant in (x.astype(">f8"), np.asfortranarray(x)):
        result = core.apply(variant, table, 3.0)
        assert result.dtype == np.dtype("=f8")
        assert result.flags.c_contiguous
        assert np.array_equal(result, y)


@pytest.mark.parametrize(
    ("x", "ids", "name", "words"),
    [
        pytest.param(np.zeros((2, 3), np.int64), None, "embeddings", "float16", id="integers"),
        pytest.param(np.zeros((2, 3), np.complex64), None, "embeddings", "float16", id="complex"),
        pytest.param(np.zeros(3, np.float32), None, "embeddings", "1-D", id="1-D"),
        pytest.param(np.zeros((1, 2, 3, 4), np.float32), None, "embeddings", "4-D", id="4-D"),
        pytest.param(np.zeros((0, 3), np.float32), None, "embeddings", "empty", id="empty"),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([0.0, 1.0]),
            "position_ids",
            "integers",
            id="float-ids",
        ),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([0, -1]),
            "position_ids",
            "non-negative",
            id="negative-ids",
        ),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([0, 1, 2]),
            "position_ids",
            "shape",
            id="ids-too-long",
        ),
        pytest.param(
            np.zeros((2, 2, 3), np.float32),
            np.zeros((3, 2), np.int32),
            "position_ids",
            "shape",
            id="ids-wrong-batch",
        ),
        pytest.param(
            np.zeros((2, 3), np.float32),
            np.array([1, 2**63 - 1], np.int64),
            "position_ids",
            "too large",
            id="ids-huge",
        ),
    ],
)
def test_check_batch_names_the_field(
    x: NDArray[Any], ids: NDArray[Any] | None, name: str, words: str
) -> None:
    with pytest.raises(InvalidParameter, match=words) as caught:
        core.check_batch(x, ids)
    assert caught.value.name == name


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_embeddings_are_refused(value: float) -> None:
    x = batch((4, 4), "float32")
    x[2, 3] = value
    with pytest.raises(InvalidParameter, match=r"NaN or infinity, first at \(2, 3\)"):
        core.apply(x, core.encoding(0, 4, 4), 1.0)


def test_an_overflowing_result_is_refused() -> None:
    x = np.full((2, 2), 60000.0, np.float16)
    with pytest.raises(InvalidParameter, match="overflows float16") as caught:
        core.apply(x, core.encoding(0, 2, 2), 2.0)
    assert caught.value.name == "scale"


# -- the endpoint ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [pytest.param((12, 16), id="2-D"), pytest.param((4, 12, 15), id="3-D")]
)
@pytest.mark.parametrize("dtype", core.DTYPES)
def test_npy_bodies(api: Any, shape: tuple[int, ...], dtype: str) -> None:
    x = batch(shape, dtype, seed=3)
    response = api.post(APPLY + "?offset=5&base=500", content=codecs.encode_npy(x)[1], headers=NPY)
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
def test_npy_in_any_byte_and_memory_order(api: Any, variant: Any) -> None:
    x = batch((9, 6), "float32")
    buffer = io.BytesIO()
    np.save(buffer, variant(x))
    plain = api.post(APPLY, content=codecs.encode_npy(x)[1], headers=NPY)
    response = api.post(APPLY, content=buffer.getvalue(), headers=NPY)
    assert response.status_code == 200, response.text
    assert np.array_equal(load(response), load(plain))


@pytest.mark.parametrize("layout", core.LAYOUTS)
def test_json_body_with_position_ids(api: Any, layout: str) -> None:
    x = batch((2, 4, 6), "float64")
    ids = [[3, 2, 1, 0], [10, 11, 12, 13]]
    body = orjson.dumps({"embeddings": x.tolist(), "position_ids": ids, "dtype": "float64"})
    response = api.post(f"{APPLY}?scale=0.5&layout={layout}", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert_close(load(response), expected(x, 0.5, np.array(ids), layout=layout), "float64")


def test_json_defaults_to_float32(api: Any) -> None:
    body = orjson.dumps({"embeddings": [[0.0, 0.0], [0.0, 0.0]]})
    document = api.post(f"{APPLY}?scale=1", content=body, headers=JSON).json()
    assert document == {
        "dtype": "float32",
        "shape": [2, 2],
        "embeddings": [[0.0, 1.0], [0.84147096, 0.5403023]],
    }


@pytest.mark.parametrize(
    "ids_shape", [pytest.param((5,), id="(L,)"), pytest.param((3, 5), id="(batch,L)")]
)
def test_npz_body_with_position_ids(api: Any, ids_shape: tuple[int, ...]) -> None:
    x = batch((3, 5, 8), "float32")
    ids = np.arange(15, dtype=np.int32)[: math.prod(ids_shape)].reshape(ids_shape) * 7
    response = api.post(APPLY, content=npz(embeddings=x, position_ids=ids), headers=NPZ)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-npz"
    assert_close(load(response), expected(x, math.sqrt(8), np.broadcast_to(ids, (3, 5))), "float32")


def test_the_same_batch_through_npy_and_json_gives_the_same_answer(api: Any) -> None:
    x = batch((4, 32, 24), "float32", seed=9)
    through_npy = load(api.post(APPLY + "?offset=3", content=codecs.encode_npy(x)[1], headers=NPY))
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
def test_response_formats(api: Any, query: str, headers: dict[str, str], media_type: str) -> None:
    x = batch((3, 4), "float32")
    response = api.post(APPLY + query, content=codecs.encode_npy(x)[1], headers={**NPY, **headers})
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    assert response.headers["cache-control"] == "no-store"
    assert np.array_equal(load(response), core.apply(x, core.encoding(0, 3, 4), 2.0))


def test_unacceptable_response_is_406(api: Any) -> None:
    response = api.post(
        APPLY, content=codecs.encode_npy(batch((2, 2)))[1], headers={**NPY, "accept": "text/csv"}
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
    pytest.param(NPY, b"", "", 400, "magic", id="empty-body"),
    pytest.param(NPY, b"\x93NUMPY\x01\x00\xff\x00{'descr", "", 400, "readable", id="bad-header"),
    pytest.param(NPY, _object_npy(), "embeddings", 422, "never unpickled", id="object-npy"),
    pytest.param(NPY, b"\x80\x04\x95" + GOOD, "", 400, "magic", id="pickle"),
    pytest.param(NPY, _npy(np.ones((3, 4), np.int32)), "embeddings", 422, "int32", id="integers"),
    pytest.param(
        NPY, _npy(np.ones((3, 4), np.complex128)), "embeddings", 422, "complex128", id="complex"
    ),
    pytest.param(NPY, _npy(np.ones(4, np.float32)), "embeddings", 422, "1-D", id="1-D"),
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
    pytest.param(JSON, b'{"embeddings": [[1.0, true]]}', "body", 422, "not numbers", id="boolean"),
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
    api: Any, headers: dict[str, str], body: bytes, name: str, status: int, words: str
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
def test_bad_parameters(api: Any, query: str, name: str) -> None:
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
def test_positions_at_or_past_max_len(api: Any, query: str, body: bytes) -> None:
    headers = JSON if body.startswith(b"{") else NPY
    response = api.post(f"{APPLY}?{query}", content=body, headers=headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["name"] == "max_len"
    assert "not below max_len" in response.json()["detail"]


def test_a_table_past_the_element_limit(api: Any) -> None:
    response = api.post(f"{APPLY}?offset=100000000", content=GOOD, headers=NPY)
    assert response.status_code == 422
    assert response.json()["setting"] == "PE_MAX_ELEMENTS"


def test_a_json_answer_past_its_limit(small_api: Any) -> None:
    body = codecs.encode_npy(np.zeros((40, 30), np.float32))[1]
    response = small_api.post(APPLY + "?format=json", content=body, headers=NPY)
    assert response.status_code == 422
    assert response.json()["setting"].startswith("PE_MAX_JSON_ELEMENTS")
    assert small_api.post(APPLY, content=body, headers=NPY).status_code == 200


def test_a_json_body_past_its_limit(small_api: Any) -> None:
    body = orjson.dumps({"embeddings": np.zeros((40, 30)).tolist()})
    response = small_api.post(APPLY, content=body, headers=JSON)
    assert response.status_code == 422
    assert response.json()["setting"] == "PE_MAX_JSON_ELEMENTS"


def test_a_decompressed_npz_past_the_body_limit(small_api: Any) -> None:
    bomb = npz(embeddings=np.zeros((200, 200), np.float32))  # 160 kB of zeros, a few compressed
    assert len(bomb) < 100_000
    response = small_api.post(APPLY, content=bomb, headers=NPZ)
    assert response.status_code == 413
    assert response.json()["setting"] == "PE_MAX_BODY_BYTES"


def test_a_body_past_the_limit_is_413(small_api: Any) -> None:
    response = small_api.post(APPLY, content=b"\0" * 100_001, headers=NPY)
    assert response.status_code == 413
    assert response.json()["setting"] == "PE_MAX_BODY_BYTES"


# -- a real server: bodies cut off while they are read, and concurrency ------------------


def _exchange(url: str, head: bytes, chunks: list[bytes]) -> tuple[bytes, int]:
    """Send ``head`` then ``chunks`` on a raw socket until the server answers; returns the
    answer and how many bytes of body were sent before it came."""
    host, port = url.removeprefix("http://").split(":")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        sock.settimeout(0.05)
        answer = b""
        for chunk in [*chunks, b""]:
            with contextlib.suppress(TimeoutError):
                answer = sock.recv(65536)
            if answer:
                break
            if chunk:
                sock.sendall(chunk)
                sent += len(chunk)
        sock.settimeout(10)
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head_end = answer.index(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in answer[:head_end].lower().split(b"\r\n")
                if line.startswith(b"content-length")
            )
        )
        while len(answer) < head_end + 4 + length:
            answer += sock.recv(65536)
    return answer, sent


NPY_HEADER = "Content-Type: application/x-npy\r\n"


def test_an_oversized_content_length_is_refused_before_the_body(small_live_url: str) -> None:
    head = f"POST {APPLY} HTTP/1.1\r\nHost: x\r\n{NPY_HEADER}Content-Length: 5000000\r\n\r\n"
    answer, sent = _exchange(small_live_url, head.encode(), [b"\0" * 65536] * 76)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"PE_MAX_BODY_BYTES" in answer
    assert sent < 5_000_000  # answered before the body was sent


def test_a_chunked_body_is_cut_off_at_the_limit(small_live_url: str) -> None:
    head = f"POST {APPLY} HTTP/1.1\r\nHost: x\r\n{NPY_HEADER}Transfer-Encoding: chunked\r\n\r\n"
    chunk = b"4000\r\n" + b"\0" * 0x4000 + b"\r\n"  # 16 KiB a chunk, 300 of them: 4.9 MB
    answer, sent = _exchange(small_live_url, head.encode(), [chunk] * 300)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"PE_MAX_BODY_BYTES" in answer
    assert sent < 1_000_000  # the server stopped reading near its 100 kB limit


def test_sixteen_concurrent_applies_are_correct_and_independent(live_url: str) -> None:
    def one(seed: int) -> tuple[NDArray[Any], NDArray[Any]]:
        x = batch((4, 64, 32), "float32", seed=seed)
        with Client(live_url) as client:  # one connection each: really concurrent
            return x, client.apply(x, offset=seed, scale=seed)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    for seed, (x, y) in enumerate(results):
        table = core.encoding(seed, seed + 64, 32)
        assert np.array_equal(y, core.apply(x, core.encoding(0, seed + 64, 32), float(seed), seed))
        assert_close(y, x.astype(np.float64) * seed + table.astype(np.float64), "float32")


def test_in_place_overwrites_only_a_batch_it_may() -> None:
    table = core.encoding(0, 4, 4)
    x = batch((4, 4), "float32")
    expected_y = core.apply(x, table, 2.0)
    mine = x.copy()
    assert core.apply(mine, table, 2.0, in_place=True) is mine
    assert np.array_equal(mine, expected_y)
    frozen = x.copy()
    frozen.flags.writeable = False
    assert core.apply(frozen, table, 2.0, in_place=True) is not frozen
    wide = x.astype(np.float16)
    assert core.apply(wide, table, 2.0, in_place=True) is not wide


def test_in_place_non_finite_results_are_refused() -> None:
    x = np.full((2, 2), 3e38, np.float32)
    with pytest.raises(InvalidParameter, match=r"overflows float32, first at \(0, 0\)"):
        core.apply(x, core.encoding(0, 2, 2), 10.0, in_place=True)
