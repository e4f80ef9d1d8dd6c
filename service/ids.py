"""Transport-free answers about position ids: a family's rows at posted ids (checked, then
computed a chunk of ids at a time), M-RoPE's ``(3, L)`` ids for a sequence's layout, and
Qwen3-VL's bilinear indices and weights into its learned position table.
They take parsed values and return encoded answers; HTTP is the web toolkit's business."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np
import orjson
from numpy.typing import NDArray

from service import batches, codecs
from service.codecs import npy
from service.codecs.types import MEDIA_TYPES, BodyFormat, Encoded, Format, Parts
from service.encodings import mrope_positions, registry, vision_interpolation
from service.encodings.registry import Key, Rows
from service.errors import InvalidInput, MalformedBody
from service.limits import Limits
from service.runtime import Runtime

# The answer's numbers computed at a time: a chunk's ids converted and its rows' temporaries
# are what a request holds besides its answer.
_CHUNK_ELEMENTS: Final = 1 << 18

At = Callable[[Any, Any], Rows]


def ids_of(
    body: bytearray, kind: BodyFormat, integers: bool, axes: int, width: int, limits: Limits
) -> NDArray[Any]:
    """The posted ids, checked: shaped ``(L,)`` or ``(B, L)`` after a leading axis of
    ``axes`` when there are several (or ``(L, axes)``, one coordinate list a row), their
    rows × ``width`` within the limits (before any is converted), then non-negative
    integers within int64, or finite numbers. They keep the dtype they were sent in (an
    .npy's are a view of the body): the rows' computation converts a chunk at a time
    (uint8 ids as int64 would be eight times the body)."""
    if not body:
        raise MalformedBody(f"the body is empty: send the position ids ({MEDIA_TYPES[kind]})")
    if kind == "json":
        ids = codecs.json.positions(body, limits.json_elements, integers)
    else:
        ids = npy.decode(body, "position_ids")  # a view of the body
        if integers and ids.dtype.kind not in "iu":
            raise InvalidInput("position_ids", f"must be integers, not {ids.dtype}")
    lead = (axes,) if axes > 1 else ()
    if axes > 1 and ids.ndim == 2 and ids.shape[0] != axes and ids.shape[1] == axes:
        ids = ids.T  # (L, axes), a list of coordinates: the same ids
    if ids.shape[: len(lead)] != lead or not 1 <= ids.ndim - len(lead) <= 2:
        given = [str(axes)] if lead else []
        forms = [[*given, "L"], [*given, "B", "L"], *([["L", *given]] if lead else [])]
        shapes = " or ".join(f"({', '.join(form)})" for form in forms)
        raise InvalidInput("position_ids", f"must be shaped {shapes}, not {ids.shape}")
    count = ids.size // axes
    limits.rows(count, width, "position ids × width")
    if not ids.size:
        return ids
    if integers:
        if ids.dtype.kind == "u" and int(ids.max()) > np.iinfo(np.int64).max:
            raise InvalidInput("position_ids", f"holds {int(ids.max())}, past int64")
        if int(ids.min()) < 0:
            raise InvalidInput("position_ids", f"must be non-negative, not {int(ids.min())}")
    elif not np.isfinite(ids).all():
        raise InvalidInput("position_ids", "must be finite numbers")
    return ids


def rows_at_ids(
    runtime: Runtime,
    key: Key,
    ids: NDArray[Any],
    axes: int,
    integers: bool,
    at: At | None,
    fmt: Format,
    gzip: bool,
    fields: Mapping[str, Any],
) -> Encoded:
    """The rows at the checked ids (of ``axes`` axes: ``at(key, ids)`` computes them, or,
    without it, integer ids of one axis are read from the cache's pages), one row per id,
    encoded with ``fields`` and their ``shape`` (a worker thread)."""
    shape = ids.shape[1:] if axes > 1 else ids.shape
    count = math.prod(shape)
    flat = ids.reshape((axes, count) if axes > 1 else (count,))
    if at is not None and count:
        largest = max(abs(flat.min().item()), abs(flat.max().item()))
        shifted = math.ceil(largest) + registry.shift(key)
        runtime.limits.last_position(shifted, "the largest position id")
    arrays = rows_of(runtime, key, flat, count, integers, at)
    names = registry.arrays(key)
    if not names:
        described = {**fields, "shape": [*shape, key.width]}
        encoded = codecs.encode(fmt, described, [arrays[0].reshape(*shape, key.width)], "data")
    else:
        width = key.width // len(names)
        named = {
            name: [rows.reshape(*shape, width)] for name, rows in zip(names, arrays, strict=True)
        }
        encoded = codecs.encode_named(fmt, {**fields, "shape": [len(names), *shape, width]}, named)
    return codecs.gzip(encoded) if gzip else encoded


def rows_of(
    runtime: Runtime, key: Key, flat: NDArray[Any], count: int, integers: bool, at: At | None
) -> list[NDArray[np.floating]]:
    """The rows at ``flat``'s ``count`` ids (the last axis), each named array's columns
    (or the whole rows) in an array of its own, the answer's, computed a chunk of ids at
    a time: besides the answer, a request holds one chunk's ids converted and its rows'
    temporaries, never the whole ids as int64 or the rows' angles and copies."""
    names = registry.arrays(key)
    columns = key.width // max(1, len(names))
    out = [np.empty((count, columns), key.dtype) for _ in names or ("data",)]
    step = max(1, _CHUNK_ELEMENTS // key.width)
    kind = np.int64 if integers else np.float64
    for first in range(0, count, step):
        part = flat[..., first : first + step]
        if at is None:  # integers of one axis (the route checks)
            rows = batches.rows_at(runtime, key, part.astype(np.int64))
        else:
            rows = registry.checked(key, at(key, part.astype(kind)))
        pieces = [piece for [piece] in registry.split(key, [rows]).values()] if names else [rows]
        for target, piece in zip(out, pieces, strict=True):
            target[first : first + step] = piece
    return out


def mrope_ids(
    runs: list[mrope_positions.Run],
    merge: int,
    model: mrope_positions.Model,
    rate: int | None,
    fields: Mapping[str, Any],
    fmt: Format,
    gzip: bool,
) -> Encoded:
    """M-RoPE's ``(3, L)`` int64 ids for ``runs`` and its rope delta (``X-Rope-Delta``):
    ``.npy``, or JSON with ``fields``, the length and the delta (a worker thread)."""
    ids, delta = mrope_positions.position_ids(runs, merge, model, rate or 0)
    said = {"x-rope-delta": str(delta)}
    if fmt == "npy":
        headers, body = npy.encode([ids])
        return {**headers, **said}, body
    length = ids.shape[-1]
    document: dict[str, Any] = {**fields, "length": length, "rope_delta": delta}
    body = orjson.dumps({**document, "position_ids": ids}, option=orjson.OPT_SERIALIZE_NUMPY)
    encoded = {"content-type": MEDIA_TYPES["json"], **said}, body
    return codecs.gzip(encoded) if gzip else encoded


def interpolation(
    grid: vision_interpolation.Grid,
    num_grid_per_side: int,
    spatial_merge_size: int,
    fields: Mapping[str, Any],
    fmt: Format,
    gzip: bool,
) -> Encoded:
    """Qwen3-VL's ``(N, 4)`` int64 indices and float32 weights for ``grid``: JSON with
    ``fields`` and their ``shape``, or ``npz`` members ``indices`` and ``weights`` (a worker
    thread)."""
    indices, weights = vision_interpolation.indices_and_weights(
        grid, num_grid_per_side, spatial_merge_size
    )
    arrays: dict[str, Parts] = {"indices": [indices], "weights": [weights]}
    encoded = codecs.encode_named(fmt, {**fields, "shape": list(indices.shape)}, arrays)
    return codecs.gzip(encoded) if gzip else encoded
