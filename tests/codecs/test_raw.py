"""Raw little-endian bytes with X-Shape and X-Dtype."""

from __future__ import annotations

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
