"""Pictures of the sinusoidal tables: the heatmap of a block and the similarity of
positions, as PNG drawn by matplotlib. Repeats are answered by the replay layer."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, Literal

import anyio
from fastapi import APIRouter, Query, Request, Response

from service import handlers, plots
from service.codecs.types import Encoded
from service.encodings import registry, sinusoidal
from service.runtime import Runtime
from service.schemas.sinusoidal import HeatmapQuery, SimilarityQuery
from service.web import openapi
from service.web.answers import MEDIA, Offer, Plan, answer
from service.web.conditional import fields_etag
from service.web.deps import RuntimeDep

HEATMAP_PATH: Final = "/v1/encodings/sinusoidal/heatmap.png"
SIMILARITY_PATH: Final = "/v1/encodings/sinusoidal/similarity.png"
# Bump when the pictures change for the same parameters and matplotlib version.
PICTURE_REVISION: Final = "3"
_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    200: {"content": {MEDIA["png"]: openapi.BINARY}, "description": "The picture."},
    304: openapi.NOT_MODIFIED,
    **openapi.problems_of(422, 501),
}

router = APIRouter(tags=["pictures"])


def _bounded(runtime: Runtime, query: HeatmapQuery | SimilarityQuery) -> None:
    """The limits each parameter has alone (the picture's size, the table's last position,
    a row's width), before any arithmetic is done with them: a max_len of 400 digits is
    refused by its name, not by a float that overflows on the way to a row count."""
    runtime.limits.picture(query.width, query.height)
    shift = registry.shift(query.key())
    # no row counted yet: _picture counts them once a similarity's step is known
    runtime.limits.table_rows(0, query.d_model, query.max_len, "d_model", shift)


async def _picture(
    request: Request,
    runtime: Runtime,
    kind: str,
    query: HeatmapQuery | SimilarityQuery,
    rows: int,
    draw: Callable[[], Awaitable[bytes]],
) -> Response:
    """The picture ``draw`` makes from ``rows`` rows, once the limits of its parameters
    (:func:`_bounded`, checked first) and of its rows are; 304 for a current tag."""

    def check(fmt: Literal["png"]) -> None:
        runtime.limits.rows(rows, query.d_model, "rows × d_model")
        plots.require()

    def etag(fmt: Literal["png"], gzip: bool) -> str:
        return fields_etag(PICTURE_REVISION, kind, plots.version(), fields=query.model_dump())

    async def encode(fmt: Literal["png"], gzip: bool) -> Encoded:
        # identical pictures asked for at once are drawn once: the tag names the picture
        picture = await runtime.drawings.run(etag(fmt, gzip), draw)
        return {}, picture

    # a PNG whatever Accept says, immutable
    offer: Offer[Literal["png"]] = Offer(("png",), "png")
    plan = Plan(offer, encode, check=check, etag=etag, gzip_from=None)
    return await answer(request, runtime, plan)


async def paint(runtime: Runtime, draw: Callable[..., bytes], *args: Any, **kwargs: Any) -> bytes:
    """Draw in a worker thread, one picture at a time: matplotlib is not thread-safe."""
    work = functools.partial(draw, *args, **kwargs)
    return await anyio.to_thread.run_sync(work, limiter=runtime.painter)


@router.get(
    HEATMAP_PATH,
    operation_id="getSinusoidalHeatmap",
    summary="A table, or a block of it, as a PNG heatmap: positions down, dimensions across.",
    response_class=Response,
    responses=_RESPONSES,
)
async def get_heatmap(
    query: Annotated[HeatmapQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """A table, or a block of it, as a PNG heatmap: positions down, dimensions across."""
    _bounded(runtime, query)
    block = handlers.Block(
        query.key(), query.start, query.row_stop, query.dim_start, query.col_stop, query.max_len
    )

    async def draw() -> bytes:
        async with handlers.permit(runtime, block.large):
            parts = await handlers.rows(runtime, block.key, block.start, block.stop)
            return await paint(
                runtime,
                plots.heatmap,
                [part[:, block.dim_start : block.dim_stop] for part in parts],  # never joined
                plots.Axis("Position", query.start, query.row_stop - 1),
                plots.Axis("Encoding dimension", query.dim_start, query.col_stop - 1),
                title=f"Sinusoidal positional encoding\n{query.label()}",
                width=query.width,
                height=query.height,
                cmap=query.cmap,
            )

    return await _picture(request, runtime, "heatmap", query, block.stop - block.start, draw)


@router.get(
    SIMILARITY_PATH,
    operation_id="getSinusoidalSimilarity",
    summary="The dot products PE[p] · PE[q] of the rows start .. stop-1, as a PNG.",
    response_class=Response,
    responses=_RESPONSES,
)
async def get_similarity(
    query: Annotated[SimilarityQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """The dot products PE[p] · PE[q] of the rows start .. stop-1, as a PNG."""
    _bounded(runtime, query)
    # one row and column per pixel at most: more positions than that are drawn every
    # step-th (integer arithmetic: a float quotient is rounded, and overflows past 1e308)
    step = -(-(query.row_stop - query.start) // min(query.width, query.height))
    count = len(range(query.start, query.row_stop, step))

    async def draw() -> bytes:
        matrix = await runtime.compute(
            count * (query.d_model + count),  # a sine per distance and frequency, then count²
            sinusoidal.similarity,
            query.start,
            query.row_stop,
            step,
            query.key(),
        )
        last = query.start + (len(matrix) - 1) * step
        return await paint(
            runtime,
            plots.similarity,
            matrix,
            plots.Axis("Position", query.start, last, step),
            title=f"Similarity of positions, PE[p] · PE[q]\n{query.label()}",
            width=query.width,
            height=query.height,
            cmap=query.cmap,
        )

    return await _picture(request, runtime, "similarity", query, count, draw)
