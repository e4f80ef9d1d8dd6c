"""``POST /v1/positions/mrope``: M-RoPE's ``(3, L)`` position ids and rope delta for a
sequence's layout, as Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's ``get_rope_index`` compute
them (:mod:`service.encodings.mrope_positions`)."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Query, Request, Response

from service import handlers, ids
from service.codecs.types import Encoded
from service.encodings import mrope_positions
from service.schemas.hf_config import read_config
from service.schemas.mrope_layout import Layout, PositionsDocument
from service.web import openapi
from service.web.answers import Offer, Plan, answer
from service.web.deps import RuntimeDep
from service.web.documents import located, posted_document

PATH: Final = "/v1/positions/mrope"
router = APIRouter(tags=["rotary"])
_FORMATS: Final[tuple[Literal["json", "npy"], ...]] = ("json", "npy")
_BODY: Final = {
    "required": True,
    "description": 'The layout: {"segments": [{"text": 5}, {"image": [1, 28, 28]}, '
    '{"video": [4, 28, 28], "seconds_per_grid": 1.0}], "spatial_merge_size": 2, '
    '"tokens_per_second": null}, or the segments beside a model\'s "config".',
    "content": {"application/json": {"schema": openapi.inline(Layout.model_json_schema())}},
}


def _read(body: bytes | bytearray) -> dict[str, Any]:
    return read_config(body, "the layout")


@router.post(
    PATH,
    operation_id="getMropePositions",
    summary="M-RoPE's (3, L) position ids and rope delta for a sequence of text, images "
    "and videos, as Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's get_rope_index.",
    response_class=Response,
    openapi_extra={"requestBody": _BODY},
    responses={
        200: {
            "model": PositionsDocument,
            "content": openapi.media(_FORMATS),
            "description": "JSON, or the (3, L) int64 ids as .npy (X-Rope-Delta).",
        },
        **openapi.problems_of(400, 406, 408, 413, 415, 422),
        **openapi.BUSY,
    },
)
async def positions(
    request: Request,
    runtime: RuntimeDep,
    format: Annotated[Literal["json", "npy"] | None, Query(description="json or npy.")] = None,
) -> Response:
    """M-RoPE's position ids for a layout."""
    offer = Offer(_FORMATS, format)
    offer.chosen(request)  # an unacceptable answer is refused before the body is read
    document = await posted_document(request, runtime, _read)
    with located({}):
        layout = Layout.model_validate(document)
    model, merge, rate = layout.settings()
    runs = layout.runs(model, merge, rate)
    length = sum(mrope_positions.tokens(run, merge, model) for run in runs)
    # int64 ids: each counts as two of a table's float32 numbers
    runtime.limits.rows(length, 2 * mrope_positions.AXES, "position ids (3 × L, int64: twice)")
    fields = {"model": model, "spatial_merge_size": merge, "tokens_per_second": rate}
    elements = length * mrope_positions.AXES

    async def encode(fmt: Literal["json", "npy"], gzip: bool) -> Encoded:
        work = functools.partial(ids.mrope_ids, runs, merge, model, rate, fields, fmt, gzip)
        return await runtime.compute(elements, work)

    plan = Plan(
        offer,
        encode,
        elements=elements,
        json_hint="ask for format=npy",
        large=elements * 8 > handlers.LARGE_ANSWER_BYTES,
    )
    return await answer(request, runtime, plan)
