"""safetensors files: written by the library (tables' parameters in ``__metadata__``, in
their own order, so a table's bytes never change), read as views of the body after every
part of a hostile header has been checked."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import numpy as np
import pytest
import safetensors
import safetensors.numpy

from service.codecs import safetensors as codec
from service.errors import InvalidInput, MalformedBody, ServiceError

MEMBERS = ("embeddings", "position_ids")
REQUIRED = MEMBERS[:1]
X = np.arange(12, dtype=np.float32).reshape(3, 4)
IDS = np.arange(3, dtype=np.int64)


def decode(body: bytes | bytearray) -> dict[str, np.ndarray[Any, Any]]:
    return codec.decode(body, MEMBERS, REQUIRED)


def header_of(body: bytes) -> dict[str, Any]:
    length = int.from_bytes(body[:8], "little")
    parsed: dict[str, Any] = json.loads(body[8 : 8 + length])
    return parsed


def made(header: object, data: bytes = b"", *, raw: bytes | None = None) -> bytes:
    """A file of ``header`` (as JSON, or ``raw`` bytes as they are) and ``data``."""
    text = json.dumps(header).encode() if raw is None else raw
    return len(text).to_bytes(8, "little") + text + data


def entry(dtype: str, shape: list[Any], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def test_a_table_round_trips_through_the_library() -> None:
    table = np.arange(40, dtype=">f8").reshape(10, 4)  # big-endian, in blocks, sliced
    parts = [table[:3, 1:], table[3:7, 1:], table[7:, 1:]]
    fields = {"max_len": 10, "preset": "fairseq", "shape": [10, 3], "scale": None, "x": 0.5}
    headers, body = codec.encode(fields, {"data": parts})
    assert headers == {"content-type": "application/x-safetensors"}
    loaded = safetensors.numpy.load(body)
    assert list(loaded) == ["data"]
    assert loaded["data"].dtype == np.dtype("<f8")
    assert np.array_equal(loaded["data"], table[:, 1:])
    assert header_of(body)["__metadata__"] == {
        "max_len": "10",
        "preset": "fairseq",
        "shape": "[10,3]",
        "scale": "null",
        "x": "0.5",
    }
    assert np.array_equal(decode_any(body)["data"], table[:, 1:])


def decode_any(body: bytes) -> dict[str, np.ndarray[Any, Any]]:
    return codec.decode(body, ("data", "cos", "sin"), ())


def test_named_tensors_keep_their_names() -> None:
    cos, sin = np.cos(X), np.sin(X)
    _, body = codec.encode({"dtype": "float32"}, {"cos": [cos[:1], cos[1:]], "sin": [sin]})
    loaded = safetensors.numpy.load(body)
    assert set(loaded) == {"cos", "sin"}
    assert np.array_equal(loaded["cos"], cos)
    assert np.array_equal(loaded["sin"], sin)


def test_the_bytes_are_the_same_every_time() -> None:
    """The library writes __metadata__ in a hash map's order, different from call to call:
    the codec puts it back in the fields' order, so a strong ETag names one body."""
    fields = {name: index for index, name in enumerate("qwertyuiopasdfgh")}
    bodies = {codec.encode(fields, {"data": [X]})[1] for _ in range(20)}
    assert len(bodies) == 1
    (body,) = bodies
    assert list(header_of(body)["__metadata__"]) == list(fields)
    assert safetensors.numpy.load(body)["data"].tobytes() == X.tobytes()


@pytest.mark.parametrize(
    "dtype", ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint64"]
)
def test_files_the_library_writes_are_read(dtype: str) -> None:
    embeddings = (np.arange(24) - 5).astype(dtype).reshape(2, 3, 4)
    body = safetensors.numpy.save({"embeddings": embeddings, "position_ids": IDS.astype(dtype)})
    arrays = decode(body)
    assert arrays["embeddings"].dtype == np.dtype(dtype).newbyteorder("<")
    assert np.array_equal(arrays["embeddings"], embeddings)
    assert np.array_equal(arrays["position_ids"], IDS.astype(dtype))


