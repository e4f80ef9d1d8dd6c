"""The rotary family (RoPE): its cos and sin tables, the same tables from a model's
``config.json``, and the rotation of posted queries or keys."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Query, Request, Response

from service import handlers
from service.encodings import mrope, rotary
from service.encodings.rotation import Rotation
from service.schemas.hf_config import read_config
from service.schemas.hf_layers import FromConfigQuery, rotary_query
from service.schemas.mrope import RopeApplyQuery, RopeQuery
from service.schemas.rotary import RotaryTableDocument
from service.web import declared, openapi
from service.web.deps import RuntimeDep
from service.web.responses import apply_response

PATH: Final = "/v1/encodings/rotary"
# numbers' worth of work a key's frequencies cost per head dimension (they are decimal)
_KEY_COST: Final = 64
router = APIRouter(tags=["rotary"])

# the table's GET, from-config and positions, built by the seam
TABLE: Final = declared.Declared(
    family=rotary.FAMILY,
    path=PATH,
    query=RopeQuery,
    key=RopeQuery.key,
    # a new key's inverse frequencies cost decimal arithmetic per pair (about 0.2 s at
    # head_dim 16384 for yarn, exact): built off the event loop
    key_cost=lambda query: _KEY_COST * query.head_dim,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop, 0, key.width, query.max_len
    ),
    describe=RopeQuery.describe,
    document=RotaryTableDocument,
    operation_id="getRotaryTable",
    summary="The cos and sin tables of rotary position embeddings (RoPE), or some rows.",
    answer="cos and sin: JSON members, npz members, or (2, rows, rotary_dim) stacked.",
    shape="2,rows,rotary_dim",
    width_name="2 × rotary_dim",
    path_in_etag=False,
    audit=True,
    from_document=declared.FromDocument(
        read=read_config,
        fields=rotary_query,
        query=FromConfigQuery,
        summary="The RoPE tables of a model, from its Hugging Face config.json.",
        operation_id="getRotaryTableFromConfig",
        body="The model's config.json (rope_theta, rope_scaling or rope_parameters, head_dim "
        "or hidden_size / num_attention_heads, partial_rotary_factor, "
        "max_position_embeddings; in text_config where it nests one; rope_parameters per "
        "layer type with layer_types). X-Config-Fields names the fields read.",
        missing={"max_len": "the config has no max_position_embeddings: give max_len"},
        reading=("head_dim_key", "layer_type"),
    ),
    positions=declared.Positions(
        summary="cos and sin at posted position ids: (L,) or (B, L); (3, L) or (3, B, L) "
        "with M-RoPE, each pair at its axis's position.",
        operation_id="getRotaryAtPositions",
        axes=lambda key: mrope.AXES if key.mrope_section else 1,
        at=mrope.at,
        shape=(-1,),  # (3, L) with M-RoPE
    ),
)


@router.post(
    PATH + "/apply",
    operation_id="applyRotary",
    summary="Queries or keys (..., L, head_dim) rotated by their positions' angles; with "
    "M-RoPE, position_ids (3, L) or (3, B, L) turn each pair by its axis.",
    response_class=Response,
    openapi_extra={"requestBody": openapi.APPLY_BODY},
    responses=openapi.APPLY_RESPONSES,
)
async def apply(
    query: Annotated[RopeApplyQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """Queries or keys (..., L, head_dim) rotated by their positions' angles."""
    kernel = Rotation(query.convention, query.sections(), query.mrope_interleaved)
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
