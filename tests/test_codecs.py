from __future__ import annotations

import io
import pickle

import numpy as np
import orjson
import pytest

from service import codecs, core
from service.errors import InvalidParameter, MalformedBody, NotAcceptable


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        pytest.param(None, "json", id="absent"),
        pytest.param("", "json", id="empty"),
        pytest.param("*/*", "json", id="anything"),
        pytest.param("application/*", "json", id="application-any"),
        pytest.param("application/json", "json", id="json"),
        pytest.param("application/x-npy", "npy", id="npy"),
        pytest.param("application/octet-stream", "raw", id="raw"),
        pytest.param("APPLICATION/X-NPY", "npy", id="case-insensitive"),
        pytest.param("text/html, application/x-npy;q=0.5", "npy", id="skip-unknown"),
        pytest.param("application/json;q=0.5, application/x-npy", "npy", id="q-wins"),
        pytest.param("application/x-npy, application/json", "npy", id="client-order-on-tie"),
        pytest.param("application/json;q=0, */*", "npy", id="q0-excludes"),
        pytest.param("application/json;q=0, application/x-npy;q=0, */*;q=0.1", "raw", id="rest"),
        pytest.param("*/*;q=0.1, application/octet-stream;q=0.9", "raw", id="specific-q"),
        pytest.param(
            "application/x-npy; charset=x; q=0.8, application/json;q=0.7", "npy", id="params"
        ),
        pytest.param("application/json;q=bogus, application/x-npy;q=0.1", "npy", id="bad-q-is-0"),
        pytest.param("garbage", "json", id="unparseable"),
        pytest.param("*", "json", id="bare-star"),
    ],
)
def test_negotiation(accept: str | None, expected: str) -> None:
    assert codecs.negotiate(accept) == expected


@pytest.mark.parametrize(
    "accept",
    [
        pytest.param("text/html", id="html"),
        pytest.param("image/*", id="image-any"),
        pytest.param("*/*;q=0", id="nothing"),
        pytest.param(
            "application/json;q=0, application/x-npy;q=0, application/octet-stream;q=0", id="all-q0"
        ),
    ],
)
def test_nothing_acceptable_is_406(accept: str) -> None:
    with pytest.raises(NotAcceptable) as caught:
        codecs.negotiate(accept)
    assert caught.value.status == 406
    assert "application/x-npy" in caught.value.extensions["available"]


@pytest.mark.parametrize("dtype", core.DTYPES)
def test_npy_round_trip(dtype: str) -> None:
    table = core.encoding(0, 30, 12, dtype=dtype)  # type: ignore[arg-type]
    block = table[3:17, 2:9]  # not contiguous
    headers, body = codecs.encode_npy(block)
    assert headers == {"content-type": "application/x-npy"}
    loaded = np.load(io.BytesIO(body), allow_pickle=False)
    assert loaded.dtype == np.dtype(dtype).newbyteorder("<")
    assert np.array_equal(loaded, block)
    header_length = int.from_bytes(body[8:10], "little")
    assert (10 + header_length) % 64 == 0
    assert np.array_equal(codecs.decode_npy(body), block)


def test_npy_is_little_endian_whatever_the_input() -> None:
    big = np.arange(6, dtype=">f4").reshape(2, 3)
    _, body = codecs.encode_npy(big)
    assert b"'descr': '<f4'" in body
    assert np.array_equal(np.load(io.BytesIO(body)), big)


@pytest.mark.parametrize("dtype", core.DTYPES)
def test_raw_round_trip(dtype: str) -> None:
    block = core.encoding(5, 25, 9, dtype=dtype)[:, 1:8]  # type: ignore[arg-type]
    headers, body = codecs.encode_raw(block)
    assert headers == {
        "content-type": "application/octet-stream",
        "x-shape": "20,7",
        "x-dtype": dtype,
    }
    assert len(body) == block.nbytes
    shape = tuple(int(n) for n in headers["x-shape"].split(","))
    assert np.array_equal(codecs.decode_raw(body, shape, headers["x-dtype"]), block)
    assert np.array_equal(
        np.frombuffer(body, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape), block
    )


def test_raw_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(MalformedBody):
        codecs.decode_raw(b"\0" * 7, (2, 1), "float32")


@pytest.mark.parametrize(
    ("dtype", "text"),
    [
        pytest.param("float32", b"0.84147096", id="float32"),
        pytest.param("float16", b"0.8413", id="float16"),
        pytest.param("float64", b"0.8414709848078965", id="float64"),
    ],
)
def test_json_floats_are_the_shortest_that_round_trip(dtype: str, text: bytes) -> None:
    table = core.encoding(0, 2, 1, dtype=dtype)  # type: ignore[arg-type]
    headers, body = codecs.encode_json({"dtype": dtype}, table)
    assert headers == {"content-type": "application/json"}
    assert body == b'{"dtype":"' + dtype.encode() + b'","data":[[0.0],[' + text + b"]]}"


def significant_digits(text: str) -> str:
    mantissa = text.lower().split("e")[0].lstrip("-").replace(".", "")
    return mantissa.strip("0")


@pytest.mark.parametrize("dtype", core.DTYPES)
def test_json_round_trips_exactly_at_its_dtype(dtype: str) -> None:
    table = core.encoding(0, 200, 33, base=77.0, dtype=dtype)  # type: ignore[arg-type]
    block = table[50:150, 3:30]
    _, body = codecs.encode_json({}, block)
    data = np.array(orjson.loads(body)["data"], dtype=dtype)
    assert np.array_equal(data, block)
    tokens = body.decode().removeprefix('{"data":').replace("[", "").replace("]", "")
    written = tokens.rstrip("}").split(",")
    assert len(written) == block.size
    for text, value in zip(written, block.ravel(), strict=True):
        shortest = np.format_float_scientific(value, unique=True)
        assert significant_digits(text) == significant_digits(shortest), (text, shortest)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"", "magic", id="empty"),
        pytest.param(b"hello world", "magic", id="garbage"),
        pytest.param(pickle.dumps(np.zeros(3)), "magic", id="pickle"),
        pytest.param(codecs.encode_npy(np.zeros((4, 4)))[1][:-5], "bytes of data", id="truncated"),
        pytest.param(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'zz'", "readable", id="bad-header"),
    ],
)
def test_bad_npy_is_malformed(body: bytes, message: str) -> None:
    with pytest.raises(MalformedBody, match=message):
        codecs.decode_npy(body)


def test_object_npy_is_never_unpickled() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InvalidParameter, match="never unpickled"):
        codecs.decode_npy(buffer.getvalue())
