"""Raw bytes: little-endian C-order values, with the shape and dtype in headers (``X-Shape:
8,128,512``, ``X-Dtype: float32``), for answers and for posted bodies alike."""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.arrays import DTYPES
from service.codecs.types import (
    MAX_DIMS,
    MEDIA_TYPES,
    Buffer,
    Encoded,
    Headers,
    Parts,
    data_bytes,
    fits,
    little_endian,
    shape_of,
)
from service.errors import MalformedBody
from service.text import shown

# Enough for any dimension an array can have (sys.maxsize has 19 digits).
_MAX_DIGITS: Final = 19


def headers(shape: tuple[int, ...], dtype: np.dtype[Any]) -> Headers:
    """The headers of raw bytes of ``shape`` and ``dtype``."""
    return {
        "content-type": MEDIA_TYPES["raw"],
        "x-shape": ",".join(map(str, shape)),
        "x-dtype": dtype.name,
    }


def encode(parts: Parts) -> Encoded:
    """The concatenated ``parts`` as little-endian C-order bytes, with ``X-Shape`` (the
    dimensions, comma-separated) and ``X-Dtype``."""
    data = [little_endian(part) for part in parts]
    body = b"".join(data_bytes(part) for part in data)
    return headers(shape_of(data), data[0].dtype), body


def parse_shape(text: str) -> tuple[int, ...]:
    """The dimensions in ``X-Shape``'s form (``8,128,512``; spaces around a number are
    allowed); :class:`ValueError` saying what is wrong, for any other text."""
    items = text.split(",")
    if len(items) > MAX_DIMS:
        raise ValueError(f"has {len(items)} dimensions; at most {MAX_DIMS}")
    numbers = [item.strip() for item in items]
    for number in numbers:
        if not (number.isascii() and number.isdigit()):
            raise ValueError(
                f"'{shown(text)}' is not a shape: give comma-separated non-negative integers, "
                "e.g. 8,128,512"
            )
        if len(number) > _MAX_DIGITS:
            raise ValueError(f"dimension {shown(number, 24)} is too large")
    shape = tuple(int(number) for number in numbers)
    if not fits(shape, 8):  # the widest dtype's
        raise ValueError(f"{shown(text)} is too large for any array")
    return shape


def parse_dtype(text: str) -> str:
    """``X-Dtype``'s value if it is one a raw body may hold, else :class:`ValueError`."""
    dtype = text.strip()
    if dtype not in DTYPES:
        raise ValueError(f"'{shown(dtype)}' is not one of {', '.join(DTYPES)}")
    return dtype


def decode(body: Buffer, shape: tuple[int, ...], dtype: str) -> NDArray[Any]:
    """Little-endian C-order bytes as an array of ``shape`` and ``dtype`` (as
    :func:`parse_shape` and :func:`parse_dtype` return them): a view of ``body``, writable
    when it is. A body of any other length is :class:`MalformedBody`, saying both."""
    kind = np.dtype(dtype).newbyteorder("<")
    count = math.prod(shape)
    expected = count * kind.itemsize
    if len(body) != expected:
        raise MalformedBody(
            f"the raw body holds {len(body):,} bytes; its shape "
            f"{','.join(map(str, shape))} of {dtype} ({kind.itemsize} bytes each) needs "
            f"{expected:,} bytes"
        )
    return np.frombuffer(body, dtype=kind, count=count).reshape(shape)
