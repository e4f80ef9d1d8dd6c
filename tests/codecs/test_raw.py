"""Raw little-endian bytes with X-Shape and X-Dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.codecs import raw
from service.encodings import registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import SinusoidalKey
from service.errors import MalformedBody


def encoding(
    start: int, stop: int, d_model: int, dtype: DType, base: float = 10000.0
) -> np.ndarray[tuple[int, int], np.dtype[np.floating]]:
    return registry.rows(SinusoidalKey(d_model, base, "interleaved", dtype), start, stop)


@pytest.mark.parametrize("dtype", DTYPES)
def test_raw_round_trip(dtype: str) -> None:
    block = encoding(5, 25, 9, dtype)[:, 1:8]  # type: ignore[arg-type]
    headers, body = raw.encode([block])
    assert headers == {
        "content-type": "application/octet-stream",
        "x-shape": "20,7",
        "x-dtype": dtype,
    }
    assert len(body) == block.nbytes
    shape = tuple(int(n) for n in headers["x-shape"].split(","))
    assert np.array_equal(raw.decode(body, shape, headers["x-dtype"]), block)
    assert np.array_equal(
        np.frombuffer(body, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape), block
    )


def test_raw_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(MalformedBody):
        raw.decode(b"\0" * 7, (2, 1), "float32")


def test_blocks_of_rows_are_written_as_one_array() -> None:
    table = encoding(0, 40, 3, "float16")
    headers, body = raw.encode([table[:1], table[1:]])
    assert headers["x-shape"] == "40,3"
    assert body == table.tobytes()


def test_a_body_of_the_wrong_length_names_both_lengths() -> None:
    with pytest.raises(MalformedBody) as caught:
        raw.decode(b"\0" * 4000, (8, 128), "float32")
    assert caught.value.status == 400
    assert "4,000 bytes" in caught.value.detail
    assert "needs 4,096 bytes" in caught.value.detail
    assert "8,128 of float32" in caught.value.detail


def test_a_raw_body_is_read_in_place() -> None:
    body = bytearray(np.arange(6, dtype="<f8").tobytes())
    array = raw.decode(body, (2, 3), "float64")
    assert array.flags.writeable
    assert np.shares_memory(array, np.frombuffer(body, np.uint8))
    assert np.array_equal(array, np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize(
    ("text", "shape"),
    [("8,128,512", (8, 128, 512)), (" 2 , 3 ", (2, 3)), ("7", (7,)), ("0,5", (0, 5))],
)
def test_shapes_are_read(text: str, shape: tuple[int, ...]) -> None:
    assert raw.parse_shape(text) == shape


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("", "is not a shape", id="empty"),
        pytest.param("8,,4", "is not a shape", id="empty-dimension"),
        pytest.param("8,-4", "non-negative integers", id="negative"),
        pytest.param("8,4.0", "is not a shape", id="float"),
        pytest.param("+8,4", "is not a shape", id="plus"),
        pytest.param("8_000,4", "is not a shape", id="underscore"),
        pytest.param("８,4", "is not a shape", id="full-width-digit"),
        pytest.param("0x10", "is not a shape", id="hex"),
        pytest.param("8 4", "is not a shape", id="spaces"),
        pytest.param(",".join(["1"] * 65), "65 dimensions", id="65-dims"),
        pytest.param("9" * 20, "too large", id="20-digits"),
        pytest.param("9" * 5000, "too large", id="5000-digits"),
        pytest.param("4294967296,4294967296", "too large for any array", id="product"),
        pytest.param("0,4294967296,4294967296", "too large for any array", id="zero-times-huge"),
    ],
)
def test_bad_shapes_say_why(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words) as caught:
        raw.parse_shape(text)
    assert len(str(caught.value)) < 200


def test_dtypes_are_the_tables() -> None:
    assert [raw.parse_dtype(f" {name} ") for name in DTYPES] == list(DTYPES)
    for text in ("int8", "float", "Float32", "bfloat16", ""):
        with pytest.raises(ValueError, match="float32, float64, float16"):
            raw.parse_dtype(text)


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
    headers, body = raw.encode(parts)
    whole = np.concatenate(parts)
    assert headers["x-shape"] == ",".join(map(str, whole.shape))
    assert np.array_equal(raw.decode(body, whole.shape, headers["x-dtype"]), whole)
