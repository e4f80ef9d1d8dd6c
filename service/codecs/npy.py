"""``.npy`` files (NumPy's format): written with ``numpy.lib.format``'s own header writer,
read without ever unpickling."""

from __future__ import annotations

import io
import math
from typing import Any, Final

import numpy as np
from numpy.lib import format as npy_format
from numpy.typing import NDArray

from service.codecs.types import MEDIA_TYPES, Buffer, Encoded, Parts, little_endian, shape_of
from service.errors import InvalidInput, MalformedBody

_HEADER_LIMIT: Final = 12 + 10000  # numpy's own cap on a header's size


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
    body = b"".join([head, *(part.data.cast("B") for part in data)])
    return {"content-type": MEDIA_TYPES["npy"]}, body


def decode(body: Buffer, name: str = "embeddings") -> NDArray[Any]:
    """The array in an ``.npy`` body, without copying its data (the result is a view of
    ``body``). Never unpickles: arrays of Python objects are refused."""
    view = memoryview(body)
    if view[:6].tobytes() != b"\x93NUMPY":
        raise MalformedBody(f"{name}: not an .npy file (it does not start with the .npy magic)")
    head = io.BytesIO(view[:_HEADER_LIMIT].tobytes())
    try:
        version = npy_format.read_magic(head)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(head)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(head)
        else:
            raise ValueError(f"version {version} is not supported; use 1.0 or 2.0")
    except (ValueError, OSError, EOFError) as exc:
        raise MalformedBody(f"{name}: not a readable .npy file: {exc}") from None
    if dtype.hasobject:
        raise InvalidInput(name, "holds Python objects, which are never unpickled; send numbers")
    count = math.prod(shape)
    offset = head.tell()
    expected = count * dtype.itemsize
    if len(view) - offset != expected:
        raise MalformedBody(
            f"{name}: the header promises {expected:,} bytes of data for shape {shape} "
            f"{dtype}, the file holds {len(view) - offset:,}"
        )
    flat = np.frombuffer(view, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C")
