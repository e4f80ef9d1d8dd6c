"""The Open Inference Protocol's gRPC wire (KServe v2's ``inference.GRPCInferenceService``,
in the definitions Triton generates from its superset of ``grpc_predict_v2.proto``): a
``ModelInferRequest``'s bytes read into the :class:`wire.Request` that the REST wire gives,
and outputs written as a serialized ``ModelInferResponse``. Pure: bytes and arrays; both
run in worker threads, so no large message is parsed or written on the event loop."""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2 as pb

from service.errors import InvalidInput, InvalidParameter, Limit, MalformedBody
from service.inference import wire
from service.text import shown

# The typed contents field a datatype's numbers may come in; FP16 has none (raw bytes only).
CONTENTS: Final = {
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
}
# Tensor parameters asking for what this server does not do: data in shared memory, or
# outputs as classifications. Other tensor parameters are ignored, as over REST.
_UNSUPPORTED: Final = (
    "shared_memory_region",
    "shared_memory_byte_size",
    "shared_memory_offset",
    "classification",
)
# ModelInferResponse.raw_output_contents: its key (field number, wire type 2: bytes)
_RAW_OUTPUT_KEY: Final = (
    pb.ModelInferResponse.DESCRIPTOR.fields_by_name["raw_output_contents"].number << 3 | 2
)


def decode(header: bytes) -> Any:
    """The ``ModelInferRequest`` in ``header`` (a message :func:`grpc_bounds.scan` has
    bounded, its ``raw_input_contents`` taken out)."""
    try:
        return pb.ModelInferRequest.FromString(header)
    except DecodeError:
        raise MalformedBody("the message is not a ModelInferRequest") from None


def request(message: Any, raw: list[memoryview], numbers: Limit) -> wire.Request:
    """A ``ModelInferRequest`` as the request the models run: its inputs' data from
    ``raw`` (its ``raw_input_contents``: one entry an input, in their order) or from their
    typed ``contents`` (at most ``numbers`` of them in all, as JSON tensors); its
    parameters as Python values; every output as raw bytes."""
    wire.check_inputs(len(message.inputs))
    numbers.check(
        "the typed contents' numbers",
        sum(len(values) for spec in message.inputs for _, values in spec.contents.ListFields()),
    )
    wire.check_id(len(message.id.encode("utf-8", "surrogatepass")))
    if raw and len(raw) != len(message.inputs):
        raise MalformedBody(
            f"raw_input_contents has {len(raw):,} entries; the request has "
            f"{len(message.inputs):,} inputs (give each input's data there, or none)"
        )
    inputs: dict[str, wire.Tensor] = {}
    for index, spec in enumerate(message.inputs):
        tensor = _tensor(spec, raw[index] if raw else None)
        if tensor.name in inputs:
            raise InvalidInput(f"inputs[{index}].name", f"{shown(tensor.name)!r} is given twice")
        inputs[tensor.name] = tensor
    parameters = {key: _value(key, value) for key, value in message.parameters.items()}
    # REST's choice of binary outputs for all; over gRPC every output is raw bytes
    parameters.pop(wire.BINARY_OUTPUT, None)
    outputs: dict[str, bool | None] | None = None
    if message.outputs:
        wire.check_outputs(len(message.outputs))
        outputs = {}
        for spec in message.outputs:
            _supported(spec.parameters, spec.name)
            outputs[shown(spec.name)] = True
    return wire.Request(message.id or None, parameters, inputs, outputs, True)


def _tensor(spec: Any, raw: memoryview | None) -> wire.Tensor:
    name = shown(spec.name)
    _supported(spec.parameters, name)
    datatype: str = spec.datatype
    if datatype not in wire.DATATYPES:
        raise InvalidInput(
            f"{name}.datatype",
            f"{shown(datatype)!r} is not one of {', '.join(wire.DATATYPES)}",
        )
    shape = tuple(spec.shape)
    dtype = wire.DATATYPES[datatype]
    wire.check_shape(shape, name, dtype)
    count = math.prod(shape)
    given = [field.name for field, _ in spec.contents.ListFields()]
    if raw is not None:
        if given:
            raise MalformedBody(f"{name}: has {given[0]} beside raw_input_contents: give one")
        expected = count * dtype.itemsize
        if len(raw) != expected:
            raise MalformedBody(
                f"{name}: raw_input_contents holds {len(raw):,} bytes, but shape "
                f"{list(shape)} of {datatype} takes {expected:,} bytes"
            )
        return wire.Tensor(name, datatype, np.frombuffer(raw, dtype).reshape(shape))
    field = CONTENTS.get(datatype)
    if field is None:
        raise InvalidInput(
            f"{name}.contents", f"{datatype} has no typed contents: send it in raw_input_contents"
        )
    if any(other != field for other in given):
        other = next(other for other in given if other != field)
        raise InvalidInput(f"{name}.contents", f"holds {other}; {datatype} numbers go in {field}")
    values = getattr(spec.contents, field)
    if len(values) != count:
        raise InvalidInput(
            f"{name}.contents",
            f"holds {len(values):,} numbers; shape {list(shape)} takes {count:,}",
        )
    return wire.Tensor(name, datatype, np.array(values, dtype).reshape(shape))


def _supported(parameters: Any, name: str) -> None:
    for key in _UNSUPPORTED:
        if key in parameters:
            raise InvalidInput(
                f"{name}.parameters.{key}", "is not supported: send the data in the request"
            )


def _value(key: str, parameter: Any) -> bool | int | float | str:
    """An ``InferParameter``'s value (a ``oneof``) as its Python value."""
    kind = parameter.WhichOneof("parameter_choice")
    if kind is None:
        raise InvalidParameter(shown(key), "has no value")
    value: bool | int | float | str = getattr(parameter, kind)
    return value


def encode(model: str, version: str, request_id: str | None, outputs: list[wire.Tensor]) -> bytes:
    """The serialized ``ModelInferResponse``: the outputs described, then their
    little-endian bytes as ``raw_output_contents`` (a message's fields may come in any
    order), written into one buffer, which is copied once into the ``bytes`` gRPC sends
    (it takes nothing else); no protobuf message ever holds the tensors."""
    header = pb.ModelInferResponse(model_name=model, model_version=version, id=request_id or "")
    for tensor in outputs:
        header.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.array.shape)
    head: bytes = header.SerializeToString()
    keys = [_varint(_RAW_OUTPUT_KEY) + _varint(tensor.array.nbytes) for tensor in outputs]
    total = len(head) + sum(
        len(key) + tensor.array.nbytes for key, tensor in zip(keys, outputs, strict=True)
    )
    body = bytearray(total)
    body[: len(head)] = head
    offset = len(head)
    for key, tensor in zip(keys, outputs, strict=True):
        body[offset : offset + len(key)] = key
        offset += len(key)
        target = np.frombuffer(
            body, tensor.array.dtype.newbyteorder("<"), tensor.array.size, offset
        )
        target[...] = tensor.array.reshape(-1)
        offset += tensor.array.nbytes
    return bytes(body)


def _varint(value: int) -> bytes:
    """``value`` as a protobuf varint: seven bits a byte, least significant first."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
