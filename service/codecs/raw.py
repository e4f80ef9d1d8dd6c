"""Raw bytes: little-endian C-order values, with the shape and dtype in headers."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.codecs.types import MEDIA_TYPES, Buffer, Encoded, Parts, little_endian, shape_of
from service.errors import MalformedBody


def encode(parts: Parts) -> Encoded:
    """The concatenated ``parts`` as little-endian C-order bytes, with ``X-Shape`` (the
    dimensions, comma-separated) and ``X-Dtype``."""
    data = [little_endian(part) for part in parts]
    headers = {
        "content-type": MEDIA_TYPES["raw"],
        "x-shape": ",".join(map(str, shape_of(data))),
        "x-dtype": data[0].dtype.name,
    }
    return headers, b"".join(part.data.cast("B") for part in data)


def decode(body: Buffer, shape: tuple[int, ...], dtype: str) -> NDArray[Any]:
    """Little-endian C-order bytes as an array of ``shape`` and ``dtype``."""
    expected = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if len(body) != expected:
        raise MalformedBody(f"expected {expected} bytes for {shape} {dtype}, got {len(body)}")
    return np.frombuffer(body, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
