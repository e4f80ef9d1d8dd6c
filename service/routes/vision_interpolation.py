"""``GET /v1/positions/vision-interpolation``: the rows of Qwen3-VL's learned position
table that each patch of a grid reads, and their bilinear weights, as transformers 5.23's
``get_vision_interpolation_indices_and_weights`` gives them
(:mod:`service.encodings.vision_interpolation`). The table is the checkpoint's weights, not
served; these say how the model resamples it."""

from __future__ import annotations

import functools
from typing import Annotated, Final

from fastapi import APIRouter, Query, Request, Response

from service import handlers, ids
from service.codecs.types import Encoded
from service.encodings import vision_interpolation
from service.encodings.vision_interpolation import TAPS
from service.schemas.vision_interpolation import (
    InterpolationFormat,
    VisionInterpolationDocument,
    VisionInterpolationQuery,
)
from service.web import openapi
from service.web.answers import Offer, Plan, answer
from service.web.deps import RuntimeDep
from service.web.responses import table_etag

PATH: Final = "/v1/positions/vision-interpolation"
router = APIRouter(tags=["vision-rotary"])
_FORMATS: Final[tuple[InterpolationFormat, ...]] = ("json", "npz")
# a row's numbers: four int64 indices (each two of a table's float32 numbers), four weights
_ROW_WIDTH: Final = 3 * TAPS
_ROW_BYTES: Final = TAPS * (8 + 4)


@router.get(
    PATH,
    operation_id="getVisionInterpolation",
    summary="Qwen3-VL's bilinear indices and weights into its learned position table, a "
    "row a patch, as transformers' get_vision_interpolation_indices_and_weights.",
    response_class=Response,
    responses={
        200: {
            "model": VisionInterpolationDocument,
            "content": openapi.media(_FORMATS),
            "description": "JSON, or an .npz of indices (N, 4) int64 and weights (N, 4) float32.",
            "headers": {name: openapi.TABLE_HEADERS[name] for name in ("ETag", "Cache-Control")},
        },
        304: openapi.NOT_MODIFIED,
        **openapi.problems_of(406, 422),
    },
)
async def interpolation(
    query: Annotated[VisionInterpolationQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """Qwen3-VL's bilinear indices and weights for a grid."""
    grid = query.grid_thw()
    tokens = vision_interpolation.tokens(grid)
    # counted before anything is allocated (a grid of 2^20 × 2^20 patches is refused here)
    runtime.limits.rows(tokens, _ROW_WIDTH, "patches × 12: 4 int64 indices, twice, and 4 weights")
    fields = query.describe(grid)
    elements = tokens * 2 * TAPS
    offer = Offer(_FORMATS, query.format)

    async def encode(fmt: InterpolationFormat, gzip: bool) -> Encoded:
        work = functools.partial(
            ids.interpolation,
            grid,
            query.num_grid_per_side,
            query.spatial_merge_size,
            fields,
            fmt,
            gzip,
        )
        return await runtime.compute(elements, work)

    plan = Plan(
        offer,
        encode,
        elements=elements,
        json_hint="ask for format=npz",
        large=tokens * _ROW_BYTES > handlers.LARGE_ANSWER_BYTES,
        etag=lambda fmt, gzip: table_etag({**fields, "resource": PATH}, fmt, gzip),
        gzip_from=handlers.GZIP_MIN_ELEMENTS,
    )
    return await answer(request, runtime, plan)
