"""Dependencies: the runtime (see ``service.runtime``) handed to a route."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Query, Request, Response
from pydantic import BaseModel

from service.errors import InvalidParameter
from service.runtime import Runtime


# async: a plain def dependency would cost every request a hop to the thread pool
async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def single_valued(request: Request) -> None:
    """Every query parameter at most once: a repeated one is refused, never last-wins."""
    if not request.scope["query_string"]:
        return
    seen = set()
    for name, _ in request.query_params.multi_items():
        if name in seen:
            raise InvalidParameter(name, "is given more than once; give each parameter once")
        seen.add(name)


def endpoint(call: Callable[..., Any], query: type[BaseModel]) -> Callable[..., Any]:
    """``call(query=, request=, runtime=)`` with the signature FastAPI reads: ``query``, a
    model chosen at run time (a declared family's), from the query string."""
    parameter = inspect.Parameter
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            parameter("query", parameter.KEYWORD_ONLY, annotation=Annotated[query, Query()]),
            parameter("request", parameter.KEYWORD_ONLY, annotation=Request),
            parameter("runtime", parameter.KEYWORD_ONLY, annotation=RuntimeDep),
        ],
        return_annotation=Response,
    )
    return call
