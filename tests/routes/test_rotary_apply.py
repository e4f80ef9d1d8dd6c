"""``POST /v1/encodings/rotary/apply`` over HTTP, in process: batches of every shape and
dtype rotated by offset or position_ids, checked against an independent numpy rotation of
the table's rows; partial rotary; every bad body and parameter named."""

from __future__ import annotations

import io
import math
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from numpy.typing import NDArray

from service.app import create_app
from service.encodings import registry, scalings
from service.encodings.registry import Rounding
from service.encodings.rotary import CONVENTIONS, Convention, RotaryKey
from service.settings import Settings
from tests.support import (
    NPY,
    NPZ,
    RAW,
    assert_problem,
    batch,
    client_of,
    in_process,
    load,
)
from tests.support import npy_bytes as npy
from tests.support import npz_bytes as npz

APPLY = "/v1/encodings/rotary/apply"
AS_NPY = {"content-type": NPY}
AS_NPZ = {"content-type": NPZ}
AS_JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    """The app with default settings, in process; an unexpected error is a 500 answer."""
    with client_of(in_process_app, raise_errors=False) as client:
        yield client


def url(**params: Any) -> str:
    return APPLY + ("?" + urllib.parse.urlencode(params) if params else "")


def rotated(
    x: NDArray[Any],
    positions: NDArray[Any],
    *,
    partial: float = 1.0,
    convention: Convention = "half",
    scaling: scalings.Scaling = "none",
    given: Mapping[str, Any] | None = None,
    max_len: int = 1,
    base: float = 10000.0,
    rounding: Rounding = "library",
) -> NDArray[Any]:
    """The expected answer, independently of the kernel: the table's rows of ``positions``
    (shape ``(L,)`` or ``(batch, L)``), Hugging Face's ``q * cos + rotate_half(q) * sin``
    (half) or the same on pairs (2i, 2i+1) (interleaved), computed in float32 (float64 for
    float64) and returned in the batch's dtype."""
    head_dim = x.shape[-1]
    r = int(head_dim * partial)
    compute = np.float64 if x.dtype == np.float64 else np.float32
    params = scalings.resolve(scaling, dict(given or {}), r, max_len)
    key = RotaryKey(r, base, convention, scaling, params, np.dtype(compute).name, rounding)  # type: ignore[arg-type]
    rows = registry.take(key, positions.reshape(-1).astype(np.int64))
    rows = rows.reshape((*positions.shape, 2 * r))
    if positions.ndim == 2 and x.ndim > 3:  # (batch, L) positions for (batch, heads, L, d)
        rows = rows.reshape((rows.shape[0],) + (1,) * (x.ndim - 3) + rows.shape[1:])
    cos, sin = rows[..., :r], rows[..., r:]
    q: NDArray[np.floating] = x.astype(compute)
    part = q[..., :r]
    if convention == "half":
        turned = np.concatenate([-part[..., r // 2 :], part[..., : r // 2]], axis=-1)
    else:
        turned = np.empty_like(part)
        turned[..., 0::2], turned[..., 1::2] = -part[..., 1::2], part[..., 0::2]
    out = np.concatenate([part * cos + turned * sin, q[..., r:]], axis=-1)
    return out.astype(x.dtype)


SHAPES = [
    pytest.param((7, 16), id="(L,d)"),
    pytest.param((3, 7, 16), id="(B,L,d)"),
    pytest.param((2, 3, 7, 16), id="(B,H,L,d)"),
]
DTYPES = ["float16", "float32", "float64"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_batches_of_every_shape_and_dtype(
    http: httpx.Client, shape: tuple[int, ...], dtype: str
) -> None:
    x = batch(shape, dtype, seed=len(shape))
    response = http.post(APPLY, content=npy(x), headers=AS_NPY)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == NPY
    assert response.headers["cache-control"] == "no-store"
    y = load(response)
    assert y.dtype == np.dtype(dtype)
    assert y.shape == shape
    assert np.array_equal(y, rotated(x, np.arange(shape[-2])))


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("offset", [1, 1000, 2**31 - 8])
def test_offset(http: httpx.Client, convention: Convention, offset: int) -> None:
    x = batch((2, 7, 32), "float32", seed=offset % 97)
    response = http.post(url(offset=offset, convention=convention), content=npy(x), headers=AS_NPY)
    assert response.status_code == 200, response.text
    positions = np.arange(offset, offset + 7)
    assert np.array_equal(load(response), rotated(x, positions, convention=convention))


def test_float16_is_computed_in_float32(http: httpx.Client) -> None:
    """Rotated in float16 arithmetic the answer would differ: it is float32, then rounded."""
    x = batch((64, 64), "float16", seed=8)
    y = load(http.post(url(offset=5000), content=npy(x), headers=AS_NPY))
    assert np.array_equal(y, rotated(x, np.arange(5000, 5064)))
    rows = registry.rows(RotaryKey(64, dtype="float16"), 5000, 5064)
    cos, sin = rows[:, :64], rows[:, 64:]
    in_float16 = x * cos + np.concatenate([-x[:, 32:], x[:, :32]], axis=-1) * sin
    assert not np.array_equal(y, in_float16)


@pytest.mark.parametrize(
    ("shape", "ids_shape"),
    [
        pytest.param((6, 16), (6,), id="(L,d)-(L,)"),
        pytest.param((3, 6, 16), (6,), id="(B,L,d)-(L,)"),
        pytest.param((3, 6, 16), (3, 6), id="(B,L,d)-(B,L)"),
        pytest.param((3, 4, 6, 16), (6,), id="(B,H,L,d)-(L,)"),
        pytest.param((3, 4, 6, 16), (3, 6), id="(B,H,L,d)-(B,L)"),
    ],
)
@pytest.mark.parametrize("body", ["npz", "json"])
def test_position_ids(
    http: httpx.Client, shape: tuple[int, ...], ids_shape: tuple[int, ...], body: str
) -> None:
    x = batch(shape, "float64", seed=3)
    ids = np.random.default_rng(4).integers(0, 10**6, ids_shape)
    ids.flat[0] = 0
    if body == "npz":
        content, headers = npz(embeddings=x, position_ids=ids.astype(np.int32)), AS_NPZ
    else:
        document = {"embeddings": x.tolist(), "position_ids": ids.tolist(), "dtype": "float64"}
        content, headers = orjson.dumps(document), AS_JSON
    response = http.post(url(format="npy"), content=content, headers=headers)
    assert response.status_code == 200, response.text
    assert np.array_equal(load(response), rotated(x, ids))


def test_position_ids_differ_per_sequence(http: httpx.Client) -> None:
    """(batch, L) position_ids: every head of sequence b turns by sequence b's positions."""
    x = np.ones((2, 3, 2, 4), np.float64)
    ids = np.array([[0, 1], [5, 9]])
    y = load(http.post(APPLY, content=npz(embeddings=x, position_ids=ids), headers=AS_NPZ))
    for b in range(2):
        for h in range(3):
            assert np.array_equal(y[b, h], y[b, 0])
    assert not np.allclose(y[0], y[1])


@pytest.mark.parametrize(
    ("query", "media_type"),
    [
        pytest.param({}, NPY, id="own-format"),
        pytest.param({"format": "json"}, "application/json", id="json"),
        pytest.param({"format": "npz"}, NPZ, id="npz"),
        pytest.param({"format": "raw"}, RAW, id="raw"),
    ],
)
def test_answer_formats(http: httpx.Client, query: dict[str, str], media_type: str) -> None:
    x = batch((2, 5, 8), "float32", seed=6)
    response = http.post(url(**query, offset=3), content=npy(x), headers=AS_NPY)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    y = load(response)
    assert y.dtype == np.float32
    assert y.shape == (2, 5, 8)
    assert np.array_equal(y, rotated(x, np.arange(3, 8)))
    if media_type == RAW:
        assert response.headers["x-shape"] == "2,5,8"


@pytest.mark.parametrize(
    ("content", "headers", "accept", "media_type"),
    [
        pytest.param("json", AS_JSON, None, "application/json", id="json-json"),
        pytest.param("npz", AS_NPZ, None, NPZ, id="npz-npz"),
        pytest.param("npy", AS_NPY, "application/json", "application/json", id="accept-json"),
        pytest.param("json", AS_JSON, NPZ, NPZ, id="accept-npz"),
    ],
)
def test_answers_in_the_bodys_format_unless_accept_says(
    http: httpx.Client,
    content: str,
    headers: dict[str, str],
    accept: str | None,
    media_type: str,
) -> None:
    x = batch((4, 6), "float32", seed=7)
    body = {
        "json": orjson.dumps({"embeddings": x.tolist()}),
        "npz": npz(embeddings=x),
        "npy": npy(x),
    }[content]
    extra = {"accept": accept} if accept else {}
    response = http.post(APPLY, content=body, headers={**headers, **extra})
    assert response.headers["content-type"] == media_type
    assert np.array_equal(load(response), rotated(x, np.arange(4)))


def test_json_defaults_to_float32(http: httpx.Client) -> None:
    document = http.post(
        APPLY,
        content=orjson.dumps({"embeddings": [[1.0, 0.0], [1.0, 0.0]]}),
        headers=AS_JSON,
    ).json()
    assert document == {
        "dtype": "float32",
        "shape": [2, 2],
        "positions": "0..1",
        "embeddings": [[1.0, 0.0], [0.5403023, 0.84147096]],
    }


@pytest.mark.parametrize(
    ("head_dim", "partial", "rotary_dim"),
    [
        pytest.param(10, 0.4, 4, id="10x0.4"),
        pytest.param(64, 0.25, 16, id="64x0.25"),
        pytest.param(96, 0.3, 28, id="96x0.3"),
    ],
)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_partial_rotary_passes_the_rest_through(
    http: httpx.Client, head_dim: int, partial: float, rotary_dim: int, convention: Convention
) -> None:
    x = batch((2, 5, head_dim), "float32", seed=head_dim)
    response = http.post(
        url(partial_rotary_factor=partial, convention=convention, offset=11),
        content=npy(x),
        headers=AS_NPY,
    )
    assert response.status_code == 200, response.text
    y = load(response)
    assert np.array_equal(y[..., rotary_dim:], x[..., rotary_dim:])
    assert not np.array_equal(y[..., :rotary_dim], x[..., :rotary_dim])
    expected = rotated(x, np.arange(11, 16), partial=partial, convention=convention)
    assert np.array_equal(y, expected)


@pytest.mark.parametrize(
    ("params", "given", "max_len"),
    [
        pytest.param({"scaling": "linear", "factor": 4}, {"factor": 4}, 1, id="linear"),
        pytest.param(
            {"scaling": "yarn", "factor": 16, "original_max_position_embeddings": 64},
            {"factor": 16, "original_max_position_embeddings": 64},
            1,
            id="yarn-attention",
        ),
        pytest.param(
            {
                "scaling": "llama3",
                "factor": 8,
                "low_freq_factor": 1,
                "high_freq_factor": 4,
                "original_max_position_embeddings": 64,
            },
            {
                "factor": 8,
                "low_freq_factor": 1,
                "high_freq_factor": 4,
                "original_max_position_embeddings": 64,
            },
            1,
            id="llama3",
        ),
        pytest.param(
            {"scaling": "dynamic", "factor": 2, "max_position_embeddings": 16, "max_len": 512},
            {"factor": 2, "max_position_embeddings": 16},
            512,
            id="dynamic-max_len",
        ),
        pytest.param(
            {"scaling": "dynamic", "factor": 2, "max_position_embeddings": 16, "seq_len": 512},
            {"factor": 2, "max_position_embeddings": 16, "seq_len": 512},
            1,
            id="dynamic-seq_len",
        ),
        pytest.param(
            {
                "scaling": "longrope",
                "short_factor": "1,1,1,1",
                "long_factor": "2,4,8,16",
                "original_max_position_embeddings": 16,
                "factor": 8,
                "max_len": 100,
            },
            {
                "short_factor": [1, 1, 1, 1],
                "long_factor": [2, 4, 8, 16],
                "original_max_position_embeddings": 16,
                "factor": 8,
            },
            100,
            id="longrope-long",
        ),
    ],
)
@pytest.mark.parametrize("rounding", ["library", "exact"])
def test_scalings(
    http: httpx.Client,
    params: dict[str, Any],
    given: dict[str, Any],
    max_len: int,
    rounding: Rounding,
) -> None:
    x = batch((2, 20, 8), "float32", seed=12)
    response = http.post(
        url(**params, rounding=rounding, offset=40), content=npy(x), headers=AS_NPY
    )
    assert response.status_code == 200, response.text
    scaling = params["scaling"]
    expected = rotated(
        x,
        np.arange(40, 60),
        scaling=scaling,
        given=given,
        max_len=max_len,
        rounding=rounding,
    )
    assert np.array_equal(load(response), expected)


def test_the_attention_factor_scales_the_result(http: httpx.Client) -> None:
    """yarn's attention factor multiplies cos and sin, so the rotated batch too (exact
    rounding: the factor is not rounded to float32 first, as the library's is)."""
    x = batch((3, 8), "float64", seed=13)
    query = {
        "scaling": "yarn",
        "factor": 4,
        "original_max_position_embeddings": 64,
        "rounding": "exact",
    }

    def post(**extra: Any) -> NDArray[Any]:
        return load(http.post(url(**query, **extra), content=npy(x), headers=AS_NPY))

    plain, bound = post(attention_factor=1), 1e-14 * float(np.abs(x).max())
    np.testing.assert_allclose(post(attention_factor=2.5), plain * 2.5, rtol=0, atol=bound)
    np.testing.assert_allclose(post(), plain * (0.1 * math.log(4) + 1), rtol=0, atol=bound)
    assert not np.allclose(post(), plain)


@pytest.mark.parametrize(
    "query",
    [
        pytest.param({"scaling": "dynamic", "factor": 2, "max_position_embeddings": 4}, id="dyn"),
        pytest.param(
            {
                "scaling": "longrope",
                "short_factor": "1,1,1,1",
                "long_factor": "1,1,1,1",
                "original_max_position_embeddings": 4,
                "factor": 2,
            },
            id="longrope",
        ),
    ],
)
def test_a_scaling_that_depends_on_the_length_needs_max_len(
    http: httpx.Client, query: dict[str, Any]
) -> None:
    body = npy(batch((3, 8)))
    document = assert_problem(http.post(url(**query), content=body, headers=AS_NPY), 422)
    assert [error["name"] for error in document["errors"]] == ["max_len"]
    assert "max_len" in document["detail"]
    assert http.post(url(**query, max_len=3), content=body, headers=AS_NPY).status_code == 200


def _npy_of(array: NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


GOOD = npy(np.ones((3, 4), np.float32))
BAD_BODIES = [
    pytest.param(AS_NPY, _npy_of(np.ones((3, 4), np.int32)), "embeddings", 422, "int32", id="int"),
    pytest.param(
        AS_NPY, _npy_of(np.ones((3, 4), np.complex64)), "embeddings", 422, "complex", id="complex"
    ),
    pytest.param(AS_NPY, _npy_of(np.ones(4, np.float32)), "embeddings", 422, "not 1", id="1-D"),
    pytest.param(
        AS_NPY, _npy_of(np.ones((1,) * 7 + (2, 4), np.float32)), "embeddings", 422, "9", id="9-D"
    ),
    pytest.param(AS_NPY, _npy_of(np.ones((0, 4), np.float32)), "embeddings", 422, "empty"),
    pytest.param(AS_NPY, _npy_of(np.ones((2, 0, 4), np.float32)), "embeddings", 422, "empty"),
    pytest.param(
        AS_NPY, _npy_of(np.array([[1.0, np.nan]], np.float32)), "embeddings", 422, "NaN", id="nan"
    ),
    pytest.param(
        AS_NPY, _npy_of(np.array([[1.0, -np.inf]])), "embeddings", 422, "infinity", id="inf"
    ),
    pytest.param(
        AS_NPY, _npy_of(np.array([[np.nan, 1.0]], np.float16)), "embeddings", 422, "NaN", id="f16"
    ),
    pytest.param(AS_NPY, GOOD[:-5], "", 400, "bytes of data", id="truncated"),
    pytest.param(AS_NPY, b"garbage", "", 400, "magic", id="garbage"),
    pytest.param({"content-type": "text/plain"}, b"1,2", "", 415, "Content-Type", id="text"),
    pytest.param(AS_JSON, b'{"embeddings": [[1.0, NaN]]}', "", 400, "NaN", id="nan-json"),
    pytest.param(AS_JSON, b'{"embeddings": [1.0, 2.0]}', "embeddings", 422, "", id="json-1-D"),
    pytest.param(AS_JSON, b'{"embeddings": []}', "embeddings", 422, "", id="json-empty"),
    pytest.param(AS_JSON, b'{"embeddings": [[1.0], [2.0, 3.0]]}', "embeddings", 422, "ragged"),
    pytest.param(AS_JSON, b'{"embeddings": [[1.0, 2.0]], "dtype": "int8"}', "dtype", 422, ""),
    pytest.param(AS_JSON, b"[[1.0, 2.0]]", "body", 422, "object", id="bare-list"),
    pytest.param(
        AS_JSON,
        b'{"embeddings": [[1.0, 2.0], [3.0, 4.0]], "position_ids": [0]}',
        "position_ids",
        422,
        "shape",
        id="ids-too-short",
    ),
    pytest.param(
        AS_JSON,
        b'{"embeddings": [[[1.0, 2.0], [3.0, 4.0]]], "position_ids": [[0, 1], [2, 3]]}',
        "position_ids",
        422,
        "shape",
        id="ids-wrong-batch",
    ),
    pytest.param(
        AS_JSON,
        b'{"embeddings": [[1.0, 2.0], [3.0, 4.0]], "position_ids": [[0, 1]]}',
        "position_ids",
        422,
        "shape",
        id="ids-2-D-for-2-D",
    ),
    pytest.param(
        AS_JSON,
        b'{"embeddings": [[1.0, 2.0], [3.0, 4.0]], "position_ids": [0, -1]}',
        "position_ids",
        422,
        "non-negative",
        id="ids-negative",
    ),
    pytest.param(
        AS_JSON,
        b'{"embeddings": [[1.0, 2.0], [3.0, 4.0]], "position_ids": [0, 0.5]}',
        "position_ids",
        422,
        "integers",
        id="ids-fraction",
    ),
    pytest.param(
        AS_NPZ,
        npz(embeddings=np.ones((2, 2, 4), np.float32), position_ids=np.array([0, -3])),
        "position_ids",
        422,
        "non-negative",
        id="npz-ids-negative",
    ),
    pytest.param(
        AS_NPZ,
        npz(embeddings=np.ones((2, 2, 4), np.float32), position_ids=np.zeros((2, 3), np.int64)),
        "position_ids",
        422,
        "shape",
        id="npz-ids-shape",
    ),
    pytest.param(
        AS_NPZ,
        npz(embeddings=np.ones((2, 4), np.float32), position_ids=np.array([0.0, 1.0])),
        "position_ids",
        422,
        "integers",
        id="npz-float-ids",
    ),
    pytest.param(
        AS_NPZ,
        npz(embeddings=np.ones((2, 4), np.float32), cos=np.ones(2)),
        "cos",
        422,
        "member",
        id="npz-unknown-member",
    ),
    pytest.param(
        AS_NPZ, npz(position_ids=np.arange(2)), "embeddings", 422, "required", id="npz-missing"
    ),
]


@pytest.mark.parametrize(("headers", "body", "name", "status", "words"), BAD_BODIES)
def test_bad_bodies(
    http: httpx.Client, headers: dict[str, str], body: bytes, name: str, status: int, words: str
) -> None:
    response = http.post(APPLY, content=body, headers=headers)
    document = assert_problem(response, status, words)
    if name:
        assert [error["name"] for error in document["errors"]] == [name]
        assert document["errors"][0]["in"] == "body"


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param({"offset": -1}, "offset", id="offset-negative"),
        pytest.param({"max_len": 0}, "max_len", id="max_len-zero"),
        pytest.param({"base": 0.5}, "base", id="base"),
        pytest.param({"convention": "neox"}, "convention", id="convention"),
        pytest.param({"scaling": "su"}, "scaling", id="scaling"),
        pytest.param({"rounding": "x"}, "rounding", id="rounding"),
        pytest.param({"format": "csv"}, "format", id="format"),
        pytest.param({"head_dim": 4}, "head_dim", id="head_dim-is-the-body's"),
        pytest.param({"scale": 2}, "scale", id="scale-is-sinusoidal's"),
        pytest.param({"scaling": "linear"}, "factor", id="factor-missing"),
        pytest.param({"factor": 2}, "factor", id="factor-without-scaling"),
        pytest.param({"partial_rotary_factor": 0.25}, "partial_rotary_factor", id="rotary-dim-1"),
    ],
)
def test_bad_parameters(http: httpx.Client, query: dict[str, Any], name: str) -> None:
    document = assert_problem(http.post(url(**query), content=GOOD, headers=AS_NPY), 422)
    assert [error["name"] for error in document["errors"]] == [name]


def test_an_odd_head_dim_is_refused(http: httpx.Client) -> None:
    body = npy(np.ones((3, 7), np.float32))
    document = assert_problem(http.post(APPLY, content=body, headers=AS_NPY), 422, "even")
    assert [error["name"] for error in document["errors"]] == ["head_dim"]
    fine = http.post(url(partial_rotary_factor=0.5), content=npy(np.ones((3, 12))), headers=AS_NPY)
    assert fine.status_code == 200


@pytest.mark.parametrize(
    ("query", "body"),
    [
        pytest.param({"max_len": 2}, GOOD, id="offset-rows"),
        pytest.param({"max_len": 10, "offset": 8}, GOOD, id="offset"),
        pytest.param(
            {"max_len": 10},
            b'{"embeddings": [[1.0, 2.0], [3.0, 4.0]], "position_ids": [0, 10]}',
            id="position_ids",
        ),
    ],
)
def test_positions_at_or_past_max_len(
    http: httpx.Client, query: dict[str, Any], body: bytes
) -> None:
    headers = AS_JSON if body.startswith(b"{") else AS_NPY
    document = assert_problem(http.post(url(**query), content=body, headers=headers), 422)
    assert document["errors"][0]["name"] == "max_len"


def test_positions_past_the_largest_are_refused(http: httpx.Client) -> None:
    document = assert_problem(
        http.post(url(offset=2**31 - 2), content=GOOD, headers=AS_NPY), 422, "PE_MAX_POSITION"
    )
    assert (document["setting"], document["limit"]) == ("PE_MAX_POSITION", 2**31 - 1)


def test_far_scattered_position_ids_cost_only_their_rows(http: httpx.Client) -> None:
    x = batch((2, 3, 2, 128), "float32", seed=14)
    ids = np.array([[2**31 - 1, 3], [70_000, 9_000_000]])
    response = http.post(
        url(format="npy"), content=npz(embeddings=x, position_ids=ids), headers=AS_NPZ
    )
    assert response.status_code == 200, response.text
    assert np.array_equal(load(response), rotated(x, ids))


_YARN = {"scaling": "yarn", "factor": 2, "original_max_position_embeddings": 4}


@pytest.mark.parametrize(
    ("query", "value", "blamed"),
    [
        # 60000 in a pair rotated by 45 degrees is 60000 sqrt 2: past float16 with no scaling
        pytest.param({}, 60000, ("embeddings", "body"), id="no-scaling"),
        # 30000 sqrt 2 fits; times the attention factor yarn derives from factor (3.07) not
        pytest.param({**_YARN, "factor": 1e9}, 30000, ("scaling", "query"), id="derived"),
        pytest.param({**_YARN, "attention_factor": 1000}, 1000, ("scaling", "query"), id="given"),
        # the attention factor mscale and mscale_all_dim derive is out of range: refused
        # before any arithmetic, naming what derived it
        pytest.param(
            {**_YARN, "factor": 1e9, "mscale": 1e6, "mscale_all_dim": 1},
            1,
            ("mscale", "query"),
            id="derived-out-of-range",
        ),
    ],
)
def test_a_float16_overflow_names_only_what_was_sent(
    http: httpx.Client, query: dict[str, Any], value: float, blamed: tuple[str, str]
) -> None:
    """A float16 result that overflows, or an attention factor out of range, is a 422 (not a
    500, nor a RuntimeWarning on the way) naming what the client sent: the embeddings, the
    scaling whose attention factor took them past float16, or what derived it. Never
    attention_factor when it was not given."""
    x = np.full((2, 3, 8), value, np.float16)
    x[..., 4:] *= -1  # b = -a: some angle puts a pair's whole magnitude in one member
    document = assert_problem(http.post(url(**query), content=npy(x), headers=AS_NPY), 422)
    assert [(error["name"], error["in"]) for error in document["errors"]] == [blamed]
    assert "attention_factor" in query or "attention_factor:" not in document["detail"]


def test_limits(small_in_process_app: httpx.BaseTransport) -> None:
    with client_of(small_in_process_app) as client:
        body = npy(np.zeros((40, 30), np.float32))
        document = assert_problem(
            client.post(url(format="json"), content=body, headers=AS_NPY), 422
        )
        assert (document["setting"], document["limit"]) == ("PE_MAX_JSON_ELEMENTS", 1000)
        assert client.post(APPLY, content=body, headers=AS_NPY).status_code == 200
        too_big = client.post(APPLY, content=b"\0" * 100_001, headers=AS_NPY)
        assert too_big.status_code == 413
    with in_process(create_app(Settings(max_elements=1000))) as client:
        document = assert_problem(
            client.post(APPLY, content=npy(np.ones((100, 8), np.float32)), headers=AS_NPY), 422
        )
        assert (document["setting"], document["requested"]) == ("PE_MAX_ELEMENTS", 100 * 16)
