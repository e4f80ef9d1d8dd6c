"""``POST /v1/compare``: two tables side by side, each given as a family's ``GET``
parameters or as a model's config with from-config's (``{"family": "rotary", "config":
{...}, "parameters": {"engine": "vllm"}}``), over a range of positions: their difference
by band, where it first passes the thresholds, and each rotary pair's angle drift
(:mod:`service.audit.compare`). transformers' YaRN against vLLM's for one config, a
training config against an inference one, ``library`` against ``exact``: one request.

JSON or a PNG of ``|a - b|`` (by ``format``, else ``Accept``), computed off the event loop
in the lane its numbers choose, a large one in the large answers' turns; the picture's
entries are reduced to its pixels as they are computed."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Annotated, Any, Final, Literal

import anyio
import numpy as np
import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service import handlers, plots
from service.audit import compare
from service.audit import paths as audit_paths
from service.codecs.types import Encoded
from service.encodings import registry
from service.errors import InvalidInput
from service.runtime import Runtime
from service.schemas.hf_config import read_config
from service.settings import POSITION_CEILING
from service.web import openapi, tables
from service.web.answers import MEDIA, Offer, Plan, answer
from service.web.declared import Declared
from service.web.deps import RuntimeDep
from service.web.documents import posted_document
from service.web.tables import Spec, Table

PATH: Final = "/v1/compare"


class Comparison(BaseModel):
    """Two tables and the positions to compare them over."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a: Table
    b: Table
    start: int = Field(0, ge=0, le=POSITION_CEILING)
    stop: int = Field(ge=1, le=POSITION_CEILING + 1)


# the picture draws at most this many positions, each about a pixel high
DRAWN_ROWS: Final = 512
CompareFormat = Literal["json", "png"]
_FORMATS: Final[tuple[CompareFormat, ...]] = ("json", "png")


def router(families: Iterable[Declared[Any, Any]]) -> APIRouter:
    """The route, for the ``families`` cached by rows that carry the audit's record."""
    known = {
        each.family.name: each
        for each in families
        if each.family.block is None and each.family.audit is not None
    }
    routes = APIRouter(tags=["audit"])

    async def post(
        request: Request,
        runtime: RuntimeDep,
        format: Annotated[
            Literal["json", "png"] | None,
            Query(
                description="json, or png: |a - b| over positions and entries; default by "
                "Accept, else json."
            ),
        ] = None,
    ) -> Response:
        offer = Offer(_FORMATS, format)
        offer.chosen(request)  # an unacceptable answer is refused before the body is read
        # its length: the lane a config in it is read in
        size, asked = await posted_document(request, runtime, _measured)
        if asked.stop <= asked.start:
            raise InvalidInput("stop", f"must be above start ({asked.start})")
        a = await tables.spec_of(runtime, known, asked.a, "a", asked.stop, size)
        b = await tables.spec_of(runtime, known, asked.b, "b", asked.stop, size)
        # the entries a position has, from the keys: no row computed on the event loop
        width_a, width_b = audit_paths.width(a.key), audit_paths.width(b.key)
        if width_a != width_b:
            raise InvalidInput(
                "b", f"its entries are {width_b} a row, a's {width_a}: not comparable"
            )
        runtime.limits.last_position(asked.stop - 1, "the last position compared")
        start, stop = asked.start, asked.stop

        def check(fmt: CompareFormat) -> None:
            if fmt == "png":
                plots.require()
                drawn, _ = compare.drawn(start, stop, DRAWN_ROWS)
                runtime.limits.rows(2 * len(drawn), width_a, "positions drawn × 2 × width")
            else:
                runtime.limits.rows(
                    2 * compare.cost(start, stop),
                    width_a,
                    "positions compared and refined, at most, × 2 × width",
                )

        async def encode(fmt: CompareFormat, gzip: bool) -> Encoded:
            if fmt == "png":
                positions, step = compare.drawn(start, stop, DRAWN_ROWS)
                picture = await _picture(runtime, a, b, positions, step, stop)
                return {}, picture
            found = await _compared(runtime, a, b, start, stop, compare.cost(start, stop))
            return {}, orjson.dumps({"start": start, "stop": stop, **found})

        engine = registry.library_engine(a.key, b.key)
        plan = Plan(offer, encode, check=check, gzip_from=None, engine=engine)
        return await answer(request, runtime, plan)

    routes.add_api_route(
        PATH,
        post,
        methods=["POST"],
        operation_id="compareTables",
        summary="Two tables side by side: their difference by position band, where it first "
        "passes 1e-3, 1e-2, 1e-1, and each rotary pair's angle drift.",
        response_class=Response,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": openapi.inline(Comparison.model_json_schema())}
                },
            }
        },
        responses={
            200: {
                "content": {MEDIA["json"]: {}, MEDIA["png"]: openapi.BINARY},
                "description": "The comparison, or its difference heatmap.",
            },
            **openapi.problems_of(400, 406, 413, 415, 422, 501),
        },
    )
    return routes


def _measured(body: bytes | bytearray) -> tuple[int, Comparison]:
    """The posted body's length, and the comparison it holds, read as a config is (bounded,
    no key given twice), its refusals located in the body. A worker's: a body of
    ``PE_MAX_CONFIG_BYTES`` (1 MiB) may hold 87,000 fields a table, 16 ms to validate."""
    try:
        return len(body), Comparison.model_validate(read_config(body))
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def _cost(a: Spec, b: Spec, positions: int) -> tuple[int, bool]:
    """What computing ``positions`` positions of each table costs: its numbers (its lane),
    and whether it takes a turn of the large answers (its rows pass their bytes, as a large
    table's do: :func:`service.handlers.permit`)."""
    numbers = 2 * positions * audit_paths.width(a.key)
    elements = numbers + registry.preparation(a.key) + registry.preparation(b.key)
    return elements, 8 * numbers > handlers.LARGE_ANSWER_BYTES


async def _compared(
    runtime: Runtime, a: Spec, b: Spec, start: int, stop: int, evaluated: int
) -> dict[str, Any]:
    """The comparison of ``start .. stop-1``, charged for the ``evaluated`` positions of
    each table :func:`compare.cost` counts."""
    elements, large = _cost(a, b, evaluated)
    async with handlers.permit(runtime, large):
        return await runtime.compute(elements, compare.compare, a.key, b.key, start, stop)


async def _picture(
    runtime: Runtime, a: Spec, b: Spec, positions: NDArray[np.int64], step: int, stop: int
) -> bytes:
    """The difference heatmap, its entries reduced to the picture's columns as they are
    computed, then drawn (one picture at a time); a large one in the large answers' turns,
    as a heatmap's."""
    width, _ = plots.DIFFERENCE_SIZE
    start, last = int(positions[0]), int(positions[-1])
    rows = plots.Axis("position", start, last, step)
    columns = plots.Axis(
        "entry (rotary: each pair's cos, then sin)", 0, audit_paths.width(a.key) - 1
    )
    spaced = f", every {step:,}" if step > 1 else ""
    title = f"|a - b| at positions {start:,} to {stop - 1:,}{spaced}\na: {a.said}\nb: {b.said}"
    elements, large = _cost(a, b, len(positions))
    async with handlers.permit(runtime, large):
        matrix = await runtime.compute(
            elements, compare.heatmap, a.key, b.key, positions, columns=width
        )
        draw = functools.partial(plots.difference, matrix, rows, columns, title=title)
        return await anyio.to_thread.run_sync(draw, limiter=runtime.painter)