def test_the_arrays_are_writable_views_of_the_body() -> None:
    body = bytearray(safetensors.numpy.save({"embeddings": X, "position_ids": IDS}))
    arrays = decode(body)
    whole = np.frombuffer(body, np.uint8)
    for array in arrays.values():
        assert np.shares_memory(array, whole)
        assert array.flags.writeable
    assert not np.shares_memory(arrays["embeddings"], arrays["position_ids"])
    assert not decode(bytes(body))["embeddings"].flags.writeable


def test_a_large_body_is_read_without_a_copy() -> None:
    big = np.ones((256, 1024), np.float32)  # 1 MiB
    body = bytearray(safetensors.numpy.save({"embeddings": big}))
    tracemalloc.start()
    try:
        decode(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10


def test_metadata_and_empty_tensors_are_read() -> None:
    body = safetensors.numpy.save(
        {"embeddings": np.zeros((0, 4), np.float32), "position_ids": np.zeros(0, np.int32)},
        metadata={"format": "np", "anything": "goes"},
    )
    arrays = decode(body)
    assert arrays["embeddings"].shape == (0, 4)
    assert arrays["position_ids"].shape == (0,)


GOOD = {"embeddings": entry("F32", [3, 4], 0, 48)}
DATA = X.tobytes()


def variant(**changes: Any) -> bytes:
    """The file of X with its embeddings entry changed."""
    return made({"embeddings": {**GOOD["embeddings"], **changes}}, DATA)


MALFORMED = [
    pytest.param(b"", "shorter than its header's length", id="empty"),
    pytest.param(b"\x02\0\0\0\0\0\0", "shorter than its header's length", id="7-bytes"),
    pytest.param(b"\xff" * 8 + b"{}", "at most 65,536", id="header-length-2^64-1"),
    pytest.param((1 << 60).to_bytes(8, "little") + b"{}", "at most", id="header-length-2^60"),
    pytest.param(b"\x00\x01\0\0\0\0\0\0{}", "truncated", id="header-past-the-end"),
    pytest.param(made(None, raw=b" {}"), "start with '{'", id="leading-space"),
    pytest.param(made(None, raw=b"[]"), "start with '{'", id="array"),
    pytest.param(made(None, raw=b"{\xff}"), "not JSON", id="not-utf-8"),
    pytest.param(made(None, raw=b"{'a': 1}"), "not JSON", id="not-json"),
    pytest.param(made(None, raw=b"{}\0"), "not JSON", id="nul-padding"),
    pytest.param(made(None, raw=b'{"a": NaN}'), "not JSON", id="nan"),
    pytest.param(made(None, raw=b'{"a":' + b"[" * 60_000 + b"}"), "not JSON", id="deep"),
    pytest.param(made(None, raw=b'{"a": ' + b"9" * 5000 + b"}"), "not JSON", id="long-int"),
    pytest.param(
        made(None, raw=b'{"embeddings": {}, "embeddings": {}}'), "more than once", id="duplicate"
    ),
    pytest.param(
        made(None, raw=b'{"__metadata__": {"a": "1", "a": "2"}}'), "more than once", id="dup-meta"
    ),
    pytest.param(made({"__metadata__": {"a": 1}}), "text to text", id="metadata-number"),
    pytest.param(made({"__metadata__": ["a"]}), "text to text", id="metadata-list"),
    pytest.param(
        made({f"t{i}": entry("F32", [0], 0, 0) for i in range(17)}), "17 tensors", id="17-tensors"
    ),
    pytest.param(made({"embeddings": [1]}), "the keys dtype, shape", id="entry-list"),
    pytest.param(made({"embeddings": {"dtype": "F32", "shape": [3, 4]}}), "keys", id="no-offsets"),
    pytest.param(variant(extra=1), "keys", id="extra-key"),
    pytest.param(variant(dtype="Q99"), "not a safetensors one", id="unknown-dtype"),
    pytest.param(variant(dtype=4), "not a string", id="dtype-number"),
    pytest.param(variant(dtype="\ud800"), "\\ud800", id="dtype-surrogate"),
    pytest.param(variant(shape=[-3, -4]), "non-negative", id="negative"),
    pytest.param(variant(shape=[3.0, 4]), "integers", id="float-dims"),
    pytest.param(variant(shape=[True, 4]), "integers", id="bool-dims"),
    pytest.param(variant(shape="3,4"), "list", id="shape-text"),
    pytest.param(variant(shape=[1] * 65), "65 dimensions", id="65-dims"),
    pytest.param(
        variant(shape=[1 << 20, 1 << 20]), "needs 4,398,046,511,104 bytes", id="huge-shape"
    ),
    pytest.param(variant(shape=[1 << 40, 1 << 40]), "too large", id="past-numpy"),
    pytest.param(variant(shape=[3, 5]), "needs 60 bytes, its data_offsets span 48", id="short"),
    pytest.param(variant(shape=[0, 1 << 62, 4]), "too large", id="zero-times-huge"),
    pytest.param(variant(shape=[1 << 64]), "too large", id="dim-past-64-bits"),
    pytest.param(variant(data_offsets=[0, 48, 96]), "[begin, end]", id="three-offsets"),
    pytest.param(variant(data_offsets=[48, 0]), "begin <= end", id="backwards"),
    pytest.param(variant(data_offsets=[-48, 0]), "begin <= end", id="negative-offset"),
    pytest.param(variant(data_offsets=[0, 10**30]), "begin <= end", id="offset-past-64-bits"),
    pytest.param(variant(data_offsets=[0, "48"]), "[begin, end]", id="offset-text"),
    pytest.param(variant(data_offsets=[4, 52]), "leaves a gap", id="gap"),
    pytest.param(made(GOOD, DATA + b"\0" * 4), "end at 48, the file holds 52", id="trailing"),
    pytest.param(made(GOOD, DATA[:-1]), "end at 48, the file holds 47", id="truncated-data"),
    pytest.param(
        made({**GOOD, "position_ids": entry("I64", [3], 24, 48)}, DATA),
        "overlaps",
        id="overlap",
    ),
    pytest.param(
        made({**GOOD, "position_ids": entry("I64", [3], 48, 72)}, DATA), "holds 48", id="beyond"
    ),
]


@pytest.mark.parametrize(("body", "words"), MALFORMED)
def test_malformed_files_are_400(body: bytes, words: str) -> None:
    with pytest.raises(MalformedBody) as caught:
        decode(body)
    assert caught.value.status == 400
    assert caught.value.detail.startswith(("not a readable safetensors file", "the safetensors"))
    assert words in caught.value.detail
    assert len(caught.value.detail) < 300


@pytest.mark.parametrize("dtype", ["BF16", "BOOL", "F8_E4M3", "F8_E5M2", "C64", "F4"])
def test_dtypes_that_are_not_real_numbers_are_422(dtype: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode(made({"embeddings": entry(dtype, [2], 0, 4)}, b"\0" * 4))
    assert caught.value.status == 422
    assert caught.value.name == "embeddings"
    assert dtype in caught.value.detail


def test_tensors_are_named_as_the_endpoint_reads_them() -> None:
    with pytest.raises(InvalidInput, match="is not a tensor this endpoint reads") as unknown:
        decode(safetensors.numpy.save({"embeddings": X, "weights": X}))
    assert unknown.value.name == "weights"
    with pytest.raises(InvalidInput, match="required") as missing:
        decode(safetensors.numpy.save({"position_ids": IDS}))
    assert missing.value.name == "embeddings"
    with pytest.raises(InvalidInput) as odd:
        decode(made({"\ud800\n": entry("F32", [0], 0, 0)}))
    assert odd.value.name == "\\ud800\\n"


def test_every_refusal_is_one_the_library_would_not_read_as_we_would() -> None:
    """What the codec refuses, the library refuses too or reads into something numpy
    cannot hold or the service would not read: it is never a stricter reading of a file
    the library reads as intended."""
    lenient = {"leading-space", "duplicate", "dup-meta", "extra-key", "zero-times-huge"}
    lenient |= {"17-tensors"}  # the library has no bound
    for case in MALFORMED:
        body, _ = case.values
        assert isinstance(body, bytes)
        try:
            safetensors.deserialize(body)  # type: ignore[no-untyped-call]
        except safetensors.SafetensorError:
            continue
        assert case.id in lenient, case.id


def test_a_hostile_header_allocates_nothing_it_declares() -> None:
    hostile = [variant(shape=[1 << 20, 1 << 20]), variant(shape=[0, 1 << 62, 4])]
    tracemalloc.start()
    try:
        for body in hostile:
            with pytest.raises(ServiceError):
                decode(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10
