"""JSON: the shortest round-tripping floats, and apply bodies."""

from __future__ import annotations

import tracemalloc

import numpy as np
import orjson
import pytest

from service.codecs import json
from service.encodings import registry
from service.encodings.registry import DTYPES, DType
from service.encodings.sinusoidal import SinusoidalKey
from service.errors import InvalidInput, Limit, LimitExceeded, MalformedBody


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


@pytest.mark.parametrize("dtype", DTYPES)
def test_infinities_and_nan_are_null_at_every_dtype(dtype: str) -> None:
    array = np.array([[-np.inf, 1.5, np.inf, np.nan]], dtype=dtype)
    _, body = json.encode({}, [array])
    assert orjson.loads(body) == {"data": [[None, 1.5, None, None]]}


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


ROOMY = Limit(1 << 20, "PE_MAX_JSON_ELEMENTS")


def nested(depth: int) -> bytes:
    return b"[" * depth + b"1.0" + b"]" * depth


@pytest.mark.parametrize(
    ("body", "name", "words"),
    [
        pytest.param(b'{"embeddings": [[1.0, "2"]]}', "embeddings", "strings", id="string"),
        pytest.param(b'{"embeddings": [[1.0, true]]}', "embeddings", "true", id="true"),
        pytest.param(b'{"embeddings": [[false, 1.0]]}', "embeddings", "false", id="false"),
        pytest.param(b'{"embeddings": [[1.0, null]]}', "embeddings", "null", id="null"),
        pytest.param(b'{"embeddings": [[1.0, {}]]}', "embeddings", "objects", id="object"),
        pytest.param(b'{"embeddings": [["1.5", 2]]}', "embeddings", "strings", id="numeric-text"),
        pytest.param(b'{"embeddings": [[1.0], 2.0]}', "embeddings", "ragged", id="list-and-number"),
        pytest.param(b'{"embeddings": [[1.0, 2.0], [3.0]]}', "embeddings", "ragged", id="ragged"),
        pytest.param(
            b'{"embeddings": [[[1.0]], [1.0]]}', "embeddings", "ragged", id="ragged-depth"
        ),
        pytest.param(b'{"embeddings": "abc"}', "embeddings", "list", id="a-string"),
        pytest.param(b'{"embeddings": 1.0}', "embeddings", "list", id="a-number"),
        pytest.param(b'{"embeddings": null}', "embeddings", "list", id="null-embeddings"),
        pytest.param(
            b'{"embeddings": ' + nested(70) + b"}", "embeddings", "64 dimensions", id="70-deep"
        ),
        pytest.param(
            b'{"embeddings": [[1e39]]}', "embeddings", "float32 range", id="float32-range"
        ),
        pytest.param(
            b'{"embeddings": [[1e300]], "dtype": "float16"}',
            "embeddings",
            "float16 range",
            id="float16-range",
        ),
        pytest.param(
            b'{"embeddings": [[70000]], "dtype": "float16"}',
            "embeddings",
            "float16 range",
            id="float16-integer-range",
        ),
        pytest.param(b'{"embeddings": [[1.0]], "dtype": "true"}', "dtype", "float16", id="dtype"),
        pytest.param(b'{"embeddings": [[1.0]], "dtype": null}', "dtype", "float16", id="no-dtype"),
        pytest.param(b'{"embeddings": [[1.0]], "null": 1}', "null", "not a field", id="key-null"),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": [1.5]}',
            "position_ids",
            "integers",
            id="fractional-id",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": [1.0]}',
            "position_ids",
            "integers",
            id="float-id",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": [true]}',
            "position_ids",
            "true",
            id="boolean-id",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": [18446744073709551616]}',
            "position_ids",
            "int64 range",
            id="id-over-2**64",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": [9223372036854775808]}',
            "position_ids",
            "int64 range",
            id="id-2**63",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": [-9223372036854775809]}',
            "position_ids",
            "int64 range",
            id="id-below-int64",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": "0"}', "position_ids", "list", id="ids-text"
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "embeddings": [[2.0]]}',
            "embeddings",
            "more than once",
            id="duplicate-key",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "embedd\\u0069ngs": [[2.0]]}',
            "embeddings",
            "more than once",
            id="duplicate-escaped-key",
        ),
        pytest.param(
            b'{"dtype": "float64", "embeddings": [[1.0]], "dtype": "float16"}',
            "dtype",
            "more than once",
            id="duplicate-dtype",
        ),
        pytest.param(
            b'{"embeddings": [[1.0]], "position_ids": [0], "position_ids": [1]}',
            "position_ids",
            "more than once",
            id="duplicate-ids",
        ),
    ],
)
def test_bad_bodies_name_their_field(body: bytes, name: str, words: str) -> None:
    with pytest.raises(InvalidInput, match=words) as caught:
        json.decode(body, ROOMY)
    assert caught.value.name == name


