"""Pure wire formats: arrays to ``(headers, body)`` and posted bodies back to arrays, one
module per format. Negotiation lives in the web toolkit; these know no HTTP."""

from __future__ import annotations

import gzip as gzip_module
from collections.abc import Mapping
from typing import Any

import numpy as np

from service.codecs import json, npy, npz, raw
from service.codecs.types import Encoded, Format, Parts
from service.encodings.registry import joined


def encode(fmt: Format, fields: Mapping[str, Any], parts: Parts, key: str = "data") -> Encoded:
    """The concatenated ``parts`` in ``fmt``; ``fields`` describe it and appear in JSON
    only, where the array is the member ``key``. ``npz`` names its one member ``key``."""
    if fmt == "json":
        return json.encode(fields, parts, key)
    if fmt == "npy":
        return npy.encode(parts)
    if fmt == "npz":
        return npz.encode(**{key: joined(parts)})
    return raw.encode(parts)


def encode_named(fmt: Format, fields: Mapping[str, Any], arrays: Mapping[str, Parts]) -> Encoded:
    """Several arrays of one shape (each as blocks of rows) in ``fmt``: JSON and ``npz``
    members by name; ``npy`` and ``raw`` one array stacked along a new first axis, in
    ``arrays``' order."""
    if fmt == "json":
        return json.encode_named(fields, arrays)
    if fmt == "npz":
        return npz.encode(**{name: joined(parts) for name, parts in arrays.items()})
    stacked = np.stack([joined(parts) for parts in arrays.values()])
    return npy.encode([stacked]) if fmt == "npy" else raw.encode([stacked])


def gzip(encoded: Encoded) -> Encoded:
    """``body`` gzip-compressed (level 1: fast), with ``Content-Encoding: gzip``."""
    headers, body = encoded
    return {**headers, "content-encoding": "gzip"}, gzip_module.compress(
        body, compresslevel=1, mtime=0
    )
