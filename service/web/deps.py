"""Dependencies: the runtime (see ``service.runtime``) handed to a route."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.runtime import Runtime


# async: a plain def dependency would cost every request a hop to the thread pool
async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
