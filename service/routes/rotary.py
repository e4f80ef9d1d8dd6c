"""The rotary family (RoPE): its cos and sin tables, the same tables from a model's
``config.json``, and the rotation of posted queries or keys."""

from __future__ import annotations

import urllib.parse
from typing import Annotated, Final

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from service import handlers
from service.codecs.types import Format
from service.encodings import rotary
from service.encodings.registry import DType, Rounding
from service.encodings.rotation import Rotation
from service.errors import InvalidParameter
from service.schemas.hf_config import read_config, rotary_query
from service.schemas.rotary import RotaryApplyHttpQuery, RotaryTableDocument, RotaryTableQuery
from service.settings import POSITION_CEILING
from service.web import openapi
from service.web.deps import RuntimeDep
from service.web.documents import located, posted_document
from service.web.responses import apply_response, table_response

PATH: Final = "/v1/encodings/rotary"
_MAX_LOCATION: Final = 8192
# numbers' worth of work a key's frequencies cost per head dimension (they are decimal)
_KEY_COST: Final = 64
router = APIRouter()
_TABLE_200: Final = {
    "model": RotaryTableDocument,
    "content": {**openapi.TABLE_MEDIA, "application/x-npz": {}},
    "description": "cos and sin: JSON members, npz members, or (2, rows, rotary_dim) stacked.",
    "headers": openapi.TABLE_HEADERS,
}


async def _table(
    request: Request, runtime: RuntimeDep, query: RotaryTableQuery, key: rotary.RotaryKey
) -> Response:
    block = handlers.Block(key, query.start, query.row_stop, 0, key.width, query.max_len)
    return await table_response(
        request,
        runtime,
        block,
        query.describe(key),
        query.format,
        "2 × rotary_dim",
        lambda parts: rotary.split(key, parts),
    )


@router.get(
    PATH,
    operation_id="getRotaryTable",
    summary="The cos and sin tables of rotary position embeddings (RoPE), or some rows.",
    response_class=Response,
    responses={200: _TABLE_200, 304: openapi.NOT_MODIFIED, **openapi.problems_of(406, 422)},
)
async def get_table(
    query: Annotated[RotaryTableQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """The cos and sin tables of rotary position embeddings (RoPE), or some rows."""
    return await _table(request, runtime, query, await _key(runtime, query))


async def _key(runtime: RuntimeDep, query: RotaryTableQuery) -> rotary.RotaryKey:
    """The query's key, checked, off the event loop: a new key's inverse frequencies cost
    decimal arithmetic per pair (about 0.2 s at head_dim 16384 for yarn, exact)."""
    return await runtime.compute(_KEY_COST * query.head_dim, query.key)


class FromConfigQuery(BaseModel):
    """What the config does not say: which rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int | None = Field(
        None, ge=1, le=POSITION_CEILING + 1, description="Default: max_position_embeddings."
    )
    start: int = Field(0, ge=0, description="First position returned.")
    stop: int | None = Field(None, ge=1, description="Position after the last; default max_len.")
    convention: rotary.Convention = Field(
        "half", description="As for tables (the config's models use half)."
    )
    rounding: Rounding = Field("library", description="As for tables.")
    dtype: DType = Field("float32", description="As for tables.")
    format: Format | None = Field(None, description="As for tables.")


@router.post(
    PATH + "/from-config",
    operation_id="getRotaryTableFromConfig",
    summary="The RoPE tables of a model, from its Hugging Face config.json.",
    response_class=Response,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
            "description": "The model's config.json (rope_theta, rope_scaling or "
            "rope_parameters, head_dim or hidden_size / num_attention_heads, "
            "partial_rotary_factor, max_position_embeddings).",
        }
    },
    responses={
        200: _TABLE_200,
        **openapi.problems_of(400, 406, 408, 413, 415, 422),
        **openapi.BUSY,
    },
)
async def from_config(
    query: Annotated[FromConfigQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """The RoPE tables of a model, from its Hugging Face config.json; ``Content-Location``
    is the ``GET`` of the same table."""
    given = rotary_query(await posted_document(request, runtime, read_config))
    asked = query.model_dump(exclude_none=True)
    given.update(asked)
    if "max_len" not in given:
        raise InvalidParameter("max_len", "the config has no max_position_embeddings: give max_len")
    with located(asked):
        table_query = RotaryTableQuery.model_validate(given)
        key = await _key(runtime, table_query)
    response = await _table(request, runtime, table_query, key)
    location = f"{PATH}?{urllib.parse.urlencode(given)}"
    if len(location) <= _MAX_LOCATION:  # longrope's factors can make it too long for a header
        response.headers["content-location"] = location
    return response


@router.post(
    PATH + "/apply",
    operation_id="applyRotary",
    summary="Queries or keys (..., L, head_dim) rotated by their positions' angles.",
    response_class=Response,
    openapi_extra={"requestBody": openapi.APPLY_BODY},
    responses=openapi.APPLY_RESPONSES,
)
async def apply(
    query: Annotated[RotaryApplyHttpQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """Queries or keys (..., L, head_dim) rotated by their positions' angles."""
    kernel = Rotation(query.convention)
    return await apply_response(
        request,
        runtime,
        query.format,
        kernel,
        query.key,
        query.offset,
        query.max_len,
        (query.shape, query.dtype),
    )
