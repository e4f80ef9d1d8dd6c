"""Vision towers' 2-D rotary embeddings: the cos and sin tables of an image's patch tokens in
the model's order, the same at posted patch coordinates, and the rotation of posted queries
or keys."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Query, Request, Response

from service import handlers
from service.encodings import vision_rotary
from service.encodings.rotation import Rotation
from service.schemas.hf_config import read_config
from service.schemas.vision_config import SIZE, VisionRotaryFromConfig, vision_rotary_query
from service.schemas.vision_rotary import (
    VisionRotaryApplyQuery,
    VisionRotaryDocument,
    VisionRotaryQuery,
)
from service.web import declared, openapi
from service.web.deps import RuntimeDep
from service.web.responses import apply_response

PATH: Final = "/v1/encodings/vision-rotary"
router = APIRouter(tags=["vision-rotary"])

TABLE: Final = declared.Declared(
    family=vision_rotary.FAMILY,
    query=VisionRotaryQuery,
    key=VisionRotaryQuery.key,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop(key), 0, key.width, key.tokens
    ),
    describe=VisionRotaryQuery.describe,
    document=VisionRotaryDocument,
    operation_id="getVisionRotaryTable",
    summary="Vision towers' 2-D RoPE (Qwen2/2.5/3-VL, Pixtral, Llama 4, DINOv3, EVA-02): cos "
    "and sin of each patch token of an image, in the model's token order and in the layout "
    "its apply reads.",
    answer="cos and sin: JSON members, npz members, or (2, tokens, head_dim) stacked.",
    shape="2,tokens,head_dim",
    width_name="2 × head_dim",
    audit=True,
    from_document=declared.FromDocument(
        read=read_config,
        fields=vision_rotary_query,
        query=VisionRotaryFromConfig,
        summary="A vision tower's 2-D RoPE from its model's config.json (model_type and its "
        "vision_config, each field a config leaves out its transformers class's default) "
        "over an image of height x width pixels (a video's frames): Qwen-VL's patches of "
        "images its processor has resized to multiples of patch_size x spatial_merge_size, "
        "Pixtral's and DINOv3's whole patches, Llama 4's tile. X-Config-Fields says which "
        "fields it read, and the defaults it took.",
        operation_id="getVisionRotaryTableFromConfig",
        body="A model's config.json, or its vision_config: Qwen2-VL, Qwen2.5-VL, Qwen3-VL "
        "(and MoE), Llama 4, LLaVA or Mistral 3 with a Pixtral tower (model_type qwen2_vl, "
        "qwen2_5_vl, qwen3_vl, qwen3_vl_moe, llama4, llava, mistral3), or a vision config "
        "(qwen2_vl_vision, qwen2_5_vl_vision, qwen3_vl_vision, qwen3_vl_moe_vision, pixtral, "
        "llama4_vision_model, dinov3_vit).",
        reading=SIZE,
    ),
    positions=declared.Positions(
        summary="cos and sin at posted patch coordinates "
        '({"position_ids": [[rows...], [columns...]]} shaped (2, L), or an .npy): one row each.',
        operation_id="getVisionRotaryAtPatches",
        axes=lambda key: 2,
        at=vision_rotary.at,
    ),
)


@router.post(
    PATH + "/apply",
    operation_id="applyVisionRotary",
    summary="Queries or keys (B, heads, L, head_dim) rotated by the table of the image's first "
    "L tokens, in float32 and with the pairs of the model's apply (rotate-half for Qwen-VL, "
    "Pixtral and DINOv3; interleaved for Llama 4 and EVA-02).",
    response_class=Response,
    openapi_extra={"requestBody": openapi.APPLY_BODY},
    responses=openapi.APPLY_RESPONSES,
)
async def apply(
    query: Annotated[VisionRotaryApplyQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """Queries or keys (B, heads, L, head_dim) rotated by their patches' angles."""
    tokens = query.table_key("float32").tokens  # checked before the body is read
    kernel = Rotation("interleaved" if query.interleaved else "half")
    return await apply_response(
        request, runtime, query.format, kernel, query.key, 0, tokens, (query.shape, query.dtype)
    )
