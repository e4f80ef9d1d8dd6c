"""safetensors files (Hugging Face's format): an 8-byte little-endian header length, a JSON
header giving each tensor's dtype, shape and byte range (and ``__metadata__``, text to
text), then the tensors' bytes. Written by the safetensors library; a posted file is read
only after its header has passed every check here (at most :data:`HEADER_LIMIT` bytes of
JSON, each name once, real-number dtypes, shapes that fit their byte ranges, ranges that
tile the data exactly as the format requires), as views of the body: never a copy, never
an allocation a header asks for, and a batch that can be computed in place. Once those
checks pass, the library would add nothing but copies (its ``load`` takes ``bytes``, a copy
of the body, and copies each tensor again); and it accepts some of what is refused here
(duplicate names, shapes numpy cannot make, dtypes numpy has not, such as BF16). The tests
check that what is read here, the library reads the same.

Metadata is text to text: a string field is written as is, any other as its JSON text
(``"max_len": "1024"``, ``"shape": "[1024,512]"``, ``"scale": "null"``)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import orjson
import safetensors.numpy
from numpy.typing import NDArray

from service.arrays import joined
from service.codecs.types import MAX_DIMS, MEDIA_TYPES, Buffer, Encoded, Parts, fits, little_endian
from service.errors import InvalidInput, MalformedBody
from service.text import shown

# The headers of the files this service reads name one or two tensors: a few hundred bytes.
HEADER_LIMIT: Final = 64 << 10
MAX_TENSORS: Final = 16
_LENGTH_BYTES: Final = 8
_METADATA: Final = "__metadata__"
_ENTRY_KEYS: Final = ("dtype", "shape", "data_offsets")
_READ: Final = {
    "F16": "<f2",
    "F32": "<f4",
    "F64": "<f8",
    "I8": "|i1",
    "I16": "<i2",
    "I32": "<i4",
    "I64": "<i8",
    "U8": "|u1",
    "U16": "<u2",
    "U32": "<u4",
    "U64": "<u8",
}
# The format's other dtypes: a file of them is well formed, but not of numbers we read.
_NOT_READ: Final = frozenset(
    {
        "BOOL",
        "BF16",
        "C64",
        "F4",
        "F6_E2M3",
        "F6_E3M2",
        "F8_E4M3",
        "F8_E4M3FNUZ",
        "F8_E5M2",
        "F8_E5M2FNUZ",
        "F8_E8M0",
    }
)
_REAL_NUMBERS: Final = "must hold real numbers (F16, F32, F64 or integers)"


def metadata(fields: Mapping[str, Any]) -> dict[str, str]:
    """``fields`` as safetensors metadata: strings as they are, other values as JSON text."""
    return {
        name: value if isinstance(value, str) else orjson.dumps(value).decode()
        for name, value in fields.items()
    }


def encode(fields: Mapping[str, Any], arrays: Mapping[str, Parts]) -> Encoded:
    """A safetensors file of ``arrays`` (each the concatenation of its blocks of rows),
    little-endian, with ``fields`` in ``__metadata__``. The library serializes whole
    arrays: blocks are joined first (a table of one block is not copied), and it builds
    the file in a buffer of its own before its ``bytes``: a large table costs about three
    times its size while it is encoded, against one for ``.npy``."""
    notes = metadata(fields)
    tensors = {name: little_endian(joined(parts)) for name, parts in arrays.items()}
    body = safetensors.numpy.save(tensors, metadata=notes)
    del tensors  # the joined blocks, before the copy below
    return {"content-type": MEDIA_TYPES["safetensors"]}, _in_order(body, notes)


def _in_order(body: bytes, notes: dict[str, str]) -> bytes:
    """``body`` with its ``__metadata__`` in the order of ``notes``. The library writes it
    in the order of a hash map, which changes from call to call; a table's bytes must not
    (its ETag is strong, and replayed). The object keeps its length, so nothing moves."""
    length = int.from_bytes(body[:_LENGTH_BYTES], "little")
    text = body[_LENGTH_BYTES : _LENGTH_BYTES + length].decode()
    prefix = '{"' + _METADATA + '":'
    if len(notes) < 2 or not text.startswith(prefix):
        return body
    written, end = json.JSONDecoder().raw_decode(text, len(prefix))
    ordered = json.dumps(notes, ensure_ascii=False, separators=(",", ":")).encode()
    start = _LENGTH_BYTES + len(prefix)
    stop = _LENGTH_BYTES + len(text[:end].encode())
    if written != notes or len(ordered) != stop - start:  # not as this library version writes
        return body
    return b"".join((body[:start], ordered, memoryview(body)[stop:]))


def decode(
    body: Buffer, members: tuple[str, ...], required: tuple[str, ...]
) -> dict[str, NDArray[Any]]:
    """The tensors of a safetensors file whose names are among ``members`` (``required``
    ones present), as views of ``body`` (writable when it is). A file that is not
    safetensors is :class:`MalformedBody`; tensors that are not what this endpoint reads
    (a name, a dtype) are :class:`InvalidInput`."""
    view = memoryview(body).cast("B")
    header, start = _header(view)
    header.pop(_METADATA, None)
    if len(header) > MAX_TENSORS:
        raise MalformedBody(
            f"the safetensors file lists {len(header):,} tensors; at most {MAX_TENSORS} are read"
        )
    entries = {name: _entry(name, info) for name, info in header.items()}
    _check_names(list(entries), members, required)
    _check_offsets(entries, len(view) - start)
    arrays = {}
    for name, (dtype, shape, begin, _) in entries.items():
        flat = np.frombuffer(view, dtype, count=math.prod(shape), offset=start + begin)
        arrays[name] = flat.reshape(shape)
    return arrays


def names(body: Buffer) -> list[str]:
    """The names of the tensors a safetensors file holds, from its header (read and checked
    as :func:`decode` reads it), before any is read."""
    header, _ = _header(memoryview(body).cast("B"))
    header.pop(_METADATA, None)
    return list(header)


_Entry = tuple[np.dtype[Any], tuple[int, ...], int, int]


def _unreadable(reason: str) -> MalformedBody:
    return MalformedBody(f"not a readable safetensors file: {reason}")


def _header(view: memoryview) -> tuple[dict[str, Any], int]:
    """The header, parsed (each key once), and where the data starts."""
    if len(view) < _LENGTH_BYTES:
        raise _unreadable(f"it is {len(view)} bytes long, shorter than its header's length")
    length = int.from_bytes(view[:_LENGTH_BYTES], "little")
    if length > HEADER_LIMIT:
        raise _unreadable(f"its header is {length:,} bytes long; at most {HEADER_LIMIT:,} are read")
    start = _LENGTH_BYTES + length
    if len(view) < start:
        raise _unreadable(
            f"its header is truncated: {length:,} bytes long, the file holds "
            f"{len(view) - _LENGTH_BYTES:,} after its length"
        )
    text = view[_LENGTH_BYTES:start].tobytes()
    if not text.startswith(b"{"):
        raise _unreadable("its header does not start with '{'")
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_unique, parse_constant=_nan)
    except _Repeated as exc:
        raise _unreadable(f"its header names '{_text(str(exc))}' more than once") from None
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError among them
        raise _unreadable("its header is not JSON text") from None
    if not isinstance(header, dict):
        raise _unreadable("its header is not a JSON object")
    notes = header.get(_METADATA)
    if notes is not None and not (
        isinstance(notes, dict) and all(isinstance(value, str) for value in notes.values())
    ):
        raise _unreadable(f"its {_METADATA} must map text to text")
    return header, start


class _Repeated(ValueError):
    """A key that appears twice in one object of the header."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Repeated(key)
        found[key] = value
    return found


