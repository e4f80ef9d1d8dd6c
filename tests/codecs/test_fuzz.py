"""The body decoders under hostile input: a seeded mutation fuzzer over valid ``.npy``,
``.npz``, safetensors and JSON bodies, and hypothesis strategies for the parts worth
generating whole. Whatever comes in, a decoder returns arrays or raises one of the
service's own errors: anything else would be a 500. What the safetensors codec reads, the
library reads too, to the same tensors."""

from __future__ import annotations

import contextlib
import io
import json as stdlib_json
import random
import re
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import orjson
import pytest
import safetensors
import safetensors.numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from service.codecs import json, npy, npz
from service.codecs import safetensors as safetensors_codec
from service.errors import Limit, ServiceError
from tests.support import examples, npy_bytes, npz_bytes

CASES: Final = 3000  # per seed, three seeds per format: a fraction of a second each
MEMBERS: Final = ("embeddings", "position_ids")
ROOMY: Final = Limit(1 << 20, "PE_MAX_BODY_BYTES")
TIGHT: Final = Limit(300, "PE_MAX_BODY_BYTES")
NUMBERS: Final = Limit(10_000, "PE_MAX_JSON_ELEMENTS")
FUZZ = settings(max_examples=examples(150), deadline=None, derandomize=True)

Decoder = Callable[[bytes], object]


def decode_npy(body: bytes) -> object:
    buffer = bytearray(body)
    array = npy.decode(buffer)
    if array.size:  # the fast path computes in place: the array must be the body's bytes
        assert np.shares_memory(array, np.frombuffer(buffer, np.uint8))
    return array


def decode_npz(body: bytes) -> object:
    with contextlib.suppress(ServiceError):  # the decompressed-size bound's path too
        npz.decode(body, TIGHT, MEMBERS, MEMBERS[:1])
    return npz.decode(body, ROOMY, MEMBERS, MEMBERS[:1])


def decode_safetensors(body: bytes) -> object:
    buffer = bytearray(body)
    arrays = safetensors_codec.decode(buffer, MEMBERS, MEMBERS[:1])
    # the library reads what the codec reads (it raises, failing the test, if it refuses)
    read = dict(safetensors.deserialize(body))  # type: ignore[no-untyped-call]
    assert set(read) == set(arrays)
    for name, array in arrays.items():
        assert read[name]["shape"] == list(array.shape)
        assert read[name]["data"] == array.tobytes()
        if array.size:  # a view of the body, not a copy
            assert np.shares_memory(array, np.frombuffer(buffer, np.uint8))
    return arrays


def decode_json(body: bytes) -> object:
    arrays = json.decode(body, NUMBERS)
    assert arrays["embeddings"].dtype.kind == "f"
    assert "position_ids" not in arrays or arrays["position_ids"].dtype == np.int64
    return arrays


def outcome(decode: Decoder, body: bytes, case: str) -> str:
    """``"decoded"`` or the name of the service error raised; any other exception fails
    the test with the case that raised it."""
    refused: ServiceError | None = None
    try:
        decode(body)
    except ServiceError as exc:
        refused = exc
    except Exception as exc:
        pytest.fail(f"{case}: {type(exc).__name__}: {exc}\nbody: {body[:300]!r}")
    if refused is None:
        return "decoded"
    assert "object at 0x" not in refused.detail, (case, refused.detail)
    assert len(refused.detail) < 1000, (case, refused.detail)
    return type(refused).__name__


def _seeds_npy() -> list[bytes]:
    rng = np.random.default_rng(0)
    arrays = [
        rng.standard_normal((3, 4)).astype(np.float32),
        rng.standard_normal((2, 3, 2)).astype(">f8"),
        np.asfortranarray(rng.standard_normal((4, 3)).astype(np.float16)),
        np.arange(5, dtype=np.int64),
        np.zeros((0, 3), np.float32),
    ]
    seeds = [npy_bytes(array) for array in arrays]
    version_2 = seeds[0][:6] + b"\x02\x00" + seeds[0][8:10] + b"\0\0" + seeds[0][10:]
    return [*seeds, version_2]


def _seeds_npz() -> list[bytes]:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    return [
        npz.encode(embeddings=x)[1],
        npz_bytes(embeddings=x, position_ids=np.arange(3)),
        _compressed(embeddings=x),
        _compressed(embeddings=x, position_ids=np.arange(3)),
    ]


