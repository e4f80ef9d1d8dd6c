"""Raw apply bodies (``application/octet-stream``: little-endian C-order numbers whose
shape and dtype ``X-Shape`` / ``X-Dtype`` or ``shape=`` / ``dtype=`` give), in process and
against a real server: the same answers as ``.npy`` bodies, in any answer format, and every
missing, malformed or contradictory declaration refused by name."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
import safetensors.numpy
from numpy.typing import NDArray

from service import batches
from service.encodings import additive, registry
from service.encodings.additive import Additive
from service.encodings.sinusoidal import SinusoidalKey
from service.metrics import Telemetry
from service.runtime import Runtime
from service.settings import Settings
from tests.support import APPLY, NPY, RAW, ROTARY_APPLY, assert_problem, batch, load, npy_bytes

AS_NPY = {"content-type": NPY}


def raw(x: NDArray[Any], **headers: str) -> dict[str, Any]:
    """The request of ``x`` as a raw body, declared by its headers (and ``headers``)."""
    declared = {"x-shape": ",".join(map(str, x.shape)), "x-dtype": x.dtype.name}
    return {
        "content": x.astype(x.dtype.newbyteorder("<")).tobytes(),
        "headers": {"content-type": RAW, **declared, **headers},
    }


@pytest.mark.parametrize("path", [APPLY + "?offset=7", ROTARY_APPLY + "?offset=7"])
@pytest.mark.parametrize("shape", [(12, 16), (3, 12, 16)], ids=["2-D", "3-D"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_a_raw_body_gives_the_npy_answer(
    api: httpx.Client, path: str, shape: tuple[int, ...], dtype: str
) -> None:
    x = batch(shape, dtype)
    response = api.post(path, **raw(x))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == RAW  # a raw body's own format
    assert response.headers["x-shape"] == ",".join(map(str, shape))
    assert response.headers["x-dtype"] == dtype
    assert response.headers["cache-control"] == "no-store"
    expected = load(api.post(path, content=npy_bytes(x), headers=AS_NPY))
    assert load(response).dtype == expected.dtype == np.dtype(dtype)
    assert load(response).tobytes() == expected.tobytes()


def test_rotary_4d_queries(api: httpx.Client) -> None:
    x = batch((2, 4, 9, 8))
    url = ROTARY_APPLY + "?convention=interleaved&partial_rotary_factor=0.5"
    expected = load(api.post(url, content=npy_bytes(x), headers=AS_NPY))
    assert np.array_equal(load(api.post(url, **raw(x))), expected)


def test_the_layout_may_be_query_parameters(api: httpx.Client) -> None:
    x = batch((2, 3, 8), "float64")
    body = x.tobytes()
    by_query = api.post(
        APPLY + "?shape=2,3,8&dtype=float64", content=body, headers={"content-type": RAW}
    )
    assert by_query.status_code == 200, by_query.text
    both = api.post(APPLY + "?shape=2,3,8&dtype=float64", **raw(x))
    expected = load(api.post(APPLY, content=npy_bytes(x), headers=AS_NPY))
    assert load(by_query).tobytes() == load(both).tobytes() == expected.tobytes()


def test_the_dtype_defaults_to_float32(api: httpx.Client) -> None:
    x = batch((4, 6))
    response = api.post(APPLY, content=x.tobytes(), headers={"content-type": RAW, "x-shape": "4,6"})
    assert response.headers["x-dtype"] == "float32"
    assert np.array_equal(
        load(response), load(api.post(APPLY, content=npy_bytes(x), headers=AS_NPY))
    )


@pytest.mark.parametrize(
    ("query", "headers", "media_type"),
    [
        pytest.param("", {}, RAW, id="own-format"),
        pytest.param("?format=npy", {}, NPY, id="format=npy"),
        pytest.param("?format=json", {}, "application/json", id="format=json"),
        pytest.param("?format=npz", {}, "application/x-npz", id="format=npz"),
        pytest.param("", {"accept": "application/json"}, "application/json", id="accept"),
        pytest.param("", {"accept": "*/*"}, RAW, id="anything"),
    ],
)
def test_a_raw_body_answered_in_any_format(
    api: httpx.Client, query: str, headers: dict[str, str], media_type: str
) -> None:
    x = batch((5, 4), "float64")
    request = raw(x)
    response = api.post(
        APPLY + query, content=request["content"], headers={**request["headers"], **headers}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    expected = load(api.post(APPLY, content=npy_bytes(x), headers=AS_NPY))
    assert np.array_equal(load(response), expected)


def test_a_raw_answer_to_a_raw_body_is_computed_in_place(api: httpx.Client) -> None:
    """float32 in, float32 out: the result is written over the body and sent back as is;
    it is the same as a copy would be."""
    x = batch((64, 32))
    answer = api.post(APPLY + "?scale=0.5", **raw(x))
    copied = api.post(APPLY + "?scale=0.5&format=npy", **raw(x))
    assert answer.content == load(copied).tobytes()


def test_offset_and_max_len_apply(api: httpx.Client) -> None:
    x = batch((3, 4))
    at_5 = api.post(APPLY + "?offset=5", **raw(x))
    assert np.array_equal(
        load(at_5), load(api.post(APPLY + "?offset=5", content=npy_bytes(x), headers=AS_NPY))
    )
    assert_problem(api.post(APPLY + "?offset=5&max_len=7", **raw(x)), 422, "max_len")


def test_a_body_of_the_wrong_length_names_both_numbers(api: httpx.Client) -> None:
    x = batch((8, 16))
    request = raw(x, **{"x-shape": "8,17"})
    document = assert_problem(api.post(APPLY, **request), 400, "512 bytes", "544 bytes")
    assert "8,17 of float32" in document["detail"]
    short = api.post(
        ROTARY_APPLY,
        content=b"\0" * 100,
        headers={"content-type": RAW, "x-shape": "2,4,4", "x-dtype": "float64"},
    )
    assert_problem(short, 400, "holds 100 bytes", "needs 256 bytes")


def test_a_missing_shape_is_400_naming_x_shape(api: httpx.Client) -> None:
    for headers in ({"content-type": RAW}, {"content-type": RAW, "x-dtype": "float32"}):
        assert_problem(
            api.post(APPLY, content=bytes(16), headers=headers), 400, "X-Shape", "shape parameter"
        )


@pytest.mark.parametrize(
    ("shape", "words"),
    [
        pytest.param("-4,4", "is not a shape", id="negative"),
        pytest.param("4,four", "is not a shape", id="word"),
        pytest.param("2.0,2", "is not a shape", id="float"),
        pytest.param("", "is not a shape", id="empty"),
        pytest.param(",".join(["1"] * 65), "65 dimensions", id="65-dims"),
        pytest.param("9" * 1000, "too large", id="1000-digits"),
        pytest.param("4294967296,4294967296,4", "too large for any array", id="overflow"),
        pytest.param("0,4294967296,4294967296", "too large for any array", id="zero-times-huge"),
    ],
)
def test_a_bad_shape_is_named(api: httpx.Client, shape: str, words: str) -> None:
    headers = {"content-type": RAW, "x-shape": shape}
    assert_problem(api.post(APPLY, content=bytes(16), headers=headers), 400, "X-Shape", words)
    query = api.post(
        APPLY, params={"shape": shape}, content=bytes(16), headers={"content-type": RAW}
    )
    document = assert_problem(query, 422, "shape", words)
    assert document["errors"][0]["name"] == "shape"
    assert document["errors"][0]["in"] == "query"


def test_shapes_the_kernel_refuses_are_422(api: httpx.Client) -> None:
    for shape in ("16", "1,1,1,1,4", "0,4"):
        headers = {"content-type": RAW, "x-shape": shape}
        size = 4 * int(np.prod([int(n) for n in shape.split(",")]))
        assert_problem(api.post(APPLY, content=bytes(size), headers=headers), 422, "embeddings")


def test_a_bad_dtype_is_named(api: httpx.Client) -> None:
    headers = {"content-type": RAW, "x-shape": "2,2", "x-dtype": "int32"}
    assert_problem(api.post(APPLY, content=bytes(16), headers=headers), 400, "X-Dtype", "int32")
    query = api.post(
        APPLY + "?shape=2,2&dtype=int32", content=bytes(16), headers={"content-type": RAW}
    )
    assert assert_problem(query, 422, "dtype")["errors"][0]["name"] == "dtype"


def test_a_header_and_a_parameter_that_disagree_are_400_naming_both(api: httpx.Client) -> None:
    x = batch((2, 8))
    assert_problem(
        api.post(APPLY + "?shape=4,4", **raw(x)), 400, "X-Shape (2,8)", "shape parameter (4,4)"
    )
    response = api.post(APPLY + "?dtype=float16", **raw(x))
    assert_problem(response, 400, "X-Dtype (float32)", "dtype parameter (float16)")
    agreeing = api.post(APPLY + "?shape=2,%208&dtype=float32", **raw(x))
    assert agreeing.status_code == 200, agreeing.text


def test_a_repeated_header_is_400(api: httpx.Client) -> None:
    headers = [("content-type", RAW), ("x-shape", "2"), ("x-shape", "8")]
    assert_problem(
        api.post(APPLY, content=bytes(64), headers=headers), 400, "X-Shape is given 2 times"
    )


def test_the_layout_parameters_are_for_raw_bodies_only(api: httpx.Client) -> None:
    body = npy_bytes(batch((2, 3)))
    for query in ("shape=2,3", "dtype=float32"):
        response = api.post(f"{APPLY}?{query}", content=body, headers=AS_NPY)
        assert_problem(response, 422, "for a raw body (application/octet-stream) only")
    ignored = api.post(APPLY, content=body, headers={**AS_NPY, "x-shape": "9,9"})
    assert ignored.status_code == 200  # a header describes a raw body; others say their own


def test_position_ids_cannot_come_with_a_raw_body(api: httpx.Client) -> None:
    """A raw body holds the embeddings only, and apply takes no position_ids parameter:
    positions are offset .. offset + L - 1."""
    x = batch((2, 4))
    assert_problem(api.post(APPLY + "?position_ids=0,1", **raw(x)), 422, "position_ids")


@pytest.mark.parametrize(("kind", "fmt"), [("raw", "raw"), ("safetensors", "npy"), ("npy", "raw")])
def test_a_view_body_is_computed_in_place(kind: str, fmt: str) -> None:
    """npy, raw and safetensors batches are views of the body, which is ours: a float32
    batch is overwritten with its result, and a raw answer to a raw body is the body."""
    x = batch((16, 8))
    body = bytearray(
        {
            "raw": x.tobytes(),
            "npy": npy_bytes(x),
            "safetensors": safetensors.numpy.save({"embeddings": x}),
        }[kind]
    )
    before = bytes(body)
    runtime = Runtime(Settings(), Telemetry(lambda: None))
    layout = ((16, 8), "float32") if kind == "raw" else None
    plan = batches.Apply(kind, fmt, False, Additive(), _key, 0, None, layout)  # type: ignore[arg-type]
    answer = batches.apply(runtime, body, plan)
    assert bytes(body) != before  # the batch was overwritten with the result
    result = load(httpx.Response(200, headers=answer.headers, content=bytes(answer.body)))
    assert np.array_equal(
        result, additive.apply(x, registry.rows(_key(8, "float32"), 0, 16), np.sqrt(8))
    )
    if kind == fmt:
        assert isinstance(answer.body, memoryview)
        assert answer.body.obj is body
        assert answer.headers == {
            "content-type": RAW,
            "x-shape": "16,8",
            "x-dtype": "float32",
            "x-positions": "0..15",
            "x-scale": str(np.sqrt(8)),
        }


def _key(d_model: int, dtype: str) -> SinusoidalKey:
    return SinusoidalKey(d_model, dtype=dtype)  # type: ignore[arg-type]
