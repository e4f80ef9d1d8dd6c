"""JSON: the shortest round-tripping floats, and apply bodies."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from service.codecs import json
from service.encodings import registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import SinusoidalKey
from service.errors import Limit


def encoding(
    start: int, stop: int, d_model: int, dtype: DType, base: float = 10000.0
) -> np.ndarray[tuple[int, int], np.dtype[np.floating]]:
    return registry.rows(SinusoidalKey(d_model, base, "interleaved", dtype), start, stop)


@pytest.mark.parametrize(
    ("dtype", "text"),
    [
        pytest.param("float32", b"0.84147096", id="float32"),
        pytest.param("float16", b"0.8413", id="float16"),
        pytest.param("float64", b"0.8414709848078965", id="float64"),
    ],
)
def test_json_floats_are_the_shortest_that_round_trip(dtype: str, text: bytes) -> None:
    table = encoding(0, 2, 1, dtype)  # type: ignore[arg-type]
    headers, body = json.encode({"dtype": dtype}, [table])
    assert headers == {"content-type": "application/json"}
    assert body == b'{"dtype":"' + dtype.encode() + b'","data":[[0.0],[' + text + b"]]}"


def significant_digits(text: str) -> str:
    mantissa = text.lower().split("e")[0].lstrip("-").replace(".", "")
    return mantissa.strip("0")


@pytest.mark.parametrize("dtype", DTYPES)
def test_json_round_trips_exactly_at_its_dtype(dtype: str) -> None:
    table = encoding(0, 200, 33, dtype, base=77.0)  # type: ignore[arg-type]
    block = table[50:150, 3:30]
    _, body = json.encode({}, [block])
    data = np.array(orjson.loads(body)["data"], dtype=dtype)
    assert np.array_equal(data, block)
    tokens = body.decode().removeprefix('{"data":').replace("[", "").replace("]", "")
    written = tokens.rstrip("}").split(",")
    assert len(written) == block.size
    for text, value in zip(written, block.ravel(), strict=True):
        shortest = np.format_float_scientific(value, unique=True)
        assert significant_digits(text) == significant_digits(shortest), (text, shortest)


def test_blocks_of_rows_are_written_as_one_array() -> None:
    table = encoding(0, 20, 4, "float32")
    assert json.encode({}, [table[:3], table[3:]]) == json.encode({}, [table])


def test_a_body_decodes_to_its_arrays() -> None:
    arrays = json.decode(b'{"embeddings": [[1, 2]], "position_ids": [7]}', Limit(10, "PE_X"))
    assert arrays["embeddings"].dtype == np.float32
    assert arrays["position_ids"].tolist() == [7]
    assert "position_ids" not in json.decode(b'{"embeddings": [[1]]}', Limit(10, "PE_X"))


def test_the_number_count_is_bounded_before_parsing() -> None:
    with pytest.raises(Exception, match="PE_X") as caught:
        json.decode(b'{"embeddings": [[1, 2, 3]]}', Limit(2, "PE_X"))
    assert getattr(caught.value, "status", None) == 422