def _text(value: str) -> str:
    """A name from a header, to quote in a message: cut short, escaped unless printable."""
    return shown(value if value.isprintable() else ascii(value)[1:-1])


def _nan(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _entry(name: str, info: object) -> _Entry:
    """A tensor's dtype, shape and byte range, checked."""
    where = f"tensor '{_text(name)}':"
    if not isinstance(info, dict) or sorted(info) != sorted(_ENTRY_KEYS):
        raise _unreadable(f"{where} its entry must have the keys dtype, shape and data_offsets")
    dtype = _dtype(name, info["dtype"])
    shape, offsets = info["shape"], info["data_offsets"]
    if not (isinstance(shape, list) and all(type(size) is int and size >= 0 for size in shape)):
        raise _unreadable(f"{where} shape must be a list of non-negative integers")
    if len(shape) > MAX_DIMS:
        raise _unreadable(f"{where} shape has {len(shape)} dimensions; at most {MAX_DIMS}")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(offset) is int for offset in offsets)
        and 0 <= offsets[0] <= offsets[1] <= sys.maxsize
    ):
        raise _unreadable(f"{where} data_offsets must be [begin, end], 0 <= begin <= end")
    if not fits(shape, dtype.itemsize):
        raise _unreadable(f"{where} shape {shown(str(shape))} is too large for any array")
    begin, end = offsets
    needed = math.prod(shape) * dtype.itemsize
    if end - begin != needed:
        raise _unreadable(
            f"{where} shape {shown(str(shape))} of {info['dtype']} needs {needed:,} bytes, "
            f"its data_offsets span {end - begin:,}"
        )
    return dtype, tuple(shape), begin, end


def _dtype(name: str, dtype: object) -> np.dtype[Any]:
    if isinstance(dtype, str) and dtype in _READ:
        return np.dtype(_READ[dtype])
    if isinstance(dtype, str) and dtype in _NOT_READ:
        raise InvalidInput(_text(name), f"{_REAL_NUMBERS}, not {dtype}")
    shown_dtype = _text(dtype) if isinstance(dtype, str) else "not a string"
    raise _unreadable(f"tensor '{_text(name)}': its dtype ({shown_dtype}) is not a safetensors one")


def _check_names(names: list[str], members: tuple[str, ...], required: tuple[str, ...]) -> None:
    unknown = [name for name in names if name not in members]
    if unknown:
        raise InvalidInput(
            _text(unknown[0]), f"is not a tensor this endpoint reads ({', '.join(members)})"
        )
    for name in required:
        if name not in names:
            raise InvalidInput(name, "is required in the safetensors file")


def _check_offsets(entries: dict[str, _Entry], size: int) -> None:
    """The byte ranges, in order, tile the data exactly: no gap, no overlap, nothing after
    (the format's rule, which also keeps one tensor from being another's bytes)."""
    position = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda item: item[1][2:]):
        if begin != position:
            what = "overlaps the tensor before it" if begin < position else "leaves a gap"
            raise _unreadable(
                f"tensor '{_text(name)}': data_offsets [{begin:,}, {end:,}] {what}; the "
                "tensors' bytes must follow each other from offset 0"
            )
        position = end
    if position != size:
        raise _unreadable(
            f"its tensors' data_offsets end at {position:,}, the file holds {size:,} bytes "
            "of data after its header"
        )
