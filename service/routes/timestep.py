"""Diffusion timestep embeddings: the table of integer timesteps, and rows at any posted
real timesteps (the scheduler's: σ·1000 for the flow-matching models)."""

from __future__ import annotations

from typing import Final

from service import handlers
from service.encodings import timestep
from service.schemas.hf_config import read_config
from service.schemas.timestep import (
    TimestepDocument,
    TimestepFromConfig,
    TimestepQuery,
    timestep_query,
)
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
    audit=True,
    from_document=declared.FromDocument(
        read=read_config,
        fields=timestep_query,
        query=TimestepFromConfig,
        summary="A diffusers model's timestep embedding from its config.json (_class_name "
        "and its fields); X-Config-Fields says which fields it read.",
        operation_id="getTimestepTableFromConfig",
        body="A diffusers model's config.json: UNet2DConditionModel, UNet2DModel, "
        "FluxTransformer2DModel, SD3Transformer2DModel, PixArtTransformer2DModel, "
        "WanTransformer3DModel, HunyuanVideoTransformer3DModel, CogVideoXTransformer3DModel, "
        "QwenImageTransformer2DModel or AuraFlowTransformer2DModel.",
        missing={"max_len": "give max_len (the scheduler's num_train_timesteps, 1000 for most)"},
    ),
    positions=declared.Positions(
        summary="Timestep embeddings at posted real timesteps "
        '({"position_ids": [...]} of any finite numbers, or an .npy): one row each.',
        operation_id="getTimestepEmbeddingAt",
        integers=False,
        at=timestep.at,
    ),
)
