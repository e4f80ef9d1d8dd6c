"""A ModelInferRequest's bounds read from its wire before protobuf decodes it: every count
refused on a message that would cost far more than its bytes, with no more memory than a
few of its fields, and every message within the bounds decoded as protobuf decodes it."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2 as pb

from service.codecs.types import MAX_DIMS
from service.errors import InvalidInput, Limit, LimitExceeded, MalformedBody, ServiceError
from service.inference import grpc_bounds, grpc_wire, wire
from tests.support import examples
from tests.support import protobuf_field as field

NUMBERS = Limit(1 << 21, "PE_MAX_JSON_ELEMENTS")


def request() -> Any:
    message = pb.ModelInferRequest(model_name="sinusoidal-apply", id="abc")
    message.parameters["d_model"].int64_param = 3
    message.inputs.add(name="embeddings", datatype="FP32", shape=[2, 3])
    ids = message.inputs.add(name="position_ids", datatype="INT64", shape=[2])
    ids.contents.int64_contents.extend([4, 5])
    message.raw_input_contents.append(np.arange(6, dtype=np.float32).tobytes())
    message.outputs.add(name="embeddings").parameters["binary_data"].bool_param = True
    return message


def decoded(message: bytes) -> tuple[Any, list[bytes]]:
    scanned = grpc_bounds.scan(message, NUMBERS)
    return grpc_wire.decode(scanned.header), [bytes(raw) for raw in scanned.raw]


def test_a_message_within_the_bounds_decodes_as_protobuf_decodes_it() -> None:
    message = request()
    header, raw = decoded(message.SerializeToString())
    assert raw == list(message.raw_input_contents)
    del message.raw_input_contents[:]
    assert header == message


def test_the_tensors_bytes_are_views_of_the_message_not_copies() -> None:
    message = request()
    message.raw_input_contents[0] = bytes(64 << 10)
    data = message.SerializeToString()
    scanned = grpc_bounds.scan(data, NUMBERS)
    assert scanned.raw[0].obj is data
    assert len(scanned.header) < 200


def bomb(repeated: bytes, size: int = 32 << 20) -> bytes:
    return repeated * (size // len(repeated))


@pytest.mark.parametrize(
    ("message", "words"),
    [
        pytest.param(bomb(field(6, b"")), ["outputs", "more than 8"], id="empty-outputs"),
        pytest.param(bomb(field(5, b"")), ["inputs", "more than 8"], id="empty-inputs"),
        pytest.param(bomb(field(7, b"")), ["raw_input_contents"], id="raw-entries"),
        pytest.param(bomb(field(4, b"")), ["parameters", "more than 64"], id="parameters"),
        pytest.param(bomb(b"\x78\x01"), ["more than 1,024 fields"], id="unknown-fields"),
        pytest.param(bomb(field(1, b"x")), ["more than 1,024 fields"], id="a-name-repeated"),
        pytest.param(
            field(5, field(3, b"\x01" * (57 << 20))), ["inputs[0].shape"], id="packed-dims"
        ),
        pytest.param(field(5, bomb(b"\x18\x01")), ["inputs[0]"], id="unpacked-dims"),
        pytest.param(
            field(5, field(3, b"\x01" * (MAX_DIMS + 1))),
            [f"more than {MAX_DIMS} sizes"],
            id="too-many-dims",
        ),
        pytest.param(field(5, bomb(field(4, b""))), ["inputs[0].parameters"], id="input-params"),
        pytest.param(field(6, bomb(field(2, b""))), ["outputs[0].parameters"], id="output-params"),
        pytest.param(field(3, b"i" * (wire.MAX_ID_BYTES + 1)), ["id", "1,024"], id="long-id"),
    ],
)
def test_every_count_is_bounded_before_anything_is_built(message: bytes, words: list[str]) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput) as caught:
            grpc_bounds.scan(message, NUMBERS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for word in words:
        assert word in str(caught.value)
    assert peak < 64 << 10  # a few fields' worth, whatever the message's size


def test_nine_unpacked_dims_are_refused_too() -> None:
    message = field(5, b"\x18\x01" * (MAX_DIMS + 1))
    with pytest.raises(InvalidInput, match=f"more than {MAX_DIMS} sizes"):
        grpc_bounds.scan(message, NUMBERS)
    assert grpc_bounds.scan(field(5, b"\x18\x01" * MAX_DIMS), NUMBERS).header


@pytest.mark.parametrize(
    ("contents", "count"),
    [
        pytest.param(field(6, bytes(4 * 11)), 11, id="packed-fp32"),
        pytest.param(field(7, bytes(8 * 11)), 11, id="packed-fp64"),
        pytest.param(field(3, b"\x01" * 11), 11, id="packed-int64"),
        pytest.param(field(2, b"\x81\x01" * 11), 11, id="packed-int32-two-bytes"),
        pytest.param(b"\x10\x01" * 11, 11, id="unpacked-int32"),
    ],
)
def test_the_typed_contents_numbers_are_counted_from_their_bytes(
    contents: bytes, count: int
) -> None:
    message = field(5, field(5, contents))
    with pytest.raises(LimitExceeded, match="PE_MAX_JSON_ELEMENTS") as caught:
        grpc_bounds.scan(message, Limit(10, "PE_MAX_JSON_ELEMENTS"))
    assert caught.value.extensions["requested"] >= count
    grpc_bounds.scan(message, Limit(count, "PE_MAX_JSON_ELEMENTS"))  # exactly at the limit


def test_unpacked_contents_are_fields_and_a_message_without_raw_is_not_copied() -> None:
    within = field(5, field(5, b"\x10\x01" * grpc_bounds.MAX_FIELDS))
    assert grpc_bounds.scan(within, NUMBERS).header is within  # nothing taken out
    past = field(5, field(5, b"\x10\x01" * (grpc_bounds.MAX_FIELDS + 1)))
    with pytest.raises(InvalidInput, match=r"inputs\[0\]\.contents: has more than 1,024"):
        grpc_bounds.scan(past, NUMBERS)


def test_contents_merged_from_many_parts_are_bounded() -> None:
    """protobuf merges an input's contents given again and again: 1,023 parts of 1,023
    empty packed fields in each of 8 inputs walked for 16 s."""
    parts = field(5, field(2, b"")) * (grpc_bounds.MAX_CONTENTS + 1)
    with pytest.raises(InvalidInput, match="given more than 4 times"):
        grpc_bounds.scan(field(5, parts), NUMBERS)
    empties = field(2, b"") * 1000
    inputs = field(5, field(5, empties) * grpc_bounds.MAX_CONTENTS) * 8
    with pytest.raises(InvalidInput, match="8,192 fields in all"):
        grpc_bounds.scan(inputs, NUMBERS)


def test_an_empty_packed_field_counts_as_a_number() -> None:
    message = field(5, field(5, field(2, b"") * 11))
    with pytest.raises(LimitExceeded, match="PE_MAX_JSON_ELEMENTS"):
        grpc_bounds.scan(message, Limit(10, "PE_MAX_JSON_ELEMENTS"))


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(b"\x0a", id="length-missing"),
        pytest.param(b"\x0a\x05ab", id="length-past-the-end"),
        pytest.param(b"\x08\xff", id="varint-cut-short"),
        pytest.param(b"\x08" + b"\xff" * 11, id="varint-too-long"),
        pytest.param(b"\x0b", id="a-group"),
        pytest.param(b"\x00\x00", id="field-number-0"),
        pytest.param(b"\x09\x00\x00", id="fixed64-cut-short"),
        pytest.param(field(5, b"\x1a\x05\x01"), id="nested-past-its-end"),
    ],
)
def test_a_broken_encoding_is_a_malformed_body(message: bytes) -> None:
    with pytest.raises(MalformedBody, match="ModelInferRequest"):
        grpc_bounds.scan(message, NUMBERS)


@settings(max_examples=examples(400), derandomize=True, deadline=None)
@given(st.data())
def test_a_mutated_message_is_refused_or_decoded_as_protobuf_decodes_it(data: Any) -> None:
    original = bytearray(request().SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(original) - 1))
        original[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(original)))
    message = bytes(original[:cut])
    try:
        expected = pb.ModelInferRequest.FromString(message)
    except DecodeError:
        expected = None
    try:
        header, raw = decoded(message)
    except ServiceError:
        return  # refused: within its rights for a broken or bounded-out message
    assert expected is not None, "protobuf refuses what the bounds let through"
    assert raw == list(expected.raw_input_contents)
    del expected.raw_input_contents[:]
    assert header == expected
