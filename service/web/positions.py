"""``POST {table}/positions``: a family's rows at posted position ids, for any family that
declares them (:class:`service.web.families.Positions`): ids of one axis or of several
(an M-RoPE table's ``(3, L)``, a grid's ``(2, L)``), integers or any finite numbers
(diffusion timesteps), sent as JSON (``{"position_ids": [...]}``) or an ``.npy``. The
query is the table's ``GET`` parameters; the answer holds one row per id, in every format
the ``GET`` offers (a row's named arrays as named members, or stacked)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
from fastapi import APIRouter, Request, Response
from numpy.typing import NDArray

from service import batches, codecs, handlers
from service.codecs import npy
from service.codecs.types import FORMATS, MEDIA_TYPES, TABLE_FORMATS, BodyFormat, Encoded, Format
from service.encodings import registry
from service.encodings.registry import Key
from service.errors import InvalidInput, MalformedBody
from service.limits import Limits, reserving
from service.runtime import Runtime
from service.web import openapi
from service.web.bodies import body_format, read_posted
from service.web.declared import Declared, Positions
from service.web.deps import endpoint
from service.web.disconnect import unless_gone
from service.web.negotiation import accepts_gzip, combined, negotiate
from service.web.responses import respond

_BODIES: Final[tuple[BodyFormat, ...]] = ("json", "npy")
# The answer's numbers computed at a time: a chunk's ids converted and its rows' temporaries
# are what a request holds besides its answer.
_CHUNK_ELEMENTS: Final = 1 << 18
# an answer's fields that name a block of rows, which rows at ids do not have
_WINDOW: Final = ("start", "stop", "dim_start", "dim_stop", "shape")
_BODY: Final[dict[str, Any]] = {
    "required": True,
    "description": 'The position ids: JSON {"position_ids": [...]} or an .npy file.',
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"position_ids": {"type": "array", "items": {}}},
                "required": ["position_ids"],
            }
        },
        MEDIA_TYPES["npy"]: openapi.BINARY,
    },
}


def route(routes: APIRouter, declared: Declared[Any, Any], spec: Positions[Any]) -> None:
    """``POST {resource}/positions`` on ``routes``. Without ``at``, the ids are a cached
    table's row positions: integers of one axis."""
    if spec.at is None and (not spec.integers or declared.family.block is not None):
        raise TypeError(f"{declared.family.name}: positions need at(), but integer rows")

    async def post(query: Any, request: Request, runtime: Runtime) -> Response:
        raw = request.scope["headers"]
        content_type = combined(raw, b"content-type")
        kind = body_format(content_type, _BODIES)
        key = await declared.key_of(runtime, query)
        offered = FORMATS if registry.arrays(key) else TABLE_FORMATS
        fmt = getattr(query, "format", None) or negotiate(combined(raw, b"accept"), offered)
        gzip = codecs.textual(fmt) and accepts_gzip(combined(raw, b"accept-encoding"))
        fields = {
            name: value
            for name, value in declared.describe(query, key).items()
            if name not in _WINDOW
        }
        limits, axes = runtime.limits, spec.axes(key)
        if spec.at is None and axes != 1:
            raise TypeError(f"{declared.family.name}: positions of {axes} axes need at()")
        # the body stays reserved until the answer is computed: an .npy's ids are a view of it
        with reserving(runtime.posted) as reservation:
            body = await read_posted(request, runtime, limits.body_bytes, reservation)
            # the ids decoded and checked in the body's lane; the rows computed in the
            # answer's, with a permit when it is large
            ids = await runtime.compute(
                len(body), ids_of, body, kind, spec.integers, axes, key.width, limits
            )
            count = ids.size // axes
            if codecs.textual(fmt):
                limits.json_answer(count * key.width, hint="ask for format=npy")
            work = functools.partial(_answer, runtime, spec, key, ids, fmt, gzip, fields)

            async def produce() -> Encoded:
                return await runtime.compute(count * key.width, work)

            large = count * registry.row_bytes(key) > handlers.LARGE_ANSWER_BYTES
            answer = await unless_gone(
                request, lambda: handlers.holding_permit(runtime, large, produce)
            )
        return respond(runtime, answer, {"cache-control": "no-store"})

    ok = {"content": openapi.media(FORMATS), "description": "One row per position id."}
    routes.add_api_route(
        declared.resource + "/positions",
        endpoint(post, declared.query),
        methods=["POST"],
        operation_id=spec.operation_id,
        summary=spec.summary,
        description=spec.summary,
        response_class=Response,
        openapi_extra={"requestBody": _BODY},
        responses={200: ok, **openapi.problems_of(400, 406, 408, 413, 415, 422), **openapi.BUSY},
    )


