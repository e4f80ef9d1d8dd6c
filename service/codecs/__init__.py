"""Pure wire formats: arrays to ``(headers, body)`` and posted bodies back to arrays, one
module per format. Negotiation lives in the web toolkit; these know no HTTP."""

from __future__ import annotations

import gzip as gzip_module
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.arrays import joined
from service.codecs import json, npy, npz, raw, safetensors
from service.codecs.types import BodyFormat, Encoded, Format, Parts
from service.errors import Limit

# What an apply body holds: the batch, and (but in npy and raw bodies) its positions.
APPLY_MEMBERS = ("embeddings", "position_ids")
# The bodies whose batch is a view of the body's bytes, not a copy.
VIEWS: tuple[BodyFormat, ...] = ("npy", "raw", "safetensors")


def encode(fmt: Format, fields: Mapping[str, Any], parts: Parts, key: str = "data") -> Encoded:
    """The concatenated ``parts`` in ``fmt``; ``fields`` describe it: in JSON, where the
    array is the member ``key``, and in safetensors' ``__metadata__``, where it is the
    tensor ``key``. ``npz`` names its one member ``key``."""
    if fmt == "json":
        return json.encode(fields, parts, key)
    if fmt == "npy":
        return npy.encode(parts)
    if fmt == "npz":
        return npz.encode(**{key: joined(parts)})
    if fmt == "safetensors":
        return safetensors.encode(fields, {key: parts})
    return raw.encode(parts)


def encode_named(fmt: Format, fields: Mapping[str, Any], arrays: Mapping[str, Parts]) -> Encoded:
    """Several arrays of one shape (each as blocks of rows) in ``fmt``: JSON and ``npz``
    members and safetensors tensors by name; ``npy`` and ``raw`` one array stacked along a
    new first axis, in ``arrays``' order."""
    if fmt == "json":
        return json.encode_named(fields, arrays)
    if fmt == "safetensors":
        return safetensors.encode(fields, arrays)
    if fmt == "npz":
        return npz.encode(**{name: joined(parts) for name, parts in arrays.items()})
    stacked = np.stack([joined(parts) for parts in arrays.values()])
    return npy.encode([stacked]) if fmt == "npy" else raw.encode([stacked])


def decode(
    kind: BodyFormat,
    body: bytearray,
    size: Limit,
    numbers: Limit,
    layout: tuple[tuple[int, ...], str] | None = None,
    hold: Callable[[int], None] | None = None,
) -> dict[str, NDArray[Any]]:
    """An apply body in ``kind``: ``embeddings``, and ``position_ids`` if it has them.
    ``size`` bounds a decompressed ``npz`` (``hold`` is told of its bytes as they are
    made), ``numbers`` a JSON body; ``layout`` is a raw body's shape and dtype."""
    if kind == "npy":
        return {"embeddings": npy.decode(body)}
    if kind == "raw":
        if layout is None:
            raise ValueError("a raw body needs its layout")  # the web layer always gives it
        return {"embeddings": raw.decode(body, *layout)}
    if kind == "npz":
        return npz.decode(body, size, APPLY_MEMBERS, APPLY_MEMBERS[:1], hold)
    if kind == "safetensors":
        return safetensors.decode(body, APPLY_MEMBERS, required=APPLY_MEMBERS[:1])
    return json.decode(body, numbers)


def gzip(encoded: Encoded) -> Encoded:
    """``body`` gzip-compressed (level 1: fast), with ``Content-Encoding: gzip``."""
    headers, body = encoded
    return {**headers, "content-encoding": "gzip"}, gzip_module.compress(
        body, compresslevel=1, mtime=0
    )
