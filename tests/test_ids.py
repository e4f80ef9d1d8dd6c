"""The transport-free answers about position ids (:mod:`service.ids`), driven without
HTTP: posted ids checked, the rows at them encoded, M-RoPE's ids for a layout."""

from __future__ import annotations

import gzip
import io
import zipfile

import numpy as np
import orjson
import pytest

from service import codecs, ids
from service.encodings import mrope_positions
from service.encodings.rotary import RotaryKey
from service.encodings.sinusoidal import SinusoidalKey
from service.errors import InvalidInput, MalformedBody
from service.metrics import Telemetry
from service.runtime import Runtime
from service.settings import Settings
from tests.support import npy_bytes


@pytest.fixture
def runtime() -> Runtime:
    return Runtime(Settings(), Telemetry(lambda: None))


def _table(runtime: Runtime, key: SinusoidalKey | RotaryKey, stop: int) -> np.ndarray:
    return np.concatenate(runtime.cache.rows(key, 0, stop))


def test_posted_ids_are_checked_and_keep_their_dtype(runtime: Runtime) -> None:
    limits = runtime.limits
    body = bytearray(npy_bytes(np.array([[3, 1], [0, 2]], dtype=np.uint8)))
    checked = ids.ids_of(body, "npy", True, 1, 4, limits)
    assert checked.dtype == np.uint8
    assert checked.shape == (2, 2)
    sent = bytearray(orjson.dumps({"position_ids": [[0, 1, 2], [3, 4, 5], [6, 7, 8]]}))
    assert ids.ids_of(sent, "json", True, 3, 4, limits).shape == (3, 3)
    with pytest.raises(MalformedBody, match="the body is empty"):
        ids.ids_of(bytearray(), "json", True, 1, 4, limits)
    negative = bytearray(orjson.dumps({"position_ids": [1, -2]}))
    with pytest.raises(InvalidInput, match="non-negative"):
        ids.ids_of(negative, "json", True, 1, 4, limits)
    with pytest.raises(InvalidInput, match=r"must be shaped \(2, L\) or \(2, B, L\)"):
        ids.ids_of(bytearray(orjson.dumps({"position_ids": [1, 2]})), "json", True, 2, 4, limits)
    infinite = bytearray(npy_bytes(np.array([0.5, np.inf])))
    with pytest.raises(InvalidInput, match="finite"):
        ids.ids_of(infinite, "npy", False, 1, 4, limits)


def test_rows_at_ids_are_the_tables_rows(runtime: Runtime) -> None:
    key = SinusoidalKey(4)
    at = np.array([[5, 0], [2, 2]], dtype=np.int64)
    headers, body = ids.rows_at_ids(runtime, key, at, 1, True, None, "npy", False, {})
    assert headers["content-type"] == codecs.types.MEDIA_TYPES["npy"]
    got = np.load(io.BytesIO(body))
    assert got.shape == (2, 2, 4)
    assert np.array_equal(got, _table(runtime, key, 6)[at])


def test_a_rows_named_arrays_are_named_members(runtime: Runtime) -> None:
    key = RotaryKey(8)
    at = np.array([7, 1, 3], dtype=np.int64)
    _, body = ids.rows_at_ids(runtime, key, at, 1, True, None, "npz", False, {"a": 1})
    table = _table(runtime, key, 8)
    with np.load(io.BytesIO(body)) as archive:
        assert np.array_equal(archive["cos"], table[at, :8])
        assert np.array_equal(archive["sin"], table[at, 8:])
    with zipfile.ZipFile(io.BytesIO(body)) as members:
        assert sorted(members.namelist()) == ["cos.npy", "sin.npy"]


def test_rows_at_ids_in_json_state_their_shape_and_gzip_when_asked(runtime: Runtime) -> None:
    key = SinusoidalKey(2)
    at = np.array([1, 0], dtype=np.int64)
    headers, body = ids.rows_at_ids(runtime, key, at, 1, True, None, "json", True, {"d": 2})
    assert headers["content-encoding"] == "gzip"
    document = orjson.loads(gzip.decompress(body))
    assert document["d"] == 2
    assert document["shape"] == [2, 2]
    assert np.allclose(document["data"], _table(runtime, key, 2)[at])


def test_mrope_ids_for_a_layout() -> None:
    runs = [mrope_positions.Run("text", text=3), mrope_positions.Run("image", grid=(1, 4, 4))]
    expected, delta = mrope_positions.position_ids(runs, 2, "qwen2_vl", 0)
    fields = {"model": "qwen2_vl", "spatial_merge_size": 2, "tokens_per_second": None}
    headers, body = ids.mrope_ids(runs, 2, "qwen2_vl", None, fields, "npy", False)
    assert headers["x-rope-delta"] == str(delta)
    assert np.array_equal(np.load(io.BytesIO(body)), expected)
    headers, body = ids.mrope_ids(runs, 2, "qwen2_vl", None, fields, "json", False)
    assert headers["content-type"] == "application/json"
    document = orjson.loads(body)
    assert document == {
        **fields,
        "length": expected.shape[1],
        "rope_delta": delta,
        "position_ids": expected.tolist(),
    }
    assert list(document)[-1] == "position_ids"