def ids_of(
    body: bytearray, kind: BodyFormat, integers: bool, axes: int, width: int, limits: Limits
) -> NDArray[Any]:
    """The posted ids, checked: shaped ``(L,)`` or ``(B, L)`` after a leading axis of
    ``axes`` when there are several, their rows × ``width`` within the limits (before any
    is converted), then non-negative integers within int64, or finite numbers. They keep
    the dtype they were sent in (an .npy's are a view of the body): the rows' computation
    converts a chunk at a time (uint8 ids as int64 would be eight times the body)."""
    if not body:
        raise MalformedBody(f"the body is empty: send the position ids ({MEDIA_TYPES[kind]})")
    if kind == "json":
        ids = codecs.json.positions(body, limits.json_elements, integers)
    else:
        ids = npy.decode(body, "position_ids")  # a view of the body
        if integers and ids.dtype.kind not in "iu":
            raise InvalidInput("position_ids", f"must be integers, not {ids.dtype}")
    lead = (axes,) if axes > 1 else ()
    if ids.shape[: len(lead)] != lead or not 1 <= ids.ndim - len(lead) <= 2:
        shapes = " or ".join(
            f"({', '.join([*map(str, lead), *axis])})" for axis in (["L"], ["B", "L"])
        )
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


def _answer(
    runtime: Runtime,
    spec: Positions[Any],
    key: Key,
    ids: NDArray[Any],
    fmt: Format,
    gzip: bool,
    fields: Mapping[str, Any],
) -> Encoded:
    """The rows at the checked ids, encoded (a worker thread)."""
    axes = spec.axes(key)
    shape = ids.shape[1:] if axes > 1 else ids.shape
    count = math.prod(shape)
    flat = ids.reshape((axes, count) if axes > 1 else (count,))
    if spec.at is not None and count:
        largest = max(abs(flat.min().item()), abs(flat.max().item()))
        shifted = math.ceil(largest) + registry.shift(key)
        runtime.limits.last_position(shifted, "the largest position id")
    arrays = _rows(runtime, spec, key, flat, count)
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


def _rows(
    runtime: Runtime, spec: Positions[Any], key: Key, flat: NDArray[Any], count: int
) -> list[NDArray[np.floating]]:
    """The rows at ``flat``'s ``count`` ids (the last axis), each named array's columns
    (or the whole rows) in an array of its own, the answer's, computed a chunk of ids at
    a time: besides the answer, a request holds one chunk's ids converted and its rows'
    temporaries, never the whole ids as int64 or the rows' angles and copies."""
    names = registry.arrays(key)
    columns = key.width // max(1, len(names))
    out = [np.empty((count, columns), key.dtype) for _ in names or ("data",)]
    step = max(1, _CHUNK_ELEMENTS // key.width)
    kind = np.int64 if spec.integers else np.float64
    for first in range(0, count, step):
        part = flat[..., first : first + step]
        if spec.at is None:  # integers of one axis (route() checks)
            rows = batches.rows_at(runtime, key, part.astype(np.int64))
        else:
            rows = registry.checked(key, spec.at(key, part.astype(kind)))
        pieces = [piece for [piece] in registry.split(key, [rows]).values()] if names else [rows]
        for target, piece in zip(out, pieces, strict=True):
            target[first : first + step] = piece
    return out