def _compressed(**arrays: np.ndarray[Any, Any]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _seeds_safetensors() -> list[bytes]:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    save = safetensors.numpy.save
    return [
        safetensors_codec.encode({"dtype": "float32", "shape": [3, 4]}, {"embeddings": [x]})[1],
        save({"embeddings": x, "position_ids": np.arange(3, dtype=np.int32)}),
        save({"embeddings": x.astype(np.float16)}, metadata={"format": "np"}),
        save({"embeddings": x[None].astype(np.float64), "position_ids": np.arange(3)[None]}),
        save({"embeddings": np.zeros((0, 4), np.float32)}),
    ]


def _seeds_json() -> list[bytes]:
    return [
        b'{"embeddings": [[1.0, 2.5], [3, -4e-3]]}',
        b'{"embeddings": [[[0.5], [1.5]]], "position_ids": [[0, 7]], "dtype": "float64"}',
        b'{"dtype": "float16", "embeddings": [[1, 2, 3]], "position_ids": [4]}',
        b'{"embeddings": []}',
    ]


NPY_TOKENS: Final = re.compile(rb"'[^']*'|\([^)]*\)|False|True")
NPY_SPLICES: Final = [
    b"'|V0'",
    b"'<U0'",
    b"'|S0'",
    b"'<U3'",
    b"('<f4', (2,))",
    b"'(2,)<f4'",
    b"[('a', '<f4')]",
    b"'<c16'",
    b"'|b1'",
    b"'<M8[ns]'",
    b"'|O'",
    b"'<f0'",
    b"(-1, 4)",
    b"(True, 4)",
    b"(3.0,)",
    b"(" + b"1, " * 65 + b")",
    b"(1180591620717411303424,)",
    b"(0, 1180591620717411303424)",
    b"(4294967296, 4294967296, 0)",
    b"(" * 30 + b"3," + b")" * 30,
    b"[" * 30 + b"]" * 30,
    b"-" * 500 + b"1",
    b"2**70",
    b"'\\d'",
    b"None",
    b"{}",
    b"'fortran_order'",
    b"9" * 5000,
]
SAFETENSORS_TOKENS: Final = re.compile(rb'\d+|"[A-Za-z0-9_]*"|\[|\]|\{|\}')
SAFETENSORS_SPLICES: Final = [
    *(f'"{dtype}"'.encode() for dtype in ("BF16", "BOOL", "F16", "F64", "I8", "U64", "C64")),
    b'"__metadata__"',
    b'"position_ids"',
    b'"weights"',
    b"[]",
    b"[0]",
    b"[0,0]",
    b"[0, 4611686018427387904, 4]",
    b"18446744073709551615",
    b"1180591620717411303424",
    b"-1",
    b"1.5",
    b"null",
    b'{"a":1}',
    b"[" * 2000,
]
JSON_TOKENS: Final = re.compile(rb'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"[a-z0-9_]*"|\[|\]')
JSON_SPLICES: Final = [
    b'"x"',
    b'"' + b"a" * 5000 + b'"',
    b"true",
    b"false",
    b"null",
    b"{}",
    b"[]",
    b"[[]]",
    b"1e999",
    b"1e39",
    b"70000",
    b"1.5",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"9223372036854775808",
    b"NaN",
    b"[" * 70 + b"1" + b"]" * 70,
    b"[" * 1100,
    b'"embeddings"',
    b'"position_ids"',
    b'"dtype"',
    b'"embedd\\u0069ngs"',
    b'"\\ud800"',
]
INTERESTING: Final = [0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 64, 65, 10_000]


def mutate(
    rng: random.Random, body: bytes, tokens: re.Pattern[bytes], splices: list[bytes]
) -> bytes:
    """``body`` after one to four random edits: bit flips, inserted, deleted or repeated
    bytes, a cut, an interesting little-endian integer written over it, or one of its
    tokens replaced by a hostile one."""
    out = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out) + 1)
        edit = rng.randrange(8)
        if edit == 0 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif edit == 1:
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif edit == 2:
            del out[at : at + rng.randint(1, 16)]
        elif edit == 3:
            del out[at:]
        elif edit == 4:
            out[at:at] = out[at : at + rng.randint(1, 32)] * rng.randint(1, 3)
        elif edit == 5:
            width = rng.choice((1, 2, 4))
            value = rng.choice(INTERESTING) % 256**width
            out[at : at + width] = value.to_bytes(width, "little")
        else:
            found = list(tokens.finditer(bytes(out)))
            if found:
                token = rng.choice(found)
                out[token.start() : token.end()] = rng.choice(splices)
    return bytes(out)


FORMATS: Final = {
    "npy": (decode_npy, _seeds_npy, NPY_TOKENS, NPY_SPLICES),
    "npz": (decode_npz, _seeds_npz, NPY_TOKENS, NPY_SPLICES),
    "safetensors": (
        decode_safetensors,
        _seeds_safetensors,
        SAFETENSORS_TOKENS,
        SAFETENSORS_SPLICES,
    ),
    "json": (decode_json, _seeds_json, JSON_TOKENS, JSON_SPLICES),
}


# one seed per format in the inner loop, every seed in the full run
SEEDS: Final = [1, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (2, 3))]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_mutated_bodies_decode_or_are_refused(fmt: str, seed: int) -> None:
    decode, seeds, tokens, splices = FORMATS[fmt]
    rng = random.Random(seed)
    bodies = seeds()
    outcomes: dict[str, int] = {}
    for body in bodies:
        assert outcome(decode, body, f"{fmt} seed body") == "decoded"
    for case in range(CASES):
        body = mutate(rng, rng.choice(bodies), tokens, splices)
        result = outcome(decode, body, f"{fmt} seed {seed} case {case}")
        outcomes[result] = outcomes.get(result, 0) + 1
    # the fuzzer reaches both sides, or it tests nothing
    assert outcomes.get("decoded", 0) > 0, outcomes
    assert outcomes.get("MalformedBody", 0) + outcomes.get("InvalidInput", 0) > CASES // 4


