"""Pictures and the explorer: tables as PNG heatmaps and similarity matrices, and the static
page that draws tables in the browser from the raw endpoint."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
from fastapi import APIRouter, HTTPException, Query, Request, Response

from service import core, plots
from service.errors import LimitExceeded
from service.routes import (
    IMMUTABLE,
    TABLE_PATH,
    CacheDep,
    SettingsDep,
    check_table_size,
    fields_etag,
    large_table_turn,
    matches,
    offload,
    problems_of,
    strong_etag,
    table_rows,
)
from service.schemas import HeatmapQuery, SimilarityQuery
from service.settings import Settings

HEATMAP_PATH: Final = TABLE_PATH + "/heatmap.png"
SIMILARITY_PATH: Final = TABLE_PATH + "/similarity.png"
# Bump when the pictures change for the same parameters and matplotlib version.
PICTURE_REVISION: Final = "1"
EXPLORER: Final = Path(__file__).parent / "explorer"
_ASSETS: Final = {
    "explorer.js": "text/javascript; charset=utf-8",
    "explorer.css": "text/css; charset=utf-8",
}
# The page may talk to its own origin only: nothing is fetched from another host.
_PAGE_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_PICTURE_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
        "description": "The picture.",
    },
    304: {"description": "Not modified: the If-None-Match tag is current."},
    **problems_of(422, 501),
}

router = APIRouter()


@dataclass(frozen=True, slots=True)
class Picture:
    """A drawn PNG, kept in the table cache under its ETag."""

    body: bytes

    @property
    def nbytes(self) -> int:
        return len(self.body) + 100


def check_size(query: HeatmapQuery | SimilarityQuery, settings: Settings) -> None:
    """422 for a picture wider or taller than the settings allow."""
    for name, value, limit in (
        ("width", query.width, settings.max_image_width),
        ("height", query.height, settings.max_image_height),
    ):
        if value > limit:
            raise LimitExceeded(
                f"the picture's {name}", value, limit, f"PE_MAX_IMAGE_{name.upper()}"
            )


def picture_etag(kind: str, query: HeatmapQuery | SimilarityQuery) -> str:
    """A strong validator: the picture is a pure function of these values."""
    return fields_etag(PICTURE_REVISION, kind, plots.version(), fields=query.model_dump())


async def _picture(
    request: Request,
    kind: str,
    query: HeatmapQuery | SimilarityQuery,
    cache: CacheDep,
    settings: Settings,
    draw: Callable[[], Any],
) -> Response:
    """The picture ``draw`` makes, once its limits are checked: 304 for a current tag, from
    the cache when it is there, else drawn and kept."""
    check_table_size(query, settings)
    check_size(query, settings)
    plots.require()
    headers = {"etag": picture_etag(kind, query), "cache-control": IMMUTABLE}
    if matches(request.headers.get("if-none-match"), headers["etag"]):
        return Response(status_code=304, headers=headers)
    key = ("picture", headers["etag"])
    kept = cache.recall(key)
    if isinstance(kept, Picture):
        body = kept.body
    else:
        body = await draw()
        cache.remember(key, Picture(body))
    return Response(body, media_type="image/png", headers=headers)


async def paint(request: Request, draw: Callable[..., bytes], *args: Any, **kwargs: Any) -> bytes:
    """Draw in a worker thread, one picture at a time: matplotlib is not thread-safe."""
    painter: anyio.CapacityLimiter = request.app.state.painter
    work = functools.partial(draw, *args, **kwargs)
    return await anyio.to_thread.run_sync(work, limiter=painter)


@router.get(
    HEATMAP_PATH,
    operation_id="getSinusoidalHeatmap",
    summary="A table, or a block of it, as a PNG heatmap: positions down, dimensions across.",
    response_class=Response,
    responses=_PICTURE_RESPONSES,
)
async def get_heatmap(
    query: Annotated[HeatmapQuery, Query()],
    request: Request,
    cache: CacheDep,
    settings: SettingsDep,
) -> Response:
    """A table, or a block of it, as a PNG heatmap: positions down, dimensions across."""

    async def draw() -> bytes:
        async with large_table_turn(request, query):
            table = await table_rows(request, query, cache)
            block = table[query.start : query.row_stop, query.dim_start : query.col_stop]
            return await paint(
                request,
                plots.heatmap,
                block,
                plots.Axis("Position", query.start, query.row_stop - 1),
                plots.Axis("Encoding dimension", query.dim_start, query.col_stop - 1),
                title=f"Sinusoidal positional encoding\n{query.label()}",
                width=query.width,
                height=query.height,
                cmap=query.cmap,
            )

    return await _picture(request, "heatmap", query, cache, settings, draw)


@router.get(
    SIMILARITY_PATH,
    operation_id="getSinusoidalSimilarity",
    summary="The dot products PE[p] · PE[q] of the rows start .. stop-1, as a PNG.",
    response_class=Response,
    responses=_PICTURE_RESPONSES,
)
async def get_similarity(
    query: Annotated[SimilarityQuery, Query()],
    request: Request,
    cache: CacheDep,
    settings: SettingsDep,
) -> Response:
    """The dot products PE[p] · PE[q] of the rows start .. stop-1, as a PNG."""
    # one row and column per pixel at most: more positions than that are drawn every step-th
    step = math.ceil((query.row_stop - query.start) / min(query.width, query.height))

    async def draw() -> bytes:
        matrix = await offload(
            request, core.similarity, query.start, query.row_stop, step, query.d_model, query.base
        )
        last = query.start + (len(matrix) - 1) * step
        return await paint(
            request,
            plots.similarity,
            matrix,
            plots.Axis("Position", query.start, last, step),
            title=f"Similarity of positions, PE[p] · PE[q]\n{query.label()}",
            width=query.width,
            height=query.height,
            cmap=query.cmap,
        )

    return await _picture(request, "similarity", query, cache, settings, draw)


@functools.cache
def _asset(name: str) -> tuple[bytes, str]:
    body = (EXPLORER / name).read_bytes()
    return body, strong_etag(body)


def _static(request: Request, name: str, media_type: str, **headers: str) -> Response:
    body, etag = _asset(name)
    headers = {"etag": etag, "cache-control": "no-cache", **headers}
    if matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


@router.get("/", include_in_schema=False)
async def explorer(request: Request) -> Response:
    """The explorer page."""
    return _static(
        request,
        "index.html",
        "text/html; charset=utf-8",
        **{"content-security-policy": _PAGE_POLICY},
    )


@router.get("/explorer/{name}", include_in_schema=False)
async def explorer_asset(name: str, request: Request) -> Response:
    """The explorer's script and style sheet."""
    if name not in _ASSETS:
        raise HTTPException(404)
    return _static(request, name, _ASSETS[name])
