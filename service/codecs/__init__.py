"""Pure wire formats: arrays to ``(headers, body)`` and posted bodies back to arrays, one
module per format. Negotiation lives in the web toolkit; these know no HTTP."""

from __future__ import annotations

import gzip as gzip_module
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.arrays import joined
from service.codecs import json, npy, npz, raw, safetensors
from service.codecs.types import MEDIA_TYPES, BodyFormat, Encoded, Format, Parts
from service.errors import Limit, MalformedBody

# What an apply body holds: the batch, and (but in npy and raw bodies) its positions.
APPLY_MEMBERS = ("embeddings", "position_ids")


@dataclass(frozen=True, slots=True)
class Reading:
    """What decoding a posted body may need: the bound of a decompressed ``npz`` (and who
    is told of its bytes as they are made), the numbers a JSON body may hold, and a raw
    body's shape and dtype."""

    size: Limit
    numbers: Limit
    layout: tuple[tuple[int, ...], str] | None = None
    hold: Callable[[int], None] | None = None
    archive: Any = None  # an npz body already opened (its directory read once)


@dataclass(frozen=True, slots=True)
class Codec:
    """One wire format: whether it is text (JSON: numbers counted against
    ``PE_MAX_JSON_ELEMENTS``, gzipped when welcome, encoded inline when small), whether a
    posted body's batch is a view of its bytes, and its three functions: one array (as
    blocks of rows, described by ``fields``, named ``key``), several named arrays of one
    shape, and an apply body back to its arrays."""

    textual: bool
    view: bool
    encode: Callable[[Mapping[str, Any], Parts, str], Encoded]
    encode_named: Callable[[Mapping[str, Any], Mapping[str, Parts]], Encoded]
    decode: Callable[[bytearray, Reading], dict[str, NDArray[Any]]]


def _stacked(arrays: Mapping[str, Parts]) -> Parts:
    """Several arrays of one shape as one, along a new first axis, in ``arrays``' order:
    as blocks of one row each, which the encoders join into their bytes (``np.stack``
    would first copy them all into another array of the answer's size)."""
    return [joined(parts)[np.newaxis] for parts in arrays.values()]


def _raw_decode(body: bytearray, reading: Reading) -> dict[str, NDArray[Any]]:
    if reading.layout is None:
        raise ValueError("a raw body needs its layout")  # the web layer always gives it
    return {"embeddings": raw.decode(body, *reading.layout)}


# Every format, by the name Format gives it: a new one is a module and an entry here.
CODECS: Final[dict[Format, Codec]] = {
    "json": Codec(
        textual=True,
        view=False,
        encode=json.encode,
        encode_named=json.encode_named,
        decode=lambda body, reading: json.decode(body, reading.numbers),
    ),
    "npy": Codec(
        textual=False,
        view=True,
        encode=lambda fields, parts, key: npy.encode(parts),
        encode_named=lambda fields, arrays: npy.encode(_stacked(arrays)),
        decode=lambda body, reading: {"embeddings": npy.decode(body)},
    ),
    "npz": Codec(
        textual=False,
        view=False,
        encode=lambda fields, parts, key: npz.encode(**{key: joined(parts)}),
        encode_named=lambda fields, arrays: npz.encode(
            **{name: joined(parts) for name, parts in arrays.items()}
        ),
        decode=lambda body, reading: npz.decode(
            body, reading.size, APPLY_MEMBERS, APPLY_MEMBERS[:1], reading.hold, reading.archive
        ),
    ),
    "raw": Codec(
        textual=False,
        view=True,
        encode=lambda fields, parts, key: raw.encode(parts),
        encode_named=lambda fields, arrays: raw.encode(_stacked(arrays)),
        decode=_raw_decode,
    ),
    "safetensors": Codec(
        textual=False,
        view=True,
        encode=lambda fields, parts, key: safetensors.encode(fields, {key: parts}),
        encode_named=safetensors.encode,
        decode=lambda body, reading: safetensors.decode(
            body, APPLY_MEMBERS, required=APPLY_MEMBERS[:1]
        ),
    ),
}
# The bodies whose batch is a view of the body's bytes, not a copy.
VIEWS: Final[tuple[Format, ...]] = tuple(name for name, codec in CODECS.items() if codec.view)


def textual(fmt: Format) -> bool:
    """Whether ``fmt`` is text (JSON), with the limits and compression text takes."""
    return CODECS[fmt].textual


def encode(fmt: Format, fields: Mapping[str, Any], parts: Parts, key: str = "data") -> Encoded:
    """The concatenated ``parts`` in ``fmt``; ``fields`` describe it: in JSON, where the
    array is the member ``key``, and in safetensors' ``__metadata__``, where it is the
    tensor ``key``. ``npz`` names its one member ``key``."""
    return CODECS[fmt].encode(fields, parts, key)


def encode_named(fmt: Format, fields: Mapping[str, Any], arrays: Mapping[str, Parts]) -> Encoded:
    """Several arrays of one shape (each as blocks of rows) in ``fmt``: JSON and ``npz``
    members and safetensors tensors by name; ``npy`` and ``raw`` one array stacked along a
    new first axis, in ``arrays``' order."""
    return CODECS[fmt].encode_named(fields, arrays)


def decode(
    kind: BodyFormat,
    body: bytearray,
    size: Limit,
    numbers: Limit,
    layout: tuple[tuple[int, ...], str] | None = None,
    hold: Callable[[int], None] | None = None,
    archive: Any = None,
) -> dict[str, NDArray[Any]]:
    """An apply body in ``kind``: ``embeddings``, and ``position_ids`` if it has them.
    ``size`` bounds a decompressed ``npz`` (``hold`` is told of its bytes as they are
    made), ``numbers`` a JSON body; ``layout`` is a raw body's shape and dtype."""
    if not body and kind != "raw":  # raw bytes of a shape with no element are empty
        raise MalformedBody(f"the body is empty: send the batch ({MEDIA_TYPES[kind]})")
    return CODECS[kind].decode(body, Reading(size, numbers, layout, hold, archive))


def gzip(encoded: Encoded) -> Encoded:
    """``body`` gzip-compressed (level 1: fast), with ``Content-Encoding: gzip``."""
    headers, body = encoded
    return {**headers, "content-encoding": "gzip"}, gzip_module.compress(
        body, compresslevel=1, mtime=0
    )
