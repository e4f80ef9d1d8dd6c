"""The Open Inference Protocol's REST wire (KServe v2): an infer request's JSON header with
its tensors, given in JSON or as binary tensor data after the header (the binary data
extension: ``Inference-Header-Content-Length``, ``binary_data_size``), and an answer in
either form. Pure: bytes and arrays, no HTTP."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import orjson
from numpy.typing import NDArray

from service.codecs import json as json_codec
from service.codecs.types import MAX_DIMS, Headers, fits
from service.errors import InvalidInput, Limit, MalformedBody
from service.text import shown

# The protocol's tensor types that the models take or give, as numpy reads their bytes
# (the binary extension's tensors are little-endian, row-major).
DATATYPES: Final[dict[str, np.dtype[Any]]] = {
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
}
NAMES: Final = {dtype.name: name for name, dtype in DATATYPES.items()}
# A request parameter of the protocol itself, not of a model: binary outputs for all.
BINARY_OUTPUT: Final = "binary_data_output"
_REQUEST_FIELDS: Final = {"id", "parameters", "inputs", "outputs"}
# Refused before any is read: more inputs than a model takes, or outputs than it gives.
MAX_INPUTS: Final = 8
MAX_OUTPUTS: Final = 8
# Objects and strings cost most to parse (2M outputs entries, 40 MiB: 2 s and 600 MiB), and
# a request has a few a tensor: b'{' and b'"' are counted first (inside strings too).
MAX_OBJECTS: Final = 4096
MAX_QUOTES: Final = 16384
MAX_ID_BYTES: Final = 1024  # the answer echoes the id
_TENSOR_FIELDS: Final = {"name", "shape", "datatype", "parameters", "data"}


@dataclass(frozen=True, slots=True)
class Tensor:
    """A named tensor with the protocol's name of its type."""

    name: str
    datatype: str
    array: NDArray[Any]


@dataclass(frozen=True, slots=True)
class Request:
    """An infer request: its id, the model's parameters, the input tensors by name, and
    which outputs in which form (``outputs`` None: all; ``binary`` by name, None: as
    ``binary_default``)."""

    id: str | None
    parameters: dict[str, Any]
    inputs: dict[str, Tensor]
    outputs: dict[str, bool | None] | None
    binary_default: bool


def header_length(value: str | None, body_bytes: int) -> int | None:
    """``Inference-Header-Content-Length``: the JSON header's bytes at the body's start."""
    if value is None:
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 20 or int(value) > body_bytes:
        raise MalformedBody(
            f"Inference-Header-Content-Length must be a byte count within the body's "
            f"{body_bytes:,} bytes, not {shown(value)!r}"
        )
    return int(value)


def parse(body: bytes | bytearray, length: int | None, numbers: Limit) -> Request:
    """The request in ``body``: its first ``length`` bytes (all, if None) are the JSON
    header; binary tensor data follows, in the order of the inputs that declare
    ``binary_data_size``. JSON tensors hold at most ``numbers`` numbers in all."""
    view = memoryview(body)
    head = view if length is None else view[:length]
    numbers.check("the JSON header's numbers", parsed := body.count(b",", 0, len(head)) + 1)
    objects, quotes, lists = (body.count(mark, 0, len(head)) for mark in (b"{", b'"', b"["))
    for mark, count, most in ((b"{", objects, MAX_OBJECTS), (b'"', quotes, MAX_QUOTES)):
        if count > most:
            raise MalformedBody(
                f"the inference header has {count:,} {mark.decode()!r} (JSON objects or "
                f"strings, and inside strings); at most {most:,}: a request has a few a tensor"
            )
    json_codec.check_containers(lists + objects, numbers, "the JSON header", parsed)
    try:
        document = orjson.loads(head)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"the inference header is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MalformedBody('the inference header must be a JSON object: {"inputs": [...]}')
    _only(document, _REQUEST_FIELDS, "the request")
    request_id = document.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInput("id", "must be a string")
    check_id(len((request_id or "").encode("utf-8", "surrogatepass")))
    parameters = _object(document.get("parameters"), "parameters")
    binary_default = parameters.pop(BINARY_OUTPUT, False)
    if not isinstance(binary_default, bool):
        raise InvalidInput(f"parameters.{BINARY_OUTPUT}", "must be true or false")
    specs = document.get("inputs")
    # empty for a model with no inputs (ALiBi's: its parameters say it all)
    if not isinstance(specs, list):
        raise InvalidInput("inputs", "must be a list of tensors")
    check_inputs(len(specs))
    length = len(view) if length is None else length
    offset = length
    inputs: dict[str, Tensor] = {}
    for index, spec in enumerate(specs):
        tensor, offset = _tensor(spec, f"inputs[{index}]", view, offset)
        if tensor.name in inputs:
            raise InvalidInput(f"inputs[{index}].name", f"{shown(tensor.name)!r} is given twice")
        inputs[tensor.name] = tensor
    if offset != len(view):
        raise MalformedBody(
            f"the body has {len(view) - length:,} bytes of binary tensor data after "
            f"its header; the inputs' binary_data_size add up to {offset - length:,}"
        )
    return Request(request_id, parameters, inputs, _outputs(document), binary_default)