@pytest.mark.parametrize("seed", SEEDS)
def test_mutated_safetensors_headers_keep_their_length_true(seed: int) -> None:
    """The same for a safetensors header alone, its length then written true, so that
    most cases reach the checks past the JSON text (each entry, names, offsets)."""
    rng = random.Random(seed)
    bodies = _seeds_safetensors()
    outcomes: dict[str, int] = {}
    for case in range(CASES):
        body = rng.choice(bodies)
        end = 8 + int.from_bytes(body[:8], "little")
        text = mutate(rng, body[8:end], SAFETENSORS_TOKENS, SAFETENSORS_SPLICES)
        framed = len(text).to_bytes(8, "little") + text + body[end:]
        result = outcome(decode_safetensors, framed, f"safetensors seed {seed} case {case}")
        outcomes[result] = outcomes.get(result, 0) + 1
    assert outcomes.get("decoded", 0) > 0, outcomes
    assert outcomes.get("MalformedBody", 0) > CASES // 4, outcomes
    assert outcomes.get("InvalidInput", 0) > 0, outcomes


def header(descr: object, fortran: object, shape: object) -> bytes:
    text = repr({"descr": descr, "fortran_order": fortran, "shape": shape}).encode()
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


descrs = st.sampled_from(["<f4", "<f8", "<f2", "|i1", "<u8", "|V0", "<U0", "<c8", "|b1", "|O"])
shapes = st.lists(st.integers(-2, 2**70) | st.booleans(), max_size=70).map(tuple)


@FUZZ
@given(
    descrs | st.text(max_size=12) | st.tuples(st.text(max_size=3), st.integers()),
    st.booleans() | st.integers(0, 1) | st.none(),
    shapes | st.integers() | st.lists(st.integers(0, 3), max_size=3),
    st.binary(max_size=64),
)
def test_generated_npy_headers(descr: object, fortran: object, shape: object, data: bytes) -> None:
    body = header(descr, fortran, shape) + data
    outcome(decode_npy, body, "generated header")


@FUZZ
@given(st.text(max_size=300), st.sampled_from([b"\x01\x00", b"\x02\x00"]))
def test_generated_npy_header_text(text: str, version: bytes) -> None:
    raw = text.encode("utf-8")
    width = 2 if version == b"\x01\x00" else 4
    body = b"\x93NUMPY" + version + len(raw).to_bytes(width, "little") + raw
    outcome(decode_npy, body, "generated header text")


dims = st.integers(0, 4) | st.integers(-2, 2**65) | st.booleans() | st.floats(0, 4)
tensor_entries = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "F16", "F64", "I64", "U8", "BF16", "BOOL", "X"]),
        "shape": st.lists(dims, max_size=4) | st.integers(),
        "data_offsets": st.lists(st.integers(-1, 80) | st.integers(-(2**70), 2**70), max_size=3),
    },
    optional={"extra": st.integers()},
)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["embeddings", "position_ids", "other", "__metadata__"]),
        tensor_entries | st.dictionaries(st.text(max_size=3), st.text(max_size=3)),
        max_size=3,
    ),
    st.integers(0, 80),
)
def test_generated_safetensors_headers(header: dict[str, Any], size: int) -> None:
    text = stdlib_json.dumps(header).encode()
    body = len(text).to_bytes(8, "little") + text + bytes(range(size))
    outcome(decode_safetensors, body, "generated safetensors header")


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)
fields = st.sampled_from(["embeddings", "position_ids", "dtype", "other"])


@FUZZ
@given(st.lists(st.tuples(fields, json_values | st.sampled_from(["float16", "float64"]))))
def test_generated_json_bodies(pairs: list[tuple[str, object]]) -> None:
    """Fields in any order, any number of times (written by hand: a dict cannot repeat)."""
    items = [f"{stdlib_json.dumps(key)}: {stdlib_json.dumps(value)}" for key, value in pairs]
    body = ("{" + ", ".join(items) + "}").encode()
    result = outcome(decode_json, body, "generated JSON")
    keys = [key for key, _ in pairs]
    if len(set(keys)) < len(keys):
        assert result == "InvalidInput"


rows = st.integers(1, 4).flatmap(
    lambda width: st.lists(
        st.lists(
            st.floats(-1e30, 1e30) | st.integers(-(2**53), 2**53), min_size=width, max_size=width
        ),
        min_size=1,
        max_size=4,
    )
)


@FUZZ
@given(rows)
def test_generated_rectangular_numbers_decode_exactly(values: list[list[float]]) -> None:
    body = orjson.dumps({"embeddings": values, "dtype": "float64"})
    decoded = json.decode(body, NUMBERS)["embeddings"]
    assert np.array_equal(decoded, np.array(values, dtype=np.float64))
