"""``.npy`` files (NumPy's format): written with ``numpy.lib.format``'s own header writer,
read without ever unpickling. A posted header is a Python literal of at most 10,000 bytes
(read as numpy reads it with ``ast.literal_eval``, by :mod:`._literal`), its nesting bounded
before it is parsed, and
every field checked here: only what numpy itself writes is read."""

from __future__ import annotations

import io
import math
import re
from typing import Any, Final

import numpy as np
from numpy.lib import format as npy_format
from numpy.typing import NDArray

from service.codecs import _literal
from service.codecs.types import (
    MAX_DIMS,
    MEDIA_TYPES,
    Buffer,
    Encoded,
    Parts,
    data_bytes,
    fits,
    little_endian,
    shape_of,
)
from service.errors import InvalidInput, MalformedBody
from service.text import shown

_MAGIC: Final = b"\x93NUMPY"
_HEADER_LIMIT: Final = 10_000  # numpy's own cap on a header's size (max_header_size)
_LENGTH_BYTES: Final = {(1, 0): 2, (2, 0): 4}  # 3.0 (a UTF-8 header) is not read
_KEYS: Final = ("descr", "fortran_order", "shape")
# A header's dict holds a descr list of field tuples, each with a shape: deeper is never one.
_NESTING: Final = 4
_REAL: Final = re.compile(r"[<>|=]?[fiu]\d{0,2}")
_KIND: Final = re.compile(r"[<>|=]?([a-zA-Z])(\d*)")
_KINDS: Final = {
    "b": "booleans",
    "U": "strings",
    "S": "bytes",
    "a": "bytes",
    "V": "raw bytes (void)",
    "M": "datetimes",
    "m": "timedeltas",
}
_REAL_NUMBERS: Final = "must hold real numbers (float16, float32, float64 or integers)"


def header(shape: tuple[int, ...], dtype: np.dtype[Any]) -> bytes:
    """A version 1.0 header for a C-order little-endian array, as ``numpy.save`` writes it."""
    out = io.BytesIO()
    fields = {
        "descr": npy_format.dtype_to_descr(dtype.newbyteorder("<")),
        "fortran_order": False,
        "shape": shape,
    }
    npy_format.write_array_header_1_0(out, fields)
    return out.getvalue()


def encode(parts: Parts) -> Encoded:
    """An ``.npy`` file of the concatenated ``parts`` that ``numpy.load(...,
    allow_pickle=False)`` reads."""
    data = [little_endian(part) for part in parts]
    head = header(shape_of(data), data[0].dtype)
    body = b"".join([head, *(data_bytes(part) for part in data)])
    return {"content-type": MEDIA_TYPES["npy"]}, body


def decode(body: Buffer, name: str = "embeddings") -> NDArray[Any]:
    """The array in an ``.npy`` body, without copying its data (the result is a view of
    ``body``). Only real numbers (float and integer dtypes) are read: anything else is
    :class:`InvalidInput`, and a file that is not ``.npy`` :class:`MalformedBody`."""
    view = memoryview(body)
    if view[:6].tobytes() != _MAGIC:
        raise MalformedBody(f"{name}: not an .npy file (it does not start with the .npy magic)")
    try:
        fields, offset = _header(view)
    except _Unreadable as exc:
        raise MalformedBody(f"{name}: not a readable .npy file: {exc}") from None
    shape, fortran, dtype = _check(fields, name)
    count = math.prod(shape)
    expected = count * dtype.itemsize
    if len(view) - offset != expected:
        raise MalformedBody(
            f"{name}: the header promises {expected:,} bytes of data for shape {shape} "
            f"{dtype}, the file holds {len(view) - offset:,}"
        )
    flat = np.frombuffer(view, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C")


class _Unreadable(Exception):
    """Why a header cannot be read (the message ends up in a :class:`MalformedBody`)."""


def _header(view: memoryview) -> tuple[object, int]:
    """The header's value, parsed, and where the data starts."""
    if len(view) < 8:
        raise _Unreadable("its header is truncated")
    version = (view[6], view[7])
    width = _LENGTH_BYTES.get(version)
    if width is None:
        raise _Unreadable(f"version {version[0]}.{version[1]} is not supported; use 1.0 or 2.0")
    if len(view) < 8 + width:
        raise _Unreadable("its header is truncated")
    length = int.from_bytes(view[8 : 8 + width], "little")
    if length > _HEADER_LIMIT:
        raise _Unreadable(f"its header is {length:,} bytes long, over numpy's {_HEADER_LIMIT:,}")
    start = 8 + width
    if len(view) < start + length:
        raise _Unreadable(
            f"its header is truncated: {length:,} bytes long, the file holds "
            f"{len(view) - start:,} after its length"
        )
    text = view[start : start + length].tobytes().decode("latin-1").rstrip()
    if "\\" in text:
        raise _Unreadable("its header holds an escape, which numpy never writes")
    try:
        return _literal.parse(text, _NESTING), start + length
    except (_literal.NotALiteral, RecursionError):
        raise _Unreadable("its header is not a Python literal as numpy writes it") from None


def _check(fields: object, name: str) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """The shape, order and dtype a parsed header describes, if it is one numpy would read
    and of an array of real numbers."""
    unreadable = f"{name}: not a readable .npy file:"
    if not isinstance(fields, dict):
        raise MalformedBody(f"{unreadable} its header is not a dictionary")
    if set(fields) != set(_KEYS):
        raise MalformedBody(
            f"{unreadable} its header must have the keys descr, fortran_order and shape, "
            "and no others"
        )
    fortran, shape = fields["fortran_order"], fields["shape"]
    if not isinstance(fortran, bool):
        raise MalformedBody(f"{unreadable} fortran_order must be True or False")
    if not isinstance(shape, tuple):
        raise MalformedBody(f"{unreadable} shape must be a tuple of integers")
    if not all(type(size) is int for size in shape):
        raise MalformedBody(f"{unreadable} shape must hold integers only")
    if len(shape) > MAX_DIMS:
        raise MalformedBody(
            f"{unreadable} shape has {len(shape)} dimensions; numpy allows at most {MAX_DIMS}"
        )
    if any(size < 0 for size in shape):
        raise MalformedBody(f"{unreadable} shape {shape} has a negative dimension")
    dtype = _dtype(fields["descr"], name)
    if not fits(shape, dtype.itemsize):
        raise MalformedBody(f"{unreadable} shape {shape} is too large for any array")
    return shape, fortran, dtype


def _dtype(descr: object, name: str) -> np.dtype[Any]:
    if isinstance(descr, list | tuple):
        raise InvalidInput(name, f"{_REAL_NUMBERS}, not a structured or subarray dtype")
    if not isinstance(descr, str):
        raise MalformedBody(f"{name}: not a readable .npy file: its descr is not a dtype")
    if _REAL.fullmatch(descr):
        try:
            dtype = np.dtype(descr)
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind not in "fiu" or dtype.itemsize == 0 or dtype.shape:
            raise MalformedBody(
                f"{name}: not a readable .npy file: its descr '{descr}' is not a dtype"
            )
        return dtype
    kind = _KIND.match(descr)
    letter = kind[1] if kind else ""
    if letter == "O":
        raise InvalidInput(name, "holds Python objects, which are never unpickled; send numbers")
    if letter == "c":
        what = f"complex{8 * int(kind[2])}" if kind and kind[2] else "complex numbers"
    else:
        what = _KINDS.get(letter, f"the dtype '{shown(descr)}'")
    raise InvalidInput(name, f"{_REAL_NUMBERS}, not {what}")
