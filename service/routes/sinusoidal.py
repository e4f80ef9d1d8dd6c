"""The sinusoidal family: its table (declared for the seam, :mod:`service.web.families`),
the apply of its encoding to posted batches, and ``GET /v1/presets``."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Query, Request, Response

from service import handlers
from service.encodings import registry, sinusoidal
from service.encodings.additive import Additive
from service.encodings.catalogue import PRESETS
from service.schemas.presets import PresetsDocument, document, listed
from service.schemas.sinusoidal import ApplyHttpQuery, TableDocument, TableQuery
from service.web import declared, openapi
from service.web.deps import RuntimeDep
from service.web.responses import apply_response

PATH: Final = "/v1/encodings/sinusoidal"
router = APIRouter(tags=["sinusoidal"])


# the table's GET, built by the seam
TABLE: Final = declared.Declared(
    family=sinusoidal.FAMILY,
    path=PATH,
    query=TableQuery,
    key=TableQuery.key,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop, query.dim_start, query.col_stop, query.max_len
    ),
    describe=lambda query, key: query.describe(),
    document=TableDocument,
    operation_id="getSinusoidalTable",
    summary="A sinusoidal positional-encoding table, or a block of it.",
    width_name="d_model",
    path_in_etag=False,
    audit=True,
)


@router.post(
    PATH + "/apply",
    operation_id="applySinusoidal",
    summary="X * scale + PE[positions] for a posted embedding batch.",
    response_class=Response,
    openapi_extra={"requestBody": openapi.APPLY_BODY},
    responses=openapi.APPLY_RESPONSES,
)
async def apply(
    query: Annotated[ApplyHttpQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """X * scale + PE[positions] for a posted embedding batch."""
    kernel = Additive(query.embedding_scale())
    return await apply_response(
        request,
        runtime,
        query.format,
        kernel,
        query.key,
        query.first_row(),
        query.max_len,
        (query.shape, query.dtype),
    )


@router.get(
    "/v1/presets",
    operation_id="getPresets",
    summary="The presets: each library's table, the function it follows, its parameters.",
)
async def get_presets(response: Response) -> PresetsDocument:
    """The presets: each library's table, the function it follows, its parameters."""
    response.headers["cache-control"] = "public, max-age=3600"
    return PresetsDocument(
        presets=[document(preset) for preset in PRESETS.values()],
        families={
            family: [listed(preset) for preset in presets.values()]
            for family, presets in registry.listed().items()
        },
    )
