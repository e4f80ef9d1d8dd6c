"""ALiBi: the head slopes and the bias tensor, served as tables are (formats by parameter or
``Accept``, a strong ETag, ``immutable``, 304). Blocks are computed per request, not kept in
the row cache (each entry is one product; a repeat is answered by the replay layer)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

import numpy as np
from fastapi import APIRouter, Query, Request, Response
from numpy.typing import NDArray

from service import codecs, handlers
from service.codecs.types import Encoded, Format, TableFormat
from service.encodings import alibi
from service.runtime import Runtime
from service.schemas.alibi import BiasDocument, BiasQuery, SlopesDocument, SlopesQuery
from service.web import openapi
from service.web.deps import RuntimeDep
from service.web.disconnect import unless_gone
from service.web.negotiation import combined, negotiate
from service.web.responses import not_modified, respond, table_headers

PATH: Final = "/v1/biases/alibi"
SLOPES_PATH: Final = PATH + "/slopes"
router = APIRouter()


def _responses(model: type[Any], shape: str) -> dict[int | str, dict[str, Any]]:
    headers = {
        **openapi.TABLE_HEADERS,
        "X-Shape": {"description": f"raw only: {shape}.", "schema": {"type": "string"}},
    }
    return {
        200: {
            "model": model,
            "content": openapi.TABLE_MEDIA,
            "description": f"The array, shape ({shape}).",
            "headers": headers,
        },
        304: openapi.NOT_MODIFIED,
        **openapi.problems_of(406, 422),
    }


@router.get(
    SLOPES_PATH,
    operation_id="getAlibiSlopes",
    summary="The ALiBi slopes of num_heads heads (Press et al.'s get_slopes).",
    response_class=Response,
    responses=_responses(SlopesDocument, "num_heads"),
)
async def get_slopes(
    query: Annotated[SlopesQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """The ALiBi slopes of num_heads heads (Press et al.'s get_slopes)."""
    fmt = query.format or negotiate(combined(request.scope["headers"], b"accept"))
    query.check(runtime.limits, fmt)
    work = functools.partial(alibi.slopes, query.num_heads, query.rounding, query.dtype)
    shape = (query.num_heads,)
    return await _serve(
        request, runtime, SLOPES_PATH, query.describe(), query.format, fmt, shape, work
    )


@router.get(
    PATH,
    operation_id="getAlibiBias",
    summary="ALiBi attention biases (causal, BLOOM or symmetric form), or a block of rows.",
    response_class=Response,
    responses=_responses(BiasDocument, "num_heads,rows,key_len"),
)
async def get_bias(
    query: Annotated[BiasQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    """ALiBi attention biases (causal, BLOOM or symmetric form), or a block of rows."""
    fmt = query.format or negotiate(combined(request.scope["headers"], b"accept"))
    query.check(runtime.limits, fmt)
    bias = query.bias()
    work = functools.partial(alibi.block, bias)
    return await _serve(
        request, runtime, PATH, query.describe(), query.format, fmt, bias.shape, work
    )


async def _serve(
    request: Request,
    runtime: Runtime,
    resource: str,
    fields: Mapping[str, Any],
    explicit: TableFormat | None,
    fmt: Format,
    shape: tuple[int, ...],
    work: Callable[[], NDArray[np.floating]],
) -> Response:
    """The array ``work`` computes, encoded in ``fmt``, with the headers of a table answer
    (:func:`service.web.responses.table_headers`)."""
    elements = math.prod(shape)
    headers, gzip = table_headers(
        request, {**fields, "resource": resource}, explicit, fmt, elements
    )
    unchanged = not_modified(request, headers)
    if unchanged is not None:
        return unchanged
    nbytes = elements * np.dtype(fields["dtype"]).itemsize
    encode = functools.partial(_encode, work, fields, fmt, gzip)

    async def produce() -> Encoded:
        return await handlers.encoded(runtime, fmt, elements, nbytes, encode)

    large = nbytes > handlers.LARGE_ANSWER_BYTES
    answer = await unless_gone(request, lambda: handlers.holding_permit(runtime, large, produce))
    return respond(runtime, answer, headers)


def _encode(
    work: Callable[[], NDArray[np.floating]],
    fields: Mapping[str, Any],
    fmt: Format,
    gzip: bool,
) -> Encoded:
    encoded = codecs.encode(fmt, fields, [work()], "data")
    return codecs.gzip(encoded) if gzip else encoded