def _tensor(spec: Any, where: str, view: memoryview, offset: int) -> tuple[Tensor, int]:
    """An input tensor, and where the next one's binary data starts."""
    if not isinstance(spec, dict):
        raise InvalidInput(where, "must be an object with name, shape, datatype and data")
    _only(spec, _TENSOR_FIELDS, where)
    name = spec.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}.name", "must be a string")
    name = shown(name)
    datatype = spec.get("datatype")
    if datatype not in DATATYPES:
        raise InvalidInput(
            f"{name}.datatype",
            f"{shown(str(datatype))!r} is not one of {', '.join(DATATYPES)}",
        )
    shape = spec.get("shape")
    if type(shape) is not list or not all(type(n) is int for n in shape):
        raise InvalidInput(f"{name}.shape", "must be a list of non-negative integers")
    dtype = DATATYPES[datatype]
    check_shape(shape, name, dtype)
    shape = tuple(shape)
    size = _object(spec.get("parameters"), f"{name}.parameters").get("binary_data_size")
    if size is None:
        if "data" not in spec:
            raise InvalidInput(f"{name}.data", "is required (or binary_data_size)")
        return Tensor(name, datatype, _from_json(spec["data"], name, datatype, shape)), offset
    if "data" in spec:
        raise InvalidInput(f"{name}.data", "is given beside binary_data_size: give one")
    expected = math.prod(shape) * dtype.itemsize
    if type(size) is not int or size != expected:
        raise MalformedBody(
            f"{name}: binary_data_size is {shown(str(size))}, but shape {list(shape)} of "
            f"{datatype} takes {expected:,} bytes"
        )
    if offset + size > len(view):
        raise MalformedBody(
            f"{name}: its {size:,} bytes of binary data pass the body's end "
            f"({len(view) - offset:,} bytes are left)"
        )
    array = np.frombuffer(view[offset : offset + size], dtype).reshape(shape)
    return Tensor(name, datatype, array), offset + size


def check_inputs(count: int) -> None:
    """At most :data:`MAX_INPUTS` inputs, refused before any is read."""
    if count > MAX_INPUTS:
        raise InvalidInput("inputs", f"has {count:,} tensors; a model takes at most {MAX_INPUTS}")


def check_outputs(count: int) -> None:
    """At most :data:`MAX_OUTPUTS` outputs asked for, refused before any is read (none: all,
    on gRPC, where an empty list is a missing one; REST refuses an empty list itself)."""
    if count > MAX_OUTPUTS:
        raise InvalidInput("outputs", f"has {count:,} entries; a model gives at most {MAX_OUTPUTS}")


def check_id(size: int) -> None:
    """A request id of at most :data:`MAX_ID_BYTES` UTF-8 bytes, as the answer echoes it."""
    if size > MAX_ID_BYTES:
        raise InvalidInput("id", f"is {size:,} UTF-8 bytes long; an id is at most {MAX_ID_BYTES:,}")


