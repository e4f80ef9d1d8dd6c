"""Multi-axis rotary embeddings of diffusion transformers: the cos and sin tables of a
latent grid's tokens (text tokens first), the same at posted ids of every axis, and the
rotation of posted queries or keys."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Query, Request, Response

from service import handlers
from service.encodings import rope_nd
from service.encodings.rotation import Rotation
from service.schemas.hf_config import read_config
from service.schemas.rope_nd import (
    SIZE,
    RopeNdApplyQuery,
    RopeNdDocument,
    RopeNdFromConfig,
    RopeNdQuery,
    rope_nd_query,
)
from service.web import declared, openapi
from service.web.deps import RuntimeDep
from service.web.responses import apply_response

PATH: Final = "/v1/encodings/rope-nd"
router = APIRouter(tags=["rope-nd"])

TABLE: Final = declared.Declared(
    family=rope_nd.FAMILY,
    query=RopeNdQuery,
    key=RopeNdQuery.key,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop(key), 0, key.width, key.tokens
    ),
    describe=RopeNdQuery.describe,
    document=RopeNdDocument,
    operation_id="getRopeNdTable",
    summary="Multi-axis RoPE of diffusion transformers (FLUX, FLUX.2, HunyuanVideo, Wan, "
    "CogVideoX, Qwen-Image): "
    "cos and sin of each token of a latent grid, each axis's pairs turned by the token's "
    "id on it (text tokens first).",
    answer="cos and sin: JSON members, npz members, or (2, tokens, head_dim) stacked.",
    shape="2,tokens,head_dim",
    width_name="2 × head_dim",
    audit=True,
    from_document=declared.FromDocument(
        read=read_config,
        fields=rope_nd_query,
        query=RopeNdFromConfig,
        summary="A diffusers transformer's multi-axis RoPE from its config.json (_class_name "
        "and its fields) over an image or video of height x width pixels (frames): the "
        "pipelines' 8-pixel VAE cells (4 frames a latent frame, the first alone), packed 2x2 "
        "by FLUX's, FLUX.2's and Qwen-Image's pipelines, patched by the video transformers' "
        "patch_size. X-Config-Fields says which fields it read.",
        operation_id="getRopeNdTableFromConfig",
        body="A diffusers transformer's config.json: FluxTransformer2DModel, "
        "Flux2Transformer2DModel, QwenImageTransformer2DModel, "
        "HunyuanVideoTransformer3DModel, WanTransformer3DModel or "
        "CogVideoXTransformer3DModel (with use_rotary_positional_embeddings).",
        reading=SIZE,
    ),
    positions=declared.Positions(
        summary="cos and sin at posted ids of every axis "
        '({"position_ids": [[...], ...]} shaped (axes, L), or an .npy): one row each.',
        operation_id="getRopeNdAtIds",
        axes=lambda key: len(key.axes_dim),
        integers=False,
        at=rope_nd.at,
    ),
)


@router.post(
    PATH + "/apply",
    operation_id="applyRopeNd",
    summary="Queries or keys (B, heads, L, head_dim) rotated by the table of their L tokens "
    "(text tokens first), pairs as layout says: diffusers' apply_rotary_emb in float32, or "
    "Wan2.1's rope_apply with arithmetic=float64.",
    response_class=Response,
    openapi_extra={"requestBody": openapi.APPLY_BODY},
    responses=openapi.APPLY_RESPONSES,
)
async def apply(
    query: Annotated[RopeNdApplyQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """Queries or keys (B, heads, L, head_dim) rotated by their tokens' angles."""
    tokens = query.table_key("float32").tokens  # checked before the body is read
    kernel = Rotation("half" if query.layout == "half" else "interleaved")
    return await apply_response(
        request, runtime, query.format, kernel, query.key, 0, tokens, (query.shape, query.dtype)
    )
