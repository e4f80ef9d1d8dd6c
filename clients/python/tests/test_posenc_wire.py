"""The client's wire helpers without a service: ``.npy`` both ways, query values, and the
errors answers stand for."""

from __future__ import annotations

import io
import subprocess
import sys
from typing import Any

import httpx
import numpy as np
import pytest
from posenc_client import ProblemError, read_npy, write_npy
from posenc_client._encoding import (
    NPY,
    NPZ,
    array_of,
    column_of,
    cos_sin_of,
    names_of,
    problem_of,
    query,
    read_npz,
    tables_of,
    wire,
    write_config,
)


@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f8", "<f2", "<i4"])
def test_npy_round_trip(dtype: str) -> None:
    array = np.arange(24).reshape(2, 3, 4).astype(dtype)
    again = read_npy(write_npy(array))
    assert again.dtype == array.dtype
    assert np.array_equal(again, array)
    assert again.flags.writeable
    fortran = read_npy(write_npy(np.asfortranarray(array)))
    assert np.array_equal(fortran, array)


def test_npy_is_numpys_own() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.eye(3, dtype=np.float32), allow_pickle=False)
    assert np.array_equal(read_npy(buffer.getvalue()), np.eye(3))
    loaded = np.load(io.BytesIO(write_npy(np.eye(2))), allow_pickle=False)
    assert np.array_equal(loaded, np.eye(2))


def test_pickles_are_neither_read_nor_written() -> None:
    objects = np.array([{"a": 1}, None], dtype=object)
    with pytest.raises(ValueError, match="pickle"):
        write_npy(objects)
    buffer = io.BytesIO()
    np.save(buffer, objects, allow_pickle=True)
    with pytest.raises(ValueError, match="pickle"):
        read_npy(buffer.getvalue())


def test_query_values() -> None:
    assert wire(True) == "true"
    assert wire(False) == "false"
    assert wire(0.1) == "0.1"
    assert wire(1 / 3) == "0.3333333333333333"
    assert wire(7) == "7"
    assert wire("split") == "split"
    assert wire([1, 2.5]) == "1.0,2.5"
    assert query({"a": 1, "b": None, "c": (0.5,)}) == {"a": "1", "c": "0.5"}
    # M-RoPE's pairs per axis are integers: 16,24,24, as a list or as the text
    assert query({"mrope_section": [16, 24.0, 24]}) == {"mrope_section": "16,24,24"}
    assert query({"mrope_section": "16,24,24"}) == {"mrope_section": "16,24,24"}
    assert query({"mrope_section": [1.5, 2]}) == {"mrope_section": "1.5,2"}  # to refuse


def test_header_lists() -> None:
    assert names_of(None) is None
    assert names_of("") == []
    assert names_of("rope, nope,rope") == ["rope", "nope", "rope"]
    assert names_of("text_config.head_dim, a%2Cb, x%20y") == ["text_config.head_dim", "a,b", "x y"]


def npz_of(**members: Any) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **members)
    return buffer.getvalue()


def test_tables_by_layer_type() -> None:
    one, two = np.ones((2, 4)), np.zeros((2, 4))
    layered = read_npz(npz_of(**{"a/cos": one, "a/sin": two, "b/cos": two, "b/sin": one}))
    tables = tables_of(layered)
    assert list(tables) == ["a", "b"]
    assert np.array_equal(tables["b"][1], one)
    assert list(tables_of(read_npz(npz_of(cos=one, sin=two)))) == [""]
    assert list(tables_of(read_npz(npz_of(cos=one, sin=two)), "full_attention")) == [
        "full_attention"
    ]
    with pytest.raises(ValueError, match="cos and sin of each table"):
        tables_of(read_npz(npz_of(**{"a/cos": one})))
    answer = httpx.Response(200, headers={"content-type": NPZ}, content=npz_of(**{"a/cos": one}))
    with pytest.raises(ValueError, match="give layer_type"):
        cos_sin_of(answer)
    column = httpx.Response(200, headers={"content-type": NPY}, content=write_npy(one.T[:, :1]))
    assert column_of(column).shape == (4,)


def test_problems() -> None:
    document = {"type": "urn:x", "title": "Bad", "status": 422, "detail": "why"}
    error = problem_of(httpx.Response(422, json=document))
    assert (error.status, error.type, error.title, error.detail) == (422, "urn:x", "Bad", "why")
    assert error.problem == document
    assert str(error) == "422 Bad: why"
    proxy = problem_of(httpx.Response(502, text="<html>bad gateway</html>"))
    assert proxy.status == 502
    assert proxy.type == "about:blank"
    assert proxy.title == "Bad Gateway"
    assert "bad gateway" in proxy.detail
    with pytest.raises(ProblemError):
        array_of(httpx.Response(404, json={"title": "Not Found"}))


def test_an_answer_that_is_not_npy_is_refused() -> None:
    with pytest.raises(ValueError, match=r"expected an \.npy answer"):
        array_of(httpx.Response(200, json={"data": []}))


def test_npz_answers() -> None:
    buffer = io.BytesIO()
    np.savez(buffer, cos=np.ones((2, 4), np.float32), sin=np.zeros((2, 4), np.float32))
    members = read_npz(buffer.getvalue())
    assert sorted(members) == ["cos", "sin"]
    assert members["cos"].flags.writeable
    cos, sin = cos_sin_of(
        httpx.Response(200, headers={"content-type": NPZ}, content=buffer.getvalue())
    )
    assert np.array_equal(cos, np.ones((2, 4)))
    assert np.array_equal(sin, np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"expected an \.npz answer"):
        cos_sin_of(httpx.Response(200, headers={"content-type": NPY}, content=b""))
    with pytest.raises(ProblemError):
        cos_sin_of(httpx.Response(422, json={"title": "Invalid parameter", "detail": "why"}))


@pytest.mark.parametrize(
    ("config", "body"),
    [
        pytest.param({"rope_theta": 1e6}, b'{"rope_theta": 1000000.0}', id="dict"),
        pytest.param(b'{"head_dim": 8}', b'{"head_dim": 8}', id="bytes-as-they-are"),
    ],
)
def test_config_bodies(config: dict[str, float] | bytes, body: bytes) -> None:
    assert write_config(config) == body


def test_a_config_json_cannot_say_is_refused() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        write_config({"rope_theta": float("inf")})


@pytest.mark.slow  # a fresh interpreter: the full run's
def test_it_imports_nothing_from_the_service() -> None:
    check = (
        "import sys; import posenc_client; "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'service'], 'service'"
    )
    subprocess.run([sys.executable, "-c", check], check=True)
