"""``POST {table}/positions``: a family's rows at posted position ids, for any family that
declares them (:class:`service.web.families.Positions`): ids of one axis or of several
(an M-RoPE table's ``(3, L)``, a grid's ``(2, L)``), integers or any finite numbers
(diffusion timesteps), sent as JSON (``{"position_ids": [...]}``) or an ``.npy``. The
query is the table's ``GET`` parameters; the answer holds one row per id, in every format
the ``GET`` offers (a row's named arrays as named members, or stacked)."""

from __future__ import annotations

import functools
from typing import Any, Final

from fastapi import APIRouter, Request, Response

from service import handlers
from service.codecs.types import FORMATS, MEDIA_TYPES, BodyFormat, Encoded, Format
from service.encodings import registry
from service.ids import ids_of, rows_at_ids
from service.limits import reserving
from service.runtime import Runtime
from service.web import openapi
from service.web.answers import Plan, answer
from service.web.bodies import body_format, read_posted
from service.web.declared import Declared, Positions
from service.web.deps import endpoint
from service.web.negotiation import combined

_BODIES: Final[tuple[BodyFormat, ...]] = ("json", "npy")
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
        offer = declared.offer(query)
        offer.chosen(request)  # an unacceptable answer is refused before the body is read
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

            async def encode(fmt: Format, gzip: bool) -> Encoded:
                work = functools.partial(
                    rows_at_ids, runtime, key, ids, axes, spec.integers, spec.at, fmt, gzip, fields
                )
                return await runtime.compute(count * key.width, work)

            plan = Plan(
                offer,
                encode,
                elements=count * key.width,
                json_hint="ask for format=npy",
                large=count * registry.row_bytes(key) > handlers.LARGE_ANSWER_BYTES,
                vary=False,  # a posted batch's answer is not kept
                engine=registry.library_engine(key),
            )
            return await answer(request, runtime, plan)

    ok = {
        "content": openapi.media(FORMATS),
        "description": "One row per position id.",
        "headers": openapi.ENGINE_HEADER,
    }
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
