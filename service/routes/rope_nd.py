"""Multi-axis rotary embeddings of diffusion transformers: the cos and sin tables of a
latent grid's tokens (text tokens first), the same at posted ids of every axis, and the
rotation of posted queries or keys."""

from __future__ import annotations

from typing import Final

from service import handlers
from service.encodings import rope_nd
from service.schemas.rope_nd import RopeNdDocument, RopeNdQuery
from service.web import declared

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
    summary="Multi-axis RoPE of diffusion transformers (FLUX, FLUX.2, HunyuanVideo, Wan): "
    "cos and sin of each token of a latent grid, each axis's pairs turned by the token's "
    "id on it (text tokens first).",
    answer="cos and sin: JSON members, npz members, or (2, tokens, head_dim) stacked.",
    shape="2,tokens,head_dim",
    width_name="2 × head_dim",
    positions=declared.Positions(
        summary="cos and sin at posted ids of every axis "
        '({"position_ids": [[...], ...]} shaped (axes, L), or an .npy): one row each.',
        operation_id="getRopeNdAtIds",
        axes=lambda key: len(key.axes_dim),
        integers=False,
        at=rope_nd.at,
    ),
)
