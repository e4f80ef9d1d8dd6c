"""``POST {table}/positions``: a family's rows at posted position ids, for any family that
declares them (:class:`service.web.families.Positions`): ids of one axis or of several
(an M-RoPE table's ``(3, L)``, a grid's ``(2, L)``), integers or any finite numbers
(diffusion timesteps), sent as JSON (``{"position_ids": [...]}``) or an ``.npy``. The
query is the table's ``GET`` parameters; the answer holds one row per id, in every format
the ``GET`` offers (a row's named arrays as named members, or stacked)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from fastapi import APIRouter, Request, Response
from numpy.typing import NDArray

from service import batches, codecs
from service.codecs import npy
from service.codecs.types import FORMATS, MEDIA_TYPES, TABLE_FORMATS, BodyFormat, Encoded, Format
from service.encodings import registry
from service.encodings.registry import Key
from service.errors import InvalidInput, UnsupportedMediaType
from service.handlers import Answer
from service.limits import reserving
from service.runtime import Runtime
from service.web import openapi
from service.web.bodies import body_format, read_posted
from service.web.deps import endpoint
from service.web.disconnect import unless_gone
from service.web.negotiation import accepts_gzip, combined, negotiate
from service.web.responses import respond

if TYPE_CHECKING:
    from service.web.families import Declared, Positions

_BODIES: Final = ("json", "npy")
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
    """``POST {resource}/positions`` on ``routes``."""

    async def post(query: Any, request: Request, runtime: Runtime) -> Response:
        key = await declared.key_of(runtime, query)
        raw = request.scope["headers"]
        content_type = combined(raw, b"content-type")
        kind = body_format(content_type)
        if kind not in _BODIES:
            raise UnsupportedMediaType(content_type, [MEDIA_TYPES[body] for body in _BODIES])
        offered = FORMATS if registry.arrays(key) else TABLE_FORMATS
        fmt = getattr(query, "format", None) or negotiate(combined(raw, b"accept"), offered)
        gzip = codecs.textual(fmt) and accepts_gzip(combined(raw, b"accept-encoding"))
        fields = {
            name: value
            for name, value in declared.describe(query, key).items()
            if name not in _WINDOW
        }
        with reserving(runtime.posted) as reservation:
            body = await read_posted(request, runtime, runtime.limits.body_bytes, reservation)
            answer = await unless_gone(
                request,
                lambda: runtime.compute(
                    len(body), _answer, runtime, spec, key, body, kind, fmt, gzip, fields
                ),
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
    body: bytearray, kind: BodyFormat, integers: bool, axes: int, numbers: Any
) -> NDArray[Any]:
    """The posted ids, checked: integers (int64) or finite numbers (float64), shaped
    ``(L,)`` or ``(B, L)`` after a leading axis of ``axes`` when there are several."""
    if kind == "json":
        ids = codecs.json.positions(body, numbers, integers)
    else:
        ids = npy.decode(body, "position_ids")
        if integers and ids.dtype.kind not in "iu":
            raise InvalidInput("position_ids", f"must be integers, not {ids.dtype}")
        ids = ids.astype(np.int64 if integers else np.float64)
    if not integers and not np.isfinite(ids).all():
        raise InvalidInput("position_ids", "must be finite numbers")
    lead = (axes,) if axes > 1 else ()
    if ids.shape[: len(lead)] != lead or not 1 <= ids.ndim - len(lead) <= 2:
        shapes = " or ".join(
            f"({', '.join([*map(str, lead), *axis])})" for axis in (["L"], ["B", "L"])
        )
        raise InvalidInput("position_ids", f"must be shaped {shapes}, not {ids.shape}")
    return ids


def _answer(
    runtime: Runtime,
    spec: Positions[Any],
    key: Key,
    body: bytearray,
    kind: BodyFormat,
    fmt: Format,
    gzip: bool,
    fields: Mapping[str, Any],
) -> Answer:
    """Decode, check, compute and encode the rows at the posted ids (a worker thread)."""
    limits = runtime.limits
    axes = spec.axes(key)
    ids = ids_of(body, kind, spec.integers, axes, limits.json_elements)
    shape = ids.shape[1:] if axes > 1 else ids.shape
    count = math.prod(shape)
    limits.rows(count, key.width, "position ids × width")
    if codecs.textual(fmt):
        limits.json_answer(count * key.width, hint="ask for format=npy")
    flat = ids.reshape((axes, count) if axes > 1 else (count,))
    if count and float(np.min(flat)) < 0 and spec.integers:
        raise InvalidInput("position_ids", f"must be non-negative, not {int(np.min(flat))}")
    if spec.at is None:
        rows = batches.rows_at(runtime, key, flat)
    else:
        if count:
            largest = math.ceil(float(np.max(np.abs(flat))))
            limits.last_position(largest + registry.shift(key), "the largest position id")
        rows = registry.checked(key, spec.at(key, flat)) if count else np.empty((0, key.width))
    rows = rows.astype(key.dtype, copy=False)
    names = registry.arrays(key)
    if not names:
        encoded: Encoded = codecs.encode(
            fmt, {**fields, "shape": [*shape, key.width]}, [rows.reshape(*shape, key.width)], "data"
        )
    else:
        width = key.width // len(names)
        arrays = {
            n: [part.reshape(*shape, width)] for n, [part] in registry.split(key, [rows]).items()
        }
        encoded = codecs.encode_named(fmt, {**fields, "shape": [len(names), *shape, width]}, arrays)
    return Answer(*(codecs.gzip(encoded) if gzip else encoded))