@pytest.mark.parametrize(
    ("body", "words"),
    [
        pytest.param(b'{"embeddings": ' + nested(1100) + b"}", "deep", id="1100-deep"),
        pytest.param(b'{"embeddings": [[NaN]]}', "NaN", id="nan"),
        pytest.param(b'{"embeddings": [[1e999]]}', "JSON", id="overflow"),
        pytest.param(b'{"embeddings": [[1.0]]', "JSON", id="truncated"),
        pytest.param(b'{"embeddings": [[1.0]], "dtype": "\xff"}', "JSON", id="not-utf8"),
    ],
)
def test_bodies_that_are_not_json_are_malformed(body: bytes, words: str) -> None:
    with pytest.raises(MalformedBody, match=words):
        json.decode(body, ROOMY)


def test_strings_never_become_a_numpy_array() -> None:
    """numpy makes a fixed-width array of the longest string: 100 kB posted, 400 MB built."""
    body = orjson.dumps({"embeddings": ["x" * 100_000, *[""] * 999]})
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput, match="strings"):
            json.decode(body, ROOMY)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(body) + (1 << 20)


@pytest.mark.parametrize(
    ("body", "shape"),
    [
        pytest.param(b'{"embeddings": []}', (0,), id="empty"),
        pytest.param(b'{"embeddings": [[], []]}', (2, 0), id="empty-rows"),
        pytest.param(b'{"embeddings": ' + nested(64) + b"}", (1,) * 64, id="64-deep"),
        pytest.param(b'{"embeddings": [[1, 2.5], [18446744073709551615, -3]]}', (2, 2), id="ints"),
        pytest.param(b'{"embeddings": [[1.0]], "position_ids": null}', (1, 1), id="ids-null"),
        pytest.param(b'{"embeddings": [[1.0]], "dtype": "true\\u0020"}', None, id="escaped-value"),
    ],
)
def test_good_bodies_decode(body: bytes, shape: tuple[int, ...] | None) -> None:
    if shape is None:
        with pytest.raises(InvalidInput, match="float16") as caught:
            json.decode(body, ROOMY)
        assert caught.value.name == "dtype"
        return
    arrays = json.decode(body, ROOMY)
    assert arrays["embeddings"].shape == shape
    assert arrays["embeddings"].dtype == np.float32
    assert list(arrays) == ["embeddings"]


def test_position_ids_are_int64() -> None:
    body = b'{"embeddings": [[1.0], [2.0]], "position_ids": [0, 9223372036854775807]}'
    ids = json.decode(body, ROOMY)["position_ids"]
    assert ids.dtype == np.int64
    assert ids.tolist() == [0, 2**63 - 1]


def test_lists_and_objects_count_as_the_numbers_they_cost() -> None:
    """1,990 groups nested 1,000 deep (4 MB, within 2M brackets) took orjson 0.66 s of the
    GIL, stalling every other client: each list past the first 64 counts as 16 numbers."""
    nested = b"[" + b",".join([b"[" * 1000 + b"]" * 1000] * 1990) + b"]"
    body = b'{"embeddings": ' + nested + b"}"
    with pytest.raises(LimitExceeded, match="lists and objects past the first 64") as caught:
        json.decode(body, Limit(1 << 21, "PE_MAX_JSON_ELEMENTS"))
    assert caught.value.extensions["setting"] == "PE_MAX_JSON_ELEMENTS"
    # rows of a real tensor cost far less than their numbers
    rows = orjson.dumps({"embeddings": np.ones((4096, 16)).tolist()})
    assert json.decode(rows, Limit(65536 + 8 * 4096, "PE_X"))["embeddings"].shape == (4096, 16)


def test_a_bodys_lists_are_charged_what_they_cost() -> None:
    """262,000 lists of one id each (1 MB) passed the numbers' check and took a third of a
    second of the GIL to parse: charged what they cost, they are over the limit; the same
    ids in one list, and the largest body of numbers the limit allows in rows, are not."""
    body = orjson.dumps({"position_ids": [[1]] * 262_000})
    limit = Limit(1 << 21, "PE_MAX_JSON_ELEMENTS")
    with pytest.raises(LimitExceeded, match="lists") as caught:
        json.positions(body, limit, True)
    assert caught.value.extensions["requested"] >= (262_000 - 64) * json.CONTAINER_COST
    assert json.positions(orjson.dumps({"position_ids": [1] * 262_000}), limit, True).size
    rows = b'{"embeddings":[' + b",".join([b"[" + b",".join([b"0.5"] * 512) + b"]"] * 4096)
    assert json.decode(rows + b"]}", limit)["embeddings"].shape == (4096, 512)
