"""2-D and 3-D sin-cos tables of patch grids (MAE, DiT, PixArt, SD3, timm; CogVideoX): the
table of a grid, a row a token, and the same from a diffusers model's config."""

from __future__ import annotations

from typing import Final

from service import handlers
from service.encodings import sincos2d, sincos3d
from service.schemas.hf_config import read_config
from service.schemas.sincos import (
    CLASSES_2D,
    CLASSES_3D,
    Sincos2DDocument,
    Sincos2DFromConfig,
    Sincos2DQuery,
    Sincos3DDocument,
    Sincos3DFromConfig,
    Sincos3DQuery,
    sincos2d_query,
    sincos3d_query,
)
from service.web import declared

# the picture's size says how to read the config: it is not the table's (tokens)
_PIXELS: Final = ("height", "width")

TABLE_2D: Final = declared.Declared(
    family=sincos2d.FAMILY,
    query=Sincos2DQuery,
    key=Sincos2DQuery.key,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop(key), 0, key.width, key.rows
    ),
    describe=Sincos2DQuery.describe,
    document=Sincos2DDocument,
    operation_id="getSincos2DTable",
    summary="2-D sin-cos table of a height × width patch grid: extra_tokens zero rows, then "
    "a row a token (row-major), [sin x | cos x | sin y | cos y] of x, y times "
    "10000^(-k / (dim / 4)) (timm: its own order).",
    answer="The table: (extra_tokens + height × width, dim), or the rows start .. stop-1.",
    shape="rows,dim",
    width_name="dim",
    audit=True,
    from_document=declared.FromDocument(
        read=read_config,
        fields=sincos2d_query,
        query=Sincos2DFromConfig,
        summary="A diffusers model's 2-D sin-cos table from its config.json (_class_name and "
        "its fields) and the picture's size in pixels; X-Config-Fields says which fields it "
        "read.",
        operation_id="getSincos2DTableFromConfig",
        body=f"A diffusers model's config.json: {', '.join(CLASSES_2D)}.",
        reading=_PIXELS,
    ),
)
TABLE_3D: Final = declared.Declared(
    family=sincos3d.FAMILY,
    query=Sincos3DQuery,
    key=Sincos3DQuery.key,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop(key), 0, key.width, key.rows
    ),
    describe=Sincos3DQuery.describe,
    document=Sincos3DDocument,
    operation_id="getSincos3DTable",
    summary="3-D sin-cos table of a frames × height × width patch grid: text_tokens zero "
    "rows, then a row a token (frame by frame, each row-major), the frame's sin-cos "
    "(dim / 4 columns), then the patch's [x | y] (3·dim / 4).",
    answer="The table: (text_tokens + frames × height × width, dim), or rows start .. stop-1.",
    shape="rows,dim",
    width_name="dim",
    audit=True,
    from_document=declared.FromDocument(
        read=read_config,
        fields=sincos3d_query,
        query=Sincos3DFromConfig,
        summary="A CogVideoX config's 3-D sin-cos table from its config.json and the video's "
        "size in pixels and frames; X-Config-Fields says which fields it read.",
        operation_id="getSincos3DTableFromConfig",
        body=f"A diffusers model's config.json: {', '.join(CLASSES_3D)} (with "
        "use_rotary_positional_embeddings false: CogVideoX-2b).",
        reading=(*_PIXELS, "frames"),
    ),
)
