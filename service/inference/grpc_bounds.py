"""What a ``ModelInferRequest`` may hold, read from its wire bytes before protobuf decodes it.

protobuf builds a whole message before anything can look at it, and holds the GIL while it
does: 32 KiB of gzip-compressed empty ``outputs`` entries decode into 16 million messages
(4.7 GB), and 57 MiB of shape dimensions into 57 million numbers. So the message's fields
are walked first, from the wire alone (protobuf's encoding: a varint key of field number and
wire type, then a varint, 4 or 8 bytes, or a length and that many bytes), each level's count
of fields bounded as it is walked, so the walk costs at most a few thousand steps whatever
the message holds; a length-delimited field is skipped by its length, not read. What is
counted:

- the fields of every message (a field given twice counts twice; unknown ones count too):
  at most :data:`MAX_FIELDS` each, :data:`MAX_STEPS` in all, an input's ``contents`` given at
  most :data:`MAX_CONTENTS` times;
- ``inputs`` and ``raw_input_contents`` at most ``wire.MAX_INPUTS``, ``outputs`` at most
  ``wire.MAX_OUTPUTS``, ``parameters`` at most :data:`MAX_PARAMETERS` per map;
- an input's shape at most ``MAX_DIMS`` sizes (packed or not); the echoed ``id`` at most
  ``wire.MAX_ID_BYTES``;
- the typed contents' numbers, all inputs together, at most ``numbers``: packed numbers (as
  every proto3 encoder writes them) counted from their bytes, unpacked ones as fields (at
  most :data:`MAX_FIELDS` a contents message like any other).

The tensors' bytes (``raw_input_contents``) are left out of what protobuf decodes: they are
returned as views of the message, so no copy of them is made.

Hand-written because protobuf's runtimes (upb, the C++ one, the pure-Python one) have no
bounded or partial decode: each builds the whole message first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np

from service.codecs.types import MAX_DIMS
from service.errors import InvalidInput, Limit, MalformedBody
from service.inference import wire

# Fields a message level may hold: a request names a few inputs and outputs, each with a
# few parameters; a thousand is far past any real one, and walking them costs ~1 ms.
MAX_FIELDS: Final = 1024
# Fields walked in all the message's levels together: the walk costs ~8 ms at most.
MAX_STEPS: Final = 8192
# Times an input's contents may be given (protobuf merges them; encoders write one).
MAX_CONTENTS: Final = 4
# Entries of one parameters map (of the request, of an input, of an output).
MAX_PARAMETERS: Final = 64
# wire types
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
# ModelInferRequest's fields
_ID, _PARAMETERS, _INPUTS, _OUTPUTS, _RAW = 3, 4, 5, 6, 7
# InferInputTensor's fields (and InferRequestedOutputTensor's parameters, its 2)
_SHAPE, _INPUT_PARAMETERS, _CONTENTS = 3, 4, 5
_OUTPUT_PARAMETERS: Final = 2
# InferTensorContents: the bytes of one number of each fixed-width field
_FIXED_CONTENTS: Final = {6: 4, 7: 8}  # fp32_contents, fp64_contents


@dataclass(frozen=True, slots=True)
class Scanned:
    """A message within its bounds: its bytes without ``raw_input_contents`` (for protobuf
    to decode), and those tensors' bytes, in order, as views of the message."""

    header: bytes
    raw: list[memoryview]


def scan(message: bytes, numbers: Limit) -> Scanned:
    """The request in ``message`` within the bounds above, or :class:`MalformedBody` (its
    encoding is broken), :class:`InvalidInput` (a count is over its bound) or
    :class:`LimitExceeded` (the contents' numbers are over ``numbers``)."""
    view = memoryview(message)
    steps = [MAX_STEPS]
    counts = {_PARAMETERS: 0, _INPUTS: 0, _OUTPUTS: 0, _RAW: 0}
    bounds = {
        _PARAMETERS: ("parameters", MAX_PARAMETERS),
        _INPUTS: ("inputs", wire.MAX_INPUTS),
        _OUTPUTS: ("outputs", wire.MAX_OUTPUTS),
        _RAW: ("raw_input_contents", wire.MAX_INPUTS),
    }
    kept: list[memoryview] = []
    raw: list[memoryview] = []
    contents: list[tuple[str, int, int]] = []
    at = 0
    for number, kind, start, end, key in _fields(view, 0, len(view), "the request", steps):
        if number in counts and kind == _BYTES:
            counts[number] += 1
            name, bound = bounds[number]
            if counts[number] > bound:
                raise InvalidInput(name, f"has more than {bound} entries")
        if number == _RAW and kind == _BYTES:
            kept.append(view[at:key])
            raw.append(view[start:end])
            at = end
        elif number == _INPUTS and kind == _BYTES:
            contents += _input(view, start, end, counts[_INPUTS] - 1, steps)
        elif number == _OUTPUTS and kind == _BYTES:
            where = f"outputs[{counts[_OUTPUTS] - 1}]"
            _parameters_of(view, start, end, _OUTPUT_PARAMETERS, where, steps)
        elif number == _ID and kind == _BYTES:
            wire.check_id(end - start)
    _check_numbers(view, contents, numbers, steps)
    if not raw:
        return Scanned(message, raw)  # nothing taken out: no copy
    kept.append(view[at:])
    return Scanned(b"".join(kept), raw)


