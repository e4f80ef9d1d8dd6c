"""Single flight: one computation in progress, whose result (or failure) every request
that needs it shares, instead of each repeating it: :class:`Flight` for threads (numpy
only), :class:`SingleFlight` for coroutines on the event loop."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


class ComputationFailed(RuntimeError):
    """The computation a request waited for failed (its cause); later ones compute again."""


@dataclass(slots=True)
class Flight(Generic[T]):
    """One computation in progress: the thread computing sets ``result`` or ``error`` and
    then :meth:`land`; the others wait in :meth:`outcome`."""

    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None

    def land(self) -> None:
        """The computation is over: wake everyone waiting."""
        self.done.set()

    def outcome(self) -> T:
        """The result, once done; :class:`ComputationFailed` if the computation failed."""
        self.done.wait()
        if self.result is None:
            failed = ComputationFailed("the computation this request waited for failed")
            raise failed from self.error
        return self.result


@dataclass(slots=True)
class _InFlight(Generic[T]):
    task: asyncio.Task[T]
    waiters: int = 0


class SingleFlight(Generic[T]):
    """Single flight for coroutines on the event loop: requests for the same key while its
    work is in progress await that work instead of starting it again. The work runs in a
    task of its own, so that a waiter that leaves does not cancel it for the others; when
    the last waiter leaves, it is cancelled."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, _InFlight[T]] = {}

    async def run(self, key: Hashable, work: Callable[[], Awaitable[T]]) -> T:
        """The result of ``work()``, or of the same key's work already in progress."""
        flight = self._flights.get(key)
        if flight is None:
            flight = _InFlight(asyncio.ensure_future(work()))
            self._flights[key] = flight
            flight.task.add_done_callback(functools.partial(self._landed, key, flight))
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.task.cancel()

    def _landed(self, key: Hashable, flight: _InFlight[T], task: asyncio.Task[T]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not task.cancelled():
            task.exception()  # retrieved: its waiters have it, or had all left

    def __len__(self) -> int:
        return len(self._flights)
