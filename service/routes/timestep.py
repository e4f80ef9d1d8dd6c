"""Diffusion timestep embeddings: the table of integer timesteps, and rows at any posted
real timesteps (σ·1000, or σ for the presets whose models take it)."""

from __future__ import annotations

from typing import Final

from service import handlers
from service.encodings import timestep
from service.schemas.timestep import TimestepDocument, TimestepQuery
from service.web import declared

TABLE: Final = declared.Declared(
    family=timestep.FAMILY,
    query=TimestepQuery,
    key=TimestepQuery.key,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop, 0, key.width, query.max_len
    ),
    describe=TimestepQuery.describe,
    document=TimestepDocument,
    operation_id="getTimestepTable",
    summary="Diffusion timestep embeddings of timesteps 0 .. max_len-1: "
    "[sin | cos] (flip_sin_to_cos: [cos | sin]) of scale * (t * max_period^(-i / "
    "(dim // 2 - downscale_freq_shift))), t as the model receives it.",
    answer="The embeddings: (rows, dim).",
    shape="rows,dim",
    width_name="dim",
    positions=declared.Positions(
        summary="Timestep embeddings at posted real timesteps "
        '({"position_ids": [...]} of any finite numbers, or an .npy): one row each.',
        operation_id="getTimestepEmbeddingAt",
        integers=False,
        at=timestep.at,
    ),
)
