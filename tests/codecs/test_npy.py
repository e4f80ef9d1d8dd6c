"""``.npy``: written with numpy's header, read without unpickling."""

from __future__ import annotations

import io
import pickle
import re
from typing import Any

import numpy as np
import pytest

from service.codecs import npy
from service.encodings import registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import SinusoidalKey
from service.errors import InvalidInput, MalformedBody
from tests.support import npy_bytes


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


def npy_file(header: str, data: bytes = b"", version: bytes = b"\x01\x00") -> bytes:
    """An ``.npy`` file with the header text ``header``, as sent, and ``data`` after it."""
    text = header.encode("latin1")
    length = len(text).to_bytes(2 if version == b"\x01\x00" else 4, "little")
    return b"\x93NUMPY" + version + length + text + data


def fields(descr: str = "'<f4'", fortran: str = "False", shape: str = "(3,)") -> str:
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"


def dims(*sizes: int) -> str:
    return "(" + "".join(f"{size}, " for size in sizes) + ")"


BIG = 2**70
HOSTILE_HEADERS = [
    pytest.param(fields(shape="(-1, 4)"), b"", "negative", id="negative-dimension"),
    pytest.param(fields(shape="(True, 4)"), b"\0" * 16, "integers", id="boolean-dimension"),
    pytest.param(fields(shape="(3.0,)"), b"\0" * 12, "integers", id="float-dimension"),
    pytest.param(fields(shape="[3]"), b"\0" * 12, "tuple", id="shape-a-list"),
    pytest.param(fields(shape="(3)"), b"\0" * 12, "tuple", id="shape-an-int"),
    pytest.param(fields(shape=dims(BIG)), b"", "too large", id="dimension-2**70"),
    pytest.param(fields(shape=dims(0, BIG)), b"", "too large", id="zero-size-2**70"),
    pytest.param(fields(shape=dims(2**32, 2**32, 0)), b"", "too large", id="size-overflows"),
    pytest.param(fields(shape=dims(3037000500, 3037000500)), b"", "too large", id="bytes-overflow"),
    pytest.param(fields(shape=dims(*[1] * 65)), b"\0" * 4, "64", id="65-dimensions"),
    pytest.param(fields(shape="(2**70,)"), b"", "readable", id="expression"),
    pytest.param(fields(shape="(2L, 3L)"), b"\0" * 24, "readable", id="python-2-long"),
    pytest.param(fields(shape="(" + "9" * 5000 + ",)"), b"", "readable", id="5000-digits"),
    pytest.param(fields(shape="(" * 150 + "3," + ")" * 150), b"", "readable", id="nested-tuples"),
    pytest.param(fields(shape="(" + "-" * 9000 + "3,)"), b"", "readable", id="unary-minus-x9000"),
    pytest.param(fields(descr="[" * 150 + "]" * 150), b"", "readable", id="nested-lists"),
    # brackets inside a string once hid the real nesting from a count of the text
    pytest.param(
        fields(descr="')))))' + " + "[" * 2000 + "]" * 2000), b"", "readable", id="hidden-nesting"
    ),
    pytest.param(fields(descr="'\\d'"), b"", "readable", id="backslash"),
    pytest.param(fields(fortran="'yes'"), b"\0" * 12, "fortran_order", id="fortran-order-text"),
    pytest.param(fields(descr="3"), b"\0" * 12, "descr", id="descr-an-int"),
    pytest.param("{'descr', 'shape'}", b"", "readable", id="a-set"),
    pytest.param("{'descr': '<f4', 'shape': (3,)}", b"\0" * 12, "keys", id="missing-key"),
    pytest.param(fields().replace("}", "'x': 1}"), b"\0" * 12, "keys", id="extra-key"),
    pytest.param(fields().replace("{", "{\0"), b"", "readable", id="nul"),
    pytest.param(fields(descr="'<f0'"), b"", "descr", id="descr-unknown"),
]


@pytest.mark.parametrize(("header", "data", "words"), HOSTILE_HEADERS)
def test_hostile_headers_are_malformed(header: str, data: bytes, words: str) -> None:
    with pytest.raises(MalformedBody, match=words) as caught:
        npy.decode(bytearray(npy_file(header, data)))
    assert "0x" not in caught.value.detail
    assert len(caught.value.detail) < 300