def _input(
    view: memoryview, start: int, end: int, index: int, steps: list[int]
) -> list[tuple[str, int, int]]:
    """Check an ``InferInputTensor``; where its typed contents are."""
    where = f"inputs[{index}]"
    dims = parameters = 0
    contents = []
    for number, kind, a, b, _ in _fields(view, start, end, where, steps):
        if number == _SHAPE:
            dims += 1 if kind != _BYTES else _varints(view, a, b, MAX_DIMS - dims)
            if dims > MAX_DIMS:
                raise InvalidInput(f"{where}.shape", f"has more than {MAX_DIMS} sizes")
        elif number == _INPUT_PARAMETERS and kind == _BYTES:
            parameters += 1
            _bound_parameters(parameters, f"{where}.parameters")
        elif number == _CONTENTS and kind == _BYTES:
            contents.append((f"{where}.contents", a, b))
            if len(contents) > MAX_CONTENTS:
                raise InvalidInput(f"{where}.contents", f"is given more than {MAX_CONTENTS} times")
    return contents


def _parameters_of(
    view: memoryview, start: int, end: int, field: int, where: str, steps: list[int]
) -> None:
    """Check a message's count of ``field`` (a parameters map)."""
    parameters = 0
    for number, kind, _, _, _ in _fields(view, start, end, where, steps):
        if number == field and kind == _BYTES:
            parameters += 1
            _bound_parameters(parameters, f"{where}.parameters")


def _bound_parameters(count: int, where: str) -> None:
    if count > MAX_PARAMETERS:
        raise InvalidInput(where, f"has more than {MAX_PARAMETERS} entries")


def _check_numbers(
    view: memoryview, contents: list[tuple[str, int, int]], numbers: Limit, steps: list[int]
) -> None:
    """The typed contents' numbers, all inputs together, within ``numbers`` (a field counts
    one at least: an empty packed one too)."""
    total = 0
    for where, start, end in contents:
        for number, kind, a, b, _ in _fields(view, start, end, where, steps):
            if kind != _BYTES or number == 8:  # one number, not packed; a bytes entry
                total += 1
            elif number in _FIXED_CONTENTS:
                total += max(1, (b - a) // _FIXED_CONTENTS[number])
            else:
                total += max(1, _varints(view, a, b, numbers.value - total))
            numbers.check("the typed contents' numbers (at least)", total)


def _varints(view: memoryview, start: int, end: int, most: int) -> int:
    """The varints packed in ``view[start:end]`` (every byte under 0x80 ends one), counted
    when their bytes could hold no more than ``most`` + 1 of them, else ``most`` + 1."""
    if end - start > 10 * (most + 1):  # a varint takes at most 10 bytes
        return most + 1
    return int(np.count_nonzero(np.frombuffer(view, np.uint8, end - start, start) < 0x80))


def _fields(
    view: memoryview, start: int, end: int, where: str, steps: list[int]
) -> Iterator[tuple[int, int, int, int, int]]:
    """``(number, wire type, start, end, key)`` of each field of the message in
    ``view[start:end]`` (``start``, ``end``: its value's bytes, without the length of a
    length-delimited one; ``key``: where the field begins): at most :data:`MAX_FIELDS` of
    them, each taken from ``steps``, the fields left to the whole walk."""
    count = 0
    at = start
    while at < end:
        field_start = at
        count += 1
        steps[0] -= 1
        if count > MAX_FIELDS:
            raise InvalidInput(where, f"has more than {MAX_FIELDS:,} fields")
        if steps[0] < 0:
            raise InvalidInput("the request", f"has more than {MAX_STEPS:,} fields in all")
        key, at = _varint(view, at, end)
        number, kind = key >> 3, key & 7
        if number == 0:
            raise MalformedBody("the message is not a ModelInferRequest: a field number is 0")
        if kind == _VARINT:
            value_start = at
            _, at = _varint(view, at, end)
        elif kind in (_FIXED64, _FIXED32):
            value_start = at
            at += 8 if kind == _FIXED64 else 4
        elif kind == _BYTES:
            length, value_start = _varint(view, at, end)
            at = value_start + length
        else:  # groups (wire types 3 and 4) are proto2's; nothing here uses them
            raise MalformedBody(f"the message is not a ModelInferRequest: wire type {kind}")
        if at > end:
            raise MalformedBody("the message is not a ModelInferRequest: a field passes its end")
        yield number, kind, value_start, at, field_start


def _varint(view: memoryview, at: int, end: int) -> tuple[int, int]:
    """The varint at ``at`` and where the next byte is."""
    value = shift = 0
    while shift < 70:
        if at >= end:
            break
        byte = view[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
    raise MalformedBody("the message is not a ModelInferRequest: a varint is cut short")
