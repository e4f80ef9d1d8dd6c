"""``.npy``: written with numpy's header, read without unpickling."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

from service.codecs import npy
from service.encodings import registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import SinusoidalKey
from service.errors import InvalidInput, MalformedBody


def encoding(
    start: int, stop: int, d_model: int, dtype: DType, base: float = 10000.0
) -> np.ndarray[tuple[int, int], np.dtype[np.floating]]:
    return registry.rows(SinusoidalKey(d_model, base, "interleaved", dtype), start, stop)


@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_round_trip(dtype: str) -> None:
    table = encoding(0, 30, 12, dtype)  # type: ignore[arg-type]
    block = table[3:17, 2:9]  # not contiguous
    headers, body = npy.encode([block])
    assert headers == {"content-type": "application/x-npy"}
    loaded = np.load(io.BytesIO(body), allow_pickle=False)
    assert loaded.dtype == np.dtype(dtype).newbyteorder("<")
    assert np.array_equal(loaded, block)
    header_length = int.from_bytes(body[8:10], "little")
    assert (10 + header_length) % 64 == 0
    assert np.array_equal(npy.decode(body), block)


def test_npy_is_little_endian_whatever_the_input() -> None:
    big = np.arange(6, dtype=">f4").reshape(2, 3)
    _, body = npy.encode([big])
    assert b"'descr': '<f4'" in body
    assert np.array_equal(np.load(io.BytesIO(body)), big)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"", "magic", id="empty"),
        pytest.param(b"hello world", "magic", id="garbage"),
        pytest.param(pickle.dumps(np.zeros(3)), "magic", id="pickle"),
        pytest.param(npy.encode([np.zeros((4, 4))])[1][:-5], "bytes of data", id="truncated"),
        pytest.param(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'zz'", "readable", id="bad-header"),
    ],
)
def test_bad_npy_is_malformed(body: bytes, message: str) -> None:
    with pytest.raises(MalformedBody, match=message):
        npy.decode(body)


def test_object_npy_is_never_unpickled() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InvalidInput, match="never unpickled"):
        npy.decode(buffer.getvalue())


def test_blocks_of_rows_are_written_as_one_array() -> None:
    table = encoding(0, 50, 6, "float32")
    _, body = npy.encode([table[:7], table[7:8], table[8:]])
    assert body == npy.encode([table])[1]
    assert np.array_equal(np.load(io.BytesIO(body)), table)


def test_the_header_is_numpys_own() -> None:
    block = encoding(0, 3, 5, "float64")
    saved = io.BytesIO()
    np.save(saved, block)
    assert npy.encode([block])[1] == saved.getvalue()