@pytest.mark.parametrize(
    ("body", "words"),
    [
        pytest.param(b"\x93NUMPY\x01\x00", "truncated", id="no-length"),
        pytest.param(b"\x93NUMPY\x02\x00\x05\x00", "truncated", id="short-length"),
        pytest.param(b"\x93NUMPY\x01\x00\x05\x00{'des", "readable", id="length-too-short"),
        pytest.param(b"\x93NUMPY\x01\x00\xff\x00{'descr'", "truncated", id="length-too-long"),
        pytest.param(b"\x93NUMPY\x02\x00\xff\xff\xff\x7f{", "10,000", id="length-2**31"),
        pytest.param(npy_file(fields(), b"\0" * 12, b"\x03\x00"), "version", id="version-3"),
    ],
)
def test_bad_header_lengths_are_malformed(body: bytes, words: str) -> None:
    with pytest.raises(MalformedBody, match=words):
        npy.decode(body)


@pytest.mark.parametrize(
    ("descr", "itemsize", "words"),
    [
        pytest.param("'|V0'", 0, "raw bytes", id="void-0"),
        pytest.param("'<U0'", 0, "strings", id="str-0"),
        pytest.param("'|S0'", 0, "bytes", id="bytes-0"),
        pytest.param("'|V8'", 8, "raw bytes", id="void"),
        pytest.param("'<U3'", 12, "strings", id="str"),
        pytest.param("'|S3'", 3, "bytes", id="bytes"),
        pytest.param("'<M8[ns]'", 8, "datetimes", id="datetime"),
        pytest.param("'<m8[s]'", 8, "timedeltas", id="timedelta"),
        pytest.param("'<c16'", 16, "complex128", id="complex"),
        pytest.param("'|b1'", 1, "booleans", id="bool"),
        pytest.param("('<f4', (2,))", 8, "structured or subarray", id="subarray"),
        pytest.param("'(2,)<f4'", 8, "'(2,)<f4'", id="subarray-text"),
        pytest.param("[('a', '<f4')]", 4, "structured or subarray", id="structured"),
        pytest.param("'<f4,<f4'", 8, "'<f4,<f4'", id="structured-text"),
    ],
)
def test_only_real_numbers_are_read(descr: str, itemsize: int, words: str) -> None:
    body = npy_file(fields(descr=descr), b"\0" * 3 * itemsize)
    with pytest.raises(InvalidInput, match=re.escape(words)) as caught:
        npy.decode(bytearray(body))
    assert caught.value.name == "embeddings"
    assert "real numbers" in caught.value.detail


@pytest.mark.parametrize(
    "array",
    [
        pytest.param(np.arange(6, dtype="<f2").reshape(2, 3), id="float16"),
        pytest.param(np.arange(6, dtype=">f8").reshape(3, 2), id="big-endian-float64"),
        pytest.param(np.asfortranarray(np.ones((3, 4), np.float32)), id="fortran"),
        pytest.param(np.arange(4, dtype=np.uint8), id="uint8"),
        pytest.param(np.arange(4, dtype=np.int64), id="int64"),
        pytest.param(np.ones((0, 5), np.float32), id="empty"),
        pytest.param(np.float32(3.5).reshape(()), id="scalar"),
        pytest.param(np.ones((1,) * 64, np.float32), id="64-dimensions"),
    ],
)
def test_every_real_array_is_read_as_a_view(array: np.ndarray[Any, Any]) -> None:
    body = bytearray(npy_bytes(array))
    decoded = npy.decode(body)
    assert decoded.dtype == array.dtype
    assert np.array_equal(decoded, array)
    if decoded.size:
        assert np.shares_memory(decoded, np.frombuffer(body, np.uint8))


def test_headers_of_other_writers_are_read() -> None:
    """Double quotes, no trailing comma, no padding; a version 2.0 header."""
    data = np.arange(6, dtype="<f4").tobytes()
    header = '{"descr": "<f4", "fortran_order": False, "shape": (2, 3)}'
    assert npy.decode(npy_file(header, data)).shape == (2, 3)
    assert npy.decode(npy_file(fields(shape="(6,)"), data, b"\x02\x00")).shape == (6,)


@pytest.mark.parametrize(
    "parts",
    [
        pytest.param([np.ones((0,), np.float32)], id="(0,)"),
        pytest.param([np.ones((2, 0, 3), np.float16)], id="(2,0,3)"),
        pytest.param([np.ones((0, 3)), np.ones((2, 3)), np.ones((0, 3))], id="empty-blocks"),
    ],
)
def test_arrays_with_no_element_are_written(parts: list[np.ndarray[Any, Any]]) -> None:
    """A zero in a shape is an array like any other (``memoryview.cast`` refuses it)."""
    _, body = npy.encode(parts)
    written = np.load(io.BytesIO(body), allow_pickle=False)
    assert np.array_equal(written, np.concatenate(parts))
    assert written.shape == np.concatenate(parts).shape
