"""Work stops when its client has gone: a request that waits for a turn, a lane or a
computation is cancelled as soon as its client disconnects, instead of being computed for
no one (six large tables sent and dropped at once were all computed, holding everyone
else up meanwhile)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from fastapi import Request

from service.errors import ClientGone

T = TypeVar("T")


async def unless_gone(request: Request, work: Callable[[], Awaitable[T]]) -> T:
    """``work()``, cancelled if the client disconnects meanwhile: then :class:`ClientGone`
    (499). Call it once the request's body has been read: it listens for the disconnect.
    Work already running in a worker thread finishes (threads cannot be stopped), and its
    result is dropped; work still waiting for its turn never starts."""
    gone = False
    done: list[T] = []
    failure: Exception | None = None
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal gone
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        try:
            done.append(await work())
        except Exception as error:  # raised from here, not wrapped in an ExceptionGroup
            failure = error
        group.cancel_scope.cancel()
    if gone or not (done or failure):
        raise ClientGone("the client left before its answer was ready")
    if failure is not None:
        raise failure
    return done[0]