def check_shape(shape: Sequence[int], name: str, dtype: np.dtype[Any]) -> None:
    """A tensor's shape: at most :data:`MAX_DIMS` non-negative sizes whose array numpy can
    hold (a zero beside huge sizes too)."""
    if len(shape) > MAX_DIMS or any(n < 0 for n in shape):
        raise InvalidInput(
            f"{name}.shape",
            f"must be at most {MAX_DIMS} non-negative sizes, not {shown(str(list(shape)))}",
        )
    if not fits(list(shape), dtype.itemsize):
        raise InvalidInput(f"{name}.shape", f"{shown(str(list(shape)))} is too large for any array")


def _from_json(data: Any, name: str, datatype: str, shape: tuple[int, ...]) -> NDArray[Any]:
    """A tensor's JSON data (flat, or nested row-major) as an array of ``shape``."""
    if datatype.startswith("INT"):
        array: NDArray[Any] = json_codec.integers(data, f"{name}.data")
        info = np.iinfo(DATATYPES[datatype])
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise InvalidInput(f"{name}.data", f"holds integers outside the {datatype} range")
    else:
        array = json_codec.floats(data, f"{name}.data", DATATYPES[datatype].name)
    if array.size != math.prod(shape):
        raise InvalidInput(
            f"{name}.data",
            f"holds {array.size:,} numbers; shape {list(shape)} takes {math.prod(shape):,}",
        )
    return array.astype(DATATYPES[datatype], copy=False).reshape(shape)


def _outputs(document: dict[str, Any]) -> dict[str, bool | None] | None:
    specs = document.get("outputs")
    if specs is None:
        return None
    if not isinstance(specs, list):
        raise InvalidInput("outputs", "must be a list of {name, parameters}")
    if not specs:  # not an answer of no outputs: a client that asked for none erred
        raise InvalidInput("outputs", "must name at least one output, or be left out for all")
    check_outputs(len(specs))
    outputs: dict[str, bool | None] = {}
    for index, spec in enumerate(specs):
        where = f"outputs[{index}]"
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise InvalidInput(where, "must be an object with a name")
        _only(spec, {"name", "parameters"}, where)
        binary = _object(spec.get("parameters"), f"{where}.parameters").get("binary_data")
        if binary is not None and not isinstance(binary, bool):
            raise InvalidInput(f"{where}.parameters.binary_data", "must be true or false")
        name = shown(spec["name"])
        if name in outputs:  # as an input given twice: else the last would win silently
            raise InvalidInput(f"{where}.name", f"{name!r} is given twice")
        outputs[name] = binary
    return outputs


def _object(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(name, "must be an object")
    return dict(value)


def _only(document: dict[str, Any], fields: set[str], where: str) -> None:
    unknown = sorted(set(document) - fields)
    if unknown:
        raise InvalidInput(
            f"{where}.{shown(unknown[0])}", f"is not a field ({', '.join(sorted(fields))})"
        )


def encode(
    model: str, version: str, request_id: str | None, outputs: list[Tensor], binary: set[str]
) -> tuple[Headers, bytearray | bytes]:
    """The infer answer: JSON, the outputs named in ``binary`` as binary data after it
    (with ``Inference-Header-Content-Length``), in one buffer written once."""
    described: list[dict[str, Any]] = []
    for tensor in outputs:
        entry: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.array.shape),
        }
        if tensor.name in binary:
            entry["parameters"] = {"binary_data_size": tensor.array.nbytes}
        else:
            entry["data"] = tensor.array.ravel().tolist()
        described.append(entry)
    # the request's id, or "" where it had none: KServe's own data model of the answer
    # requires one (as gRPC's message always has one)
    answer: dict[str, Any] = {"model_name": model, "model_version": version, "id": request_id or ""}
    answer["outputs"] = described
    header = orjson.dumps(answer)
    if not binary:
        return {"content-type": "application/json"}, header
    total = len(header) + sum(t.array.nbytes for t in outputs if t.name in binary)
    body = bytearray(total)
    body[: len(header)] = header
    offset = len(header)
    for tensor in outputs:
        if tensor.name in binary:
            dtype = tensor.array.dtype.newbyteorder("<")
            target = np.frombuffer(body, dtype, tensor.array.size, offset)
            target[...] = tensor.array.reshape(-1)
            offset += tensor.array.nbytes
    headers = {
        "content-type": "application/octet-stream",
        "inference-header-content-length": str(len(header)),
    }
    return headers, body
