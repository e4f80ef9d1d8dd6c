"""What the wire formats share: their names, media types and the shapes of an encoding."""

from __future__ import annotations

import math
import sys
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

# In the order Accept's ties and wildcards prefer them (safetensors last: it came last).
Format = Literal["json", "npy", "npz", "raw", "safetensors"]
TableFormat = Literal["json", "npy", "raw", "safetensors"]
BodyFormat = Literal["json", "npy", "npz", "raw", "safetensors"]
FORMATS: Final[tuple[Format, ...]] = get_args(Format)
TABLE_FORMATS: Final[tuple[TableFormat, ...]] = get_args(TableFormat)
BODY_FORMATS: Final[tuple[BodyFormat, ...]] = get_args(BodyFormat)
MEDIA_TYPES: Final[dict[Format, str]] = {
    "json": "application/json",
    "npy": "application/x-npy",
    "npz": "application/x-npz",
    "raw": "application/octet-stream",
    # No media type is registered for safetensors (safetensors/safetensors#486 asked for
    # one; the Hub serves the files as application/octet-stream, which is raw's here): an
    # unregistered x- type, as .npy and .npz have, the one safetensors#743 proposes.
    "safetensors": "application/x-safetensors",
}
Headers = dict[str, str]
Buffer = bytes | bytearray | memoryview
Encoded = tuple[Headers, bytes]
# An array given as consecutive blocks of rows (as the cache holds a table): their
# concatenation along the first axis, which the encoders write without making it.
Parts = list[NDArray[Any]]
# numpy's own limit on an array's dimensions (NPY_MAXDIMS); the decoders refuse more.
MAX_DIMS: Final = 64


def fits(shape: tuple[int, ...] | list[int], itemsize: int) -> bool:
    """Whether numpy can hold an array of ``shape`` and ``itemsize`` bytes an item: its
    bound counts the dimensions that are not zero (a zero beside huge sizes too)."""
    return math.prod(max(size, 1) for size in shape) * itemsize <= sys.maxsize


def little_endian(array: NDArray[Any]) -> NDArray[Any]:
    """``array`` as C-order little-endian (itself when it is already)."""
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))


def data_bytes(array: NDArray[Any]) -> memoryview:
    """The bytes of a C-contiguous ``array``, as a flat view: no copy, and empty for an
    array with no element (``memoryview.cast`` refuses a shape with a zero in it)."""
    return array.reshape(-1).view(np.uint8).data


def shape_of(parts: Parts) -> tuple[int, ...]:
    """The shape of the concatenation of ``parts``."""
    return (sum(len(part) for part in parts), *parts[0].shape[1:])
